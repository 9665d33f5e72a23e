"""The replica manager: a broker's part in replication (Kafka's ReplicaManager and Partition).

As leader of a partition it tracks each follower's log end offset (LEO),
learnt from the offset the follower fetches at, and keeps the high watermark
(HW) at the minimum LEO over the in-sync replicas (ISR): consumers, ListOffsets
and Spark read below it, and an ``acks=all`` produce is answered once the HW
passed its last record. The ISR shrinks and grows by ``replica.lag.time.max.ms``
(:mod:`.isr`). ``acks=all`` with fewer in-sync replicas than
``min.insync.replicas`` is refused before anything is appended
(NotEnoughReplicas), as in Kafka.

As follower it fetches from the leader (:mod:`.replica_fetcher`: one fetcher
per leader broker, on the broker's event loop), appends the leader's batches
unchanged and takes the HW the leader reports. A returning follower truncates
where the leader says their logs diverge (Fetch v12's diverging epoch: the
leader's end offset of the follower's latest epoch, KIP-101/279/320), never to
its own HW.

On a single broker there is no replica manager: the HW is the log end and
``acks=all`` is ``acks=1``. Everything here runs on the broker's event loop
thread, except the ZooKeeper writes of :mod:`.isr` (in an executor).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import (
    LogSourceError,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    NotLeaderOrFollower,
    RequestTimedOut,
    UnknownTopicOrPartition,
)
from ..tasks import spawn
from .handlers import ReplicaFetchHandler
from .isr import IsrUpdater
from .replica_fetcher import ReplicaFetcher

if TYPE_CHECKING:
    from ..log.log import PartitionLog
    from ..state import BrokerState, PartitionRole

log = logging.getLogger(__name__)


def setting(config: Any, key: str, default: int) -> int:
    """An integer broker setting: the typed attribute if the config has one, else its properties."""
    attr = getattr(config, key.replace(".", "_"), None)
    if isinstance(attr, int) and not isinstance(attr, bool):
        return attr
    raw = getattr(config, "properties", {}).get(key)
    return default if raw in (None, "") else int(raw)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class FollowerReplica:
    """What a leader knows of one follower (Kafka's Replica)."""

    broker_id: int
    leo: int = -1  # unknown until it fetches
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0

    def on_fetch(self, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
        # Kafka's rule: caught up now if it asked for the leader's end; or caught up as of its
        # previous fetch if it reached the end the leader had then.
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leo = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now_ms


@dataclass
class LeaderPartition:
    """A partition this broker leads."""

    role: PartitionRole
    log: PartitionLog
    #: where this leader's epoch begins: a follower joins the ISR only once it has all of the previous epochs
    epoch_start_offset: int
    followers: dict[int, FollowerReplica] = field(default_factory=dict)
    #: (end offset, future) of acks=all produces waiting for the HW
    waiters: list[tuple[int, asyncio.Future]] = field(default_factory=list)
    isr_update_pending: bool = False


class ReplicaManager:
    """Leader and follower replication of one broker; plugs into :class:`~..state.BrokerState`."""

    def __init__(self, state: BrokerState, zk: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.state = state
        self.zk = zk
        self.loop = loop
        c = state.config
        self.broker_id = state.broker_id
        self.lag_time_max_ms = setting(c, "replica.lag.time.max.ms", 30_000)
        self.fetch_wait_max_ms = setting(c, "replica.fetch.wait.max.ms", 500)
        self.fetch_min_bytes = setting(c, "replica.fetch.min.bytes", 1)
        self.fetch_max_bytes = setting(c, "replica.fetch.max.bytes", 1 << 20)
        self.fetch_response_max_bytes = setting(c, "replica.fetch.response.max.bytes", 10 << 20)
        self.fetch_backoff_ms = setting(c, "replica.fetch.backoff.ms", 200)
        self.socket_timeout_ms = setting(c, "replica.socket.timeout.ms", 30_000)
        self.leaders: dict[tuple[str, int], LeaderPartition] = {}
        #: partition -> leader broker id, for the partitions this broker follows
        self.following: dict[tuple[str, int], int] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.isr = IsrUpdater(self, zk)
        self.fetch_handler = ReplicaFetchHandler(state, self)
        self._hw_known: set[tuple[str, int]] = set()
        self._closed = False
        state.logs.hw_checkpoint_enabled = True
        state.logs.hw_checkpoint_interval_ms = setting(c, "replica.high.watermark.checkpoint.interval.ms", 5000)
        self._isr_task = spawn(self.isr.run(), name="isr-shrink", loop=loop)

    # ------------------------------------------------------------ helpers

    def _log(self, role: PartitionRole) -> PartitionLog:
        # in cluster mode a replica's log is made when the broker first learns its role
        return self.state.logs.create_log(role.topic, role.partition)

    def _init_high_watermark(self, key: tuple[str, int], lg: PartitionLog) -> None:
        if key in self._hw_known:
            return
        self._hw_known.add(key)
        hw = self.state.logs.checkpointed_high_watermark(*key)
        lg.set_high_watermark(min(hw if hw is not None else 0, lg.log_end_offset))

    def leader_partition(self, topic: str, partition: int) -> LeaderPartition:
        """The partition as this broker leads it; NotLeaderOrFollower otherwise."""
        lp = self.leaders.get((topic, partition))
        if lp is None:
            raise NotLeaderOrFollower(f"broker {self.broker_id} is not the leader of {topic}-{partition}")
        return lp

    # ------------------------------------------------------------ role hooks (BrokerState calls them)

    def on_become_leader(self, role: PartitionRole) -> None:
        """Lead ``role``: stop fetching it, record where the new epoch starts, track its followers."""
        key = (role.topic, role.partition)
        self._stop_following(key)
        lp = self.leaders.get(key)
        if lp is not None and lp.role.leader_epoch == role.leader_epoch:
            self.on_role_update(role)
            return
        lg = self._log(role)
        self._init_high_watermark(key, lg)
        lg.epochs.assign(role.leader_epoch, lg.log_end_offset)
        now = _now_ms()
        lp = LeaderPartition(role, lg, lg.log_end_offset)
        old = self.leaders.get(key)
        if old is not None:
            self._fail_waiters(old, NotLeaderOrFollower(f"{role.topic}-{role.partition} has a new leader epoch"))
        self.leaders[key] = lp
        self._refresh_followers(lp, now)
        self.maybe_advance_hw(lp)
        log.info("broker %d leads %s-%d at epoch %d from offset %d (hw %d, isr %s)", self.broker_id, role.topic,
                 role.partition, role.leader_epoch, lp.epoch_start_offset, lg.high_watermark, role.isr)  # fmt: skip

    def on_role_update(self, role: PartitionRole) -> None:
        """The same leadership with a new ISR or znode version (an ISR write, the controller's or ours)."""
        key = (role.topic, role.partition)
        lp = self.leaders.get(key)
        if lp is not None and lp.role.leader_epoch == role.leader_epoch:
            if role.zk_version >= lp.role.zk_version:
                lp.role = role
                self._refresh_followers(lp)
                self.maybe_advance_hw(lp)
            return
        leader = self.following.get(key)
        if leader is not None and leader == role.leader and leader in self.fetchers:
            self.fetchers[leader].add_partition(role)

    def _refresh_followers(self, lp: LeaderPartition, now: int | None = None) -> None:
        now = _now_ms() if now is None else now
        wanted = [b for b in lp.role.replicas if b != self.broker_id]
        for b in wanted:
            if b not in lp.followers:
                # the ISR members start caught up (as Kafka resets lastCaughtUpTime on a leader change)
                lp.followers[b] = FollowerReplica(b, last_caught_up_ms=now if b in lp.role.isr else 0,
                                                  last_fetch_ms=now)  # fmt: skip
        for b in [b for b in lp.followers if b not in wanted]:
            del lp.followers[b]

    def on_become_follower(self, role: PartitionRole, leader_host: str, leader_port: int) -> None:
        """Follow ``role.leader``: answer waiting produces NotLeaderOrFollower, fetch from the leader."""
        key = (role.topic, role.partition)
        lp = self.leaders.pop(key, None)
        if lp is not None:
            self._fail_waiters(lp, NotLeaderOrFollower(f"broker {self.broker_id} no longer leads {key[0]}-{key[1]}"))
        lg = self._log(role)
        self._init_high_watermark(key, lg)
        if self.following.get(key) == role.leader and role.leader in self.fetchers:
            fetcher = self.fetchers[role.leader]
            fetcher.add_partition(role)  # a newer epoch of the same leader
            if leader_port > 0:
                fetcher.set_address(leader_host, leader_port)
            return
        self._stop_following(key)
        if role.leader < 0:
            log.info("broker %d: %s-%d has no leader", self.broker_id, *key)
            return
        # an unknown address (the leader's registration not seen yet) is looked up again at each connect
        fetcher = self.fetchers.get(role.leader)
        if fetcher is None:
            fetcher = self.fetchers[role.leader] = ReplicaFetcher(self, role.leader, leader_host, leader_port)
            fetcher.start()
        else:
            fetcher.set_address(leader_host, leader_port)
        fetcher.add_partition(role)
        self.following[key] = role.leader

    def on_stop_replica(self, topic: str, partition: int, delete: bool) -> None:
        """Stop replicating the partition (deleted, or moved away)."""
        key = (topic, partition)
        self._stop_following(key)
        self._hw_known.discard(key)
        lp = self.leaders.pop(key, None)
        if lp is not None:
            self._fail_waiters(lp, UnknownTopicOrPartition(f"{topic}-{partition} is no longer on broker {self.broker_id}"))

    def _stop_following(self, key: tuple[str, int]) -> None:
        leader = self.following.pop(key, None)
        if leader is None:
            return
        fetcher = self.fetchers.get(leader)
        if fetcher is not None:
            fetcher.remove_partition(key)
            if not fetcher.partitions:
                del self.fetchers[leader]
                fetcher.stop()

    def high_watermark(self, topic: str, partition: int) -> int:
        """The partition's high watermark (consumers read below it)."""
        lp = self.leaders.get((topic, partition))
        if lp is not None:
            self.maybe_advance_hw(lp)  # appends that bypass Produce (group offsets, markers) count too
            return lp.log.high_watermark
        return self.state.logs.get_log(topic, partition).high_watermark

    # ------------------------------------------------------------ leader side

    def check_min_isr(self, topic: str, partition: int) -> None:
        """NotEnoughReplicas unless the ISR has min.insync.replicas members (before an acks=all append)."""
        lp = self.leader_partition(topic, partition)
        need = lp.log.config.min_insync_replicas
        if len(lp.role.isr) < need:
            raise NotEnoughReplicas(f"{topic}-{partition} has {len(lp.role.isr)} in-sync replicas {lp.role.isr}, "
                                    f"min.insync.replicas is {need}")  # fmt: skip

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The epoch this broker stamps into the partition's batches."""
        return self.leader_partition(topic, partition).role.leader_epoch

    def after_append(self, topic: str, partition: int) -> None:
        """A leader append happened: the HW may move (an ISR of the leader alone)."""
        lp = self.leaders.get((topic, partition))
        if lp is not None:
            self.maybe_advance_hw(lp)

    async def wait_for_commit(self, topic: str, partition: int, end_offset: int, timeout_ms: int) -> None:
        """Wait until the HW reaches ``end_offset`` (acks=all).

        RequestTimedOut after ``timeout_ms``; NotLeaderOrFollower if leadership
        moves meanwhile; NotEnoughReplicasAfterAppend if the ISR is below
        min.insync.replicas when the HW gets there (as Kafka's DelayedProduce).
        """
        lp = self.leader_partition(topic, partition)
        if lp.log.high_watermark < end_offset:
            fut = self.loop.create_future()
            lp.waiters.append((end_offset, fut))
            try:
                await asyncio.wait_for(asyncio.shield(fut), max(timeout_ms, 0) / 1000)
            except asyncio.TimeoutError:
                raise RequestTimedOut(f"{topic}-{partition}: offset {end_offset - 1} was not replicated to the ISR "
                                      f"{lp.role.isr} within {timeout_ms} ms (high watermark "
                                      f"{lp.log.high_watermark})") from None  # fmt: skip
            finally:
                if not fut.done():
                    fut.cancel()
                lp.waiters = [(o, f) for o, f in lp.waiters if f is not fut]
        need = lp.log.config.min_insync_replicas
        if len(lp.role.isr) < need:
            raise NotEnoughReplicasAfterAppend(f"{topic}-{partition}: ISR {lp.role.isr} fell below "
                                               f"min.insync.replicas={need} before the write was committed")  # fmt: skip

    def update_follower(self, topic: str, partition: int, replica_id: int, fetch_offset: int) -> LeaderPartition:
        """A follower fetched at ``fetch_offset`` (its LEO): move its state, the ISR and the HW."""
        lp = self.leader_partition(topic, partition)
        f = lp.followers.get(replica_id)
        if f is None:
            raise NotLeaderOrFollower(f"broker {replica_id} is not a replica of {topic}-{partition} "
                                      f"(replicas {lp.role.replicas})")  # fmt: skip
        f.on_fetch(fetch_offset, lp.log.log_end_offset, _now_ms())
        if replica_id not in lp.role.isr and self.isr.can_join(lp, f):
            self.isr.request_expand(lp, replica_id)
        self.maybe_advance_hw(lp)
        return lp

    def maybe_advance_hw(self, lp: LeaderPartition) -> None:
        """HW = min LEO over the ISR (never backwards); wake acks=all produces and consumer fetches."""
        lg = lp.log
        hw = lg.log_end_offset
        for b in lp.role.isr:
            if b == self.broker_id:
                continue
            f = lp.followers.get(b)
            hw = min(hw, f.leo if f is not None and f.leo >= 0 else -1)
        old = lg.high_watermark
        if hw <= old:
            return
        lg.set_high_watermark(hw)
        if lp.waiters:
            still = []
            for end, fut in lp.waiters:
                if end <= hw:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    still.append((end, fut))
            lp.waiters = still
        self.state.notify(lp.role.topic, lp.role.partition)

    def _fail_waiters(self, lp: LeaderPartition, error: LogSourceError) -> None:
        for _, fut in lp.waiters:
            if not fut.done():
                fut.set_exception(error)
                fut.exception()  # retrieved: a produce that already timed out must not log it
        lp.waiters = []

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Stop the fetchers and the ISR task; answer waiting produces NotLeaderOrFollower."""
        if self._closed:
            return
        self._closed = True
        self._isr_task.cancel()
        for fetcher in self.fetchers.values():
            fetcher.stop()
        self.fetchers.clear()
        self.following.clear()
        for lp in self.leaders.values():
            self._fail_waiters(lp, NotLeaderOrFollower(f"broker {self.broker_id} is shutting down"))
        self.leaders.clear()
        try:
            self.state.logs.checkpoint_high_watermarks()
        except LogSourceError as e:
            log.error("high watermark checkpoint failed: %s", e)
