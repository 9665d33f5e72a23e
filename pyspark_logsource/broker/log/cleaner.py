"""The log cleaner: compaction of ``cleanup.policy=compact`` logs (design 4.8).

One pass over a log, as Kafka's cleaner does it:

1. The *dirty* part of the log runs from the cleaner checkpoint (the offset up
   to which the log was cleaned before) to the end of the cleanable segments:
   never the active segment, and none newer than ``min.compaction.lag.ms``.
   A pass starts when dirty bytes / cleanable bytes reach
   ``min.cleanable.dirty.ratio`` (or the oldest dirty segment is older than
   ``max.compaction.lag.ms``).
2. An :class:`OffsetMap` (key -> latest offset) is built over the dirty
   segments, whole segments at a time, until ``log.cleaner.dedupe.buffer.size``
   would be exceeded: the pass then cleans only the prefix that fits.
3. Every segment from the log start to the end of that prefix is recopied,
   in groups no larger than ``segment.bytes``, keeping a record unless a later
   record of its key is in the map, and dropping tombstones (null values)
   whose segment is older than ``delete.retention.ms``. Offsets are kept, so
   gaps appear (see :mod:`...format.compact`). Each cleaned group is swapped
   in crash-safely (:meth:`PartitionLog.replace_segments`, :mod:`.loader`).

Transactions: the cleaner stops at the last stable offset and drops the
records of aborted transactions (keeping their markers), which also never
enter the offset map, as Kafka's cleaner does.

Producer state: the cleaner never touches the active segment, and the
producer state snapshot taken when the segment before it was rolled covers
every segment it cleans, so restoring producer state (newest snapshot, then
replay of the active segment) is unaffected by what the cleaner removes.

Work is vectorised per chunk of batches (numpy and pyarrow over keys and
offsets); the remaining Python loops are per chunk, per segment and per
batch (``format.compact.retain``), none per record.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...format.compact import Run, decode_run, retain
from .log import PartitionLog
from .segment import CLEANED_SUFFIX, LogSegment
from .transactions import aborted_rows

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
#: bytes of batches decoded at a time
READ_CHUNK = 4 << 20
#: bytes an entry costs in the offset map besides its key (offset and hash-table slot)
ENTRY_OVERHEAD = 16


class OffsetMap:
    """The latest offset of each key of the dirty segments, bounded to ``capacity`` bytes.

    Keys are stored whole (no hash collisions to reason about); an entry costs
    its key's bytes plus ``ENTRY_OVERHEAD``.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.keys = pa.nulls(0, type=pa.binary())
        self.offsets = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def size_bytes(self) -> int:
        return _key_bytes(self.keys) + ENTRY_OVERHEAD * len(self.keys)

    def try_add(self, keys: pa.Array, offsets: np.ndarray, *, force: bool = False) -> bool:
        """Add (key, offset) pairs (later offsets win); False, unchanged, if the map would outgrow its capacity."""
        valid = keys.is_valid()
        if keys.null_count:
            keys, offsets = keys.filter(valid), offsets[np.asarray(valid.to_numpy(zero_copy_only=False))]
        if len(keys) == 0:
            return True
        t = pa.table(
            {
                "key": pa.concat_arrays([self.keys, keys.cast(pa.binary())]),
                "offset": np.concatenate([self.offsets, offsets]),
            }
        )
        g = t.group_by("key").aggregate([("offset", "max")])
        new_keys = g.column("key").combine_chunks()
        if not force and _key_bytes(new_keys) + ENTRY_OVERHEAD * len(new_keys) > self.capacity:
            return False
        self.keys = new_keys
        self.offsets = g.column("offset_max").to_numpy().astype(np.int64)
        return True

    def latest(self, keys: pa.Array) -> np.ndarray:
        """The latest offset of each key (-1: not in the map, or a null key)."""
        if len(self.keys) == 0 or len(keys) == 0:
            return np.full(len(keys), -1, dtype=np.int64)
        idx = pc.index_in(keys.cast(pa.binary()), value_set=self.keys)
        found = np.asarray(idx.is_valid().to_numpy(zero_copy_only=False))
        out = np.full(len(keys), -1, dtype=np.int64)
        out[found] = self.offsets[idx.filter(idx.is_valid()).to_numpy()]
        return out


def _key_bytes(keys: pa.Array) -> int:
    return int(pc.sum(pc.binary_length(keys)).as_py() or 0) if len(keys) else 0


@dataclass
class CleanStats:
    """What one pass over one log did."""

    log: str
    segments_in: int = 0
    segments_out: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_in: int = 0
    records_out: int = 0
    map_entries: int = 0
    dirty_end: int = 0
    seconds: float = 0.0
    aborted: bool = False
    groups: list[tuple[int, int]] = field(default_factory=list)

    @property
    def mb_per_s(self) -> float:
        return self.bytes_read / (1 << 20) / self.seconds if self.seconds else 0.0


def read_checkpoint(lg: PartitionLog) -> int:
    """The offset below which ``lg`` was cleaned (its log start if never)."""
    try:
        return int((lg.directory / CHECKPOINT_FILE).read_text().strip())
    except (OSError, ValueError):
        return lg.log_start_offset


def _write_checkpoint(lg: PartitionLog, offset: int) -> None:
    path = lg.directory / CHECKPOINT_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{offset}\n")
    os.replace(tmp, path)


def read_chunks(seg: LogSegment, chunk: int = READ_CHUNK):
    """Yield the segment's whole batches, about ``chunk`` bytes at a time, as bytes."""
    offset = seg.base_offset
    while True:
        region = seg.read(offset, chunk)
        if region is None or region.length == 0:
            return
        data = os.pread(region.file.fileno(), region.length, region.position)
        run = decode_run(data, check_crc=True)
        if not run.walked:
            return
        yield data, run
        offset = run.walked[-1][1].next_offset


class LogCleaner:
    """Cleans compacted logs; one pass at a time (thread-safe)."""

    def __init__(self, dedupe_buffer_size: int = 128 << 20) -> None:
        self.dedupe_buffer_size = dedupe_buffer_size
        self._lock = threading.Lock()
        self.last_stats: list[CleanStats] = []

    def _cleanable(self, lg: PartitionLog, now: int) -> list[LogSegment]:
        segs = lg.segments[:-1]  # never the active segment
        lso = lg.last_stable_offset  # nor past an open transaction (its outcome decides what survives)
        segs = [s for s in segs if s.next_offset <= lso]
        lag = lg.config.min_compaction_lag_ms
        if lag > 0:
            n = 0
            while n < len(segs) and now - segs[n].largest_timestamp >= lag:
                n += 1
            segs = segs[:n]
        return segs

    def needs_cleaning(self, lg: PartitionLog, now_ms: int | None = None) -> bool:
        """Dirty ratio reached, or the oldest dirty record waited max.compaction.lag.ms."""
        if not lg.config.compact or lg.closed:
            return False
        now = int(time.time() * 1000) if now_ms is None else now_ms
        segs = self._cleanable(lg, now)
        first_dirty = read_checkpoint(lg)
        dirty = [s for s in segs if s.base_offset >= first_dirty]
        if not dirty:
            return False
        total = sum(s.size for s in segs)
        ratio = sum(s.size for s in dirty) / total if total else 0.0
        return (
            ratio >= lg.config.min_cleanable_dirty_ratio
            or now - dirty[0].largest_timestamp >= lg.config.max_compaction_lag_ms
        )

    def clean(self, lg: PartitionLog, *, now_ms: int | None = None, force: bool = False) -> CleanStats | None:
        """One pass over ``lg``; None when there is nothing (or, unless ``force``, not enough) to clean."""
        with self._lock:
            if not lg.config.compact or lg.closed or not (force or self.needs_cleaning(lg, now_ms)):
                return None
            stats = self._clean(lg, int(time.time() * 1000) if now_ms is None else now_ms)
            if stats is not None:
                self.last_stats = [*self.last_stats[-99:], stats]
            return stats

    def _clean(self, lg: PartitionLog, now: int) -> CleanStats | None:
        t0 = time.monotonic()
        segs = self._cleanable(lg, now)
        first_dirty = read_checkpoint(lg)
        dirty = [s for s in segs if s.base_offset >= first_dirty]
        stats = CleanStats(lg.name)
        if not dirty:  # a forced pass over the clean part only: regroups, expires tombstones
            end = min(first_dirty, segs[-1].next_offset if segs else first_dirty)
            if not segs or end <= segs[0].base_offset:
                return None
            return self._recopy(lg, segs, end, OffsetMap(self.dedupe_buffer_size), now, stats, t0)
        # 1. the offset map over whole dirty segments, as many as fit
        omap = OffsetMap(self.dedupe_buffer_size)
        taken = 0
        for seg in dirty:
            keys, offs = [], []
            for _, run in read_chunks(seg):
                committed = ~aborted_rows(lg.txns, run)  # an aborted record never hides a committed one
                keys.append(run.table.column("key").combine_chunks().filter(pa.array(committed)))
                offs.append(_offsets(run)[committed])
            if keys and not omap.try_add(pa.concat_arrays(keys), np.concatenate(offs), force=taken == 0):
                break
            taken += 1
        view = lg.segments
        last = dirty[taken - 1]
        idx = next((i for i, s in enumerate(view) if s is last), -1)
        if idx < 0 or idx + 1 >= len(view):
            return None  # retention or a truncation removed it meanwhile: the next pass starts afresh
        end = view[idx + 1].base_offset  # a segment boundary: the next pass starts there
        if taken < len(dirty):
            log.info(
                "%s: offset map full (%d keys, %d bytes): cleaning up to %d this pass",
                lg.name,
                len(omap),
                omap.size_bytes,
                end,
            )
        return self._recopy(lg, segs, end, omap, now, stats, t0)

    def _recopy(
        self,
        lg: PartitionLog,
        segs: list[LogSegment],
        end: int,
        omap: OffsetMap,
        now: int,
        stats: CleanStats,
        t0: float,
    ) -> CleanStats:
        stats.map_entries, stats.dirty_end = len(omap), end
        # 2. recopy [log start, end) in groups of at most segment.bytes
        horizon = now - lg.config.delete_retention_ms
        for group in _groups([s for s in segs if s.base_offset < end], lg.config.segment_bytes):
            new = self._clean_group(lg, group, omap, horizon, stats)
            if not lg.replace_segments(group, new):
                log.info(
                    "%s: segments changed during cleaning (retention or truncation); pass abandoned", lg.name
                )
                stats.aborted = True
                break
            stats.segments_in += len(group)
            stats.segments_out += 1
            stats.groups.append((group[0].base_offset, len(group)))
        if not stats.aborted:
            _write_checkpoint(lg, end)
        stats.seconds = time.monotonic() - t0
        log.info(
            "%s: cleaned %d segments into %d, %d -> %d records, %.1f MB read, %.1f MB/s",
            lg.name,
            stats.segments_in,
            stats.segments_out,
            stats.records_in,
            stats.records_out,
            stats.bytes_read / 1e6,
            stats.mb_per_s,
        )
        return stats

    def _clean_group(
        self, lg: PartitionLog, group: list[LogSegment], omap: OffsetMap, horizon: int, stats: CleanStats
    ) -> LogSegment:
        base = group[0].base_offset
        for p in lg.directory.glob(f"{base:020d}.*{CLEANED_SUFFIX}"):
            p.unlink()  # a pass that failed midway
        new = LogSegment(lg.directory, base, lg.config, CLEANED_SUFFIX)
        try:
            for seg in group:
                expired = seg.max_timestamp < horizon  # tombstones here have outlived delete.retention.ms
                for data, run in read_chunks(seg):
                    stats.bytes_read += run.size
                    stats.records_in += run.table.num_rows
                    keep = _keep(run, omap, expired) & ~aborted_rows(lg.txns, run)
                    kept = retain(data, run, keep)
                    if not kept:
                        continue
                    stamped, pos = [], 0
                    for k in kept:
                        size = len(k.data)
                        stamped.append((pos, k.base_offset, size, k.max_timestamp, k.span))
                        pos += size
                    new.append(
                        memoryview(b"".join(k.data for k in kept)), stamped, arrow=any(k.arrow for k in kept)
                    )
                    stats.bytes_written += pos
                    stats.records_out += int(keep.sum())
        except BaseException:
            new.destroy()
            raise
        return new


def _offsets(run: Run) -> np.ndarray:
    return np.asarray(
        run.table.column("offset").combine_chunks().to_numpy(zero_copy_only=False), dtype=np.int64
    )


def _keep(run: Run, omap: OffsetMap, tombstones_expired: bool) -> np.ndarray:
    """Rows to keep: no later record of the key in the map, not an expired tombstone, control records always."""
    keys = run.table.column("key").combine_chunks()
    offs = _offsets(run)
    keep = omap.latest(keys) <= offs
    if tombstones_expired:
        tomb = np.asarray(run.table.column("value").combine_chunks().is_null().to_numpy(zero_copy_only=False))
        tomb &= np.asarray(keys.is_valid().to_numpy(zero_copy_only=False))
        keep &= ~tomb
    control = np.fromiter((h.is_control for _, h in run.walked), dtype=bool, count=len(run.walked))
    if control.any():
        keep |= control[run.batch_of_row]
    return keep


def _groups(segs: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive segments whose total size fits in one segment (and in 32-bit relative offsets)."""
    out: list[list[LogSegment]] = []
    for s in segs:
        g = out[-1] if out else None
        if (
            g is not None
            and sum(x.size for x in g) + s.size <= max_bytes
            and s.next_offset - g[0].base_offset <= 0x7FFFFFFF
        ):
            g.append(s)
        else:
            out.append([s])
    return out


def checkpoint_path(directory: Path) -> Path:
    """Where a log's cleaner checkpoint lives."""
    return Path(directory) / CHECKPOINT_FILE
