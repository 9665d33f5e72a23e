"""A partition log's replication side: its high watermark, and appends on a follower replica.

The high watermark is the replica manager's to set; until it does (a single
broker) it is the log end, so everything appended is readable at once.

Appends on a follower copy the leader's batches, byte for byte, with the leader's offsets.

A follower does not assign offsets or epochs and does not check producer
sequences (the leader did): it checks each batch's header and CRC, that
offsets only grow, and writes the batches as fetched, so its log equals the
leader's byte for byte. It still records every batch in its producer state
and epoch cache, so that when it becomes leader an idempotent producer's
retry is recognised as a duplicate and returning followers can ask it where
an epoch ended.

It is a mixin of :class:`~.log.PartitionLog` (kept apart so the log module
stays readable): it uses the log's lock, view, roll and ``_hw``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ...errors import InvalidRecord, StorageError
from ...format import header as fmt
from . import transactions as txn

if TYPE_CHECKING:
    from .log import AppendInfo


class ReplicaLogMixin:
    """``high_watermark`` and ``append_as_follower`` for PartitionLog."""

    @property
    def high_watermark(self) -> int:
        """Offsets below it are on every in-sync replica (committed); the log end when not replicated."""
        hw, leo = self._hw, self._leo
        return leo if hw is None or hw > leo else hw

    def set_high_watermark(self, offset: int | None) -> None:
        """Set the high watermark (the replica manager's); None makes it follow the log end again."""
        self._hw = None if offset is None else max(offset, self.log_start_offset)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo | None:
        """Append the whole batches of a fetched region (a partial last batch is left for the next fetch).

        Returns None when ``records`` holds no whole batch. CorruptRecord on a
        bad header or CRC (nothing is written), InvalidRecord if offsets do not
        grow past the log end.
        """
        from .log import AppendInfo

        mv = memoryview(records)
        batches = fmt.walk(mv, check_crc=True)  # non-strict: a size-bounded fetch may end in a partial batch
        if not batches:
            return None
        end = batches[-1][0] + batches[-1][1].size
        now = int(time.time() * 1000)
        with self._lock:
            self._check_open()
            expected = self._leo
            stamped = []
            for pos, h in batches:
                if h.base_offset < expected:
                    raise InvalidRecord(f"{self.name}: follower append of a batch at offset {h.base_offset} "
                                        f"below the next offset {expected}")  # fmt: skip
                span = h.last_offset_delta + 1
                stamped.append((pos, h.base_offset, h.size, h.max_timestamp, span))
                expected = h.base_offset + span
            active = self._view.segments[-1]
            if active.size and active.should_roll(end, expected - 1, now):
                active = self._roll_locked(now)
            try:
                active.append(mv[:end], stamped, arrow=any(h.is_arrow_body for _, h in batches))
            except OSError as e:
                raise StorageError(f"follower append to {active.log_path} failed: {e}") from e
            ps = self.producer_state
            for _, h in batches:
                ps.replay(h)
                if h.leader_epoch > self.epochs.latest_epoch:
                    self.epochs.assign(h.leader_epoch, h.base_offset)
            if any(h.attributes & 0x30 for _, h in batches):  # transactional or control: LSO, aborted index
                txn.apply_append(self, mv, batches, [h.base_offset for _, h in batches])
            self._leo = expected
            due = (self._leo - self._recovery_point >= self.config.flush_messages
                   or (not self.scheduled_flush and now - self._last_flush_ms >= self.config.flush_ms))  # fmt: skip
        if due:
            self.flush()
        return AppendInfo(batches[0][1].base_offset, expected - 1, -1, sum(h.record_count for _, h in batches), False)
