"""The append end of a partition log: its log end offset, whether it is closed, a plain produce's whole
per-call work in one call (:meth:`LogEndPy.append`), and the runs of several produces appended together
(:meth:`LogEndPy.append_runs`).

The log end offset and the closed flag are this object's (one owner): :class:`~.log.PartitionLog` reads
them here and changes them through :meth:`LogEndPy.set_leo` and :meth:`LogEndPy.set_closed`. What
``append`` needs from the log's other parts it is told by their owners when it changes, so that it reads
no Python attribute of theirs per call: the active segment by the segment list
(:meth:`~.segment_list.SegmentList.tell_active`), the latest leader epoch by the epoch cache
(:meth:`~.epochs.LeaderEpochCache.tell_latest`), the flush thresholds by the flush rule
(:meth:`~.flush.FlushState.tell_due`), the config and the format's write step by the log.

``append`` takes a run of plain batches (our Arrow body, or Kafka's layout uncompressed; not
idempotent, not transactional), with the log's own append time off. Under the partition lock one batch
that needs no roll is checked, stamped, written and recorded by the segment's append end
(:meth:`~.segment_tail.SegmentTailPy.append_plain`); a run of several (or one that needs a roll) is
checked and stamped by one format call (``AppendValidator.check_and_stamp``), the segment rolled through
the log's roll if Kafka's rule says so, and written by the segment. The log end offset moves after the
bytes are written and recorded (readers may then fetch them), a newer leader epoch goes to the epoch
cache, and outside the lock the log is flushed when the flush rule says so. Anything else returns None
with nothing written; :meth:`LogEndPy.append_or_general`, bound as each log's own ``append``, then goes
on to the log's general path.

This class is the reference; ``_cseg.LogEnd`` is its compiled twin (same interface, same results;
``tests/test_log_end.py``), used when built: :data:`LogEnd` is the one to use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from weakref import WeakMethod

from ...errors import StorageError
from .append import AppendInfo, AppendValidator, check_stamp_runs, new_info
from .config import LogConfig
from .producer_state import ProducerStateManager
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
        "_roll",
        "_general",
        "_producer_state",
        "_name",
        "_segment",
        "_tail",
        "_validator",
        "_write",
        "_log_append_time",
        "_segment_bytes",
        "_due_offset",
        "_due_ms",
    )

    def __init__(
        self,
        leo: int,
        lock: threading.RLock,
        assign_epoch: Callable[[int, int], None],
        flush: Callable[[], object],
        roll: Callable[[int], object],
        producer_state: ProducerStateManager,
        name: str,
    ) -> None:
        """``leo``: the log end offset; ``lock``: the partition lock; ``assign_epoch``: the epoch
        cache's ``assign``; ``flush`` and ``roll``: the log's ``flush()`` and ``roll(now)`` under its lock
        (all three bound methods, held weakly: no cycle);
        ``producer_state``: the log's (for :meth:`append_runs`); ``name``: the log's (for errors)."""
        #: the offset the next appended record gets (readers may fetch below it)
        self.leo = leo
        #: the epoch cache's newest epoch (-1: none), as it last told
        self.latest_epoch = -1
        #: the log is closed (or retired, or deleted): nothing is appended any more
        self.closed = False
        self._lock = lock
        self._assign_epoch = WeakMethod(assign_epoch)  # the epoch cache tells this end its latest: no cycle
        self._flush = WeakMethod(flush)
        self._roll = WeakMethod(roll)
        self._general: WeakMethod | None = None
        self._producer_state = producer_state
        self._name = name
        self._segment = None
        self._tail = None
        self._validator = None
        self._write = None
        self._log_append_time = True  # nothing is taken before set_config
        self._segment_bytes = 0
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

    def set_general(self, general: Callable[..., AppendInfo]) -> None:
        """The log's general append path, ``general(records, leader_epoch, control)`` (a bound method, held
        weakly), which :meth:`append_or_general` goes on to."""
        self._general = WeakMethod(general)

    def append_or_general(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int | None = None,
        *,
        control: bool = False,
    ) -> AppendInfo:
        """``PartitionLog.append``: :meth:`append`, or the log's general path for what it does not take
        (bound as the log's own ``append``: no Python frame of the log's before the one call)."""
        info = self.append(records, leader_epoch)
        if info is not None:
            return info
        general = None if self._general is None else self._general()
        if general is None:
            raise StorageError(f"log {self._name} is gone")
        return general(records, leader_epoch, control)

    def set_config(self, config: LogConfig, validator: AppendValidator) -> None:
        """The log's config and its append checks (``write_plain``: the format's one-call step)."""
        self._log_append_time = config.log_append_time
        self._segment_bytes = config.segment_bytes
        self._validator = validator
        self._write = validator.write_plain

    def append(
        self, records: bytes | bytearray | memoryview, leader_epoch: int | None = None
    ) -> AppendInfo | None:
        """Append a run of plain batches that needs no roll (see the module): its AppendInfo; None,
        nothing written, for anything else. StorageError (the file cut back, nothing recorded) when the
        write fails."""
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
                offset = self._append_run(records, base, leader_epoch, now)
                if offset is None:
                    return None
            self.leo = offset  # publish: readers may now fetch up to here
            if leader_epoch > latest:
                assign = self._assign_epoch()
                if assign is not None:  # None: the log is being dropped
                    assign(leader_epoch, base)
            due = offset >= self._due_offset or now >= self._due_ms
        if due:
            flush = self._flush()
            if flush is not None:
                flush()  # outside the partition lock: flush takes the flush lock first
        return new_info(AppendInfo, (base, offset - 1, -1, offset - base, False))

    def _append_run(self, records, base: int, leader_epoch, now: int) -> int | None:
        # a run of several plain batches, or one the one-call step left (it must roll first): one format
        # call checks and stamps it; the segment is rolled if Kafka's rule says so (LogSegment.should_roll)
        got = self._validator.check_and_stamp(records, base, leader_epoch)
        if got is None:
            return None
        arrow, stamped = got
        offset = stamped[-1][1] + stamped[-1][4]
        tail = self._tail
        size = tail.size
        if size and (
            size + len(records) > tail.roll_size or now >= tail.roll_ms or offset - 1 > tail.roll_offset
        ):
            roll = self._roll()
            if roll is None:
                return None
            roll(now)  # the segment list tells this end the new active segment
        segment = self._segment
        try:
            segment.append(records, stamped, arrow=arrow)
        except OSError as e:
            raise StorageError(f"append to {segment.log_path} failed: {e}") from e
        return offset

    def append_runs(self, runs: list, out: list) -> bool:
        """Append the runs of several produces of the partition together (``PartitionLog.append_runs``),
        each answered in ``out`` (its AppendInfo or its error); False, nothing written, if one is
        transactional or they would roll the segment: the log appends them one by one."""
        now = now_ms_py()
        with self._lock:
            if self.closed:
                raise StorageError(f"log {self._name} is closed")
            latest = self.latest_epoch
            epoch = latest if latest > 0 else 0
            lat = self._log_append_time
            # checked and stamped in place (the plain runs by one compiled call each); nothing is
            # published before the write, and a retry one by one stamps the runs again
            done = check_stamp_runs(
                self._validator, self._producer_state, runs, self.leo, epoch, now, lat, out
            )
            if done is None:
                return False  # a transactional run: one by one
            parts, stamped, appended, offset, producers, arrow = done
            if not parts:
                return True
            segment = self._segment
            size = sum(map(len, parts))
            # one by one, a run rolls the segment if it finds it too full: with all of them in, or (an
            # empty segment takes its first run whatever its size) by their bytes and offsets alone
            if (
                segment.should_roll(size, offset - 1, now)
                if segment.size
                else size > self._segment_bytes or offset - 1 - segment.base_offset > 0xFFFFFFFF
            ):
                return False  # rare (once a segment): the one-by-one path rolls where it must
            try:
                segment.append(parts, stamped, arrow=arrow)
            except OSError as e:
                raise StorageError(f"append to {segment.log_path} failed: {e}") from e
            if producers is not None:
                producers.commit()
            self.leo = offset  # publish: readers may now fetch up to here
            if epoch > latest:
                assign = self._assign_epoch()
                if assign is not None:  # None: the log is being dropped
                    assign(epoch, appended[0][1])
            ts = now if lat else -1
            for i, base, nxt in appended:
                out[i] = new_info(AppendInfo, (base, nxt - 1, ts, nxt - base, False))
            due = offset >= self._due_offset or now >= self._due_ms
        if due:
            flush = self._flush()
            if flush is not None:
                flush()  # outside the partition lock, as append does
        return True


#: the one the partition logs use: compiled when built
LogEnd = LogEndPy if _cseg is None else _cseg.LogEnd
