"""Request handlers of transactions: our StagedTxns API (register / commit / abort the attempts of a
Spark write), Kafka's WriteTxnMarkers (a coordinator asks this partition leader for markers) and
FindCoordinator for transactions (key_type 1).

Who coordinates: on a single broker, this broker (its coordinator is loaded at
start, completing decisions a crash interrupted). In a cluster, the leader of
``__transaction_state-0``: the topic is created on first use (FindCoordinator
or StagedTxns), this object is the topic's :class:`LeadershipListener` and
loads the coordinator when this broker is elected, drops it on resignation.
Another broker answers StagedTxns with NotCoordinator; while the partition has
no live leader (or too few brokers are live to create the topic) every broker
answers CoordinatorNotAvailable. Clients retry both after FindCoordinator.

A timer runs every second on the event loop: the coordinator's timeouts, the
markers queued for other leaders, and on every broker the scan for forgotten
open transactions in the partitions it leads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import (
    CoordinatorLoadInProgress,
    CoordinatorNotAvailable,
    InvalidRequest,
    LogSourceError,
    NotCoordinator,
    UnknownTopicOrPartition,
)
from ...format.control import ABORT, COMMIT
from ...protocol import txn_messages as tm
from ...protocol.coordinator_messages import FindCoordinatorRequest, FindCoordinatorResponse
from .. import internal_topics
from ..error_responses import error_fields
from ..session import Session
from ..tasks import spawn
from .admin_handlers import TxnAdminHandlers
from .coordinator import TXN_TOPIC, TxnCoordinator, transaction_state_topic, winners_of
from .markers import Marker, abort_forgotten, append_marker, replicated
from .producer_handlers import ProducerTxnHandlers

if TYPE_CHECKING:
    from ..state import BrokerState

log = logging.getLogger(__name__)

#: how often timed-out attempts are looked for and queued markers retried (Kafka's
#: transaction.abort.timed.out.transaction.cleanup.interval.ms is 10 s; readers wait on them)
EXPIRE_INTERVAL_S = 1.0
_DONE_CODES = (0, UnknownTopicOrPartition.code)  # written, or the topic is gone (nothing staged there)


def _send(
    address: tuple[str, int], req: tm.WriteTxnMarkersRequest, client_id: str, security: Any = None
) -> tm.WriteTxnMarkersResponse:
    from ...client.network import NetworkClient  # blocking client: runs in an executor thread

    # security: the inter-broker listener's TLS/SASL (broker/security/inter_broker.py)
    client = NetworkClient(
        f"{address[0]}:{address[1]}", client_id=client_id, threaded=False, security=security
    )
    try:
        return client.request(req)
    finally:
        client.close()


class TxnHandlers:
    """The transaction APIs of one broker, and the lifecycle of its coordinator."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self._coordinator: TxnCoordinator | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._flush_lock: asyncio.Lock | None = None
        self._expiring = False
        state.leadership_listeners[TXN_TOPIC] = self
        #: Kafka's transactional producer APIs (the coordinator's second front door)
        self.producer = ProducerTxnHandlers(state, self._coordinator_here, self._current)
        self.producer.flush_remote = self._flush_remote
        self.admin = TxnAdminHandlers(state, self._coordinator_here)

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {
            tm.STAGED_TXNS_KEY: self.staged_txns,
            tm.ApiKey.WRITE_TXN_MARKERS: self.write_txn_markers,
            **self.producer.by_key(),
            **self.admin.by_key(),
        }

    # ------------------------------------------------------------ lifecycle

    @property
    def coordinator(self) -> TxnCoordinator:
        """Single broker: the coordinator (loaded on first use)."""
        c = self._coordinator
        if c is None or c.state.logs is not self.state.logs:
            internal_topics.ensure(self.state, transaction_state_topic(self.state))
            self._load()
        return self._coordinator

    def _load(self) -> None:
        c = self._coordinator = TxnCoordinator(self.state, self.state.config.transaction_max_timeout_ms)
        c.complete_loaded()
        if c.remote:
            self._spawn(self._flush_remote(c), "txn-markers-to-leaders")

    def _current(self) -> TxnCoordinator | None:
        """The coordinator if this broker coordinates now."""
        if not self.state.config.cluster_mode:
            return self.coordinator
        c = self._coordinator
        return c if c is not None and c.active else None

    def start(self) -> None:
        """Load the coordinator of a single broker (completing decisions a crash interrupted); start the timer."""
        if not self.state.config.cluster_mode:
            _ = self.coordinator
        self._schedule()

    def on_elected(self, partition: int, leader_epoch: int) -> None:
        """This broker leads ``__transaction_state-0``: load the state, complete unfinished decisions."""
        if partition != 0 or self._current() is not None:
            return  # still loaded: this broker led the partition all along
        log.info(
            "broker %d coordinates transactions (leader epoch %d of %s-0)",
            self.state.broker_id,
            leader_epoch,
            TXN_TOPIC,
        )
        try:
            self._load()
        except Exception:  # clients see CoordinatorLoadInProgress until a later election loads it
            log.exception("loading the transaction state failed")

    def on_resigned(self, partition: int) -> None:
        """This broker no longer leads ``__transaction_state-0``: drop the state (pending waits are fenced)."""
        c = self._coordinator
        if partition == 0 and c is not None and self.state.config.cluster_mode:
            c.active = False
            self._coordinator = None
            log.info("broker %d no longer coordinates transactions", self.state.broker_id)

    def _spawn(self, coro: Any, name: str) -> None:
        try:
            spawn(coro, name=name)
        except RuntimeError:  # no loop (a unit test): the timer does it later
            coro.close()

    def _schedule(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(EXPIRE_INTERVAL_S, self._tick)

    def _tick(self) -> None:
        if self.state.logs is None:
            return  # the broker stopped
        try:
            c = self._current()
            registered = c.registered_producers() if c is not None else set()
            if c is not None and not self._expiring:
                self._spawn(self._expire(c), "txn-timeouts")
            if c is not None and c.remote:
                self._spawn(self._flush_remote(c), "txn-markers-to-leaders")
            abort_forgotten(self.state, self.state.config.transaction_max_timeout_ms, registered)
        except Exception:  # a failed round must not stop the timer
            log.exception("transaction timeout scan failed")
        self._schedule()

    async def _expire(self, c: TxnCoordinator) -> None:
        self._expiring = True
        try:
            await c.expire()
            await c.producer_txns.expire()
        except LogSourceError as e:
            log.info("transaction timeouts not applied yet: %s", e)
        except Exception:
            log.exception("transaction timeout scan failed")
        finally:
            self._expiring = False

    # ------------------------------------------------------------ markers for other leaders

    async def _flush_remote(self, c: TxnCoordinator) -> None:
        """Send queued markers to their partitions' leaders (WriteTxnMarkers); requeue what failed."""
        if self._flush_lock is None:
            self._flush_lock = asyncio.Lock()
        async with self._flush_lock:
            if not c.active or not c.remote:
                return  # a successor re-sends what this coordinator did not finish
            todo, c.remote = c.remote, []
            by_leader: dict[int, list[tuple[Marker, int]]] = {}
            for item in todo:
                (t, p, *_), _cid = item
                by_leader.setdefault(internal_topics.leader_of(self.state, t, p), []).append(item)
            loop = asyncio.get_running_loop()
            for leader, items in by_leader.items():
                if leader == self.state.broker_id:  # leadership moved here meanwhile
                    for m, cid in items:
                        try:
                            append_marker(self.state, *m)
                            spawn(c.confirm(m, cid), name=f"txn-marker-{m[0]}-{m[1]}")
                        except UnknownTopicOrPartition:
                            c.marker_done(m, cid)
                        except LogSourceError:
                            c.remote.append((m, cid))
                    continue
                address = self.state.broker_address(leader) if leader >= 0 else None
                req = tm.WriteTxnMarkersRequest(
                    [
                        tm.TxnMarker(pid, epoch, kind == COMMIT, [(t, p)])
                        for (t, p, pid, epoch, kind), _ in items
                    ]
                )
                try:
                    if address is None:
                        raise CoordinatorNotAvailable(f"broker {leader} is not live")
                    resp = await loop.run_in_executor(
                        None,
                        _send,
                        address,
                        req,
                        f"txn-coordinator-{self.state.broker_id}",
                        self.state.replication.settings.security
                        if self.state.replication is not None
                        else None,
                    )
                except Exception as e:  # the leader is down or moving: retried on the next tick
                    log.warning("markers for broker %d not written yet: %s", leader, e)
                    c.remote.extend(items)
                    continue
                for (m, cid), result in zip(items, resp.markers, strict=False):
                    if all(code in _DONE_CODES for code in result.errors.values()):
                        c.marker_done(m, cid)
                    else:
                        c.remote.append((m, cid))

    # ------------------------------------------------------------ finding the coordinator

    async def _txn_leader(self) -> int:
        """The broker leading ``__transaction_state-0`` (created on first use); CoordinatorNotAvailable if none."""
        if self.state.cluster is None:
            return self.state.broker_id
        if TXN_TOPIC not in self.state.cluster.topics():
            loop = asyncio.get_running_loop()  # ZooKeeper writes: off the event loop
            await loop.run_in_executor(
                None, internal_topics.ensure, self.state, transaction_state_topic(self.state)
            )
        leader = internal_topics.leader_of(self.state, TXN_TOPIC, 0)
        if leader < 0 or self.state.broker_address(leader) is None:
            raise CoordinatorNotAvailable(f"{TXN_TOPIC}-0 has no live leader yet: no transaction coordinator")
        return leader

    async def _coordinator_here(self) -> TxnCoordinator:
        """This broker's coordinator; NotCoordinator when another broker coordinates."""
        if self.state.cluster is None:
            return self.coordinator
        leader = await self._txn_leader()
        me = self.state.broker_id
        if leader != me:
            raise NotCoordinator(
                f"broker {me} is not the transaction coordinator: broker {leader} leads {TXN_TOPIC}-0"
            )
        c = self._current()
        if c is None:
            raise CoordinatorLoadInProgress(f"broker {me} is loading the transaction state")
        return c

    async def find_coordinator(
        self, req: FindCoordinatorRequest, listener: str | None = None
    ) -> FindCoordinatorResponse:
        """FindCoordinator for a transactional id (key_type 1): the leader of ``__transaction_state-0``, at its
        address on ``listener`` (the one the client came in on)."""
        if not req.key:
            raise InvalidRequest("transactional id is empty")
        node = await self._txn_leader()
        addr = self.state.broker_address(node, listener)
        if addr is None:
            raise CoordinatorNotAvailable(f"the transaction coordinator (broker {node}) is not live")
        return FindCoordinatorResponse(node_id=node, host=addr[0], port=addr[1], key=req.key)

    # ------------------------------------------------------------ the APIs

    async def staged_txns(self, req: tm.StagedTxnsRequest, session: Session) -> tm.StagedTxnsResponse:
        """Register an attempt's partitions, or commit / abort the write's attempts."""
        resp = tm.StagedTxnsResponse(last_committed_batch_id=-1)
        c = None
        try:
            c = await self._coordinator_here()
            if req.action == tm.REGISTER:
                for p in req.producers:
                    await c.register(
                        req.write_id, p.producer_id, p.producer_epoch, set(p.partitions), req.timeout_ms
                    )
            elif req.action == tm.COMMIT:
                resp.committed, resp.last_committed_batch_id = await c.commit(
                    req.write_id, req.batch_id, winners_of(req.producers)
                )
            elif req.action == tm.ABORT:
                await c.abort(req.write_id, winners_of(req.producers))
            else:
                raise InvalidRequest(
                    f"unknown StagedTxns action {req.action} (0 register, 1 commit, 2 abort)"
                )
            if req.action != tm.COMMIT:
                resp.last_committed_batch_id = c.last_committed.get(req.write_id, -1)
        except LogSourceError as e:
            resp.error_code, resp.error_message = error_fields(e)
        if c is not None and c.remote:
            await self._flush_remote(c)  # readers see the batch on the answer; what failed is retried
        return resp

    async def write_txn_markers(
        self, req: tm.WriteTxnMarkersRequest, session: Session
    ) -> tm.WriteTxnMarkersResponse:
        """Append each marker to the partitions this broker leads (a repeat appends nothing) and answer once
        they are on the ISR; errors per partition."""
        out = []
        written: dict[tuple[str, int], list[tm.TxnMarkerResult]] = {}
        for m in req.markers:
            r = tm.TxnMarkerResult(m.producer_id)
            for t, p in m.partitions:
                try:
                    append_marker(
                        self.state, t, p, m.producer_id, m.producer_epoch, COMMIT if m.committed else ABORT
                    )
                    r.errors[(t, p)] = 0
                    written.setdefault((t, p), []).append(r)
                except LogSourceError as e:
                    r.errors[(t, p)] = error_fields(e).code
            out.append(r)
        tps = list(written)
        results = await asyncio.gather(
            *(replicated(self.state, t, p) for t, p in tps), return_exceptions=True
        )
        for tp, res in zip(tps, results, strict=True):
            if isinstance(res, LogSourceError):
                for r in written[tp]:
                    r.errors[tp] = error_fields(res).code
            elif isinstance(res, BaseException):
                raise res
        return tm.WriteTxnMarkersResponse(out)
