"""Partition reassignment, as Kafka's ZooKeeper-mode controller does it (KIP-455).

A reassignment moves a partition from its replicas (the *original* set) to a *target* set. Its state
lives in the topic znode, so a newly elected controller carries it on::

    /brokers/topics/<t>  {"partitions": {"0": [2,3,4,1]},          full set: target, then the rest
                          "adding_replicas": {"0": [4]},           target - original
                          "removing_replicas": {"0": [1]}}         original - target

Phase 1 (:meth:`Reassignments.alter`): the full set (target ∪ original) becomes the assignment and the
partition-state znode is rewritten (same leader and epoch, a new version), so every broker of the full
set learns its role: the adding replicas create their logs and fetch from the leader, and the leader
tracks them. The controller watches the state znode; when the leader has written every adding replica
into the ISR (it caught up: :mod:`.partition`'s rule), phase 2 (:meth:`Reassignments.complete`): the
assignment becomes the target, the ISR drops the removed replicas, and the leader moves (a new epoch)
to the first live in-sync target replica if it is not one itself. The brokers that left the assignment
stop their replicas and delete their logs (:mod:`.member`; one that is down then sets its log aside
when it returns). An ``acks=all`` write is acknowledged only once every ISR member has it, and phase 2
picks the leader inside the ISR, so no acknowledged write is lost.

Cancelling (target None) reassigns to the original replicas: the adding ones leave at once.
A new target for a partition being reassigned starts from the same original set (Kafka's
``ReplicaAssignment.reassignTo``).

Every write is the controller's fenced multi-op, conditioned on the versions read (topic znode and
state znode). Everything here runs on the controller's event thread; ZooKeeper watches post events to
it (``post``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kazoo.recipe.watchers import DataWatch

from ...errors import (
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    LogSourceError,
    NoReassignmentInProgress,
    RequestTimedOut,
    UnknownTopicOrPartition,
)
from . import paths
from .election import Fenced
from .paths import LeaderAndIsr
from .registry import BrokerRegistry
from .zk import ConditionFailed, ZkClient

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Assignment:
    """One partition's replicas: ``replicas`` is the full set while ``adding`` / ``removing`` are not empty."""

    replicas: list[int]
    adding: list[int]
    removing: list[int]

    @property
    def original(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]

    @property
    def target(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: list[int]) -> Assignment:
        """Kafka's ``reassignTo``: the full set is the target then the rest of the original replicas."""
        original = self.original
        full = list(dict.fromkeys([*target, *original]))
        return Assignment(full, [r for r in full if r not in original], [r for r in full if r not in target])


def validate_target(target: list[int], live: set[int], current: Assignment, allow_rf_change: bool) -> None:
    """Kafka's checks of a target replica list (INVALID_REPLICA_ASSIGNMENT / INVALID_REPLICATION_FACTOR)."""
    if not target:
        raise InvalidReplicaAssignment("empty replica list in a partition reassignment")
    if len(set(target)) != len(target):
        raise InvalidReplicaAssignment(f"duplicate broker ids in the replica list {target}")
    if any(b < 0 for b in target):
        raise InvalidReplicaAssignment(f"invalid broker id in the replica list {target}")
    new = current.reassign_to(target)
    dead = [b for b in new.adding if b not in live]
    if dead:
        raise InvalidReplicaAssignment(
            f"the replica list {target} names brokers that are not alive: {dead} (live brokers {sorted(live)})"
        )
    if not allow_rf_change and len(target) != len(current.original):
        raise InvalidReplicationFactor(
            f"the reassignment changes the replication factor from {len(current.original)} to "
            f"{len(target)}, and the request does not allow it"
        )


def leader_after(target: list[int], state: LeaderAndIsr, live: set[int]) -> int | None:
    """Phase 2's leader: the current one if it is a live target replica, else the first live in-sync
    target replica; None when there is none yet."""
    if state.leader in target and state.leader in live:
        return state.leader
    return next((r for r in target if r in live and r in state.isr), None)


class Reassignments:
    """The controller's reassignments: ``fenced`` is its epoch-checked multi-op, ``controller_epoch()``
    the epoch it stamps into states, ``post(topic, partition)`` queues a look at a partition on its thread."""

    def __init__(
        self,
        zk: ZkClient,
        registry: BrokerRegistry,
        fenced: Fenced,
        controller_epoch: Callable[[], int],
        post: Callable[[str, int], None],
    ) -> None:
        self.zk = zk
        self.registry = registry
        self.fenced = fenced
        self.controller_epoch = controller_epoch
        self.post = post
        self._watched: set[tuple[str, int]] = set()

    # ------------------------------------------------------------ reading

    def _topic(self, topic: str) -> tuple[dict[int, Assignment], str | None, int]:
        """(partition -> Assignment, topic id, znode version); UnknownTopicOrPartition if absent."""
        got = self.zk.get(paths.topic_path(topic))
        if got is None or self.zk.exists(paths.delete_topic_path(topic)) is not None:
            raise UnknownTopicOrPartition(f"unknown topic {topic!r}")
        data, stat = got
        adding, removing = paths.decode_reassigning(data)
        parts = {
            p: Assignment(r, adding.get(p, []), removing.get(p, []))
            for p, r in paths.decode_assignment(data).items()
        }
        return parts, paths.decode_topic_id(data), stat.version

    def _topic_op(
        self, topic: str, parts: Mapping[int, Assignment], topic_id: str | None, version: int
    ) -> tuple:
        data = paths.encode_assignment(
            {p: a.replicas for p, a in parts.items()},
            topic_id,
            {p: a.adding for p, a in parts.items()},
            {p: a.removing for p, a in parts.items()},
        )
        return ("set", (paths.topic_path(topic), data, version))

    def ongoing(self, wanted: Mapping[str, list[int]] | None = None) -> list[tuple[str, int, Assignment]]:
        """The reassignments in progress (of ``wanted``: topic -> partitions, None: all), sorted."""
        out = []
        topics = sorted(wanted) if wanted is not None else sorted(self.zk.children(paths.BROKER_TOPICS))
        for topic in topics:
            try:
                parts = self._topic(topic)[0]
            except UnknownTopicOrPartition:
                continue
            ps = wanted[topic] if wanted is not None else sorted(parts)
            out += [(topic, p, parts[p]) for p in ps if p in parts and parts[p].reassigning]
        return out

    # ------------------------------------------------------------ requests

    def alter(
        self, requests: Mapping[tuple[str, int], list[int] | None], allow_rf_change: bool = True
    ) -> dict[tuple[str, int], LogSourceError | None]:
        """Start, replace or cancel (None) the reassignment of each partition: None where it was accepted."""
        live = set(self.registry.live_ids(fresh=True))
        out: dict[tuple[str, int], LogSourceError | None] = {}
        by_topic: dict[str, dict[int, list[int] | None]] = {}
        for (topic, p), target in requests.items():
            by_topic.setdefault(topic, {})[p] = None if target is None else [int(b) for b in target]
        for topic, asked in by_topic.items():
            for p, target in asked.items():
                try:
                    self._alter_one(topic, p, target, live, allow_rf_change)
                    out[(topic, p)] = None
                except LogSourceError as e:
                    out[(topic, p)] = e
        return out

    def _alter_one(
        self, topic: str, p: int, target: list[int] | None, live: set[int], allow_rf: bool
    ) -> None:
        for _ in range(5):  # a version moved under us (an ISR write, another reassignment): read again
            parts, topic_id, version = self._topic(topic)
            current = parts.get(p)
            if current is None:
                raise UnknownTopicOrPartition(f"unknown partition {topic}-{p}")
            if target is None:
                if not current.reassigning:
                    raise NoReassignmentInProgress(f"no reassignment of {topic}-{p} is in progress")
                new = current.reassign_to(current.original)
            else:
                validate_target(target, live, current, allow_rf)
                new = current.reassign_to(target)
            st = self.zk.get(paths.partition_state_path(topic, p))
            if st is None:
                raise UnknownTopicOrPartition(f"{topic}-{p} has no state yet")
            state = paths.decode_state(st[0])
            try:
                if new.adding:
                    self._start(topic, p, dict(parts), topic_id, version, new, state, st[1].version)
                else:  # nothing to copy (a cancel, a subset of the replicas): straight to the end state
                    if not self._finish(
                        topic, p, dict(parts), topic_id, version, new, state, st[1].version, live
                    ):
                        raise InvalidReplicaAssignment(
                            f"{topic}-{p}: none of the replicas {new.target} is alive and in the ISR {state.isr}"
                        )
                return
            except ConditionFailed:
                continue
        raise RequestTimedOut(f"{topic}-{p}: its znodes kept changing under the reassignment; try again")

    def _start(
        self,
        topic: str,
        p: int,
        parts: dict[int, Assignment],
        topic_id: str | None,
        version: int,
        new: Assignment,
        state: LeaderAndIsr,
        state_version: int,
    ) -> None:
        """Phase 1: the full set is assigned; the state is rewritten (same leader and epoch) so every broker
        of it takes its role; the ISR loses replicas that left the full set (a replaced reassignment)."""
        parts[p] = new
        isr = [r for r in state.isr if r in new.replicas] or list(state.isr)
        same = LeaderAndIsr(state.leader, state.leader_epoch, isr, self.controller_epoch())
        # the assignment first: a broker reads its new replica list before the state change it triggers
        self.fenced(
            [
                self._topic_op(topic, parts, topic_id, version),
                ("set", (paths.partition_state_path(topic, p), paths.encode_state(same), state_version)),
            ]
        )
        log.info(
            "controller: reassigning %s-%d to %s: replicas %s, adding %s, removing %s",
            topic,
            p,
            new.target,
            new.replicas,
            new.adding,
            new.removing,
        )
        self.watch(topic, p)
        self.post(topic, p)  # the adding replicas may be in the ISR already

    def _finish(
        self,
        topic: str,
        p: int,
        parts: dict[int, Assignment],
        topic_id: str | None,
        version: int,
        new: Assignment,
        state: LeaderAndIsr,
        state_version: int,
        live: set[int],
    ) -> bool:
        """Phase 2: the target is the assignment, the ISR its members, the leader one of them (a new epoch
        if it moves). False (nothing written) while no target replica can lead."""
        target = new.target
        leader = leader_after(target, state, live)
        if leader is None:
            return False
        isr = [r for r in state.isr if r in target]
        if leader not in isr:
            isr.insert(0, leader)
        epoch = state.leader_epoch + (1 if leader != state.leader else 0)
        parts[p] = Assignment(target, [], [])
        end = LeaderAndIsr(leader, epoch, isr, self.controller_epoch())
        self.fenced(
            [
                self._topic_op(topic, parts, topic_id, version),
                ("set", (paths.partition_state_path(topic, p), paths.encode_state(end), state_version)),
            ]
        )
        log.info(
            "controller: reassignment of %s-%d done: replicas %s, leader %d epoch %d, isr %s",
            topic,
            p,
            target,
            leader,
            epoch,
            isr,
        )
        return True

    # ------------------------------------------------------------ progress (watches)

    def watch(self, topic: str, p: int) -> None:
        """Follow the partition's state znode while it is being reassigned (ISR changes end phase 1)."""
        key = (topic, p)
        if key in self._watched:
            return
        self._watched.add(key)

        def changed(data: bytes | None, stat: object) -> bool:
            if key not in self._watched:
                return False
            self.post(topic, p)
            return True

        DataWatch(self.zk.client, paths.partition_state_path(topic, p), changed)

    def check(self, topic: str, p: int) -> None:
        """A reassigning partition's state changed: complete it once every adding replica is in the ISR."""
        for _ in range(5):
            try:
                parts, topic_id, version = self._topic(topic)
            except UnknownTopicOrPartition:
                self._watched.discard((topic, p))  # deleted
                return
            a = parts.get(p)
            st = self.zk.get(paths.partition_state_path(topic, p))
            if a is None or not a.reassigning or st is None:
                self._watched.discard((topic, p))
                return
            state = paths.decode_state(st[0])
            if not set(a.adding) <= set(state.isr):
                return  # phase 1 goes on: the next ISR change looks again
            live = set(self.registry.live_ids(fresh=True))
            try:
                if self._finish(topic, p, parts, topic_id, version, a, state, st[1].version, live):
                    self._watched.discard((topic, p))
                return
            except ConditionFailed:
                continue

    def resume(self) -> None:
        """A new controller: follow and look at every reassignment in progress (stored in ZooKeeper)."""
        self._watched.clear()
        for topic, p, _ in self.ongoing():
            self.watch(topic, p)
            self.post(topic, p)

    def forget(self) -> None:
        """No longer the controller: the watches stop at their next event."""
        self._watched.clear()
