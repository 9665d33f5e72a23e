"""Request handler of our StagedTxns API (register / commit / abort the attempts of a Spark write).

The coordinator is made on first use (the broker's state is open by then) and
from then on runs :meth:`TxnCoordinator.expire` every second on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import InvalidRequest, LogSourceError, code_of
from ...protocol import txn_messages as tm
from .coordinator import DEFAULT_MAX_TIMEOUT_MS, TxnCoordinator, winners_of

if TYPE_CHECKING:
    from ..handlers import Session
    from ..state import BrokerState

log = logging.getLogger(__name__)

#: how often timed-out attempts are looked for (Kafka's
#: transaction.abort.timed.out.transaction.cleanup.interval.ms is 10 s; readers wait on them)
EXPIRE_INTERVAL_S = 1.0


class TxnHandlers:
    """The StagedTxns API of one broker."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self._coordinator: TxnCoordinator | None = None
        self._timer: asyncio.TimerHandle | None = None

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {tm.STAGED_TXNS_KEY: self.staged_txns}

    @property
    def coordinator(self) -> TxnCoordinator:
        if self._coordinator is None or self._coordinator.state.logs is not self.state.logs:
            raw = self.state.config.properties.get("transaction.max.timeout.ms", str(DEFAULT_MAX_TIMEOUT_MS))
            self._coordinator = TxnCoordinator(self.state, int(raw))
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
        except Exception:  # a failed round must not stop the timer
            log.exception("transaction timeout scan failed")
        self._schedule()

    def staged_txns(self, req: tm.StagedTxnsRequest, session: Session) -> tm.StagedTxnsResponse:
        """Register an attempt's partitions, or commit / abort the write's attempts."""
        resp = tm.StagedTxnsResponse(last_committed_batch_id=-1)
        try:
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
        return resp
