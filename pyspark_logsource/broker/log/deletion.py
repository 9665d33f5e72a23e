"""How segments leave a partition log: retention, the cleaner's swap, truncation, delayed deletes.

Retention drops whole inactive segments by age and size; the cleaner swaps
cleaned segments in for the originals with Kafka's suffix protocol (see
:mod:`.loader` for how a restart finishes a swap); a follower truncates to
the leader's log, or starts over at an offset. A removed segment is renamed
``*.deleted`` at once and closed and unlinked after ``file.delete.delay.ms``
(readers may still hold regions of it).

It is a mixin of :class:`~.log.PartitionLog` (kept apart so the log module
stays readable): it uses the log's locks, view (through ``_set_segments``),
producer state, transaction index and epoch cache.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_right

from ...errors import InvalidRequest
from .loader import fault_point, fsync_dir, write_swap_meta
from .segment import LOG_SUFFIX, SWAP_SUFFIX, LogSegment

#: the log's own logger: retention is reported as the log's doing
log = logging.getLogger(__package__ + ".log")


class SegmentDeletionMixin:
    """Retention, segment replacement and truncation for PartitionLog."""

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention.ms and retention.bytes to whole, inactive segments; return how many went."""
        with self._lock:
            self._check_open()
            now = int(time.time() * 1000) if now_ms is None else now_ms
            segs = self._view.segments
            n = 0
            if not self.config.delete:
                n = 0  # cleanup.policy=compact: the cleaner, not retention, bounds the log
            elif self.config.retention_ms >= 0:
                while n < len(segs) - 1 and now - segs[n].max_timestamp > self.config.retention_ms:
                    n += 1
            if self.config.retention_bytes >= 0 and self.config.delete:
                excess = sum(s.size for s in segs) - self.config.retention_bytes
                for s in segs[:n]:
                    excess -= s.size
                while n < len(segs) - 1 and excess - segs[n].size >= 0:
                    excess -= segs[n].size
                    n += 1
            if n:
                self._remove_segments(segs[:n], segs[n:])
                log.info("%s: retention deleted %d segments; log start is now %d", self.name, n, self.log_start_offset)
        self.run_pending_deletes()
        return n

    def _remove_segments(self, gone: tuple[LogSegment, ...] | list[LogSegment], keep: tuple[LogSegment, ...]) -> None:
        self._set_segments(keep)
        due = time.monotonic() + self.config.file_delete_delay_ms / 1000
        for seg in gone:
            seg.rename_for_delete()
            self._pending_deletes.append((due, seg))

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> bool:
        """Swap the cleaned segment ``new`` (files ``*.cleaned``) in for ``old``: Kafka's suffix protocol.

        ``old`` must still be consecutive inactive segments of the log (retention or a
        truncation may have removed them meanwhile: then nothing changes and False
        is returned, ``new`` is destroyed). See :mod:`.loader` for the steps and how
        a restart finishes or rolls back a swap a crash interrupted.
        """
        with self._lock:
            segs = self._view.segments
            i = next((j for j, s in enumerate(segs) if s is old[0]), -1)
            if self._closed or i < 0 or i + len(old) >= len(segs) or any(
                a is not b for a, b in zip(segs[i : i + len(old)], old, strict=False)
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
            keep = (*segs[:i], new, *segs[i + len(old):])
            self._set_segments(keep)  # readers see the cleaned segment
            due = time.monotonic() + self.config.file_delete_delay_ms / 1000
            for seg in old:
                seg.rename_for_delete()  # open handles (regions being served) stay valid
                self._pending_deletes.append((due, seg))
            fault_point("deleted")
            new.change_suffix("")
            fsync_dir(self.directory)
            fault_point("renamed")
            meta.unlink(missing_ok=True)
            return True

    def run_pending_deletes(self, force: bool = False) -> int:
        """Close and unlink segments whose ``file.delete.delay.ms`` passed; return how many."""
        with self._lock:
            now = time.monotonic()
            due = [s for t, s in self._pending_deletes if force or t <= now]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if not (force or t <= now)]
        for seg in due:
            seg.destroy()
        return len(due)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after the one holding ``offset``; return the new log end."""
        with self._flush_lock, self._lock:  # no flush may write an older recovery point after ours
            self._check_open()
            if offset >= self._leo:
                return self._leo
            segs = self._view.segments
            if offset <= segs[0].base_offset:
                keep_n = 1
            else:
                keep_n = bisect_right(self._view.bases, offset)
            keep, gone = segs[:keep_n], segs[keep_n:]
            if gone:
                self._remove_segments(gone, keep)
            last = keep[-1]
            if offset <= last.base_offset:
                last.truncate_to(last.base_offset)
            else:
                last.truncate_to(offset)
            self._leo = last.next_offset
            self._recovery_point = min(self._recovery_point, self._leo)
            self._write_recovery_point()
            self.epochs.truncate_from_end(self._leo)
            self.producer_state.delete_snapshots_after(self._leo)
            self.txns.delete_snapshots_after(self._leo)
            self._rebuild_producer_state()
            return self._leo

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log, empty, at ``offset`` (a follower far behind the leader)."""
        if offset < 0:
            raise InvalidRequest(f"cannot start a log at negative offset {offset}")
        with self._flush_lock, self._lock:
            self._check_open()
            gone = list(self._view.segments)
            for seg in gone:
                seg.rename_for_delete()  # frees the names: the new segment may reuse a base offset
            for suffix in (LOG_SUFFIX, ".index", ".timeindex"):
                (self.directory / f"{offset:020d}{suffix}").unlink(missing_ok=True)
            seg = LogSegment(self.directory, offset, self.config)
            self._set_segments((seg,))
            due = time.monotonic() + self.config.file_delete_delay_ms / 1000
            self._pending_deletes.extend((due, s) for s in gone)
            self._leo = self._recovery_point = offset
            self._write_recovery_point()
            self.epochs.clear()
            if self._hw is not None:
                self._hw = offset
            self.producer_state.delete_snapshots_after(-1)
            self.producer_state.producers = {}
            self.txns.delete_snapshots_after(-1)
            self.txns.reset()
