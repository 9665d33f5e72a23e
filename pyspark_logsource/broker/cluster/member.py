"""A broker's membership of the cluster: its session, registration, the metadata it watches, its roles.

Every broker keeps a cache of the cluster's metadata from ZooKeeper watches: the live brokers
(:class:`.registry.BrokerRegistry`), the controller, each topic's assignment and config, and each
partition's state (leader, leader epoch, ISR). Metadata requests are answered from it. For the
partitions it hosts (it is in their replica list) a change of state becomes a role change on the
broker's event loop: :meth:`BrokerState.become_leader` / :meth:`~BrokerState.become_follower` once per
leader epoch (the local log is created first), a plain update of ``state.roles`` when only the ISR or
the znode version moved, and :meth:`~BrokerState.stop_replica` when the topic is deleted or the replica
moved away (the local log is deleted).

Sessions: while the connection is merely lost (SUSPENDED) the broker keeps its roles and serves reads
and writes. When the session is LOST (expired: its registration and any ``/controller`` node are gone
and the controller moves its leaderships) the broker fences itself: it refuses writes as leader until
it has registered on a new session and read its roles again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from kazoo.client import KazooState
from kazoo.recipe.watchers import DataWatch

from ...errors import LogSourceError, RequestTimedOut, TopicAlreadyExists
from ...topics import is_internal
from ..state import BrokerState, PartitionRole
from . import config_changes, paths
from .controller import Controller, assign_replicas, write_topic
from .registry import BrokerRegistry
from .zk import ConditionFailed, NodeExistsError, ZkClient, ZnodeStat

log = logging.getLogger(__name__)


class ClusterMember:
    """The ZooKeeper side of one broker (``state.cluster``)."""

    def __init__(self, state: BrokerState, loop: asyncio.AbstractEventLoop) -> None:
        c = state.config
        self.state = state
        self.loop = loop
        self.broker_id = c.broker_id
        self.zk = ZkClient(
            c.zookeeper_connect, c.zookeeper_session_timeout_ms, c.zookeeper_connection_timeout_ms
        )
        self.registry = BrokerRegistry(self.zk, self.broker_id)
        self.controller = Controller(
            self.zk,
            self.registry,
            self.broker_id,
            c.unclean_leader_election_enable,
            on_change=self._on_controller,
            rebalance_interval_s=c.leader_imbalance_check_interval_seconds
            if c.auto_leader_rebalance_enable
            else None,
            imbalance_percentage=c.leader_imbalance_per_broker_percentage,
        )
        self._lock = threading.RLock()
        self._assignments: dict[str, dict[int, list[int]]] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._states: dict[tuple[str, int], tuple[paths.LeaderAndIsr, int]] = {}
        self._watched: set[tuple[str, int]] = set()
        self._topic_ids: dict[str, str | None] = {}
        self._czxids: dict[
            str, int
        ] = {}  # topic -> creation zxid of its znode: tells a recreated topic apart
        self._controller_id = -1
        self._address: tuple[str, int] = ("", 0)
        self._lost = False
        self._closing = False
        #: dynamic configs: every broker applies a change announced under /config/changes
        self.config_changes = config_changes.ConfigChangeListener(self.zk, self._on_config_change)

    # ------------------------------------------------------------ lifecycle (blocking: run off the loop)

    def start(self, host: str, port: int) -> None:
        """Connect, adopt the cluster id, watch the metadata, register, and join the controller election."""
        self._address = (host, port)
        # roles read before this broker is registered may be its previous incarnation's (a restart within
        # the session timeout): it leads nothing until it registered on this session
        self.state.fenced = True
        self.zk.start()
        for p in paths.PERSISTENT_PATHS:
            self.zk.ensure_path(p)
        self._adopt_cluster_id()
        if self.state.producer_ids is not None:
            self.state.producer_ids.use_block_source(self.reserve_producer_ids)
        self.zk.add_listener(self._on_session)
        self.registry.watch()
        self.zk.watch_children(paths.BROKER_TOPICS, self._on_topics)
        self.config_changes.start()
        self.broker_configs_changed()
        self.registry.register(host, port, None, *self._endpoints())
        self.loop.call_soon_threadsafe(self._fence, False, "registered")
        self.controller.start()
        self.loop.call_soon_threadsafe(self._set_aside_stray_logs)

    def reserve_producer_ids(self, size: int) -> tuple[int, int]:
        """A block of producer ids [start, end) no other broker gets: ``/latest_producer_id_block`` moved on
        with a version-conditioned write (Kafka's ZooKeeper-mode ProducerIdManager)."""
        while True:
            got = self.zk.get(paths.PRODUCER_ID_BLOCK)
            if got is None:
                try:
                    self.zk.create(
                        paths.PRODUCER_ID_BLOCK, paths.encode_producer_id_block(self.broker_id, 0, size - 1)
                    )
                    return 0, size
                except NodeExistsError:
                    continue
            start = paths.decode_producer_id_block(got[0])[1] + 1
            try:
                self.zk.set_if(
                    paths.PRODUCER_ID_BLOCK,
                    paths.encode_producer_id_block(self.broker_id, start, start + size - 1),
                    got[1].version,
                )
                return start, start + size
            except ConditionFailed:
                continue

    def stop(self) -> None:
        """Resign as controller and close the session (the registration goes with it)."""
        self._closing = True
        self.config_changes.stop()
        try:
            self.controller.stop()
        finally:
            self.zk.stop()  # the session ends: the registration goes, the controller moves the leaderships

    def _adopt_cluster_id(self) -> None:
        # the first broker's id becomes the cluster's (Kafka keeps it in /cluster/id)
        try:
            self.zk.create(
                paths.CLUSTER_ID, paths.encode_cluster_id(self.state.cluster_id or ""), makepath=True
            )
        except NodeExistsError:
            pass
        got = self.zk.get(paths.CLUSTER_ID)
        cid = paths.decode_cluster_id(got[0]) if got else None
        if cid and cid != self.state.cluster_id:
            log.info("broker %d joins cluster %s", self.broker_id, cid)
            self.state.cluster_id = cid
            self.state.load_meta()

    # ------------------------------------------------------------ ClusterProtocol (any thread)

    def brokers(self, listener: str | None = None) -> list[tuple[int, str, int]]:
        return self.registry.brokers(listener)

    def _endpoints(self) -> tuple[dict[str, tuple[str, int]] | None, dict[str, str] | None]:
        """Every listener's advertised address and protocol, for the registration."""
        ls = self.state.config.listeners
        if not self.state.endpoints or ls is None:
            return None, None
        return dict(self.state.endpoints), {x.name: x.protocol for x in ls.listeners}

    def controller_id(self) -> int:
        return self._controller_id

    def topics(self) -> dict[str, int]:
        with self._lock:
            return {t: len(a) for t, a in self._assignments.items()}

    def partitions(self, topic: str) -> list[PartitionRole | None]:
        with self._lock:
            out: list[PartitionRole | None] = []
            for p, replicas in sorted(self._assignments.get(topic, {}).items()):
                s = self._states.get((topic, p))
                out.append(None if s is None else self._role(topic, p, replicas, *s))
            return out

    def topic_config(self, topic: str) -> dict[str, str]:
        with self._lock:
            return dict(self._configs.get(topic, {}))

    # ------------------------------------------------------------ dynamic configs (blocking)

    def _on_config_change(self, entity_type: str, name: str) -> None:
        if entity_type == config_changes.TOPICS:
            self.topic_config_changed(name)
        elif entity_type == config_changes.BROKERS:
            self.broker_configs_changed()

    def topic_config_changed(self, topic: str) -> None:
        """Re-read ``/config/topics/<t>``: the metadata cache and this broker's logs of the topic take it."""
        config = config_changes.read_entity(self.zk, config_changes.TOPICS, topic)
        with self._lock:
            if topic not in self._assignments:
                return
            self._configs[topic] = config
        self.loop.call_soon_threadsafe(self._apply_topic_config, topic, config)

    def broker_configs_changed(self) -> None:
        """Re-read ``/config/brokers/<default>`` and ``/config/brokers/<id>`` and apply them."""
        default = config_changes.read_entity(self.zk, config_changes.BROKERS, config_changes.DEFAULT_BROKER)
        mine = config_changes.read_entity(self.zk, config_changes.BROKERS, str(self.broker_id))
        self.loop.call_soon_threadsafe(self._apply_broker_configs, default, mine)

    def _apply_topic_config(self, topic: str, config: dict[str, str]) -> None:
        if self.state.logs is None:
            return  # stopping
        try:
            self.state.logs.alter_topic_config(topic, config)
        except LogSourceError as e:
            log.warning("broker %d: topic %s keeps its config: %s", self.broker_id, topic, e)

    def _apply_broker_configs(self, default: dict[str, str], mine: dict[str, str]) -> None:
        if self.state.dynamic is None or self.state.logs is None:
            return
        try:
            self.state.dynamic.apply(default, mine)
        except LogSourceError as e:
            log.warning("broker %d keeps its dynamic configs: %s", self.broker_id, e)

    def is_controller(self) -> bool:
        return self.controller.active

    # ------------------------------------------------------------ topic administration (blocking)

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: Mapping[str, str],
        assignment: Mapping[int, list[int]] | None = None,
        validate_only: bool = False,
    ) -> dict[int, list[int]]:
        """Create through the controller (this broker must be it: NotController otherwise)."""
        return self.controller.create_topic(
            name, partitions, replication_factor, config, assignment, validate_only
        )

    def auto_create_topic(
        self, name: str, partitions: int, replication_factor: int, config: Mapping[str, str] | None = None
    ) -> None:
        """Create a topic from any broker (Metadata's auto-creation, the internal topics): assignment and
        config only, the controller elects the leaders. TopicAlreadyExists is fine (another request made it
        first)."""
        plan = assign_replicas(self.registry.live_ids(fresh=True), partitions, replication_factor)
        try:
            write_topic(self.zk, name, plan, dict(config or {}))
            log.info("broker %d auto-created topic %s: %s", self.broker_id, name, plan)
        except TopicAlreadyExists:
            pass

    def delete_topic(self, name: str) -> None:
        """Request deletion through the controller (NotController on another broker)."""
        self.controller.request_delete(name)

    async def wait_topic(self, name: str, present: bool, timeout_s: float) -> None:
        """Until this broker's metadata shows the topic with a leader for every partition (or gone)."""
        deadline = self.loop.time() + timeout_s
        while True:
            with self._lock:
                a = self._assignments.get(name)
                if present:
                    live = {b for b, _, _ in self.registry.brokers()}
                    done = bool(a) and all(
                        (s := self._states.get((name, p))) is not None and s[0].leader in live for p in a
                    )
                else:
                    done = a is None
            if done:
                return
            if self.loop.time() > deadline:
                raise RequestTimedOut(
                    f"topic {name!r} was {'created' if present else 'marked for deletion'} but "
                    f"this broker has not seen it {'led' if present else 'gone'} within "
                    f"{timeout_s:.1f}s"
                )
            await asyncio.sleep(0.02)

    # ------------------------------------------------------------ watches (kazoo's thread)

    def _on_controller(self, cid: int) -> None:
        self._controller_id = cid

    def _on_topics(self, children: list[str]) -> bool:
        if self._closing:
            return False
        with self._lock:
            known = set(self._assignments)
        for t in sorted(set(children) - known):
            got = self.zk.get(paths.topic_config_path(t))
            config = paths.decode_topic_config(got[0]) if got else {}
            with self._lock:
                self._configs[t] = config
                self._assignments.setdefault(t, {})
            if config:  # logs kept from before a restart take a change made while this broker was away
                self.loop.call_soon_threadsafe(self._apply_topic_config, t, config)
            DataWatch(self.zk.client, paths.topic_path(t), self._assignment_watcher(t))
        return True

    # kazoo passes the event as a third argument to a watcher that takes three: these take exactly two
    def _assignment_watcher(self, topic: str) -> Callable[[bytes | None, ZnodeStat | None], bool]:
        return lambda data, stat: self._on_assignment(topic, data, stat)

    def _state_watcher(self, topic: str, p: int) -> Callable[[bytes | None, ZnodeStat | None], bool]:
        return lambda data, stat: self._on_state(topic, p, data, stat)

    def _forget_topic(self, topic: str, keep_watching: bool) -> None:
        """The topic (this incarnation of it) is gone: forget it, stop its local replicas, delete their logs."""
        with self._lock:
            gone = self._assignments.pop(topic, {})
            self._configs.pop(topic, None)
            self._topic_ids.pop(topic, None)
            for p in gone:
                self._states.pop((topic, p), None)
                if not keep_watching:
                    self._watched.discard((topic, p))
        mine = [p for p, r in gone.items() if self.broker_id in r]
        self.loop.call_soon_threadsafe(self._stop_replicas, topic, list(gone), mine)

    def _on_assignment(self, topic: str, data: bytes | None, stat: ZnodeStat | None) -> bool:
        if self._closing:
            return False
        if data is None:  # the topic was deleted
            self._forget_topic(topic, keep_watching=False)
            self._czxids.pop(topic, None)
            return False
        recreated = self._czxids.get(topic, stat.czxid) != stat.czxid
        self._czxids[topic] = stat.czxid
        if recreated:
            # deleted and created again between two looks of this watch: the old incarnation's replicas
            # go first, then the new one's states are read again (their watch may have fired already and
            # been ignored as older than the old incarnation's roles)
            log.info("broker %d: topic %s was deleted and created again", self.broker_id, topic)
            self._forget_topic(topic, keep_watching=True)
            got = self.zk.get(paths.topic_config_path(topic))
            with self._lock:
                self._configs[topic] = paths.decode_topic_config(got[0]) if got else {}
        assignment = paths.decode_assignment(data)
        with self._lock:
            old = self._assignments.get(topic, {})
            self._assignments[topic] = assignment
            self._topic_ids[topic] = paths.decode_topic_id(data)
        moved = [
            p for p, r in old.items() if self.broker_id in r and self.broker_id not in assignment.get(p, [])
        ]
        if moved:
            self.loop.call_soon_threadsafe(self._stop_replicas, topic, [], moved)
        for p in sorted(assignment):
            with self._lock:
                if (topic, p) in self._watched:
                    continue
                self._watched.add((topic, p))
            DataWatch(self.zk.client, paths.partition_state_path(topic, p), self._state_watcher(topic, p))
        if recreated:
            for p in sorted(assignment):
                got = self.zk.get(paths.partition_state_path(topic, p))
                if got is not None:
                    self._on_state(topic, p, got[0], got[1])
        return True

    def _on_state(self, topic: str, p: int, data: bytes | None, stat: object) -> bool:
        if self._closing:
            return False
        with self._lock:
            if (topic, p) not in self._watched:
                return False  # deleted
            if data is None:
                self._states.pop((topic, p), None)
                return True  # not written yet (or the topic is going): keep watching
            s = paths.decode_state(data)
            self._states[(topic, p)] = (s, stat.version)
            replicas = self._assignments.get(topic, {}).get(p, [])
            config = dict(self._configs.get(topic, {}))
            topic_id = self._topic_ids.get(topic)
        if self.broker_id in replicas:
            role = self._role(topic, p, replicas, s, stat.version)
            self.loop.call_soon_threadsafe(self._apply_role, role, config, topic_id)
        return True

    @staticmethod
    def _role(topic: str, p: int, replicas: list[int], s: paths.LeaderAndIsr, version: int) -> PartitionRole:
        return PartitionRole(
            topic, p, s.leader, s.leader_epoch, list(s.isr), list(replicas), version, s.controller_epoch
        )

    # ------------------------------------------------------------ sessions (kazoo's thread)

    def _on_session(self, kstate: KazooState) -> None:
        if self._closing:
            return
        if kstate == KazooState.LOST:
            self._lost = True
            self.loop.call_soon_threadsafe(self._fence, True, "lost its ZooKeeper session")
        elif kstate == KazooState.CONNECTED and self._lost:
            self._lost = False
            # never block kazoo's connection thread: re-register from a thread of our own
            threading.Thread(target=self._rejoin, name=f"rejoin-{self.broker_id}", daemon=True).start()

    def _rejoin(self) -> None:
        """On a new session: register again, re-read the hosted partitions' states, then unfence."""
        try:
            self.registry.register(*self._address, None, *self._endpoints())
            roles = []
            with self._lock:
                hosted = [
                    (t, p, r)
                    for t, a in self._assignments.items()
                    for p, r in a.items()
                    if self.broker_id in r
                ]
            for t, p, replicas in hosted:
                got = self.zk.get(paths.partition_state_path(t, p))
                if got is not None:
                    s = paths.decode_state(got[0])
                    with self._lock:
                        self._states[(t, p)] = (s, got[1].version)
                        config = dict(self._configs.get(t, {}))
                        topic_id = self._topic_ids.get(t)
                    roles.append((self._role(t, p, replicas, s, got[1].version), config, topic_id))
        except Exception:
            log.exception(
                "broker %d could not rejoin the cluster on its new session; it stays fenced", self.broker_id
            )
            return

        def apply() -> None:
            for role, config, topic_id in roles:
                self._apply_role(role, config, topic_id)
            self._fence(False, "registered on a new ZooKeeper session and re-read its roles")

        self.loop.call_soon_threadsafe(apply)

    # ------------------------------------------------------------ on the event loop

    def _fence(self, fenced: bool, why: str) -> None:
        if fenced:
            log.warning("broker %d %s: refusing writes until it registered again", self.broker_id, why)
        else:
            log.info("broker %d %s: leading its partitions", self.broker_id, why)
        self.state.fenced = fenced

    def _apply_role(self, role: PartitionRole, config: dict[str, str], topic_id: str | None) -> None:
        st = self.state
        if st.logs is None:
            return  # stopping
        key = (role.topic, role.partition)
        try:
            self._local_log(role.topic, role.partition, config, topic_id)
        except (LogSourceError, OSError):
            log.exception("broker %d cannot create the log of %s-%d", self.broker_id, *key)
            return
        current = st.roles.get(key)
        me = self.broker_id
        same_epoch = (
            current is not None
            and current.leader_epoch == role.leader_epoch
            and current.leader == role.leader
        )
        if current is not None and (role.leader_epoch, role.zk_version) < (
            current.leader_epoch,
            current.zk_version,
        ):
            return  # an older state arriving late (the rejoin re-read races the watch)
        if same_epoch:
            st.update_role(role)  # the ISR or the znode version moved; the role itself did not change
        elif role.leader == me:
            st.become_leader(role)
        else:
            st.become_follower(role)

    def _local_log(self, topic: str, p: int, config: dict[str, str], topic_id: str | None) -> None:
        """This replica's log, made if missing. A log of another incarnation of the topic (deleted and created
        again while this broker was away: its ``partition.metadata`` names another topic id) is set aside
        and a new one made, so no record of the old topic is served or replicated."""
        st = self.state
        try:
            lg = st.logs.get_log(topic, p)
        except LogSourceError:
            lg = None
        if lg is not None and topic_id is not None:
            local = read_topic_id(lg.directory)
            if local is not None and local != topic_id:
                log.warning(
                    "broker %d: its log of %s-%d belongs to an older topic of that name (id %s, now %s)",
                    self.broker_id,
                    topic,
                    p,
                    local,
                    topic_id,
                )
                st.stop_replica(topic, p, delete=True)
                st.logs.set_aside_log(topic, p)
        lg = st.logs.create_log(topic, p, config)
        if topic_id is not None and read_topic_id(lg.directory) is None:
            write_topic_id(lg.directory, topic_id)

    def _stop_replicas(self, topic: str, partitions: list[int], mine: list[int]) -> None:
        st = self.state
        for p in mine:
            st.stop_replica(topic, p, delete=True)
            if st.logs is not None:
                st.logs.delete_log(topic, p)
        if partitions and st.groups is not None:
            st.groups.forget_topic(topic)
        st.waiters.notify_topic(topic)

    def _set_aside_stray_logs(self) -> None:
        """Logs of partitions not assigned to this broker in ZooKeeper (a topic deleted or a replica moved
        while it was down, a data dir from a single broker): renamed ``...-stray`` and not served, never
        deleted (their topic may be recreated with other data; the operator decides)."""
        st = self.state
        if st.logs is None:
            return
        with self._lock:
            assigned = {
                (t, p) for t, a in self._assignments.items() for p, r in a.items() if self.broker_id in r
            }
        for lg in st.logs.logs():
            key = (lg.topic, lg.partition)
            if is_internal(lg.topic) or key in assigned:
                continue
            try:
                st.logs.set_aside_log(*key)
            except LogSourceError:
                log.exception("broker %d cannot set aside its stray log %s-%d", self.broker_id, *key)


#: Kafka's file naming a partition directory's topic id
PARTITION_METADATA = "partition.metadata"


def read_topic_id(directory: Path) -> str | None:
    """The topic id in a partition directory's ``partition.metadata`` (None if absent or unreadable)."""
    try:
        for line in (directory / PARTITION_METADATA).read_text().splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "topic_id":
                return v.strip() or None
    except OSError:
        return None
    return None


def write_topic_id(directory: Path, topic_id: str) -> None:
    """Write ``partition.metadata`` (Kafka's format) atomically."""
    tmp = directory / (PARTITION_METADATA + ".tmp")
    tmp.write_text(f"version: 0\ntopic_id: {topic_id}\n")
    tmp.replace(directory / PARTITION_METADATA)
