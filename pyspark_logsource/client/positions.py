"""Where a consumer reads from: seeks, positions, offset resets and the group's committed offsets.

A partition's position is unknown until it is resolved: from the group's
committed offset, else by ``auto_offset_reset`` (the leader's log start or
end, through ListOffsets). Seeking sets it directly and discards what was
fetched for the old position.

It is a mixin of :class:`~.consumer.Consumer` (kept apart so the consumer
module stays readable): it uses the consumer's partition states, lock,
network client and group membership.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError, OffsetOutOfRange, error_for_code
from ..format import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from ..protocol.coordinator_messages import OffsetCommitPartition, OffsetCommitRequest, OffsetFetchRequest
from ..protocol.messages import ListOffsetsPartition, ListOffsetsRequest
from .fetched import _PartitionState

if TYPE_CHECKING:
    from .consumer import TopicPartition


class ConsumerPositionsMixin:
    """Seeks, positions, offset resets and committed offsets for Consumer."""

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        """Make ``offset`` the next offset returned for ``tp``."""
        if offset < 0:
            raise OffsetOutOfRange(f"cannot seek {tp[0]}-{tp[1]} to negative offset {offset}")
        with self._lock:
            self._set_position(self._state(tp), int(offset))

    def _set_position(self, st: _PartitionState, offset: int | None) -> None:
        # lock held; the epoch bump makes an in-flight fetch for the old position be discarded
        st.position = st.fetch_position = offset
        st.buffered.clear()
        st.buffered_bytes = 0
        st.epoch += 1
        st.error = None
        st.reset_pending = False
        st.retry_at = 0.0
        self._work.notify_all()

    def seek_to_beginning(self, *tps: tuple[str, int]) -> None:
        """Seek to the log start offset (no argument: every assigned partition)."""
        self._seek_to(tps, EARLIEST_TIMESTAMP)

    def seek_to_end(self, *tps: tuple[str, int]) -> None:
        """Seek to the log end offset (no argument: every assigned partition)."""
        self._seek_to(tps, LATEST_TIMESTAMP)

    def _seek_to(self, tps: tuple, spec: int) -> None:
        targets = [(t, p) for t, p in tps] if tps else list(self._order)
        for tp in targets:
            self._state(tp)
        offsets = self._list_offsets(targets, spec)
        with self._lock:
            for tp in targets:
                self._set_position(self._state(tp), offsets[tp])

    def position(self, tp: tuple[str, int]) -> int:
        """The next offset ``poll()`` will return for ``tp`` (resolved if unknown)."""
        st = self._state(tp)
        if st.position is None:
            self._resolve_positions()
        return self._state(tp).position  # type: ignore[return-value]

    def highwater(self, tp: tuple[str, int]) -> int:
        """The log end offset seen in the last fetch (-1 before any)."""
        return self._state(tp).high_watermark

    def _list_offsets(self, tps: list[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        # each partition's leader answers (its latest is the high watermark); a leader change is retried
        answers = self._client.for_leaders(tps, lambda items: ListOffsetsRequest(
            [ListOffsetsPartition(t, p, spec) for t, p in items], self.isolation))  # fmt: skip
        out = {}
        for (t, p), r in answers.items():
            if r.error_code:
                raise error_for_code(r.error_code, f"list offsets for {t}-{p}")
            out[(t, p)] = r.offset
        return out

    def _resolve_positions(self) -> None:
        """Give every partition with an unknown position one (committed offset, else the reset policy)."""
        # racy pre-check without the lock: the common case is "all positions known"
        if all(st.position is not None or st.error is not None for st in list(self._parts.values())):
            return
        with self._lock:
            unknown = [tp for tp, st in self._parts.items() if st.position is None and st.error is None]
            resets = [tp for tp in unknown if self._parts[tp].reset_pending]
        if not unknown:
            return
        found: dict[TopicPartition, int] = {}
        fresh = [tp for tp in unknown if tp not in resets]
        if self.group_id is not None and fresh:
            committed = self._fetch_committed(fresh)
            found.update({tp: off for tp, off in committed.items() if off is not None and off >= 0})
        rest = [tp for tp in unknown if tp not in found]
        if rest:
            if self.auto_offset_reset == "none":
                with self._lock:
                    for tp in rest:
                        st = self._parts.get(tp)
                        if st is not None and st.position is None:
                            st.error = OffsetOutOfRange(
                                f"no valid position for {tp[0]}-{tp[1]} and auto_offset_reset='none'"
                            )
                return
            spec = EARLIEST_TIMESTAMP if self.auto_offset_reset == "earliest" else LATEST_TIMESTAMP
            found.update(self._list_offsets(rest, spec))
        with self._lock:
            for tp, off in found.items():
                st = self._parts.get(tp)
                if st is not None and st.position is None:
                    self._set_position(st, off)

    def _fetch_committed(self, tps: list[TopicPartition]) -> dict[TopicPartition, int | None]:
        group = self._need_group()
        resp = self._client.coordinator_request(group, OffsetFetchRequest(group, list(tps)))
        out: dict[TopicPartition, int | None] = dict.fromkeys(tps)
        for r in resp.partitions:
            if r.error_code:
                raise error_for_code(r.error_code, f"offset fetch for {r.topic}-{r.partition}")
            out[(r.topic, r.partition)] = r.offset if r.offset >= 0 else None
        return out

    def _need_group(self) -> str:
        if not self.group_id:
            raise ConfigError("this consumer has no group_id; committed offsets need one")
        return self.group_id

    def commit(self, offsets: dict[tuple[str, int], int | tuple[int, str]] | None = None) -> None:
        """Store offsets for the group (default: the current position of every assigned partition)."""
        group = self._need_group()
        if offsets is None:
            with self._lock:
                offsets = {tp: st.position for tp, st in self._parts.items() if st.position is not None}
        items = []
        for (t, p), v in offsets.items():
            off, meta = (v if isinstance(v, tuple) else (v, None))
            items.append(OffsetCommitPartition(t, p, int(off), meta))
        if not items:
            return
        grp = self._group
        gen, member = (grp.generation, grp.member_id) if grp is not None and grp.member_id else (-1, "")
        resp = self._client.coordinator_request(group, OffsetCommitRequest(group, items, gen, member))
        for r in resp.partitions:
            if r.error_code:
                raise error_for_code(r.error_code, f"offset commit for {r.topic}-{r.partition}")

    def committed(self, tp: tuple[str, int]) -> int | None:
        """The group's committed offset for ``tp`` (None when there is none)."""
        return self._fetch_committed([(tp[0], tp[1])])[(tp[0], tp[1])]
