"""Request handlers of transactions: our StagedTxns API (register / commit / abort the attempts of a
Spark write) and Kafka's WriteTxnMarkers (a coordinator asks this partition leader for markers).

The coordinator is made when the broker starts (completing decisions a crash
interrupted) and from then on runs :meth:`TxnCoordinator.expire` every second on
the event loop, which also retries markers queued for other brokers. In cluster
mode the controller coordinates; another broker answers StagedTxns with
NotCoordinator.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import InvalidRequest, LogSourceError, NotCoordinator, code_of
from ...format.control import ABORT, COMMIT
from ...protocol import txn_messages as tm
from .coordinator import TxnCoordinator, append_marker, winners_of

if TYPE_CHECKING:
    from ..handlers import Session
    from ..state import BrokerState

log = logging.getLogger(__name__)

#: how often timed-out attempts are looked for and queued markers retried (Kafka's
#: transaction.abort.timed.out.transaction.cleanup.interval.ms is 10 s; readers wait on them)
EXPIRE_INTERVAL_S = 1.0


def _send(address: tuple[str, int], req: tm.WriteTxnMarkersRequest, client_id: str) -> tm.WriteTxnMarkersResponse:
    from ...client.network import NetworkClient  # blocking client: runs in an executor thread

    client = NetworkClient(f"{address[0]}:{address[1]}", client_id=client_id, threaded=False)
    try:
        return client.request(req)
    finally:
        client.close()


class TxnHandlers:
    """The transaction APIs of one broker."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self._coordinator: TxnCoordinator | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._flushing = False

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {tm.STAGED_TXNS_KEY: self.staged_txns, tm.ApiKey.WRITE_TXN_MARKERS: self.write_txn_markers}

    @property
    def coordinator(self) -> TxnCoordinator:
        if self._coordinator is None or self._coordinator.state.logs is not self.state.logs:
            self._coordinator = TxnCoordinator(self.state, self.state.config.transaction_max_timeout_ms)
            self._schedule()
        return self._coordinator

    def start(self) -> None:
        """Load the coordinator (completing decisions a crash interrupted) and start its timer."""
        _ = self.coordinator

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
            self.coordinator.expire()
            if self.coordinator.remote and not self._flushing:
                asyncio.get_running_loop().create_task(self._flush_remote())
        except Exception:  # a failed round must not stop the timer
            log.exception("transaction timeout scan failed")
        self._schedule()

    async def _flush_remote(self) -> None:
        """Send queued markers to their partitions' leaders (WriteTxnMarkers); requeue what failed."""
        c = self.coordinator
        if self._flushing:
            return
        self._flushing = True
        try:
            todo, c.remote = c.remote, []
            by_leader: dict[int, list[tuple[str, int, int, int, int]]] = {}
            for item in todo:
                role = self.state.role(item[0], item[1])
                by_leader.setdefault(role.leader if role is not None else self.state.broker_id, []).append(item)
            loop = asyncio.get_running_loop()
            for leader, items in by_leader.items():
                if leader == self.state.broker_id:  # leadership moved here meanwhile
                    for t, p, pid, epoch, kind in items:
                        try:
                            append_marker(self.state, t, p, pid, epoch, kind, only_open=False)
                        except LogSourceError:
                            c.remote.append((t, p, pid, epoch, kind))
                    continue
                address = self.state.broker_address(leader)
                req = tm.WriteTxnMarkersRequest([tm.TxnMarker(pid, epoch, kind == COMMIT, [(t, p)])
                                                 for t, p, pid, epoch, kind in items])  # fmt: skip
                try:
                    if address is None:
                        raise NotCoordinator(f"broker {leader} is not known")
                    resp = await loop.run_in_executor(None, _send, address, req,
                                                      f"txn-coordinator-{self.state.broker_id}")  # fmt: skip
                except Exception as e:  # the leader is down or moving: retried on the next tick
                    log.warning("markers for broker %d not written yet: %s", leader, e)
                    c.remote.extend(items)
                    continue
                for item, result in zip(items, resp.markers, strict=False):
                    if any(result.errors.values()):
                        c.remote.append(item)
        finally:
            self._flushing = False

    async def staged_txns(self, req: tm.StagedTxnsRequest, session: Session) -> tm.StagedTxnsResponse:
        """Register an attempt's partitions, or commit / abort the write's attempts."""
        resp = tm.StagedTxnsResponse(last_committed_batch_id=-1)
        try:
            if self.state.cluster is not None and self.state.controller_id() != self.state.broker_id:
                raise NotCoordinator(f"broker {self.state.broker_id} is not the controller, which coordinates "
                                     "transactions")  # fmt: skip
            c = self.coordinator
            if req.action == tm.REGISTER:
                for p in req.producers:
                    c.register(req.write_id, p.producer_id, p.producer_epoch, set(p.partitions), req.timeout_ms)
            elif req.action == tm.COMMIT:
                resp.committed, resp.last_committed_batch_id = c.commit(req.write_id, req.batch_id,
                                                                        winners_of(req.producers))  # fmt: skip
            elif req.action == tm.ABORT:
                c.abort(req.write_id, winners_of(req.producers))
            else:
                raise InvalidRequest(f"unknown StagedTxns action {req.action} (0 register, 1 commit, 2 abort)")
            if req.action != tm.COMMIT:
                resp.last_committed_batch_id = c.last_committed.get(req.write_id, -1)
        except LogSourceError as e:
            resp.error_code, resp.error_message = code_of(e), e.message or str(e)
        if self.coordinator.remote:
            await self._flush_remote()  # the decision is recorded: markers elsewhere are retried if this fails
        return resp

    def write_txn_markers(self, req: tm.WriteTxnMarkersRequest, session: Session) -> tm.WriteTxnMarkersResponse:
        """Append each marker to the partitions this broker leads (per-partition errors otherwise)."""
        out = []
        for m in req.markers:
            r = tm.TxnMarkerResult(m.producer_id)
            for t, p in m.partitions:
                try:
                    append_marker(self.state, t, p, m.producer_id, m.producer_epoch, COMMIT if m.committed else ABORT,
                                  only_open=False)  # fmt: skip
                    r.errors[(t, p)] = 0
                except LogSourceError as e:
                    r.errors[(t, p)] = code_of(e)
            out.append(r)
        return tm.WriteTxnMarkersResponse(out)
