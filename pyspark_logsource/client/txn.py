"""Transactional pieces of the clients: staged writes and the read_committed filter.

* :class:`TransactionalProducer` stages: every batch carries the
  transactional attribute (set by its :class:`TransactionalSender`), so
  ``read_committed`` readers see nothing of it until the coordinator writes
  a COMMIT marker.
* :class:`StagedTxns` talks to the coordinator (our StagedTxns API): register
  an attempt's partitions, commit a write's winners under a batch id, abort.
* :class:`CommittedFilter` (in :mod:`.committed`, re-exported here) is Kafka's
  consumer-side algorithm: control batches and the batches of aborted
  transactions never reach the user.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import (
    CoordinatorLoadInProgress,
    CoordinatorNotAvailable,
    LeaderNotAvailable,
    NetworkError,
    NotCoordinator,
)
from ..format.control import set_transactional
from ..protocol import txn_messages as tm
from ..protocol.coordinator_messages import FindCoordinatorRequest
from .committed import CommittedFilter, committed_only  # noqa: F401  (re-exported: the read_committed filter)
from .connection import raise_for_response
from .metadata import BrokerInfo
from .network import NetworkClient, Retry
from .producer import Producer
from .security import ClientSecurity
from .sender import Sender

log = logging.getLogger(__name__)

#: the coordinator moved or is being elected; LeaderNotAvailable: the cached one left the cluster metadata
_RETRIABLE = (
    NotCoordinator,
    CoordinatorNotAvailable,
    CoordinatorLoadInProgress,
    NetworkError,
    LeaderNotAvailable,
)


class TransactionalSender(Sender):
    """The sender of a TransactionalProducer: every batch it sends carries the transactional attribute."""

    def _encode(self, b: Any, pid: int, epoch: int, seq: int, restamp: bool) -> None:
        # the hook of both numbering paths (_prepare and _stamp_singles' whole round)
        if b.encoded is not None:
            set_transactional(b.encoded, crc=False)  # the restamp below recomputes the CRC
            super()._encode(b, pid, epoch, seq, restamp)
        else:
            super()._encode(b, pid, epoch, seq, restamp)
            set_transactional(b.encoded)


class TransactionalProducer(Producer):
    """An idempotent producer whose batches are staged (transactional) until a coordinator decides."""

    _sender_type = TransactionalSender

    def __init__(self, bootstrap: str, **kwargs: Any) -> None:
        kwargs["enable_idempotence"] = True
        super().__init__(bootstrap, **kwargs)

    def producer_id_and_epoch(self) -> tuple[int, int]:
        """Get (once) and return this producer's id and epoch; register them before sending."""
        return self._sender.producer_id_and_epoch()


class StagedTxns:
    """Client of the coordinator's StagedTxns API (close it).

    The coordinator is found with FindCoordinator (key_type 1, the write id as
    the transactional id): in a cluster the leader of ``__transaction_state-0``.
    NotCoordinator, CoordinatorNotAvailable, CoordinatorLoadInProgress and a
    lost connection (the coordinator failed over) find it again and retry,
    with backoff, until the request timeout. A commit retried that way is
    answered as a repeat when its first try was recorded ("committed before",
    with the batch's winners kept): its data is published once either way.
    """

    def __init__(
        self,
        bootstrap: str,
        client_id: str | None = None,
        request_timeout_ms: float = 30000,
        security: ClientSecurity | None = None,
    ) -> None:
        """``security``: TLS and SASL of the connections (client/security.py)."""
        self._client = NetworkClient(
            bootstrap,
            client_id=client_id or "logsource-txn",
            request_timeout_ms=request_timeout_ms,
            security=security,
        )
        self._node: int | None = None

    def offered(self) -> bool:
        """True if the broker offers the StagedTxns API: ours, which Apache Kafka does not have."""
        return self._client.any_connection().supports(tm.STAGED_TXNS_KEY)

    def coordinator(self, write_id: str, refresh: bool = False) -> int:
        """Node id of the transaction coordinator (FindCoordinator, cached until ``refresh``; retried while
        there is none, until the request timeout)."""
        if refresh:
            self._node = None
        return self._retrying(write_id, self._find)

    def _find(self, write_id: str) -> int:
        if self._node is None:
            resp = raise_for_response(
                self._client.request(FindCoordinatorRequest(write_id or "-", key_type=1))
            )
            if resp.node_id not in self._client.cluster.brokers:
                self._client.cluster.brokers[resp.node_id] = BrokerInfo(resp.node_id, resp.host, resp.port)
            self._node = resp.node_id
        return self._node

    def _retrying(self, write_id: str, fn: Callable[[str], Any]) -> Any:
        retry = Retry(self._client.request_timeout_ms / 1000)
        while True:
            try:
                return fn(write_id)
            except _RETRIABLE as e:
                err: Exception = e
            log.debug("transaction coordinator of %s: %s; finding it again", write_id, err)
            self._node = None
            retry.wait(err)

    def _call(self, req: tm.StagedTxnsRequest) -> tm.StagedTxnsResponse:
        return self._retrying(
            req.write_id, lambda w: raise_for_response(self._client.request(req, self._find(w)))
        )

    def register(
        self,
        write_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[tuple[str, int]],
        timeout_ms: int,
    ) -> None:
        """Announce that this attempt may stage data in ``partitions`` (before it writes)."""
        p = tm.StagedProducer(producer_id, epoch, {tp: -1 for tp in partitions})
        self._call(tm.StagedTxnsRequest(tm.REGISTER, write_id, 0, timeout_ms, [p]))

    def commit(
        self, write_id: str, batch_id: int, producers: list[tm.StagedProducer]
    ) -> tm.StagedTxnsResponse:
        """Publish ``producers``' staged data as batch ``batch_id`` (a no-op if it was committed before)."""
        return self._call(tm.StagedTxnsRequest(tm.COMMIT, write_id, batch_id, 60000, producers))

    def abort(self, write_id: str, producers: list[tm.StagedProducer]) -> None:
        """Abort ``producers`` and every attempt registered under ``write_id``."""
        self._call(tm.StagedTxnsRequest(tm.ABORT, write_id, 0, 60000, producers))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> StagedTxns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
