"""Client-side view of the cluster: brokers, topics, partition leaders.

Leadership is explicit per partition (as the Metadata response carries it)
even with one broker, so that the clients route to a partition's leader and
cluster mode needs no client change.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import ConfigError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class PartitionInfo(NamedTuple):
    """One partition as the broker describes it."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


class TopicDescription(NamedTuple):
    """A topic and its partitions."""

    name: str
    partitions: list[PartitionInfo]


class BrokerInfo(NamedTuple):
    """A broker's id and address."""

    node_id: int
    host: str
    port: int


#: ``bootstrap.servers``: ``"host:port[,host:port...]"`` or a list of ``"host:port"``.
Bootstrap = str | list[str] | tuple[str, ...]


def parse_bootstrap(bootstrap: Bootstrap | None) -> list[tuple[str, int]]:
    """Parse ``"host:port[,host:port]"`` or a list of ``"host:port"`` (None: $LOGSOURCE_BOOTSTRAP or 127.0.0.1:9092)."""
    if bootstrap is None:
        bootstrap = os.environ.get("LOGSOURCE_BOOTSTRAP", DEFAULT_BOOTSTRAP)
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if "://" in item:  # accept listener spelling: PLAINTEXT://host:port
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not host:
            raise ConfigError(f"bootstrap server {item!r} is not host:port")
        try:
            port_no = int(port)
        except ValueError:
            raise ConfigError(f"bootstrap server {item!r} has a non-numeric port") from None
        if not 0 < port_no < 65536:
            raise ConfigError(f"bootstrap server {item!r} has port {port_no} out of range")
        out.append((host.strip("[]"), port_no))
    if not out:
        raise ConfigError(f"no bootstrap servers in {bootstrap!r}")
    return out


@dataclass
class ClusterMetadata:
    """The last Metadata response, indexed for the clients' lookups."""

    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicDescription] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None

    def num_partitions(self, topic: str) -> int | None:
        t = self.topics.get(topic)
        return None if t is None else len(t.partitions)

    def leader(self, topic: str, partition: int) -> int | None:
        t = self.topics.get(topic)
        if t is None:
            return None
        for p in t.partitions:
            if p.partition == partition:
                return p.leader if p.leader >= 0 else None
        return None

    def leader_epoch(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        if t is not None:
            for p in t.partitions:
                if p.partition == partition:
                    return p.leader_epoch
        return -1
