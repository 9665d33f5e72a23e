"""Producer id allocation, unique across broker restarts (also after ``kill -9``).

Ids are handed out from blocks, as Kafka's controller does: before the first
id of a block is used, the end of the block is written to ``producer-id-block``
(write to a temporary file, fsync, rename, fsync the directory). After any
crash the broker starts from the reserved end, so an id is never reused; at
most one block of ids is skipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import InvalidProducerEpoch, StorageError, UnknownProducerId

log = logging.getLogger(__name__)

BLOCK_FILE = "producer-id-block"
BLOCK_SIZE = 1000
_EPOCH_MAX = 0x7FFF


class ProducerIdManager:
    """Allocates producer ids and bumps epochs (single-threaded use)."""

    def __init__(self, directory: Path, block_size: int = BLOCK_SIZE) -> None:
        self.path = Path(directory) / BLOCK_FILE
        self.block_size = block_size
        #: in a cluster, blocks come from ZooKeeper (``/latest_producer_id_block``), unique across brokers:
        #: ``block_source(size) -> (start, end)``
        self.block_source: Callable[[int], tuple[int, int]] | None = None
        self._next = 0
        self._end = 0
        try:
            text = self.path.read_text().strip() if self.path.exists() else "0"
            self._next = self._end = int(text or "0")
        except (OSError, ValueError) as e:
            raise StorageError(f"cannot read {self.path}: {e}") from e
        if self._next < 0:
            raise StorageError(f"{self.path} holds a negative producer id")
        self._epochs: dict[int, int] = {}

    def use_block_source(self, source: Callable[[int], tuple[int, int]]) -> None:
        """Take ids from ``source(size) -> (start, end)`` from now on (a cluster's ``/latest_producer_id_block``);
        what is left of the local block is dropped, as those ids are not reserved cluster-wide."""
        self.block_source = source
        self._end = self._next

    def _reserve(self) -> None:
        if self.block_source is not None:
            self._next, self._end = self.block_source(self.block_size)
            log.info("reserved producer ids [%d, %d) from the cluster", self._next, self._end)
            return
        end = self._end + self.block_size
        tmp = self.path.with_name(BLOCK_FILE + ".tmp")
        try:
            with open(tmp, "w") as f:
                f.write(f"{end}\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise StorageError(f"cannot reserve producer ids in {self.path}: {e}") from e
        self._next, self._end = self._end, end
        log.info("reserved producer ids [%d, %d)", self._next, self._end)

    def init_producer_id(self, producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:
        """A fresh (id, 0), or (id, epoch + 1) when an existing id and epoch are given."""
        if producer_id < 0:
            if self._next >= self._end:
                self._reserve()
            pid = self._next
            self._next += 1
            self._epochs[pid] = 0
            return pid, 0
        if (
            producer_id >= self._end and self.block_source is None
        ):  # in a cluster another broker may have made it
            raise UnknownProducerId(f"producer id {producer_id} was never allocated by this broker")
        known = self._epochs.get(producer_id)
        if known is not None and producer_epoch != known:
            raise InvalidProducerEpoch(f"producer {producer_id} has epoch {known}, not {producer_epoch}")
        epoch = max(known if known is not None else producer_epoch, producer_epoch) + 1
        if epoch > _EPOCH_MAX:
            # epoch exhausted: like Kafka, move the producer to a new id
            return self.init_producer_id()
        self._epochs[producer_id] = epoch
        return producer_id, epoch
