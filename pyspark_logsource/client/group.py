"""Group membership of a Consumer: join, sync, heartbeat, leave (Kafka's classic ``consumer`` protocol).

As in Kafka's Java client, the rebalance itself runs in ``poll()`` on the
user's thread (so ``on_revoke`` can commit before the partitions move, and
``on_assign`` runs where the user's code runs), while a background thread
only heartbeats: it keeps the session alive between polls, notices a
rebalance (REBALANCE_IN_PROGRESS) or a lost membership, and leaves the group
when ``poll()`` has not been called for ``max_poll_interval_ms``.

It knows nothing of the consumer: it is handed the three things it uses,
``assign`` (replace the consumer's assignment), ``commit`` (commit the
consumer's positions) and ``metadata`` (the consumer's network client, for
the subscribed topics and their partition counts).

The membership has its own connection to the coordinator: a JoinGroup is
parked by the broker until the rebalance completes, and the broker answers a
connection's requests in order, so sharing the fetch connection would stall
fetches.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable

from ..errors import (
    ConfigError,
    CoordinatorNotAvailable,
    IllegalGeneration,
    LogSourceError,
    MemberIdRequired,
    NetworkError,
    RebalanceInProgress,
    RequestTimedOut,
    UnknownMemberId,
    error_for_code,
)
from ..protocol import group_messages as g
from ..topics import TopicPartition
from .assignors import ASSIGNORS
from .metadata import Bootstrap
from .network import COORDINATOR_ERRORS, NetworkClient, Retry
from .threads import ClientThread

log = logging.getLogger(__name__)

Callback = Callable[[list[TopicPartition]], None]
_REJOIN = (RebalanceInProgress.code, IllegalGeneration.code, UnknownMemberId.code)


class GroupMembership:
    """One member of a consumer group; driven by ``Consumer.poll()`` plus a heartbeat thread."""

    def __init__(
        self,
        bootstrap: Bootstrap | None,
        group_id: str,
        *,
        client_id: str,
        metadata: NetworkClient,
        assign: Callback,
        commit: Callable[[], None],
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        assignors: list[str] | None = None,
        request_timeout_ms: float = 30000,
        metadata_max_age_ms: float = 300000,
    ) -> None:
        names = assignors or ["range"]
        unknown = [n for n in names if n not in ASSIGNORS]
        if unknown:
            raise ConfigError(f"unknown assignor(s) {unknown}; available: {sorted(ASSIGNORS)}")
        if not group_id:
            raise ConfigError("group_id is empty")
        self.group_id = group_id
        self.assignors = names
        #: the consumer's client (metadata only), and what the membership does to the consumer
        self._metadata = metadata
        self._assign_partitions = assign
        self._commit_positions = commit
        self.session_timeout_ms = int(session_timeout_ms)
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.max_poll_interval_ms = int(max_poll_interval_ms)
        self._client = NetworkClient(
            bootstrap,
            client_id=client_id,
            request_timeout_ms=max(request_timeout_ms, max_poll_interval_ms + 5000),
            security=metadata.security,
        )
        self._node: int | None = None
        self.member_id = ""
        self.generation = -1
        self.topics: list[str] = []
        self.pattern: re.Pattern | None = None
        self.assigned: list[TopicPartition] = []
        self._lock = threading.Lock()
        self._rejoin = True
        self._stable = False
        self._closed = threading.Event()
        self._last_poll = time.monotonic()
        #: topic -> partition count of the subscription when it was last assigned; a change (a new topic
        #: matching the pattern, more partitions) makes the member rejoin, as Kafka's consumer does
        self._snapshot: dict[str, int] = {}
        self.metadata_max_age = metadata_max_age_ms / 1000
        self._next_metadata_check = time.monotonic() + self.metadata_max_age
        self.configure(True, 5000, None, None)
        self._thread = ClientThread(self._heartbeat_loop, "logsource-heartbeat")
        self._thread.start()

    # ------------------------------------------------------------ subscription

    def subscribe(self, topics: list[str] | None, pattern: str | re.Pattern | None) -> None:
        """Set the subscription; the next poll rejoins with it."""
        with self._lock:
            self.topics = sorted(set(topics or ()))
            self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self._rejoin = True

    def _subscribed_topics(self, metadata: NetworkClient) -> list[str]:
        if self.pattern is None:
            return self.topics
        metadata.refresh_metadata(None)
        return sorted(
            t for t in metadata.cluster.topics if not t.startswith("__") and self.pattern.fullmatch(t)
        )

    def _metadata_snapshot(self, metadata: NetworkClient) -> dict[str, int]:
        out = {}
        for t in self._subscribed_topics(metadata):
            try:
                out[t] = len(metadata.topic(t, refresh=True).partitions)
            except LogSourceError:
                out[t] = 0  # not there (yet): assignable once it is
        return out

    def check_metadata(self, metadata: NetworkClient) -> bool:
        """Every ``metadata.max.age.ms``: True (and rejoin) if the subscription's topics or partitions changed."""
        now = time.monotonic()
        if now < self._next_metadata_check:
            return False
        self._next_metadata_check = now + self.metadata_max_age
        snapshot = self._metadata_snapshot(metadata)
        if snapshot == self._snapshot:
            return False
        log.info(
            "group %s: subscription metadata changed (%s -> %s); rejoining",
            self.group_id,
            self._snapshot,
            snapshot,
        )
        with self._lock:
            self._stable, self._rejoin = False, True
        return True

    @property
    def rejoin_needed(self) -> bool:
        return self._rejoin

    # ------------------------------------------------------------ the rebalance (on the poll thread)

    def _request(self, req: object, timeout: float | None = None) -> object:
        """Send to the group's coordinator; find it again while it moves (another broker, a failover).

        Finding it is retried for up to a session timeout: longer, and the
        members would have been evicted anyway.
        """
        retry = Retry(self.session_timeout_ms / 1000)
        while True:
            try:
                resp = self._send(req, timeout)
            except LogSourceError as e:
                if e.code not in COORDINATOR_ERRORS and not isinstance(e, NetworkError):
                    raise
                retry.wait(e)
                continue
            if resp.error_code not in COORDINATOR_ERRORS:
                return resp
            self._node = None
            retry.wait(error_for_code(resp.error_code, f"group {self.group_id!r}"))

    def _send(self, req: object, timeout: float | None) -> object:
        if self._node is None:
            self._node = self._client.coordinator(self.group_id, refresh=True)
        # the raw response: its error code (and MEMBER_ID_REQUIRED's member id) drive the state machine
        done, box = threading.Event(), []
        try:
            conn = self._client.node_connection(self._node)
        except LogSourceError as e:
            self._node = None
            if isinstance(e, NetworkError):
                raise
            # not in the metadata any more (LeaderNotAvailable): the coordinator died; find the next one
            raise CoordinatorNotAvailable(f"coordinator of group {self.group_id!r} is gone: {e}") from e
        conn.send(req, lambda r, e: (box.append((r, e)), done.set()), timeout=timeout)
        if not done.wait((timeout or self._client.request_timeout_ms / 1000) + 5):
            raise RequestTimedOut(f"no answer to {type(req).__name__} from the coordinator")
        resp, err = box[0]
        if err is not None:
            self._node = None
            raise err
        return resp

    def poll_tick(self) -> None:
        """Called at each poll: the member is alive (max.poll.interval.ms)."""
        self._last_poll = time.monotonic()

    def join(self, metadata: NetworkClient) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """(Re)join and sync; returns (revoked, assigned) partitions. Retries until stable."""
        while True:
            self._snapshot = self._metadata_snapshot(metadata)
            self._next_metadata_check = time.monotonic() + self.metadata_max_age
            topics = sorted(self._snapshot)
            sub = g.encode_subscription(g.Subscription(topics, owned_partitions=[]))
            req = g.JoinGroupRequest(
                self.group_id,
                self.session_timeout_ms,
                self.max_poll_interval_ms,
                self.member_id,
                g.CONSUMER_PROTOCOL_TYPE,
                [g.JoinGroupProtocol(n, sub) for n in self.assignors],
            )
            with self._lock:
                self._stable = False
                self._rejoin = False
            resp = self._request(req, self.max_poll_interval_ms / 1000 + 10)
            if resp.error_code == MemberIdRequired.code:
                self.member_id = resp.member_id
                continue
            if resp.error_code == UnknownMemberId.code:
                self.member_id = ""
                continue
            if resp.error_code == RebalanceInProgress.code:
                continue
            if resp.error_code:
                raise error_for_code(resp.error_code, f"join group {self.group_id!r}")
            self.member_id, self.generation = resp.member_id, resp.generation_id
            assignments = {}
            if resp.leader == self.member_id:
                assignments = self._assign(resp, metadata)
            sresp = self._request(
                g.SyncGroupRequest(
                    self.group_id,
                    self.generation,
                    self.member_id,
                    assignments,
                    protocol_type=g.CONSUMER_PROTOCOL_TYPE,
                    protocol_name=resp.protocol_name,
                )
            )
            if sresp.error_code in _REJOIN:
                if sresp.error_code == UnknownMemberId.code:
                    self.member_id = ""
                continue
            if sresp.error_code:
                raise error_for_code(sresp.error_code, f"sync group {self.group_id!r}")
            new = sorted(g.decode_assignment(sresp.assignment).partitions)
            old, self.assigned = self.assigned, new
            with self._lock:
                self._stable = not self._rejoin
            log.info(
                "group %s: member %s generation %d assigned %s",
                self.group_id,
                self.member_id,
                self.generation,
                new,
            )
            return old, new

    def _assign(self, resp: g.JoinGroupResponse, metadata: NetworkClient) -> dict[str, bytes]:
        assignor = ASSIGNORS.get(resp.protocol_name or "")
        if assignor is None:
            raise ConfigError(f"the group chose assignor {resp.protocol_name!r}, which this client lacks")
        subs = {m.member_id: g.decode_subscription(m.metadata).topics for m in resp.members}
        counts = {}
        for t in sorted({t for ts in subs.values() for t in ts}):
            try:
                counts[t] = len(metadata.topic(t, refresh=True).partitions)
            except LogSourceError as e:
                log.warning("group %s: topic %s is not assignable: %s", self.group_id, t, e)
        plan = assignor(subs, counts)
        return {mid: g.encode_assignment(g.Assignment(tps)) for mid, tps in plan.items()}

    def lost(self) -> None:
        """The membership is gone (expired, fenced): forget the id and rejoin."""
        with self._lock:
            self.member_id, self.generation, self._stable, self._rejoin = "", -1, False, True

    # ------------------------------------------------------------ driving the consumer (its poll thread)

    def configure(
        self,
        auto_commit: bool,
        auto_commit_interval_ms: float,
        on_assign: Callback | None,
        on_revoke: Callback | None,
    ) -> None:
        """Callbacks and auto-commit, set by ``Consumer.subscribe``."""
        self.auto_commit, self.auto_commit_interval = auto_commit, auto_commit_interval_ms / 1000
        self.on_assign, self.on_revoke = on_assign, on_revoke
        self._next_commit = time.monotonic() + self.auto_commit_interval

    def tick(self) -> None:
        """At each poll: rebalance if needed (revoke, commit, join, assign), else auto-commit when due."""
        self.poll_tick()
        if not self._rejoin:
            self.check_metadata(self._metadata)
        if self._rejoin:
            if self.assigned:
                revoked = self.assigned
                if self.on_revoke is not None:
                    self.on_revoke(revoked)
                if self.auto_commit:
                    self._commit()
                self.assigned = []
            self._assign_partitions(
                []
            )  # eager protocol: give everything up; positions come back from commits
            _, new = self.join(self._metadata)
            self._assign_partitions(new)
            if self.on_assign is not None:
                self.on_assign(new)
            self._next_commit = time.monotonic() + self.auto_commit_interval
        elif self.auto_commit and time.monotonic() >= self._next_commit:
            self._next_commit = time.monotonic() + self.auto_commit_interval
            self._commit()

    def _commit(self) -> None:
        try:
            self._commit_positions()
        except (RebalanceInProgress, IllegalGeneration, UnknownMemberId) as e:
            # the partitions already moved: the new owner resumes from the last successful commit
            log.info("group %s: auto-commit rejected (%s); rejoining", self.group_id, type(e).__name__)
            with self._lock:
                self._stable, self._rejoin = False, True

    # ------------------------------------------------------------ heartbeats (background thread)

    def _heartbeat_loop(self) -> None:
        while not self._closed.wait(self.heartbeat_interval):
            with self._lock:
                stable, member, gen = self._stable, self.member_id, self.generation
            if not stable:
                continue
            if (time.monotonic() - self._last_poll) * 1000 > self.max_poll_interval_ms:
                log.warning(
                    "group %s: poll() not called for max.poll.interval.ms=%d; leaving the group",
                    self.group_id,
                    self.max_poll_interval_ms,
                )
                self.leave()
                continue
            try:
                resp = self._request(g.HeartbeatRequest(self.group_id, gen, member))
            except LogSourceError as e:
                log.debug("group %s: heartbeat failed: %s", self.group_id, e)
                self._node = None
                continue
            if resp.error_code in _REJOIN:
                with self._lock:
                    if self.member_id == member:
                        self._stable, self._rejoin = False, True
                        if resp.error_code == UnknownMemberId.code:
                            self.member_id, self.generation = "", -1

    def leave(self) -> None:
        """Leave the group (best effort) so the others rebalance at once instead of after a session."""
        with self._lock:
            member, self._stable, self._rejoin = self.member_id, False, True
            self.member_id, self.generation = "", -1
        if not member:
            return
        try:
            self._request(g.LeaveGroupRequest(self.group_id, [member]), 5.0)
        except LogSourceError as e:
            log.debug("group %s: leave failed: %s", self.group_id, e)

    def close(self) -> None:
        """Commit (auto-commit), leave, and stop the heartbeat thread."""
        self._closed.set()
        if self.auto_commit and self.assigned and self._stable:
            self._commit()
        self.leave()
        self._client.close()
        self._thread.join(timeout=2.0)
