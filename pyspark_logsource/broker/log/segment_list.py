"""The segment list of a partition log: its view, roll, retention, the cleaner's swap, truncation, deletes.

In memory the list is a copy-on-write view ``(base offsets, segments)``:
rolls, retention, swaps and truncation build a new view and publish it with
one assignment, so a reader takes :attr:`SegmentList.view` without a lock and
a delete never blocks it. The last segment is the active one (appends go
there). Changes are made under the owning log's partition lock.

Retention drops whole segments by age and size (the active one only after
the log rolled it: see ``PartitionLog.delete_old_segments``); the cleaner swaps
cleaned segments in for the originals with Kafka's suffix protocol (see
:mod:`.loader` for how a restart finishes a swap); a follower truncates to
the leader's log, or starts over at an offset. A removed segment is renamed
``*.deleted`` at once and closed and unlinked after ``file.delete.delay.ms``
(readers may still hold regions of it).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from .config import LogConfig
from .loader import fault_point, fsync_dir, write_swap_meta
from .segment import INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIMEINDEX_SUFFIX, LogSegment, segment_name


class SegmentView(NamedTuple):
    """The segments, oldest first, and their base offsets (for ``bisect``)."""

    bases: list[int]
    segments: tuple[LogSegment, ...]


class SegmentList:
    """The segments of one partition log in ``directory`` (at least one; the last is active)."""

    def __init__(self, directory: Path, config: LogConfig, segments: Sequence[LogSegment]) -> None:
        self.directory = Path(directory)
        self.config = config
        #: read without a lock; replaced, never changed, by the methods below
        self.view = SegmentView([], ())
        #: the segment appends go to (the view's last)
        self.active: LogSegment = segments[-1]
        self._told: Callable[[LogSegment], None] | None = None
        self._publish(segments)
        self._pending: list[tuple[float, LogSegment]] = []  # (monotonic due time, segment) to destroy
        self._pending_lock = threading.Lock()

    def tell_active(self, told: Callable[[LogSegment], None]) -> None:
        """Call ``told(segment)`` with the active segment now and whenever another one becomes active (the
        log's append end keeps it)."""
        self._told = told
        told(self.active)

    def _set_active(self, seg: LogSegment) -> None:
        self.active = seg
        if self._told is not None:
            self._told(seg)

    def _publish(self, segments: Sequence[LogSegment]) -> None:
        self.view = SegmentView([s.base_offset for s in segments], tuple(segments))
        self._set_active(segments[-1])

    # ------------------------------------------------------------ reads (no lock)

    @property
    def start_offset(self) -> int:
        """Base offset of the first segment (the log start)."""
        return self.view.segments[0].base_offset

    @property
    def size_bytes(self) -> int:
        """Bytes of all segments."""
        return sum(s.size for s in self.view.segments)

    def from_offset(self, offset: int) -> tuple[LogSegment, ...]:
        """The segments that may hold ``offset`` or later ones."""
        bases, segs = self.view
        return segs[max(0, bisect_right(bases, offset) - 1) :]

    # ------------------------------------------------------------ changes (under the log's lock)

    def set_config(self, config: LogConfig) -> None:
        """A dynamic config change: new segments, retention and the active segment's roll bounds use it."""
        self.config = config
        for seg in self.view.segments:
            seg.set_config(config)

    def roll(self, offset: int) -> LogSegment:
        """Seal the active segment (final time index entry, fsynced) and start a new, empty one at ``offset``."""
        self.active.on_roll()
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX):
            (self.directory / (segment_name(offset) + suffix)).unlink(missing_ok=True)
        seg = LogSegment(self.directory, offset, self.config)
        seg.created_ms = None
        bases, segs = self.view
        self.view = SegmentView([*bases, offset], (*segs, seg))
        self._set_active(seg)
        return seg

    def expired(self, now_ms: int, *, with_active: bool = False) -> int:
        """How many of the oldest segments retention.ms and retention.bytes expire (Kafka's rules); the
        active one counts only ``with_active`` and when it holds something."""
        config = self.config
        segs = self.view.segments
        if not config.delete:
            return 0  # cleanup.policy=compact: the cleaner, not retention, bounds the log
        limit = len(segs) if with_active and segs[-1].size else len(segs) - 1
        n = 0
        if config.retention_ms >= 0:
            while n < limit and now_ms - segs[n].largest_timestamp > config.retention_ms:
                n += 1
        if config.retention_bytes >= 0:
            excess = sum(s.size for s in segs) - config.retention_bytes
            for s in segs[:n]:
                excess -= s.size
            while n < limit and excess - segs[n].size >= 0:
                excess -= segs[n].size
                n += 1
        return n

    def delete_expired(self, now_ms: int) -> int:
        """Remove the oldest inactive segments that retention.ms and retention.bytes expire; return how many."""
        segs = self.view.segments
        n = self.expired(now_ms)
        if n:
            self._remove(segs[:n], segs[n:])
        return n

    def delete_below(self, offset: int) -> int:
        """Remove the segments wholly below ``offset`` (the next one starts at or below it; never the
        active one): the log start moved there. Returns how many went."""
        bases, segs = self.view
        n = 0
        while n < len(segs) - 1 and bases[n + 1] <= offset:
            n += 1
        if n:
            self._remove(segs[:n], segs[n:])
        return n

    def replace(self, old: list[LogSegment], new: LogSegment) -> bool:
        """Swap the cleaned segment ``new`` (files ``*.cleaned``) in for ``old``: Kafka's suffix protocol.

        ``old`` must still be consecutive inactive segments (retention or a truncation may
        have removed them meanwhile: then nothing changes and False is returned, ``new`` is
        destroyed). See :mod:`.loader` for the steps and how a restart finishes or rolls
        back a swap a crash interrupted.
        """
        segs = self.view.segments
        i = next((j for j, s in enumerate(segs) if s is old[0]), -1)
        if (
            i < 0
            or i + len(old) >= len(segs)
            or any(a is not b for a, b in zip(segs[i : i + len(old)], old, strict=False))
        ):
            new.destroy()
            return False
        meta = write_swap_meta(self.directory, new.base_offset, [s.base_offset for s in old])
        new.seal_time_index()
        new.flush()
        fault_point("cleaned")
        new.change_suffix(SWAP_SUFFIX)
        fsync_dir(self.directory)  # committed: a restart now completes the swap
        fault_point("swap")
        self._remove(old, (*segs[:i], new, *segs[i + len(old) :]))  # readers see the cleaned segment
        fault_point("deleted")
        new.change_suffix("")
        fsync_dir(self.directory)
        fault_point("renamed")
        meta.unlink(missing_ok=True)
        return True

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after the one holding ``offset``; return the next offset after the rest."""
        bases, segs = self.view
        keep_n = 1 if offset <= segs[0].base_offset else bisect_right(bases, offset)
        keep, gone = segs[:keep_n], segs[keep_n:]
        if gone:
            self._remove(gone, keep)
        last = keep[-1]
        last.truncate_to(max(offset, last.base_offset))
        return last.next_offset

    def reset_at(self, offset: int) -> None:
        """Remove every segment and start over with one empty segment at ``offset``."""
        gone = self.view.segments
        for seg in gone:
            seg.rename_for_delete()  # frees the names: the new segment may reuse a base offset
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX):
            (self.directory / (segment_name(offset) + suffix)).unlink(missing_ok=True)
        self._publish((LogSegment(self.directory, offset, self.config),))
        self._delete_later(gone)

    def _remove(self, gone: Sequence[LogSegment], keep: Sequence[LogSegment]) -> None:
        self._publish(keep)
        for seg in gone:
            seg.rename_for_delete()  # open handles (regions being served) stay valid
        self._delete_later(gone)

    def _delete_later(self, gone: Sequence[LogSegment]) -> None:
        due = time.monotonic() + self.config.file_delete_delay_ms / 1000
        with self._pending_lock:
            self._pending.extend((due, s) for s in gone)

    # ------------------------------------------------------------ deletes and closing (any thread)

    def run_pending_deletes(self, force: bool = False) -> int:
        """Close and unlink removed segments whose ``file.delete.delay.ms`` passed (all: ``force``); return how many."""
        with self._pending_lock:
            now = time.monotonic()
            due = [s for t, s in self._pending if force or t <= now]
            self._pending = [(t, s) for t, s in self._pending if not (force or t <= now)]
        for seg in due:
            seg.destroy()
        return len(due)

    def close(self) -> None:
        """Close every segment's files (the removed ones' too: see :meth:`run_pending_deletes`)."""
        for seg in self.view.segments:
            seg.close()
