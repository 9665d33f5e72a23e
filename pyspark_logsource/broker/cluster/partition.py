"""Kafka's ``Partition``: the owner of a replicated partition's ISR and high watermark (HW).

As leader, a :class:`Partition` tracks each follower's log end offset (LEO,
:class:`FollowerReplica`, learnt from the offset the follower fetches at) and
keeps the HW at the minimum LEO over the in-sync replicas (ISR),
never moving it backwards (:meth:`Partition.maybe_advance_hw`); ``acks=all``
produces wait here for the HW to pass their records. Its ISR transitions are
decided here: a follower leaves when it has not caught up for
``replica.lag.time.max.ms`` (:meth:`Partition.lagging`, Kafka's
maybeShrinkIsr), rejoins once it reached the HW and the start of the
leader's epoch (:meth:`Partition.can_join`, maybeExpandIsr). The ZooKeeper
write of a new ISR is :mod:`.isr`'s; the result comes back as a new
``PartitionRole`` through ``BrokerState.update_role`` (the one owner of roles)
to :meth:`Partition.set_role`.

As follower, the HW is the leader's, capped by the local log end
(:func:`follow_high_watermark`); at a role change it starts from the
checkpointed one (:func:`init_high_watermark`).

:class:`ReplicationSettings` holds the replication settings, read once from
the broker config; :class:`LeaderPartitions` is what the follower fetch handler
(:mod:`.handlers`) uses of the replica manager (:mod:`.replicas`).
Event loop thread only; nothing here does IO.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import LogSourceError, NotEnoughReplicas, NotLeaderOrFollower
from ..security.inter_broker import inter_broker_security

if TYPE_CHECKING:
    from ..log.log import PartitionLog
    from ..state import PartitionRole


def setting(config: Any, key: str, default: int) -> int:
    """An integer broker setting: the typed attribute if the config has one, else its properties."""
    attr = getattr(config, key.replace(".", "_"), None)
    if isinstance(attr, int) and not isinstance(attr, bool):
        return attr
    raw = getattr(config, "properties", {}).get(key)
    return default if raw in (None, "") else int(raw)


def now_ms() -> int:
    """The monotonic clock of the ISR rules, in ms."""
    return int(time.monotonic() * 1000)


@dataclass(frozen=True)
class ReplicationSettings:
    """A broker's replication settings (Kafka's ``replica.*``), read once when replication starts."""

    broker_id: int
    lag_time_max_ms: int = 30_000
    fetch_wait_max_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 1 << 20
    fetch_response_max_bytes: int = 10 << 20
    fetch_backoff_ms: int = 200
    socket_timeout_ms: int = 30_000
    hw_checkpoint_interval_ms: int = 5000
    #: the broker's ``fetch.max.bytes``: the most a follower fetch is answered with
    answer_max_bytes: int = 50 << 20
    #: TLS/SASL of the inter-broker listener (a ClientSecurity; None: PLAINTEXT)
    security: Any = None

    @classmethod
    def from_config(cls, config: Any) -> ReplicationSettings:
        c = config
        return cls(
            broker_id=c.broker_id,
            lag_time_max_ms=setting(c, "replica.lag.time.max.ms", 30_000),
            fetch_wait_max_ms=setting(c, "replica.fetch.wait.max.ms", 500),
            fetch_min_bytes=setting(c, "replica.fetch.min.bytes", 1),
            fetch_max_bytes=setting(c, "replica.fetch.max.bytes", 1 << 20),
            fetch_response_max_bytes=setting(c, "replica.fetch.response.max.bytes", 10 << 20),
            fetch_backoff_ms=setting(c, "replica.fetch.backoff.ms", 200),
            socket_timeout_ms=setting(c, "replica.socket.timeout.ms", 30_000),
            hw_checkpoint_interval_ms=setting(c, "replica.high.watermark.checkpoint.interval.ms", 5000),
            answer_max_bytes=c.fetch_max_bytes,
            security=inter_broker_security(c) if getattr(c, "listeners", None) is not None else None,
        )


@dataclass
class FollowerReplica:
    """What a leader knows of one follower (Kafka's Replica)."""

    broker_id: int
    leo: int = -1  # unknown until it fetches
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    log_start: int = -1  # its log start offset, as its last fetch said (unknown until it fetches)

    def on_fetch(self, fetch_offset: int, leader_leo: int, now: int) -> None:
        # Kafka's rule: caught up now if it asked for the leader's end; or caught up as of its
        # previous fetch if it reached the end the leader had then.
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leo = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now


@dataclass
class Partition:
    """A partition this broker leads: its role (ISR included), followers, HW and acks=all waiters."""

    broker_id: int
    role: PartitionRole
    log: PartitionLog
    #: where this leader's epoch begins: a follower joins the ISR only once it has all of the previous epochs
    epoch_start_offset: int
    followers: dict[int, FollowerReplica] = field(default_factory=dict)
    #: (end offset, future) of acks=all produces waiting for the HW
    waiters: list[tuple[int, asyncio.Future]] = field(default_factory=list)
    #: an ISR write of this partition is in flight (:mod:`.isr`: one at a time)
    isr_update_pending: bool = False

    # ------------------------------------------------------------ role and followers

    def set_role(self, role: PartitionRole, now: int | None = None) -> bool:
        """Take a newer role of the same leader epoch (new ISR or znode version); False if it is older."""
        if role.zk_version < self.role.zk_version:
            return False
        self.role = role
        self.refresh_followers(now)
        return True

    def refresh_followers(self, now: int | None = None) -> None:
        """Track exactly the role's other replicas; the ISR members start caught up."""
        now = now_ms() if now is None else now
        wanted = [b for b in self.role.replicas if b != self.broker_id]
        for b in wanted:
            if b not in self.followers:
                # as Kafka resets lastCaughtUpTime on a leader change
                self.followers[b] = FollowerReplica(
                    b, last_caught_up_ms=now if b in self.role.isr else 0, last_fetch_ms=now
                )
        for b in [b for b in self.followers if b not in wanted]:
            del self.followers[b]

    def update_follower(
        self, replica_id: int, fetch_offset: int, now: int, log_start: int = -1
    ) -> FollowerReplica:
        """A follower fetched at ``fetch_offset`` (its LEO) with ``log_start`` (its log start offset, -1:
        not sent); NotLeaderOrFollower if it is no replica."""
        f = self.followers.get(replica_id)
        if f is None:
            raise NotLeaderOrFollower(
                f"broker {replica_id} is not a replica of {self.role.topic}-"
                f"{self.role.partition} (replicas {self.role.replicas})"
            )
        f.on_fetch(fetch_offset, self.log.log_end_offset, now)
        if log_start >= 0:
            f.log_start = log_start
        return f

    def low_watermark(self) -> int:
        """The smallest log start offset of the ISR (Kafka's low watermark, over the replicas a new
        leader is elected from): a DeleteRecords is answered once it reached the new log start."""
        low = self.log.log_start_offset
        for b in self.role.isr:
            if b != self.broker_id:
                f = self.followers.get(b)
                low = min(low, f.log_start if f is not None else -1)
        return low

    # ------------------------------------------------------------ ISR transitions

    def can_join(self, follower: FollowerReplica) -> bool:
        """Kafka's condition to expand the ISR: the follower reached the HW and the start of this epoch."""
        return follower.leo >= self.log.high_watermark and follower.leo >= self.epoch_start_offset

    def should_expand(self, follower: FollowerReplica) -> bool:
        """The follower is outside the ISR and may join it."""
        return follower.broker_id not in self.role.isr and self.can_join(follower)

    def lagging(self, now: int, lag_time_max_ms: int) -> list[int]:
        """ISR members that have not caught up for ``lag_time_max_ms`` (Kafka's out-of-sync replicas)."""
        out = []
        for b in self.role.isr:
            if b == self.broker_id:
                continue
            f = self.followers.get(b)
            if f is None or now - f.last_caught_up_ms > lag_time_max_ms:
                out.append(b)
        return out

    def check_min_isr(self) -> None:
        """NotEnoughReplicas unless the ISR has min.insync.replicas members (before an acks=all append)."""
        need = self.log.config.min_insync_replicas
        if len(self.role.isr) < need:
            raise NotEnoughReplicas(
                f"{self.role.topic}-{self.role.partition} has {len(self.role.isr)} in-sync "
                f"replicas {self.role.isr}, min.insync.replicas is {need}"
            )

    # ------------------------------------------------------------ high watermark

    def maybe_advance_hw(self) -> bool:
        """HW = min LEO over the ISR, never backwards; completes the acks=all waiters it passed. True if it moved."""
        lg = self.log
        hw = lg.log_end_offset
        for b in self.role.isr:
            if b == self.broker_id:
                continue
            f = self.followers.get(b)
            hw = min(hw, f.leo if f is not None and f.leo >= 0 else -1)
        if hw <= lg.high_watermark:
            return False
        lg.set_high_watermark(hw)
        if self.waiters:
            still = []
            for end, fut in self.waiters:
                if end <= hw:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    still.append((end, fut))
            self.waiters = still
        return True

    def fail_waiters(self, error: LogSourceError) -> None:
        """Answer every waiting acks=all produce with ``error`` (leadership moved, shutdown)."""
        for _, fut in self.waiters:
            if not fut.done():
                fut.set_exception(error)
                fut.exception()  # retrieved: a produce that already timed out must not log it
        self.waiters = []


def init_high_watermark(lg: PartitionLog, checkpointed: int | None) -> None:
    """A replica's HW when this broker first learns its role: the checkpointed one, capped by the log end."""
    lg.set_high_watermark(min(checkpointed if checkpointed is not None else 0, lg.log_end_offset))


def follow_high_watermark(lg: PartitionLog, leader_hw: int) -> None:
    """A follower's HW: the leader's (from a fetch answer), capped by what this replica has."""
    if leader_hw >= 0:
        lg.set_high_watermark(min(leader_hw, lg.log_end_offset))


class LeaderPartitions(Protocol):
    """What the leader's follower-fetch handler uses of the replica manager."""

    def leader_partition(self, topic: str, partition: int) -> Partition:
        """The partition as this broker leads it; NotLeaderOrFollower otherwise."""

    def update_follower(
        self, topic: str, partition: int, replica_id: int, fetch_offset: int, log_start: int = -1
    ) -> Partition:
        """A follower fetched at ``fetch_offset`` with its log start offset: move its state, the ISR and the HW."""
