"""The replica manager: a broker's part in replication (Kafka's ReplicaManager).

It is :class:`~..state.BrokerState`'s ``replication`` (``ReplicaManagerProtocol``
lists what the broker asks of it) and keeps, per partition this broker leads, a
:class:`~.partition.Partition`, the owner of its ISR and high watermark (HW): a
follower's log end offset (LEO) is learnt from the offset it fetches at, the HW
is the minimum LEO over the in-sync replicas (ISR); consumers, ListOffsets and
Spark read below it, and an ``acks=all`` produce is answered once the HW
passed its last record. The ISR shrinks and grows by ``replica.lag.time.max.ms``
(the rule in :mod:`.partition`, the ZooKeeper write in :mod:`.isr`, the new role
through ``BrokerState.update_role``). ``acks=all`` with fewer in-sync replicas
than ``min.insync.replicas`` is refused before anything is appended
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
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from ...errors import (
    LogSourceError,
    NotEnoughReplicasAfterAppend,
    NotLeaderOrFollower,
    RequestTimedOut,
    UnknownTopicOrPartition,
)
from ...protocol import FetchRequest, FetchResponse
from ..tasks import spawn
from .handlers import ReplicaFetchHandler
from .isr import IsrUpdater
from .partition import Partition, ReplicationSettings, init_high_watermark, now_ms
from .replica_fetcher import ReplicaFetcher

if TYPE_CHECKING:
    from ..log.log import PartitionLog
    from ..state import BrokerState, PartitionRole

log = logging.getLogger(__name__)


class ReplicaManager:
    """Leader and follower replication of one broker: :class:`~..state.BrokerState`'s ``replication``.

    It keeps the led :class:`~.partition.Partition` objects (which own ISR and HW) and the
    fetchers of followed partitions, and composes its collaborators with what each uses: the ISR
    updater and the fetchers get the settings and callables, the follower fetch handler the
    :class:`~.partition.LeaderPartitions` view. Built by the server (:func:`build`); without
    ``settings`` (tests) they are read from the broker config here.
    """

    def __init__(
        self,
        state: BrokerState,
        zk: Any,
        loop: asyncio.AbstractEventLoop,
        settings: ReplicationSettings | None = None,
    ) -> None:
        self.state = state
        self.loop = loop
        self.settings = settings if settings is not None else ReplicationSettings.from_config(state.config)
        self.broker_id = self.settings.broker_id
        self.leaders: dict[tuple[str, int], Partition] = {}
        #: partition -> leader broker id, for the partitions this broker follows
        self.following: dict[tuple[str, int], int] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.isr = IsrUpdater(self.settings, zk, loop, self.leaders.values, self._isr_written)
        self.fetch_handler = ReplicaFetchHandler(self, state.waiters, self.settings.answer_max_bytes)
        self._hw_known: set[tuple[str, int]] = set()
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._closed = False
        state.logs.hw_checkpoint_enabled = True
        state.logs.hw_checkpoint_interval_ms = self.settings.hw_checkpoint_interval_ms
        self._isr_task = spawn(self.isr.run(), name="isr-shrink", loop=loop)

    # ------------------------------------------------------------ helpers

    def _log(self, role: PartitionRole) -> PartitionLog:
        # in cluster mode a replica's log is made when the broker first learns its role
        return self.state.logs.create_log(role.topic, role.partition)

    def _init_high_watermark(self, key: tuple[str, int], lg: PartitionLog) -> None:
        if key in self._hw_known:
            return
        self._hw_known.add(key)
        init_high_watermark(lg, self.state.logs.checkpointed_high_watermark(*key))

    def leader_partition(self, topic: str, partition: int) -> Partition:
        """The partition as this broker leads it; NotLeaderOrFollower otherwise."""
        lp = self.leaders.get((topic, partition))
        if lp is None:
            raise NotLeaderOrFollower(f"broker {self.broker_id} is not the leader of {topic}-{partition}")
        return lp

    def _new_fetcher(self, leader_id: int, host: str, port: int) -> ReplicaFetcher:
        return ReplicaFetcher(
            self.settings, self.loop, self.state.logs, self.state.broker_address, leader_id, host, port
        )

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
        lp = Partition(self.broker_id, role, lg, lg.log_end_offset)
        old = self.leaders.get(key)
        if old is not None:
            old.fail_waiters(NotLeaderOrFollower(f"{role.topic}-{role.partition} has a new leader epoch"))
        self.leaders[key] = lp
        lp.refresh_followers(now_ms())
        self.maybe_advance_hw(lp)
        log.info(
            "broker %d leads %s-%d at epoch %d from offset %d (hw %d, isr %s)",
            self.broker_id,
            role.topic,
            role.partition,
            role.leader_epoch,
            lp.epoch_start_offset,
            lg.high_watermark,
            role.isr,
        )

    def on_role_update(self, role: PartitionRole) -> None:
        """The same leadership with a new ISR or znode version (an ISR write, the controller's or ours)."""
        key = (role.topic, role.partition)
        lp = self.leaders.get(key)
        if lp is not None and lp.role.leader_epoch == role.leader_epoch:
            before, after = set(lp.role.isr), set(role.isr)
            if lp.set_role(role):
                self.isr_shrinks += bool(before - after)  # counted per change, as Kafka's IsrShrinksPerSec
                self.isr_expands += bool(after - before)
                self.maybe_advance_hw(lp)
            return
        leader = self.following.get(key)
        if leader is not None and leader == role.leader and leader in self.fetchers:
            self.fetchers[leader].add_partition(role)

    def on_become_follower(self, role: PartitionRole, leader_host: str, leader_port: int) -> None:
        """Follow ``role.leader``: answer waiting produces NotLeaderOrFollower, fetch from the leader."""
        key = (role.topic, role.partition)
        lp = self.leaders.pop(key, None)
        if lp is not None:
            lp.fail_waiters(NotLeaderOrFollower(f"broker {self.broker_id} no longer leads {key[0]}-{key[1]}"))
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
            fetcher = self.fetchers[role.leader] = self._new_fetcher(role.leader, leader_host, leader_port)
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
            lp.fail_waiters(
                UnknownTopicOrPartition(f"{topic}-{partition} is no longer on broker {self.broker_id}")
            )

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

    def _isr_written(self, lp: Partition, written: PartitionRole, isr: list[int], version: int) -> None:
        """The ISR updater wrote ``isr`` at znode ``version`` for the role ``written``: hand the new role to
        its owner (BrokerState.update_role, which gives it back to :meth:`on_role_update`)."""
        key = (written.topic, written.partition)
        if self.leaders.get(key) is not lp or lp.role.leader_epoch != written.leader_epoch:
            return  # the leadership moved on meanwhile
        log.info(
            "broker %d: ISR of %s-%d is now %s (znode version %d)",
            self.broker_id,
            written.topic,
            written.partition,
            isr,
            version,
        )
        self.state.update_role(dataclasses.replace(lp.role, isr=list(isr), zk_version=version))

    def led_roles(self) -> list[PartitionRole]:
        """The roles of the partitions this broker leads now (read-only: the metrics)."""
        return [lp.role for lp in self.leaders.values()]

    def high_watermark(self, topic: str, partition: int) -> int:
        """The partition's high watermark (consumers read below it)."""
        lp = self.leaders.get((topic, partition))
        if lp is not None:
            self.maybe_advance_hw(lp)  # appends that bypass Produce (group offsets, markers) count too
            return lp.log.high_watermark
        return self.state.logs.get_log(topic, partition).high_watermark

    def epoch_start(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(leader epoch, offset where it starts) of a partition this broker leads, else None."""
        lp = self.leaders.get((topic, partition))
        return None if lp is None else (lp.role.leader_epoch, lp.epoch_start_offset)

    # ------------------------------------------------------------ leader side

    def check_min_isr(self, topic: str, partition: int) -> None:
        """NotEnoughReplicas unless the ISR has min.insync.replicas members (before an acks=all append)."""
        self.leader_partition(topic, partition).check_min_isr()

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
                raise RequestTimedOut(
                    f"{topic}-{partition}: offset {end_offset - 1} was not replicated to the ISR "
                    f"{lp.role.isr} within {timeout_ms} ms (high watermark "
                    f"{lp.log.high_watermark})"
                ) from None
            finally:
                if not fut.done():
                    fut.cancel()
                lp.waiters = [(o, f) for o, f in lp.waiters if f is not fut]
        need = lp.log.config.min_insync_replicas
        if len(lp.role.isr) < need:
            raise NotEnoughReplicasAfterAppend(
                f"{topic}-{partition}: ISR {lp.role.isr} fell below "
                f"min.insync.replicas={need} before the write was committed"
            )

    def offset_lag(self, topic: str, partition: int, lg: PartitionLog) -> int:
        """How far this replica's log end is behind its leader's (DescribeLogDirs): 0 as the leader; as a
        follower, behind the leader's high watermark its last fetch answer carried (Kafka's own lag)."""
        key = (topic, partition)
        if key in self.leaders:
            return 0
        for f in self.fetchers.values():
            hw = f.leader_hw.get(key)
            if hw is not None:
                return max(0, hw - lg.log_end_offset)
        return max(0, lg.high_watermark - lg.log_end_offset)

    async def wait_for_log_start(self, topic: str, partition: int, offset: int, timeout_ms: int) -> None:
        """Wait until every ISR replica's log start offset reached ``offset`` (a DeleteRecords: followers
        take the leader's from their fetch answers and report theirs in their next fetch; a parked follower
        fetch is woken so that it does not wait out ``replica.fetch.wait.max.ms``). RequestTimedOut after
        ``timeout_ms``; NotLeaderOrFollower if leadership moves meanwhile."""
        deadline = self.loop.time() + max(timeout_ms, 0) / 1000
        self.state.notify(topic, partition)
        while True:
            lp = self.leader_partition(topic, partition)
            if lp.low_watermark() >= offset:
                return
            if self.loop.time() >= deadline:
                raise RequestTimedOut(
                    f"{topic}-{partition}: the ISR {lp.role.isr} did not reach log start offset {offset} "
                    f"within {timeout_ms} ms (low watermark {lp.low_watermark()})"
                )
            await asyncio.sleep(0.01)

    def update_follower(
        self, topic: str, partition: int, replica_id: int, fetch_offset: int, log_start: int = -1
    ) -> Partition:
        """A follower fetched at ``fetch_offset`` (its LEO): move its state, the ISR and the HW."""
        lp = self.leader_partition(topic, partition)
        f = lp.update_follower(replica_id, fetch_offset, now_ms(), log_start)
        if lp.should_expand(f):
            self.isr.request_expand(lp, replica_id)
        self.maybe_advance_hw(lp)
        return lp

    def maybe_advance_hw(self, lp: Partition) -> None:
        """Move the partition's HW if its ISR allows; wake consumer fetches if it moved."""
        if lp.maybe_advance_hw():
            self.state.notify(lp.role.topic, lp.role.partition)

    async def follower_fetch(self, req: FetchRequest) -> FetchResponse:
        """A follower's Fetch (``replica_id`` >= 0), answered as its leader."""
        return await self.fetch_handler.fetch(req)

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
            lp.fail_waiters(NotLeaderOrFollower(f"broker {self.broker_id} is shutting down"))
        self.leaders.clear()
        try:
            self.state.logs.checkpoint_high_watermarks()
        except LogSourceError as e:
            log.error("high watermark checkpoint failed: %s", e)


def build(state: BrokerState, zk: Any, loop: asyncio.AbstractEventLoop) -> ReplicaManager:
    """A broker's replication, with its settings read once from the broker config."""
    return ReplicaManager(state, zk, loop, ReplicationSettings.from_config(state.config))
