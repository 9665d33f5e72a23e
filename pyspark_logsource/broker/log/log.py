"""The partition log (Kafka's UnifiedLog): appends, reads, flushes and the high watermark of one partition.

It is built from parts that each own their state, and holds the partition lock:

* :mod:`.log_end` (:class:`~.log_end.LogEndPy`) owns the log end offset and the
  closed flag, and appends plain runs (most produce requests) in one call.
* :mod:`.loader` (:class:`~.loader.LogLoader`) owns recovery: opening the log
  returns a :class:`~.loader.LoadedLog` value it is built from.
* :mod:`.segment_list` (:class:`~.segment_list.SegmentList`) owns the
  segments: the copy-on-write view readers take without a lock, roll,
  retention, the cleaner's swap, truncation and delayed deletes.
* :mod:`.append` owns the checks before an append
  (:class:`~.append.AppendValidator`), the stamping and :class:`~.append.AppendInfo`.
* :mod:`.flush` (:class:`~.flush.FlushState`) owns the flush rule (flush.messages,
  flush.ms) and the recovery point, saved in ``recovery-point`` at each flush.
* the producer state, transactions and leader epoch cache are
  :mod:`.producer_state`, :mod:`.transactions` and :mod:`.epochs`.

The high watermark is stored here (offsets below it are on every in-sync
replica): the replica manager sets it; until it does (a single broker) it is
the log end. Appends come three ways: :meth:`PartitionLog.append` (one
produce request), :meth:`PartitionLog.append_runs` (the runs of several
produce requests of one partition checked one by one and written with one
``pwritev``, each answered alone) and :meth:`PartitionLog.append_as_follower`
(a follower copies the leader's batches byte for byte with the leader's
offsets, checking headers, CRCs and that offsets grow, and records them in its
producer state and epoch cache so that, as leader, it knows retries and epochs).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path

from ...errors import InvalidRequest, LogSourceError, OffsetOutOfRange, StorageError
from ...format import header as fmt
from ...format.header import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, TXN_BITS
from ...topics import validate_topic_name
from . import reads
from . import transactions as txn
from .append import (
    ARROW,
    IDEMPOTENT,
    MAX_COALESCED_RUNS,
    TRANSACTIONAL,
    AppendInfo,
    AppendValidator,
    new_info,
    stamp_run,
)
from .config import LogConfig
from .epochs import LeaderEpochCache
from .flush import FlushState, write_recovery_point
from .loader import CLEAN_SHUTDOWN_FILE, LogLoader, replay_producer_state
from .log_end import LogEnd
from .producer_state import ProducerAppend, ProducerEntry, ProducerStateManager
from .segment import FileRegion, LogSegment
from .segment_list import SegmentList
from .segment_tail import now_ms as clock_ms
from .start_offset import LogStartOffset

log = logging.getLogger(__name__)

__all__ = ["AppendInfo", "FileRegion", "PartitionLog", "LATEST_TIMESTAMP", "EARLIEST_TIMESTAMP"]


class PartitionLog:
    """The log of one topic partition in ``directory``; opening it recovers it."""

    def __init__(self, directory: Path, config: LogConfig, topic: str, partition: int) -> None:
        self.topic = validate_topic_name(topic)
        if not isinstance(partition, int) or partition < 0:
            raise InvalidRequest(f"partition must be a non-negative integer, got {partition!r}")
        self.partition = partition
        self.directory = Path(directory)
        self.config = config
        self._log_append_time = config.log_append_time  # read per append (the config is frozen)
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._validator = AppendValidator(self.name, self.topic, config)
        self.producer_state = ProducerStateManager(self.directory)
        self.txns = txn.PartitionTransactions(self.directory)
        self._last_bases: list[int] = []
        self.epochs = LeaderEpochCache(self.directory)
        #: the high watermark when replicated (set by the replica manager); None: it is the log end
        self._hw: int | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            loaded = LogLoader(
                self.directory, config, self.name, self.producer_state, self.txns, self.epochs
            ).load()
        except OSError as e:
            raise StorageError(f"cannot open log {self.name} in {self.directory}: {e}") from e
        self._segments = SegmentList(self.directory, config, loaded.segments)
        #: the append end: the log end offset, the closed flag and the plain produce's one call (it is
        #: told the active segment, the latest epoch and the flush thresholds by their owners)
        self._end = end = LogEnd(
            loaded.next_offset,
            self._lock,
            self.epochs.assign,
            self.flush,
            self._roll_locked,
            self.producer_state,
            self.name,
        )
        end.set_config(config, self._validator)
        end.set_general(self._append_general)
        #: the instance's ``append`` is the append end's (see :meth:`append`): a plain run in one call with
        #: no Python frame of the log's before it, anything else on to :meth:`_append_general`
        self.append = end.append_or_general
        self._segments.tell_active(end.set_segment)
        self.epochs.tell_latest(end.set_latest_epoch)
        self._flush = FlushState(config, loaded.recovery_point, loaded.loaded_ms)
        self._flush.tell_due(end.set_flush_due)
        self.recovery_info = loaded.info
        #: moved by DeleteRecords (a follower: by its leader's); see log_start_offset
        self._start = LogStartOffset(self.directory, end.leo)
        self._segments.delete_below(self._start.offset)  # a crash after the checkpoint, before the deletes

    def set_config(self, config: LogConfig) -> None:
        """Apply a dynamic config change (AlterConfigs) to the live log: the append checks
        (max.message.bytes, cleanup.policy), the roll bounds, retention and the flush rule use it from now
        on. Only the log manager calls this (it owns each log's config)."""
        with self._lock:
            self.config = config
            self._log_append_time = config.log_append_time
            self._validator = AppendValidator(self.name, self.topic, config)
            self._end.set_config(config, self._validator)
            self._segments.set_config(config)
            self._flush.set_config(config)

    @property
    def name(self) -> str:
        """``topic-partition``, as the directory is named."""
        return f"{self.topic}-{self.partition}"

    def __repr__(self) -> str:
        return f"PartitionLog({self.name}, start={self.log_start_offset}, end={self.log_end_offset})"

    # ------------------------------------------------------------ properties

    @property
    def log_start_offset(self) -> int:
        """First offset still in the log: the first segment's base, or above it after DeleteRecords."""
        base = self._segments.view.segments[0].base_offset
        start = self._start.offset
        return start if start > base else base

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record will get."""
        return self._end.leo

    @property
    def high_watermark(self) -> int:
        """Offsets below it are on every in-sync replica (committed); the log end when not replicated."""
        hw, leo = self._hw, self._end.leo
        return leo if hw is None or hw > leo else hw

    def set_high_watermark(self, offset: int | None) -> None:
        """Set the high watermark (the replica manager's); None makes it follow the log end again."""
        self._hw = None if offset is None else max(offset, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """read_committed readers read below it: the oldest open transaction's first offset, else the
        high watermark (see :mod:`.transactions`)."""
        return self.txns.last_stable_offset(self.high_watermark)

    def active_producers(self) -> list[tuple[ProducerEntry, int]]:
        """Copies of the producers' entries, each with its open transaction's first offset (-1: none);
        what DescribeProducers reports."""
        with self._lock:
            first = {t.producer_id: t.first_offset for t in self.txns.open.values()}
            return [(e.copy(), first.get(e.producer_id, -1)) for e in self.producer_state.producers.values()]

    @property
    def recovery_point(self) -> int:
        """Every offset below this one is fsynced."""
        return self._flush.recovery_point

    flushed_offset = recovery_point

    @property
    def unflushed_messages(self) -> int:
        """Records appended since the last flush."""
        return self._end.leo - self._flush.recovery_point

    @property
    def last_flush_ms(self) -> int:
        """Wall-clock ms of the last flush (or of opening)."""
        return self._flush.last_flush_ms

    def time_flush_due(self, now_ms: int) -> bool:
        """Whether the flush thread owes this log a flush by ``flush.ms`` (the rule in :mod:`.flush`)."""
        return self._flush.time_due(self._end.leo, now_ms)

    @property
    def scheduled_flush(self) -> bool:
        """Set by a LogManager whose thread flushes by ``flush.ms``: appends then leave time-based
        flushes to it and never fsync in the caller's thread for time."""
        return self._flush.scheduled

    @scheduled_flush.setter
    def scheduled_flush(self, value: bool) -> None:
        with self._lock:
            self._flush.set_scheduled(value)

    @property
    def size_bytes(self) -> int:
        """Bytes of all segments."""
        return self._segments.size_bytes

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (a copy: read-only)."""
        return list(self._segments.view.segments)

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to."""
        return self._segments.active

    @property
    def closed(self) -> bool:
        return self._end.closed

    def _check_open(self) -> None:
        if self._end.closed:
            raise StorageError(f"log {self.name} is closed")

    # ------------------------------------------------------------ append

    def append(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int | None = None,
        *,
        control: bool = False,
    ) -> AppendInfo:
        """Validate, stamp and append a run of batches, all or nothing.

        A writable buffer (bytearray) is stamped in place; bytes are copied once. Control
        batches (transaction markers) only from the coordinator: ``control=True``.
        """
        # each log's own ``append`` (bound in __init__) is this with no frame of it: a run of plain batches
        # (most produce requests: one) is checked, stamped, written and recorded by one call of the append
        # end (see log_end.py); anything else takes the general path
        return self._end.append_or_general(records, leader_epoch, control=control)

    def _append_general(
        self, records: bytes | bytearray | memoryview, leader_epoch: int | None, control: bool
    ) -> AppendInfo:
        now = clock_ms()
        mv, batches, flags = self._validator.check(records, control)
        with self._lock:
            if self._end.closed:
                raise StorageError(f"log {self.name} is closed")
            latest = self.epochs.latest_epoch
            if (
                leader_epoch is None
            ):  # the epoch this replica leads in (its cache's newest; 0 on a single broker)
                leader_epoch = latest if latest > 0 else 0
            info = self._append_locked(mv, batches, leader_epoch, now, flags)
            if info[4]:  # a duplicate: nothing written
                return info
            if flags & TRANSACTIONAL:
                txn.apply_append(self.txns, self.producer_state, mv, batches, self._last_bases)
            if leader_epoch > latest:
                self.epochs.assign(leader_epoch, info[0])
            # FlushState.due, inlined (this runs per produce request): its two thresholds
            flush = self._flush
            due = self._end.leo >= flush.due_offset or now >= flush.due_ms
        if due:
            self.flush()  # outside the partition lock: flush takes the flush lock first
        return info

    def _write_locked(
        self, data: memoryview | bytearray, stamped: list, next_offset: int, now: int, arrow: bool = True
    ) -> None:
        """Write stamped batches to the active segment, rolling it first if Kafka's rule says so
        (LogSegment.should_roll, inlined: this runs per produce request); StorageError if the write fails."""
        active = self._segments.active
        if active.size and (
            active.size + len(data) > active.roll_size
            or now >= active.roll_ms
            or next_offset - 1 > active.roll_offset
        ):
            active = self._roll_locked(now)
        try:
            active.append(data, stamped, arrow=arrow)
        except OSError as e:
            raise StorageError(f"append to {active.log_path} failed: {e}") from e

    def _append_locked(
        self,
        mv: memoryview,
        batches: list[tuple[int, fmt.BatchHeader]],
        leader_epoch: int,
        now: int,
        flags: int = ARROW,
    ) -> AppendInfo:
        producers = ProducerAppend(self.producer_state) if flags & IDEMPOTENT else None
        stamped: list = []  # (position, base offset, size, max timestamp, record count)
        offset = stamp_run(
            mv, batches, self._end.leo, leader_epoch, now, self._log_append_time, producers, stamped
        )
        if type(offset) is not int:
            return offset  # a retry of appended batches
        if flags & TRANSACTIONAL:
            self._last_bases = [s[1] for s in stamped]  # base offset per batch, for the transaction hooks
        self._write_locked(mv, stamped, offset, now, bool(flags & ARROW))
        if producers is not None:
            producers.commit()
        base = self._end.leo
        self._end.set_leo(offset)  # publish: readers may now fetch up to here
        return new_info(
            AppendInfo, (base, offset - 1, now if self._log_append_time else -1, offset - base, False)
        )

    def append_runs(self, runs: list) -> list[AppendInfo | LogSourceError]:
        """Append each run of batches as :meth:`append` would, in order; return its AppendInfo or its error.

        A producer pipelining one-message requests delivers dozens of them in one network
        read: the good runs get consecutive offsets under one lock and one ``pwritev``, and
        each is answered alone (a run that fails changes nothing; the runs after it are
        checked as if it had never come). Transactional runs, and a group whose bytes would
        roll the segment, are appended one by one (the same result).
        """
        if len(runs) == 1:
            return [self._append_one(runs[0])]
        out: list = [None] * len(runs)
        # together by the append end (False, nothing done: a run is transactional, or they would roll)
        if len(runs) > MAX_COALESCED_RUNS or not self._end.append_runs(runs, out):
            for i, records in enumerate(runs):
                out[i] = self._append_one(records)
        return out

    def _append_one(self, records: bytes | bytearray | memoryview) -> AppendInfo | LogSourceError:
        try:
            return self.append(records)
        except LogSourceError as e:
            return e

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo | None:
        """Append the whole batches of a fetched region (a partial last batch is left for the next fetch).

        Returns None when ``records`` holds no whole batch. CorruptRecord on a
        bad header or CRC (nothing is written), InvalidRecord if offsets do not
        grow past the log end.
        """
        mv = memoryview(records)
        batches = fmt.walk(mv, check_crc=True)  # the format's checks; non-strict: a size-bounded fetch may
        if not batches:  # end in a partial batch
            return None
        end = batches[-1][0] + batches[-1][1].size
        now = clock_ms()
        with self._lock:
            self._check_open()
            stamped, expected = self._validator.follower_offsets(batches, self._end.leo)
            self._write_locked(mv[:end], stamped, expected, now, any(h.is_arrow_body for _, h in batches))
            ps, epochs = self.producer_state, self.epochs
            for _, h in batches:
                ps.replay(h)
                if h.leader_epoch > epochs.latest_epoch:
                    epochs.assign(h.leader_epoch, h.base_offset)
            if any(
                h.attributes & TXN_BITS for _, h in batches
            ):  # transactional or control: LSO, aborted index
                txn.apply_append(self.txns, ps, mv, batches, [h.base_offset for _, h in batches])
            self._end.set_leo(expected)
            flush = self._flush  # FlushState.due, inlined as in append
            due = expected >= flush.due_offset or now >= flush.due_ms
        if due:
            self.flush()
        return AppendInfo(
            batches[0][1].base_offset, expected - 1, -1, sum(h.record_count for _, h in batches), False
        )

    # ------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> FileRegion:
        """File region of whole batches from the one holding ``offset``, about ``max_bytes`` long.

        At least one whole batch even if larger than ``max_bytes``; an empty
        region at the log end (or at/after ``max_offset``, exclusive).
        """
        # the log end first, then the view: a view taken after it holds every batch below it
        leo = self._end.leo
        return reads.read_region(
            self._segments.view, self._start.offset, leo, offset, max_bytes, max_offset, self.name
        )

    def read_checked(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Like :meth:`read` but returns the bytes after CRC-checking every batch (CorruptRecord)."""
        return reads.checked_bytes(self.read(offset, max_bytes, max_offset))

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """First offset whose record timestamp is >= ``timestamp``; None when there is none.

        Kafka's sentinels: -1 (latest) gives the log end, -2 (earliest) the log start.
        """
        if timestamp == LATEST_TIMESTAMP:
            return self._end.leo
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset
        found = reads.first_offset_at(self._segments.view.segments, timestamp)
        return None if found is None else max(found, self.log_start_offset)

    def max_timestamp(self) -> tuple[int, int] | None:
        """(the largest record timestamp, the base offset of the first batch holding it); None when no
        record has a timestamp (ListOffsets' MAX_TIMESTAMP, KIP-734)."""
        return reads.max_timestamp(self._segments.view.segments)

    # ------------------------------------------------------------ flush and roll

    def flush(self, up_to: int | None = None) -> int:
        """fsync segments holding offsets below ``up_to`` (default: the log end); return the recovery point."""
        with self._flush_lock:
            return self._flush_holding_flush_lock(up_to)

    def sync_data(self) -> None:
        """fdatasync the segment files holding what was appended since the recovery point: the records are
        durable, with one fsync where :meth:`flush` does four (log, both indexes, the recovery-point file).
        The recovery point stays where it is (the next flush moves it): after a crash the log is re-read
        from there, as it is for any unflushed append, and the indexes are rebuilt from the records."""
        with self._flush_lock:
            with self._lock:
                todo = list(self._segments.from_offset(self._flush.recovery_point))
            for seg in todo:
                try:
                    seg.sync_data()
                except ValueError:  # closed by a concurrent delete
                    pass
                except OSError as e:
                    raise StorageError(f"fdatasync of {seg.log_path} failed: {e}") from e

    def _flush_holding_flush_lock(self, up_to: int | None = None) -> int:
        # Lock order: flush lock, then partition lock; the fsyncs run under the flush lock only.
        with self._lock:
            rp = self._flush.recovery_point
            target = self._end.leo if up_to is None else min(up_to, self._end.leo)
            if target <= rp:
                return rp
            todo = [s for s in self._segments.from_offset(rp) if s.base_offset < target]
        for seg in todo:
            try:
                seg.flush()
            except ValueError:  # closed by a concurrent delete; nothing to flush there
                pass
            except OSError as e:
                raise StorageError(f"flush of {seg.log_path} failed: {e}") from e
        with self._lock:
            advanced = self._flush.flushed(target, clock_ms())
            rp = self._flush.recovery_point
        if advanced:
            # The file's fsync runs outside the partition lock: under it, every flush.ms it
            # stalled the appends (and the broker's event loop) for the length of an fsync.
            # The flush lock orders it against truncation (which takes that lock too); a
            # roll may write a higher value concurrently, and whichever lands last is still a
            # point below which everything is on disk.
            write_recovery_point(self.directory, target, ".flush.tmp")
        return rp

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end (no-op if the active one is empty)."""
        with self._lock:
            self._check_open()
            return self._roll_locked(clock_ms())

    def _roll_locked(self, now_ms: int) -> LogSegment:
        segments = self._segments
        old = segments.active
        if old.size == 0:
            return old
        seg = segments.roll(self._end.leo)  # fsyncs the old segment
        if self._flush.recovery_point >= old.base_offset:
            self._flush.set_recovery_point(self._end.leo)  # old is fsynced and so is everything before it
            write_recovery_point(self.directory, self._end.leo)
        self.producer_state.take_snapshot(self._end.leo)
        self.txns.take_snapshot(self._end.leo, self.log_start_offset)
        return seg

    # ------------------------------------------------------------ retention, cleaning, truncation

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention.ms and retention.bytes to whole segments; return how many went. The active
        segment goes too, as in Kafka, once retention expires it and it is all below the high watermark:
        it is rolled first, and the log goes on empty from its end."""
        with self._lock:
            self._check_open()
            now = clock_ms() if now_ms is None else now_ms
            segments = self._segments
            # a quiet topic's last segment (up to segment.bytes or segment.ms of records) would
            # otherwise be served long past retention.ms; Kafka rolls and deletes it too
            # (UnifiedLog.deleteOldSegments)
            if self.high_watermark >= self._end.leo and segments.expired(now, with_active=True) == len(
                segments.view.segments
            ):
                self._roll_locked(now)
            n = segments.delete_expired(now)
            if n:
                log.info(
                    "%s: retention deleted %d segments; log start is now %d",
                    self.name,
                    n,
                    self.log_start_offset,
                )
        self._segments.run_pending_deletes()
        return n

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (never back), persist it, and remove
        the segments wholly below it (the active one stays, as in Kafka); return the log start offset.

        OffsetOutOfRange beyond the high watermark. The records below ``offset`` are fsynced before the
        checkpoint is written: no crash brings back a log ending below its start."""
        if offset < 0:
            raise OffsetOutOfRange(f"cannot delete records of {self.name} before negative offset {offset}")
        hw = self.high_watermark
        if offset > hw:
            raise OffsetOutOfRange(
                f"cannot delete records of {self.name} before {offset}: the high watermark is {hw}"
            )
        self.flush(offset)
        return self._move_log_start(offset)

    def follow_log_start_offset(self, leader_log_start: int) -> int:
        """A follower: take the leader's log start offset (from a fetch answer), capped by this replica's
        high watermark, persisted and with the segments below it removed; return the log start."""
        return self._move_log_start(min(leader_log_start, self.high_watermark))

    def _move_log_start(self, offset: int) -> int:
        # The flush lock orders moves against each other, truncation and close; the checkpoint's fsyncs
        # run outside the partition lock (appends go on), and before the segments go: a crash between
        # the two deletes them at the next load (see __init__).
        with self._flush_lock:
            self._check_open()
            if offset <= self.log_start_offset:
                return self.log_start_offset
            self._start.set(offset)
            with self._lock:
                n = self._segments.delete_below(offset)
                if self._hw is not None and self._hw < offset:
                    self._hw = offset
        log.info("%s: log start offset moved to %d (%d segments deleted)", self.name, offset, n)
        self._segments.run_pending_deletes()
        return self.log_start_offset

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> bool:
        """Swap the cleaned segment ``new`` in for ``old`` (see :meth:`.SegmentList.replace`); False
        (``new`` destroyed) when ``old`` is no longer in the log or the log is closed."""
        with self._lock:
            if self._end.closed:
                new.destroy()
                return False
            return self._segments.replace(old, new)

    def run_pending_deletes(self, force: bool = False) -> int:
        """Close and unlink segments whose ``file.delete.delay.ms`` passed; return how many."""
        return self._segments.run_pending_deletes(force)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after the one holding ``offset``; return the new log end."""
        with self._flush_lock, self._lock:  # no flush may write an older recovery point after ours
            self._check_open()
            if offset >= self._end.leo:
                # nothing to cut, but the epoch cache may end with an epoch that starts at the log end and
                # holds no record (this broker led it and wrote nothing): drop it, as Kafka's truncateTo
                # does, or the follower keeps asking with it and the leader keeps answering "diverged"
                self.epochs.truncate_from_end(self._end.leo)
                return self._end.leo
            leo = self._segments.truncate_to(offset)
            self._end.set_leo(leo)
            if self._start.offset > leo:  # as Kafka's truncateTo below the log start
                self._start.set(leo)
            self._flush.set_recovery_point(min(self._flush.recovery_point, leo))
            write_recovery_point(self.directory, self._flush.recovery_point)
            self.epochs.truncate_from_end(leo)
            self.producer_state.delete_snapshots_after(leo)
            self.txns.delete_snapshots_after(leo)
            replay_producer_state(self.producer_state, self.txns, self._segments.view.segments, leo)
            return leo

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log, empty, at ``offset`` (a follower far behind the leader)."""
        if offset < 0:
            raise InvalidRequest(f"cannot start a log at negative offset {offset}")
        with self._flush_lock, self._lock:
            self._check_open()
            self._segments.reset_at(offset)
            self._end.set_leo(offset)
            self._start.set(offset)
            self._flush.set_recovery_point(offset)
            write_recovery_point(self.directory, offset)
            self.epochs.clear()
            if self._hw is not None:
                self._hw = offset
            self.producer_state.delete_snapshots_after(-1)
            self.producer_state.producers = {}
            self.txns.delete_snapshots_after(-1)
            self.txns.reset()

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Flush, snapshot producer state, close files and mark the shutdown clean."""
        with self._flush_lock, self._lock:
            if self._end.closed:
                return
            self._flush_holding_flush_lock()
            self.producer_state.take_snapshot(self._end.leo)
            self.txns.take_snapshot(self._end.leo, self.log_start_offset)
            self._end.set_closed()
            self._segments.close()
        self._segments.run_pending_deletes(force=True)
        (self.directory / CLEAN_SHUTDOWN_FILE).touch()

    def retire(self, new_directory: Path) -> None:
        """Stop accepting writes and move the directory aside (topic deletion).

        Files stay open, so regions already handed out remain readable until
        :meth:`delete` runs (after ``file.delete.delay.ms``).
        """
        with self._lock:
            self._end.set_closed()
            os.replace(self.directory, new_directory)
            self.directory = Path(new_directory)

    def delete(self) -> None:
        """Close the log (no clean marker) and remove its directory."""
        with self._lock:
            self._end.set_closed()
            self._segments.close()
        self._segments.run_pending_deletes(force=True)
        shutil.rmtree(self.directory, ignore_errors=True)
