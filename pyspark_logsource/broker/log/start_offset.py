"""The log start offset checkpoint of a partition: ``log-start-offset-checkpoint`` in its directory.

Kafka keeps one ``log-start-offset-checkpoint`` per log dir (entries ``topic partition offset``),
written every ``log.flush.start.offset.checkpoint.interval.ms``, and loses a DeleteRecords that
happened since the last write if the broker dies. Ours is one file per partition, in Kafka's
checkpoint format with one entry (the offset), written (fsynced, renamed) before a DeleteRecords is
answered: the move survives a ``kill -9`` as soon as a client has seen it. The owner is the
partition log (:mod:`.log`), which keeps the offset at or above its first segment's base and at or
below its log end.
"""

from __future__ import annotations

import logging
from pathlib import Path

from .checkpoint import CorruptCheckpoint, read_checkpoint, write_checkpoint

log = logging.getLogger(__name__)

LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"


def read_log_start_offset(directory: Path) -> int | None:
    """The checkpointed log start offset of the partition in ``directory``; None if none (or unreadable:
    the first segment's base offset is then the log start, as before any DeleteRecords)."""
    path = Path(directory) / LOG_START_OFFSET_FILE
    try:
        entries = read_checkpoint(path, 1)
        if entries is None:
            return None
        if len(entries) != 1 or int(entries[0][0]) < 0:
            raise CorruptCheckpoint(f"{path}: expected one non-negative offset, got {entries}")
        return int(entries[0][0])
    except (CorruptCheckpoint, ValueError) as e:
        log.warning("%s is unreadable (%s): the log starts at its first segment", path, e)
        return None


def write_log_start_offset(directory: Path, offset: int) -> None:
    """Replace the partition's checkpoint with ``offset``, durably."""
    write_checkpoint(Path(directory) / LOG_START_OFFSET_FILE, [(offset,)])


class LogStartOffset:
    """A partition's log start offset as DeleteRecords (or, on a follower, its leader) set it, persisted in
    the checkpoint on every change; read at opening, at most the log end ``log_end``."""

    def __init__(self, directory: Path, log_end: int) -> None:
        self.directory = Path(directory)
        #: 0 until a DeleteRecords; the log's start is the larger of this and its first segment's base
        self.offset = min(read_log_start_offset(self.directory) or 0, log_end)

    def set(self, offset: int) -> None:
        """Make ``offset`` the log start offset, durably (the checkpoint first)."""
        if offset != self.offset:
            write_log_start_offset(self.directory, offset)
            self.offset = offset
