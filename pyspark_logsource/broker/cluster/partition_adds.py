"""CreatePartitions in a cluster: the new partitions' replicas, planned as Kafka plans them, written by the
controller.

Kafka (ZooKeeper mode, AdminZkClient.addPartitions): without an explicit assignment, the new partitions are
assigned by ``assignReplicasToBrokers`` over the brokers with the topic's replication factor (that of
partition 0), starting at the broker that leads partition 0 in the assignment and at the first new
partition id, so the round-robin goes on where the topic's creation left it. An explicit assignment names
live brokers only (INVALID_REPLICA_ASSIGNMENT otherwise), one list per new partition, each as long as the
topic's replication factor. The grown assignment is written on ``/brokers/topics/<t>`` conditioned on the
version read, together with the new partitions' first states (the first live replica leads, the live replicas
are the ISR), in one multi-op fenced by the controller epoch; every broker's assignment watch then sees the
new partitions, their replicas make their logs and followers start fetching.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...errors import (
    InvalidPartitions,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    InvalidTopic,
    UnknownTopicOrPartition,
)
from . import paths
from .controller import assign_replicas
from .zk import ConditionFailed

if TYPE_CHECKING:
    from .member import ClusterMember

log = logging.getLogger(__name__)


def plan_new_partitions(
    existing: dict[int, list[int]],
    brokers: Sequence[int],
    count: int,
    assignments: list[list[int]] | None,
    max_partitions: int,
) -> dict[int, list[int]]:
    """The new partitions' replicas (partition -> brokers); typed errors as Kafka's."""
    have = len(existing)
    if count <= have:
        raise InvalidPartitions(
            f"Topic currently has {have} partitions, which is higher than the requested {count}."
            if count < have
            else f"Topic already has {have} partitions."
        )
    if count > max_partitions:
        raise InvalidPartitions(f"{count} partitions is more than max.partitions.per.topic={max_partitions}")
    add = count - have
    rf = len(existing.get(0) or next(iter(existing.values())))
    ids = sorted(brokers)
    if assignments is not None:
        if len(assignments) != add:
            raise InvalidReplicaAssignment(
                f"Increasing the number of partitions by {add} but {len(assignments)} assignments provided."
            )
        unknown = sorted({b for a in assignments for b in a} - set(ids))
        if unknown:
            raise InvalidReplicaAssignment(f"Unknown broker(s) in replica assignment: {unknown}.")
        for a in assignments:
            if len(set(a)) != len(a):
                raise InvalidReplicaAssignment(f"Duplicate brokers not allowed in replica assignment: {a}.")
            if len(a) != rf:
                raise InvalidReplicaAssignment(
                    f"Inconsistent replication factor between partitions, partition 0 has {rf} while "
                    f"partitions [{have + assignments.index(a)}] have replication factors [{len(a)}]."
                )
        return {have + i: list(a) for i, a in enumerate(assignments)}
    if rf > len(ids):
        raise InvalidReplicationFactor(
            f"replication factor {rf} of the topic is larger than the {len(ids)} live brokers"
        )
    first = (existing.get(0) or [ids[0]])[0]
    start = max(0, next((i for i, b in enumerate(ids) if b >= first), 0))
    return assign_replicas(ids, add, rf, start_index=start, start_partition=have)


def add_partitions(
    member: ClusterMember,
    name: str,
    count: int,
    assignments: list[list[int]] | None,
    max_partitions: int,
    validate_only: bool,
) -> dict[int, list[int]]:
    """Grow ``name`` to ``count`` partitions through the controller (blocking; NotController elsewhere)."""
    controller, zk = member.controller, member.zk
    for _ in range(5):  # a concurrent change of the assignment (a reassignment) moves its version: re-plan
        got = zk.get(paths.topic_path(name))
        if got is None:
            raise UnknownTopicOrPartition(f"unknown topic {name!r}")
        if zk.exists(paths.delete_topic_path(name)) is not None:
            raise InvalidTopic(f"topic {name!r} is queued for deletion")
        existing = paths.decode_assignment(got[0])
        live = member.registry.live_ids(fresh=True)
        plan = plan_new_partitions(existing, live, count, assignments, max_partitions)
        if validate_only:
            return plan
        topic_id = paths.decode_topic_id(got[0]) or paths.new_topic_id()
        ops: list[tuple[str, tuple]] = [
            (
                "set",
                (
                    paths.topic_path(name),
                    paths.encode_assignment({**existing, **plan}, topic_id),
                    got[1].version,
                ),
            )
        ]
        if zk.exists(paths.partitions_path(name)) is None:
            ops.append(("create", (paths.partitions_path(name), b"")))
        alive = set(live)
        for p, replicas in sorted(plan.items()):
            isr = [r for r in replicas if r in alive]
            state = paths.LeaderAndIsr(isr[0], 0, isr, controller.epoch)
            ops.append(("create", (paths.partition_path(name, p), b"")))
            ops.append(("create", (paths.partition_state_path(name, p), paths.encode_state(state))))
        try:
            controller.write_fenced(ops)
        except ConditionFailed:
            continue
        log.info("controller %d: topic %s grew to %d partitions: %s", member.broker_id, name, count, plan)
        return plan
    raise InvalidPartitions(f"topic {name!r} kept changing while partitions were added; retry")
