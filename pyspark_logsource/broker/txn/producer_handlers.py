"""Request handlers of Kafka's transactional producer: InitProducerId with a transactional id,
AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26) at the transaction coordinator, and
TxnOffsetCommit (28) at the group's coordinator; plus the produce check of KIP-890 part 1.

The state machine is :class:`.producer_txns.ProducerTxns`, held by the transaction
coordinator (:class:`.coordinator.TxnCoordinator`); these handlers find the coordinator
(NotCoordinator / CoordinatorLoadInProgress as for StagedTxns) and turn typed errors into
Kafka's codes. Group offsets stay with the group coordinator's store
(:meth:`..groups.offsets.GroupOffsetStore.append_txn_offsets`), which applies them when the
transaction's COMMIT marker reaches the group's ``__consumer_offsets`` partition.

Fencing: every version answers PRODUCER_FENCED (90) where Kafka does; Kafka maps it to
INVALID_PRODUCER_EPOCH (47) for versions older than the one that introduced it (librdkafka
and Kafka's Java client treat both as fenced).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ...errors import (
    CoordinatorNotAvailable,
    InvalidGroupId,
    InvalidRequest,
    InvalidTxnState,
    LogSourceError,
    NotEnoughReplicas,
    OperationNotAttempted,
    UnknownTopicOrPartition,
    error_for_code,
)
from ...format.header import read_header
from ...protocol import messages as m
from ...protocol import producer_txn_messages as ptm
from .. import internal_topics
from ..error_responses import error_fields
from .coordinator import TXN_TOPIC, TxnCoordinator

if TYPE_CHECKING:
    from ..state import BrokerState

log = logging.getLogger(__name__)


class ProducerTxnHandlers:
    """Kafka's transactional producer APIs of one broker."""

    def __init__(
        self,
        state: BrokerState,
        coordinator_here: Callable[[], Awaitable[TxnCoordinator]],
        current: Callable[[], TxnCoordinator | None],
    ) -> None:
        self.state = state
        self._coordinator_here = coordinator_here
        self._current = current
        #: transactional id -> done once its last produce waiting in line was appended (see produce_in_order)
        self._tails: dict[str, asyncio.Future[None]] = {}

    def by_key(self) -> dict[int, Callable]:
        return {
            m.ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            m.ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
            m.ApiKey.END_TXN: self.end_txn,
            m.ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
        }

    async def init_producer_id(self, req: m.InitProducerIdRequest) -> m.InitProducerIdResponse:
        """InitProducerId with a transactional id: its producer id and a new epoch (the older instance fenced)."""
        try:
            c = await self._coordinator_here()
            pid, epoch = await c.producer_txns.init_producer_id(
                req.transactional_id or "", req.transaction_timeout_ms, req.producer_id, req.producer_epoch
            )
            return m.InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)
        except LogSourceError as e:
            log.info("InitProducerId(%r) failed: %s", req.transactional_id, e)
            return m.InitProducerIdResponse(error_fields(e).code)

    async def add_partitions_to_txn(
        self, req: ptm.AddPartitionsToTxnRequest, session: object
    ) -> ptm.AddPartitionsToTxnResponse:
        """Add partitions to the ongoing transaction; a missing one fails alone, the rest are not attempted."""
        txns = req.transactions
        if len(txns) != 1 or txns[0].verify_only:  # v4: a partition leader's verification
            return await self._add_partitions_batched(req)
        x = txns[0]
        parts = list(dict.fromkeys(x.partitions))
        try:
            c = await self._coordinator_here()
            unknown = c.producer_txns.unknown_partitions(parts)
            if unknown:
                codes = {
                    tp: (UnknownTopicOrPartition.code if tp in unknown else OperationNotAttempted.code)
                    for tp in parts
                }
            else:
                await c.producer_txns.add_partitions(
                    x.transactional_id, x.producer_id, x.producer_epoch, set(parts)
                )
                codes = dict.fromkeys(parts, 0)
        except LogSourceError as e:
            codes = dict.fromkeys(parts, error_fields(e).code)
        return ptm.AddPartitionsToTxnResponse({x.transactional_id: codes})

    async def _add_partitions_batched(
        self, req: ptm.AddPartitionsToTxnRequest
    ) -> ptm.AddPartitionsToTxnResponse:
        try:
            c = await self._coordinator_here()
        except LogSourceError as e:
            return ptm.AddPartitionsToTxnResponse(top_error_code=error_fields(e).code)
        results: dict[str, dict[tuple[str, int], int]] = {}
        for x in req.transactions:
            parts = list(dict.fromkeys(x.partitions))
            if x.verify_only:
                results[x.transactional_id] = c.producer_txns.verify(
                    x.transactional_id, x.producer_id, x.producer_epoch, parts
                )
                continue
            try:
                await c.producer_txns.add_partitions(
                    x.transactional_id, x.producer_id, x.producer_epoch, set(parts)
                )
                results[x.transactional_id] = dict.fromkeys(parts, 0)
            except LogSourceError as e:
                results[x.transactional_id] = dict.fromkeys(parts, error_fields(e).code)
        return ptm.AddPartitionsToTxnResponse(results)

    async def add_offsets_to_txn(
        self, req: ptm.AddOffsetsToTxnRequest, session: object
    ) -> ptm.AddOffsetsToTxnResponse:
        """Add the group's offsets partition to the transaction."""
        try:
            c = await self._coordinator_here()
            await c.producer_txns.add_offsets(
                req.transactional_id, req.producer_id, req.producer_epoch, req.group_id
            )
            return ptm.AddOffsetsToTxnResponse()
        except LogSourceError as e:
            return ptm.AddOffsetsToTxnResponse(error_fields(e).code)

    async def end_txn(self, req: ptm.EndTxnRequest, session: object) -> ptm.EndTxnResponse:
        """Commit or abort: answered once the decision is durable (its local markers are written too)."""
        c = None
        try:
            c = await self._coordinator_here()
            await c.producer_txns.end_txn(
                req.transactional_id, req.producer_id, req.producer_epoch, req.committed
            )
            resp = ptm.EndTxnResponse()
        except LogSourceError as e:
            resp = ptm.EndTxnResponse(error_fields(e).code)
        if c is not None and c.remote:
            await self.flush_remote(c)
        return resp

    #: set by TxnHandlers: sends the coordinator's queued markers to other leaders (WriteTxnMarkers)
    flush_remote: Callable[[TxnCoordinator], Awaitable[None]]

    async def txn_offset_commit(
        self, req: ptm.TxnOffsetCommitRequest, session: object
    ) -> ptm.TxnOffsetCommitResponse:
        """Store the offsets as the producer's transactional records in the group's partition (pending until
        the transaction commits); in a cluster answered once the ISR has them."""
        parts = [(o.topic, o.partition) for o in req.offsets]
        try:
            if not req.group_id:
                raise InvalidGroupId("group id is empty")
            self.state.check_group_coordinator(req.group_id)
            if req.generation_id >= 0 or req.member_id:  # a consumer group member's commit (KIP-447)
                self.state.coordinator.validate_commit(
                    req.group_id, req.generation_id, req.member_id, req.group_instance_id
                )
            topics = self.state.topics()
            codes: dict[tuple[str, int], int] = {}
            entries = []
            for o in req.offsets:
                n = topics.get(o.topic)
                if n is None or not 0 <= o.partition < n:
                    codes[(o.topic, o.partition)] = UnknownTopicOrPartition.code
                elif o.offset < 0:
                    codes[(o.topic, o.partition)] = InvalidRequest.code
                else:
                    codes[(o.topic, o.partition)] = 0
                    entries.append((o.topic, o.partition, o.offset, o.metadata, o.leader_epoch))
            if entries:
                await self.state.group_ownership.commit_transactional(
                    req.group_id, req.producer_id, req.producer_epoch, entries
                )
            return ptm.TxnOffsetCommitResponse(codes)
        except LogSourceError as e:
            code = error_fields(e).code
            return ptm.TxnOffsetCommitResponse({tp: code for tp in parts})

    def produce_in_order(
        self, req: m.ProduceRequest, produce: Callable[[m.ProduceRequest, dict], Any]
    ) -> Any:
        """Run a transactional produce, ``produce(req, refused)``, after :meth:`check_produce`, in arrival order
        per transactional id. A check that asks the coordinator (another broker) takes a round trip; a
        producer pipelines its requests (up to 5 in flight, sequence numbers 0, 1, 2 ...), and without a
        line the later ones' checks could finish first: an append of sequence 2 before 1 is
        OUT_OF_ORDER_SEQUENCE, fatal to the producer (librdkafka 0103 on a cluster). Kafka keeps the order by
        reading one request of a connection at a time; here a produce arriving while an earlier one of the
        id waits goes in line behind it (until its append, not its replication)."""
        tid = req.transactional_id or ""
        prev = self._tails.get(tid)
        if prev is None:
            refused = self.check_produce(req)
            if isinstance(refused, dict):
                return produce(req, refused)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tails[tid] = done
        return self._in_line(req, prev, None if prev is not None else refused, produce, done)

    async def _in_line(
        self,
        req: m.ProduceRequest,
        prev: asyncio.Future[None] | None,
        verifying: Awaitable[dict] | None,
        produce: Callable[[m.ProduceRequest, dict], Any],
        done: asyncio.Future[None],
    ) -> Any:
        tid = req.transactional_id or ""
        try:
            if prev is not None:
                await prev
                checked = self.check_produce(req)
                refused = checked if isinstance(checked, dict) else await checked
            else:
                assert verifying is not None
                refused = await verifying
            resp = produce(req, refused)
        finally:
            if self._tails.get(tid) is done:
                del self._tails[tid]
            done.set_result(None)
        return await resp if inspect.isawaitable(resp) else resp

    def check_produce(
        self, req: m.ProduceRequest
    ) -> dict[tuple[str, int], LogSourceError] | Awaitable[dict[tuple[str, int], LogSourceError]]:
        """KIP-890 part 1: the partitions of a transactional produce its transaction does not have, with the
        error to answer them (INVALID_TXN_STATE). Where this broker coordinates transactions (a single broker;
        in a cluster, the leader of ``__transaction_state-0``) it is checked here; elsewhere a coroutine asks
        the coordinator (AddPartitionsToTxn v4 ``verify_only``) for the partitions where the producer has no
        transaction open yet at this epoch, as Kafka's leader does."""
        batches = []
        for p in req.partitions:
            if not p.records:
                continue
            try:
                h = read_header(p.records)
            except LogSourceError:
                continue  # the append refuses it with its own error
            if h.is_transactional and not h.is_control:
                batches.append((p.topic, p.partition, h.producer_id, h.producer_epoch))
        if not batches:
            return {}
        c = self._current()
        if c is not None:
            out: dict[tuple[str, int], LogSourceError] = {}
            for t, q, pid, epoch in batches:
                try:
                    c.producer_txns.check_produce(pid, epoch, t, q)
                except LogSourceError as e:
                    out[(t, q)] = e
            return out
        if self.state.cluster is None:
            return {}
        need = [b for b in batches if not self._open_here(*b)]
        return self._verify_remote(req.transactional_id or "", need) if need else {}

    def _open_here(self, topic: str, partition: int, pid: int, epoch: int) -> bool:
        """Whether the producer's transaction is already open in this partition at this epoch (verified)."""
        try:
            o = self.state.logs.get_log(topic, partition).txns.open.get(pid)
        except LogSourceError:
            return True  # not a partition of this broker: the append answers that
        return o is not None and o.producer_epoch == epoch

    async def _verify_remote(
        self, transactional_id: str, batches: list[tuple[str, int, int, int]]
    ) -> dict[tuple[str, int], LogSourceError]:
        """Ask the coordinator whether the partitions are in the producer's ongoing transaction. A coordinator
        that cannot answer makes the produce retriable (NOT_ENOUGH_REPLICAS, as Kafka's leader answers)."""
        by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
        for t, q, pid, epoch in batches:
            by_producer.setdefault((pid, epoch), []).append((t, q))
        req = ptm.AddPartitionsToTxnRequest(
            transactions=[
                ptm.TxnPartitions(transactional_id, pid, epoch, parts, verify_only=True)
                for (pid, epoch), parts in by_producer.items()
            ]
        )
        every = [(t, q) for t, q, _, _ in batches]
        try:
            leader = internal_topics.leader_of(self.state, TXN_TOPIC, 0)
            address = self.state.broker_address(leader) if leader >= 0 else None
            if address is None:
                raise CoordinatorNotAvailable(f"{TXN_TOPIC}-0 has no live leader")
            loop = asyncio.get_running_loop()
            resp = await loop.run_in_executor(
                None, _request, address, req, f"txn-verify-{self.state.broker_id}"
            )
        except Exception as e:  # the coordinator is down or moving: the producer retries
            log.info("transaction verification for %s failed: %s", transactional_id, e)
            return {tp: NotEnoughReplicas(f"the transaction coordinator cannot verify: {e}") for tp in every}
        if resp.top_error_code:
            err = NotEnoughReplicas(f"the transaction coordinator answered error {resp.top_error_code}")
            return dict.fromkeys(every, err)
        codes: dict[tuple[str, int], int] = {}
        for errors in resp.results.values():
            codes.update(errors)
        return {
            tp: error_for_code(
                code, f"{tp[0]}-{tp[1]} is not in the ongoing transaction of {transactional_id!r}"
            )
            for tp in every
            if (code := codes.get(tp, InvalidTxnState.code))
        }


def _request(address: tuple[str, int], req: object, client_id: str) -> ptm.AddPartitionsToTxnResponse:
    from ...client.network import NetworkClient  # blocking client: runs in an executor thread

    client = NetworkClient(f"{address[0]}:{address[1]}", client_id=client_id, threaded=False)
    try:
        return client.request(req)
    finally:
        client.close()
