"""The leader's side of replication requests: Fetch from a follower (``replica_id`` >= 0).

A follower's fetch differs from a consumer's: it reads up to the log end (not
the high watermark), gets the batches exactly as stored (no conversion to
Kafka's layout, so the replicas stay byte-identical), and its fetch offset
is its log end offset, which moves the ISR and the high watermark
(:meth:`.replicas.ReplicaManager.update_follower`). With Fetch v12 the
follower also sends the epoch of its last record; if the leader's log
differs there (the epoch ended earlier on the leader, or the leader never had
it) the answer carries the diverging epoch and the leader's end offset for
it instead of records, and the follower truncates there (KIP-320's form of
KIP-101's OffsetsForLeaderEpoch). Stale or future leader epochs are refused
(FencedLeaderEpoch, UnknownLeaderEpoch), as Kafka does.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ...errors import (
    FencedLeaderEpoch,
    LogSourceError,
    OffsetOutOfRange,
    UnknownLeaderEpoch,
    code_of,
)
from ...protocol import FetchPartitionResponse, FetchRequest, FetchResponse

if TYPE_CHECKING:
    from ..state import BrokerState
    from .replicas import ReplicaManager


class ReplicaFetchHandler:
    """Answers followers' fetches on a leader."""

    def __init__(self, state: BrokerState, manager: ReplicaManager) -> None:
        self.state = state
        self.manager = manager

    def _read_partition(self, req: FetchRequest, fp: Any, limit: int) -> tuple[FetchPartitionResponse, int]:
        r = FetchPartitionResponse(fp.topic, fp.partition, records=b"")
        lp = self.manager.leader_partition(fp.topic, fp.partition)
        epoch = lp.role.leader_epoch
        if 0 <= fp.current_leader_epoch < epoch:
            raise FencedLeaderEpoch(f"{fp.topic}-{fp.partition}: epoch {fp.current_leader_epoch} is older than {epoch}")
        if fp.current_leader_epoch > epoch:
            raise UnknownLeaderEpoch(f"{fp.topic}-{fp.partition}: epoch {fp.current_leader_epoch} is newer than {epoch}")
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
                return r, 0
        if not lg.log_start_offset <= fp.fetch_offset <= leo:
            r.high_watermark = lg.high_watermark
            raise _OutOfRange(r, OffsetOutOfRange(f"{fp.topic}-{fp.partition}: follower fetch offset "
                                                  f"{fp.fetch_offset} is outside [{lg.log_start_offset}, {leo}]"))  # fmt: skip
        self.manager.update_follower(fp.topic, fp.partition, req.replica_id, fp.fetch_offset)
        r.high_watermark = r.last_stable_offset = lg.high_watermark
        size = 0
        if limit > 0:
            region = lg.read(fp.fetch_offset, limit)
            r.records = region  # as stored: the follower's log must equal ours byte for byte
            size = region.length
        return r, size

    def _read(self, req: FetchRequest) -> tuple[FetchResponse, int, bool]:
        budget = min(req.max_bytes, self.state.config.fetch_max_bytes)
        total, error, out = 0, False, []
        for fp in req.partitions:
            try:
                r, size = self._read_partition(req, fp, min(fp.max_bytes, budget - total) if total < budget else 0)
                total += size
            except _OutOfRange as e:
                r = e.response
                r.error_code, r.records = OffsetOutOfRange.code, None
                error = True
            except LogSourceError as e:
                r = FetchPartitionResponse(fp.topic, fp.partition, error_code=code_of(e), records=None)
                error = True
            if r.diverging_end_offset >= 0:
                error = True  # answer at once: the follower must truncate before it fetches on
            out.append(r)
        return FetchResponse(partitions=out), total, error

    async def fetch(self, req: FetchRequest, session: Any) -> FetchResponse:
        """A follower's long poll: answer when ``min_bytes`` are there, on an error, or after ``max_wait_ms``."""
        resp, total, error = self._read(req)
        if error or total >= req.min_bytes or req.max_wait_ms <= 0 or not req.partitions:
            return resp
        loop = asyncio.get_running_loop()
        deadline = loop.time() + req.max_wait_ms / 1000
        keys = {(fp.topic, fp.partition) for fp in req.partitions}
        waiters = self.state.waiters
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return resp
            fut = loop.create_future()
            timer = loop.call_later(remaining, _wake, fut)
            waiters.add(keys, fut)
            try:
                await fut
            finally:
                timer.cancel()
                waiters.remove(keys, fut)
            resp, total, error = self._read(req)
            if error or total >= req.min_bytes:
                return resp


class _OutOfRange(Exception):
    def __init__(self, response: FetchPartitionResponse, error: OffsetOutOfRange) -> None:
        super().__init__(str(error))
        self.response = response


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
