"""The internal topics ``__consumer_offsets`` and ``__transaction_state``: where they live, who leads them.

A coordinator (groups, transactions) keeps its state in an internal topic and is
the leader of the partition its key hashes to, as in Kafka:

* Single broker: the topics are this broker's local logs, created on first use,
  and this broker leads every partition.
* Cluster: they are ordinary replicated topics in ZooKeeper, created on first use
  by any broker with the configured replication factor
  (``offsets.topic.replication.factor``, ``transaction.state.log.replication.factor``);
  while fewer brokers are live than that, the coordinator is not available
  (CoordinatorNotAvailable, which clients retry), never created under-replicated.
  A broker loads a partition's state when it becomes the partition's leader and
  drops it when it stops leading (Kafka's onElection / onResignation): the
  coordinator registers a :class:`.state.LeadershipListener` in
  ``BrokerState.leadership_listeners`` and the state's role hooks call it on the
  event loop thread. A coordinator's write counts once it is replicated to the
  ISR (:func:`wait_replicated`, Kafka's acks=all for its own records); only then
  does it answer or act on it, so a new leader elected from the ISR has it.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import CoordinatorNotAvailable, TopicAlreadyExists
from ..topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC  # noqa: F401  (re-exported: the coordinators' topics)

if TYPE_CHECKING:
    from .state import BrokerState

#: how long a coordinator waits for its own record to reach the ISR before answering with an error
REPLICATION_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class InternalTopic:
    """An internal topic's shape: partitions, replication factor (cluster mode) and config overrides."""

    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str] = field(default_factory=dict)


def partition_for(key: str, partitions: int) -> int:
    """The internal-topic partition holding ``key`` (a group id, a write id); stable across runs."""
    return zlib.crc32(key.encode()) % partitions


def ensure(state: BrokerState, topic: InternalTopic) -> None:
    """Make the topic exist: a local log on a single broker, replicated through ZooKeeper in a cluster.

    Cluster mode is blocking (ZooKeeper writes): call it off the event loop. It
    raises CoordinatorNotAvailable while fewer brokers are live than the
    replication factor; the controller then elects the leaders in the background,
    so callers see CoordinatorNotAvailable until :func:`leader_of` knows one.
    """
    if state.cluster is None:
        if topic.name not in state.logs.topics():
            try:
                state.logs.create_topic(topic.name, topic.partitions, dict(topic.config) or None)
            except TopicAlreadyExists:
                pass
        return
    if topic.name in state.cluster.topics():
        return
    live = len(state.cluster.brokers())
    if live < topic.replication_factor:
        raise CoordinatorNotAvailable(
            f"internal topic {topic.name} needs {topic.replication_factor} live brokers "
            f"(its replication factor) and {live} are live"
        )
    state.cluster.auto_create_topic(topic.name, topic.partitions, topic.replication_factor, topic.config)


def leader_of(state: BrokerState, topic: str, partition: int) -> int:
    """The broker leading an internal-topic partition (this one on a single broker); -1 if none or unknown."""
    if state.cluster is None:
        return state.broker_id
    roles = state.partitions(topic)
    if partition >= len(roles) or roles[partition] is None:
        return -1
    return roles[partition].leader


async def wait_replicated(
    state: BrokerState, topic: str, partition: int, end_offset: int, timeout_ms: int = REPLICATION_TIMEOUT_MS
) -> None:
    """Wait until a record this leader appended below ``end_offset`` is on the ISR (no-op on a single broker).

    NotLeaderOrFollower if leadership moves meanwhile, RequestTimedOut after
    ``timeout_ms``, NotEnoughReplicasAfterAppend below the topic's min.insync.replicas.
    """
    if state.replication is None:
        return
    await state.replication.wait_for_commit(topic, partition, end_offset, timeout_ms)
