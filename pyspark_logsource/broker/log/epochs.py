"""The leader-epoch cache of one partition: at which offset each leader epoch began (KIP-101).

Every batch carries the epoch of the leader that appended it; the cache keeps
the first offset of each epoch, ascending in both, and mirrors it in the
partition's ``leader-epoch-checkpoint`` file (Kafka's checkpoint format,
entries ``epoch start_offset``). A follower returning after a failure asks
the leader for the end offset of its latest epoch (:meth:`end_offset_for`,
Kafka's ``LeaderEpochFileCache.endOffsetFor``) and truncates there, never to
its own high watermark, which may lag what was committed.

The file is a function of the log: when it is missing or malformed it is
rebuilt from the batch headers (:meth:`rebuild`), and every truncation of the
log truncates it (:meth:`truncate_from_end`).
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from pathlib import Path

from .checkpoint import CorruptCheckpoint, read_checkpoint, write_checkpoint

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """``(epoch, start_offset)`` entries of one partition and their checkpoint file; thread-safe."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LEADER_EPOCH_CHECKPOINT_FILE
        self._lock = threading.Lock()
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self._told: Callable[[int], None] | None = None

    def tell_latest(self, told: Callable[[int], None]) -> None:
        """Call ``told(latest epoch)`` now and after every change of the entries (the log's append end
        stamps with it; -1 when none)."""
        self._told = told
        told(self.latest_epoch)

    def _changed(self) -> None:
        if self._told is not None:
            self._told(self.latest_epoch)

    # ------------------------------------------------------------ loading

    def load(self) -> bool:
        """Read the checkpoint file; False if it is missing or malformed (the caller rebuilds)."""
        try:
            entries = read_checkpoint(self.path, 2)
            if entries is None:
                return False
            pairs = [(int(e), int(s)) for e, s in entries]
        except (CorruptCheckpoint, ValueError) as e:
            log.warning("%s is unreadable (%s); rebuilding it from the log", self.path, e)
            return False
        if any(b[0] <= a[0] or b[1] < a[1] for a, b in zip(pairs, pairs[1:], strict=False)) or any(
            e < 0 or s < 0 for e, s in pairs
        ):
            log.warning("%s holds epochs out of order (%s); rebuilding it from the log", self.path, pairs)
            return False
        with self._lock:
            self._epochs = [e for e, _ in pairs]
            self._starts = [s for _, s in pairs]
            self._changed()
        return True

    def rebuild(self, batches: Iterable[tuple[int, int]]) -> None:
        """Recompute the entries from ``(leader_epoch, base_offset)`` of every batch, in log order, and save."""
        epochs: list[int] = []
        starts: list[int] = []
        for epoch, base in batches:
            if epoch >= 0 and (not epochs or epoch > epochs[-1]):
                epochs.append(epoch)
                starts.append(base)
        with self._lock:
            self._epochs, self._starts = epochs, starts
            self._changed()
            self._save()

    def _save(self) -> None:
        write_checkpoint(self.path, list(zip(self._epochs, self._starts, strict=True)))

    # ------------------------------------------------------------ queries

    @property
    def latest_epoch(self) -> int:
        """The newest epoch (-1 when none)."""
        epochs = self._epochs
        return epochs[-1] if epochs else UNDEFINED_EPOCH

    def entries(self) -> list[tuple[int, int]]:
        """``(epoch, start_offset)`` pairs, oldest first."""
        with self._lock:
            return list(zip(self._epochs, self._starts, strict=True))

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)``: the largest epoch <= ``requested_epoch`` and the offset after its last record.

        Kafka's rules: the latest epoch ends at the log end; an older one ends
        where the next larger epoch starts; an epoch below every known one
        answers itself and the first start offset; an unknown newer epoch (or
        -1) answers ``(-1, -1)``.
        """
        with self._lock:
            epochs, starts = self._epochs, self._starts
            if requested_epoch == UNDEFINED_EPOCH or not epochs:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch == epochs[-1]:
                return requested_epoch, log_end_offset
            higher = bisect_right(epochs, requested_epoch)
            if higher == len(epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if higher == 0:
                return requested_epoch, starts[0]
            return epochs[higher - 1], starts[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the leader that appended ``offset`` (-1 when unknown)."""
        with self._lock:
            i = bisect_right(self._starts, offset)
            return self._epochs[i - 1] if i else UNDEFINED_EPOCH

    # ------------------------------------------------------------ changes

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op unless it is newer than the latest).

        Entries that conflict with it (a larger or equal epoch, or a start at or
        after ``start_offset``) are removed first, as Kafka does.
        """
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return
        with self._lock:
            epochs, starts = self._epochs, self._starts
            if epochs and epoch <= epochs[-1]:
                return
            keep = bisect_left(starts, start_offset)
            self._epochs = [*epochs[:keep], epoch]
            self._starts = [*starts[:keep], start_offset]
            self._changed()
            self._save()

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the epochs that start at or after ``end_offset`` (the log was truncated there)."""
        with self._lock:
            keep = bisect_left(self._starts, end_offset)
            if keep < len(self._starts):
                self._epochs, self._starts = self._epochs[:keep], self._starts[:keep]
                self._changed()
                self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly below ``start_offset`` (retention); the one holding it now starts there."""
        with self._lock:
            i = bisect_right(self._starts, start_offset)
            if i <= 1 and (not self._starts or self._starts[0] >= start_offset):
                return
            self._epochs = self._epochs[i - 1 :]
            self._starts = [start_offset, *self._starts[i:]]
            self._changed()
            self._save()

    def clear(self) -> None:
        """Remove every entry (the log restarts empty at another offset)."""
        with self._lock:
            self._epochs, self._starts = [], []
            self._changed()
            self._save()
