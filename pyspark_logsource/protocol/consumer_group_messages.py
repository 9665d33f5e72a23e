"""KIP-848's consumer group protocol: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Schemas (Kafka's JSON, field names in snake_case; v0-1 of both, flexible from v0), the typed messages and
their adapters live here together, as in :mod:`.reassign_messages`. ConsumerGroupHeartbeat v1 adds
``subscribed_topic_regex`` (KIP-848's regex subscription); ConsumerGroupDescribe v1 adds ``member_type``.

An assignment is ``{topic_id: [partitions]}`` on the heartbeat's wire (topic ids are 16-byte uuids), and
``{(topic_id, topic_name): [partitions]}`` in ConsumerGroupDescribe, which names the topics too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey
from .schema import I32_MIN, F, message

# ------------------------------------------------------------------ schemas

_HB_TOPIC_PARTITIONS = (F("topic_id", "uuid"), F("partitions", "[]int32"))

CONSUMER_GROUP_HEARTBEAT_REQUEST = message(
    "ConsumerGroupHeartbeatRequest",
    "0-1",
    "0+",
    F("group_id", "string"),
    F("member_id", "string"),
    F("member_epoch", "int32"),
    F("instance_id", "string", "0+", nullable="0+", default=None),
    F("rack_id", "string", "0+", nullable="0+", default=None),
    F("rebalance_timeout_ms", "int32", default=-1),
    F("subscribed_topic_names", "[]string", "0+", nullable="0+", default=None),
    F("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
    F("server_assignor", "string", "0+", nullable="0+", default=None),
    F("topic_partitions", "[]TopicPartitions", "0+", *_HB_TOPIC_PARTITIONS, nullable="0+", default=None),
)
CONSUMER_GROUP_HEARTBEAT_RESPONSE = message(
    "ConsumerGroupHeartbeatResponse",
    "0-1",
    "0+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+", default=None),
    F("member_id", "string", "0+", nullable="0+", default=None),
    F("member_epoch", "int32"),
    F("heartbeat_interval_ms", "int32"),
    F(
        "assignment",
        "Assignment",
        "0+",
        F("topic_partitions", "[]TopicPartitions", "0+", *_HB_TOPIC_PARTITIONS),
        nullable="0+",
        default=None,
    ),
)

_DESCRIBED_ASSIGNMENT = (
    F(
        "topic_partitions",
        "[]TopicPartitions",
        "0+",
        F("topic_id", "uuid"),
        F("topic_name", "string"),
        F("partitions", "[]int32"),
    ),
)

CONSUMER_GROUP_DESCRIBE_REQUEST = message(
    "ConsumerGroupDescribeRequest",
    "0-1",
    "0+",
    F("group_ids", "[]string"),
    F("include_authorized_operations", "bool"),
)
CONSUMER_GROUP_DESCRIBE_RESPONSE = message(
    "ConsumerGroupDescribeResponse",
    "0-1",
    "0+",
    F("throttle_time_ms", "int32"),
    F(
        "groups",
        "[]DescribedGroup",
        "0+",
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+", default=None),
        F("group_id", "string"),
        F("group_state", "string"),
        F("group_epoch", "int32"),
        F("assignment_epoch", "int32"),
        F("assignor_name", "string"),
        F(
            "members",
            "[]Member",
            "0+",
            F("member_id", "string"),
            F("instance_id", "string", "0+", nullable="0+", default=None),
            F("rack_id", "string", "0+", nullable="0+", default=None),
            F("member_epoch", "int32"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("subscribed_topic_names", "[]string"),
            F("subscribed_topic_regex", "string", "0+", nullable="0+", default=None),
            F("assignment", "Assignment", "0+", *_DESCRIBED_ASSIGNMENT),
            F("target_assignment", "Assignment", "0+", *_DESCRIBED_ASSIGNMENT),
            F("member_type", "int8", "1+", default=-1),
        ),
        F("authorized_operations", "int32", default=I32_MIN),
    ),
)

#: member epochs a heartbeat may carry besides a member's own: join, leave, a static member's leave
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2

# ------------------------------------------------------------------ typed messages

#: topic id (16 bytes) -> partitions
Assignment = dict[bytes, list[int]]


@dataclass(slots=True)
class ConsumerGroupHeartbeatRequest:
    """A member's heartbeat: join (epoch 0), stay (its epoch), leave (-1, or -2 for a static member).
    ``owned`` is None when the client did not say what it owns (unchanged since its last heartbeat)."""

    API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT

    group_id: str
    member_id: str = ""
    member_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    api_version: int = 1  # not on the wire: the version it came in (v1+ needs the client's member id)


@dataclass(slots=True)
class ConsumerGroupHeartbeatResponse:
    """The member's id and epoch, when to heartbeat next, and its assignment when it changed (else None)."""

    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    throttle_time_ms: int = 0


@dataclass(slots=True)
class ConsumerGroupDescribeRequest:
    """Describe these consumer-protocol groups."""

    API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE

    group_ids: list[str] = field(default_factory=list)
    include_authorized_operations: bool = False


#: (topic id, topic name) -> partitions
NamedAssignment = dict[tuple[bytes, str], list[int]]


@dataclass(slots=True)
class DescribedConsumerMember:
    """A member of a consumer-protocol group: its epoch, subscription, and current and target assignment."""

    member_id: str
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    assignment: NamedAssignment = field(default_factory=dict)
    target_assignment: NamedAssignment = field(default_factory=dict)
    member_type: int = -1


@dataclass(slots=True)
class DescribedConsumerGroup:
    """A consumer-protocol group, or its error (GROUP_ID_NOT_FOUND, NOT_COORDINATOR, ...)."""

    group_id: str
    error_code: int = 0
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list[DescribedConsumerMember] = field(default_factory=list)
    authorized_operations: int = I32_MIN


@dataclass(slots=True)
class ConsumerGroupDescribeResponse:
    """One entry per group asked for."""

    groups: list[DescribedConsumerGroup] = field(default_factory=list)
    throttle_time_ms: int = 0


# ------------------------------------------------------------------ adapters


def _tps_to(a: Assignment) -> list[dict]:
    return [{"topic_id": t, "partitions": list(ps)} for t, ps in a.items()]


def _tps_from(items: list[dict]) -> Assignment:
    out: Assignment = {}
    for t in items:
        out.setdefault(bytes(t["topic_id"]), []).extend(t["partitions"])
    return out


def consumer_heartbeat_req_to(r: ConsumerGroupHeartbeatRequest, v: int) -> dict:
    return {
        "group_id": r.group_id,
        "member_id": r.member_id,
        "member_epoch": r.member_epoch,
        "instance_id": r.instance_id,
        "rack_id": r.rack_id,
        "rebalance_timeout_ms": r.rebalance_timeout_ms,
        "subscribed_topic_names": None
        if r.subscribed_topic_names is None
        else list(r.subscribed_topic_names),
        "subscribed_topic_regex": r.subscribed_topic_regex,
        "server_assignor": r.server_assignor,
        "topic_partitions": None if r.owned is None else _tps_to(r.owned),
    }


def consumer_heartbeat_req_from(d: dict, v: int) -> ConsumerGroupHeartbeatRequest:
    tps = d["topic_partitions"]
    return ConsumerGroupHeartbeatRequest(
        d["group_id"],
        d["member_id"],
        d["member_epoch"],
        d["instance_id"],
        d["rack_id"],
        d["rebalance_timeout_ms"],
        d["subscribed_topic_names"],
        d.get("subscribed_topic_regex"),
        d["server_assignor"],
        None if tps is None else _tps_from(tps),
        v,
    )


def consumer_heartbeat_resp_to(r: ConsumerGroupHeartbeatResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "error_message": r.error_message,
        "member_id": r.member_id,
        "member_epoch": r.member_epoch,
        "heartbeat_interval_ms": r.heartbeat_interval_ms,
        "assignment": None if r.assignment is None else {"topic_partitions": _tps_to(r.assignment)},
    }


def consumer_heartbeat_resp_from(d: dict, v: int) -> ConsumerGroupHeartbeatResponse:
    a = d["assignment"]
    return ConsumerGroupHeartbeatResponse(
        d["error_code"],
        d["error_message"],
        d["member_id"],
        d["member_epoch"],
        d["heartbeat_interval_ms"],
        None if a is None else _tps_from(a["topic_partitions"]),
        d["throttle_time_ms"],
    )


def consumer_describe_req_to(r: ConsumerGroupDescribeRequest, v: int) -> dict:
    return {"group_ids": list(r.group_ids), "include_authorized_operations": r.include_authorized_operations}


def consumer_describe_req_from(d: dict, v: int) -> ConsumerGroupDescribeRequest:
    return ConsumerGroupDescribeRequest(d["group_ids"], d["include_authorized_operations"])


def _named_to(a: NamedAssignment) -> dict:
    return {
        "topic_partitions": [
            {"topic_id": tid, "topic_name": name, "partitions": list(ps)} for (tid, name), ps in a.items()
        ]
    }


def _named_from(d: dict) -> NamedAssignment:
    return {(bytes(t["topic_id"]), t["topic_name"]): list(t["partitions"]) for t in d["topic_partitions"]}


def consumer_describe_resp_to(r: ConsumerGroupDescribeResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "groups": [
            {
                "error_code": g.error_code,
                "error_message": g.error_message,
                "group_id": g.group_id,
                "group_state": g.group_state,
                "group_epoch": g.group_epoch,
                "assignment_epoch": g.assignment_epoch,
                "assignor_name": g.assignor_name,
                "members": [
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": list(m.subscribed_topic_names),
                        "subscribed_topic_regex": m.subscribed_topic_regex,
                        "assignment": _named_to(m.assignment),
                        "target_assignment": _named_to(m.target_assignment),
                        "member_type": m.member_type,
                    }
                    for m in g.members
                ],
                "authorized_operations": g.authorized_operations,
            }
            for g in r.groups
        ],
    }


def consumer_describe_resp_from(d: dict, v: int) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(
        [
            DescribedConsumerGroup(
                g["group_id"],
                g["error_code"],
                g["error_message"],
                g["group_state"],
                g["group_epoch"],
                g["assignment_epoch"],
                g["assignor_name"],
                [
                    DescribedConsumerMember(
                        m["member_id"],
                        m["member_epoch"],
                        m["client_id"],
                        m["client_host"],
                        m["instance_id"],
                        m["rack_id"],
                        m["subscribed_topic_names"],
                        m["subscribed_topic_regex"],
                        _named_from(m["assignment"]),
                        _named_from(m["target_assignment"]),
                        m.get("member_type", -1) if v >= 1 else -1,
                    )
                    for m in g["members"]
                ],
                g["authorized_operations"],
            )
            for g in d["groups"]
        ],
        d["throttle_time_ms"],
    )
