"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46): request handlers.

In a cluster these are the controller's (Kafka's Admin sends them there, as it does in ZooKeeper mode):
another broker answers NOT_CONTROLLER (the top-level code; ElectLeaders v0, which has none, in every
partition), and clients ask Metadata for the controller and retry. The work runs on the controller's
event thread (:meth:`.controller.Controller.call`): :mod:`.election` and :mod:`.reassignment`.
ElectLeaders answers once this broker's metadata shows the new leaders (up to ``timeout_ms``);
AlterPartitionReassignments once the reassignment has started (as Kafka: its end is seen with
ListPartitionReassignments).

On a single broker every partition has one replica, this broker, which leads it: as Kafka with one
broker, an election is not needed, a reassignment can only name this broker (and then changes nothing),
there is never one to cancel or to list.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ...errors import (
    ElectionNotNeeded,
    LogSourceError,
    NoReassignmentInProgress,
    NotController,
    RequestTimedOut,
    UnknownTopicOrPartition,
)
from ...protocol import ApiKey
from ...protocol.reassign_messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingReassignment,
    PartitionError,
)
from ..error_responses import error_fields
from ..session import Session
from .reassignment import Assignment, validate_target

if TYPE_CHECKING:
    from ..state import BrokerState
    from .member import ClusterMember

T = TypeVar("T")

#: how often an ElectLeaders answer looks whether this broker's metadata shows the new leaders
_POLL_S = 0.02


def _result(topic: str, p: int, err: BaseException | None) -> PartitionError:
    if err is None:
        return PartitionError(topic, p)
    return PartitionError(topic, p, *error_fields(err))


class ReplicaAdminHandlers:
    """The replica administration APIs, on a single broker and in a cluster."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {
            ApiKey.ELECT_LEADERS: self.elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.alter_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self.list_reassignments,
        }

    @property
    def member(self) -> ClusterMember | None:
        return self.state.cluster if self.state.config.cluster_mode else None  # type: ignore[return-value]

    async def _on_controller(self, fn: Callable[[], T], timeout_ms: int) -> T:
        """``fn()`` on the controller's event thread; NotController on another broker."""
        member = self.member
        assert member is not None
        if not member.is_controller():
            raise NotController(f"broker {self.state.config.broker_id} is not the controller")
        fut = member.controller.call(fn)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), max(timeout_ms, 1) / 1000)
        except asyncio.TimeoutError:
            fut.cancel()
            raise RequestTimedOut(f"the controller did not answer within {timeout_ms} ms") from None

    # ------------------------------------------------------------ ElectLeaders

    async def elect_leaders(self, req: ElectLeadersRequest, session: Session) -> ElectLeadersResponse:
        """Run the election on each partition (all of them when none are named)."""
        asked = (
            None
            if req.topic_partitions is None
            else [(t, p) for t, ps in req.topic_partitions.items() for p in dict.fromkeys(ps)]
        )
        if self.member is None:
            return self._elect_single(asked)
        member = self.member
        ctl = member.controller
        try:
            results = await self._on_controller(
                lambda: ctl.elections.elect(
                    req.election_type, asked if asked is not None else ctl.elections.all_partitions()
                ),
                req.timeout_ms,
            )
        except LogSourceError as e:
            code, message = error_fields(e)
            return ElectLeadersResponse(
                [PartitionError(t, p, code, message) for t, p in asked or ()], error_code=code
            )
        await self._wait_leaders(
            {k: v for k, v in results.items() if isinstance(v, int)}, req.timeout_ms / 1000
        )
        out = []
        for (t, p), r in results.items():
            err = r if isinstance(r, LogSourceError) else None
            if asked is None and isinstance(err, ElectionNotNeeded):
                continue  # "all partitions": only those that were (or could not be) elected, as Kafka
            out.append(_result(t, p, err))
        return ElectLeadersResponse(out)

    async def _wait_leaders(self, leaders: dict[tuple[str, int], int], timeout_s: float) -> None:
        member = self.member
        assert member is not None
        deadline = asyncio.get_running_loop().time() + timeout_s
        while leaders and asyncio.get_running_loop().time() < deadline:
            roles = {}
            for t in {t for t, _ in leaders}:
                for r in member.partitions(t):
                    if r is not None:
                        roles[(t, r.partition)] = r.leader
            if all(roles.get(k) == v for k, v in leaders.items()):
                return
            await asyncio.sleep(_POLL_S)

    def _elect_single(self, asked: list[tuple[str, int]] | None) -> ElectLeadersResponse:
        if asked is None:
            return ElectLeadersResponse([])  # every partition is led by its only replica: nothing to report
        out = []
        for t, p in asked:
            try:
                self.state.logs.get_log(t, p)
                err: LogSourceError = ElectionNotNeeded(
                    f"{t}-{p}: broker {self.state.config.broker_id} is its only replica and leads it"
                )
            except UnknownTopicOrPartition as e:
                err = e
            out.append(_result(t, p, err))
        return ElectLeadersResponse(out)

    # ------------------------------------------------------------ AlterPartitionReassignments

    async def alter_reassignments(
        self, req: AlterPartitionReassignmentsRequest, session: Session
    ) -> AlterPartitionReassignmentsResponse:
        """Start, replace or cancel the reassignment of each partition."""
        allow = req.allow_replication_factor_change
        if self.member is None:
            return AlterPartitionReassignmentsResponse(
                [self._alter_single(t, p, r, allow) for (t, p), r in req.reassignments.items()],
                allow_replication_factor_change=allow,
            )
        ctl = self.member.controller
        try:
            results = await self._on_controller(
                lambda: ctl.reassignments.alter(req.reassignments, allow), req.timeout_ms
            )
        except LogSourceError as e:
            code, message = error_fields(e)
            return AlterPartitionReassignmentsResponse([], code, message, allow)
        return AlterPartitionReassignmentsResponse(
            [_result(t, p, err) for (t, p), err in results.items()], allow_replication_factor_change=allow
        )

    def _alter_single(self, t: str, p: int, target: list[int] | None, allow: bool) -> PartitionError:
        me = self.state.config.broker_id
        try:
            self.state.logs.get_log(t, p)
            if target is None:
                raise NoReassignmentInProgress(f"no reassignment of {t}-{p} is in progress")
            validate_target(list(target), {me}, Assignment([me], [], []), allow)
            return _result(t, p, None)  # [me]: already so
        except LogSourceError as e:
            return _result(t, p, e)

    # ------------------------------------------------------------ ListPartitionReassignments

    async def list_reassignments(
        self, req: ListPartitionReassignmentsRequest, session: Session
    ) -> ListPartitionReassignmentsResponse:
        """The reassignments in progress (of the partitions asked for, or all)."""
        if self.member is None:
            return ListPartitionReassignmentsResponse([])
        ctl = self.member.controller
        wanted = None if req.topics is None else {t: sorted(set(ps)) for t, ps in req.topics.items()}
        try:
            ongoing = await self._on_controller(lambda: ctl.reassignments.ongoing(wanted), req.timeout_ms)
        except LogSourceError as e:
            return ListPartitionReassignmentsResponse([], *error_fields(e))
        return ListPartitionReassignmentsResponse(
            [OngoingReassignment(t, p, a.replicas, a.adding, a.removing) for t, p, a in ongoing]
        )
