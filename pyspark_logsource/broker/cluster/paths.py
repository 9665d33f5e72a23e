"""ZooKeeper paths and the JSON shapes stored at them: Kafka's layout (ZooKeeper mode), so its tools read it.

======================================================  =============================================================
znode                                                   data
======================================================  =============================================================
``/brokers/ids/<id>`` (ephemeral)                       ``{"version":4,"host":"h","port":p,"endpoints":["PLAINTEXT://h:p"],
                                                        "jmx_port":-1,"timestamp":"<ms>"}``
``/brokers/topics/<t>``                                 ``{"version":3,"topic_id":"<22 chars>","partitions":{"0":[1,2,3],...},
                                                        "adding_replicas":{"0":[4]},"removing_replicas":{"0":[1]}}``
                                                        (a reassignment in progress, KIP-455: see :mod:`.reassignment`)
``/brokers/topics/<t>/partitions/<p>/state``            ``{"controller_epoch":E,"leader":L,"version":1,
                                                        "leader_epoch":LE,"isr":[...]}``
``/controller`` (ephemeral)                             ``{"version":1,"brokerid":id,"timestamp":"<ms>"}``
``/controller_epoch``                                   ``E`` (an integer; its znode version fences stale controllers)
``/admin/delete_topics/<t>``                            empty: a deletion request the controller carries out
``/config/topics/<t>``                                  ``{"version":1,"config":{"k":"v",...}}``
``/cluster/id``                                         ``{"version":"1","id":"<cluster id>"}``
``/latest_producer_id_block``                           ``{"version":1,"broker":id,"block_start":"s","block_end":"e"}``
======================================================  =============================================================

Partition-state znodes are written only with a version condition (a ``set`` with the read version, or a
multi-op that also checks ``/controller_epoch``'s version), never blindly.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DELETE_TOPICS = "/admin/delete_topics"
CONFIG_TOPICS = "/config/topics"
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
#: persistent paths every broker makes sure exist at startup
PERSISTENT_PATHS = (BROKER_IDS, BROKER_TOPICS, DELETE_TOPICS, CONFIG_TOPICS, "/cluster")


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _loads(data: bytes) -> Any:
    return json.loads(data.decode())


# ---------------------------------------------------------------- brokers


@dataclass(frozen=True)
class BrokerInfo:
    """A registered broker."""

    broker_id: int
    host: str
    port: int
    timestamp: int = 0
    #: creation zxid of the registration znode: a new one for each session of the broker
    czxid: int = 0
    #: every listener: (name, host, port); host/port above are the inter-broker listener's
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def address_on(self, listener: str | None) -> tuple[str, int]:
        """(host, port) on ``listener``; the inter-broker address when None or not a listener of this broker."""
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return self.host, self.port


def encode_broker(
    host: str,
    port: int,
    endpoints: dict[str, tuple[str, int]] | None = None,
    protocol_map: dict[str, str] | None = None,
) -> bytes:
    """Kafka's registration JSON; ``host``/``port`` are the inter-broker listener's address."""
    eps = endpoints or {"PLAINTEXT": (host, port)}
    return _dumps(
        {
            "features": {},
            "listener_security_protocol_map": protocol_map or {n: n for n in eps},
            "endpoints": [f"{n}://{h}:{p}" for n, (h, p) in eps.items()],
            "jmx_port": -1,
            "port": port,
            "host": host,
            "version": 4,
            "timestamp": _now_ms(),
        }
    )


def decode_broker(broker_id: int, data: bytes) -> BrokerInfo:
    d = _loads(data)
    host, port = d.get("host"), d.get("port", -1)
    endpoints = []
    for ep in d.get("endpoints", []):  # Kafka puts the listeners in endpoints; host/port may be null
        name, _, rest = ep.partition("://")
        h, _, p = rest.rpartition(":")
        endpoints.append((name, h.strip("[]"), int(p)))
        if name == "PLAINTEXT" and not host:
            host, port = h.strip("[]"), int(p)
    return BrokerInfo(
        broker_id, host or "", int(port), int(d.get("timestamp", 0)), endpoints=tuple(endpoints)
    )


# ---------------------------------------------------------------- topics


#: Kafka's reserved ids (Uuid.ZERO_UUID, Uuid.METADATA_TOPIC_ID): never a topic's
_RESERVED_TOPIC_IDS = frozenset({"AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"})


def new_topic_id() -> str:
    """A topic id as Kafka writes it: a random UUID in URL-safe base64 without padding (22 characters),
    drawn again, as Kafka's Uuid.randomUuid() does, when it is reserved or starts with "-" (which
    command-line tools would take for an option: ``kafka-topics --topic-id -x...``)."""
    while True:
        tid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not tid.startswith("-") and tid not in _RESERVED_TOPIC_IDS:
            return tid


def encode_assignment(
    assignment: dict[int, list[int]],
    topic_id: str | None,
    adding: dict[int, list[int]] | None = None,
    removing: dict[int, list[int]] | None = None,
) -> bytes:
    """A topic znode; ``adding`` / ``removing``: partition -> replicas joining / leaving it during a
    reassignment (KIP-455; ``partitions`` then holds the full set, target and original)."""
    d: dict[str, Any] = {"version": 3}
    if topic_id is not None:
        d["topic_id"] = topic_id
    d["partitions"] = {str(p): list(r) for p, r in sorted(assignment.items())}
    d["adding_replicas"] = {str(p): list(r) for p, r in sorted((adding or {}).items()) if r}
    d["removing_replicas"] = {str(p): list(r) for p, r in sorted((removing or {}).items()) if r}
    return _dumps(d)


def decode_reassigning(data: bytes) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """(adding, removing) of a topic znode: partition -> replicas, for the partitions being reassigned."""
    d = _loads(data)

    def parts(key: str) -> dict[int, list[int]]:
        return {int(p): [int(b) for b in r] for p, r in (d.get(key) or {}).items() if r}

    return parts("adding_replicas"), parts("removing_replicas")


def decode_topic_id(data: bytes) -> str | None:
    """The topic id of an assignment znode (None for a version-2 node written by an older tool)."""
    return _loads(data).get("topic_id")


def decode_assignment(data: bytes) -> dict[int, list[int]]:
    d = _loads(data)
    return {int(p): [int(b) for b in r] for p, r in d.get("partitions", {}).items()}


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition-state znode's content."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int


def encode_state(s: LeaderAndIsr) -> bytes:
    return _dumps(
        {
            "controller_epoch": s.controller_epoch,
            "leader": s.leader,
            "version": 1,
            "leader_epoch": s.leader_epoch,
            "isr": list(s.isr),
        }
    )


def decode_state(data: bytes) -> LeaderAndIsr:
    d = _loads(data)
    return LeaderAndIsr(
        int(d["leader"]),
        int(d["leader_epoch"]),
        [int(b) for b in d["isr"]],
        int(d.get("controller_epoch", 0)),
    )


def encode_topic_config(config: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": {str(k): str(v) for k, v in config.items()}})


def decode_topic_config(data: bytes) -> dict[str, str]:
    if not data:
        return {}
    return {str(k): str(v) for k, v in _loads(data).get("config", {}).items()}


# ---------------------------------------------------------------- controller


def encode_controller(broker_id: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()})


def decode_controller(data: bytes) -> int:
    try:
        return int(_loads(data)["brokerid"])
    except (ValueError, KeyError, TypeError):
        return -1


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_loads(data)["id"])


def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)})


def decode_producer_id_block(data: bytes) -> tuple[int, int]:
    """(start, end) with end inclusive, as Kafka writes it."""
    d = _loads(data)
    return int(d["block_start"]), int(d["block_end"])
