"""Request handlers of the group APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups, OffsetCommit, OffsetFetch); JoinGroup and SyncGroup are coroutines answered when the rebalance
completes, and so is OffsetCommit in a cluster (once the ISR has the commit)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import (
    GroupIdNotFound,
    InconsistentGroupProtocol,
    InvalidGroupId,
    InvalidRequest,
    LogSourceError,
    OffsetMetadataTooLarge,
)
from ...protocol import coordinator_messages as cm
from ...protocol import group_messages as g
from ...protocol.messages import ApiKey
from ..error_responses import error_fields
from ..session import Session
from ..state import topic_error
from .coordinator import GroupState

if TYPE_CHECKING:
    from ..state import BrokerState


class GroupHandlers:
    """The group APIs of one broker (the coordinator and offset store of its state)."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {
            ApiKey.JOIN_GROUP: self.join_group,
            ApiKey.SYNC_GROUP: self.sync_group,
            ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave_group,
            ApiKey.DESCRIBE_GROUPS: self.describe_groups,
            ApiKey.LIST_GROUPS: self.list_groups,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
        }

    async def join_group(self, req: g.JoinGroupRequest, session: Session) -> g.JoinGroupResponse:
        """Join; parked until the rebalance completes."""
        self.state.check_group_coordinator(req.group_id)
        if self.state.consumer_groups.has_members(req.group_id):  # KIP-848: one protocol per group id
            raise InconsistentGroupProtocol(f"group {req.group_id!r} uses the consumer group protocol")
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
                code, message = error_fields(e)
                out.append(g.DescribedGroup(gid, code, error_message=message))
                continue
            d = self.state.coordinator.describe(gid)
            if d is None and self.state.consumer_groups.describe(gid) is not None:  # as Kafka answers
                d = g.DescribedGroup(
                    gid,
                    GroupIdNotFound.code,
                    GroupState.DEAD.value,
                    error_message=f"Group {gid} is not a classic group.",
                )
            elif d is None and gid in known:
                d = g.DescribedGroup(gid, 0, GroupState.EMPTY.value)
            elif d is None:  # v6+ says so with GROUP_ID_NOT_FOUND; the adapter answers older versions Dead
                d = g.DescribedGroup(
                    gid,
                    GroupIdNotFound.code,
                    GroupState.DEAD.value,
                    error_message=f"group {gid!r} does not exist",
                )
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
        for gid in list(self.state.consumer_groups.groups):  # KIP-848's groups: type "consumer"
            cd = self.state.consumer_groups.describe(gid)
            if cd is not None and (cd.members or gid in listed):
                listed[gid] = g.ListedGroup(gid, "consumer", cd.group_state, "consumer")
        states = {s.lower() for s in req.states_filter}
        types = {t.lower() for t in req.types_filter}
        groups = [
            x
            for _, x in sorted(listed.items())
            if (not states or x.state.lower() in states) and (not types or x.group_type in types)
        ]
        return g.ListGroupsResponse(0, groups)

    # ------------------------------------------------------------ offsets (OffsetCommit, OffsetFetch)

    def offset_commit(self, req: cm.OffsetCommitRequest, session: Session) -> Any:
        """Store the group's offsets durably, all valid partitions in one append (a member's commit
        must name the group's current generation). In a cluster, a coroutine answered once the
        ISR of the group's ``__consumer_offsets`` partition has the commit."""
        if not req.group_id:
            raise InvalidGroupId("group id is empty")
        self.state.check_group_coordinator(req.group_id)
        # a consumer-protocol group's member commits with its member epoch in the generation field
        if not self.state.consumer_groups.validate_commit(req.group_id, req.member_id, req.generation_id):
            self.state.coordinator.validate_commit(
                req.group_id, req.generation_id, req.member_id, req.group_instance_id
            )
        out = []
        entries = []
        topics = self.state.topics()
        for p in req.partitions:
            r = cm.OffsetCommitPartitionResponse(p.topic, p.partition)
            n = topics.get(p.topic)
            if n is None or not 0 <= p.partition < n:
                r.error_code = error_fields(topic_error(p.topic)).code
            elif p.offset < 0:
                r.error_code = InvalidRequest.code
            elif p.metadata is not None and len(p.metadata) > self.state.config.offset_metadata_max_bytes:
                r.error_code = OffsetMetadataTooLarge.code  # Kafka's offset.metadata.max.bytes (4096)
            else:
                # a null metadata is stored as Kafka stores it (OffsetAndMetadata.NO_METADATA: empty)
                meta = "" if p.metadata is None else p.metadata
                entries.append((p.topic, p.partition, p.offset, meta, p.leader_epoch))
            out.append(r)
        if self.state.cluster is not None and entries:
            return self._replicated_commit(req.group_id, entries, out)
        try:
            self.state.groups.commit(req.group_id, entries)
        except LogSourceError as e:
            for r in out:
                if r.error_code == 0:
                    r.error_code = error_fields(e).code
        return cm.OffsetCommitResponse(partitions=out)

    async def _replicated_commit(self, group: str, entries: list, out: list) -> cm.OffsetCommitResponse:
        try:
            await self.state.group_ownership.commit(group, entries)
        except LogSourceError as e:
            for r in out:
                if r.error_code == 0:
                    r.error_code = error_fields(e).code
        return cm.OffsetCommitResponse(partitions=out)

    def offset_fetch(self, req: cm.OffsetFetchRequest, session: Session) -> cm.OffsetFetchResponse:
        """Committed offsets (-1 where the group has none)."""
        if not req.group_id:
            raise InvalidGroupId("group id is empty")
        self.state.check_group_coordinator(req.group_id)
        found = self.state.groups.fetch(req.group_id, req.partitions)
        keys = sorted(found) if req.partitions is None else req.partitions
        out = []
        for t, p in keys:
            c = found.get((t, p))
            if c is None:
                out.append(cm.OffsetFetchPartitionResponse(t, p))
            else:
                out.append(
                    cm.OffsetFetchPartitionResponse(t, p, c.offset, c.metadata, leader_epoch=c.leader_epoch)
                )
        return cm.OffsetFetchResponse(partitions=out)
