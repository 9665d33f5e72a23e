"""The clients' view of a cluster: bootstrap, metadata, one connection per broker, and routing.

:class:`NetworkClient` finds a reachable broker among the bootstrap list and
the brokers the metadata names, and sends each request where Kafka sends it:
a partition's request to its leader (:meth:`NetworkClient.for_leaders`), a
group's to its coordinator (:meth:`NetworkClient.coordinator_request`),
topic creation and deletion to the controller
(:meth:`NetworkClient.controller_request`). When the answer says the
request went to the wrong broker (NotLeaderOrFollower, LeaderNotAvailable,
NotCoordinator, NotController) or the broker is gone, the metadata is
refreshed and the request retried with backoff until the request timeout,
as Kafka's clients do during a leader election.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import (
    ClientClosed,
    CoordinatorLoadInProgress,
    CoordinatorNotAvailable,
    FencedLeaderEpoch,
    LeaderNotAvailable,
    LogSourceError,
    NetworkError,
    NotController,
    NotCoordinator,
    NotLeaderOrFollower,
    OffsetNotAvailable,
    UnknownLeaderEpoch,
    UnknownTopicOrPartition,
    error_for_code,
)
from ..protocol.coordinator_messages import FindCoordinatorRequest
from ..protocol.messages import MetadataRequest, MetadataResponse
from ..topics import TopicPartition
from .connection import BrokerConnection, raise_for_response
from .metadata import Bootstrap, BrokerInfo, ClusterMetadata, PartitionInfo, TopicDescription, parse_bootstrap
from .metrics import ClientMetrics
from .security import ClientSecurity

log = logging.getLogger(__name__)

#: Partition errors that mean "ask the partition's (new) leader": refresh the metadata and retry.
#: OffsetNotAvailable: a new leader whose high watermark trails the start of its epoch (KIP-207).
ROUTING_ERRORS = frozenset(
    {
        NotLeaderOrFollower.code,
        LeaderNotAvailable.code,
        FencedLeaderEpoch.code,
        UnknownLeaderEpoch.code,
        NetworkError.code,
        OffsetNotAvailable.code,
    }
)
#: Errors that mean "find the group's coordinator again".
COORDINATOR_ERRORS = frozenset(
    {NotCoordinator.code, CoordinatorNotAvailable.code, CoordinatorLoadInProgress.code}
)
#: Kafka's NOT_CONTROLLER: CreateTopics/DeleteTopics reached a broker that is not the controller.
NOT_CONTROLLER = 41


class Retry:
    """One retry budget: exponential backoff (``retry.backoff.ms`` doubling up to 1 s) until a deadline."""

    def __init__(self, timeout: float, backoff: float = 0.1, max_backoff: float = 1.0) -> None:
        self.deadline = time.monotonic() + timeout
        self.backoff, self.max_backoff = backoff, max_backoff

    def wait(self, error: BaseException) -> None:
        """Sleep before the next attempt, or raise ``error`` when the budget is spent."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise error
        time.sleep(min(self.backoff, left))
        self.backoff = min(self.backoff * 2, self.max_backoff)


class NetworkClient:
    """Bootstrap, metadata and one connection per broker, shared by a client's threads."""

    def __init__(
        self,
        bootstrap: Bootstrap | None,
        *,
        client_id: str | None = None,
        request_timeout_ms: float = 30000,
        threaded: bool = True,
        max_in_flight: int = 0,
        security: ClientSecurity | None = None,
        stats: ClientMetrics | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        #: TLS and SASL settings of every connection (kafka-python's names; client/security.py)
        self.security = security
        self.stats = stats  # handed to every connection: each answer's latency and throttle
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.threaded = threaded
        self.max_in_flight = max_in_flight
        self.cluster = ClusterMetadata()
        self._coordinators: dict[str, int] = {}
        self._conns: dict[tuple[str, int], BrokerConnection] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _connect(self, addr: tuple[str, int]) -> BrokerConnection:
        with self._lock:
            if self._closed:
                raise ClientClosed("client is closed")
            c = self._conns.get(addr)
            if c is not None and not c.closed:
                return c
        c = BrokerConnection(
            addr[0],
            addr[1],
            client_id=self.client_id,
            request_timeout_ms=self.request_timeout_ms,
            threaded=self.threaded,
            max_in_flight=self.max_in_flight,
            security=self.security,
            stats=self.stats,
        )
        with self._lock:
            old = self._conns.get(addr)
            if old is not None and not old.closed:
                c.close()
                return old
            self._conns[addr] = c
        return c

    @property
    def arrow_body(self) -> bool:
        """True if the brokers store and serve our Arrow-bodied batches; else Kafka's layout is used."""
        return self.any_connection().arrow_body

    def candidates(self) -> list[tuple[str, int]]:
        """Broker addresses to try for a request any broker can answer.

        Open connections first (fewest requests in flight, like Kafka's least
        loaded node), then the brokers of the last metadata, then the bootstrap
        list: once the metadata knows the cluster, losing every bootstrap
        broker does not strand the client, and losing every known broker
        falls back to the bootstrap list.
        """
        with self._lock:
            open_ = sorted((c for c in self._conns.values() if not c.closed), key=lambda c: c.in_flight)
            out = [(c.host, c.port) for c in open_]
        out += [(b.host, b.port) for b in self.cluster.brokers.values()]
        out += self.bootstrap
        return list(dict.fromkeys(out))

    def any_connection(self) -> BrokerConnection:
        """A connection to any reachable broker (open ones first, then known brokers, then bootstrap)."""
        errors = []
        for addr in self.candidates():
            try:
                return self._connect(addr)
            except NetworkError as e:
                errors.append(str(e))
        raise NetworkError("no broker reachable: " + "; ".join(errors))

    def node_connection(self, node_id: int, refresh: bool = True) -> BrokerConnection:
        """A connection to the broker with ``node_id`` (from the metadata, refreshed if it lacks the
        node and ``refresh``; an I/O thread passes False: a blocking request there could wait for itself)."""
        b = self.cluster.brokers.get(node_id)
        if b is None and not refresh:
            raise LeaderNotAvailable(f"broker {node_id} is not in the cluster metadata")
        if b is None:
            self.refresh_metadata(None)
            b = self.cluster.brokers.get(node_id)
            if b is None:
                raise LeaderNotAvailable(f"broker {node_id} is not in the cluster metadata")
        return self._connect((b.host, b.port))

    def throttled(self, node_id: int, now: float) -> bool:
        """True while the broker ``node_id`` throttles us (its last throttle_time_ms has not passed)."""
        b = self.cluster.brokers.get(node_id)
        c = None if b is None else self._conns.get((b.host, b.port))
        return c is not None and c.throttled_until > now

    def request(self, request: Any, node_id: int | None = None, timeout: float | None = None) -> Any:
        """Send and wait; typed errors for top-level error codes.

        Without ``node_id`` any broker may answer: a broker that is down or
        drops the connection before answering is skipped for the next one
        (each broker tried once), so a dead bootstrap server or a killed
        broker costs one connection attempt, not the request.
        """
        if node_id is not None:
            return self.node_connection(node_id).request(request, timeout)
        tried: set[tuple[str, int]] = set()
        errors: list[str] = []
        while True:
            conn = None
            for addr in self.candidates():
                if addr in tried:
                    continue
                tried.add(addr)
                try:
                    conn = self._connect(addr)
                    break
                except NetworkError as e:
                    errors.append(str(e))
            if conn is None:
                raise NetworkError("no broker reachable: " + "; ".join(errors))
            try:
                return conn.request(request, timeout)
            except NetworkError as e:
                errors.append(str(e))
                log.debug("request to %s failed, trying another broker: %s", conn.address, e)

    def refresh_metadata(self, topics: list[str] | None, allow_auto_create: bool = False) -> MetadataResponse:
        """Fetch metadata (``topics=None``: all topics) and merge it into ``self.cluster``."""
        resp = self.request(MetadataRequest(topics, allow_auto_create))
        brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port) for b in resp.brokers}
        cluster = self.cluster
        new_topics = dict(cluster.topics) if topics is not None else {}
        for t in resp.topics:
            if t.error_code:
                new_topics.pop(t.name, None)
                continue
            parts = [
                PartitionInfo(p.partition, p.leader_id, p.leader_epoch, list(p.replicas), list(p.isr))
                for p in sorted(t.partitions, key=lambda p: p.partition)
            ]
            new_topics[t.name] = TopicDescription(t.name, parts)
        self.cluster = ClusterMetadata(
            brokers or cluster.brokers, new_topics, resp.controller_id, resp.cluster_id
        )
        return resp

    def topic(self, name: str, allow_auto_create: bool = False, refresh: bool = False) -> TopicDescription:
        """The topic's description; raises UnknownTopicOrPartition (or the broker's error)."""
        t = None if refresh else self.cluster.topics.get(name)
        if t is not None:
            return t
        resp = self.refresh_metadata([name], allow_auto_create)
        for tm in resp.topics:
            if tm.name == name and tm.error_code:
                raise error_for_code(tm.error_code, f"topic {name!r}: " + _code_name(tm.error_code))
        t = self.cluster.topics.get(name)
        if t is None:
            raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
        return t

    def leader_for(self, topic: str, partition: int) -> int:
        """Node id of the partition's leader; refreshes metadata once if unknown."""
        leader = self.cluster.leader(topic, partition)
        if leader is None:
            self.topic(topic, refresh=True)
            leader = self.cluster.leader(topic, partition)
            if leader is None:
                n = self.cluster.num_partitions(topic)
                if n is not None and not 0 <= partition < n:
                    raise UnknownTopicOrPartition(
                        f"topic {topic!r} has no partition {partition} (it has {n})"
                    )
                raise LeaderNotAvailable(f"partition {topic}-{partition} has no leader")
        return leader

    # ------------------------------------------------------------ routing with retries

    def _timeout(self, timeout: float | None) -> float:
        return self.request_timeout_ms / 1000.0 if timeout is None else timeout

    def for_leaders(
        self,
        tps: Iterable[TopicPartition],
        build: Callable[[list[TopicPartition]], Any],
        timeout: float | None = None,
    ) -> dict[TopicPartition, Any]:
        """Send ``build(partitions)`` to each partition's leader; return each partition's answer.

        The response's ``partitions`` are matched by (topic, partition). Those
        answered with a routing error (not the leader, no leader yet, broker
        gone) are asked again, of the leader a metadata refresh names, until
        ``timeout`` (default: the request timeout); other errors are left in
        the answers for the caller.
        """
        pending = list(dict.fromkeys((t, int(p)) for t, p in tps))
        out: dict[TopicPartition, Any] = {}
        retry = Retry(self._timeout(timeout))
        while pending:
            again: list[TopicPartition] = []
            last: BaseException | None = None
            by_node: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                try:
                    by_node.setdefault(self.leader_for(*tp), []).append(tp)
                except LeaderNotAvailable as e:
                    again.append(tp)
                    last = e
            for node, items in by_node.items():
                try:
                    resp = self.request(build(items), node)
                except (NetworkError, LeaderNotAvailable) as e:
                    again.extend(items)
                    last = e
                    continue
                wanted = set(items)
                for r in resp.partitions:
                    tp = (r.topic, r.partition)
                    if tp not in wanted:
                        continue
                    wanted.discard(tp)
                    if r.error_code in ROUTING_ERRORS:
                        again.append(tp)
                        last = error_for_code(r.error_code, f"{tp[0]}-{tp[1]} on broker {node}")
                    else:
                        out[tp] = r
                for tp in wanted:  # not answered at all: the broker does not host it (yet)
                    again.append(tp)
                    last = UnknownTopicOrPartition(f"broker {node} did not answer for {tp[0]}-{tp[1]}")
            if not again:
                break
            assert last is not None
            log.debug("retrying %d partition(s) after %s", len(again), last)
            retry.wait(last)
            self.refresh_quietly(sorted({t for t, _ in again}))
            pending = again
        return out

    def refresh_quietly(self, topics: list[str] | None) -> None:
        """Refresh the metadata; a failure is only logged (the retried request reports what is wrong)."""
        try:
            self.refresh_metadata(topics)
        except LogSourceError as e:  # the next attempt reports what is wrong
            log.debug("metadata refresh failed: %s", e)

    def coordinator(self, group: str, refresh: bool = False) -> int:
        """Node id of the group's coordinator (FindCoordinator, cached until ``refresh``)."""
        node = None if refresh else self._coordinators.get(group)
        if node is None:
            resp = raise_for_response(self.request(FindCoordinatorRequest(group)))
            node = resp.node_id
            if node not in self.cluster.brokers:
                self.cluster.brokers[node] = BrokerInfo(node, resp.host, resp.port)
            self._coordinators[group] = node
        return node

    def coordinator_request(self, group: str, request: Any, timeout: float | None = None) -> Any:
        """Send a group request to the group's coordinator, finding it again when it moved.

        NotCoordinator, CoordinatorNotAvailable and CoordinatorLoadInProgress
        (top-level, on any partition or group), a lost connection and a coordinator
        gone from the metadata (a dead broker) are retried;
        the response is returned as is otherwise.
        """
        retry = Retry(self._timeout(timeout))
        while True:
            try:
                node = self.coordinator(group)
                resp = self.request(request, node)
                items = [*getattr(resp, "partitions", ()), *getattr(resp, "groups", ())]
                codes = {getattr(r, "error_code", 0) for r in items}
                bad = codes & COORDINATOR_ERRORS
                if not bad:
                    return resp
                err: LogSourceError = error_for_code(min(bad), f"group {group!r} on broker {node}")
            except (NetworkError, NotCoordinator, CoordinatorNotAvailable, CoordinatorLoadInProgress) as e:
                err = e
            except (
                LeaderNotAvailable
            ) as e:  # the cached coordinator left the metadata: it died, find the next
                err = e
            self._coordinators.pop(group, None)
            log.debug("group %s: coordinator request failed (%s); looking it up again", group, err)
            retry.wait(err)

    def controller_request(self, request: Any, timeout: float | None = None) -> Any:
        """Send an admin request (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, reassignments) to
        the controller, as Kafka's Admin does.

        NOT_CONTROLLER (on any topic, or top-level), or a controller that is gone, refreshes
        the metadata (which names the controller) and retries.
        """
        retry = Retry(self._timeout(timeout))
        while True:
            node = self.cluster.controller_id
            try:
                if node not in self.cluster.brokers:
                    self.refresh_metadata(None)
                    node = self.cluster.controller_id
                resp = self.request(request, node if node in self.cluster.brokers else None)
                if not any(
                    getattr(r, "error_code", 0) == NOT_CONTROLLER
                    for r in getattr(resp, "topics", None) or getattr(resp, "results", ())
                ):
                    return resp
                err: LogSourceError = error_for_code(NOT_CONTROLLER, f"broker {node} is not the controller")
            except (NetworkError, NotController) as e:
                err = e
            self.cluster = ClusterMetadata(
                self.cluster.brokers, self.cluster.topics, -1, self.cluster.cluster_id
            )
            retry.wait(err)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = list(self._conns.values())
            self._conns.clear()
        for c in conns:
            c.close()


def _code_name(code: int) -> str:
    e = error_for_code(code)
    return type(e).__name__ if isinstance(e, LogSourceError) else str(code)
