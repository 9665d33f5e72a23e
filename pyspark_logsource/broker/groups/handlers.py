"""Request handlers of the group APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups); JoinGroup and SyncGroup are coroutines answered when the rebalance completes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import GroupIdNotFound, InvalidGroupId, LogSourceError, code_of
from ...protocol import group_messages as g
from ...protocol.messages import ApiKey
from .coordinator import GroupState

if TYPE_CHECKING:
    from ..handlers import Session
    from ..state import BrokerState


class GroupHandlers:
    """The group APIs of one broker (the coordinator and offset store of its state)."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {ApiKey.JOIN_GROUP: self.join_group, ApiKey.SYNC_GROUP: self.sync_group,
                ApiKey.HEARTBEAT: self.heartbeat, ApiKey.LEAVE_GROUP: self.leave_group,
                ApiKey.DESCRIBE_GROUPS: self.describe_groups, ApiKey.LIST_GROUPS: self.list_groups}  # fmt: skip

    async def join_group(self, req: g.JoinGroupRequest, session: Session) -> g.JoinGroupResponse:
        """Join; parked until the rebalance completes."""
        self.state.check_group_coordinator(req.group_id)
        host = session.peer.rsplit(":", 1)[0]
        return await self.state.coordinator.join(req, req.api_version, session.client_id or "", "/" + host)

    async def sync_group(self, req: g.SyncGroupRequest, session: Session) -> g.SyncGroupResponse:
        """Assignment; parked until the leader sent it."""
        self.state.check_group_coordinator(req.group_id)
        return await self.state.coordinator.sync(req)

    def heartbeat(self, req: g.HeartbeatRequest, session: Session) -> g.HeartbeatResponse:
        self.state.check_group_coordinator(req.group_id)
        return self.state.coordinator.heartbeat(req)

    def leave_group(self, req: g.LeaveGroupRequest, session: Session) -> g.LeaveGroupResponse:
        self.state.check_group_coordinator(req.group_id)
        return self.state.coordinator.leave(req)

    def describe_groups(self, req: g.DescribeGroupsRequest, session: Session) -> g.DescribeGroupsResponse:
        """Membership groups as the coordinator has them; offset-only groups as Empty; unknown ones
        GROUP_ID_NOT_FOUND (Dead before v6, as in Kafka); NOT_COORDINATOR for a group another broker
        coordinates (cluster)."""
        out = []
        known = self.state.groups.groups()
        for gid in req.groups:
            if not gid:
                out.append(g.DescribedGroup(gid, InvalidGroupId.code, error_message="group id is empty"))
                continue
            try:
                self.state.check_group_coordinator(gid)
            except LogSourceError as e:
                out.append(g.DescribedGroup(gid, code_of(e), error_message=str(e)))
                continue
            d = self.state.coordinator.describe(gid)
            if d is None and gid in known:
                d = g.DescribedGroup(gid, 0, GroupState.EMPTY.value)
            elif d is None:  # v6+ says so with GROUP_ID_NOT_FOUND; the adapter answers older versions Dead
                d = g.DescribedGroup(gid, GroupIdNotFound.code, GroupState.DEAD.value,
                                     error_message=f"group {gid!r} does not exist")  # fmt: skip
            out.append(d)
        return g.DescribeGroupsResponse(out)

    def list_groups(self, req: g.ListGroupsRequest, session: Session) -> g.ListGroupsResponse:
        """Every group this broker coordinates with members or committed offsets (in a cluster, those of the
        offsets partitions it leads: clients ask every broker), filtered by state (v4+) and type (v5+)."""
        coord = self.state.coordinator
        listed = {gid: g.ListedGroup(gid, "", GroupState.EMPTY.value) for gid in self.state.groups.groups()}
        for gid in list(coord.groups):
            d = coord.describe(gid)
            if d is not None and (d.state != GroupState.EMPTY.value or gid in listed or d.protocol_type):
                listed[gid] = g.ListedGroup(gid, d.protocol_type, d.state)
        states = {s.lower() for s in req.states_filter}
        types = {t.lower() for t in req.types_filter}
        groups = [x for _, x in sorted(listed.items()) if (not states or x.state.lower() in states)
                  and (not types or x.group_type in types)]  # fmt: skip
        return g.ListGroupsResponse(0, groups)
