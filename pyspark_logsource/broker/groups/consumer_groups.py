"""KIP-848's consumer groups (``group.protocol=consumer``): the broker assigns, members reconcile.

A member heartbeats (ConsumerGroupHeartbeat) with its member epoch: 0 to join, -1 to leave, -2 for a
static member's leave (it keeps its assignment until its session expires or it comes back), else its
current epoch. The coordinator keeps, per group::

    group epoch        bumped when the membership, a subscription or a subscribed topic's partitions change
    target assignment  computed by a server assignor (:mod:`.server_assignors`) at each new group epoch
    member epoch       a member's, moved to the target's epoch once it has revoked what it must give up

Reconciliation follows Kafka's CurrentAssignmentBuilder: a member that owns partitions outside its target
is first told to revoke them (its epoch stays; state ``unrevoked_partitions``) and keeps them "owned" until a
heartbeat lists its owned partitions without them; then it moves to the target epoch and gets the target's
partitions that no other member owns any more (the rest later, state ``unreleased_partitions``). So no
partition is ever assigned to two members at once. Members learn of changes at their next heartbeat
(``group.consumer.heartbeat.interval.ms``); one that stays silent for ``group.consumer.session.timeout.ms``
is removed.

A group id belongs to one protocol: the classic coordinator's group is refused here (GROUP_ID_NOT_FOUND,
as Kafka answers), and the classic JoinGroup is refused for a group with consumer-protocol members
(INCONSISTENT_GROUP_PROTOCOL; :meth:`ConsumerGroups.has_members`).

Persisted: nothing of the membership (the committed offsets are the offset store's, shared by both
protocols). After a restart the members' heartbeats get UNKNOWN_MEMBER_ID and they rejoin with epoch 0;
the group epochs start again from 1.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ...errors import (
    FencedMemberEpoch,
    GroupIdNotFound,
    GroupMaxSizeReached,
    InvalidRequest,
    StaleMemberEpoch,
    UnknownMemberId,
    UnreleasedInstanceId,
    UnsupportedAssignor,
)
from ...protocol import consumer_group_messages as cg
from .server_assignors import ASSIGNORS, DEFAULT_ASSIGNOR, Target

log = logging.getLogger(__name__)

#: topic -> partitions
Partitions = dict[str, set[int]]

STABLE, UNREVOKED, UNRELEASED = "stable", "unrevoked_partitions", "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class ConsumerGroupSettings:
    """Kafka's group.consumer.* broker settings."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1


@dataclass(slots=True)
class ConsumerMember:
    """One member: what it subscribes to, its epoch and what it owns (``assigned``, and ``revoking``
    until it confirms the revocation)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed: list[str] = field(default_factory=list)
    regex: str | None = None
    assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: str = STABLE
    assigned: Partitions = field(default_factory=dict)
    revoking: Partitions = field(default_factory=dict)
    #: the assignment last sent, so that a heartbeat carries it only when it changed
    sent: Partitions | None = None
    #: a static member's leave (epoch -2): kept, with its assignment, until it returns or its session ends
    left_static: bool = False
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class ConsumerGroup:
    """A consumer-protocol group."""

    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    #: instance id -> member id
    static: dict[str, str] = field(default_factory=dict)
    target: Target = field(default_factory=dict)
    #: the subscribed topics' partition counts the target was computed from
    metadata: dict[str, int] = field(default_factory=dict)
    assignor: str = DEFAULT_ASSIGNOR

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroup states: Empty, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch != self.epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"


def _copy(p: Partitions) -> Partitions:
    return {t: set(ps) for t, ps in p.items() if ps}


def _minus(a: Partitions, b: Mapping[str, set[int]]) -> Partitions:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}


def _and(a: Partitions, b: Mapping[str, set[int]]) -> Partitions:
    return {t: ps & b.get(t, set()) for t, ps in a.items() if ps & b.get(t, set())}


def _union(a: Partitions, b: Partitions) -> Partitions:
    out = _copy(a)
    for t, ps in b.items():
        out.setdefault(t, set()).update(ps)
    return out


class ConsumerGroups:
    """Every consumer-protocol group of this broker; runs on one event loop.

    ``partitions()`` is topic -> partition count (the broker's topics); ``topic_id`` and ``topic_name``
    map names to the 16-byte topic ids of the wire and back; ``classic_in_use(group_id)`` says whether the
    classic coordinator has members in that group.
    """

    def __init__(
        self,
        settings: ConsumerGroupSettings,
        partitions: Callable[[], Mapping[str, int]],
        topic_id: Callable[[str], bytes],
        classic_in_use: Callable[[str], bool],
    ) -> None:
        self.settings = settings
        self.groups: dict[str, ConsumerGroup] = {}
        self._partitions = partitions
        self._topic_id = topic_id
        self._classic_in_use = classic_in_use

    # ------------------------------------------------------------ the heartbeat

    def heartbeat(
        self, req: cg.ConsumerGroupHeartbeatRequest, version: int, client_id: str = "", client_host: str = ""
    ) -> cg.ConsumerGroupHeartbeatResponse:
        """Join, stay or leave; the answer carries the member's epoch and, when it changed, its assignment."""
        self._validate(req, version)
        if self._classic_in_use(req.group_id):
            raise GroupIdNotFound(f"Group {req.group_id} is not a consumer group.")
        if req.member_epoch in (cg.LEAVE_EPOCH, cg.STATIC_LEAVE_EPOCH):
            return self._leave(req)
        grp = self.groups.get(req.group_id)
        if req.member_epoch == cg.JOIN_EPOCH:
            if grp is None:
                grp = self.groups[req.group_id] = ConsumerGroup(req.group_id)
            m = self._join(grp, req, client_id, client_host)
            joined = True
        else:
            if grp is None or req.member_id not in grp.members:
                raise UnknownMemberId(f"group {req.group_id!r} has no member {req.member_id!r}")
            m = grp.members[req.member_id]
            self._check_epoch(grp, m, req)
            joined = False
        self._update_subscription(grp, m, req)
        self._refresh_target(grp)
        self._reconcile(grp, m, req.owned)
        self._arm_session(grp, m)
        resp = cg.ConsumerGroupHeartbeatResponse(
            member_id=m.member_id,
            member_epoch=m.epoch,
            heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
        )
        if joined or req.owned is not None or m.sent != m.assigned:
            resp.assignment = {self._topic_id(t): sorted(ps) for t, ps in sorted(m.assigned.items()) if ps}
            m.sent = _copy(m.assigned)
        return resp

    def _validate(self, req: cg.ConsumerGroupHeartbeatRequest, version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        if not req.group_id:
            raise InvalidRequest("GroupId can't be empty.")
        if version >= 1 and not req.member_id:
            raise InvalidRequest("MemberId can't be empty.")
        if req.member_epoch == cg.JOIN_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise InvalidRequest("RebalanceTimeoutMs must be provided in first request.")
            if not req.subscribed_topic_names and not req.subscribed_topic_regex:
                raise InvalidRequest(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
                )
            if req.owned:
                raise InvalidRequest("TopicPartitions must be empty when (re-)joining.")
        elif req.member_epoch == cg.STATIC_LEAVE_EPOCH and req.instance_id is None:
            raise InvalidRequest("InstanceId can't be null when leaving with epoch -2.")
        elif req.member_epoch < cg.STATIC_LEAVE_EPOCH:
            raise InvalidRequest(f"MemberEpoch {req.member_epoch} is invalid.")
        elif not req.member_id and req.member_epoch != cg.JOIN_EPOCH:
            raise InvalidRequest("MemberId can't be empty.")
        if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
            raise UnsupportedAssignor(
                f"ServerAssignor {req.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(ASSIGNORS)}."
            )

    def _join(
        self, grp: ConsumerGroup, req: cg.ConsumerGroupHeartbeatRequest, client_id: str, client_host: str
    ) -> ConsumerMember:
        iid = req.instance_id
        if iid is not None and iid in grp.static:
            old = grp.members[grp.static[iid]]
            if not old.left_static and old.member_id != req.member_id:
                raise UnreleasedInstanceId(
                    f"Static member {old.member_id} with instance id {iid} is not released yet."
                )
            # a static member comes back: the new member id takes over its epoch and assignment
            self._forget(grp, old)
            m = ConsumerMember(req.member_id or str(uuid.uuid4()), iid, req.rack_id, client_id, client_host)
            m.epoch, m.previous_epoch, m.assigned = old.epoch, old.previous_epoch, _copy(old.assigned)
            m.revoking, m.state = _copy(old.revoking), old.state
            m.subscribed, m.regex, m.assignor = old.subscribed, old.regex, old.assignor
            grp.members[m.member_id] = m
            grp.static[iid] = m.member_id
            if old.member_id in grp.target:
                grp.target[m.member_id] = grp.target.pop(old.member_id)
            return m
        existing = grp.members.get(req.member_id) if req.member_id else None
        if existing is not None:  # it rejoins (it was fenced, or lost our answer): from scratch
            self._remove(grp, existing, "rejoined with epoch 0")
        elif len(grp.members) >= self.settings.max_size:
            raise GroupMaxSizeReached(
                f"The consumer group has reached its maximum capacity of {self.settings.max_size} members."
            )
        m = ConsumerMember(req.member_id or str(uuid.uuid4()), iid, req.rack_id, client_id, client_host)
        grp.members[m.member_id] = m
        if iid is not None:
            grp.static[iid] = m.member_id
        # the group epoch moves with its subscription (:meth:`_update_subscription`), once
        log.info("consumer group %s: member %s joined (group epoch %d)", grp.group_id, m.member_id, grp.epoch)
        return m

    def _check_epoch(
        self, grp: ConsumerGroup, m: ConsumerMember, req: cg.ConsumerGroupHeartbeatRequest
    ) -> None:
        """Kafka's throwIfMemberEpochIsInvalid: a newer epoch than the member's is fenced; an older one is
        accepted only if it is the previous epoch and the member owns no more than it is assigned (it lost
        our last answer)."""
        e = req.member_epoch
        if e > m.epoch:
            raise FencedMemberEpoch(
                f"The consumer group member has a greater member epoch ({e}) than the one known by the "
                f"group coordinator ({m.epoch}). The member must abandon all its partitions and rejoin."
            )
        if e < m.epoch:
            owned = req.owned
            subset = owned is not None and all(
                set(ps) <= m.assigned.get(self._name_of(tid), set()) for tid, ps in owned.items()
            )
            if e != m.previous_epoch or not subset:
                raise FencedMemberEpoch(
                    f"The consumer group member has a smaller member epoch ({e}) than the one known by the "
                    f"group coordinator ({m.epoch}). The member must abandon all its partitions and rejoin."
                )
        m.left_static = False

    def _update_subscription(
        self, grp: ConsumerGroup, m: ConsumerMember, req: cg.ConsumerGroupHeartbeatRequest
    ) -> None:
        changed = False
        if req.subscribed_topic_names is not None and sorted(req.subscribed_topic_names) != m.subscribed:
            m.subscribed, changed = sorted(set(req.subscribed_topic_names)), True
        if req.subscribed_topic_regex is not None and req.subscribed_topic_regex != m.regex:
            m.regex, changed = req.subscribed_topic_regex or None, True
        if req.server_assignor is not None and req.server_assignor != m.assignor:
            m.assignor, changed = req.server_assignor, True
        if req.rebalance_timeout_ms != -1:
            m.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if changed:
            grp.epoch += 1

    # ------------------------------------------------------------ the target assignment

    def _subscribed_topics(self, m: ConsumerMember, topics: Mapping[str, int]) -> set[str]:
        out = {t for t in m.subscribed if t in topics}
        if m.regex:
            import re  # only regex subscribers pay for it

            try:
                pattern = re.compile(m.regex)
            except re.error:
                return out
            out |= {t for t in topics if pattern.fullmatch(t) and not t.startswith("__")}
        return out

    def _refresh_target(self, grp: ConsumerGroup) -> None:
        """A new target when the group epoch moved, or when a subscribed topic appeared or grew."""
        topics = self._partitions()
        subs = {mid: self._subscribed_topics(m, topics) for mid, m in grp.members.items()}
        metadata = {t: topics[t] for s in subs.values() for t in s}
        if metadata != grp.metadata:
            grp.metadata = metadata
            if grp.assignment_epoch == grp.epoch:
                grp.epoch += 1
        if grp.assignment_epoch == grp.epoch:
            return
        grp.assignor = self._group_assignor(grp)
        current: Target = {mid: _union(m.assigned, m.revoking) for mid, m in grp.members.items()}
        grp.target = ASSIGNORS[grp.assignor](subs, metadata, current)
        grp.assignment_epoch = grp.epoch
        log.info(
            "consumer group %s: target assignment of epoch %d by %s: %s",
            grp.group_id,
            grp.epoch,
            grp.assignor,
            {mid: {t: sorted(ps) for t, ps in a.items()} for mid, a in grp.target.items()},
        )

    @staticmethod
    def _group_assignor(grp: ConsumerGroup) -> str:
        """The assignor most members ask for (Kafka's choice), else the default."""
        votes: dict[str, int] = {}
        for m in grp.members.values():
            if m.assignor:
                votes[m.assignor] = votes.get(m.assignor, 0) + 1
        return max(sorted(votes), key=lambda a: votes[a]) if votes else DEFAULT_ASSIGNOR

    # ------------------------------------------------------------ reconciliation

    def _name_of(self, tid: bytes) -> str:
        for t in self._partitions():
            if self._topic_id(t) == tid:
                return t
        return ""

    def _owned_by_others(self, grp: ConsumerGroup, mid: str) -> Partitions:
        out: Partitions = {}
        for other in grp.members.values():
            if other.member_id != mid:
                out = _union(out, _union(other.assigned, other.revoking))
        return out

    def _reconcile(self, grp: ConsumerGroup, m: ConsumerMember, owned: cg.Assignment | None) -> None:
        """Move the member one step towards its target: revocations first, then the new partitions that
        no other member still owns, then the target's epoch."""
        if m.revoking:
            if owned is None:
                return  # it has not told us it let them go
            still = {self._name_of(tid): set(ps) for tid, ps in owned.items()}
            if _and(m.revoking, still):
                return
            m.revoking = {}
        target = grp.target.get(m.member_id, {})
        revoke = _minus(m.assigned, target)
        if revoke:
            m.assigned = _and(m.assigned, target)
            m.revoking = revoke
            m.state = UNREVOKED
            return
        if m.epoch != grp.assignment_epoch:
            m.previous_epoch, m.epoch = m.epoch, grp.assignment_epoch
        wanted = _minus(target, m.assigned)
        taken = self._owned_by_others(grp, m.member_id)
        free = _minus(wanted, taken)
        m.assigned = _union(m.assigned, free)
        m.state = UNRELEASED if _minus(wanted, free) else STABLE

    # ------------------------------------------------------------ leaving and sessions

    def _leave(self, req: cg.ConsumerGroupHeartbeatRequest) -> cg.ConsumerGroupHeartbeatResponse:
        grp = self.groups.get(req.group_id)
        mid = req.member_id
        if grp is not None and req.instance_id is not None and req.instance_id in grp.static:
            mid = grp.static[req.instance_id]
        if grp is None or mid not in grp.members:
            raise UnknownMemberId(f"group {req.group_id!r} has no member {req.member_id!r}")
        m = grp.members[mid]
        if req.member_epoch == cg.STATIC_LEAVE_EPOCH:
            m.left_static = True  # its session timer goes on: it is removed if it does not come back
            log.info("consumer group %s: static member %s left temporarily", grp.group_id, mid)
        else:
            self._remove(grp, m, "left the group")
        return cg.ConsumerGroupHeartbeatResponse(
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
        )

    def _forget(self, grp: ConsumerGroup, m: ConsumerMember) -> None:
        if m.timer is not None:
            m.timer.cancel()
        grp.members.pop(m.member_id, None)
        if m.instance_id is not None and grp.static.get(m.instance_id) == m.member_id:
            del grp.static[m.instance_id]

    def _remove(self, grp: ConsumerGroup, m: ConsumerMember, why: str) -> None:
        self._forget(grp, m)
        grp.target.pop(m.member_id, None)
        grp.epoch += 1
        log.info(
            "consumer group %s: member %s %s (group epoch %d)", grp.group_id, m.member_id, why, grp.epoch
        )

    def _arm_session(self, grp: ConsumerGroup, m: ConsumerMember) -> None:
        if m.timer is not None:
            m.timer.cancel()
        m.timer = asyncio.get_running_loop().call_later(
            self.settings.session_timeout_ms / 1000, self._expire, grp, m
        )

    def _expire(self, grp: ConsumerGroup, m: ConsumerMember) -> None:
        if grp.members.get(m.member_id) is m:
            self._remove(grp, m, f"expired (no heartbeat for {self.settings.session_timeout_ms} ms)")

    # ------------------------------------------------------------ commits, introspection

    def has_members(self, group_id: str) -> bool:
        """Whether the group is a consumer-protocol group with members (a classic join is refused)."""
        grp = self.groups.get(group_id)
        return grp is not None and bool(grp.members)

    def validate_commit(self, group_id: str, member_id: str, member_epoch: int) -> bool:
        """Kafka's ConsumerGroup.validateOffsetCommit; False if this is not a consumer-protocol group (the
        classic coordinator decides). A commit with no member id and a negative epoch (an admin's, or a
        consumer outside the group) is accepted only while the group has no members."""
        grp = self.groups.get(group_id)
        if grp is None or not grp.members:
            return False
        if member_epoch < 0 and not member_id:
            raise UnknownMemberId(f"group {group_id!r} has members: a commit must name one")
        m = grp.members.get(member_id)
        if m is None:
            raise UnknownMemberId(f"group {group_id!r} has no member {member_id!r}")
        if member_epoch != m.epoch:
            raise StaleMemberEpoch(
                f"member {member_id} of group {group_id!r} committed with epoch {member_epoch}, "
                f"its epoch is {m.epoch}"
            )
        return True

    def describe(self, group_id: str) -> cg.DescribedConsumerGroup | None:
        """ConsumerGroupDescribe's entry, or None if there is no such consumer-protocol group."""
        grp = self.groups.get(group_id)
        if grp is None:
            return None

        def named(p: Partitions) -> cg.NamedAssignment:
            return {(self._topic_id(t), t): sorted(ps) for t, ps in sorted(p.items()) if ps}

        members = [
            cg.DescribedConsumerMember(
                m.member_id,
                m.epoch,
                m.client_id,
                m.client_host,
                m.instance_id,
                m.rack_id,
                list(m.subscribed),
                m.regex,
                named(m.assigned),
                named(grp.target.get(m.member_id, {})),
                0,  # 0: a consumer-protocol member (1 would be a classic one in a mixed group)
            )
            for m in grp.members.values()
        ]
        return cg.DescribedConsumerGroup(
            grp.group_id,
            group_state=grp.state,
            group_epoch=grp.epoch,
            assignment_epoch=grp.assignment_epoch,
            assignor_name=grp.assignor,
            members=members,
        )

    def close(self) -> None:
        """Cancel every session timer (the broker is stopping)."""
        for grp in self.groups.values():
            for m in grp.members.values():
                if m.timer is not None:
                    m.timer.cancel()
