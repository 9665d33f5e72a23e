"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31) over the :class:`~.store.AclStore`.

Who may call them is the request pipeline's question (checks.py: ALTER on the cluster to create and
delete, DESCRIBE to describe). Without an authorizer (``authorizer.class.name`` unset) each answers
SECURITY_DISABLED (54), as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ....errors import InvalidRequest, LogSourceError, SecurityDisabled
from ....protocol import acl_messages as aclm
from ...error_responses import error_fields
from ...session import Session
from .model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from .store import AclStore

log = logging.getLogger("pyspark_logsource.broker.security")


def _enum(enum: type, value: int, what: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        raise InvalidRequest(f"unknown {what} {value}") from None


def binding_from_wire(a: aclm.Acl) -> AclBinding:
    """A CreateAcls entry as a binding; InvalidRequest names what is wrong."""
    return AclBinding(
        ResourcePattern(
            _enum(ResourceType, a.resource_type, "resource type"),
            a.resource_name,
            _enum(PatternType, a.pattern_type, "pattern type"),
        ),
        AccessControlEntry(
            a.principal,
            a.host,
            _enum(Operation, a.operation, "operation"),
            _enum(Permission, a.permission_type, "permission type"),
        ),
    )


def binding_to_wire(b: AclBinding) -> aclm.Acl:
    p, e = b.pattern, b.entry
    return aclm.Acl(
        int(p.resource_type),
        p.name,
        int(p.pattern_type),
        e.principal,
        e.host,
        int(e.operation),
        int(e.permission),
    )


def filter_from_wire(f: aclm.AclFilter) -> AclBindingFilter:
    return AclBindingFilter(
        _enum(ResourceType, f.resource_type, "resource type"),
        f.resource_name,
        _enum(PatternType, f.pattern_type, "pattern type"),
        f.principal,
        f.host,
        _enum(Operation, f.operation, "operation"),
        _enum(Permission, f.permission_type, "permission type"),
    )


class AclHandlers:
    """The ACL APIs; ``store()`` is the broker's ACL store (None without an authorizer or before start)."""

    def __init__(self, store: Callable[[], AclStore | None], enabled: bool) -> None:
        self._store = store
        self.enabled = enabled

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {
            aclm.DESCRIBE_ACLS_KEY: self.describe_acls,
            aclm.CREATE_ACLS_KEY: self.create_acls,
            aclm.DELETE_ACLS_KEY: self.delete_acls,
        }

    def _need_store(self) -> AclStore:
        store = self._store() if self.enabled else None
        if store is None:
            raise SecurityDisabled(
                "no authorizer is configured on the broker (set authorizer.class.name)"
                if not self.enabled
                else "the ACL store is not open yet"
            )
        return store

    def describe_acls(self, req: aclm.DescribeAclsRequest, session: Session) -> aclm.DescribeAclsResponse:
        try:
            store = self._need_store()
            f = filter_from_wire(req.filter)
        except LogSourceError as e:
            code, message = error_fields(e)
            return aclm.DescribeAclsResponse(code, message)
        return aclm.DescribeAclsResponse(acls=[binding_to_wire(b) for b in store.bindings() if f.matches(b)])

    def create_acls(self, req: aclm.CreateAclsRequest, session: Session) -> aclm.CreateAclsResponse:
        try:
            store = self._need_store()
        except LogSourceError as e:
            return aclm.CreateAclsResponse([error_fields(e)] * len(req.creations))
        results: list[tuple[int, str | None]] = []
        good: list[AclBinding] = []
        for a in req.creations:
            try:
                good.append(binding_from_wire(a))
                results.append((0, None))
            except LogSourceError as e:
                results.append(tuple(error_fields(e)))
        if good:
            try:
                store.add(good)
            except Exception as e:  # the store failed (ZooKeeper, the disk): every creation did
                log.error("creating ACLs failed: %s", e)
                code, message = error_fields(e)
                results = [(code, message) if c == 0 else (c, m) for c, m in results]
                return aclm.CreateAclsResponse(results)
            for b in good:
                log.info("ACL created by %s from %s: %s", session.principal, session.client_address, _text(b))
        return aclm.CreateAclsResponse(results)

    def delete_acls(self, req: aclm.DeleteAclsRequest, session: Session) -> aclm.DeleteAclsResponse:
        try:
            store = self._need_store()
        except LogSourceError as e:
            code, message = error_fields(e)
            return aclm.DeleteAclsResponse([aclm.DeleteAclsFilterResult(code, message) for _ in req.filters])
        filters: list[AclBindingFilter | LogSourceError] = []
        for f in req.filters:
            try:
                filters.append(filter_from_wire(f))
            except LogSourceError as e:
                filters.append(e)
        good = [f for f in filters if isinstance(f, AclBindingFilter)]
        removed = iter(store.remove(good) if good else [])
        out = []
        for f in filters:
            if isinstance(f, LogSourceError):
                code, message = error_fields(f)
                out.append(aclm.DeleteAclsFilterResult(code, message))
                continue
            bs = next(removed)
            for b in bs:
                log.info("ACL deleted by %s from %s: %s", session.principal, session.client_address, _text(b))
            out.append(aclm.DeleteAclsFilterResult(matching=[binding_to_wire(b) for b in bs]))
        return aclm.DeleteAclsResponse(out)


def _text(b: AclBinding) -> str:
    p, e = b.pattern, b.entry
    return (
        f"{e.permission.name} {e.principal} from {e.host} {e.operation.name} on "
        f"{p.resource_type.name} {p.pattern_type.name} {p.name!r}"
    )
