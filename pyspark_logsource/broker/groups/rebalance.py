"""The rebalance state machine of a group (Kafka's classic protocol), and the members' sessions.

States (Kafka's names)::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance ──leader's sync──▶ Stable
      ▲                 ▲   (members that did not rejoin are removed)                                  │
      └── last member leaves or expires ◀───────────── join, leave, session expiry, new metadata ◀─────┘

A rebalance completes when every known member has rejoined, or after the longest
``rebalance.timeout.ms``; an empty group first waits ``group.initial.rebalance.delay.ms``
for more members, extended per newcomer, so a group started together forms in one
generation. Every member has a session timer on the event loop (``loop.call_later``,
re-armed by heartbeats and commits); when it fires the member is removed and the group
rebalances. A member that is waiting in JoinGroup or SyncGroup is kept alive, as in Kafka.
Static members that do not rejoin a rebalance stay until their session expires.

:class:`Rebalancer` owns these transitions, the timers and the membership records it
writes (through ``persist``); the request entry points are :mod:`.coordinator`'s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ...errors import CoordinatorNotAvailable, LogSourceError, RebalanceInProgress, UnknownMemberId
from ...protocol import group_messages as g
from ..error_responses import error_fields
from ..tasks import spawn
from .membership import Group, GroupSettings, GroupState, Member, encode_record

log = logging.getLogger(__name__)

Persist = Callable[[str, bytes | None], Awaitable[None] | None]


class Rebalancer:
    """Moves groups through their states; runs on the event loop.

    ``persist`` is :class:`.coordinator.GroupCoordinator`'s (None: membership is kept in memory
    only); ``is_current(group)`` says whether the coordinator still holds that group object, so
    that a record replicated after an unload or a removal answers nobody.
    """

    def __init__(
        self, settings: GroupSettings, persist: Persist | None, is_current: Callable[[Group], bool]
    ) -> None:
        self._settings = settings
        self._persist = persist
        self._is_current = is_current

    def common_protocols(self, grp: Group) -> set[str]:
        """The protocols every member supports."""
        sets = [{n for n, _ in m.protocols} for m in grp.members.values()]
        return set.intersection(*sets) if sets else set()

    def prepare(self, grp: Group, why: str) -> None:
        """Start a rebalance: PreparingRebalance, with the initial delay if the group was Empty."""
        loop = asyncio.get_running_loop()
        if grp.state == GroupState.COMPLETING_REBALANCE:
            for m in grp.members.values():  # their syncs belong to a generation that will not be
                m.assignment = b""
                answer_parked(m, "sync", g.SyncGroupResponse(RebalanceInProgress.code))
        was_empty = grp.state == GroupState.EMPTY
        grp.state = GroupState.PREPARING_REBALANCE
        log.info("group %s: preparing rebalance (generation %d): %s", grp.group_id, grp.generation, why)
        if grp.timer is not None:
            grp.timer.cancel()
        delay = self._settings.initial_rebalance_delay_ms / 1000
        if was_empty and delay > 0:
            longest = max(m.rebalance_timeout_ms for m in grp.members.values()) / 1000
            grp.initial_until = loop.time() + max(delay, longest)
            grp.new_since_delay = False
            grp.timer = loop.call_later(delay, self._on_initial_delay, grp)
        else:
            grp.initial_until = 0.0
            longest = max((m.rebalance_timeout_ms for m in grp.members.values()), default=0) / 1000
            grp.timer = loop.call_later(longest, self._complete_join, grp)
            self.try_complete_join(grp)

    def _on_initial_delay(self, grp: Group) -> None:
        loop = asyncio.get_running_loop()
        delay = self._settings.initial_rebalance_delay_ms / 1000
        if grp.new_since_delay and loop.time() + delay <= grp.initial_until:
            grp.new_since_delay = False  # newcomers keep arriving: wait one more delay for the rest
            grp.timer = loop.call_later(delay, self._on_initial_delay, grp)
            return
        grp.initial_until = 0.0
        self._complete_join(grp)

    def try_complete_join(self, grp: Group) -> None:
        """Complete the join phase if every member has rejoined (and no initial delay runs)."""
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
        # static members that did not rejoin stay (as in Kafka): only their session timeout removes them
        for m in [
            m for m in grp.members.values() if (m.join is None or m.join.done()) and m.instance_id is None
        ]:
            log.info(
                "group %s: member %s did not rejoin within the rebalance timeout; removed",
                grp.group_id,
                m.member_id,
            )
            self._drop(grp, m)
        joined = [m.member_id for m in grp.members.values() if m.join is not None and not m.join.done()]
        if grp.members and not joined:
            # only absent static members: wait another rebalance timeout, until their sessions expire
            log.info("group %s: no member rejoined; waiting for the static members' sessions", grp.group_id)
            longest = max(m.rebalance_timeout_ms for m in grp.members.values()) / 1000
            grp.timer = asyncio.get_running_loop().call_later(longest, self._complete_join, grp)
            return
        grp.pending.clear()
        grp.generation += 1
        if not grp.members:
            self._to_empty(grp)
            return
        grp.protocol = self.select_protocol(grp)
        if grp.leader not in joined:  # Kafka's maybeElectNewJoinedLeader
            grp.leader = joined[0]
        grp.state = GroupState.COMPLETING_REBALANCE
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            grp.group_id,
            grp.generation,
            len(grp.members),
            grp.protocol,
            grp.leader,
        )
        for m in grp.members.values():
            self.arm_session(grp, m)
            answer_parked(m, "join", self.join_response(grp, m))

    def select_protocol(self, grp: Group) -> str:
        """The common protocol most members list first (Kafka's vote)."""
        common = self.common_protocols(grp)
        votes: dict[str, int] = {}
        for m in grp.members.values():
            choice = next(n for n, _ in m.protocols if n in common)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda n: votes[n])

    @staticmethod
    def members_of(grp: Group) -> list[g.JoinGroupMember]:
        """The members and their metadata for the group's protocol, as the leader is told them."""
        return [
            g.JoinGroupMember(x.member_id, x.metadata(grp.protocol), x.instance_id)
            for x in grp.members.values()
        ]

    def join_response(self, grp: Group, m: Member) -> g.JoinGroupResponse:
        """The member's JoinGroup answer for the current generation (the members list for the leader)."""
        members = self.members_of(grp) if m.member_id == grp.leader else []
        return g.JoinGroupResponse(
            0, grp.generation, grp.protocol, grp.leader or "", m.member_id, members, grp.protocol_type
        )

    def complete_sync(self, grp: Group) -> None:
        """The leader's assignments are in: store the generation, then make the group Stable (at once
        on a single broker; in a cluster once the record is replicated, as Kafka's storeGroup)."""
        pending = self.store(grp, GroupState.STABLE)
        if pending is None:
            self._to_stable(grp)
        else:
            spawn(self._stable_once_stored(grp, grp.generation, pending), name="group-generation-write")

    def _to_stable(self, grp: Group) -> None:
        grp.state = GroupState.STABLE
        log.info("group %s: generation %d is stable", grp.group_id, grp.generation)
        for x in grp.members.values():
            answer_parked(x, "sync", self.sync_response(grp, x))

    async def _stable_once_stored(self, grp: Group, generation: int, pending: Awaitable[None]) -> None:
        """Cluster: the assignments go out once the membership record is replicated; if it is not, the
        members get the error (NotCoordinator, CoordinatorNotAvailable: they find the coordinator again)
        and the group rebalances, as in Kafka."""
        error: LogSourceError | None = None
        try:
            await pending
        except LogSourceError as e:
            error = e
        except Exception:  # a bug: the members must not wait forever for it
            log.exception("group %s: storing generation %d failed", grp.group_id, generation)
            error = CoordinatorNotAvailable("storing the group failed")  # the bug's text stays in the log
        if (
            not self._is_current(grp)
            or grp.state != GroupState.COMPLETING_REBALANCE
            or grp.generation != generation
        ):
            return  # a rebalance or an unload answered the syncs meanwhile
        if error is None:
            self._to_stable(grp)
            return
        log.warning("group %s: generation %d not stored (%s); rebalancing", grp.group_id, generation, error)
        code, message = error_fields(error)
        for x in grp.members.values():
            x.assignment = b""
            answer_parked(x, "sync", g.SyncGroupResponse(code, error_message=message))
        self.prepare(grp, "its membership record was not replicated")

    @staticmethod
    def sync_response(grp: Group, m: Member) -> g.SyncGroupResponse:
        """The member's SyncGroup answer: its assignment."""
        return g.SyncGroupResponse(0, m.assignment, grp.protocol_type, grp.protocol)

    # ------------------------------------------------------------ members leaving and expiring

    def arm_session(self, grp: Group, m: Member) -> None:
        """(Re)start the member's session timer."""
        if m.timer is not None:
            m.timer.cancel()
        m.timer = asyncio.get_running_loop().call_later(m.session_timeout_ms / 1000, self._expire, grp, m)

    def _expire(self, grp: Group, m: Member) -> None:
        if grp.members.get(m.member_id) is not m:
            return
        if (m.join is not None and not m.join.done()) or (m.sync is not None and not m.sync.done()):
            self.arm_session(grp, m)  # parked in JoinGroup/SyncGroup: it is waiting on us, not dead
            return
        log.info(
            "group %s: member %s missed its session timeout (%d ms)",
            grp.group_id,
            m.member_id,
            m.session_timeout_ms,
        )
        self.remove(grp, m, "session timeout expired")

    def _drop(self, grp: Group, m: Member) -> None:
        if m.timer is not None:
            m.timer.cancel()
        grp.remove(m)
        err = UnknownMemberId(f"member {m.member_id} was removed from group {grp.group_id!r}")
        answer_parked(m, "join", join_error(err))
        code, message = error_fields(err)
        answer_parked(m, "sync", g.SyncGroupResponse(code, error_message=message))

    def remove(self, grp: Group, m: Member, why: str) -> None:
        """Remove the member (its parked requests get UNKNOWN_MEMBER_ID) and rebalance the rest."""
        self._drop(grp, m)
        if grp.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare(grp, f"member {m.member_id} {why}")
        elif grp.state == GroupState.PREPARING_REBALANCE:
            if not grp.members and not grp.initial_until:
                self._complete_join(grp)
            else:
                self.try_complete_join(grp)

    def _to_empty(self, grp: Group) -> None:
        grp.state, grp.leader, grp.protocol = GroupState.EMPTY, None, None
        log.info("group %s: empty (generation %d)", grp.group_id, grp.generation)
        pending = self.store(grp, GroupState.EMPTY)
        if pending is not None:
            spawn(self._log_failure(grp.group_id, pending), name="group-empty-write")

    @staticmethod
    async def _log_failure(group_id: str, pending: Awaitable[None]) -> None:
        try:
            await pending
        except LogSourceError as e:  # the next rebalance writes the group again
            log.warning("group %s: empty membership record not stored: %s", group_id, e)

    def store(self, grp: Group, state: GroupState) -> Awaitable[None] | None:
        """Write the group's membership as of ``state``; None when stored, else what to await."""
        if self._persist is None:
            return None
        try:
            return self._persist(grp.group_id, encode_record(grp, state))
        except LogSourceError as e:  # the offsets log is unwritable: membership still works in memory
            log.warning("group %s: cannot persist membership: %s", grp.group_id, e)
            return None

    def cancel(self, grp: Group, err: LogSourceError) -> None:
        """Stop the group's timers and answer its parked requests with ``err``."""
        if grp.timer is not None:
            grp.timer.cancel()
        for m in grp.members.values():
            if m.timer is not None:
                m.timer.cancel()
            answer_parked(m, "join", join_error(err))
            answer_parked(m, "sync", g.SyncGroupResponse(err.code))


def join_error(e: LogSourceError, member_id: str = "") -> g.JoinGroupResponse:
    """A JoinGroup answer carrying ``e``'s error code and message."""
    code, message = error_fields(e)
    return g.JoinGroupResponse(code, member_id=member_id, error_message=message)


def answer_parked(m: Member, which: str, resp: object) -> None:
    """Resolve the member's parked ``join`` or ``sync`` with ``resp``, if it still waits."""
    fut = getattr(m, which)
    if fut is not None and not fut.done():
        fut.set_result(resp)
