"""A log segment: one ``.log`` file of record batches plus its two sparse indexes.

The file name is the segment's base offset in 20 digits. The segment never
parses a batch body: it reads 61-byte headers with ``os.pread`` to walk from an
index entry to the batch it wants, and it CRC-checks whole batches only when
recovering a file after a crash.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np

from ...errors import CorruptRecord
from ...format import header as fmt
from ...format.runs import decode
from .config import LogConfig
from .index import CorruptIndexError, OffsetIndex, TimeIndex
from .segment_tail import SegmentTail, now_ms

log = logging.getLogger(__name__)

LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX = ".log", ".index", ".timeindex"
DELETED_SUFFIX = ".deleted"
#: the log cleaner's suffixes (Kafka's): a segment being written, and one ready to replace its originals
CLEANED_SUFFIX, SWAP_SUFFIX = ".cleaned", ".swap"
_RECOVERY_CHUNK = 8 << 20


def segment_name(base_offset: int) -> str:
    """The 20-digit file stem of a segment."""
    return f"{base_offset:020d}"


class FileRegion(NamedTuple):
    """Whole batches in a segment file, ready for ``os.sendfile(sock, file.fileno(), position, length)``.

    ``may_hold_arrow``: the segment holds Arrow-bodied batches, so a Kafka client
    must get this region converted; False means Kafka's layout only (sendfile as
    is); None means unknown (look at the region's batch headers).
    """

    file: BinaryIO
    position: int
    length: int
    may_hold_arrow: bool | None = None


class LogSegment:
    """A segment file and its offset and time indexes."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, suffix: str = "") -> None:
        """``suffix`` (``.cleaned``, ``.swap``) names a segment the cleaner is writing or swapping in."""
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.config = config
        stem = segment_name(base_offset)
        self.suffix = suffix
        self.log_path = self.directory / (stem + LOG_SUFFIX + suffix)
        mode = "r+b" if self.log_path.exists() else "w+b"
        self.file: BinaryIO = open(self.log_path, mode, buffering=0)  # noqa: SIM115 - owned by the segment
        self._fd = self.file.fileno()
        self.offset_index = OffsetIndex(
            self.directory / (stem + INDEX_SUFFIX + suffix), base_offset, config.segment_index_bytes
        )
        self.time_index = TimeIndex(
            self.directory / (stem + TIMEINDEX_SUFFIX + suffix), base_offset, config.segment_index_bytes
        )
        self.deleted = False
        #: the append end: size, next offset, largest timestamp, bytes since the last index entry and
        #: Kafka's roll bounds (one owner: only its methods change them); the attributes below read it
        self.tail = SegmentTail(
            self._fd,
            base_offset,
            os.fstat(self._fd).st_size,
            config,
            self.offset_index.append,
            self.time_index.maybe_append,
        )
        #: the log's one call per plain produce (see SegmentTail.append_plain): the tail's own method,
        #: with no Python frame of the segment's between
        self.append_plain = self.tail.append_plain

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size})"

    @property
    def size(self) -> int:
        """Bytes of whole batches in the file; readers never look past it."""
        return self.tail.size

    @property
    def next_offset(self) -> int:
        """The offset after the segment's last batch."""
        return self.tail.next_offset

    @property
    def max_timestamp(self) -> int:
        """The largest batch max timestamp in the segment (-1: none)."""
        return self.tail.max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms measures (Kafka's LogSegment.largestTimestamp): the largest record timestamp,
        or the file's last modification (ms) when no record has one."""
        ts = self.tail.max_timestamp
        if ts >= 0:
            return ts
        if self.file.closed:  # removed and closed: its descriptor's number may be another file's now
            return -1
        try:
            return int(os.fstat(self._fd).st_mtime * 1000)
        except OSError:  # closed between the check and the call
            return -1

    @property
    def offset_of_max_timestamp(self) -> int:
        """The base offset of the first batch holding :attr:`max_timestamp`."""
        return self.tail.offset_of_max_timestamp

    @property
    def holds_arrow(self) -> bool | None:
        """Some batch has our Arrow body (Kafka clients then need this segment's regions converted);
        None: unknown (a file opened without a scan of its headers), so readers look per region."""
        return self.tail.holds_arrow

    # Kafka's roll rule as three bounds, kept up to date by the tail where their inputs change, so that
    # an append checks it with three comparisons (see should_roll)
    @property
    def roll_size(self) -> int:
        """Bytes the file may reach (-1 once an index is full: the next append rolls)."""
        return self.tail.roll_size

    @property
    def roll_offset(self) -> int:
        """The last offset the segment may hold (relative offsets are 32-bit)."""
        return self.tail.roll_offset

    @property
    def roll_ms(self) -> int | float:
        """When the segment is segment.ms old (infinity while empty)."""
        return self.tail.roll_ms

    @property
    def created_ms(self) -> int | None:
        """Wall-clock ms of the first append (or of opening a non-empty file); None while empty."""
        return self.tail.created_ms

    @created_ms.setter
    def created_ms(self, value: int | None) -> None:
        self.tail.set_created(value)

    def set_config(self, config: LogConfig) -> None:
        """A dynamic config change (segment.bytes, segment.ms, ...): the roll bounds follow it at once, as
        Kafka's active segment rolls by the log's current config; the index sizes stay as made."""
        self.config = config
        self.tail.set_config(config)

    def _check_index_room(self) -> None:
        """A full index makes the next append roll (Kafka's rule), through ``roll_size``."""
        self.tail.set_index_full(self.offset_index.is_full or self.time_index.is_full)

    # ------------------------------------------------------------ opening

    def load(self) -> None:
        """Open a segment that needs no recovery: check indexes, read the tail past the last entry.

        A failed index check or an impossible header makes the segment rebuild
        its indexes from the batch headers (no CRC: this is not recovery).
        """
        try:
            self.offset_index.sanity_check(self.size)
            self._load_tail()
            self.time_index.sanity_check(self.next_offset)
        except (CorruptIndexError, CorruptRecord) as e:
            log.warning("%s: rebuilding indexes (%s)", self.log_path, e)
            self.rebuild_indexes()
        if self.size:
            self.created_ms = now_ms()
        self._check_index_room()

    def _load_tail(self) -> None:
        off, pos = self.offset_index.last_entry
        last = self.time_index.last_entry
        self.tail.restart(off, *(last if last else (-1, self.base_offset)))
        while pos < self.size:
            h = self._header_at(pos)
            if not self._follows(h.base_offset) or pos + h.size > self.size:
                raise CorruptRecord(
                    f"batch at position {pos} of {self.log_path.name} does not follow its predecessor"
                )
            self._track(h, pos, index=False)
            pos += h.size
        if pos != self.size:
            raise CorruptRecord(f"{self.log_path.name} ends inside a batch")

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from batch headers; truncate at the first impossible header."""
        self._scan(check_crc=False)

    def recover(self) -> int:
        """CRC-check every batch, rebuild indexes, truncate the torn or invalid tail; return bytes cut."""
        return self._scan(check_crc=True)

    def _scan(self, check_crc: bool) -> int:
        self.offset_index.reset()
        self.time_index.reset()
        self.tail.restart(self.base_offset, -1, self.base_offset)
        self.tail.set_holds_arrow(False)
        size = os.fstat(self._fd).st_size
        pos, want = 0, _RECOVERY_CHUNK
        why = ""
        while pos < size and not why:
            buf = os.pread(self._fd, want, pos)
            errors: list[Exception] = []
            batches = fmt.walk(buf, check_crc=check_crc, errors=errors)
            for rel, h in batches:
                if not self._follows(h.base_offset):
                    why = f"base offset {h.base_offset}, expected {self.next_offset}"
                    break
                self._track(h, pos + rel, index=True)
            else:
                if batches:
                    rel, h = batches[-1]
                    pos += rel + h.size
                    want = _RECOVERY_CHUNK
                if errors:
                    why = str(errors[0])
                elif not batches:
                    # the next batch is larger than the chunk, or the tail is torn
                    try:
                        h = fmt.read_header(buf)
                    except CorruptRecord as e:
                        why = str(e)
                        break
                    if pos + h.size > size:
                        why = f"torn batch: {size - pos} of {h.size} bytes"
                    want = h.size
                continue
            pos += rel  # the batch with the unexpected base offset is where the log ends
        cut = size - pos
        if cut:
            log.warning("%s: truncating %d bytes at position %d (%s)", self.log_path, cut, pos, why)
            os.ftruncate(self._fd, pos)
        self.tail.set_size(pos)
        if pos:
            self.created_ms = now_ms()
        self.offset_index.flush()
        self.time_index.flush()
        self._check_index_room()
        return cut

    def _follows(self, base_offset: int) -> bool:
        """Whether a batch at ``base_offset`` may come next: compaction leaves gaps (in compacted
        logs and the cleaner's segments), never overlaps; elsewhere a gap is damage."""
        if self.config.compact or self.suffix:
            return base_offset >= self.next_offset
        return base_offset == self.next_offset

    # ------------------------------------------------------------ appending

    def _track(self, h: fmt.BatchHeader, pos: int, *, index: bool) -> None:
        self.tail.track(
            h.base_offset,
            pos,
            h.batch_length + fmt.LOG_OVERHEAD,
            h.max_timestamp,
            h.base_offset + h.last_offset_delta + 1,
            h.is_arrow_body,
            index,
        )

    def append(
        self,
        data: memoryview | list[memoryview],
        batches: list[tuple[int, int, int, int, int]],
        *,
        arrow: bool = True,
    ) -> None:
        """Write stamped batches at the end and index them.

        ``data``: one buffer, or several written together (one ``pwritev``) as if
        joined. ``batches`` holds, per batch: position in ``data``, base offset,
        size, max timestamp, offsets spanned (the record count, except in a
        compacted batch); ``arrow``: some of them have our Arrow body.
        """
        start = self.size
        try:
            if type(data) is list:
                n = sum(map(len, data))
                written = os.pwritev(self._fd, data, start)
                if written < n:
                    data = memoryview(b"".join(data))
            else:
                n = len(data)
                written = os.pwrite(self._fd, data, start)
            while written < n:
                written += os.pwrite(self._fd, data[written:], start + written)
        except OSError:
            os.ftruncate(self._fd, start)  # all or nothing
            raise
        self.tail.record(start, n, batches, arrow, now_ms())

    def should_roll(self, incoming_bytes: int, last_offset: int, now_ms: int) -> bool:
        """Kafka's roll rule: size, age, a full index, or a relative offset that would overflow."""
        return bool(self.size) and (
            self.size + incoming_bytes > self.roll_size
            or now_ms >= self.roll_ms
            or last_offset > self.roll_offset
        )

    def seal_time_index(self) -> None:
        """Add the segment's largest timestamp as the last time index entry (it may lie past the last one)."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def on_roll(self) -> None:
        """Seal the segment: final time index entry, everything on disk."""
        self.seal_time_index()
        self.flush()

    def flush(self) -> None:
        """fsync the log file and the indexes."""
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()

    def sync_data(self) -> None:
        """fdatasync the log file only (its records durable; the indexes are rebuilt from them if lost)."""
        os.fdatasync(self._fd)

    # ------------------------------------------------------------ reading

    def _header_at(self, pos: int) -> fmt.BatchHeader:
        return fmt.read_header(os.pread(self._fd, fmt.HEADER_SIZE, pos))

    def find(self, offset: int, size: int | None = None) -> tuple[int, fmt.BatchHeader | None]:
        """Position and header of the first batch whose last offset is >= ``offset`` (None past the end)."""
        size = self.size if size is None else size
        _, pos = self.offset_index.lookup(offset)
        while pos < size:
            h = self._header_at(pos)
            if h.next_offset > offset:
                return pos, h
            pos += h.size
        return size, None

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, size: int | None = None
    ) -> FileRegion | None:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (at least one batch).

        ``max_offset`` (exclusive) stops before the first batch starting at or past it.
        Returns None when ``offset`` is past this segment.
        """
        size = self.size if size is None else size
        pos, h = self.find(offset, size)
        if h is None:
            return None
        limit = size
        if max_offset is not None:
            if h.base_offset >= max_offset:
                return FileRegion(self.file, pos, 0, self.holds_arrow)
            mpos, mh = self.find(max_offset - 1, size)
            limit = mpos + mh.size if mh is not None else size
        target = pos + max(0, max_bytes)
        if target >= limit:
            return FileRegion(self.file, pos, limit - pos, self.holds_arrow)
        _, p = self.offset_index.lookup_position(target)
        p = max(p, pos)
        while p < limit:
            hh = h if p == pos else self._header_at(p)  # the first batch's header is read already
            if p + hh.size > target:
                break
            p += hh.size
        end = p if p > pos else pos + h.size
        return FileRegion(self.file, pos, end - pos, self.holds_arrow)

    def iter_headers(self, from_offset: int, size: int | None = None) -> Iterator[fmt.BatchHeader]:
        """Headers of the batches from the one holding ``from_offset`` (one pread each, no bodies)."""
        size = self.size if size is None else size
        pos, h = self.find(from_offset, size)
        while h is not None:
            yield h
            pos += h.size
            h = self._header_at(pos) if pos < size else None

    def find_timestamp(self, timestamp: int) -> int | None:
        """First offset in this segment whose record timestamp is >= ``timestamp``."""
        entry = self.time_index.lookup_before(timestamp)
        size = self.size
        pos, h = self.find(entry[1] if entry else self.base_offset, size)
        while h is not None:
            if h.max_timestamp >= timestamp:
                if h.timestamp_type == fmt.LOG_APPEND_TIME:
                    return h.base_offset
                rb = decode(os.pread(self._fd, h.size, pos)).to_arrow()
                ts = rb.column(3).cast("int64").to_numpy()
                # the offset column, not base + index: a compacted batch has gaps
                return int(rb.column(2)[int(np.argmax(ts >= timestamp))].as_py())
            pos += h.size
            h = self._header_at(pos) if pos < size else None
        return None

    # ------------------------------------------------------------ truncation and deletion

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and everything after; return bytes removed."""
        pos, h = self.find(offset)
        if h is None:
            return 0
        removed = self.size - pos
        self.tail.set_size(pos)
        os.ftruncate(self._fd, pos)
        self.offset_index.truncate_to(h.base_offset)
        self.time_index.truncate_to(h.base_offset)
        self._load_tail()
        if pos == 0:
            self.created_ms = None
        self._check_index_room()
        return removed

    def change_suffix(self, new_suffix: str) -> None:
        """Rename the files from this segment's suffix to ``new_suffix``: indexes first, the log last
        (the log file's name is what recovery trusts). Open handles stay valid."""
        stem = segment_name(self.base_offset)
        for idx, name in ((self.offset_index, INDEX_SUFFIX), (self.time_index, TIMEINDEX_SUFFIX)):
            idx.rename(self.directory / (stem + name + new_suffix))
        new = self.directory / (stem + LOG_SUFFIX + new_suffix)
        os.replace(self.log_path, new)
        self.log_path, self.suffix = new, new_suffix

    def rename_for_delete(self) -> None:
        """Rename every file to ``*.deleted``; open handles (and served regions) stay valid."""
        new = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        os.replace(self.log_path, new)
        self.log_path = new
        for idx in (self.offset_index, self.time_index):
            idx.rename(idx.path.with_name(idx.path.name + DELETED_SUFFIX))
        self.deleted = True

    def close(self) -> None:
        """Seal the time index and close every file."""
        if not self.file.closed:
            if not self.deleted:
                self.seal_time_index()
            self.offset_index.close()
            self.time_index.close()
            self.file.close()

    def destroy(self) -> None:
        """Close and remove the files."""
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.path.unlink(missing_ok=True)
        self.time_index.path.unlink(missing_ok=True)
