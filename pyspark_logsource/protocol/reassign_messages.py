"""Kafka's replica admin APIs: ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46).

Schemas (Kafka's JSON, field names in snake_case; the versions current clients send: ElectLeaders v0-2,
flexible from v2; AlterPartitionReassignments v0-1, v1 adds ``allow_replication_factor_change``
(KIP-860); ListPartitionReassignments v0; both flexible from v0), the typed messages and their adapters
live here together, as in :mod:`.txn_messages`.

``topic_partitions`` of ElectLeaders and ``topics`` of ListPartitionReassignments are nullable: None
asks for every partition. ``replicas`` of a reassigned partition is nullable: None cancels the
reassignment in progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey
from .schema import F, message

# ------------------------------------------------------------------ schemas

ELECT_LEADERS_REQUEST = message(
    "ElectLeadersRequest",
    "0-2",
    "2+",
    F("election_type", "int8", "1+"),
    F(
        "topic_partitions",
        "[]TopicPartitions",
        "0+",
        F("topic", "string"),
        F("partitions", "[]int32"),
        nullable="0+",
    ),
    F("timeout_ms", "int32", default=60000),
)
ELECT_LEADERS_RESPONSE = message(
    "ElectLeadersResponse",
    "0-2",
    "2+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "1+"),
    F(
        "replica_election_results",
        "[]ReplicaElectionResult",
        "0+",
        F("topic", "string"),
        F(
            "partition_result",
            "[]PartitionResult",
            "0+",
            F("partition_id", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", "0+", nullable="0+"),
        ),
    ),
)

ALTER_PARTITION_REASSIGNMENTS_REQUEST = message(
    "AlterPartitionReassignmentsRequest",
    "0-1",
    "0+",
    F("timeout_ms", "int32", default=60000),
    F("allow_replication_factor_change", "bool", "1+", default=True),
    F(
        "topics",
        "[]ReassignableTopic",
        "0+",
        F("name", "string"),
        F(
            "partitions",
            "[]ReassignablePartition",
            "0+",
            F("partition_index", "int32"),
            F("replicas", "[]int32", "0+", nullable="0+", default="null"),
        ),
    ),
)
ALTER_PARTITION_REASSIGNMENTS_RESPONSE = message(
    "AlterPartitionReassignmentsResponse",
    "0-1",
    "0+",
    F("throttle_time_ms", "int32"),
    F("allow_replication_factor_change", "bool", "1+", default=True),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+"),
    F(
        "responses",
        "[]ReassignableTopicResponse",
        "0+",
        F("name", "string"),
        F(
            "partitions",
            "[]ReassignablePartitionResponse",
            "0+",
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", "0+", nullable="0+"),
        ),
    ),
)

LIST_PARTITION_REASSIGNMENTS_REQUEST = message(
    "ListPartitionReassignmentsRequest",
    "0",
    "0+",
    F("timeout_ms", "int32", default=60000),
    F(
        "topics",
        "[]ListPartitionReassignmentsTopics",
        "0+",
        F("name", "string"),
        F("partition_indexes", "[]int32"),
        nullable="0+",
        default="null",
    ),
)
LIST_PARTITION_REASSIGNMENTS_RESPONSE = message(
    "ListPartitionReassignmentsResponse",
    "0",
    "0+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+"),
    F(
        "topics",
        "[]OngoingTopicReassignment",
        "0+",
        F("name", "string"),
        F(
            "partitions",
            "[]OngoingPartitionReassignment",
            "0+",
            F("partition_index", "int32"),
            F("replicas", "[]int32"),
            F("adding_replicas", "[]int32"),
            F("removing_replicas", "[]int32"),
        ),
    ),
)

#: ElectLeaders' election types (KIP-460)
PREFERRED, UNCLEAN = 0, 1


# ------------------------------------------------------------------ typed messages

TopicPartitions = dict[str, list[int]]


@dataclass(slots=True)
class PartitionError:
    """One partition's outcome: an error code (0: done) and its message."""

    topic: str
    partition: int
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class ElectLeadersRequest:
    """Elect leaders of ``topic_partitions`` (topic -> partitions; None: every partition)."""

    API_KEY = ApiKey.ELECT_LEADERS

    election_type: int = PREFERRED
    topic_partitions: TopicPartitions | None = None
    timeout_ms: int = 60000


@dataclass(slots=True)
class ElectLeadersResponse:
    """Per-partition results; ``error_code`` is the top-level one (v1+)."""

    results: list[PartitionError] = field(default_factory=list)
    error_code: int = 0
    throttle_time_ms: int = 0


@dataclass(slots=True)
class AlterPartitionReassignmentsRequest:
    """(topic, partition) -> target replicas, or None to cancel the reassignment in progress."""

    API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS

    reassignments: dict[tuple[str, int], list[int] | None] = field(default_factory=dict)
    timeout_ms: int = 60000
    allow_replication_factor_change: bool = True


@dataclass(slots=True)
class AlterPartitionReassignmentsResponse:
    """Per-partition results and a top-level error (NOT_CONTROLLER, say)."""

    results: list[PartitionError] = field(default_factory=list)
    error_code: int = 0
    error_message: str | None = None
    allow_replication_factor_change: bool = True
    throttle_time_ms: int = 0


@dataclass(slots=True)
class ListPartitionReassignmentsRequest:
    """List the reassignments in progress of ``topics`` (topic -> partitions; None: all of them)."""

    API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS

    topics: TopicPartitions | None = None
    timeout_ms: int = 60000


@dataclass(slots=True)
class OngoingReassignment:
    """A reassignment in progress: the current replica set, and who joins and leaves it."""

    topic: str
    partition: int
    replicas: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


@dataclass(slots=True)
class ListPartitionReassignmentsResponse:
    """The reassignments in progress."""

    reassignments: list[OngoingReassignment] = field(default_factory=list)
    error_code: int = 0
    error_message: str | None = None
    throttle_time_ms: int = 0


# ------------------------------------------------------------------ adapters


def _grouped(items: list[PartitionError]) -> dict[str, list[PartitionError]]:
    out: dict[str, list[PartitionError]] = {}
    for r in items:
        out.setdefault(r.topic, []).append(r)
    return out


def _topic_partitions_to(tp: TopicPartitions | None, key: str) -> list[dict] | None:
    if tp is None:
        return None
    return [{"topic" if key == "partitions" else "name": t, key: list(ps)} for t, ps in tp.items()]


def elect_leaders_req_to(r: ElectLeadersRequest, v: int) -> dict:
    return {
        "election_type": r.election_type,
        "topic_partitions": _topic_partitions_to(r.topic_partitions, "partitions"),
        "timeout_ms": r.timeout_ms,
    }


def elect_leaders_req_from(d: dict, v: int) -> ElectLeadersRequest:
    tps = d["topic_partitions"]
    parts: TopicPartitions | None = None
    if tps is not None:
        parts = {}
        for t in tps:
            parts.setdefault(t["topic"], []).extend(t["partitions"])
    # v0 has no election type: a preferred election
    return ElectLeadersRequest(
        d.get("election_type", PREFERRED) if v >= 1 else PREFERRED, parts, d["timeout_ms"]
    )


def elect_leaders_resp_to(r: ElectLeadersResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "replica_election_results": [
            {
                "topic": t,
                "partition_result": [
                    {
                        "partition_id": p.partition,
                        "error_code": p.error_code,
                        "error_message": p.error_message,
                    }
                    for p in ps
                ],
            }
            for t, ps in _grouped(r.results).items()
        ],
    }


def elect_leaders_resp_from(d: dict, v: int) -> ElectLeadersResponse:
    results = [
        PartitionError(t["topic"], p["partition_id"], p["error_code"], p["error_message"])
        for t in d["replica_election_results"]
        for p in t["partition_result"]
    ]
    return ElectLeadersResponse(results, d.get("error_code", 0), d["throttle_time_ms"])


def alter_reassignments_req_to(r: AlterPartitionReassignmentsRequest, v: int) -> dict:
    topics: dict[str, list[dict]] = {}
    for (t, p), replicas in r.reassignments.items():
        topics.setdefault(t, []).append(
            {"partition_index": p, "replicas": None if replicas is None else list(replicas)}
        )
    return {
        "timeout_ms": r.timeout_ms,
        "allow_replication_factor_change": r.allow_replication_factor_change,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


def alter_reassignments_req_from(d: dict, v: int) -> AlterPartitionReassignmentsRequest:
    out: dict[tuple[str, int], list[int] | None] = {}
    for t in d["topics"]:
        for p in t["partitions"]:
            out[(t["name"], p["partition_index"])] = p["replicas"]
    return AlterPartitionReassignmentsRequest(
        out, d["timeout_ms"], d.get("allow_replication_factor_change", True)
    )


def alter_reassignments_resp_to(r: AlterPartitionReassignmentsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "allow_replication_factor_change": r.allow_replication_factor_change,
        "error_code": r.error_code,
        "error_message": r.error_message,
        "responses": [
            {
                "name": t,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "error_code": p.error_code,
                        "error_message": p.error_message,
                    }
                    for p in ps
                ],
            }
            for t, ps in _grouped(r.results).items()
        ],
    }


def alter_reassignments_resp_from(d: dict, v: int) -> AlterPartitionReassignmentsResponse:
    results = [
        PartitionError(t["name"], p["partition_index"], p["error_code"], p["error_message"])
        for t in d["responses"]
        for p in t["partitions"]
    ]
    return AlterPartitionReassignmentsResponse(
        results,
        d["error_code"],
        d["error_message"],
        d.get("allow_replication_factor_change", True),
        d["throttle_time_ms"],
    )


def list_reassignments_req_to(r: ListPartitionReassignmentsRequest, v: int) -> dict:
    return {"timeout_ms": r.timeout_ms, "topics": _topic_partitions_to(r.topics, "partition_indexes")}


def list_reassignments_req_from(d: dict, v: int) -> ListPartitionReassignmentsRequest:
    topics = d["topics"]
    parts: TopicPartitions | None = None
    if topics is not None:
        parts = {}
        for t in topics:
            parts.setdefault(t["name"], []).extend(t["partition_indexes"])
    return ListPartitionReassignmentsRequest(parts, d["timeout_ms"])


def list_reassignments_resp_to(r: ListPartitionReassignmentsResponse, v: int) -> dict:
    topics: dict[str, list[dict]] = {}
    for o in r.reassignments:
        topics.setdefault(o.topic, []).append(
            {
                "partition_index": o.partition,
                "replicas": list(o.replicas),
                "adding_replicas": list(o.adding),
                "removing_replicas": list(o.removing),
            }
        )
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "error_message": r.error_message,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


def list_reassignments_resp_from(d: dict, v: int) -> ListPartitionReassignmentsResponse:
    out = [
        OngoingReassignment(
            t["name"], p["partition_index"], p["replicas"], p["adding_replicas"], p["removing_replicas"]
        )
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return ListPartitionReassignmentsResponse(out, d["error_code"], d["error_message"], d["throttle_time_ms"])
