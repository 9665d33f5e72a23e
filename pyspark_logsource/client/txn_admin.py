"""Transaction administration for :class:`~.admin.Admin`, as Kafka's Admin and ``kafka-transactions`` do:
list and describe transactions (ListTransactions, DescribeTransactions at the transaction coordinator),
describe a partition's producers (DescribeProducers at its leader) and abort a hanging transaction
(WriteTxnMarkers with an ABORT marker for that producer, to the partition's leader)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError, LogSourceError, error_for_code
from ..protocol import txn_admin_messages as tam
from ..protocol import txn_messages as tm
from ..protocol.coordinator_messages import FindCoordinatorRequest

if TYPE_CHECKING:
    from .network import NetworkClient

#: FindCoordinator's key type of a transactional id
TRANSACTION_KEY = 1


class TxnAdmin:
    """The transaction methods of Admin (needs ``_client``)."""

    _client: NetworkClient

    def list_transactions(
        self,
        states: list[str] | tuple[str, ...] = (),
        producer_ids: list[int] | tuple[int, ...] = (),
        duration_ms: int = -1,
        pattern: str | None = None,
    ) -> list[tam.TransactionListing]:
        """Every transactional id any broker coordinates that passes the filters (empty: no filter), sorted.
        A state Kafka does not know is a ConfigError naming it (the coordinator lists it as unknown)."""
        self._client.refresh_metadata(None)
        out: dict[str, tam.TransactionListing] = {}
        for node in sorted(self._client.cluster.brokers) or [None]:
            resp = self._client.request(
                tam.ListTransactionsRequest(list(states), list(producer_ids), duration_ms, pattern), node
            )
            if resp.error_code:
                raise error_for_code(resp.error_code, f"list transactions on broker {node}")
            if resp.unknown_state_filters:
                raise ConfigError(f"unknown transaction state(s): {', '.join(resp.unknown_state_filters)}")
            for t in resp.transactions:
                out[t.transactional_id] = t
        return [out[k] for k in sorted(out)]

    def _txn_coordinator(self, transactional_id: str) -> int:
        resp = self._client.request(FindCoordinatorRequest(transactional_id, TRANSACTION_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code, f"find the coordinator of {transactional_id!r}")
        return resp.node_id

    def describe_transactions(
        self, transactional_ids: list[str] | tuple[str, ...]
    ) -> dict[str, tam.TransactionDescription | LogSourceError]:
        """Each id's state at its coordinator, or the typed error (TransactionalIdNotFound for an unknown id)."""
        out: dict[str, tam.TransactionDescription | LogSourceError] = {}
        for tid in transactional_ids:
            node = self._txn_coordinator(tid)
            (d,) = self._client.request(tam.DescribeTransactionsRequest([tid]), node).transactions
            out[tid] = error_for_code(d.error_code, f"describe transaction {tid!r}") if d.error_code else d
        return out

    def describe_producers(
        self, topic: str, partition: int, broker_id: int | None = None
    ) -> list[tam.ProducerInfo]:
        """The producers a partition's log knows, asked of its leader (or of ``broker_id``, as Kafka's
        DescribeProducersOptions.brokerId: NotLeaderOrFollower when that broker does not lead it)."""
        tp = (str(topic), int(partition))
        if broker_id is None:
            answers = self._client.for_leaders([tp], lambda items: tam.DescribeProducersRequest(items))
            r = answers.get(tp)
        else:
            resp = self._client.request(tam.DescribeProducersRequest([tp]), int(broker_id))
            r = next((x for x in resp.partitions if (x.topic, x.partition) == tp), None)
        if r is None:
            raise error_for_code(3, f"no broker answered for {tp[0]}-{tp[1]}")
        if r.error_code:
            raise error_for_code(r.error_code, r.error_message or f"describe producers of {tp[0]}-{tp[1]}")
        return r.producers

    def abort_transaction(self, topic: str, partition: int, start_offset: int) -> tam.ProducerInfo:
        """Abort the hanging transaction that starts at ``start_offset`` of a partition, as
        ``kafka-transactions abort --start-offset`` does: find its producer with DescribeProducers, then have
        the leader append an ABORT marker for it (WriteTxnMarkers). Returns the producer whose transaction
        was aborted; ConfigError when no open transaction starts there."""
        producers = self.describe_producers(topic, partition)
        match = [p for p in producers if p.current_txn_start_offset == int(start_offset)]
        if not match:
            open_at = sorted(p.current_txn_start_offset for p in producers if p.current_txn_start_offset >= 0)
            raise ConfigError(
                f"no open transaction starts at offset {start_offset} of {topic}-{partition} "
                f"(open transactions start at {open_at or 'no offset'})"
            )
        p = match[0]
        marker = tm.TxnMarker(
            p.producer_id, p.producer_epoch, False, [(topic, int(partition))], p.coordinator_epoch
        )
        self._client.refresh_metadata([topic])
        node = self._client.leader_for(topic, int(partition))
        resp = self._client.request(tm.WriteTxnMarkersRequest([marker]), node)
        code = next((r.errors.get((topic, int(partition)), 0) for r in resp.markers), 3)
        if code:
            raise error_for_code(code, f"abort producer {p.producer_id}'s transaction in {topic}-{partition}")
        return p
