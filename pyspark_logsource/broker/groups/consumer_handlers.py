"""Request handlers of KIP-848's consumer group APIs: ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69).
The groups are :class:`.consumer_groups.ConsumerGroups`'; these only check the coordinator and translate."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import GroupIdNotFound, InvalidGroupId, LogSourceError
from ...protocol import consumer_group_messages as cg
from ...protocol.messages import ApiKey
from ..error_responses import error_fields
from ..session import Session

if TYPE_CHECKING:
    from ..state import BrokerState


class ConsumerGroupHandlers:
    """The consumer-protocol group APIs of one broker."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {
            ApiKey.CONSUMER_GROUP_HEARTBEAT: self.heartbeat,
            ApiKey.CONSUMER_GROUP_DESCRIBE: self.describe,
        }

    def heartbeat(
        self, req: cg.ConsumerGroupHeartbeatRequest, session: Session
    ) -> cg.ConsumerGroupHeartbeatResponse:
        """Join, heartbeat or leave; errors are answered in the response, with the interval."""
        try:
            self.state.check_group_coordinator(req.group_id)
            host = "/" + session.peer.rsplit(":", 1)[0]
            return self.state.consumer_groups.heartbeat(req, req.api_version, session.client_id or "", host)
        except LogSourceError as e:
            code, message = error_fields(e)
            return cg.ConsumerGroupHeartbeatResponse(code, message)

    def describe(
        self, req: cg.ConsumerGroupDescribeRequest, session: Session
    ) -> cg.ConsumerGroupDescribeResponse:
        """Each group asked for; GROUP_ID_NOT_FOUND for one that is not a consumer-protocol group."""
        out = []
        for gid in req.group_ids:
            if not gid:
                out.append(cg.DescribedConsumerGroup(gid, InvalidGroupId.code, "group id is empty"))
                continue
            try:
                self.state.check_group_coordinator(gid)
            except LogSourceError as e:
                code, message = error_fields(e)
                out.append(cg.DescribedConsumerGroup(gid, code, message))
                continue
            d = self.state.consumer_groups.describe(gid)
            if d is None:
                out.append(
                    cg.DescribedConsumerGroup(
                        gid, GroupIdNotFound.code, f"Group {gid} is not a consumer group."
                    )
                )
            else:
                out.append(d)
        return cg.ConsumerGroupDescribeResponse(out)
