"""ElectLeaders (API 43): leader elections an administrator asks the controller for (KIP-183, KIP-460).

- PREFERRED (0): the partition's preferred replica (the first of its assignment) leads, if it is alive
  and in the ISR (PREFERRED_LEADER_NOT_AVAILABLE otherwise); ELECTION_NOT_NEEDED when it leads already.
- UNCLEAN (1): a partition whose leader is gone gets one: the first live ISR replica, else the first live
  replica (its ISR becomes just that replica: records only the old ISR had may be lost);
  ELECTION_NOT_NEEDED while its leader is alive, ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is alive.

Each election is a new leader epoch written to the partition-state znode with a set conditioned on the
version read, inside the controller's fenced multi-op (so a stale controller writes nothing). The rules
are pure functions (:func:`preferred`, :func:`unclean`); :class:`LeaderElections` reads and writes
ZooKeeper, on the controller's event thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from ...errors import (
    ElectionNotNeeded,
    EligibleLeadersNotAvailable,
    InvalidRequest,
    LogSourceError,
    PreferredLeaderNotAvailable,
    RequestTimedOut,
    UnknownTopicOrPartition,
)
from ...protocol.reassign_messages import PREFERRED, UNCLEAN
from . import paths
from .paths import LeaderAndIsr
from .registry import BrokerRegistry
from .zk import ConditionFailed, ZkClient

log = logging.getLogger(__name__)

#: runs a multi-op after the controller-epoch check (the controller's fenced write)
Fenced = Callable[[list[tuple[str, tuple]]], None]


def preferred(
    topic: str, p: int, replicas: Sequence[int], state: LeaderAndIsr, live: set[int]
) -> LeaderAndIsr:
    """The state with the preferred replica leading (a new leader epoch, the same ISR)."""
    if not replicas:
        raise UnknownTopicOrPartition(f"{topic}-{p} has no replicas")
    pref = replicas[0]
    if state.leader == pref:
        raise ElectionNotNeeded(f"{topic}-{p}: the preferred replica {pref} leads already")
    if pref not in live or pref not in state.isr:
        raise PreferredLeaderNotAvailable(
            f"{topic}-{p}: the preferred replica {pref} is "
            f"{'not alive' if pref not in live else 'not in the ISR ' + str(state.isr)}"
        )
    return LeaderAndIsr(pref, state.leader_epoch + 1, list(state.isr), state.controller_epoch)


def unclean(topic: str, p: int, replicas: Sequence[int], state: LeaderAndIsr, live: set[int]) -> LeaderAndIsr:
    """The state with a live leader for a partition whose leader is gone, out of the ISR if need be."""
    if state.leader in live:
        raise ElectionNotNeeded(f"{topic}-{p}: its leader {state.leader} is alive")
    in_sync = [r for r in replicas if r in live and r in state.isr]
    if in_sync:
        isr = [r for r in state.isr if r in live]
        return LeaderAndIsr(in_sync[0], state.leader_epoch + 1, isr, state.controller_epoch)
    alive = [r for r in replicas if r in live]
    if not alive:
        raise EligibleLeadersNotAvailable(f"{topic}-{p}: none of its replicas {list(replicas)} is alive")
    log.warning("unclean election of %s-%d: %d leads with no in-sync replica alive", topic, p, alive[0])
    return LeaderAndIsr(alive[0], state.leader_epoch + 1, [alive[0]], state.controller_epoch)


RULES = {PREFERRED: preferred, UNCLEAN: unclean}


class LeaderElections:
    """Elections on request, run by the controller: ``fenced`` is its epoch-checked multi-op,
    ``controller_epoch()`` the epoch it stamps into the states it writes."""

    def __init__(
        self, zk: ZkClient, registry: BrokerRegistry, fenced: Fenced, controller_epoch: Callable[[], int]
    ) -> None:
        self.zk = zk
        self.registry = registry
        self.fenced = fenced
        self.controller_epoch = controller_epoch

    def all_partitions(self) -> list[tuple[str, int]]:
        """Every partition in ZooKeeper (the request named none)."""
        out = []
        for topic in sorted(self.zk.children(paths.BROKER_TOPICS)):
            got = self.zk.get(paths.topic_path(topic))
            if got is not None:
                out += [(topic, p) for p in sorted(paths.decode_assignment(got[0]))]
        return out

    def elect(
        self, election_type: int, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], int | LogSourceError]:
        """Run the election on each partition: the new leader where one was written, else the error."""
        rule = RULES.get(election_type)
        live = set(self.registry.live_ids(fresh=True))
        out: dict[tuple[str, int], int | LogSourceError] = {}
        for topic, p in partitions:
            try:
                if rule is None:
                    raise InvalidRequest(f"unknown election type {election_type}")
                out[(topic, p)] = self._elect_one(rule, topic, p, live)
            except LogSourceError as e:
                out[(topic, p)] = e
        return out

    def _elect_one(self, rule: Callable[..., LeaderAndIsr], topic: str, p: int, live: set[int]) -> int:
        if self.zk.exists(paths.delete_topic_path(topic)) is not None:
            raise UnknownTopicOrPartition(f"topic {topic!r} is being deleted")
        for _ in range(5):  # a leader's ISR write moved the version meanwhile: read again
            got = self.zk.get(paths.topic_path(topic))
            replicas = paths.decode_assignment(got[0]).get(p) if got is not None else None
            st = self.zk.get(paths.partition_state_path(topic, p))
            if replicas is None or st is None:
                raise UnknownTopicOrPartition(f"unknown topic or partition {topic}-{p}")
            new = rule(topic, p, replicas, paths.decode_state(st[0]), live)
            try:
                write_state(self.fenced, topic, p, new, st[1].version, self.controller_epoch())
                return new.leader
            except ConditionFailed:
                continue
        raise RequestTimedOut(f"{topic}-{p}: its state kept changing under the election; try again")


def write_state(fenced: Fenced, topic: str, p: int, new: LeaderAndIsr, version: int, epoch: int) -> None:
    """Set a partition's state (stamped with the controller epoch) if its znode is still at ``version``."""
    new = LeaderAndIsr(new.leader, new.leader_epoch, list(new.isr), epoch)
    fenced([("set", (paths.partition_state_path(topic, p), paths.encode_state(new), version))])
    log.info(
        "controller: %s-%d leader %d epoch %d isr %s (requested election)",
        topic,
        p,
        new.leader,
        new.leader_epoch,
        new.isr,
    )
