"""The group coordinator: Kafka's classic group membership protocol as a state machine.

States (Kafka's names)::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance ──leader's sync──▶ Stable
      ▲                 ▲   (members that did not rejoin are removed)                                  │
      └── last member leaves or expires ◀───────────── join, leave, session expiry, new metadata ◀─────┘

JoinGroup and SyncGroup are answered late: a member's join waits on a future
resolved when the rebalance completes (when every known member has rejoined,
or after the longest ``rebalance.timeout.ms``; an empty group first waits
``group.initial.rebalance.delay.ms`` for more members, extended per newcomer,
so a group started together forms in one generation). Every member has a
session timer on the event loop (``loop.call_later``, re-armed by heartbeats
and commits); when it fires the member is removed and the group rebalances.
A member that is waiting in JoinGroup or SyncGroup is kept alive, as in Kafka.

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
import json
import logging
import uuid
from base64 import b64decode, b64encode
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ...errors import (
    CoordinatorNotAvailable,
    GroupMaxSizeReached,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidGroupId,
    InvalidSessionTimeout,
    LogSourceError,
    MemberIdRequired,
    NotCoordinator,
    RebalanceInProgress,
    UnknownMemberId,
    code_of,
)
from ...protocol import group_messages as g

log = logging.getLogger(__name__)


class GroupState(str, Enum):
    """Kafka's group states, with Kafka's names (shown by DescribeGroups and ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(eq=False)
class Member:
    """One member of a group and its pending join/sync answers."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
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
    pending: set[str] = field(default_factory=set)  # v4+ ids handed out with MEMBER_ID_REQUIRED
    timer: asyncio.TimerHandle | None = None  # the rebalance deadline
    initial_until: float = 0.0  # loop time the initial delay may extend to (0: not in the initial delay)
    new_since_delay: bool = False


@dataclass(frozen=True)
class GroupSettings:
    """The broker's group settings (``group.*`` in server.properties)."""

    initial_rebalance_delay_ms: int = 300
    min_session_timeout_ms: int = 500
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1


class GroupCoordinator:
    """Every group of this broker; runs on one event loop.

    ``persist(group_id, value | None)`` stores a membership record durably; it returns None
    when the record is stored (a single broker), or an awaitable that completes when the
    ISR has it (a cluster; it raises if not). ``restored`` are the records read at startup.
    In a cluster a broker coordinates the groups of the offsets partitions it leads:
    :meth:`load` and :meth:`unload` follow its leadership.
    """

    def __init__(self, settings: GroupSettings | None = None,
                 persist: Callable[[str, bytes | None], Awaitable[None] | None] | None = None,
                 restored: dict[str, bytes] | None = None) -> None:  # fmt: skip
        self.settings = settings or GroupSettings()
        self.groups: dict[str, Group] = {}
        self._persist = persist
        self._tasks: set[asyncio.Task] = set()  # membership writes waiting for the ISR
        self._restored = dict(restored or {})

    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._restored:  # timers need the running loop: restore on first use
            restored, self._restored = self._restored, {}
            for gid, value in restored.items():
                self._restore(gid, value)
        return loop

    # ------------------------------------------------------------ JoinGroup

    async def join(self, req: g.JoinGroupRequest, version: int, client_id: str = "", client_host: str = "",
                   ) -> g.JoinGroupResponse:  # fmt: skip
        """Join or rejoin; resolves when the group's rebalance completes."""
        self._loop()
        s = self.settings
        if not req.group_id:
            raise InvalidGroupId("group id is empty")
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            raise InvalidSessionTimeout(f"session.timeout.ms={req.session_timeout_ms} is outside "
                                        f"[{s.min_session_timeout_ms}, {s.max_session_timeout_ms}]")  # fmt: skip
        if not req.protocol_type or not req.protocols:
            raise InconsistentGroupProtocol("a join needs a protocol type and at least one protocol")
        grp = self.groups.get(req.group_id)
        if grp is None:
            if req.member_id:
                raise UnknownMemberId(f"group {req.group_id!r} has no member {req.member_id!r}")
            grp = self.groups[req.group_id] = Group(req.group_id)
        if grp.state == GroupState.DEAD:
            raise CoordinatorNotAvailable(f"group {req.group_id!r} is being removed")
        if grp.members and (grp.protocol_type != req.protocol_type
                            or not self._common(grp) & {p.name for p in req.protocols}):  # fmt: skip
            raise InconsistentGroupProtocol(f"protocol type {req.protocol_type!r} or protocols "
                                            f"{[p.name for p in req.protocols]} do not match group {grp.group_id!r}")  # fmt: skip
        rebalance_ms = req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms
        protocols = [(p.name, p.metadata) for p in req.protocols]
        mid = req.member_id
        if not mid:
            if len(grp.members) + len(grp.pending) >= s.max_size:
                raise GroupMaxSizeReached(f"group {grp.group_id!r} has {s.max_size} members")
            mid = f"{client_id or 'member'}-{uuid.uuid4()}"
            if version >= 4:
                # KIP-394: the id is handed out first, so a retried join cannot create a ghost member
                grp.pending.add(mid)
                return g.JoinGroupResponse(MemberIdRequired.code, member_id=mid)
        elif mid in grp.pending:
            grp.pending.discard(mid)
        elif mid not in grp.members:
            raise UnknownMemberId(f"group {grp.group_id!r} has no member {mid!r}")
        m = grp.members.get(mid)
        if m is None:
            m = grp.members[mid] = Member(mid, client_id, client_host, req.session_timeout_ms, rebalance_ms, protocols)
            grp.protocol_type = req.protocol_type
            grp.new_since_delay = True
            self._arm_session(grp, m)
            changed = True
        else:
            changed = m.protocols != protocols
            m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms = protocols, req.session_timeout_ms, rebalance_ms
            if m.join is not None and not m.join.done():
                m.join.set_result(self._join_error(RebalanceInProgress("superseded by a newer join")))
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        m.join = fut
        if grp.state == GroupState.COMPLETING_REBALANCE and not changed:
            fut.set_result(self._join_response(grp, m))  # it lost our answer: the same generation again
        elif grp.state == GroupState.STABLE and not changed and mid != grp.leader:
            fut.set_result(self._join_response(grp, m))
        elif grp.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(grp)
        else:
            self._prepare_rebalance(grp, f"member {mid} joined")
        return await fut

    def _common(self, grp: Group) -> set[str]:
        sets = [{n for n, _ in m.protocols} for m in grp.members.values()]
        return set.intersection(*sets) if sets else set()

    def _prepare_rebalance(self, grp: Group, why: str) -> None:
        loop = asyncio.get_running_loop()
        if grp.state == GroupState.COMPLETING_REBALANCE:
            for m in grp.members.values():  # their syncs belong to a generation that will not be
                m.assignment = b""
                _answer(m, "sync", g.SyncGroupResponse(RebalanceInProgress.code))
        was_empty = grp.state == GroupState.EMPTY
        grp.state = GroupState.PREPARING_REBALANCE
        log.info("group %s: preparing rebalance (generation %d): %s", grp.group_id, grp.generation, why)
        if grp.timer is not None:
            grp.timer.cancel()
        delay = self.settings.initial_rebalance_delay_ms / 1000
        if was_empty and delay > 0:
            longest = max(m.rebalance_timeout_ms for m in grp.members.values()) / 1000
            grp.initial_until = loop.time() + max(delay, longest)
            grp.new_since_delay = False
            grp.timer = loop.call_later(delay, self._on_initial_delay, grp)
        else:
            grp.initial_until = 0.0
            longest = max((m.rebalance_timeout_ms for m in grp.members.values()), default=0) / 1000
            grp.timer = loop.call_later(longest, self._complete_join, grp)
            self._try_complete_join(grp)

    def _on_initial_delay(self, grp: Group) -> None:
        loop = asyncio.get_running_loop()
        delay = self.settings.initial_rebalance_delay_ms / 1000
        if grp.new_since_delay and loop.time() + delay <= grp.initial_until:
            grp.new_since_delay = False  # newcomers keep arriving: wait one more delay for the rest
            grp.timer = loop.call_later(delay, self._on_initial_delay, grp)
            return
        grp.initial_until = 0.0
        self._complete_join(grp)

    def _try_complete_join(self, grp: Group) -> None:
        if grp.state != GroupState.PREPARING_REBALANCE or grp.initial_until:
            return
        if all(m.join is not None and not m.join.done() for m in grp.members.values()):
            self._complete_join(grp)

    def _complete_join(self, grp: Group) -> None:
        if grp.state != GroupState.PREPARING_REBALANCE:
            return
        if grp.timer is not None:
            grp.timer.cancel()
            grp.timer = None
        grp.initial_until = 0.0
        for m in [m for m in grp.members.values() if m.join is None or m.join.done()]:
            log.info("group %s: member %s did not rejoin within the rebalance timeout; removed", grp.group_id,
                     m.member_id)  # fmt: skip
            self._drop(grp, m)
        grp.pending.clear()
        grp.generation += 1
        if not grp.members:
            self._to_empty(grp)
            return
        grp.protocol = self._select_protocol(grp)
        if grp.leader not in grp.members:
            grp.leader = next(iter(grp.members))
        grp.state = GroupState.COMPLETING_REBALANCE
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", grp.group_id, grp.generation,
                 len(grp.members), grp.protocol, grp.leader)  # fmt: skip
        for m in grp.members.values():
            self._arm_session(grp, m)
            _answer(m, "join", self._join_response(grp, m))

    def _select_protocol(self, grp: Group) -> str:
        common = self._common(grp)
        votes: dict[str, int] = {}
        for m in grp.members.values():
            choice = next(n for n, _ in m.protocols if n in common)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda n: votes[n])

    def _join_response(self, grp: Group, m: Member) -> g.JoinGroupResponse:
        members = []
        if m.member_id == grp.leader:
            members = [g.JoinGroupMember(x.member_id, x.metadata(grp.protocol)) for x in grp.members.values()]
        return g.JoinGroupResponse(0, grp.generation, grp.protocol, grp.leader or "", m.member_id, members,
                                   grp.protocol_type)  # fmt: skip

    @staticmethod
    def _join_error(e: LogSourceError, member_id: str = "") -> g.JoinGroupResponse:
        return g.JoinGroupResponse(code_of(e), member_id=member_id, error_message=str(e))

    # ------------------------------------------------------------ SyncGroup

    def _member(self, group_id: str, member_id: str, generation: int | None) -> tuple[Group, Member]:
        if not group_id:
            raise InvalidGroupId("group id is empty")
        grp = self.groups.get(group_id)
        if grp is None or grp.state == GroupState.DEAD:
            raise UnknownMemberId(f"group {group_id!r} has no member {member_id!r}")
        m = grp.members.get(member_id)
        if m is None:
            raise UnknownMemberId(f"group {group_id!r} has no member {member_id!r}")
        if generation is not None and generation != grp.generation:
            raise IllegalGeneration(f"generation {generation} is not group {group_id!r}'s {grp.generation}")
        return grp, m

    async def sync(self, req: g.SyncGroupRequest) -> g.SyncGroupResponse:
        """The member's assignment; the leader's request carries everyone's."""
        self._loop()
        grp, m = self._member(req.group_id, req.member_id, req.generation_id)
        if (req.protocol_type is not None and req.protocol_type != grp.protocol_type) or (
                req.protocol_name is not None and req.protocol_name != grp.protocol):  # fmt: skip
            raise InconsistentGroupProtocol(f"sync names {req.protocol_type}/{req.protocol_name}, the group "
                                            f"uses {grp.protocol_type}/{grp.protocol}")  # fmt: skip
        if grp.state == GroupState.PREPARING_REBALANCE:
            raise RebalanceInProgress(f"group {grp.group_id!r} is rebalancing; rejoin")
        if grp.state == GroupState.STABLE:
            return self._sync_response(grp, m)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        if m.sync is not None and not m.sync.done():
            m.sync.set_result(g.SyncGroupResponse(RebalanceInProgress.code))
        m.sync = fut
        self._arm_session(grp, m)
        if m.member_id == grp.leader:
            for x in grp.members.values():
                x.assignment = req.assignments.get(x.member_id, b"")
            pending = self._store(grp, GroupState.STABLE)
            if pending is None:
                self._to_stable(grp)
            else:
                self._spawn(self._stable_once_stored(grp, grp.generation, pending))
        return await fut

    def _to_stable(self, grp: Group) -> None:
        grp.state = GroupState.STABLE
        log.info("group %s: generation %d is stable", grp.group_id, grp.generation)
        for x in grp.members.values():
            _answer(x, "sync", self._sync_response(grp, x))

    async def _stable_once_stored(self, grp: Group, generation: int, pending: Awaitable[None]) -> None:
        """Cluster: the assignments go out once the membership record is replicated; if it is not, the
        members get the error (NotCoordinator, CoordinatorNotAvailable: they find the coordinator again)
        and the group rebalances, as in Kafka."""
        error: LogSourceError | None = None
        try:
            await pending
        except LogSourceError as e:
            error = e
        except Exception as e:  # a bug: the members must not wait forever for it
            log.exception("group %s: storing generation %d failed", grp.group_id, generation)
            error = CoordinatorNotAvailable(f"storing the group failed: {e!r}")
        if (self.groups.get(grp.group_id) is not grp or grp.state != GroupState.COMPLETING_REBALANCE
                or grp.generation != generation):  # fmt: skip
            return  # a rebalance or an unload answered the syncs meanwhile
        if error is None:
            self._to_stable(grp)
            return
        log.warning("group %s: generation %d not stored (%s); rebalancing", grp.group_id, generation, error)
        for x in grp.members.values():
            x.assignment = b""
            _answer(x, "sync", g.SyncGroupResponse(code_of(error), error_message=str(error)))
        self._prepare_rebalance(grp, "its membership record was not replicated")

    @staticmethod
    def _sync_response(grp: Group, m: Member) -> g.SyncGroupResponse:
        return g.SyncGroupResponse(0, m.assignment, grp.protocol_type, grp.protocol)

    # ------------------------------------------------------------ Heartbeat, LeaveGroup, commits

    def heartbeat(self, req: g.HeartbeatRequest) -> g.HeartbeatResponse:
        """Keep the session alive; REBALANCE_IN_PROGRESS tells the member to rejoin."""
        self._loop()
        grp, m = self._member(req.group_id, req.member_id, req.generation_id)
        self._arm_session(grp, m)
        if grp.state == GroupState.PREPARING_REBALANCE:
            return g.HeartbeatResponse(RebalanceInProgress.code)
        return g.HeartbeatResponse()

    def leave(self, req: g.LeaveGroupRequest) -> g.LeaveGroupResponse:
        """Remove the members (per-member errors) and rebalance the rest."""
        self._loop()
        if not req.group_id:
            raise InvalidGroupId("group id is empty")
        grp = self.groups.get(req.group_id)
        out = []
        for mid in req.members:
            if grp is not None and mid in grp.pending:
                grp.pending.discard(mid)
                out.append(g.LeaveGroupMemberResponse(mid))
            elif grp is None or mid not in grp.members:
                out.append(g.LeaveGroupMemberResponse(mid, UnknownMemberId.code))
            else:
                self._remove(grp, grp.members[mid], "left the group")
                out.append(g.LeaveGroupMemberResponse(mid))
        top = out[0].error_code if len(out) == 1 else 0
        return g.LeaveGroupResponse(top, out)

    def validate_commit(self, group_id: str, generation: int, member_id: str) -> None:
        """Kafka's checks on an OffsetCommit; a commit with generation -1 and no member id is a
        "simple" commit (groupless consumers, Spark's lag commits) and is always accepted."""
        self._loop()
        if generation < 0 and not member_id:
            return
        grp = self.groups.get(group_id)
        if grp is None or not grp.members:
            raise IllegalGeneration(f"group {group_id!r} has no generation {generation}")
        if grp.state == GroupState.COMPLETING_REBALANCE:
            raise RebalanceInProgress(f"group {group_id!r} is completing a rebalance")
        grp, m = self._member(group_id, member_id, generation)
        self._arm_session(grp, m)  # a commit shows the member is alive, as in Kafka

    # ------------------------------------------------------------ members leaving and expiring

    def _arm_session(self, grp: Group, m: Member) -> None:
        if m.timer is not None:
            m.timer.cancel()
        m.timer = asyncio.get_running_loop().call_later(m.session_timeout_ms / 1000, self._expire, grp, m)

    def _expire(self, grp: Group, m: Member) -> None:
        if grp.members.get(m.member_id) is not m:
            return
        if (m.join is not None and not m.join.done()) or (m.sync is not None and not m.sync.done()):
            self._arm_session(grp, m)  # parked in JoinGroup/SyncGroup: it is waiting on us, not dead
            return
        log.info("group %s: member %s missed its session timeout (%d ms)", grp.group_id, m.member_id,
                 m.session_timeout_ms)  # fmt: skip
        self._remove(grp, m, "session timeout expired")

    def _drop(self, grp: Group, m: Member) -> None:
        if m.timer is not None:
            m.timer.cancel()
        grp.members.pop(m.member_id, None)
        err = UnknownMemberId(f"member {m.member_id} was removed from group {grp.group_id!r}")
        _answer(m, "join", self._join_error(err))
        _answer(m, "sync", g.SyncGroupResponse(err.code, error_message=str(err)))
        if grp.leader == m.member_id:
            grp.leader = None

    def _remove(self, grp: Group, m: Member, why: str) -> None:
        self._drop(grp, m)
        if grp.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(grp, f"member {m.member_id} {why}")
        elif grp.state == GroupState.PREPARING_REBALANCE:
            if not grp.members and not grp.initial_until:
                self._complete_join(grp)
            else:
                self._try_complete_join(grp)

    def _to_empty(self, grp: Group) -> None:
        grp.state, grp.leader, grp.protocol = GroupState.EMPTY, None, None
        log.info("group %s: empty (generation %d)", grp.group_id, grp.generation)
        pending = self._store(grp, GroupState.EMPTY)
        if pending is not None:
            self._spawn(self._log_failure(grp.group_id, pending))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        # the loop keeps only weak references to tasks: hold them until done
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _log_failure(group_id: str, pending: Awaitable[None]) -> None:
        try:
            await pending
        except LogSourceError as e:  # the next rebalance writes the group again
            log.warning("group %s: empty membership record not stored: %s", group_id, e)

    # ------------------------------------------------------------ persistence

    def _store(self, grp: Group, state: GroupState) -> Awaitable[None] | None:
        """Write the group's membership as of ``state``; None when stored, else what to await."""
        if self._persist is None:
            return None
        value = {"protocol_type": grp.protocol_type, "generation": grp.generation, "protocol": grp.protocol,
                 "leader": grp.leader, "state": state.value,
                 "members": [{"id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                              "session": m.session_timeout_ms, "rebalance": m.rebalance_timeout_ms,
                              "protocols": [[n, b64encode(md).decode()] for n, md in m.protocols],
                              "assignment": b64encode(m.assignment).decode()} for m in grp.members.values()]}  # fmt: skip
        try:
            return self._persist(grp.group_id, json.dumps(value).encode())
        except LogSourceError as e:  # the offsets log is unwritable: membership still works in memory
            log.warning("group %s: cannot persist membership: %s", grp.group_id, e)
            return None

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
                self._cancel(grp, NotCoordinator(f"group {gid!r} moved to another coordinator"))
        if group_ids:
            log.info("unloaded %d groups (coordinated elsewhere now)", len(group_ids))

    def _restore(self, gid: str, raw: bytes) -> None:
        try:
            v = json.loads(raw)
            grp = Group(gid, generation=int(v["generation"]), protocol_type=v["protocol_type"],
                        protocol=v["protocol"], leader=v["leader"])  # fmt: skip
            for x in v["members"]:
                grp.members[x["id"]] = Member(x["id"], x["client_id"], x["host"], int(x["session"]),
                                              int(x["rebalance"]), [(n, b64decode(md)) for n, md in x["protocols"]],
                                              b64decode(x["assignment"]))  # fmt: skip
        except (ValueError, KeyError, TypeError) as e:
            log.warning("group %s: unreadable membership record (%s); starting it empty", gid, e)
            return
        # members get a fresh session to find the restarted coordinator; the silent ones expire
        grp.state = GroupState.STABLE if grp.members else GroupState.EMPTY
        self.groups[gid] = grp
        for m in grp.members.values():
            self._arm_session(grp, m)
        log.info("group %s: restored generation %d with %d members", gid, grp.generation, len(grp.members))

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
        members = [g.DescribedMember(m.member_id, m.client_id, m.client_host, m.metadata(grp.protocol),
                                     m.assignment if stable else b"") for m in grp.members.values()]  # fmt: skip
        return g.DescribedGroup(grp.group_id, 0, grp.state.value, grp.protocol_type or "", grp.protocol or "", members)

    def close(self) -> None:
        """Cancel every timer and answer every parked request (the broker is stopping)."""
        for grp in self.groups.values():
            self._cancel(grp, CoordinatorNotAvailable("the coordinator is shutting down"))

    def _cancel(self, grp: Group, err: LogSourceError) -> None:
        if grp.timer is not None:
            grp.timer.cancel()
        for m in grp.members.values():
            if m.timer is not None:
                m.timer.cancel()
            _answer(m, "join", self._join_error(err))
            _answer(m, "sync", g.SyncGroupResponse(err.code))


def _answer(m: Member, which: str, resp: object) -> None:
    fut = getattr(m, which)
    if fut is not None and not fut.done():
        fut.set_result(resp)
