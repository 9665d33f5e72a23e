"""The append end of a log segment: its size, next offset, largest timestamp, bytes since the last index
entry and Kafka's roll bounds, in one object the segment holds (:attr:`LogSegment.tail`).

Only this object's methods change those numbers: the segment calls them when it opens, recovers,
truncates or appends through its general path, and the log calls :meth:`SegmentTail.append_plain` once
per plain produce (the format's one-call step, then this bookkeeping, with no Python frame between when
compiled). The index entries stay the indexes': the tail calls their append methods, handed to it.

This class is the reference; ``_cseg.SegmentTail`` is its compiled twin (same interface, same results;
``tests/test_log_segment_tail.py``), used when built: :data:`SegmentTail` is the one to use.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ...format._speedups import load_extension
from .config import LogConfig

#: relative offsets are 32-bit: a segment holds at most this many offsets past its base
MAX_RELATIVE_OFFSET = 0xFFFFFFFF


def now_ms_py() -> int:
    """Wall-clock milliseconds, as ``int(time.time() * 1000)``."""
    return int(time.time() * 1000)


class SegmentTailPy:
    """The append end of one segment (see the module). Readers read its attributes without a lock: an
    append publishes ``size`` after its bytes are written and the rest recorded before it."""

    __slots__ = (
        "fd",
        "base_offset",
        "size",
        "next_offset",
        "max_timestamp",
        "offset_of_max_timestamp",
        "bytes_since_index",
        "holds_arrow",
        "roll_size",
        "roll_offset",
        "created_ms",
        "roll_ms",
        "_segment_bytes",
        "_segment_ms",
        "_index_interval",
        "_index_full",
        "_offset_index_append",
        "_time_index_append",
        "_time_handed",
    )

    def __init__(
        self,
        fd: int,
        base_offset: int,
        size: int,
        config: LogConfig,
        offset_index_append: Callable[[int, int], bool],
        time_index_append: Callable[[int, int], bool],
    ) -> None:
        """``fd``: the segment file, ``size`` bytes long; the index appends are
        ``OffsetIndex.append`` and ``TimeIndex.maybe_append`` of the segment's indexes."""
        self.fd = fd
        self.base_offset = base_offset
        #: bytes of whole batches in the file; readers never look past it
        self.size = size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_index = 0
        #: some batch has our Arrow body (Kafka clients then need this segment's regions converted);
        #: None: unknown (a file opened without a scan of its headers), so readers look per region
        self.holds_arrow: bool | None = False if size == 0 else None
        #: the last offset the segment may hold (relative offsets are 32-bit)
        self.roll_offset = base_offset + MAX_RELATIVE_OFFSET
        #: wall-clock ms of the first append (or of opening a non-empty file); None while empty
        self.created_ms: int | None = None
        #: when the segment is segment.ms old (infinity while it is empty)
        self.roll_ms: int | float = float("inf")
        self._index_full = False
        self._offset_index_append = offset_index_append
        self._time_index_append = time_index_append
        #: the largest timestamp last handed to the time index (it holds that one or a larger one):
        #: handing it the same again adds nothing, so it is not called
        self._time_handed = -1
        self.set_config(config)

    def set_config(self, config: LogConfig) -> None:
        """segment.bytes, segment.ms and index.interval.bytes from ``config`` (a dynamic change applies to
        the active segment at once, as Kafka's)."""
        self._segment_bytes = config.segment_bytes
        self._segment_ms = config.segment_ms
        self._index_interval = config.index_interval_bytes
        self.set_created(self.created_ms)  # roll_ms from the new segment.ms
        self.set_index_full(self._index_full)

    def set_index_full(self, full: bool) -> None:
        """A full index makes the next append roll (Kafka's rule), through ``roll_size``."""
        self._index_full = full
        #: bytes the file may reach (-1 once an index is full: the next append rolls)
        self.roll_size = -1 if full else self._segment_bytes

    def set_created(self, created_ms: int | None) -> None:
        """Set when the segment was created (the age roll bound follows); None: empty again."""
        self.created_ms = created_ms
        self.roll_ms = float("inf") if created_ms is None else created_ms + self._segment_ms

    def restart(self, next_offset: int, max_timestamp: int, offset_of_max_timestamp: int) -> None:
        """Start counting again from an index's last entry (opening, recovering, truncating): the
        batches after it are then :meth:`track`-ed."""
        self.next_offset = next_offset
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp
        self.bytes_since_index = 0
        self._time_handed = -1

    def set_holds_arrow(self, holds_arrow: bool | None) -> None:
        """What is known of the Arrow bodies in the file (a recovery scan starts from False)."""
        self.holds_arrow = holds_arrow

    def set_size(self, size: int) -> None:
        """The file now holds ``size`` bytes of whole batches (after a recovery scan or a truncation)."""
        self.size = size

    def track(
        self,
        base_offset: int,
        position: int,
        size: int,
        max_timestamp: int,
        next_offset: int,
        arrow: bool,
        index: bool,
    ) -> None:
        """Record a batch already in the file (opening, recovery), indexing it when ``index``."""
        if arrow:
            self.holds_arrow = True
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, base_offset
        if index and self.bytes_since_index >= self._index_interval and position:
            self._add_index_entries(base_offset, position)
            self.bytes_since_index = 0
        self.bytes_since_index += size
        self.next_offset = next_offset

    def _add_index_entries(self, base_offset: int, position: int) -> bool:
        """The batch at ``base_offset``/``position`` into the offset index and the largest timestamp so
        far into the time index; whether either is full now."""
        full = self._offset_index_append(base_offset, position)
        ts = self.max_timestamp
        if ts != self._time_handed:
            self._time_handed = ts
            full = self._time_index_append(ts, self.offset_of_max_timestamp) | full
        return full

    def record(
        self, start: int, n: int, batches: list[tuple[int, int, int, int, int]], arrow: bool, now: int
    ) -> None:
        """The general path wrote ``n`` bytes at ``start`` (the end) at ``now``: record and index its
        ``batches`` (per batch: position in the write, base offset, size, max timestamp, offsets spanned)."""
        if arrow:
            self.holds_arrow = True  # before the bytes are published to readers
        if self.created_ms is None:
            self.set_created(now)
        self.size = start + n  # publish: readers may now see these bytes
        interval = self._index_interval
        since = self.bytes_since_index
        for rel, base, size, ts, count in batches:
            if ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = ts, base
            pos = start + rel
            if since >= interval and pos:
                if self._add_index_entries(base, pos):
                    self.set_index_full(True)
                since = 0
            since += size
            self.next_offset = base + count
        self.bytes_since_index = since

    def append_plain(
        self,
        write: Callable[..., tuple[int, int, int, bool] | None],
        records: bytearray | memoryview,
        base_offset: int,
        leader_epoch: int,
        now: int,
    ) -> int | None:
        """Append a run of one plain batch in one format call, when it is one and needs no roll: ``write``
        (AppendValidator.write_plain) checks, stamps and writes it at the end of the file; this records it
        as :meth:`record` does and returns the next offset. None, nothing stamped or written, for any other
        run or when the segment must roll first (the general path); OSError (the file cut back, nothing
        recorded) when the write fails."""
        start = self.size
        if start and now >= self.roll_ms:  # the age roll bound (size and offset: write's)
            return None
        done = write(records, base_offset, leader_epoch, self.fd, start, self.roll_size, self.roll_offset)
        if done is None:
            return None
        size, nxt, ts, arrow = done
        if arrow:  # a Kafka-layout batch leaves it as it was (False, or None: unknown)
            self.holds_arrow = True  # before the bytes are published to readers
        if self.created_ms is None:
            self.set_created(now)
        self.size = start + size  # publish: readers may now see these bytes
        if ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = ts, base_offset
        since = self.bytes_since_index
        if since >= self._index_interval and start:
            if self._add_index_entries(base_offset, start):
                self.set_index_full(True)
            since = 0
        self.bytes_since_index = since + size
        self.next_offset = nxt
        return nxt


_cseg = load_extension(__package__ + "._cseg")
#: the one the segments use: compiled when built
SegmentTail = SegmentTailPy if _cseg is None else _cseg.SegmentTail
#: ``now_ms()``: wall-clock ms, as ``int(time.time() * 1000)`` (compiled: no float round trip)
now_ms = now_ms_py if _cseg is None else _cseg.now_ms
