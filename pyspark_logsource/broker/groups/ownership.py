"""Which groups this broker coordinates, and how their records are written: Kafka's placement.

A group's coordinator is the leader of the ``__consumer_offsets`` partition its id
hashes to (:func:`..internal_topics.partition_for`, the store's hash). On a single
broker that is always this broker and the topic is its own log. In a cluster the
topic is replicated (``offsets.topic.replication.factor`` copies, created on the
first FindCoordinator), and :class:`GroupOwnership`, the topic's leadership
listener, loads a partition's offsets and memberships when this broker becomes
its leader and drops them when it stops; the members then find the new
coordinator and rejoin there. The log is read on a worker thread (a large
partition does not stall the event loop); its groups' requests answer
CoordinatorLoadInProgress meanwhile, and a group request for a group this broker
does not coordinate is answered NotCoordinator. Clients retry both.

Writes (commits, membership records) are appended as leader and count once the
ISR has them (Kafka's offsets.commit.required.acks=-1): the commit is answered
and the in-memory map shows it only then. Errors are the ones Kafka answers for
its offsets topic: the partition moving away becomes NotCoordinator, too few
in-sync replicas or a timeout CoordinatorNotAvailable (the client finds the
coordinator again and retries), a batch too large InvalidCommitOffsetSize.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from ...errors import (
    CoordinatorLoadInProgress,
    CoordinatorNotAvailable,
    InvalidCommitOffsetSize,
    InvalidFetchSize,
    LogSourceError,
    MessageTooLarge,
    NotCoordinator,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    NotLeaderOrFollower,
    RecordListTooLarge,
    RequestTimedOut,
    StorageError,
    UnknownTopicOrPartition,
)
from .. import internal_topics
from ..internal_topics import OFFSETS_TOPIC, InternalTopic
from .offsets import OffsetEntry, OffsetWrite

if TYPE_CHECKING:
    from ..state import BrokerState

log = logging.getLogger(__name__)

#: Kafka's mapping of a failed write to the offsets topic onto the error the group client sees
_WRITE_ERRORS: dict[type[LogSourceError], type[LogSourceError]] = {
    UnknownTopicOrPartition: CoordinatorNotAvailable,
    NotEnoughReplicas: CoordinatorNotAvailable,
    NotEnoughReplicasAfterAppend: CoordinatorNotAvailable,
    RequestTimedOut: CoordinatorNotAvailable,
    NotLeaderOrFollower: NotCoordinator,
    StorageError: NotCoordinator,
    MessageTooLarge: InvalidCommitOffsetSize,
    RecordListTooLarge: InvalidCommitOffsetSize,
    InvalidFetchSize: InvalidCommitOffsetSize,
}


def coordinator_error(e: LogSourceError) -> LogSourceError:
    """The error a group client gets for a failed write to ``__consumer_offsets``."""
    kind = _WRITE_ERRORS.get(type(e))
    return e if kind is None else kind(e.message or str(e))


class GroupOwnership:
    """The groups of the offsets partitions this broker leads (all of them on a single broker)."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        #: partition -> the leader epoch it was loaded at (cluster mode)
        self.epochs: dict[int, int] = {}
        #: partition -> the leader epoch it is being loaded at (a worker thread reads its log)
        self.loading: dict[int, int] = {}
        self._partitions: int | None = None  # the topic's partition count, once it exists (it never changes)

    @property
    def clustered(self) -> bool:
        return self.state.cluster is not None

    def topic(self) -> InternalTopic:
        """``__consumer_offsets`` as the cluster creates it: compacted, offsets retention, the broker's sizes."""
        c = self.state.config
        config = {"cleanup.policy": "compact", **self.state.groups.topic_config}
        return InternalTopic(
            OFFSETS_TOPIC, c.offsets_topic_num_partitions, c.offsets_topic_replication_factor, config
        )

    def num_partitions(self) -> int:
        """The topic's partition count (the cluster's once it exists, the setting before)."""
        if self._partitions is None:
            if not self.clustered:
                return self.state.groups.num_partitions
            n = self.state.topics().get(OFFSETS_TOPIC)
            if not n:
                return self.state.groups.num_partitions
            self._partitions = n
        return self._partitions

    def partition_for(self, group: str) -> int:
        """The offsets partition holding ``group``."""
        return internal_topics.partition_for(group, self.num_partitions())

    # ------------------------------------------------------------ who coordinates

    async def find(self, group: str) -> int:
        """FindCoordinator: the broker leading the group's partition (this one on a single broker).
        Cluster: the topic is created on first use (off the event loop); CoordinatorNotAvailable while
        it has too few live brokers or the partition has no leader yet (clients retry)."""
        if not self.clustered:
            return self.state.broker_id
        if OFFSETS_TOPIC not in self.state.topics():
            try:
                await asyncio.get_running_loop().run_in_executor(
                    None, internal_topics.ensure, self.state, self.topic()
                )
            except CoordinatorNotAvailable:
                raise
            except Exception as e:  # ZooKeeper trouble, a broker lost meanwhile: the client asks again
                log.warning("cannot create %s yet: %r", OFFSETS_TOPIC, e)  # the client gets no exception text
                raise CoordinatorNotAvailable(f"cannot create {OFFSETS_TOPIC} yet") from e
        leader = internal_topics.leader_of(self.state, OFFSETS_TOPIC, self.partition_for(group))
        if leader < 0 or self.state.broker_address(leader) is None:
            raise CoordinatorNotAvailable(
                f"{OFFSETS_TOPIC}-{self.partition_for(group)} (group {group!r}) has no live leader yet"
            )
        return leader

    def check(self, group: str) -> None:
        """NotCoordinator unless this broker coordinates ``group`` now (it leads the group's loaded partition)."""
        if not self.clustered:
            return
        p = self.partition_for(group)
        if p in self.loading and not self.state.fenced:
            raise CoordinatorLoadInProgress(
                f"broker {self.state.broker_id} is loading the groups of {OFFSETS_TOPIC}-{p}"
            )
        if p not in self.epochs or self.state.fenced:
            leader = internal_topics.leader_of(self.state, OFFSETS_TOPIC, p)
            raise NotCoordinator(
                f"broker {self.state.broker_id} is not the coordinator of group {group!r} "
                f"({OFFSETS_TOPIC}-{p} is led by broker {leader})"
            )

    # ------------------------------------------------------------ LeadershipListener (event loop thread)

    def on_elected(self, partition: int, leader_epoch: int) -> None:
        """Load the partition's offsets and groups (again, if it was loaded at another epoch: the log may
        have moved on under another leader meanwhile). The log is read on a worker thread, so a large
        partition does not stall the event loop; its groups answer CoordinatorLoadInProgress meanwhile."""
        if leader_epoch in (self.epochs.get(partition), self.loading.get(partition)):
            return
        self.on_resigned(partition)
        self.loading[partition] = leader_epoch
        self._start_load(partition, leader_epoch)

    def _start_load(self, partition: int, epoch: int) -> None:
        if self.loading.get(partition) != epoch:
            return  # resigned, or elected again at another epoch, meanwhile
        st = self.state
        loop = asyncio.get_running_loop()
        t0 = time.monotonic()
        fut = loop.run_in_executor(None, st.groups.read_partition, partition)
        fut.add_done_callback(lambda f: self._install(partition, epoch, f, t0))

    def _install(self, partition: int, epoch: int, fut: asyncio.Future, t0: float) -> None:
        if self.loading.get(partition) != epoch or self.state.logs is None:
            return
        st = self.state
        if fut.cancelled() or fut.exception() is not None:
            log.error(
                "broker %d cannot load %s-%d (%r); retrying in 1 s",
                st.broker_id,
                OFFSETS_TOPIC,
                partition,
                None if fut.cancelled() else fut.exception(),
            )
            asyncio.get_running_loop().call_later(1.0, self._start_load, partition, epoch)
            return
        offsets, meta, records = fut.result()
        del self.loading[partition]
        st.groups.num_partitions = self.num_partitions()
        st.groups.install_partition(partition, offsets, meta)
        self.epochs[partition] = epoch
        st.coordinator.load(meta)
        log.info(
            "broker %d coordinates the groups of %s-%d (leader epoch %d): %d records, %d committed offsets, "
            "%d groups with membership, loaded in %.1f ms",
            st.broker_id,
            OFFSETS_TOPIC,
            partition,
            epoch,
            records,
            len(offsets),
            len(meta),
            (time.monotonic() - t0) * 1000,
        )

    def on_resigned(self, partition: int) -> None:
        """Drop the partition's groups: their members find the new coordinator."""
        self.loading.pop(partition, None)
        if self.epochs.pop(partition, None) is None:
            return
        st = self.state
        gone = st.groups.unload_partition(partition)
        gone.update(g for g in st.coordinator.groups if st.groups.partition_for(g) == partition)
        st.coordinator.unload(gone)

    # ------------------------------------------------------------ writes

    def _leader_append(self, group: str) -> None:
        """Checks before a cluster write: this broker coordinates the group and the ISR is big enough."""
        self.check(group)
        p = self.partition_for(group)
        try:
            self.state.check_leader(OFFSETS_TOPIC, p)
            self.state.replication.check_min_isr(OFFSETS_TOPIC, p)
        except LogSourceError as e:
            raise coordinator_error(e) from None

    def _appended(self, partition: int) -> None:
        self.state.notify(OFFSETS_TOPIC, partition)  # followers long-poll the leader
        self.state.replication.after_append(OFFSETS_TOPIC, partition)

    async def commit(self, group: str, entries: list[OffsetEntry]) -> None:
        """Store committed offsets; in a cluster they are visible (and this returns) once replicated."""
        store = self.state.groups
        if not self.clustered:
            store.commit(group, entries)
            return
        if not entries:
            return
        self._leader_append(group)
        try:
            w: OffsetWrite = store.append_commit(group, entries)
        except LogSourceError as e:
            raise coordinator_error(e) from None
        self._appended(w.partition)
        await self._replicated(w.partition, w.end_offset)
        store.apply(w)

    async def delete(self, group: str, partitions: list[tuple[str, int]] | None) -> None:
        """Tombstone the group's offsets of ``partitions`` (None: all, and its membership record); in a
        cluster this returns once the ISR has the tombstones (a new coordinator then has them too)."""
        store = self.state.groups
        if not self.clustered:
            store.delete(group, partitions)
            return
        self._leader_append(group)
        try:
            end = store.delete(group, partitions)
        except LogSourceError as e:
            raise coordinator_error(e) from None
        if end >= 0:
            p = self.partition_for(group)
            self._appended(p)
            await self._replicated(p, end)

    async def commit_transactional(
        self,
        group: str,
        producer_id: int,
        producer_epoch: int,
        entries: list[OffsetEntry],
    ) -> None:
        """TxnOffsetCommit: append the offsets as the producer's transactional records; they stay pending until
        the transaction's COMMIT marker (:meth:`.offsets.GroupOffsetStore.complete_txn`). In a cluster this
        returns once the ISR has them."""
        store = self.state.groups
        if not self.clustered:
            store.append_txn_offsets(group, producer_id, producer_epoch, entries)
            return
        self._leader_append(group)
        try:
            w = store.append_txn_offsets(group, producer_id, producer_epoch, entries)
        except LogSourceError as e:
            raise coordinator_error(e) from None
        self._appended(w.partition)
        await self._replicated(w.partition, w.end_offset)

    def persist(self, group: str, value: bytes | None) -> Awaitable[None] | None:
        """The coordinator's membership writes: stored at once on a single broker (None), else an awaitable
        that completes once the ISR has the record."""
        store = self.state.groups
        if not self.clustered:
            store.store_group(group, value)
            return None
        return self._persist_replicated(group, value)

    async def _persist_replicated(self, group: str, value: bytes | None) -> None:
        self._leader_append(group)
        try:
            end = self.state.groups.store_group(group, value)
        except LogSourceError as e:
            raise coordinator_error(e) from None
        p = self.partition_for(group)
        self._appended(p)
        await self._replicated(p, end)

    async def _replicated(self, partition: int, end_offset: int) -> None:
        try:
            await internal_topics.wait_replicated(self.state, OFFSETS_TOPIC, partition, end_offset)
        except LogSourceError as e:
            raise coordinator_error(e) from None
