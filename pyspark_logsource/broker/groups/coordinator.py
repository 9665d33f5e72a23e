"""The group coordinator: the entry points of Kafka's classic group membership protocol.

JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the commit checks arrive here; the
group's states, the rebalance and the members' session timers are
:class:`.rebalance.Rebalancer`'s (its module shows the state diagram). JoinGroup and
SyncGroup are answered late: a member's join waits on a future resolved when the
rebalance completes.

Static members (KIP-345, ``group.instance.id``) follow Kafka's GroupCoordinator: a known instance
joining with no member id takes over its old member (assignment included) under a new member id, and
the old id gets FENCED_INSTANCE_ID wherever it shows up with that instance id; in a Stable group whose
selected protocol stays the same this is answered at once, without a rebalance. A static member that
does not rejoin a rebalance stays a member until its session expires (dynamic ones are removed).

The assignment is computed by the group's leader (a client), never here: the
coordinator only picks the protocol all members support (by vote, as Kafka
does) and relays bytes. A group's membership is written to
``__consumer_offsets`` when it becomes Stable or Empty, so after a restart (or
at a new coordinator, in a cluster) the members can go on heartbeating the same
generation. In a cluster the group becomes Stable, and the members get their
assignments, only once that record is replicated (as Kafka's storeGroup); if it
is not, the syncs get the error and the group rebalances.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable

from ...errors import (
    CoordinatorNotAvailable,
    FencedInstanceId,
    GroupMaxSizeReached,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidGroupId,
    InvalidSessionTimeout,
    LogSourceError,
    MemberIdRequired,
    NonEmptyGroup,
    NotCoordinator,
    RebalanceInProgress,
    UnknownMemberId,
)
from ...protocol import group_messages as g
from ..tasks import spawn
from .membership import Group, GroupSettings, GroupState, Member, decode_record, subscription_topics
from .rebalance import Persist, Rebalancer, answer_parked, join_error

__all__ = ["Group", "GroupCoordinator", "GroupSettings", "GroupState", "Member"]

log = logging.getLogger(__name__)


class GroupCoordinator:
    """Every group of this broker; runs on one event loop.

    ``persist(group_id, value | None)`` stores a membership record durably; it returns None
    when the record is stored (a single broker), or an awaitable that completes when the
    ISR has it (a cluster; it raises if not). ``restored`` are the records read at startup.
    In a cluster a broker coordinates the groups of the offsets partitions it leads:
    :meth:`load` and :meth:`unload` follow its leadership.
    """

    def __init__(
        self,
        settings: GroupSettings | None = None,
        persist: Persist | None = None,
        restored: dict[str, bytes] | None = None,
    ) -> None:
        self.settings = settings or GroupSettings()
        self.groups: dict[str, Group] = {}
        self._restored = dict(restored or {})
        self._rebalance = Rebalancer(self.settings, persist, lambda grp: self.groups.get(grp.group_id) is grp)

    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._restored:  # timers need the running loop: restore on first use
            restored, self._restored = self._restored, {}
            for gid, value in restored.items():
                self._restore(gid, value)
        return loop

    # ------------------------------------------------------------ JoinGroup

    async def join(
        self,
        req: g.JoinGroupRequest,
        version: int,
        client_id: str = "",
        client_host: str = "",
    ) -> g.JoinGroupResponse:
        """Join or rejoin; resolves when the group's rebalance completes."""
        self._loop()
        s = self.settings
        if not req.group_id:
            raise InvalidGroupId("group id is empty")
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            raise InvalidSessionTimeout(
                f"session.timeout.ms={req.session_timeout_ms} is outside "
                f"[{s.min_session_timeout_ms}, {s.max_session_timeout_ms}]"
            )
        if not req.protocol_type or not req.protocols:
            raise InconsistentGroupProtocol("a join needs a protocol type and at least one protocol")
        grp = self.groups.get(req.group_id)
        if grp is None:
            if req.member_id:
                raise UnknownMemberId(f"group {req.group_id!r} has no member {req.member_id!r}")
            grp = self.groups[req.group_id] = Group(req.group_id)
        if grp.state == GroupState.DEAD:
            raise CoordinatorNotAvailable(f"group {req.group_id!r} is being removed")
        if grp.members and (
            grp.protocol_type != req.protocol_type
            or not self._rebalance.common_protocols(grp) & {p.name for p in req.protocols}
        ):
            raise InconsistentGroupProtocol(
                f"protocol type {req.protocol_type!r} or protocols "
                f"{[p.name for p in req.protocols]} do not match group {grp.group_id!r}"
            )
        rebalance_ms = req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms
        protocols = [(p.name, p.metadata) for p in req.protocols]
        mid, iid = req.member_id, req.group_instance_id
        if not mid:
            if len(grp.members) + len(grp.pending) >= s.max_size:
                raise GroupMaxSizeReached(f"group {grp.group_id!r} has {s.max_size} members")
            mid = f"{iid or client_id or 'member'}-{uuid.uuid4()}"
            if iid is not None and iid in grp.static:  # a known static member restarted
                known = grp.members[grp.static[iid]]
                return await self._static_rejoin(grp, known, mid, req, protocols, rebalance_ms, version)
            if version >= 4 and iid is None:
                # KIP-394: the id is handed out first, so a retried join cannot create a ghost member
                # (a static member needs no such round: its instance id identifies it)
                grp.pending.add(mid)
                return g.JoinGroupResponse(MemberIdRequired.code, member_id=mid)
        elif mid in grp.pending:
            if iid is not None and iid in grp.static:
                self._check_member(grp, mid, iid)  # fenced: the instance id belongs to another member
            grp.pending.discard(mid)
        else:
            self._check_member(grp, mid, iid)
        m = grp.members.get(mid)
        if m is None:
            m = Member(
                mid, client_id, client_host, req.session_timeout_ms, rebalance_ms, protocols, instance_id=iid
            )
            grp.add(m)
            grp.protocol_type = req.protocol_type
            grp.new_since_delay = True
            self._rebalance.arm_session(grp, m)
            changed = True
        else:
            changed = m.protocols != protocols
            m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = (
                protocols,
                req.session_timeout_ms,
                rebalance_ms,
            )
            if m.join is not None and not m.join.done():
                m.join.set_result(join_error(RebalanceInProgress("superseded by a newer join")))
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        m.join = fut
        if grp.state == GroupState.COMPLETING_REBALANCE and not changed:
            # it lost our answer: the same generation again
            fut.set_result(self._rebalance.join_response(grp, m))
        elif grp.state == GroupState.STABLE and not changed and mid != grp.leader:
            fut.set_result(self._rebalance.join_response(grp, m))
        elif grp.state == GroupState.PREPARING_REBALANCE:
            self._rebalance.try_complete_join(grp)
        else:
            self._rebalance.prepare(grp, f"member {mid} joined")
        return await fut

    async def _static_rejoin(
        self,
        grp: Group,
        m: Member,
        new_id: str,
        req: g.JoinGroupRequest,
        protocols: list[tuple[str, bytes]],
        rebalance_ms: int,
        version: int,
    ) -> g.JoinGroupResponse:
        """Kafka's updateStaticMemberAndRebalance: the restarted member takes over the known member
        (its assignment included) under a new member id, and the old id is fenced. In a Stable group
        whose selected protocol stays the same there is no rebalance: the member gets the current
        generation back and syncs for its old assignment."""
        leader_before = grp.leader
        fenced = FencedInstanceId(
            f"member {m.member_id} of group {grp.group_id!r} was replaced by {new_id} "
            f"with the same group.instance.id {m.instance_id!r}"
        )
        answer_parked(m, "join", join_error(fenced, m.member_id))
        answer_parked(m, "sync", g.SyncGroupResponse(fenced.code, error_message=str(fenced)))
        old_id = grp.rename(m, new_id)
        log.info(
            "group %s: static member %s rejoined as %s (was %s) in state %s",
            grp.group_id,
            m.instance_id,
            new_id,
            old_id,
            grp.state.value,
        )
        self._rebalance.arm_session(grp, m)
        before = (m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms)
        m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = (
            protocols,
            req.session_timeout_ms,
            rebalance_ms,
        )
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        m.join = fut
        if grp.state == GroupState.STABLE and self._rebalance.select_protocol(grp) == grp.protocol:
            # the new member id must survive a coordinator change
            pending = self._rebalance.store(grp, GroupState.STABLE)
            answer = self._static_join_response(grp, m, leader_before, version)
            if pending is None:
                fut.set_result(answer)
            else:
                spawn(
                    self._static_rejoin_stored(grp, m, old_id, before, answer, pending),
                    name="group-static-rejoin",
                )
        elif grp.state == GroupState.PREPARING_REBALANCE:
            self._rebalance.try_complete_join(grp)
        else:  # Stable with a new protocol, or CompletingRebalance: the leader may be assigning the old id
            self._rebalance.prepare(grp, f"static member {m.instance_id} rejoined as {new_id}")
        return await fut

    def _static_join_response(
        self, grp: Group, m: Member, leader_before: str | None, version: int
    ) -> g.JoinGroupResponse:
        # v9+ (KIP-814) tells a rejoining leader to skip the assignment; before, the old leader id is
        # returned so that the member does not think it leads (a Stable group ignores a new assignment)
        if version >= 9:
            leads = m.member_id == grp.leader
            return g.JoinGroupResponse(
                0,
                grp.generation,
                grp.protocol,
                grp.leader or "",
                m.member_id,
                Rebalancer.members_of(grp) if leads else [],
                grp.protocol_type,
                leads,
            )
        return g.JoinGroupResponse(
            0, grp.generation, grp.protocol, leader_before or "", m.member_id, [], grp.protocol_type
        )

    async def _static_rejoin_stored(
        self,
        grp: Group,
        m: Member,
        old_id: str,
        before: tuple[list[tuple[str, bytes]], int, int],
        answer: g.JoinGroupResponse,
        pending: Awaitable[None],
    ) -> None:
        """Cluster: the static rejoin is answered once the record with the new member id is replicated;
        if it is not, the replacement is undone and the join gets the error, as in Kafka."""
        error: LogSourceError | None = None
        try:
            await pending
        except LogSourceError as e:
            error = e
        except Exception:  # a bug: the member must not wait forever for it
            log.exception("group %s: storing the static rejoin of %s failed", grp.group_id, m.instance_id)
            error = CoordinatorNotAvailable("storing the group failed")  # the bug's text stays in the log
        fut = m.join
        if (
            self.groups.get(grp.group_id) is not grp
            or grp.members.get(answer.member_id) is not m
            or fut is None
            or fut.done()
        ):
            return  # a rebalance, a removal or an unload answered the join meanwhile
        if error is None:
            fut.set_result(answer)
            return
        log.warning(
            "group %s: static rejoin of %s not stored (%s); undone", grp.group_id, m.instance_id, error
        )
        m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = before
        grp.rename(m, old_id)
        self._rebalance.arm_session(grp, m)
        fut.set_result(join_error(error))

    def _check_member(self, grp: Group, member_id: str, instance_id: str | None) -> None:
        """Kafka's validateCurrentMember: a static member's instance id must map to this member id
        (FENCED_INSTANCE_ID if another member id took it over), and the member must exist."""
        if instance_id is not None:
            current = grp.static.get(instance_id)
            if current is None:
                raise UnknownMemberId(f"group {grp.group_id!r} has no static member {instance_id!r}")
            if current != member_id:
                raise FencedInstanceId(
                    f"member {member_id} of group {grp.group_id!r} is fenced: group.instance.id "
                    f"{instance_id!r} belongs to {current} now"
                )
        elif member_id not in grp.members:
            raise UnknownMemberId(f"group {grp.group_id!r} has no member {member_id!r}")

    # ------------------------------------------------------------ SyncGroup

    def _member(
        self, group_id: str, member_id: str, generation: int | None, instance_id: str | None = None
    ) -> tuple[Group, Member]:
        if not group_id:
            raise InvalidGroupId("group id is empty")
        grp = self.groups.get(group_id)
        if grp is None or grp.state == GroupState.DEAD:
            raise UnknownMemberId(f"group {group_id!r} has no member {member_id!r}")
        self._check_member(grp, member_id, instance_id)
        m = grp.members[member_id]
        if generation is not None and generation != grp.generation:
            raise IllegalGeneration(f"generation {generation} is not group {group_id!r}'s {grp.generation}")
        return grp, m

    async def sync(self, req: g.SyncGroupRequest) -> g.SyncGroupResponse:
        """The member's assignment; the leader's request carries everyone's."""
        self._loop()
        grp, m = self._member(req.group_id, req.member_id, req.generation_id, req.group_instance_id)
        if (req.protocol_type is not None and req.protocol_type != grp.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != grp.protocol
        ):
            raise InconsistentGroupProtocol(
                f"sync names {req.protocol_type}/{req.protocol_name}, the group "
                f"uses {grp.protocol_type}/{grp.protocol}"
            )
        if grp.state == GroupState.PREPARING_REBALANCE:
            raise RebalanceInProgress(f"group {grp.group_id!r} is rebalancing; rejoin")
        if grp.state == GroupState.STABLE:
            return self._rebalance.sync_response(grp, m)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        if m.sync is not None and not m.sync.done():
            m.sync.set_result(g.SyncGroupResponse(RebalanceInProgress.code))
        m.sync = fut
        self._rebalance.arm_session(grp, m)
        if m.member_id == grp.leader:
            for x in grp.members.values():
                x.assignment = req.assignments.get(x.member_id, b"")
            self._rebalance.complete_sync(grp)
        return await fut

    # ------------------------------------------------------------ Heartbeat, LeaveGroup, commits

    def heartbeat(self, req: g.HeartbeatRequest) -> g.HeartbeatResponse:
        """Keep the session alive; REBALANCE_IN_PROGRESS tells the member to rejoin."""
        self._loop()
        grp, m = self._member(req.group_id, req.member_id, req.generation_id, req.group_instance_id)
        self._rebalance.arm_session(grp, m)
        if grp.state == GroupState.PREPARING_REBALANCE:
            return g.HeartbeatResponse(RebalanceInProgress.code)
        return g.HeartbeatResponse()

    def leave(self, req: g.LeaveGroupRequest) -> g.LeaveGroupResponse:
        """Remove the members (per-member errors: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and rebalance
        the rest; a member named by its instance id alone (v3+, empty member id) is removed by it.
        The top-level error is 0, as Kafka's (the adapter moves the one member's error there before v3)."""
        self._loop()
        if not req.group_id:
            raise InvalidGroupId("group id is empty")
        grp = self.groups.get(req.group_id)
        out = []
        for mid, iid in req.identities():
            if grp is None or grp.state == GroupState.DEAD:
                code = UnknownMemberId.code
            elif not mid:  # an administrative removal by instance id
                current = grp.static.get(iid) if iid is not None else None
                code = UnknownMemberId.code if current is None else 0
                if current is not None:
                    self._rebalance.remove(grp, grp.members[current], "was removed by its group.instance.id")
            elif mid in grp.pending:
                grp.pending.discard(mid)
                code = 0
            else:
                try:
                    self._check_member(grp, mid, iid)
                except (UnknownMemberId, FencedInstanceId) as e:
                    code = e.code
                else:
                    code = 0
                    self._rebalance.remove(grp, grp.members[mid], "left the group")
            out.append(g.LeaveGroupMemberResponse(mid, code, iid))
        return g.LeaveGroupResponse(0, out)

    def validate_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None = None
    ) -> None:
        """Kafka's checks on an OffsetCommit; a commit with generation -1, no member id and no instance
        id is a "simple" commit (groupless consumers, Spark's lag commits, an admin's
        AlterConsumerGroupOffsets), accepted while the group has no members; into a group with members
        it is UnknownMemberId, as Kafka's validateOffsetCommit answers (only members move a live group's
        offsets)."""
        self._loop()
        grp = self.groups.get(group_id)
        if generation < 0 and not member_id and instance_id is None:
            if grp is not None and grp.members:
                raise UnknownMemberId(f"group {group_id!r} has members: a commit must name one")
            return
        if grp is None or not grp.members:
            raise IllegalGeneration(f"group {group_id!r} has no generation {generation}")
        if instance_id is not None:  # a fenced static member is told so whatever the group's state
            self._check_member(grp, member_id, instance_id)
        if grp.state == GroupState.COMPLETING_REBALANCE:
            raise RebalanceInProgress(f"group {group_id!r} is completing a rebalance")
        grp, m = self._member(group_id, member_id, generation, instance_id)
        self._rebalance.arm_session(grp, m)  # a commit shows the member is alive, as in Kafka

    # ------------------------------------------------------------ takeover and restore

    def load(self, restored: dict[str, bytes]) -> None:
        """Take over these groups (their last membership records): this broker now coordinates them."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._restored.update(restored)  # restored on first use, once the loop runs
            return
        for gid, value in restored.items():
            self._restore(gid, value)

    def unload(self, group_ids: set[str]) -> None:
        """Drop these groups (another broker coordinates them now): their parked joins and syncs are
        answered NotCoordinator, so the members find the new coordinator and rejoin there."""
        for gid in group_ids:
            self._restored.pop(gid, None)
            grp = self.groups.pop(gid, None)
            if grp is not None:
                self._rebalance.cancel(grp, NotCoordinator(f"group {gid!r} moved to another coordinator"))
        if group_ids:
            log.info("unloaded %d groups (coordinated elsewhere now)", len(group_ids))

    def _restore(self, gid: str, raw: bytes) -> None:
        try:
            grp = decode_record(gid, raw)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("group %s: unreadable membership record (%s); starting it empty", gid, e)
            return
        # members get a fresh session to find the restarted coordinator; the silent ones expire
        grp.state = GroupState.STABLE if grp.members else GroupState.EMPTY
        self.groups[gid] = grp
        for m in grp.members.values():
            self._rebalance.arm_session(grp, m)
        log.info("group %s: restored generation %d with %d members", gid, grp.generation, len(grp.members))

    # ------------------------------------------------------------ deletion (DeleteGroups, OffsetDelete)

    def remove_empty(self, group_id: str) -> bool:
        """DeleteGroups: forget the group's membership (it becomes Dead); NonEmptyGroup while it has members.
        Returns whether the coordinator had the group (its offsets are the offset store's)."""
        self._loop()
        grp = self.groups.get(group_id)
        if grp is None:
            return False
        if grp.members:
            raise NonEmptyGroup(f"group {group_id!r} has {len(grp.members)} members")
        grp.state = GroupState.DEAD
        self._rebalance.cancel(grp, CoordinatorNotAvailable(f"group {group_id!r} was deleted"))
        del self.groups[group_id]
        return True

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        """OffsetDelete: the topics the group's members subscribe to (consumer protocol), None when the
        group has no members (every offset may go); NonEmptyGroup for members of another protocol type,
        whose subscriptions the coordinator cannot read."""
        self._loop()
        grp = self.groups.get(group_id)
        if grp is None or not grp.members:
            return None
        if grp.protocol_type != "consumer":
            raise NonEmptyGroup(f"group {group_id!r} has members of protocol type {grp.protocol_type!r}")
        topics: set[str] = set()
        for m in grp.members.values():
            topics.update(subscription_topics(m.metadata(grp.protocol)))
        return topics

    # ------------------------------------------------------------ introspection

    def state_of(self, group_id: str) -> GroupState | None:
        """The group's state, or None if the coordinator has no such group."""
        self._loop()
        grp = self.groups.get(group_id)
        return None if grp is None else grp.state

    def describe(self, group_id: str) -> g.DescribedGroup | None:
        """DescribeGroups' entry for a group with membership, or None."""
        self._loop()
        grp = self.groups.get(group_id)
        if grp is None:
            return None
        stable = grp.state == GroupState.STABLE
        members = [
            g.DescribedMember(
                m.member_id,
                m.client_id,
                m.client_host,
                m.metadata(grp.protocol),
                m.assignment if stable else b"",
                m.instance_id,
            )
            for m in grp.members.values()
        ]
        return g.DescribedGroup(
            grp.group_id, 0, grp.state.value, grp.protocol_type or "", grp.protocol or "", members
        )

    def close(self) -> None:
        """Cancel every timer and answer every parked request (the broker is stopping)."""
        for grp in self.groups.values():
            self._rebalance.cancel(grp, CoordinatorNotAvailable("the coordinator is shutting down"))
