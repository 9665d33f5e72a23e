"""Key -> partition mapping shared by the producer, the Arrow send path and the CLI.

The hash is CRC-32C of the key bytes masked to 31 bits, modulo the number of
partitions: it depends on nothing but the key, so the same key lands in the
same partition in every process and every run (Python's ``hash()`` is salted
per process and would not).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from ..errors import InvalidRequest
from ..format.crc import crc32c

#: A user partitioner: ``fn(topic, key, num_partitions) -> partition``.
Partitioner = Callable[[str, "bytes | None", int], int]


def hash_partition(key: bytes, num_partitions: int) -> int:
    """The stable partition of ``key``: ``(crc32c(key) & 0x7fffffff) % num_partitions``."""
    return (crc32c(key) & 0x7FFFFFFF) % num_partitions


def hash_partitions(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Vector form of :func:`hash_partition` for an Arrow binary/string column.

    The per-row work is a C-level ``map(crc32c, ...)``; null keys get -1 so
    the caller can route them (sticky partition).
    """
    if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
        keys = keys.cast(pa.binary())
    if keys.null_count:
        valid = keys.is_valid().to_numpy(zero_copy_only=False)
        filled = keys.fill_null(b"")
    else:
        valid = None
        filled = keys
    try:
        crcs = np.fromiter(map(crc32c, filled.to_pylist()), dtype=np.int64, count=len(filled))
    except TypeError:
        raise InvalidRequest(f"keys must be a binary or string column, got {keys.type}") from None
    parts = (crcs & 0x7FFFFFFF) % num_partitions
    if valid is not None:
        parts[~valid] = -1
    return parts


class StickyPartitioner:
    """Chooses the partition for records without a key.

    As in Kafka 2.4+: stay on one partition until its batch is complete, then
    move on, so that keyless records fill whole batches instead of spreading
    one record per partition per linger window. The first partition is
    random; the next is the following one in turn (Kafka picks at random,
    weighted by queue sizes), so every partition gets an even share of the
    batches whatever their number.

    The reference of the compiled ``client._caccum.StickyPartitioner`` (the
    producer's on the compiled path, which ``send()`` calls in C): for the
    same ``rng`` and calls, both give the same partitions.
    """

    __slots__ = ("_current", "_rng")

    def __init__(self, rng: random.Random | None = None) -> None:
        self._current: dict[str, int] = {}
        self._rng = random.Random() if rng is None else rng

    def partition(self, topic: str, num_partitions: int) -> int:
        """The current sticky partition of ``topic``."""
        p = self._current.get(topic)
        if p is None or p >= num_partitions:
            p = self._rng.randrange(num_partitions)
            self._current[topic] = p
        return p

    def on_new_batch(self, topic: str, prev_partition: int, num_partitions: int) -> int:
        """Called when the sticky partition's batch completed: move to the next partition."""
        if self._current.get(topic) != prev_partition:
            return self._current.get(topic, prev_partition)
        p = (prev_partition + 1) % num_partitions if num_partitions > 1 else 0
        self._current[topic] = p
        return p

    def spread(self, topic: str, sizes: np.ndarray, num_partitions: int, batch_size: int) -> np.ndarray:
        """Partitions of keyless records of these byte ``sizes``, sent in this order.

        What ``send()`` does record by record, for a whole column: the sticky
        partition takes records until they fill ``batch_size`` bytes, then the
        next partition takes over (a partly filled last batch keeps its
        partition for the next call).
        """
        parts, after = sticky_spread(self.partition(topic, num_partitions), sizes, num_partitions, batch_size)
        if after is not None:
            self._current[topic] = after
        return parts


def sticky_spread(
    start: int, sizes: np.ndarray, num_partitions: int, batch_size: int
) -> tuple[np.ndarray, int | None]:
    """:meth:`StickyPartitioner.spread` from the sticky partition ``start``: the records' partitions and
    the sticky partition after them (None: unchanged). Shared by the reference and the compiled class."""
    if num_partitions <= 1 or not len(sizes):
        return np.full(len(sizes), start, dtype=np.int64), None
    before = np.cumsum(sizes) - sizes  # bytes sent before each record
    unit = max(int(batch_size), 1)
    parts = (start + before // unit) % num_partitions
    return parts.astype(np.int64), int((start + int(before[-1] + sizes[-1]) // unit) % num_partitions)
