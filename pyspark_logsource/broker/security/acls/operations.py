"""Authorized operations: the bit set of what the principal may do on a resource, as Metadata (v8+),
DescribeCluster, DescribeGroups (v3+) and ConsumerGroupDescribe answer when the request asks
(``include_*_authorized_operations``); Int32.MinValue when it does not.

Kafka's ``AuthHelper.authorizedOperations``: each of the resource type's supported operations
(``AclEntry.supportedOperations``) asked of the authorizer, the allowed ones as ``1 << code``
(``Utils.to32BitField``); without an authorizer every supported operation.

:class:`AuthorizedOperations` is a pipeline step: :meth:`~AuthorizedOperations.install` wraps those
APIs' handlers (after the ACL checks, so denied entries are answered too) and fills the fields.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from ....errors import GroupAuthorizationFailed
from ....protocol import ApiKey
from ...session import Session
from .model import CLUSTER_NAME, Authorizer, Operation, ResourceType

Op = Operation
NOT_REQUESTED = -(1 << 31)

#: Kafka's AclEntry.supportedOperations, per concrete resource type
SUPPORTED: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE),
    ResourceType.CLUSTER: (
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def to_bitfield(ops: Iterable[Operation]) -> int:
    """Kafka's ``Utils.to32BitField``: bit ``code`` set for each operation."""
    bits = 0
    for op in ops:
        bits |= 1 << int(op)
    return bits


def from_bitfield(bits: int) -> set[Operation]:
    """The operations of a bit set (Kafka's ``Utils.from32BitField``); none for Int32.MinValue."""
    if bits == NOT_REQUESTED:
        return set()
    return {op for op in Operation if bits & (1 << int(op))}


def authorized_operations(
    authorizer: Authorizer | None, session: Session, rtype: ResourceType, name: str
) -> int:
    """The bit set of ``rtype``'s supported operations the session's principal may do on ``name``."""
    supported = SUPPORTED[rtype]
    if authorizer is None:
        return to_bitfield(supported)
    principal, host = str(session.principal), session.client_address
    return to_bitfield(op for op in supported if authorizer.authorize(principal, host, op, rtype, name))


class AuthorizedOperations:
    """Fills the authorized-operations fields of the responses that were asked for them."""

    def __init__(self, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer

    def ops(self, session: Session, rtype: ResourceType, name: str) -> int:
        return authorized_operations(self.authorizer, session, rtype, name)

    def install(self, handlers: Any) -> None:
        """Wrap the handlers of the APIs that carry authorized operations (those ``handlers.by_key`` has)."""
        fillers: dict[int, Callable[[Any, Any, Session], None]] = {
            ApiKey.METADATA: self._metadata,
            ApiKey.DESCRIBE_CLUSTER: self._describe_cluster,
            ApiKey.DESCRIBE_GROUPS: self._describe_groups,
            ApiKey.CONSUMER_GROUP_DESCRIBE: self._describe_groups,
        }
        for key, fill in fillers.items():
            handler = handlers.by_key.get(key)
            if handler is not None:
                handlers.by_key[key] = _wrap(handler, fill)

    def _metadata(self, req: Any, resp: Any, session: Session) -> None:
        if req.include_topic_authorized_operations:
            for t in resp.topics:
                if t.name is not None:
                    t.authorized_operations = self.ops(session, ResourceType.TOPIC, t.name)
        if req.include_cluster_authorized_operations:
            resp.cluster_authorized_operations = self.ops(session, ResourceType.CLUSTER, CLUSTER_NAME)

    def _describe_cluster(self, req: Any, resp: Any, session: Session) -> None:
        if req.include_cluster_authorized_operations and resp.error_code == 0:
            resp.cluster_authorized_operations = self.ops(session, ResourceType.CLUSTER, CLUSTER_NAME)

    def _describe_groups(self, req: Any, resp: Any, session: Session) -> None:
        # a group the principal may not DESCRIBE is answered with its error and no operations (Kafka)
        if req.include_authorized_operations:
            for grp in resp.groups:
                if grp.error_code != GroupAuthorizationFailed.code:
                    grp.authorized_operations = self.ops(session, ResourceType.GROUP, grp.group_id)


def _wrap(
    handler: Callable[[Any, Session], Any], fill: Callable[[Any, Any, Session], None]
) -> Callable[[Any, Session], Any]:
    def filled(req: Any, session: Session) -> Any:
        result = handler(req, session)
        if asyncio.iscoroutine(result):
            return _filled_later(result, req, session, fill)
        if result is not None:
            fill(req, result, session)
        return result

    return filled


async def _filled_later(
    result: Any, req: Any, session: Session, fill: Callable[[Any, Any, Session], None]
) -> Any:
    resp = await result
    if resp is not None:
        fill(req, resp, session)
    return resp
