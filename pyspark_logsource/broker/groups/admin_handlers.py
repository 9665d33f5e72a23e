"""DeleteGroups (42) and OffsetDelete (47): removing groups and their committed offsets.

The coordinator decides what may go (:meth:`.coordinator.GroupCoordinator.remove_empty`,
:meth:`~.coordinator.GroupCoordinator.subscribed_topics`); the deletion itself is tombstones on
``__consumer_offsets`` (:meth:`.ownership.GroupOwnership.delete`), so that a restarted broker, or in a
cluster the next coordinator, replays the group as gone. In a cluster both answer once the ISR of the
group's offsets partition has the tombstones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import GroupIdNotFound, GroupSubscribedToTopic, InvalidGroupId, LogSourceError
from ...protocol import ApiKey
from ...protocol import records_admin_messages as ra
from ..error_responses import error_fields
from ..session import Session
from ..state import topic_error

if TYPE_CHECKING:
    from ..state import BrokerState


class GroupAdminHandlers:
    """DeleteGroups and OffsetDelete of one broker."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {ApiKey.DELETE_GROUPS: self.delete_groups, ApiKey.OFFSET_DELETE: self.offset_delete}

    def _known(self, group_id: str) -> bool:
        return self.state.coordinator.state_of(group_id) is not None or bool(
            self.state.groups.fetch(group_id, None)
        )

    async def _delete_group(self, group_id: str) -> None:
        if not group_id:
            raise InvalidGroupId("group id is empty")
        self.state.check_group_coordinator(group_id)
        known = self._known(group_id)
        had_membership = self.state.coordinator.remove_empty(group_id)  # NonEmptyGroup with members
        if not known and not had_membership:
            raise GroupIdNotFound(f"group {group_id!r} does not exist")
        await self.state.group_ownership.delete(group_id, None)

    async def delete_groups(self, req: ra.DeleteGroupsRequest, session: Session) -> ra.DeleteGroupsResponse:
        """Per group: deleted (0), NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND, NOT_COORDINATOR."""
        out = []
        for gid in req.groups:
            try:
                await self._delete_group(gid)
                out.append((gid, 0))
            except LogSourceError as e:
                out.append((gid, error_fields(e).code))
        return ra.DeleteGroupsResponse(out)

    async def offset_delete(self, req: ra.OffsetDeleteRequest, session: Session) -> ra.OffsetDeleteResponse:
        """Delete the group's committed offsets of the partitions asked; per partition
        GROUP_SUBSCRIBED_TO_TOPIC for a topic its members consume, UNKNOWN_TOPIC_OR_PARTITION; for the
        whole request GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (members of another protocol), NOT_COORDINATOR."""
        gid = req.group_id
        try:
            if not gid:
                raise InvalidGroupId("group id is empty")
            self.state.check_group_coordinator(gid)
            if not self._known(gid):
                raise GroupIdNotFound(f"group {gid!r} does not exist")
            subscribed = self.state.coordinator.subscribed_topics(gid)
        except LogSourceError as e:
            return ra.OffsetDeleteResponse(error_fields(e).code)
        topics = self.state.topics()
        out: list[tuple[str, int, int]] = []
        doomed = []
        for t, p in req.partitions:
            n = topics.get(t)
            if n is None or not 0 <= p < n:
                out.append((t, p, error_fields(topic_error(t)).code))
            elif subscribed is not None and t in subscribed:
                out.append((t, p, GroupSubscribedToTopic.code))
            else:
                out.append((t, p, 0))
                doomed.append((t, p))
        if doomed:
            try:
                await self.state.group_ownership.delete(gid, doomed)
            except LogSourceError as e:
                return ra.OffsetDeleteResponse(error_fields(e).code)
        return ra.OffsetDeleteResponse(0, out)
