"""Partition assignors, run by the group's leader: Kafka's ``range`` and ``roundrobin``.

An assignor maps ``{member_id: subscribed topics}`` and ``{topic: partition count}`` to
``{member_id: [(topic, partition), ...]}``. Members are ordered by id, so every
leader computes the same result, as Kafka's assignors do (interoperable: a Java,
librdkafka or kafka-python member given this assignment reads the same partitions).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..topics import TopicPartition

Assignor = Callable[[Mapping[str, list[str]], Mapping[str, int]], dict[str, list[TopicPartition]]]


def range_assign(
    subscriptions: Mapping[str, list[str]], partitions: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    """The paper's Algorithm 1, per topic: sort the members and the partitions; with N partitions
    and C members, member i gets a contiguous range of N/C partitions, the first N%C one more."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    for topic in sorted({t for ts in subscriptions.values() for t in ts}):
        n = partitions.get(topic, 0)
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        if not members or n <= 0:
            continue
        share, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            count = share + (1 if i < extra else 0)
            out[m].extend((topic, p) for p in range(start, start + count))
            start += count
    return out


def roundrobin_assign(
    subscriptions: Mapping[str, list[str]],
    partitions: Mapping[str, int],
) -> dict[str, list[TopicPartition]]:
    """Deal every (topic, partition), sorted, to the members in turn, skipping members not subscribed."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return out
    subs = {m: set(ts) for m, ts in subscriptions.items()}
    i = 0
    for topic in sorted({t for ts in subscriptions.values() for t in ts}):
        for p in range(partitions.get(topic, 0)):
            for _ in range(len(members)):
                m = members[i % len(members)]
                i += 1
                if topic in subs[m]:
                    out[m].append((topic, p))
                    break
    return out


#: Kafka's names, so members of other clients vote for the same protocol.
ASSIGNORS: dict[str, Assignor] = {"range": range_assign, "roundrobin": roundrobin_assign}
