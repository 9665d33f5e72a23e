"""Typed messages of the group membership APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups) and of the ``consumer`` protocol embedded in them.

Every field has Kafka's default for versions that lack it. The embedded
consumer protocol (member metadata in JoinGroup, assignments in SyncGroup) is
bytes on the wire: :func:`encode_subscription`/:func:`decode_subscription` and
:func:`encode_assignment`/:func:`decode_assignment` convert them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..topics import TopicPartition
from .api_keys import ApiKey
from .group_schemas import CONSUMER_PROTOCOL_ASSIGNMENT, CONSUMER_PROTOCOL_SUBSCRIPTION
from .primitives import ProtocolError, Reader, Writer
from .schema import Codec

CONSUMER_PROTOCOL_TYPE = "consumer"

# ------------------------------------------------------------------ JoinGroup (11)


@dataclass(slots=True)
class JoinGroupProtocol:
    """One assignment strategy a member supports, with its metadata (a subscription)."""

    name: str
    metadata: bytes = b""


@dataclass(slots=True)
class JoinGroupRequest:
    """Join (or rejoin) a group; answered when the rebalance completes."""

    API_KEY = ApiKey.JOIN_GROUP

    group_id: str = ""
    session_timeout_ms: int = 10000
    rebalance_timeout_ms: int = -1
    member_id: str = ""
    protocol_type: str = CONSUMER_PROTOCOL_TYPE
    protocols: list[JoinGroupProtocol] = field(default_factory=list)
    group_instance_id: str | None = None
    reason: str | None = None
    api_version: int = 0  # not on the wire: the version it came in (v4+ gets MEMBER_ID_REQUIRED)


@dataclass(slots=True)
class JoinGroupMember:
    """A member as the leader sees it: id and the metadata of the chosen protocol."""

    member_id: str
    metadata: bytes = b""
    group_instance_id: str | None = None


@dataclass(slots=True)
class JoinGroupResponse:
    """The new generation: the chosen protocol, the leader, and (to the leader only) the members."""

    error_code: int = 0
    generation_id: int = -1
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[JoinGroupMember] = field(default_factory=list)
    protocol_type: str | None = None
    skip_assignment: bool = False
    throttle_time_ms: int = 0
    error_message: str | None = None  # not on the wire; for raise_for_response


# ------------------------------------------------------------------ SyncGroup (14)


@dataclass(slots=True)
class SyncGroupRequest:
    """Get this member's assignment; the leader sends everyone's."""

    API_KEY = ApiKey.SYNC_GROUP

    group_id: str = ""
    generation_id: int = -1
    member_id: str = ""
    assignments: dict[str, bytes] = field(default_factory=dict)
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class SyncGroupResponse:
    """This member's assignment (consumer protocol bytes)."""

    error_code: int = 0
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None
    throttle_time_ms: int = 0
    error_message: str | None = None


# ------------------------------------------------------------------ Heartbeat (12) / LeaveGroup (13)


@dataclass(slots=True)
class HeartbeatRequest:
    """I am alive in this generation."""

    API_KEY = ApiKey.HEARTBEAT

    group_id: str = ""
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(slots=True)
class HeartbeatResponse:
    """0, or REBALANCE_IN_PROGRESS (rejoin), ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID."""

    error_code: int = 0
    throttle_time_ms: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class LeaveGroupRequest:
    """Members leaving (v0-2 carry exactly one). v3+ may name a static member by its
    ``group_instance_ids`` entry (aligned with ``members``; empty: none), with an empty member id to
    remove it by instance id alone (KIP-345's administrative removal)."""

    API_KEY = ApiKey.LEAVE_GROUP

    group_id: str = ""
    members: list[str] = field(default_factory=list)
    reason: str | None = None
    group_instance_ids: list[str | None] = field(default_factory=list)

    def identities(self) -> list[tuple[str, str | None]]:
        """(member id, group instance id) of each leaving member."""
        if self.group_instance_ids and len(self.group_instance_ids) != len(self.members):
            raise ProtocolError(
                f"LeaveGroup names {len(self.members)} members but "
                f"{len(self.group_instance_ids)} instance ids"
            )
        return list(zip(self.members, self.group_instance_ids or [None] * len(self.members), strict=True))


@dataclass(slots=True)
class LeaveGroupMemberResponse:
    """Outcome for one leaving member (v3+)."""

    member_id: str
    error_code: int = 0
    group_instance_id: str | None = None


@dataclass(slots=True)
class LeaveGroupResponse:
    """Top-level error and, in v3+, one entry per member."""

    error_code: int = 0
    members: list[LeaveGroupMemberResponse] = field(default_factory=list)
    throttle_time_ms: int = 0
    error_message: str | None = None


# ------------------------------------------------------------------ DescribeGroups (15) / ListGroups (16)


@dataclass(slots=True)
class DescribeGroupsRequest:
    """Describe these groups."""

    API_KEY = ApiKey.DESCRIBE_GROUPS

    groups: list[str] = field(default_factory=list)
    include_authorized_operations: bool = False


@dataclass(slots=True)
class DescribedMember:
    """A member: ids, host, its subscription metadata and its assignment."""

    member_id: str
    client_id: str = ""
    client_host: str = ""
    metadata: bytes = b""
    assignment: bytes = b""
    group_instance_id: str | None = None


@dataclass(slots=True)
class DescribedGroup:
    """A group's state (Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead)."""

    group_id: str
    error_code: int = 0
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    members: list[DescribedMember] = field(default_factory=list)
    error_message: str | None = None
    #: v3+: bit set of the allowed AclOperation codes on the group; Int32.MinValue when not asked
    authorized_operations: int = -(1 << 31)


@dataclass(slots=True)
class DescribeGroupsResponse:
    """One entry per requested group."""

    groups: list[DescribedGroup] = field(default_factory=list)
    throttle_time_ms: int = 0


@dataclass(slots=True)
class ListGroupsRequest:
    """List groups, optionally only those in the given states (v4+) or types (v5+)."""

    API_KEY = ApiKey.LIST_GROUPS

    states_filter: list[str] = field(default_factory=list)
    types_filter: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ListedGroup:
    """A group id with its protocol type and state."""

    group_id: str
    protocol_type: str = ""
    state: str = ""
    group_type: str = "classic"


@dataclass(slots=True)
class ListGroupsResponse:
    """Every group the coordinator knows."""

    error_code: int = 0
    groups: list[ListedGroup] = field(default_factory=list)
    throttle_time_ms: int = 0
    error_message: str | None = None


# ------------------------------------------------------------------ consumer protocol (embedded bytes)


@dataclass(slots=True)
class Subscription:
    """A consumer's member metadata: its topics, and (v1+) the partitions it owns now."""

    topics: list[str] = field(default_factory=list)
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(slots=True)
class Assignment:
    """The partitions the leader gave a member."""

    partitions: list[TopicPartition] = field(default_factory=list)
    user_data: bytes | None = None


_MAX_EMBEDDED = 3
_SUB_CODECS = {v: Codec(CONSUMER_PROTOCOL_SUBSCRIPTION, v) for v in range(_MAX_EMBEDDED + 1)}
_ASSIGN_CODECS = {v: Codec(CONSUMER_PROTOCOL_ASSIGNMENT, v) for v in range(_MAX_EMBEDDED + 1)}


def _nest(tps: list[TopicPartition]) -> list[dict]:
    by: dict[str, list[int]] = {}
    for t, p in tps:
        by.setdefault(t, []).append(p)
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by.items())]


def _flat(entries: list[dict] | None) -> list[TopicPartition]:
    return [(e["topic"], p) for e in entries or () for p in e["partitions"]]


def _encode(codec: Codec, version: int, d: dict) -> bytes:
    w = Writer()
    w.i16(version)
    codec.write(w, d)
    return b"".join(bytes(x) for x in w.frame(b""))[4:]


def _decode(codecs: dict[int, Codec], data: bytes, what: str) -> dict:
    # Kafka reads a newer version with its newest format and ignores what follows (fields are only appended)
    r = Reader(data)
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"{what} has negative version {version}")
    return codecs[min(version, _MAX_EMBEDDED)].read(r)


def encode_subscription(s: Subscription, version: int = 1) -> bytes:
    """The subscription as JoinGroup protocol metadata (v1: with owned partitions)."""
    return _encode(
        _SUB_CODECS[version],
        version,
        {
            "topics": list(s.topics),
            "user_data": s.user_data,
            "owned_partitions": _nest(s.owned_partitions),
            "generation_id": s.generation_id,
            "rack_id": s.rack_id,
        },
    )


def decode_subscription(data: bytes) -> Subscription:
    """Parse member metadata (any version); raises ProtocolError if malformed."""
    d = _decode(_SUB_CODECS, data, "subscription")
    ud = d["user_data"]
    return Subscription(
        list(d["topics"]),
        None if ud is None else bytes(ud),
        _flat(d.get("owned_partitions")),
        d.get("generation_id", -1),
        d.get("rack_id"),
    )


def encode_assignment(a: Assignment, version: int = 1) -> bytes:
    """The assignment as SyncGroup bytes."""
    return _encode(
        _ASSIGN_CODECS[version],
        version,
        {"assigned_partitions": _nest(a.partitions), "user_data": a.user_data},
    )


def decode_assignment(data: bytes) -> Assignment:
    """Parse an assignment; empty bytes (no assignment) is an empty one."""
    if not data:
        return Assignment()
    d = _decode(_ASSIGN_CODECS, data, "assignment")
    ud = d["user_data"]
    return Assignment(_flat(d["assigned_partitions"]), None if ud is None else bytes(ud))
