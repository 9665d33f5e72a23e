"""The broker's state as a plain object: logs, groups, producer ids, topics and partition roles.

:class:`BrokerState` has no sockets. The request handlers (``handlers.py``,
``groups/handlers.py``) take it; the network layer (``server.py``) owns one and
the cluster code (``cluster/``) drives its role hooks.

Roles. Every partition has a :class:`PartitionRole`: leader, leader epoch, ISR
and replicas. On a single broker (no ``zookeeper.connect``) the roles are
synthesised: this broker leads every partition it has a log for, at epoch 0,
alone in the ISR. In cluster mode they come from ZooKeeper's partition-state
znodes; :mod:`.cluster.member` watches those and calls :meth:`BrokerState.become_leader`,
:meth:`~BrokerState.become_follower` and :meth:`~BrokerState.stop_replica` on the event
loop thread, which record the role and hand it to :attr:`BrokerState.replication`
(the replica manager, :mod:`.cluster.replicas`: follower fetching, ``acks=all``; each led
partition's ISR and high watermark are owned by :class:`.cluster.partition.Partition`).
Roles change only through these hooks and :meth:`BrokerState.update_role`. The state's
parts are built by :func:`.builder.open_state`; the fetch read path is :mod:`.fetch`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import (
    InvalidReplicationFactor,
    InvalidTopic,
    LogSourceError,
    NotLeaderOrFollower,
    UnknownTopicOrPartition,
)
from ..topics import validate_topic_name
from .config import BrokerConfig
from .log.dir_lock import DirLock, release_all
from .quotas.model import QuotaTable
from .waiters import FetchWaiters

if TYPE_CHECKING:
    from ..protocol import FetchRequest, FetchResponse
    from .dynamic_config import BrokerDynamicConfig
    from .groups import GroupCoordinator, GroupOffsetStore
    from .groups.consumer_groups import ConsumerGroups
    from .log import LogManager
    from .log.log import PartitionLog
    from .producer_ids import ProducerIdManager

log = logging.getLogger(__name__)

META_FILE = "meta.properties"


@dataclass
class PartitionRole:
    """Who leads a partition and who replicates it (the partition-state znode, plus the assignment)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    #: version of the partition-state znode this was read from: the condition of the leader's ISR writes
    zk_version: int = 0
    controller_epoch: int = 0

    def is_leader(self, broker_id: int) -> bool:
        return self.leader == broker_id


class ReplicaManagerProtocol(Protocol):
    """Everything the broker asks of replication (:class:`.cluster.replicas.ReplicaManager`; cluster mode
    only, None on a single broker, where the HW is the log end and acks=all is acks=1).

    The role hooks run on the event loop thread, after :attr:`BrokerState.roles` was updated: ``on_become_*``
    once per leader epoch; a change of ISR or znode version within an epoch goes to ``on_role_update``
    (see :meth:`BrokerState.update_role`).
    """

    def on_become_leader(self, role: PartitionRole) -> None:
        """This broker now leads ``role`` (new leader epoch): stop fetching, start tracking followers."""

    def on_become_follower(self, role: PartitionRole, leader_host: str, leader_port: int) -> None:
        """This broker now follows ``role.leader`` at ``leader_host:leader_port``: truncate, then fetch."""

    def on_role_update(self, role: PartitionRole) -> None:
        """The same leadership with a new ISR or znode version."""

    #: ISR shrinks and expands of the partitions this broker led (the metrics read them)
    isr_shrinks: int
    isr_expands: int

    def led_roles(self) -> list[PartitionRole]:
        """The roles of the partitions this broker leads now (read-only: the metrics)."""

    def on_stop_replica(self, topic: str, partition: int, delete: bool) -> None:
        """Stop replicating the partition (and, with ``delete``, its log is being deleted)."""

    def high_watermark(self, topic: str, partition: int) -> int:
        """The partition's high watermark: consumers read below it."""

    def epoch_start(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(leader epoch, its start offset) of a partition this broker leads, else None."""

    def check_min_isr(self, topic: str, partition: int) -> None:
        """NotEnoughReplicas unless the ISR has min.insync.replicas members (before an acks=all append)."""

    def after_append(self, topic: str, partition: int) -> None:
        """A leader append happened (any writer): the HW may move."""

    async def wait_for_commit(self, topic: str, partition: int, end_offset: int, timeout_ms: int) -> None:
        """Wait until the HW reaches ``end_offset`` (acks=all); typed errors as Kafka's DelayedProduce."""

    async def follower_fetch(self, req: FetchRequest) -> FetchResponse:
        """A follower's Fetch (``replica_id`` >= 0), answered as its leader."""

    def close(self) -> None:
        """Stop fetching and checking the ISR; answer waiting produces; checkpoint the HWs."""


class LeadershipListener(Protocol):
    """A coordinator's hooks for the partitions of its internal topic (:mod:`.internal_topics`; event loop
    thread): the role hooks below call them."""

    def on_elected(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads ``partition``: load its state (it may already be loaded)."""

    def on_resigned(self, partition: int) -> None:
        """This broker no longer leads ``partition``: drop its state (it may not be loaded)."""


class GroupPlacement(Protocol):
    """Which groups this broker coordinates, and their committed offsets' writes
    (:class:`.groups.ownership.GroupOwnership`)."""

    async def find(self, group: str) -> int:
        """FindCoordinator: the broker coordinating ``group``."""

    def check(self, group: str) -> None:
        """NotCoordinator / CoordinatorLoadInProgress unless this broker coordinates ``group`` now."""

    def partition_for(self, group: str) -> int:
        """The ``__consumer_offsets`` partition holding ``group``."""

    async def commit_transactional(
        self,
        group: str,
        producer_id: int,
        producer_epoch: int,
        entries: list[tuple[str, int, int, str | None]],
    ) -> None:
        """TxnOffsetCommit: offsets pending until the producer's transaction commits (replicated in a cluster)."""

    async def commit(self, group: str, entries: list[tuple[str, int, int, str | None]]) -> None:
        """Write committed offsets of ``group`` (counted once the ISR has them)."""


class ClusterProtocol(Protocol):
    """The ZooKeeper side of a broker in cluster mode (:class:`.cluster.member.ClusterMember`)."""

    def brokers(self, listener: str | None = None) -> list[tuple[int, str, int]]:
        """Live brokers: (id, host, port) on ``listener`` (None: the inter-broker one), sorted by id."""

    def controller_id(self) -> int:
        """The current controller's broker id, -1 if none."""

    def topics(self) -> dict[str, int]:
        """Every topic of the cluster with its partition count."""

    def auto_create_topic(
        self, name: str, partitions: int, replication_factor: int, config: Mapping[str, str] | None = None
    ) -> None:
        """Create a topic with these settings from any broker (blocking; run it off the event loop)."""

    def topic_config(self, topic: str) -> dict[str, str]:
        """The topic's configuration overrides (``/config/topics/<t>``)."""

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, config: Mapping[str, str]
    ) -> object:
        """Create a topic through the controller (blocking)."""

    def partitions(self, topic: str) -> list[PartitionRole | None]:
        """Each partition's role as ZooKeeper has it (None while a partition has no state yet)."""


@dataclass
class BrokerState:
    """Everything a broker knows, without its sockets. :func:`.builder.open_state` fills it (the one place
    its parts are made), :meth:`close` flushes and closes it."""

    config: BrokerConfig
    logs: LogManager | None = None
    groups: GroupOffsetStore | None = None
    coordinator: GroupCoordinator | None = None
    #: KIP-848's consumer-protocol groups (:mod:`.groups.consumer_groups`)
    consumer_groups: ConsumerGroups | None = None
    #: which groups this broker coordinates (cluster: the ``__consumer_offsets`` partitions it leads)
    group_ownership: GroupPlacement | None = None
    producer_ids: ProducerIdManager | None = None
    cluster_id: str | None = None
    waiters: FetchWaiters = field(default_factory=FetchWaiters)
    #: (topic, partition) -> role, in cluster mode (single mode synthesises them)
    roles: dict[tuple[str, int], PartitionRole] = field(default_factory=dict)
    #: the replica manager (cluster mode)
    replication: ReplicaManagerProtocol | None = None
    #: the ZooKeeper member (cluster mode); None on a single broker
    cluster: ClusterProtocol | None = None
    #: host and port clients connect to (set by the server once bound)
    advertised: tuple[str, int] = ("127.0.0.1", 0)
    #: listener name -> advertised (host, port); Metadata answers the listener the client came in on
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: internal topic -> who loads its partitions' state when this broker starts or stops leading them
    #: (:mod:`.internal_topics`; the group and transaction coordinators)
    leadership_listeners: dict[str, LeadershipListener] = field(default_factory=dict)
    #: cluster mode: True until this broker registered on its ZooKeeper session, and again from a session's
    #: loss until it registered on a new one and re-read its roles; it takes no writes as leader meanwhile
    fenced: bool = False
    #: the exclusive locks on the log dirs (:mod:`.log.dir_lock`), held from :func:`.builder.open_state` to
    #: :meth:`close`
    dir_locks: list[DirLock] = field(default_factory=list)
    #: the dynamic broker configs (AlterConfigs on a BROKER resource), made by :func:`.builder.open_state`
    dynamic: BrokerDynamicConfig | None = None
    #: the client quotas configured for this broker (:mod:`.quotas`): its stores load and change them,
    #: enforcement reads them
    quotas: QuotaTable = field(default_factory=QuotaTable)
    #: where the quotas are kept and changed (:mod:`.quotas.store`): a file on a single broker (opened by
    #: :func:`.builder.open_state`), ZooKeeper in a cluster (opened when the broker joins it)
    quota_store: Any = None
    #: the produce path's per-topic counters (:class:`.metrics.registry.BrokerTopicStats`) when
    #: ``metrics.listener`` is set, else None (nothing counted)
    topic_stats: Any = None

    def __post_init__(self) -> None:
        if self.cluster_id is None:
            self.cluster_id = self.config.cluster_id

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    @property
    def zk(self) -> Any:
        """The ZooKeeper client (:class:`.cluster.zk.ZkClient`) in cluster mode, else None."""
        return getattr(self.cluster, "zk", None)

    # ------------------------------------------------------------ lifecycle

    def load_meta(self) -> None:
        """Read (or write) ``meta.properties`` in the first log dir: the cluster id and broker id."""
        # Kafka's meta.properties: the cluster id is made once and kept, so it survives restarts.
        path = self.config.log_dirs[0] / META_FILE
        props = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if "=" in line and not line.startswith("#"):
                    k, v = line.split("=", 1)
                    props[k.strip()] = v.strip()
        if self.cluster_id is None:
            self.cluster_id = props.get("cluster.id") or uuid.uuid4().hex[:22]
        if props.get("cluster.id") != self.cluster_id or props.get("broker.id") != str(self.config.broker_id):
            tmp = path.with_name(META_FILE + ".tmp")
            tmp.write_text(f"version=0\ncluster.id={self.cluster_id}\nbroker.id={self.config.broker_id}\n")
            tmp.replace(path)

    def close(self) -> None:
        """Wake and cancel parked fetches, close the coordinator, flush and close the logs, release the
        log dirs. Each step runs even if an earlier one raised (logged); the first error is raised at the end."""
        errors: list[BaseException] = []
        for what, step in (
            ("parked fetches", self.waiters.cancel_all),
            ("group coordinator", self._close_coordinator),
            ("logs", self._close_logs),
        ):
            try:
                step()
            except Exception as e:
                log.exception(
                    "broker %d: closing the %s failed; shutdown goes on", self.config.broker_id, what
                )
                errors.append(e)
        self._release_dirs()
        if errors:
            raise errors[0]

    def _close_coordinator(self) -> None:
        if self.coordinator is not None:
            self.coordinator.close()
        if self.consumer_groups is not None:
            self.consumer_groups.close()

    def _close_logs(self) -> None:
        if self.logs is not None:
            try:
                self.logs.close()
            finally:
                self.logs = None
            log.info("broker %d stopped; logs flushed and closed", self.config.broker_id)

    def _release_dirs(self) -> None:
        release_all(self.dir_locks)
        self.dir_locks = []

    # ------------------------------------------------------------ topics

    def topics(self) -> dict[str, int]:
        """Topic -> partition count: this broker's logs, or in cluster mode the cluster's topics."""
        if self.cluster is not None:
            return self.cluster.topics()
        return self.logs.topics()

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 1,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic: its local logs on a single broker; in a cluster through the controller (this broker
        must be it: NotController otherwise; blocking, run it off the event loop)."""
        if self.cluster is not None:
            self.cluster.create_topic(name, partitions, replication_factor, dict(overrides or {}))
            return
        self.logs.create_topic(name, partitions, dict(overrides) if overrides else None)
        log.info(
            "created topic %s with %d partitions%s",
            name,
            partitions,
            f" and config {dict(overrides)}" if overrides else "",
        )

    def topic_config(self, name: str) -> tuple[dict[str, str], dict[str, str]]:
        """A topic's (overrides, effective settings); in a cluster from ``/config/topics/<t>``, so any broker
        can answer, not only those hosting a replica."""
        if self.cluster is None:
            return self.logs.topic_overrides(name), self.logs.topic_config(name).to_properties()
        overrides = self.cluster.topic_config(name)
        config = self.logs.default_config.with_overrides(overrides)
        return (config.to_properties(overrides) if overrides else {}), config.to_properties()

    def auto_create_topic(self, name: str) -> None:
        """Cluster mode: create a topic with the broker defaults in the background (Metadata's
        auto-creation; clients see LeaderNotAvailable until its leaders are elected).
        InvalidReplicationFactor at once when there are fewer live brokers than default.replication.factor."""
        c = self.config
        live = len(self.cluster.brokers())
        if c.default_replication_factor > live:
            raise InvalidReplicationFactor(
                f"cannot auto-create {name!r}: default.replication.factor "
                f"{c.default_replication_factor} is larger than the {live} live brokers"
            )
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(
            None, self.cluster.auto_create_topic, name, c.num_partitions, c.default_replication_factor
        )
        fut.add_done_callback(
            lambda f: (
                f.cancelled()
                or f.exception() is None
                or log.warning("auto-creating topic %s failed: %r", name, f.exception())
            )
        )

    def delete_topic(self, name: str) -> None:
        """Delete a topic's logs, its committed offsets, and wake its fetchers (they get UnknownTopic)."""
        self.logs.delete_topic(name)
        self.groups.forget_topic(name)
        self.waiters.notify_topic(name)

    def notify(self, topic: str, partition: int) -> None:
        """Wake fetches waiting on a partition (called after each append)."""
        self.waiters.notify(topic, partition)

    # ------------------------------------------------------------ roles

    def role(self, topic: str, partition: int) -> PartitionRole | None:
        """The partition's role, or None if this broker knows no such partition."""
        if self.cluster is None:
            me = self.config.broker_id
            try:
                self.logs.get_log(topic, partition)
            except (UnknownTopicOrPartition, AttributeError):
                return None
            return PartitionRole(topic, partition, me, 0, [me], [me])
        return self.roles.get((topic, partition))

    def partitions(self, topic: str, count: int | None = None) -> list[PartitionRole | None]:
        """Every partition's role, cluster-wide (for Metadata); [] for an unknown topic.
        ``count``: the topic's partition count if the caller has it (saves a lookup on a single broker)."""
        if self.cluster is None:
            me = self.config.broker_id
            n = self.logs.topics().get(topic, 0) if count is None else count
            return [PartitionRole(topic, p, me, 0, [me], [me]) for p in range(n)]
        return self.cluster.partitions(topic)

    def check_leader(self, topic: str, partition: int, write: bool = True) -> None:
        """Raise unless this broker leads the partition (NotLeaderOrFollower, UnknownTopicOrPartition).

        A fenced leader (ZooKeeper session lost) refuses writes but still serves reads (``write=False``).
        """
        if self.cluster is None:
            return  # single broker: it leads every partition it has; the log lookup reports unknown ones
        role = self.roles.get((topic, partition))
        if role is None:
            if topic in self.cluster.topics():
                raise NotLeaderOrFollower(f"broker {self.broker_id} hosts no replica of {topic}-{partition}")
            raise topic_error(topic)
        if role.leader != self.broker_id:
            raise NotLeaderOrFollower(
                f"broker {self.broker_id} is not the leader of {topic}-{partition} "
                f"(leader {role.leader}, epoch {role.leader_epoch})"
            )
        if write and self.fenced:
            raise NotLeaderOrFollower(
                f"broker {self.broker_id} lost its ZooKeeper session and is not leading "
                f"{topic}-{partition} until it re-registered"
            )

    def high_watermark(self, topic: str, partition: int, lg: PartitionLog) -> int:
        """Consumers read below this: the log end on a single broker, the replicas' minimum in a cluster."""
        if self.replication is None:
            return lg.log_end_offset
        return self.replication.high_watermark(topic, partition)

    def brokers(self, listener: str | None = None) -> list[tuple[int, str, int]]:
        """Live brokers (id, host, port), sorted by id: their addresses on ``listener`` (None: the
        inter-broker listener)."""
        if self.cluster is None:
            return [(self.config.broker_id, *self.endpoints.get(listener or "", self.advertised))]
        return self.cluster.brokers(listener)

    def controller_id(self) -> int:
        """The controller's id (this broker on a single broker)."""
        if self.cluster is None:
            return self.config.broker_id
        return self.cluster.controller_id()

    def check_group_coordinator(self, group: str) -> None:
        """NotCoordinator unless this broker coordinates ``group``: always on a single broker; in a cluster
        when it leads the group's ``__consumer_offsets`` partition (:mod:`.groups.ownership`). Clients then
        ask FindCoordinator again."""
        self.group_ownership.check(group)

    def broker_address(self, broker_id: int, listener: str | None = None) -> tuple[str, int] | None:
        """(host, port) of a live broker on ``listener`` (None: the inter-broker one), or None."""
        for b, host, port in self.brokers(listener):
            if b == broker_id:
                return host, port
        return None

    # ------------------------------------------------------------ role hooks (event loop thread)

    def become_leader(self, role: PartitionRole) -> None:
        """Record that this broker leads ``role`` and tell the replica manager."""
        self.roles[(role.topic, role.partition)] = role
        log.info(
            "broker %d leads %s-%d at leader epoch %d (isr %s)",
            self.broker_id,
            role.topic,
            role.partition,
            role.leader_epoch,
            role.isr,
        )
        if self.replication is not None:
            self.replication.on_become_leader(role)
        listener = self.leadership_listeners.get(role.topic)
        if listener is not None:
            listener.on_elected(role.partition, role.leader_epoch)
        self.notify(role.topic, role.partition)

    def become_follower(self, role: PartitionRole) -> None:
        """Record that this broker follows ``role.leader`` and tell the replica manager where the leader is."""
        self.roles[(role.topic, role.partition)] = role
        log.info(
            "broker %d follows %d for %s-%d at leader epoch %d",
            self.broker_id,
            role.leader,
            role.topic,
            role.partition,
            role.leader_epoch,
        )
        if self.replication is not None:
            addr = self.broker_address(role.leader) if role.leader >= 0 else None
            host, port = addr if addr is not None else ("", -1)
            self.replication.on_become_follower(role, host, port)
        listener = self.leadership_listeners.get(role.topic)
        if listener is not None:
            listener.on_resigned(role.partition)
        self.notify(role.topic, role.partition)

    def update_role(self, role: PartitionRole) -> None:
        """Same leader and leader epoch, new ISR or znode version (the controller dropped a dead replica from
        the ISR, or the leader's own ISR write came back): record it and tell the replica manager."""
        self.roles[(role.topic, role.partition)] = role
        if self.replication is not None:
            self.replication.on_role_update(role)

    def stop_replica(self, topic: str, partition: int, delete: bool) -> None:
        """Forget the partition's role; with ``delete`` its local log goes too (topic deletion)."""
        self.roles.pop((topic, partition), None)
        if self.replication is not None:
            self.replication.on_stop_replica(topic, partition, delete)
        listener = self.leadership_listeners.get(topic)
        if listener is not None:
            listener.on_resigned(partition)
        self.notify(topic, partition)


def topic_error(topic: str) -> LogSourceError:
    """InvalidTopic for an illegal name, else UnknownTopicOrPartition."""
    try:
        validate_topic_name(topic)
    except InvalidTopic as e:
        return e
    return UnknownTopicOrPartition(f"unknown topic or partition in {topic!r}")
