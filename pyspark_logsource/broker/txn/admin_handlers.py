"""The transaction admin APIs Kafka's ``kafka-transactions`` tool calls: ListTransactions (66) and
DescribeTransactions (65) at the transaction coordinator, DescribeProducers (61) at a partition's leader.

The two coordinator APIs read :class:`.producer_txns.ProducerTxns` (copies, no lock needed: a listing is a
snapshot) through the coordinator the producer handlers use (NotCoordinator / CoordinatorLoadInProgress
in every entry when this broker does not coordinate). DescribeProducers reads the partition log's producer
state and its open transactions (:mod:`..log.transactions`): what Kafka's tool needs to find a hanging
transaction and abort it with WriteTxnMarkers.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ...errors import InvalidRequest, NotCoordinator, TransactionalIdNotFound, UnknownTopicOrPartition
from ...protocol import txn_admin_messages as tam
from ...protocol.api_keys import ApiKey
from ..error_responses import error_fields
from ..state import topic_error
from .coordinator import TxnCoordinator
from .producer_txns import TxnState

if TYPE_CHECKING:
    from ..session import Session
    from ..state import BrokerState

#: Kafka's state names a ListTransactions filter may name (PrepareEpochFence and Dead are Kafka's too)
_KNOWN_STATES = {s.value for s in TxnState} | {"Dead"}


class TxnAdminHandlers:
    """ListTransactions, DescribeTransactions and DescribeProducers of one broker."""

    def __init__(self, state: BrokerState, coordinator_here: Callable[[], Awaitable[TxnCoordinator]]) -> None:
        self.state = state
        self._coordinator_here = coordinator_here

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {
            ApiKey.LIST_TRANSACTIONS: self.list_transactions,
            ApiKey.DESCRIBE_TRANSACTIONS: self.describe_transactions,
            ApiKey.DESCRIBE_PRODUCERS: self.describe_producers,
        }

    async def list_transactions(
        self, req: tam.ListTransactionsRequest, session: Session
    ) -> tam.ListTransactionsResponse:
        """Every transactional id that passes all filters (Kafka's TransactionStateManager.listTransactionStates:
        an empty filter passes everything; the duration filter compares now with the start of the current
        transaction, which is -1 outside one, as Kafka's)."""
        try:
            try:
                c = await self._coordinator_here()
            except NotCoordinator:  # Kafka's brokers each list what they coordinate: here, nothing
                return tam.ListTransactionsResponse()
            pattern = None
            if req.transactional_id_pattern:
                try:
                    pattern = re.compile(req.transactional_id_pattern)
                except re.error as e:
                    raise InvalidRequest(f"bad transactional id pattern: {e}") from None
        except Exception as e:
            return tam.ListTransactionsResponse(error_code=error_fields(e).code)
        states = set(req.state_filters)
        pids = set(req.producer_id_filters)
        now = int(time.time() * 1000)
        out = [
            tam.TransactionListing(m.transactional_id, m.producer_id, m.state.value)
            for m in c.producer_txns.transactions()
            if (not states or m.state.value in states)
            and (not pids or m.producer_id in pids)
            and (req.duration_filter_ms < 0 or now - m.txn_start_ms >= req.duration_filter_ms)
            and (pattern is None or pattern.fullmatch(m.transactional_id))
        ]
        out.sort(key=lambda t: t.transactional_id)
        return tam.ListTransactionsResponse(out, sorted(states - _KNOWN_STATES))

    async def describe_transactions(
        self, req: tam.DescribeTransactionsRequest, session: Session
    ) -> tam.DescribeTransactionsResponse:
        """Each id's state; TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not know."""
        try:
            c = await self._coordinator_here()
        except Exception as e:
            code = error_fields(e).code
            return tam.DescribeTransactionsResponse(
                [tam.TransactionDescription(t, code) for t in req.transactional_ids]
            )
        out = []
        for tid in req.transactional_ids:
            m = c.producer_txns.get(tid)
            if m is None:
                out.append(tam.TransactionDescription(tid, TransactionalIdNotFound.code))
                continue
            out.append(
                tam.TransactionDescription(
                    tid,
                    0,
                    m.state.value,
                    m.timeout_ms,
                    m.txn_start_ms,
                    m.producer_id,
                    m.producer_epoch,
                    sorted(m.partitions),
                )
            )
        return tam.DescribeTransactionsResponse(out)

    def describe_producers(
        self, req: tam.DescribeProducersRequest, session: Session
    ) -> tam.DescribeProducersResponse:
        """The producers each partition's log knows, on its leader (NOT_LEADER_OR_FOLLOWER elsewhere).

        The coordinator epoch is -1: our logs do not keep the epoch of the coordinator that wrote a
        producer's last marker (Kafka's tool only passes it back in WriteTxnMarkers, where it is not checked).
        """
        return tam.DescribeProducersResponse([self._producers(t, p) for t, p in req.partitions])

    def _producers(self, topic: str, partition: int) -> tam.PartitionProducers:
        try:
            self.state.check_leader(topic, partition, write=False)
            try:
                lg = self.state.logs.get_log(topic, partition)
            except UnknownTopicOrPartition:
                raise topic_error(topic) from None
            producers = [
                tam.ProducerInfo(e.producer_id, e.epoch, e.last_seq, e.last_timestamp, -1, start)
                for e, start in lg.active_producers()
            ]
        except Exception as e:
            f = error_fields(e)
            return tam.PartitionProducers(topic, partition, f.code, f.message)
        producers.sort(key=lambda x: x.producer_id)
        return tam.PartitionProducers(topic, partition, producers=producers)
