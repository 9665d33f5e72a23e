"""The append end of a partition log: its log end offset, whether it is closed, and a plain produce's
whole per-call work in one call (:meth:`LogEndPy.append`).

The log end offset and the closed flag are this object's (one owner): :class:`~.log.PartitionLog` reads
them here and changes them through :meth:`LogEndPy.set_leo` and :meth:`LogEndPy.set_closed`. What
``append`` needs from the log's other parts it is told by their owners when it changes, so that it reads
no Python attribute of theirs per call: the active segment by the segment list
(:meth:`~.segment_list.SegmentList.tell_active`), the latest leader epoch by the epoch cache
(:meth:`~.epochs.LeaderEpochCache.tell_latest`), the flush thresholds by the flush rule
(:meth:`~.flush.FlushState.tell_due`), the config and the format's write step by the log.

``append`` takes a run of exactly one plain batch (our Arrow body, or Kafka's layout uncompressed; not
idempotent, not transactional) that the active segment takes without a roll, with the log's own append
time off: under the partition lock it is checked, stamped, written and recorded by the segment's append
end (:meth:`~.segment_tail.SegmentTailPy.append_plain`), the log end offset moves (after the bytes are
written and recorded: readers may then fetch them), a newer leader epoch goes to the epoch cache, and
outside the lock the log is flushed when the flush rule says so. Anything else returns None with nothing
done, and the log takes its general path.

This class is the reference; ``_cseg.LogEnd`` is its compiled twin (same interface, same results;
``tests/test_log_end.py``), used when built: :data:`LogEnd` is the one to use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from weakref import WeakMethod

from ...errors import StorageError
from .append import AppendInfo, new_info
from .config import LogConfig
from .segment_tail import _cseg, now_ms_py


class LogEndPy:
    """The append end of one partition log (see the module)."""

    __slots__ = (
        "leo",
        "latest_epoch",
        "closed",
        "_lock",
        "_assign_epoch",
        "_flush",
        "_segment",
        "_tail",
        "_write",
        "_log_append_time",
        "_due_offset",
        "_due_ms",
    )

    def __init__(
        self,
        leo: int,
        lock: threading.RLock,
        assign_epoch: Callable[[int, int], None],
        flush: Callable[[], object],
    ) -> None:
        """``leo``: the log end offset; ``lock``: the partition lock; ``assign_epoch``: the epoch
        cache's ``assign``; ``flush``: the log's ``flush`` (a bound method, held weakly: no cycle)."""
        #: the offset the next appended record gets (readers may fetch below it)
        self.leo = leo
        #: the epoch cache's newest epoch (-1: none), as it last told
        self.latest_epoch = -1
        #: the log is closed (or retired, or deleted): nothing is appended any more
        self.closed = False
        self._lock = lock
        self._assign_epoch = assign_epoch
        self._flush = WeakMethod(flush)
        self._segment = None
        self._tail = None
        self._write = None
        self._log_append_time = True  # nothing is taken before set_config
        self._due_offset: int = -(1 << 63)
        self._due_ms: int = -(1 << 63)

    def set_leo(self, offset: int) -> None:
        """The log's general paths moved the log end (an append, a truncation, a restart)."""
        self.leo = offset

    def set_closed(self) -> None:
        """The log is closed, retired or deleted."""
        self.closed = True

    def set_segment(self, segment) -> None:
        """The segment appends go to now (told by the segment list)."""
        self._tail = segment.tail
        self._segment = segment

    def set_latest_epoch(self, epoch: int) -> None:
        """The epoch cache's newest epoch (-1: none)."""
        self.latest_epoch = epoch

    def set_flush_due(self, due_offset: int, due_ms: int) -> None:
        """The flush rule's thresholds (see :mod:`.flush`): a flush is due once the log end reaches
        ``due_offset`` or the clock ``due_ms``."""
        self._due_offset = due_offset
        self._due_ms = due_ms

    def set_config(self, config: LogConfig, write: Callable) -> None:
        """The log's config and the format's write step for it (``AppendValidator.write_plain``)."""
        self._log_append_time = config.log_append_time
        self._write = write

    def append(
        self, records: bytes | bytearray | memoryview, leader_epoch: int | None = None
    ) -> AppendInfo | None:
        """Append a run of one plain batch that needs no roll (see the module): its AppendInfo; None,
        nothing done, for anything else. StorageError (the file cut back, nothing recorded) when the write
        fails."""
        if self._log_append_time or self.closed or self._tail is None:
            return None
        now = now_ms_py()
        with self._lock:
            latest = self.latest_epoch
            if leader_epoch is None:
                leader_epoch = latest if latest > 0 else 0
            base = self.leo
            if self.closed:
                return None
            try:
                offset = self._tail.append_plain(self._write, records, base, leader_epoch, now)
            except OSError as e:
                raise StorageError(f"append to {self._segment.log_path} failed: {e}") from e
            if offset is None:
                return None
            self.leo = offset  # publish: readers may now fetch up to here
            if leader_epoch > latest:
                self._assign_epoch(leader_epoch, base)
            due = offset >= self._due_offset or now >= self._due_ms
        if due:
            flush = self._flush()
            if flush is not None:
                flush()  # outside the partition lock: flush takes the flush lock first
        return new_info(AppendInfo, (base, offset - 1, -1, offset - base, False))


#: the one the partition logs use: compiled when built
LogEnd = LogEndPy if _cseg is None else _cseg.LogEnd
