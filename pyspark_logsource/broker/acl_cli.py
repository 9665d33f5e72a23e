"""``logsource acls add|list|remove``: ACLs through a running broker, with ``kafka-acls``' options.

    logsource acls add --allow-principal User:alice --operation Read --operation Describe --topic logs
    logsource acls add --allow-principal User:alice --operation Read --group etl- --resource-pattern-type prefixed
    logsource acls list --topic logs
    logsource acls remove --allow-principal User:alice --operation Read --topic logs

``--command-config client.properties`` for a secured listener (Kafka's tools' habit). As with
``kafka-acls``, ``add`` creates one ACL per (principal, host, operation, resource); ``remove`` without a
principal removes every ACL of the named resources (kafka-acls asks first; this command does not, so
name what you mean); ``list`` without a resource lists every ACL.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..cli_args import bootstrap_default, print_table
from ..errors import LogSourceError
from ..protocol.acl_messages import Acl, AclFilter
from .config import command_config_options
from .security.acls.model import (
    CLUSTER_NAME,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    enum_text,
    parse_enum,
)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="logsource acls", description="Manage ACLs (Kafka's kafka-acls options)."
    )
    sub = ap.add_subparsers(dest="action", required=True)
    for name, help_ in (
        ("add", "create ACLs"),
        ("list", "list ACLs (all, or those of the named resources)"),
        ("remove", "remove the ACLs the options match"),
    ):
        p = sub.add_parser(name, help=help_)
        p.add_argument(
            "--bootstrap-server", "--bootstrap-servers", "-b", dest="bootstrap", default=bootstrap_default()
        )
        p.add_argument("--command-config", metavar="FILE", help="client.properties for a secured listener")
        p.add_argument("--topic", action="append", default=[], help="a topic (or prefix; '*' for all)")
        p.add_argument(
            "--group", action="append", default=[], help="a consumer group (or prefix; '*' for all)"
        )
        p.add_argument("--transactional-id", action="append", default=[], help="a transactional id")
        p.add_argument("--cluster", action="store_true", help="the cluster resource")
        p.add_argument(
            "--resource-pattern-type",
            default="literal" if name == "add" else ("any" if name == "list" else "literal"),
            help="literal or prefixed (list and remove also: any, match)",
        )
        if name == "list":
            p.add_argument("--principal", help="only the ACLs of this principal (User:NAME)")
            continue
        p.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME")
        p.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME")
        p.add_argument("--allow-host", action="append", default=[], metavar="HOST")
        p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
        p.add_argument("--host", action="append", default=[], help="both --allow-host and --deny-host")
        p.add_argument(
            "--operation",
            action="append",
            default=[],
            help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, "
            "IdempotentWrite, All (repeatable; default All)",
        )
    return ap


def _resources(args: Any, for_add: bool) -> list[tuple[ResourceType, str | None]]:
    out: list[tuple[ResourceType, str | None]] = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if not out and for_add:
        raise LogSourceError("name a resource: --topic, --group, --transactional-id or --cluster")
    return out


def _pattern(args: Any, for_add: bool) -> PatternType:
    pt = parse_enum(PatternType, args.resource_pattern_type)
    allowed = (PatternType.LITERAL, PatternType.PREFIXED) if for_add else tuple(PatternType)[1:]
    if pt not in allowed:
        raise LogSourceError(
            f"--resource-pattern-type {args.resource_pattern_type} is not allowed with {args.action}"
        )
    return pt


def _entries(args: Any, for_add: bool) -> list[tuple[str, str, Permission]]:
    """(principal, host, permission) for every --allow-/--deny-principal."""
    out = []
    for principals, hosts, perm in (
        (args.allow_principal, args.allow_host + args.host, Permission.ALLOW),
        (args.deny_principal, args.deny_host + args.host, Permission.DENY),
    ):
        for principal in principals:
            if ":" not in principal:
                raise LogSourceError(f"a principal is TYPE:NAME (User:alice), got {principal!r}")
            for host in hosts or (["*"] if for_add else [None]):
                out.append((principal, host, perm))
    if for_add and not out:
        raise LogSourceError("name who: --allow-principal or --deny-principal")
    return out


def _operations(args: Any, for_add: bool) -> list[Operation]:
    ops = [parse_enum(Operation, o) for o in args.operation]
    bad = [o for o in ops if o in (Operation.UNKNOWN, Operation.ANY)]
    if bad:
        raise LogSourceError(f"--operation {bad[0].name} is not an operation")
    return ops or ([Operation.ALL] if for_add else [Operation.ANY])


def _row(a: Acl) -> tuple[str, ...]:
    return (
        enum_text(ResourceType(a.resource_type)),
        enum_text(PatternType(a.pattern_type)),
        a.resource_name,
        a.principal,
        a.host,
        enum_text(Operation(a.operation)),
        enum_text(Permission(a.permission_type)),
    )


HEADER = ("RESOURCE_TYPE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")


def _run(args: Any) -> int:
    from ..client import Admin

    options = command_config_options(args.command_config)
    add = args.action == "add"
    resources = _resources(args, add)
    pattern = _pattern(args, add)
    with Admin(args.bootstrap, **options) as admin:
        if args.action == "list":
            filters = [
                AclFilter(int(t), n, int(pattern), args.principal, None, 1, 1)
                for t, n in resources or [(ResourceType.ANY, None)]
            ]
            rows = sorted({_row(a) for f in filters for a in admin.describe_acls(f)})
            print_table([HEADER, *rows])
            return 0
        entries, ops = _entries(args, add), _operations(args, add)
        if add:
            acls = [
                Acl(int(t), n, int(pattern), p, h, int(o), int(perm))
                for t, n in resources
                for p, h, perm in entries
                for o in ops
            ]
            admin.create_acls(acls)
            print(f"added {len(acls)} ACL(s)")
            print_table([HEADER, *(_row(a) for a in acls)])
            return 0
        if not resources and not entries:
            raise LogSourceError("remove needs a resource or a principal (refusing to remove every ACL)")
        filters = [
            AclFilter(int(t), n, int(pattern), p, h, int(o), int(perm) if perm else 1)
            for t, n in resources or [(ResourceType.ANY, None)]
            for p, h, perm in entries or [(None, None, None)]
            for o in ops
        ]
        removed = [a for batch in admin.delete_acls(filters) for a in batch]
        print(f"removed {len(removed)} ACL(s)")
        if removed:
            print_table([HEADER, *sorted({_row(a) for a in removed})])
    return 0


def main(argv: list[str] | None = None) -> int:
    """``logsource acls ...``; returns the exit status (2: bad arguments, 1: failed)."""
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except LogSourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
