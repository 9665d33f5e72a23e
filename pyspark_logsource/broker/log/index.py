"""Sparse per-segment indexes: offset -> file position and timestamp -> offset.

Both are files of fixed-width big-endian entries (as Kafka's), relative to the
segment's base offset, appended every ``index.interval.bytes`` of log. The
entries live in memory as two ``array`` columns so that a lookup is one
C-level binary search (``bisect``); the file is only read on open, and new
entries reach it at ``flush``/``close`` (write-behind, as Kafka's mmap'd
indexes reach the disk when flushed): an append only adds to the arrays. An
index that fails its sanity check is rebuilt by its segment from the log, and
a segment not flushed before a crash is recovered (its indexes rebuilt), so
the index files never need more than that for correctness.

Concurrency: appends and truncation happen under the partition lock; lookups
run without a lock. Appends add the payload column before the key column, so
a reader that finds an entry by key always finds its payload.
"""

from __future__ import annotations

import os
import struct
import threading
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

import numpy as np

from ...format._speedups import load_extension

#: the compiled twins of the two appends (``_cseg``), None when switched off or not built
_cseg = load_extension(__package__ + "._cseg")


class CorruptIndexError(Exception):
    """An index file failed its sanity check; the segment rebuilds it."""


class _Index:
    ENTRY: struct.Struct
    KEY_CODE: str
    VALUE_CODE: str

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.ENTRY.size)
        self._keys = array(self.KEY_CODE)
        self._values = array(self.VALUE_CODE)
        self._load_error: str | None = None
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
            self._load_error = "missing"
        if len(data) % self.ENTRY.size:
            self._load_error = f"size {len(data)} is not a multiple of {self.ENTRY.size}"
        else:
            self._parse(data)
        #: entries already in the file; the rest are written by :meth:`_write_pending`
        self._written = len(self._keys)
        # A flush (the log manager's thread) and a roll (the appending thread) may write the
        # pending entries of one segment at once: one of them writes each entry.
        self._write_lock = threading.Lock()
        self._file = open(self.path, "ab")  # noqa: SIM115 - owned for the index's lifetime

    # -- subclass hooks
    def _parse(self, data: bytes) -> None:
        raise NotImplementedError

    # -- common
    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        """True when one more entry would exceed ``segment.index.bytes``."""
        return len(self._keys) >= self.max_entries

    def _write_pending(self) -> None:
        with self._write_lock:
            n = len(self._keys)
            if self._written < n:
                self._file.write(self._file_bytes(self._written, n))
                self._written = n

    def _rewrite(self) -> None:
        with self._write_lock:
            self._file.flush()
            os.ftruncate(self._file.fileno(), 0)
            n = len(self._keys)
            self._file.write(self._file_bytes(0, n))
            self._written = n

    def _columns(self, start: int, end: int) -> tuple[array, array]:
        """Copies of entries ``[start, end)``: appends may run meanwhile (without the partition lock, as
        a flush does), and an array exporting its buffer (to numpy) could not grow; one slice is atomic."""
        return self._keys[start:end], self._values[start:end]

    def _file_bytes(self, start: int, end: int) -> bytes:
        """Entries ``[start, end)``, as the file holds them."""
        raise NotImplementedError

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._keys = array(self.KEY_CODE)
        self._values = array(self.VALUE_CODE)
        self._load_error = None
        with self._write_lock:
            self._written = 0
            self._file.flush()
            os.ftruncate(self._file.fileno(), 0)

    def flush(self) -> None:
        """Write pending entries and fsync the file."""
        self._write_pending()
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        """Write pending entries and close the file."""
        if not self._file.closed:
            self._write_pending()
            self._file.close()

    def rename(self, new_path: Path) -> None:
        """Move the file (the open handle stays valid)."""
        os.replace(self.path, new_path)
        self.path = Path(new_path)

    def delete(self) -> None:
        """Close and remove the file."""
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_Index):
    """Entries (relative base offset of a batch, its position in the segment file)."""

    ENTRY = struct.Struct(">II")
    KEY_CODE = "I"
    VALUE_CODE = "I"

    def _parse(self, data: bytes) -> None:
        cols = np.frombuffer(data, dtype=">u4").reshape(-1, 2).astype("=u4")
        self._keys.frombytes(np.ascontiguousarray(cols[:, 0]).tobytes())
        self._values.frombytes(np.ascontiguousarray(cols[:, 1]).tobytes())

    def _file_bytes(self, start: int, end: int) -> bytes:
        keys, values = self._columns(start, end)
        cols = np.empty((end - start, 2), dtype=">u4")
        cols[:, 0] = np.frombuffer(keys, dtype="=u4")
        cols[:, 1] = np.frombuffer(values, dtype="=u4")
        return cols.tobytes()

    def sanity_check(self, segment_size: int) -> None:
        """Raise CorruptIndexError unless entries are increasing and inside the segment."""
        if self._load_error:
            raise CorruptIndexError(f"{self.path.name}: {self._load_error}")
        n = len(self._keys)
        if n == 0:
            return
        keys = np.frombuffer(self._keys, dtype="=u4").astype(np.int64)
        vals = np.frombuffer(self._values, dtype="=u4").astype(np.int64)
        if n > self.max_entries:
            raise CorruptIndexError(f"{self.path.name}: {n} entries exceed the limit {self.max_entries}")
        if n > 1 and (bool((np.diff(keys) <= 0).any()) or bool((np.diff(vals) <= 0).any())):
            raise CorruptIndexError(f"{self.path.name}: entries are not strictly increasing")
        if int(vals[-1]) >= segment_size:
            raise CorruptIndexError(
                f"{self.path.name}: entry points at {int(vals[-1])}, beyond the segment ({segment_size})"
            )

    def append_py(self, offset: int, position: int) -> bool:
        """Add an entry for the batch starting at ``offset``/``position`` (both increasing);
        return whether the index is full now. The reference: :meth:`append` is ``_cseg``'s compiled twin
        when built (one per segment append; the same entries, result and errors), this otherwise."""
        keys = self._keys
        rel = offset - self.base_offset
        if keys and rel <= keys[-1]:
            return False
        self._values.append(position)
        keys.append(rel)
        return len(keys) >= self.max_entries

    append = append_py if _cseg is None else _cseg.offset_index_append

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before ``offset``; (base, 0) if none."""
        rel = offset - self.base_offset
        if rel < 0:
            return self.base_offset, 0
        i = bisect_right(self._keys, min(rel, 0xFFFFFFFF)) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[i], self._values[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before file ``position``."""
        i = bisect_right(self._values, min(position, 0xFFFFFFFF)) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[i], self._values[i]

    @property
    def last_entry(self) -> tuple[int, int]:
        """(offset, position) of the last entry; (base, 0) when empty."""
        if not self._keys:
            return self.base_offset, 0
        return self.base_offset + self._keys[-1], self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove entries for batches at or after ``offset``."""
        i = bisect_left(self._keys, max(0, offset - self.base_offset))
        if i < len(self._keys):
            del self._keys[i:]
            del self._values[i:]
            self._rewrite()


class TimeIndex(_Index):
    """Entries (largest timestamp so far, relative offset of the record holding it)."""

    ENTRY = struct.Struct(">qI")
    KEY_CODE = "q"
    VALUE_CODE = "I"

    def _parse(self, data: bytes) -> None:
        rows = np.frombuffer(data, dtype=np.dtype([("ts", ">i8"), ("off", ">u4")]))
        self._keys.frombytes(rows["ts"].astype("=i8").tobytes())
        self._values.frombytes(rows["off"].astype("=u4").tobytes())

    def _file_bytes(self, start: int, end: int) -> bytes:
        keys, values = self._columns(start, end)
        rows = np.empty(end - start, dtype=np.dtype([("ts", ">i8"), ("off", ">u4")]))
        rows["ts"] = np.frombuffer(keys, dtype="=i8")
        rows["off"] = np.frombuffer(values, dtype="=u4")
        return rows.tobytes()

    def sanity_check(self, next_offset: int) -> None:
        """Raise CorruptIndexError unless entries increase and point inside the segment."""
        if self._load_error:
            raise CorruptIndexError(f"{self.path.name}: {self._load_error}")
        n = len(self._keys)
        if n == 0:
            return
        if n > self.max_entries:
            raise CorruptIndexError(f"{self.path.name}: {n} entries exceed the limit {self.max_entries}")
        ts = np.frombuffer(self._keys, dtype="=i8")
        offs = np.frombuffer(self._values, dtype="=u4").astype(np.int64)
        if n > 1 and (bool((np.diff(ts) <= 0).any()) or bool((np.diff(offs) < 0).any())):
            raise CorruptIndexError(f"{self.path.name}: entries are not increasing")
        if self.base_offset + int(offs[-1]) >= next_offset:
            raise CorruptIndexError(f"{self.path.name}: entry points beyond the segment's last offset")

    def maybe_append_py(self, timestamp: int, offset: int) -> bool:
        """Add an entry if ``timestamp`` is larger than the last one; return whether one was added
        and the index is full now. The reference: :meth:`maybe_append` is ``_cseg``'s compiled twin when
        built, this otherwise."""
        keys = self._keys
        if keys and timestamp <= keys[-1]:
            return False
        self._values.append(offset - self.base_offset)
        keys.append(timestamp)
        return len(keys) >= self.max_entries

    maybe_append = maybe_append_py if _cseg is None else _cseg.time_index_maybe_append

    def lookup_before(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry whose timestamp is < ``timestamp``; None if none."""
        i = bisect_left(self._keys, timestamp) - 1
        if i < 0:
            return None
        return self._keys[i], self.base_offset + self._values[i]

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry, or None."""
        if not self._keys:
            return None
        return self._keys[-1], self.base_offset + self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove entries pointing at ``offset`` or later."""
        rel = offset - self.base_offset
        n = len(self._values)
        keep = n
        while keep and self._values[keep - 1] >= rel:  # few entries past a truncation point
            keep -= 1
        if keep < n:
            del self._keys[keep:]
            del self._values[keep:]
            self._rewrite()
