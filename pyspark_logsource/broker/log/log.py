"""The partition log: an ordered run of segments with one active (last) segment.

In memory the log is a copy-on-write view ``(base offsets, segments)``:
appends, rolls, retention and truncation build a new view under the partition
lock and publish it with one assignment, so a reader never takes a lock and a
delete never blocks it. Locating an offset is ``bisect`` over the base offsets
plus one sparse index probe in the segment and a short walk over headers.

Durability: ``flush.messages`` / ``flush.ms`` decide when segments are fsynced;
the offset up to which everything is on disk (the recovery point) is written
to ``recovery-point`` at each flush. On open, segments past the recovery point
are CRC-scanned and their torn tail truncated; a ``.clean_shutdown`` marker
(written by ``close()``) skips that scan.

Retention, the cleaner's segment swap and truncation are in :mod:`.deletion`; appending
the runs of several produce requests together is in :mod:`.coalesced`.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from bisect import bisect_right
from pathlib import Path
from typing import NamedTuple

from ...errors import (
    CorruptRecord,
    DuplicateSequence,
    InvalidRecord,
    InvalidRequest,
    OffsetOutOfRange,
    StorageError,
)
from ...format import header as fmt
from ...format.header import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from ...format.kafka_decode import validate_kafka_records
from ...topics import validate_topic_name
from . import transactions as txn
from .coalesced import CoalescedAppendMixin
from .config import DELETE, LogConfig
from .deletion import SegmentDeletionMixin
from .epochs import LeaderEpochCache
from .follower import ReplicaLogMixin
from .loader import complete_swaps
from .producer_state import ProducerAppend, ProducerStateManager
from .segment import DELETED_SUFFIX, LOG_SUFFIX, FileRegion, LogSegment

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
RECOVERY_POINT_FILE = "recovery-point"
#: attribute bits of a batch that the transaction checks look at
_TXN_BITS = fmt.TRANSACTIONAL_BIT | fmt.CONTROL_BIT
_LOG_OVERHEAD = fmt.LOG_OVERHEAD
#: what :meth:`PartitionLog._checked` found in a run
_TRANSACTIONAL, _ARROW, _IDEMPOTENT = 1, 2, 4
_new_info = tuple.__new__  # AppendInfo(...) without namedtuple's Python-level __new__

__all__ = ["AppendInfo", "FileRegion", "PartitionLog", "LATEST_TIMESTAMP", "EARLIEST_TIMESTAMP"]


class AppendInfo(NamedTuple):
    """Result of an append; ``duplicate`` means an idempotent retry: original offsets, nothing written."""

    base_offset: int
    last_offset: int
    log_append_time: int
    record_count: int
    duplicate: bool = False


class _View(NamedTuple):
    bases: list[int]
    segments: tuple[LogSegment, ...]


def _now_ms() -> int:
    return int(time.time() * 1000)


class PartitionLog(ReplicaLogMixin, SegmentDeletionMixin, CoalescedAppendMixin):
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
        self._pending_deletes: list[tuple[float, LogSegment]] = []
        self._closed = False
        #: Set by a LogManager whose thread flushes by ``flush.ms``: appends then leave
        #: time-based flushes to it and never fsync in the caller's thread for time.
        self.scheduled_flush = False
        self.producer_state = ProducerStateManager(self.directory)
        self.txns = txn.PartitionTransactions(self.directory)
        self._last_bases: list[int] = []
        self.epochs = LeaderEpochCache(self.directory)
        #: the high watermark when replicated (set by the replica manager); None: it is the log end
        self._hw: int | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._open()
        except OSError as e:
            raise StorageError(f"cannot open log {self.name} in {self.directory}: {e}") from e

    @property
    def name(self) -> str:
        """``topic-partition``, as the directory is named."""
        return f"{self.topic}-{self.partition}"

    def __repr__(self) -> str:
        return f"PartitionLog({self.name}, start={self.log_start_offset}, end={self.log_end_offset})"

    # ------------------------------------------------------------ open and recovery

    def _open(self) -> None:
        t0 = time.monotonic()
        d = self.directory
        for p in list(d.iterdir()):
            if p.name.endswith(DELETED_SUFFIX) or p.name.endswith(".tmp"):
                p.unlink(missing_ok=True)  # deletions and writes that a crash interrupted
        swapped = complete_swaps(d, self.config, self.name)  # before the segments are listed
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        marker.unlink(missing_ok=True)  # from here on, a crash must not look clean
        recovery_point = 0
        rp_file = d / RECOVERY_POINT_FILE
        if rp_file.exists():
            try:
                recovery_point = int(rp_file.read_text().strip())
            except ValueError:
                recovery_point = 0
        bases = sorted(
            int(p.name[:-len(LOG_SUFFIX)]) for p in d.glob("*" + LOG_SUFFIX) if p.name[:-len(LOG_SUFFIX)].isdigit()
        )
        self._remove_orphan_indexes(bases)
        segments: list[LogSegment] = []
        recovered, cut = 0, 0
        for i, base in enumerate(bases):
            seg = LogSegment(d, base, self.config)
            flushed = i + 1 < len(bases) and bases[i + 1] <= recovery_point
            seg_cut = 0
            if (clean or flushed) and base not in swapped:
                seg.load()
            else:
                recovered += 1
                seg_cut = seg.recover()
                cut += seg_cut
            # compaction may leave a gap between segments (its last records removed), never an overlap
            if segments and not (seg.base_offset == segments[-1].next_offset or (
                self.config.compact and seg.base_offset > segments[-1].next_offset
            )):  # fmt: skip
                log.warning("%s: segment %d does not follow offset %d; dropping it and later segments",
                            self.name, base, segments[-1].next_offset)
                seg.destroy()
                self._destroy_bases(bases[i + 1:])
                break
            segments.append(seg)
            if seg_cut:
                # A torn segment means nothing after it was written safely.
                self._destroy_bases(bases[i + 1:])
                break
        if not segments:
            segments.append(LogSegment(d, 0, self.config))
        for seg in segments[:-1]:
            seg.seal_time_index()  # a rebuilt index of an inactive segment lacks its roll entry
        self._view = _View([s.base_offset for s in segments], tuple(segments))
        self._leo = segments[-1].next_offset
        if recovered:
            for seg in segments:
                seg.flush()
        self._recovery_point = self._leo if (clean or recovered) else min(recovery_point, self._leo)
        self._write_recovery_point()
        self._last_flush_ms = _now_ms()
        replayed = self._rebuild_producer_state()
        if not self.epochs.load() and self._leo > self.log_start_offset:
            self.epochs.rebuild((h.leader_epoch, h.base_offset) for s in segments for h in s.iter_headers(s.base_offset))
        self.epochs.truncate_from_end(self._leo)  # a recovery may have cut the log below a checkpointed epoch
        self.recovery_info = {
            "clean": clean,
            "recovered_segments": recovered,
            "truncated_bytes": cut,
            "replayed_batches": replayed,
            "ms": round((time.monotonic() - t0) * 1000, 1),
        }
        log.info(
            "loaded log %s: offsets [%d, %d), %d segments, clean=%s, recovered %d segments, "
            "truncated %d bytes, replayed %d producer batches in %.1f ms",
            self.name, self.log_start_offset, self._leo, len(segments), clean, recovered, cut,
            replayed, self.recovery_info["ms"],
        )  # fmt: skip

    def _destroy_bases(self, bases: list[int]) -> None:
        for base in bases:
            log.warning("%s: dropping segment %d after a damaged one", self.name, base)
            LogSegment(self.directory, base, self.config).destroy()

    def _remove_orphan_indexes(self, bases: list[int]) -> None:
        known = {f"{b:020d}" for b in bases}
        for p in self.directory.iterdir():
            if p.suffix in (".index", ".timeindex") and p.stem not in known:
                p.unlink(missing_ok=True)

    def _rebuild_producer_state(self) -> int:
        ps = self.producer_state
        snap = ps.load(self._leo)
        start = max(snap if snap is not None else 0, self.log_start_offset)
        n = 0
        if start < self._leo:
            bases, segs = self._view
            for seg in segs[max(0, bisect_right(bases, start) - 1):]:
                for h in seg.iter_headers(start):
                    ps.replay(h)
                    n += 1
        txn.rebuild(self)
        return n

    def _write_recovery_point(self, value: int | None = None, tmp_suffix: str = ".tmp") -> None:
        path = self.directory / RECOVERY_POINT_FILE
        tmp = path.with_name(path.name + tmp_suffix)
        with open(tmp, "w") as f:
            f.write(f"{self._recovery_point if value is None else value}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    # ------------------------------------------------------------ properties

    @property
    def log_start_offset(self) -> int:
        """First offset still in the log."""
        return self._view.segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record will get."""
        return self._leo

    @property
    def last_stable_offset(self) -> int:
        """read_committed readers read below it: the oldest open transaction's first offset, else the
        high watermark (see :mod:`.transactions`)."""
        return self.txns.last_stable_offset(getattr(self, "high_watermark", self._leo))

    @property
    def recovery_point(self) -> int:
        """Every offset below this one is fsynced."""
        return self._recovery_point

    flushed_offset = recovery_point

    @property
    def unflushed_messages(self) -> int:
        """Records appended since the last flush."""
        return self._leo - self._recovery_point

    @property
    def last_flush_ms(self) -> int:
        """Wall-clock ms of the last flush (or of opening)."""
        return self._last_flush_ms

    @property
    def size_bytes(self) -> int:
        """Bytes of all segments."""
        return sum(s.size for s in self._view.segments)

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (a copy: read-only)."""
        return list(self._view.segments)

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to."""
        return self._view.segments[-1]

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.name} is closed")

    # ------------------------------------------------------------ append

    def append(self, records: bytes | bytearray | memoryview, leader_epoch: int | None = None, *,
               control: bool = False) -> AppendInfo:
        """Validate, stamp and append a run of batches, all or nothing.

        A writable buffer (bytearray) is stamped in place; bytes are copied once. Control
        batches (transaction markers) only from the coordinator: ``control=True``.
        """
        # Hot path: per-batch work only, and as little Python per batch as the checks allow
        # (a produce of one message spends more time here than in its pwrite).
        mv, batches, flags = self._checked(records, control)
        now = int(time.time() * 1000)
        with self._lock:
            if self._closed:
                raise StorageError(f"log {self.name} is closed")
            latest = self.epochs.latest_epoch
            if leader_epoch is None:  # the epoch this replica leads in (its cache's newest; 0 on a single broker)
                leader_epoch = latest if latest > 0 else 0
            info = self._append_locked(mv, batches, leader_epoch, now, flags)
            if info[4]:  # a duplicate: nothing written
                return info
            if flags & _TRANSACTIONAL:
                txn.apply_append(self, mv, batches, self._last_bases)
            if leader_epoch > latest:
                self.epochs.assign(leader_epoch, info[0])
            # _flush_due, inlined: this runs per produce request
            config = self.config
            due = self._leo - self._recovery_point >= config.flush_messages or (
                not self.scheduled_flush and now - self._last_flush_ms >= config.flush_ms
            )
        if due:
            self.flush()  # outside the partition lock: flush takes the flush lock first
        return info

    def _checked(self, records: bytes | bytearray | memoryview, control: bool) -> tuple[memoryview, list, int]:
        """The run as a writable view, its ``(position, header)`` pairs and flags (_TRANSACTIONAL,
        _ARROW, _IDEMPOTENT) after every check that needs no log state (CorruptRecord, ...)."""
        if type(records) is bytearray:
            mv = memoryview(records)
        else:
            mv = memoryview(records)
            if mv.readonly or not mv.contiguous or mv.format != "B":
                mv = memoryview(bytearray(mv))
        if not len(mv):
            raise CorruptRecord("empty record set")
        config = self.config
        # header checks, size bound, CRC and codec of every batch: one call, the format's walker
        batches = fmt.walk(mv, check_crc=True, max_size=config.max_message_bytes, strict=True)
        compact = config.cleanup_policy != DELETE
        flags = 0
        for pos, h in batches:
            attrs = h[5]
            if attrs & _TXN_BITS:
                flags |= _TRANSACTIONAL
            if h[9] >= 0 and h[11] >= 0:  # producer id, base sequence
                flags |= _IDEMPOTENT
            if attrs & fmt.ARROW_BODY:
                flags |= _ARROW
                keyless = compact and attrs & fmt.HAS_KEY_NULLS
            else:  # a Kafka client's batch: its varint records must parse
                keyless = validate_kafka_records(mv, pos, h) and compact
            if keyless:
                raise InvalidRecord(f"compacted topic {self.topic} refuses records without a key "
                                    f"(batch at position {pos})")  # fmt: skip
        if flags & _TRANSACTIONAL:  # checked only when there is one: most appends have no transactional batch
            txn.check_append(batches, control)
        return mv, batches, flags

    def _flush_due(self, now: int) -> bool:
        """Whether flush.messages or flush.ms asks for a flush now (under the partition lock)."""
        config = self.config
        return self._leo - self._recovery_point >= config.flush_messages or (
            not self.scheduled_flush and now - self._last_flush_ms >= config.flush_ms
        )

    def _stamp_run(self, mv: memoryview, batches: list, offset: int, leader_epoch: int, now: int,
                   producers: ProducerAppend | None, stamped: list, at: int = 0) -> int | AppendInfo:  # fmt: skip
        """Check a run's producer sequences (``producers``: None when it has no idempotent batch) and
        stamp its batches from ``offset``; add ``(position + at, base offset, size, max timestamp,
        count)`` per batch to ``stamped``. Returns the next offset, or the original AppendInfo of a
        run appended before (a retry: nothing stamped). Raises DuplicateSequence for a run mixing both."""
        lat = self._log_append_time
        duplicates = None
        stamp = fmt.stamp_offset_epoch
        first = len(stamped)
        for pos, h in batches:
            # h[9], h[11]: producer id, base sequence (tuple indexing: this loop runs per batch)
            idempotent = producers is not None and h[9] >= 0 and h[11] >= 0
            if idempotent:
                dup = producers.check(h)
                if dup is not None:
                    if duplicates is None:
                        duplicates = []
                    duplicates.append(dup)
                    continue
            stamp(mv, pos, offset, h[1], leader_epoch)  # h[1]: batch length
            max_ts = h[8]
            if lat:
                fmt.stamp_log_append_time(mv, now, pos)
                max_ts = now
            if idempotent:
                producers.record(h, offset, max_ts)
            count = h[12]
            stamped.append((pos + at, offset, h[1] + _LOG_OVERHEAD, max_ts, count))
            offset += count
        if duplicates:
            if len(stamped) > first:
                raise DuplicateSequence(
                    f"{len(duplicates)} of {len(batches)} batches were already appended; retry them separately"
                )
            return AppendInfo(duplicates[0].first_offset, duplicates[-1].last_offset, -1,
                              sum(h.record_count for _, h in batches), True)  # fmt: skip
        return offset

    def _append_locked(self, mv: memoryview, batches: list[tuple[int, fmt.BatchHeader]], leader_epoch: int,
                       now: int, flags: int = _ARROW) -> AppendInfo:  # fmt: skip
        producers = ProducerAppend(self.producer_state) if flags & _IDEMPOTENT else None
        stamped: list = []  # (position, base offset, size, max timestamp, record count)
        offset = self._stamp_run(mv, batches, self._leo, leader_epoch, now, producers, stamped)
        if type(offset) is not int:
            return offset  # a retry of appended batches
        if flags & _TRANSACTIONAL:
            self._last_bases = [s[1] for s in stamped]  # base offset per batch, for the transaction hooks
        active = self._view.segments[-1]
        # LogSegment.should_roll, inlined: this runs per produce request
        if active.size and (active.size + len(mv) > active.roll_size or now >= active.roll_ms
                            or offset - 1 > active.roll_offset):  # fmt: skip
            active = self._roll_locked(now)
        try:
            active.append(mv, stamped, arrow=bool(flags & _ARROW))
        except OSError as e:
            raise StorageError(f"append to {active.log_path} failed: {e}") from e
        if producers is not None:
            producers.commit()
        base = self._leo
        self._leo = offset  # publish: readers may now fetch up to here
        return _new_info(AppendInfo, (base, offset - 1, now if self._log_append_time else -1, offset - base,
                                      False))  # fmt: skip

    # ------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> FileRegion:
        """File region of whole batches from the one holding ``offset``, about ``max_bytes`` long.

        At least one whole batch even if larger than ``max_bytes``; an empty
        region at the log end (or at/after ``max_offset``, exclusive).
        """
        leo = self._leo
        bases, segs = self._view
        start = segs[0].base_offset
        if offset < start or offset > leo:
            raise OffsetOutOfRange(f"offset {offset} is outside [{start}, {leo}] of {self.name}")
        if offset == leo or (max_offset is not None and offset >= max_offset):
            return FileRegion(segs[-1].file, segs[-1].size, 0)
        for seg in segs[bisect_right(bases, offset) - 1:]:
            region = seg.read(offset, max_bytes, max_offset)
            if region is not None:
                return region
        return FileRegion(segs[-1].file, segs[-1].size, 0)

    def read_checked(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Like :meth:`read` but returns the bytes after CRC-checking every batch (CorruptRecord)."""
        region = self.read(offset, max_bytes, max_offset)
        data = os.pread(region.file.fileno(), region.length, region.position)
        pos = 0
        while pos < len(data):
            h = fmt.validate(data, pos)
            pos += h.size
        return data

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """First offset whose record timestamp is >= ``timestamp``; None when there is none.

        Kafka's sentinels: -1 (latest) gives the log end, -2 (earliest) the log start.
        """
        if timestamp == LATEST_TIMESTAMP:
            return self._leo
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset
        for seg in self._view.segments:
            if seg.max_timestamp >= timestamp:
                found = seg.find_timestamp(timestamp)
                if found is not None:
                    return found
        return None

    # ------------------------------------------------------------ flush and roll

    def flush(self, up_to: int | None = None) -> int:
        """fsync segments holding offsets below ``up_to`` (default: the log end); return the recovery point."""
        with self._flush_lock:
            return self._flush_holding_flush_lock(up_to)

    def _flush_holding_flush_lock(self, up_to: int | None = None) -> int:
        # Lock order: flush lock, then partition lock; the fsyncs run under the flush lock only.
        with self._lock:
            target = self._leo if up_to is None else min(up_to, self._leo)
            if target <= self._recovery_point:
                return self._recovery_point
            bases, segs = self._view
            todo = [s for s in segs[max(0, bisect_right(bases, self._recovery_point) - 1):] if s.base_offset < target]
        for seg in todo:
            try:
                seg.flush()
            except ValueError:  # closed by a concurrent delete; nothing to flush there
                pass
            except OSError as e:
                raise StorageError(f"flush of {seg.log_path} failed: {e}") from e
        with self._lock:
            advanced = target > self._recovery_point
            if advanced:
                self._recovery_point = target
            self._last_flush_ms = _now_ms()
            rp = self._recovery_point
        if advanced:
            # The file's fsync runs outside the partition lock: under it, every flush.ms it
            # stalled the appends (and the broker's event loop) for the length of an fsync.
            # The flush lock orders it against truncation (which takes that lock too); a
            # roll may write a higher value concurrently, and whichever lands last is still a
            # point below which everything is on disk.
            self._write_recovery_point(target, ".flush.tmp")
        return rp

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end (no-op if the active one is empty)."""
        with self._lock:
            self._check_open()
            return self._roll_locked(_now_ms())

    def _set_segments(self, segments: tuple[LogSegment, ...] | list[LogSegment]) -> None:
        """Publish a new segment list (readers take the view without the lock)."""
        self._view = _View([s.base_offset for s in segments], tuple(segments))

    def _roll_locked(self, now_ms: int) -> LogSegment:
        old = self.active_segment
        if old.size == 0:
            return old
        old.on_roll()
        if self._recovery_point >= old.base_offset:
            self._recovery_point = self._leo  # old is fsynced and so is everything before it
            self._write_recovery_point()
        self.producer_state.take_snapshot(self._leo)
        self.txns.take_snapshot(self._leo, self.log_start_offset)
        for suffix in (LOG_SUFFIX, ".index", ".timeindex"):
            (self.directory / f"{self._leo:020d}{suffix}").unlink(missing_ok=True)
        seg = LogSegment(self.directory, self._leo, self.config)
        seg.created_ms = None
        bases, segs = self._view
        self._view = _View([*bases, seg.base_offset], (*segs, seg))
        return seg

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Flush, snapshot producer state, close files and mark the shutdown clean."""
        with self._flush_lock, self._lock:
            if self._closed:
                return
            self._flush_holding_flush_lock()
            self.producer_state.take_snapshot(self._leo)
            self.txns.take_snapshot(self._leo, self.log_start_offset)
            self._closed = True
            for seg in self._view.segments:
                seg.close()
        self.run_pending_deletes(force=True)
        (self.directory / CLEAN_SHUTDOWN_FILE).touch()

    def retire(self, new_directory: Path) -> None:
        """Stop accepting writes and move the directory aside (topic deletion).

        Files stay open, so regions already handed out remain readable until
        :meth:`delete` runs (after ``file.delete.delay.ms``).
        """
        with self._lock:
            self._closed = True
            os.replace(self.directory, new_directory)
            self.directory = Path(new_directory)

    def delete(self) -> None:
        """Close the log (no clean marker) and remove its directory."""
        with self._lock:
            self._closed = True
            for seg in self._view.segments:
                seg.close()
        self.run_pending_deletes(force=True)
        shutil.rmtree(self.directory, ignore_errors=True)
