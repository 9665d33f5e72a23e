"""Appending several produce requests' runs of one partition together.

A producer that sends one message per request and pipelines its requests
delivers dozens of them in one network read, all for the same partition. Each
is its own all-or-nothing append with its own answer, but appending them one
by one costs one lock, one ``pwrite``, one flush check and one index update
each. :meth:`CoalescedAppendMixin.append_runs` checks each run as
:meth:`~.log.PartitionLog.append` does, gives the good ones consecutive
offsets under one lock, writes them with one ``pwritev`` and answers each run
alone: a run that fails (a bad CRC, a sequence gap) gets its error and changes
nothing, and the runs after it are checked as if it had never come.

It is a mixin of :class:`~.log.PartitionLog` (kept apart so the log module
stays readable): it uses the log's checks, stamping, lock, view and roll.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ...errors import LogSourceError, StorageError
from .producer_state import ProducerAppend

if TYPE_CHECKING:
    from .log import AppendInfo

#: runs per ``pwritev`` (below the kernel's IOV_MAX of 1024 buffers)
MAX_COALESCED_RUNS = 512


class CoalescedAppendMixin:
    """``append_runs`` for PartitionLog."""

    def append_runs(self, runs: list) -> list[AppendInfo | LogSourceError]:
        """Append each run of batches as :meth:`append` would, in order; return its AppendInfo or its error.

        Transactional runs, and a group whose bytes would roll the segment, are appended one
        by one (the same result: the coalesced path only saves per-run overhead).
        """
        from .log import _ARROW, _IDEMPOTENT, _TRANSACTIONAL, AppendInfo, _new_info

        if len(runs) == 1:
            return [self._append_one(runs[0])]
        out: list = [None] * len(runs)
        good = []  # (index, view, batches, flags)
        for i, records in enumerate(runs):
            try:
                mv, batches, flags = self._checked(records, False)
            except LogSourceError as e:
                out[i] = e
                continue
            if flags & _TRANSACTIONAL:
                good.append((i, None, None, 0))  # appended alone, in its turn
            else:
                good.append((i, mv, batches, flags))
        if any(g[1] is None for g in good) or len(good) > MAX_COALESCED_RUNS or len(good) < 2:
            for i, *_ in good:
                out[i] = self._append_one(runs[i])
            return out
        now = int(time.time() * 1000)
        lat = self.config.log_append_time
        size = sum(len(g[1]) for g in good)
        with self._lock:
            if self._closed:
                raise StorageError(f"log {self.name} is closed")
            active = self._view.segments[-1]
            upper = self._leo + sum(h[6] + 1 for g in good for _, h in g[2])  # offsets spanned at most
            # one by one, a run rolls the segment if it finds it too full: with all of them in, or (an
            # empty segment takes its first run whatever its size) by their bytes and offsets alone
            if (active.should_roll(size, upper - 1, now) if active.size else
                    size > self.config.segment_bytes or upper - 1 - active.base_offset > 0xFFFFFFFF):  # fmt: skip
                rolls = True  # rare (once a segment): the one-by-one path rolls where it must
            else:
                rolls = False
                latest = self.epochs.latest_epoch
                epoch = latest if latest > 0 else 0
                producers = ProducerAppend(self.producer_state) if any(g[3] & _IDEMPOTENT for g in good) else None
                stamped: list = []
                parts = []
                appended = []  # (index, base offset, next offset)
                offset = self._leo
                at = 0
                for i, mv, batches, _ in good:
                    point = producers.savepoint() if producers is not None else 0
                    mark = len(stamped)
                    try:
                        nxt = self._stamp_run(mv, batches, offset, epoch, now, producers, stamped, at)
                    except LogSourceError as e:
                        del stamped[mark:]
                        if producers is not None:
                            producers.rollback(point)
                        out[i] = e
                        continue
                    if type(nxt) is not int:
                        out[i] = nxt  # a retry: its original offsets
                        continue
                    parts.append(mv)
                    appended.append((i, offset, nxt))
                    at += len(mv)
                    offset = nxt
                if parts:
                    try:
                        active.append(parts, stamped, arrow=any(g[3] & _ARROW for g in good))
                    except OSError as e:
                        raise StorageError(f"append to {active.log_path} failed: {e}") from e
                    if producers is not None:
                        producers.commit()
                    self._leo = offset  # publish: readers may now fetch up to here
                    if epoch > latest:
                        self.epochs.assign(epoch, appended[0][1])
                    ts = now if lat else -1
                    for i, base, nxt in appended:
                        out[i] = _new_info(AppendInfo, (base, nxt - 1, ts, nxt - base, False))
                due = bool(parts) and self._flush_due(now)
        if rolls:
            for i, *_ in good:
                out[i] = self._append_one(runs[i])
            return out
        if due:
            self.flush()  # outside the partition lock, as append does
        return out

    def _append_one(self, records) -> AppendInfo | LogSourceError:
        try:
            return self.append(records)
        except LogSourceError as e:
            return e
