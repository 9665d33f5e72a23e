"""Kafka's ACL model, sans IO: resource patterns, access-control entries, filters, and the
:class:`Authorizer` that decides one (principal, host, operation, resource) question.

The rules are Kafka's ``AclAuthorizer`` / ``StandardAuthorizer``:

- a super user (``super.users``) may do everything;
- the ACLs that apply to a resource are the LITERAL ones with its name or ``*``, and the PREFIXED ones
  whose prefix starts its name;
- a DENY that matches the principal (or ``User:*``), the host (or ``*``) and the operation (or ALL)
  refuses, whatever allows: deny wins;
- an ALLOW of the operation, of ALL, or of an operation that implies it (READ, WRITE, DELETE and ALTER
  imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
- a resource with no ACL at all is open only when ``allow.everyone.if.no.acl.found=true``.

Enum values are Kafka's wire codes (``ResourceType``, ``PatternType``, ``AclOperation``,
``AclPermissionType``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from ....errors import InvalidRequest

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: the operations whose ALLOW also allows the key (Kafka's AclAuthorizer.authorize)
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}

#: the resource types an ACL may name, and the name of the one cluster resource
CLUSTER_NAME = "kafka-cluster"
_CONCRETE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)


def _camel(name: str) -> str:
    return "".join(w.capitalize() for w in name.split("_"))


def parse_enum(enum: type[IntEnum], text: str) -> IntEnum:
    """``Read``, ``READ``, ``read``, ``IdempotentWrite`` or ``idempotent-write`` -> the member."""
    key = text.strip().replace("-", "_").upper()
    for m in enum:
        if key in (m.name, m.name.replace("_", "")):
            return m
    raise InvalidRequest(
        f"unknown {enum.__name__} {text!r}: one of {', '.join(_camel(m.name) for m in enum)}"
    )


def enum_text(m: IntEnum) -> str:
    """Kafka's JSON spelling (``Read``, ``IdempotentWrite``, ``TransactionalId``)."""
    return _camel(m.name)


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    """What an ACL applies to: a resource type, a name (or ``*``) and LITERAL or PREFIXED."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if self.resource_type not in _CONCRETE_TYPES:
            raise InvalidRequest(
                f"an ACL's resource type must be one of TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, got {self.resource_type.name}"
            )
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidRequest(
                f"an ACL's pattern type must be LITERAL or PREFIXED, got {self.pattern_type.name}"
            )
        if not self.name:
            raise InvalidRequest("an ACL's resource name must not be empty")
        if self.resource_type == ResourceType.CLUSTER and (
            self.name != CLUSTER_NAME or self.pattern_type != PatternType.LITERAL
        ):
            raise InvalidRequest(
                f"the CLUSTER resource is LITERAL {CLUSTER_NAME!r}, got {self.pattern_type.name} {self.name!r}"
            )

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """True if this pattern applies to the concrete resource (``*`` and prefixes as Kafka)."""
        if resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == WILDCARD or self.name == name


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    """Who (``User:NAME`` or ``User:*``), from which host (or ``*``), may or may not do what."""

    principal: str
    host: str
    operation: Operation
    permission: Permission

    def __post_init__(self) -> None:
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise InvalidRequest(f"a principal is TYPE:NAME (User:alice), got {self.principal!r}")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise InvalidRequest(f"an ACL's operation must be concrete, got {self.operation.name}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidRequest(f"an ACL's permission must be ALLOW or DENY, got {self.permission.name}")
        if not self.host:
            raise InvalidRequest("an ACL's host must be an address or '*'")


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an entry."""

    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls' and DeleteAcls' filter: None (or ANY) matches every value. A MATCH pattern type
    matches the patterns that apply to the named resource (literal, ``*`` and prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def __post_init__(self) -> None:
        for what, v in (
            ("resource type", self.resource_type),
            ("pattern type", self.pattern_type),
            ("operation", self.operation),
            ("permission", self.permission),
        ):
            if v == 0:
                raise InvalidRequest(f"a filter's {what} must not be UNKNOWN")

    def matches(self, b: AclBinding) -> bool:
        p, e = b.pattern, b.entry
        if self.resource_type != ResourceType.ANY and p.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not p.matches(p.resource_type, self.name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and p.pattern_type != self.pattern_type:
                return False
            if self.name is not None and p.name != self.name:
                return False
        return (
            (self.principal is None or e.principal == self.principal)
            and (self.host is None or e.host == self.host)
            and (self.operation == Operation.ANY or e.operation == self.operation)
            and (self.permission == Permission.ANY or e.permission == self.permission)
        )


def _entry_matches(e: AccessControlEntry, principal: str, host: str, ops: frozenset[Operation]) -> bool:
    return (
        (e.principal == principal or e.principal == WILDCARD_PRINCIPAL)
        and (e.host == host or e.host == WILDCARD)
        and (e.operation == Operation.ALL or e.operation in ops)
    )


class Authorizer:
    """Decides requests against a set of ACL bindings (replaced whole by :meth:`update`)."""

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        # resource type -> pattern -> entries
        self._acls: dict[ResourceType, dict[ResourcePattern, frozenset[AccessControlEntry]]] = {}
        self.update(())

    def update(self, bindings: Iterable[AclBinding]) -> None:
        """Replace every ACL with ``bindings`` (the store's snapshot)."""
        acls: dict[ResourceType, dict[ResourcePattern, set[AccessControlEntry]]] = {}
        for b in bindings:
            acls.setdefault(b.pattern.resource_type, {}).setdefault(b.pattern, set()).add(b.entry)
        self._acls = {t: {p: frozenset(es) for p, es in by.items()} for t, by in acls.items()}
        # the lookup indexes: literal names (and '*') and prefixes, per resource type; a question reads
        # the entries of its name, of '*' and of each prefix length in use, not every ACL
        literal: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        for t, by in self._acls.items():
            for p, es in by.items():
                index = prefixed if p.pattern_type == PatternType.PREFIXED else literal
                index.setdefault(t, {})[p.name] = es
        self._literal, self._prefixed = literal, prefixed
        self._prefix_lengths = {t: sorted({len(n) for n in by}) for t, by in prefixed.items()}

    def _entries(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        out: list[AccessControlEntry] = []
        literal = self._literal.get(resource_type)
        if literal:
            out.extend(literal.get(name, ()))
            if name != WILDCARD:
                out.extend(literal.get(WILDCARD, ()))
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for n in self._prefix_lengths[resource_type]:
                if n > len(name):
                    break
                out.extend(prefixed.get(name[:n], ()))
        return out

    def bindings(self) -> list[AclBinding]:
        return sorted(AclBinding(p, e) for by in self._acls.values() for p, es in by.items() for e in es)

    def authorize(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        """May ``principal`` connecting from ``host`` do ``operation`` on the resource?"""
        if principal in self.super_users:
            return True
        entries = self._entries(resource_type, name)
        if not entries:
            return self.allow_if_no_acl
        exact = frozenset({operation})
        if any(
            e.permission == Permission.DENY and _entry_matches(e, principal, host, exact) for e in entries
        ):
            return False
        allowing = IMPLIED_BY.get(operation, exact)
        return any(
            e.permission == Permission.ALLOW and _entry_matches(e, principal, host, allowing) for e in entries
        )

    def any_allowed(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Kafka's ``authorizeByResourceType``: may the principal do ``operation`` on some resource of the
        type (an ALLOW of it not cancelled by a DENY of the same pattern or a wider one)? Used by
        InitProducerId: idempotent producing needs WRITE on any topic."""
        if principal in self.super_users:
            return True
        by = self._acls.get(resource_type, {})
        allowing = IMPLIED_BY.get(operation, frozenset({operation}))
        exact = frozenset({operation})
        denied = [
            p
            for p, es in by.items()
            if any(e.permission == Permission.DENY and _entry_matches(e, principal, host, exact) for e in es)
        ]
        if any(p.name == WILDCARD for p in denied):
            return False
        for p, es in by.items():
            if any(
                e.permission == Permission.ALLOW and _entry_matches(e, principal, host, allowing) for e in es
            ):
                if not any(
                    d.matches(p.resource_type, p.name)
                    and (p.pattern_type == PatternType.LITERAL or d.pattern_type == PatternType.PREFIXED)
                    for d in denied
                ):
                    return True
        return self.allow_if_no_acl and not by
