"""The leader's side of replication requests: Fetch from a follower (``replica_id`` >= 0), OffsetForLeaderEpoch.

A follower's fetch differs from a consumer's: it reads up to the log end (not
the high watermark), gets the batches exactly as stored (no conversion to
Kafka's layout, so the replicas stay byte-identical), and its fetch offset
is its log end offset, which moves the ISR and the high watermark
(:meth:`.replicas.ReplicaManager.update_follower`, then :class:`.partition.Partition`). With Fetch v12 the
follower also sends the epoch of its last record; if the leader's log
differs there (the epoch ended earlier on the leader, or the leader never had
it) the answer carries the diverging epoch and the leader's end offset for
it instead of records, and the follower truncates there (KIP-320's form of
KIP-101's OffsetsForLeaderEpoch). Stale or future leader epochs are refused
(FencedLeaderEpoch, UnknownLeaderEpoch), as Kafka does.

OffsetForLeaderEpoch (API 23) answers the same question on its own, for
Kafka's clients (a consumer validating its position after a leader change,
KIP-320) and tools; a consumer's answer never goes past the high watermark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import (
    FencedLeaderEpoch,
    LogSourceError,
    OffsetOutOfRange,
    UnknownLeaderEpoch,
    UnknownTopicOrPartition,
)
from ...protocol import ApiKey, FetchPartitionResponse, FetchRequest, FetchResponse
from ...protocol.epoch_messages import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from ..error_responses import error_fields
from ..fetch import FetchIsolation, long_poll, read_partitions
from ..state import topic_error
from ..waiters import FetchWaiters
from .partition import LeaderPartitions

if TYPE_CHECKING:
    from ..state import BrokerState


class ReplicaFetchHandler:
    """Answers followers' fetches on a leader: ``manager`` has the led partitions, ``waiters`` the parked
    fetches, ``max_bytes`` is the broker's ``fetch.max.bytes``."""

    def __init__(self, manager: LeaderPartitions, waiters: FetchWaiters, max_bytes: int) -> None:
        self.manager = manager
        self.waiters = waiters
        self.max_bytes = max_bytes

    def _resolve(self, req: FetchRequest, fp: Any, r: FetchPartitionResponse) -> tuple[Any, int] | None:
        lp = self.manager.leader_partition(fp.topic, fp.partition)
        check_epoch(fp.topic, fp.partition, lp.role.leader_epoch, fp.current_leader_epoch)
        lg = lp.log
        r.log_start_offset = lg.log_start_offset
        leo = lg.log_end_offset
        if fp.last_fetched_epoch >= 0:
            found, end = lg.epochs.end_offset_for(fp.last_fetched_epoch, leo)
            if found < 0:
                r.diverging_epoch, r.diverging_end_offset = -1, lg.log_start_offset
            elif found < fp.last_fetched_epoch or end < fp.fetch_offset:
                r.diverging_epoch, r.diverging_end_offset = found, end
            if r.diverging_end_offset >= 0:
                r.high_watermark = r.last_stable_offset = lg.high_watermark
                return None  # answer at once: the follower must truncate before it fetches on
        if not lg.log_start_offset <= fp.fetch_offset <= leo:
            r.high_watermark = lg.high_watermark
            raise OffsetOutOfRange(
                f"{fp.topic}-{fp.partition}: follower fetch offset {fp.fetch_offset} is "
                f"outside [{lg.log_start_offset}, {leo}]"
            )
        self.manager.update_follower(
            fp.topic, fp.partition, req.replica_id, fp.fetch_offset, fp.log_start_offset
        )
        return lg, lg.high_watermark

    def _read(self, req: FetchRequest) -> tuple[FetchResponse, int, bool]:
        # up to the log end, as stored (no conversion): the follower's log must equal ours byte for byte
        return read_partitions(req, self.max_bytes, FetchIsolation.LOG_END, self._resolve, over_limit_ok=True)

    async def fetch(self, req: FetchRequest) -> FetchResponse:
        """A follower's long poll (:func:`..fetch.long_poll`): answer when ``min_bytes`` are there, on an
        error or a diverging epoch, or after ``max_wait_ms``."""
        return await long_poll(req, lambda: self._read(req), self.waiters)


def check_epoch(topic: str, partition: int, current: int, asked: int) -> None:
    """FencedLeaderEpoch / UnknownLeaderEpoch when the asker's view of the leader epoch is stale / ahead."""
    if 0 <= asked < current:
        raise FencedLeaderEpoch(f"{topic}-{partition}: epoch {asked} is older than {current}")
    if asked > current:
        raise UnknownLeaderEpoch(f"{topic}-{partition}: epoch {asked} is newer than {current}")


class EpochHandlers:
    """OffsetForLeaderEpoch, on a single broker and in a cluster."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state

    def by_key(self) -> dict[int, Any]:
        return {ApiKey.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch}

    def offset_for_leader_epoch(
        self, req: OffsetForLeaderEpochRequest, session: Any
    ) -> OffsetForLeaderEpochResponse:
        """Per partition, the largest epoch at or below the one asked and where it ends in the leader's log."""
        out = []
        st = self.state
        for p in req.partitions:
            r = EpochEndOffset(p.topic, p.partition)
            try:
                st.check_leader(p.topic, p.partition, write=False)
                role = st.roles.get((p.topic, p.partition)) or st.role(
                    p.topic, p.partition
                )  # recorded, else synthesised
                try:
                    lg = st.logs.get_log(p.topic, p.partition)
                except UnknownTopicOrPartition:
                    raise topic_error(p.topic) from None
                if role is None:
                    raise topic_error(p.topic)
                current = role.leader_epoch
                check_epoch(p.topic, p.partition, current, p.current_leader_epoch)
                # a follower may hold what is above the HW; a consumer has read at most up to it
                end = (
                    lg.log_end_offset if req.replica_id >= 0 else st.high_watermark(p.topic, p.partition, lg)
                )
                if p.leader_epoch == current and lg.epochs.latest_epoch < current:
                    r.leader_epoch, r.end_offset = (
                        current,
                        end,
                    )  # a single broker records no epoch before a write
                else:
                    r.leader_epoch, r.end_offset = lg.epochs.end_offset_for(p.leader_epoch, end)
                    r.end_offset = min(r.end_offset, end)
            except LogSourceError as e:
                r.error_code = error_fields(e).code
            out.append(r)
        return OffsetForLeaderEpochResponse(out)
