"""What a consumer fetched: lazily decoded fetch responses, and records as messages or Arrow.

The decoding side of :mod:`.consumer`, kept apart so that the consumer's
module is about positions, fetching and groups.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from itertools import repeat
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..format import ARROW_SCHEMA, decode_arrow, to_arrow, walk
from ..format._speedups import crecords

log = logging.getLogger(__name__)

_NO_HEADERS: tuple = ()


class Message(NamedTuple):
    """One consumed record. ``timestamp`` is ms since the epoch; ``headers`` a tuple of (key, value)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple


class _Fetched:
    """Record bytes of one fetch response for one partition, decoded lazily."""

    __slots__ = (
        "fetch_offset",
        "data",
        "size",
        "table",
        "offsets",
        "error",
        "row",
        "epoch",
        "check_crc",
        "next_offset",
    )

    def __init__(
        self, fetch_offset: int, data: memoryview, epoch: int, check_crc: bool = True, next_offset: int = -1
    ) -> None:
        self.check_crc = check_crc
        #: offset after the last batch: the position once consumed (compaction may leave a gap before it)
        self.next_offset = next_offset
        self.fetch_offset = fetch_offset
        self.data = data
        self.size = len(data)
        self.table: pa.Table | None = None
        #: the table's offset column as numpy (read once: poll() takes a table in several parts)
        self.offsets: np.ndarray | None = None
        self.error: Exception | None = None
        self.row = 0
        self.epoch = epoch

    def decode(self) -> None:
        """Decode the batches, once; a decoding error is kept and raised by ``arrow``."""
        if self.table is None and self.error is None:
            try:
                self.table = records_to_arrow(self.data, self.check_crc)
            except Exception as e:  # noqa: BLE001 - raised by arrow(), where the consumer handles it
                self.error = e
            else:
                self.data = None  # type: ignore[assignment]

    def arrow(self, position: int) -> pa.Table:
        """Rows from ``position`` on (decodes the batches on first use)."""
        self.decode()
        if self.error is not None:
            raise self.error
        t = self.table
        if t.num_rows == 0:
            return t
        lo = self._first_row(position)
        return t if lo == 0 else t.slice(lo)

    def take(self, position: int, limit: int) -> tuple[pa.Table, int, bool]:
        """Up to ``limit`` rows from ``position`` on (decoded on first use): (them, the position after
        them, whether no row is left after them). The position comes from the offsets read once, not
        from an Arrow scalar per call."""
        self.decode()
        if self.error is not None:
            raise self.error
        t = self.table
        n = t.num_rows
        if n == 0:
            return t, position, True
        lo = self._first_row(position)
        hi = min(n, lo + limit)
        if hi <= lo:
            return t.slice(n), position, True
        part = t if lo == 0 and hi == n else t.slice(lo, hi - lo)
        return part, int(self.offsets[hi - 1]) + 1, hi == n  # type: ignore[index]

    def _first_row(self, position: int) -> int:
        """The first row at or after ``position`` (the table has rows)."""
        offs = self.offsets
        if offs is None:
            # offsets are sorted: skip the rows before ``position`` (format.batch.trim does the same
            # through ChunkedArray.to_numpy, whose first call imports pandas: ~0.4 s on the first poll)
            offs = self.offsets = int64_values(self.table.column(_OFFSET))  # type: ignore[union-attr]
        if position <= offs[0]:
            return 0  # the usual case: nothing before the position
        return int(np.searchsorted(offs, position, side="left"))


_OFFSET = ARROW_SCHEMA.get_field_index("offset")
_warm = threading.Lock()
_warmed = False


def _warm_up_decoder() -> None:
    """Decode a tiny run of batches once per process, in the fetcher thread at start.

    The first call of the vectorised run decoder loads pyarrow.compute and pandas
    (0.3-0.7 s measured); done lazily, that stalled the first poll that met a run of
    16+ batches (end-to-end latency: the first ~200 ms of a stream waited 100-300 ms).
    """
    global _warmed
    with _warm:
        if _warmed:
            return
        _warmed = True
    try:
        from ..format import encode, set_base_offset

        a, b = encode([b"x"]), encode([b"y"])
        set_base_offset(b, 1)
        to_arrow(a + b, fast=True)
    except Exception:  # a warm-up must never break a consumer
        log.debug("decoder warm-up failed", exc_info=True)


def int64_values(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The values of an int64 (or timestamp) column as numpy, zero-copy for one chunk.

    Reads the data buffers directly: pyarrow's ``to_numpy`` imports pandas on its
    first call, which stalled a consumer's first poll by ~0.4 s.
    """
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    parts = []
    for c in chunks:
        if c.null_count or c.type.bit_width != 64:
            parts.append(c.to_numpy(zero_copy_only=False).astype(np.int64))
        else:
            parts.append(np.frombuffer(c.buffers()[1], dtype=np.int64, count=len(c), offset=c.offset * 8))
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


#: Runs of at least this many batches are decoded together by ``format.batch.to_arrow``; its
#: vectorised path has a fixed cost of about 150 us (measured, CPU time, CRC included: batches of
#: 50 records, 4 of them 145 us one by one vs 169 us together, 8: 368 vs 205, 16: 625 vs 340;
#: one-record batches, 8: 275 vs 184).
RUN_DECODE_MIN_BATCHES = 8


def records_to_arrow(data: bytes | bytearray | memoryview, check_crc: bool = True) -> pa.Table:
    """Decode every whole batch of a fetch response into one Arrow table."""
    # one walk, with the CRCs: it was two (one here, one in to_arrow or per batch in decode_arrow)
    walked = walk(data, check_crc=check_crc)
    if len(walked) >= RUN_DECODE_MIN_BATCHES or not all(h.is_arrow_body for _, h in walked):
        # Kafka-layout batches (and control batches among them) are the run decoder's job
        return to_arrow(data, check_crc=check_crc, walked=walked)
    batches = [decode_arrow(data, pos, check_crc=False).to_arrow() for pos, _ in walked]
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


#: ``_new_tuple(Message, row)`` makes a Message from a row tuple in C: Message(...) runs the
#: NamedTuple's Python ``__new__`` (measured per 1000 messages: 256 us against 122 us).
_new_tuple = tuple.__new__


def messages_from_arrow(topic: str, partition: int, t: pa.Table) -> list[Message]:
    """Turn an ``ARROW_SCHEMA`` table into Messages with C-level per-row work only."""
    n = t.num_rows
    if n == 0:
        return []
    if crecords is not None:  # the compiled rows (None: headers, or columns it does not take)
        out = crecords.rows(t, Message, topic, partition, _NO_HEADERS)
        if out is not None:
            return out
    offs = int64_values(t.column("offset"))
    first, last = int(offs[0]), int(offs[-1])
    # consecutive offsets (all but compacted batches): a range makes the ints as the rows are built
    offsets: Iterable = range(first, last + 1) if last - first == n - 1 else offs.tolist()
    ts = int64_values(t.column("timestamp")).tolist()
    kcol = t.column("key")
    keys: Iterable = repeat(None, n) if kcol.null_count == n else kcol.to_pylist()
    values = t.column("value").to_pylist()
    hcol = t.column("headers")
    if hcol.null_count == n:
        headers: Iterable = repeat(_NO_HEADERS, n)
    else:
        headers = [tuple((d["key"], d["value"]) for d in h) if h else _NO_HEADERS for h in hcol.to_pylist()]
    rows = zip(repeat(topic, n), repeat(partition, n), offsets, ts, keys, values, headers, strict=True)
    return list(map(_new_tuple, repeat(Message, n), rows))
