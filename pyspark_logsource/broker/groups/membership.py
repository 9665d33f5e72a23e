"""A group's membership as the coordinator (:mod:`.coordinator`) keeps it, and the membership record
it writes to ``__consumer_offsets`` (JSON: the generation, the leader and every member with its
protocols, assignment and, for a static member, its ``group.instance.id``)."""

from __future__ import annotations

import asyncio
import json
import struct
from base64 import b64decode, b64encode
from dataclasses import dataclass, field
from enum import Enum


class GroupState(str, Enum):
    """Kafka's group states, with Kafka's names (shown by DescribeGroups and ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(eq=False)
class Member:
    """One member of a group and its pending join/sync answers; ``instance_id`` is set for a static
    member (KIP-345), whose member id changes each time it restarts."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    instance_id: str | None = None
    join: asyncio.Future | None = None
    sync: asyncio.Future | None = None
    timer: asyncio.TimerHandle | None = None

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for n, m in self.protocols if n == protocol), b"")


@dataclass(eq=False)
class Group:
    """A group's membership state."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # group.instance.id -> its current member id
    pending: set[str] = field(default_factory=set)  # v4+ ids handed out with MEMBER_ID_REQUIRED
    timer: asyncio.TimerHandle | None = None  # the rebalance deadline
    initial_until: float = 0.0  # loop time the initial delay may extend to (0: not in the initial delay)
    new_since_delay: bool = False

    def add(self, m: Member) -> None:
        """Add a member (and map its instance id, if static)."""
        self.members[m.member_id] = m
        if m.instance_id is not None:
            self.static[m.instance_id] = m.member_id

    def remove(self, m: Member) -> None:
        """Remove a member (and its instance id mapping)."""
        self.members.pop(m.member_id, None)
        if m.instance_id is not None and self.static.get(m.instance_id) == m.member_id:
            del self.static[m.instance_id]
        if self.leader == m.member_id:
            self.leader = None

    def rename(self, m: Member, new_id: str) -> str:
        """Give a static member a new member id in place (Kafka's replaceStaticMember); returns the old id."""
        old = m.member_id
        self.members = {(new_id if k == old else k): v for k, v in self.members.items()}
        m.member_id = new_id
        if m.instance_id is not None:
            self.static[m.instance_id] = new_id
        if self.leader == old:
            self.leader = new_id
        return old


@dataclass(frozen=True)
class GroupSettings:
    """The broker's group settings (``group.*`` in server.properties)."""

    initial_rebalance_delay_ms: int = 300
    min_session_timeout_ms: int = 500
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a consumer protocol subscription (Kafka's ConsumerProtocolSubscription: version
    int16, then an array of topic names, each an int16 length and UTF-8); [] if it does not parse."""
    try:
        (n,) = struct.unpack_from(">i", metadata, 2)
        pos, out = 6, []
        for _ in range(max(n, 0)):
            (size,) = struct.unpack_from(">h", metadata, pos)
            out.append(bytes(metadata[pos + 2 : pos + 2 + size]).decode())
            pos += 2 + size
        return out
    except (struct.error, UnicodeDecodeError):
        return []


def encode_record(grp: Group, state: GroupState) -> bytes:
    """The group's membership record as of ``state``."""
    value = {
        "protocol_type": grp.protocol_type,
        "generation": grp.generation,
        "protocol": grp.protocol,
        "leader": grp.leader,
        "state": state.value,
        "members": [
            {
                "id": m.member_id,
                "instance": m.instance_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "session": m.session_timeout_ms,
                "rebalance": m.rebalance_timeout_ms,
                "protocols": [[n, b64encode(md).decode()] for n, md in m.protocols],
                "assignment": b64encode(m.assignment).decode(),
            }
            for m in grp.members.values()
        ],
    }
    return json.dumps(value).encode()


def decode_record(gid: str, raw: bytes) -> Group:
    """A group from its membership record (no timers armed, state as stored); raises ValueError,
    KeyError or TypeError if the record is unreadable. Records written before static membership
    have no ``instance``: their members are dynamic."""
    v = json.loads(raw)
    grp = Group(
        gid,
        generation=int(v["generation"]),
        protocol_type=v["protocol_type"],
        protocol=v["protocol"],
        leader=v["leader"],
    )
    for x in v["members"]:
        grp.add(
            Member(
                x["id"],
                x["client_id"],
                x["host"],
                int(x["session"]),
                int(x["rebalance"]),
                [(n, b64decode(md)) for n, md in x["protocols"]],
                b64decode(x["assignment"]),
                x.get("instance"),
            )
        )
    return grp
