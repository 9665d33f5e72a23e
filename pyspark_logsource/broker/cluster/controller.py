"""The controller: one broker, elected through ``/controller``, that assigns replicas, elects leaders
and deletes topics.

Election (Kafka's ZooKeeper-mode controller): a broker creates the ephemeral ``/controller`` and bumps
``/controller_epoch`` in one multi-op conditioned on the epoch znode's version, so exactly one broker
wins each epoch. Every later write of the controller — partition states, topic creation and deletion —
is a multi-op that starts with a ``check`` of ``/controller_epoch``'s version: once another broker has
become controller (and bumped the epoch) a stale controller's writes fail as a whole
(:class:`~pyspark_logsource.errors.StaleControllerEpoch`), and it resigns.

The controller's work runs on one thread, an event queue fed by ZooKeeper watches (Kafka's
ControllerEventManager): live brokers changed, topics appeared, a deletion was requested, the
``/controller`` node changed. Leaders are elected from the ISR, in assignment order (the preferred
replica first); with no live ISR member the partition stays leaderless (leader -1) unless
``unclean.leader.election.enable`` lets a live out-of-sync replica lead.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from kazoo.client import KazooState
from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import DataWatch

from ...errors import (
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    NotController,
    StaleControllerEpoch,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from . import paths
from .election import LeaderElections
from .paths import LeaderAndIsr
from .reassignment import Reassignments
from .registry import BrokerRegistry
from .zk import ZK_UNAVAILABLE, ConditionFailed, NodeExistsError, ZkClient

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long a stopping controller waits for each ZooKeeper reply when it resigns (best effort).
RESIGN_TIMEOUT_S = 2.0


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    start_index: int = -1,
    start_partition: int = 0,
) -> dict[int, list[int]]:
    """Kafka's ``assignReplicasToBrokers`` (rack unaware): partition -> replicas, the first one the
    preferred leader. Leaders go round-robin over the brokers from a (random) start, followers are
    shifted so that replicas of consecutive partitions land on different brokers."""
    ids = sorted(brokers)
    n = len(ids)
    if replication_factor < 1:
        raise InvalidReplicationFactor(f"replication factor must be at least 1, got {replication_factor}")
    if replication_factor > n:
        raise InvalidReplicationFactor(
            f"replication factor {replication_factor} is larger than the "
            f"{n} available broker{'s' if n != 1 else ''}"
        )
    start = start_index if start_index >= 0 else random.randrange(n)
    shift = start_index if start_index >= 0 else random.randrange(n)
    out: dict[int, list[int]] = {}
    for pid in range(start_partition, start_partition + partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n])
        out[pid] = replicas
    return out


def elect_leader(
    replicas: Sequence[int], state: LeaderAndIsr, live: set[int], unclean: bool
) -> LeaderAndIsr | None:
    """The partition's next state when its leader is not live; None when it needs no change.

    The new leader is the first replica (assignment order) that is live and in the ISR; the ISR keeps its
    live members. With none: an unclean election (a live out-of-sync replica, ISR = [it]) when allowed,
    else leader -1 with the ISR unchanged, so the last in-sync replica leads again when it returns."""
    if state.leader in live:
        return None
    candidates = [r for r in replicas if r in live and r in state.isr]
    if candidates:
        return LeaderAndIsr(candidates[0], state.leader_epoch + 1, [r for r in state.isr if r in live], 0)
    if unclean:
        outside = [r for r in replicas if r in live]
        if outside:
            log.warning(
                "unclean leader election: %d leads with no in-sync replica alive (data may be lost)",
                outside[0],
            )
            return LeaderAndIsr(outside[0], state.leader_epoch + 1, [outside[0]], 0)
    if state.leader == -1:
        return None
    return LeaderAndIsr(-1, state.leader_epoch + 1, list(state.isr), 0)


def next_state(
    replicas: Sequence[int], state: LeaderAndIsr, live: set[int], unclean: bool
) -> LeaderAndIsr | None:
    """The partition's next state against ``live`` (None: no change): a leader elected if needed
    (:func:`elect_leader`), else the ISR without dead members. The ISR never becomes empty: with no
    member alive it stays as it is, as Kafka's controller keeps the last in-sync replica, so that replica
    leads again when it returns (an empty ISR could only be left by an unclean election)."""
    new = elect_leader(replicas, state, live, unclean)
    if new is not None:
        return new
    isr = [r for r in state.isr if r in live or r == state.leader]
    if not isr or isr == state.isr:
        return None
    return LeaderAndIsr(state.leader, state.leader_epoch, isr, 0)


def write_topic(zk: ZkClient, name: str, plan: Mapping[int, list[int]], config: Mapping[str, str]) -> None:
    """Write a topic's config and assignment without partition states (Kafka's AdminZkClient path, used by
    any broker to auto-create a topic): the controller's topic watch then elects the first leaders.
    TopicAlreadyExists when it exists or is being deleted."""
    if zk.exists(paths.delete_topic_path(name)) is not None:
        raise TopicAlreadyExists(f"topic {name!r} is marked for deletion")
    ops: list[tuple[str, tuple]] = []
    if zk.exists(paths.topic_config_path(name)) is None:
        ops.append(("create", (paths.topic_config_path(name), paths.encode_topic_config(dict(config)))))
    ops.append(
        ("create", (paths.topic_path(name), paths.encode_assignment(dict(plan), paths.new_topic_id())))
    )
    try:
        zk.transaction(ops)
    except ConditionFailed:
        raise TopicAlreadyExists(f"topic {name!r} already exists") from None


class Controller:
    """This broker's part in the controller election, and the controller's work while it is elected."""

    def __init__(
        self,
        zk: ZkClient,
        registry: BrokerRegistry,
        broker_id: int,
        unclean_election: bool = False,
        on_change: Callable[[int], None] | None = None,
        rebalance_interval_s: float | None = None,
        imbalance_percentage: int = 10,
    ) -> None:
        self.zk = zk
        self.registry = registry
        self.broker_id = broker_id
        self.unclean_election = unclean_election
        #: auto.leader.rebalance.enable: check every this many seconds (None: never)
        self.rebalance_interval_s = rebalance_interval_s
        self.imbalance_percentage = imbalance_percentage
        self.on_change = on_change  # called with the controller id it sees
        self.active = False
        self.epoch = -1
        self.epoch_zk_version = -1
        self._events: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"controller-{broker_id}", daemon=True)
        self._stopped = threading.Event()
        self._registrations: dict[int, int] = {}  # live broker -> registration czxid, as last handled
        self._topics: set[str] = set()
        self._lock = threading.RLock()  # the controller's ZooKeeper work vs. request threads
        # ElectLeaders and reassignments (KIP-455): collaborators run on the event thread (see call())
        self.elections = LeaderElections(zk, registry, self._fenced, lambda: self.epoch)
        self.reassignments = Reassignments(
            zk,
            registry,
            self._fenced,
            lambda: self.epoch,
            lambda t, p: self._events.put(("reassign", (t, p))),
        )

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Join the election and follow the watches (brokers, topics, deletions, /controller)."""
        self._thread.start()
        self.zk.add_listener(self._on_session)
        self.registry.add_listener(lambda live: self._events.put(("brokers", None)))
        DataWatch(self.zk.client, paths.CONTROLLER, self._on_controller_node)
        self.zk.watch_children(paths.BROKER_TOPICS, lambda c: self._events.put(("topics", set(c))))
        self.zk.watch_children(paths.DELETE_TOPICS, lambda c: self._events.put(("deletes", None)))
        if self.rebalance_interval_s:
            threading.Thread(
                target=self._tick_rebalance, name=f"leader-rebalance-{self.broker_id}", daemon=True
            ).start()

    def _tick_rebalance(self) -> None:
        while not self._stopped.wait(self.rebalance_interval_s):
            self._events.put(("rebalance", None))

    def stop(self) -> None:
        """Resign (delete ``/controller`` if it is ours, so another broker takes over at once) and stop."""
        self._stopped.set()
        self._events.put(("stop", None))
        if self._thread.is_alive():
            self._thread.join(2)  # it may be waiting on ZooKeeper; a daemon thread, and the session ends next
        if self.active and not self.zk.connected:
            self.active = False  # ZooKeeper is away: /controller goes with the session
        if self.active:
            self.active = False
            # Best effort, one attempt of at most RESIGN_TIMEOUT_S each (not the retry object's deadline):
            # ZooKeeper may have gone a moment ago, before the client noticed, and the session's end
            # removes /controller anyway; a stopping broker must not wait for ZooKeeper.
            client = self.zk.client
            try:
                data, stat = client.get_async(paths.CONTROLLER).get(timeout=RESIGN_TIMEOUT_S)
                if stat.ephemeralOwner == self.zk.session_id:
                    client.delete_async(paths.CONTROLLER, stat.version).get(timeout=RESIGN_TIMEOUT_S)
                    log.info("broker %d resigned as controller (epoch %d)", self.broker_id, self.epoch)
            except NoNodeError:
                pass
            except (
                *ZK_UNAVAILABLE,
                client.handler.timeout_exception,
            ) as e:  # /controller goes with the session
                log.warning("broker %d could not resign as controller: %r", self.broker_id, e)

    def _on_session(self, state: KazooState) -> None:
        if state == KazooState.LOST:
            self._events.put(("lost", None))

    def _on_controller_node(self, data: bytes | None, stat: object) -> None:
        cid = paths.decode_controller(data) if data else -1
        if self.on_change is not None:
            self.on_change(cid)
        self._events.put(("elect", cid))

    # ------------------------------------------------------------ the event thread

    def _run(self) -> None:
        while not self._stopped.is_set():
            kind, arg = self._events.get()
            if kind == "stop":
                return
            try:
                with self._lock:
                    self._handle(kind, arg)
            except StaleControllerEpoch as e:
                log.warning("broker %d is no longer the controller: %s", self.broker_id, e)
                self.active = False
            except Exception:
                if not self._stopped.is_set():
                    # ZooKeeper away past the retry deadline, say: look at everything again in a second
                    log.exception("controller event %s failed; reconciling again in 1 s", kind)
                    retry = (
                        (kind, arg)
                        if kind == "reassign"
                        else (kind if kind in ("elect", "deletes") else "brokers", None)
                    )
                    threading.Timer(1.0, self._events.put, (retry,)).start()

    def call(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` on the controller's event thread (as Kafka's ControllerEvent); its future raises
        NotController on a broker that is not (or no longer) the controller."""
        fut: Future[T] = Future()
        self._events.put(("call", (fn, fut)))
        return fut

    def _call(self, fn: Callable[[], Any], fut: Future) -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            if not self.active:
                raise NotController(f"broker {self.broker_id} is not the controller")
            fut.set_result(fn())
        except StaleControllerEpoch as e:
            fut.set_exception(NotController(str(e)))
        except BaseException as e:  # the caller gets it
            fut.set_exception(e)

    def _handle(self, kind: str, arg: object) -> None:
        if kind == "call":
            self._call(*arg)
        elif kind == "lost":
            if self.active:
                log.warning("broker %d lost its ZooKeeper session: no longer the controller", self.broker_id)
            self.active = False
        elif kind == "elect":
            self._elect()
        elif not self.active:
            return
        elif kind == "brokers":
            self._on_brokers_changed()
        elif kind == "topics":
            new = set(arg) - self._topics
            self._topics = set(arg)
            if new:
                self._reconcile(sorted(new))
        elif kind == "rebalance":
            self._rebalance_leaders()
        elif kind == "reassign":
            self.reassignments.check(*arg)
        elif kind == "deletes":
            for t in self.zk.children(paths.DELETE_TOPICS):
                self._delete_topic(t)

    def _elect(self) -> None:
        got = self.zk.get(paths.CONTROLLER)
        if got is not None:
            data, stat = got
            ours = (
                paths.decode_controller(data) == self.broker_id and stat.ephemeralOwner == self.zk.session_id
            )
            if not ours and self.active:
                log.warning("broker %d: /controller names another broker; resigning", self.broker_id)
                self.active = False
            elif ours and not self.active:
                # our election's multi-op applied but its reply was lost (the retry then failed): the epoch
                # znode holds our epoch, and nobody can have bumped it while /controller is ours
                got_epoch = self.zk.get(paths.CONTROLLER_EPOCH)
                if got_epoch is not None:
                    self._on_elected(int(got_epoch[0].decode() or 0), got_epoch[1].version)
            return
        if self._stopped.is_set() or not self.zk.connected:
            return
        self.active = False
        epoch_node = self.zk.get(paths.CONTROLLER_EPOCH)
        if epoch_node is None:
            try:
                self.zk.create(paths.CONTROLLER_EPOCH, b"0")
            except NodeExistsError:
                pass
            epoch_node = self.zk.get(paths.CONTROLLER_EPOCH)
        epoch, version = int(epoch_node[0].decode() or 0), epoch_node[1].version
        try:
            results = self.zk.transaction(
                [
                    ("set", (paths.CONTROLLER_EPOCH, str(epoch + 1).encode(), version)),
                    ("create", (paths.CONTROLLER, paths.encode_controller(self.broker_id), None, True)),
                ]
            )
        except ConditionFailed:
            return  # another broker won this epoch; its /controller fires our watch
        self._on_elected(epoch + 1, results[0].version)

    def _on_elected(self, epoch: int, epoch_zk_version: int) -> None:
        """Take over: look at every topic, the live brokers and pending deletions."""
        self.epoch, self.epoch_zk_version = epoch, epoch_zk_version
        self.active = True
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
        self._registrations = {}
        self._topics = set(self.zk.children(paths.BROKER_TOPICS))
        self._on_brokers_changed()  # every topic against the live brokers
        for t in self.zk.children(paths.DELETE_TOPICS):
            self._delete_topic(t)
        self.reassignments.resume()

    # ------------------------------------------------------------ fenced writes

    def _fenced(self, ops: list[tuple[str, tuple]]) -> None:
        """Run ``ops`` after a check of the controller epoch: StaleControllerEpoch when another controller
        was elected since, ConditionFailed when only one of ``ops`` failed (a version moved)."""
        if not self.active:
            raise StaleControllerEpoch(f"broker {self.broker_id} is not the controller")
        try:
            self.zk.transaction([("check", (paths.CONTROLLER_EPOCH, self.epoch_zk_version)), *ops])
        except ConditionFailed:
            got = self.zk.get(paths.CONTROLLER_EPOCH)
            if got is None or got[1].version != self.epoch_zk_version:
                self.active = False
                raise StaleControllerEpoch(
                    f"controller epoch {self.epoch} of broker {self.broker_id} is stale "
                    f"(/controller_epoch is now {got[0].decode() if got else None})"
                ) from None
            raise

    def _write_state(self, topic: str, p: int, new: LeaderAndIsr, version: int | None) -> None:
        if not new.isr:
            raise ValueError(f"{topic}-{p}: a partition state's ISR is never empty ({new})")
        new = LeaderAndIsr(new.leader, new.leader_epoch, new.isr, self.epoch)
        path = paths.partition_state_path(topic, p)
        if version is None:
            self.zk.ensure_path(paths.partition_path(topic, p))
            self._fenced([("create", (path, paths.encode_state(new)))])
        else:
            self._fenced([("set", (path, paths.encode_state(new), version))])
        log.info(
            "controller %d: %s-%d leader %d epoch %d isr %s",
            self.broker_id,
            topic,
            p,
            new.leader,
            new.leader_epoch,
            new.isr,
        )

    # ------------------------------------------------------------ elections

    def _on_brokers_changed(self) -> None:
        # read now, not from the watch's cache: a controller just elected must not take a broker that has
        # registered for dead (it would move its leaderships, or leave its partitions leaderless)
        regs = self.registry.registrations()
        # a broker that registered again (a new session, e.g. after its session expired) is treated as a
        # failure and a return, as Kafka does with broker epochs: it leads nothing it led before
        bounced = {
            b for b, czxid in regs.items() if b in self._registrations and self._registrations[b] != czxid
        }
        self._registrations = regs
        self._reconcile(sorted(self._topics), set(regs) - bounced)
        if bounced:  # ...and its return: partitions left leaderless may be led by it again (its ISR)
            self._reconcile(sorted(self._topics), set(regs))

    def _reconcile(self, topics: Sequence[str], live: set[int] | None = None) -> None:
        """Give each partition of ``topics`` a state with a live leader where possible; drop brokers not in
        ``live`` from ISRs. Missing states (a topic made by another tool, or auto-created) are created."""
        if live is None:
            live = set(self.registry.live())
        for topic in topics:
            got = self.zk.get(paths.topic_path(topic))
            if got is None:
                continue
            for p, replicas in sorted(paths.decode_assignment(got[0]).items()):
                for _ in range(5):  # a leader's concurrent ISR write moves the version: re-read and retry
                    try:
                        self._reconcile_partition(topic, p, replicas, live)
                        break
                    except ConditionFailed:
                        continue

    def _reconcile_partition(self, topic: str, p: int, replicas: list[int], live: set[int]) -> None:
        got = self.zk.get(paths.partition_state_path(topic, p))
        if got is None:
            alive = [r for r in replicas if r in live]
            if alive:
                self._write_state(topic, p, LeaderAndIsr(alive[0], 0, alive, self.epoch), None)
            return
        state, version = paths.decode_state(got[0]), got[1].version
        # a leaderless partition is looked at again on every later broker or topic event: its last
        # in-sync replica, dead, must stay in its ISR (see next_state)
        new = next_state(replicas, state, live, self.unclean_election)
        if new is not None:
            self._write_state(topic, p, new, version)

    def _rebalance_leaders(self) -> None:
        """Kafka's auto leader rebalance: for each broker of which more than ``imbalance_percentage`` of the
        partitions it is the preferred replica of (first in the assignment) are led by others, give those
        partitions back to it where it is alive and in the ISR (a new leader epoch; nothing is lost)."""
        live = set(self.registry.live())
        preferred: dict[int, list[tuple[str, int, LeaderAndIsr, int]]] = {}
        led_elsewhere: dict[int, int] = {}
        for topic in sorted(self._topics):
            got = self.zk.get(paths.topic_path(topic))
            if got is None:
                continue
            for p, replicas in sorted(paths.decode_assignment(got[0]).items()):
                st = self.zk.get(paths.partition_state_path(topic, p))
                if st is None or not replicas:
                    continue
                state, version = paths.decode_state(st[0]), st[1].version
                pref = replicas[0]
                preferred.setdefault(pref, []).append((topic, p, state, version))
                if state.leader != pref:
                    led_elsewhere[pref] = led_elsewhere.get(pref, 0) + 1
        for pref, parts in sorted(preferred.items()):
            if pref not in live or led_elsewhere.get(pref, 0) * 100 <= self.imbalance_percentage * len(parts):
                continue
            for topic, p, state, version in parts:
                if state.leader != pref and pref in state.isr:
                    try:
                        self._write_state(
                            topic,
                            p,
                            LeaderAndIsr(pref, state.leader_epoch + 1, state.isr, self.epoch),
                            version,
                        )
                        log.info(
                            "controller %d: %s-%d back to its preferred leader %d",
                            self.broker_id,
                            topic,
                            p,
                            pref,
                        )
                    except ConditionFailed:
                        continue  # its state moved meanwhile; the next check looks again

    # ------------------------------------------------------------ topics

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: Mapping[str, str],
        assignment: Mapping[int, list[int]] | None = None,
        validate_only: bool = False,
    ) -> dict[int, list[int]]:
        """Assign replicas over the live brokers and write the topic, its config and its partitions' first
        states in one fenced multi-op. NotController on a broker that is not the controller."""
        with self._lock:
            if not self.active:
                raise NotController(f"broker {self.broker_id} is not the controller")
            live = self.registry.live_ids(fresh=True)
            if assignment:
                lengths = {len(r) for r in assignment.values()}
                if len(lengths) != 1 or any(len(set(r)) != len(r) for r in assignment.values()):
                    raise InvalidReplicaAssignment(
                        "every partition needs the same number of distinct replicas"
                    )
                unknown = {b for r in assignment.values() for b in r} - set(live)
                if unknown:
                    raise InvalidReplicaAssignment(
                        f"replica assignment names unknown brokers {sorted(unknown)}"
                    )
                plan = {int(p): list(r) for p, r in assignment.items()}
            else:
                plan = assign_replicas(live, partitions, replication_factor)
            if self.zk.exists(paths.topic_path(name)) is not None:
                raise TopicAlreadyExists(f"topic {name!r} already exists")
            if self.zk.exists(paths.delete_topic_path(name)) is not None:
                raise TopicAlreadyExists(f"topic {name!r} is marked for deletion")
            if validate_only:
                return plan
            ops: list[tuple[str, tuple]] = []
            if self.zk.exists(paths.topic_config_path(name)) is not None:
                ops.append(
                    ("set", (paths.topic_config_path(name), paths.encode_topic_config(dict(config)), -1))
                )
            else:
                ops.append(
                    ("create", (paths.topic_config_path(name), paths.encode_topic_config(dict(config))))
                )
            ops.append(
                ("create", (paths.topic_path(name), paths.encode_assignment(plan, paths.new_topic_id())))
            )
            ops.append(("create", (paths.partitions_path(name), b"")))
            for p, replicas in sorted(plan.items()):
                state = LeaderAndIsr(replicas[0], 0, list(replicas), self.epoch)
                ops.append(("create", (paths.partition_path(name, p), b"")))
                ops.append(("create", (paths.partition_state_path(name, p), paths.encode_state(state))))
            try:
                self._fenced(ops)
            except ConditionFailed:
                raise TopicAlreadyExists(f"topic {name!r} already exists") from None
            except StaleControllerEpoch as e:
                # another controller was elected (a ZooKeeper restart, say) before this one heard of it:
                # NOT_CONTROLLER, which clients retry against the controller Metadata names (as Kafka)
                raise NotController(str(e)) from None
            log.info(
                "controller %d created topic %s: %s, config %s", self.broker_id, name, plan, dict(config)
            )
            return plan

    def write_fenced(self, ops: list[tuple[str, tuple]]) -> None:
        """Run ``ops`` as the controller, after the epoch check (admin writes planned elsewhere, e.g.
        :mod:`.partition_adds`): NotController on another broker, ConditionFailed when a version moved."""
        with self._lock:
            if not self.active:
                raise NotController(f"broker {self.broker_id} is not the controller")
            try:
                self._fenced(ops)
            except StaleControllerEpoch as e:
                raise NotController(str(e)) from None

    def request_delete(self, name: str) -> None:
        """Mark a topic for deletion (``/admin/delete_topics/<t>``); the controller thread deletes it."""
        with self._lock:
            if not self.active:
                raise NotController(f"broker {self.broker_id} is not the controller")
            if self.zk.exists(paths.topic_path(name)) is None:
                raise UnknownTopicOrPartition(f"unknown topic {name!r}")
            try:
                self.zk.create(paths.delete_topic_path(name), b"", makepath=True)
            except NodeExistsError:
                pass

    def _delete_topic(self, name: str) -> None:
        """Remove the topic's znodes and the deletion request in one fenced multi-op; brokers watching
        ``/brokers/topics`` then stop their replicas and delete their logs."""
        got = self.zk.get(paths.topic_path(name))
        if got is None:
            self.zk.delete(paths.delete_topic_path(name))
            return
        ops: list[tuple[str, tuple]] = []
        for p in self.zk.children(paths.partitions_path(name)):
            if self.zk.exists(paths.partition_state_path(name, int(p))) is not None:
                ops.append(("delete", (paths.partition_state_path(name, int(p)), -1)))
            ops.append(("delete", (paths.partition_path(name, int(p)), -1)))
        if self.zk.exists(paths.partitions_path(name)) is not None:
            ops.append(("delete", (paths.partitions_path(name), -1)))
        ops.append(("delete", (paths.topic_path(name), -1)))
        if self.zk.exists(paths.topic_config_path(name)) is not None:
            ops.append(("delete", (paths.topic_config_path(name), -1)))
        ops.append(("delete", (paths.delete_topic_path(name), -1)))
        self._fenced(ops)
        self._topics.discard(name)
        log.info("controller %d deleted topic %s", self.broker_id, name)
