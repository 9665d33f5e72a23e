"""``logsource reassign``: move partition replicas between brokers and elect leaders (Kafka's
``kafka-reassign-partitions`` and ``kafka-leader-election``)::

    logsource reassign execute --topic T --partition 0 --replicas 2,3,4   # the first replica: preferred leader
    logsource reassign execute --file plan.json        # {"version":1,"partitions":[{"topic":"T","partition":0,"replicas":[2,3,4]}]}
    logsource reassign list [--topic T]                # in progress: replicas, adding, removing
    logsource reassign cancel --topic T --partition 0  # (or --file plan.json)
    logsource reassign elect-leaders [--topic T [--partition P]] [--type preferred|unclean]

A reassignment copies the partition to the new brokers, which join the in-sync replicas; then the old
ones are dropped and their data deleted. ``execute`` returns once it has started (``list`` shows it
until it is done). Every command prints one line per partition and exits 1 if any of them failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .cli_args import add_common, client_options, print_table
from .client.admin import Admin
from .errors import ConfigError, LogSourceError

Plan = dict[tuple[str, int], list[int]]


def parse_replicas(text: str) -> list[int]:
    """``1,2,3`` -> [1, 2, 3] (ConfigError otherwise)."""
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out:
        raise ConfigError(f"--replicas must be broker ids separated by commas, e.g. 1,2,3; got {text!r}")
    return out


def read_plan(path: str) -> Plan:
    """A Kafka reassignment JSON file: ``{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}``."""
    try:
        d = json.loads(Path(path).read_text())
        return {
            (str(p["topic"]), int(p["partition"])): [int(b) for b in p["replicas"]] for p in d["partitions"]
        }
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"cannot read the reassignment file {path!r}: {e}") from e


def _target(args: argparse.Namespace, need_replicas: bool) -> Plan:
    if args.file:
        if args.topic is not None or args.partition is not None:
            raise ConfigError("give either --file or --topic/--partition")
        return read_plan(args.file)
    if args.topic is None or args.partition is None:
        raise ConfigError("--topic and --partition are needed (or --file)")
    if need_replicas and not args.replicas:
        raise ConfigError("--replicas is needed (or --file)")
    return {(args.topic, args.partition): parse_replicas(args.replicas) if need_replicas else []}


def _report(results: dict[tuple[str, int], LogSourceError | None], ok: str) -> int:
    if not results:
        print("nothing to do")
        return 0
    rows = [("TOPIC", "PARTITION", "RESULT")]
    failed = False
    for (t, p), err in sorted(results.items()):
        failed |= err is not None
        rows.append((t, str(p), ok if err is None else f"{type(err).__name__} ({err.code}): {err}"))
    print_table(rows)
    return 1 if failed else 0


def _admin(args: argparse.Namespace) -> Admin:
    return Admin(args.bootstrap_servers, request_timeout_ms=args.timeout * 1000, **client_options(args))


def cmd_execute(args: argparse.Namespace) -> int:
    plan = _target(args, need_replicas=True)
    with _admin(args) as admin:
        results = admin.alter_partition_reassignments(plan, not args.keep_replication_factor)
    return _report(results, "started (see 'logsource reassign list')")


def cmd_cancel(args: argparse.Namespace) -> int:
    plan = _target(args, need_replicas=False)
    with _admin(args) as admin:
        results = admin.alter_partition_reassignments(dict.fromkeys(plan))
    return _report(results, "cancelled")


def cmd_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        ongoing = admin.list_partition_reassignments()
    rows = [("TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING")]
    for (t, p), o in sorted(ongoing.items()):
        if args.topic is None or t == args.topic:
            rows.append(
                (
                    t,
                    str(p),
                    ",".join(map(str, o.replicas)),
                    ",".join(map(str, o.adding)),
                    ",".join(map(str, o.removing)),
                )
            )
    if len(rows) == 1:
        print("no reassignment in progress")
    else:
        print_table(rows)
    return 0


def cmd_elect(args: argparse.Namespace) -> int:
    if args.partition is not None and args.topic is None:
        raise ConfigError("--partition needs --topic")
    with _admin(args) as admin:
        if args.topic is None:
            partitions = None
        elif args.partition is None:
            partitions = [(args.topic, p) for p in admin.partitions_for(args.topic)]
        else:
            partitions = [(args.topic, args.partition)]
        results = admin.elect_leaders(partitions, args.type)
    if partitions is None and not results:
        print(
            "every partition is led by its preferred replica"
            if args.type == "preferred"
            else "every partition has a leader"
        )
        return 0
    return _report(results, "elected")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="logsource reassign",
        description="Move partition replicas between brokers (a copy, then the old replicas go), list or "
        "cancel the moves in progress, and elect leaders. Sent to the cluster's controller.",
        epilog="reassignment file (Kafka's): "
        '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}]}',
    )
    sub = p.add_subparsers(dest="command", required=True)

    def partition_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--topic", "-t", help="the topic")
        sp.add_argument("--partition", "-p", type=int, help="the partition")
        sp.add_argument(
            "--file", "-f", metavar="JSON", help="a Kafka reassignment file instead of --topic/--partition"
        )
        add_common(sp)

    ex = sub.add_parser("execute", help="start moving partitions to the given replicas")
    partition_args(ex)
    ex.add_argument("--replicas", "-r", metavar="ID,ID,...", help="target broker ids; the first leads")
    ex.add_argument(
        "--keep-replication-factor",
        action="store_true",
        help="refuse a target with another number of replicas (INVALID_REPLICATION_FACTOR)",
    )
    ex.set_defaults(func=cmd_execute)

    ls = sub.add_parser("list", help="the reassignments in progress")
    ls.add_argument("--topic", "-t", help="only this topic")
    add_common(ls)
    ls.set_defaults(func=cmd_list)

    ca = sub.add_parser("cancel", help="cancel reassignments in progress (back to the original replicas)")
    partition_args(ca)
    ca.set_defaults(func=cmd_cancel)

    el = sub.add_parser(
        "elect-leaders",
        help="give partitions back to their preferred replica (or, unclean, a leader to leaderless ones)",
    )
    el.add_argument("--topic", "-t", help="this topic's partitions (default: every partition)")
    el.add_argument("--partition", "-p", type=int, help="only this partition")
    el.add_argument(
        "--type",
        choices=["preferred", "unclean"],
        default="preferred",
        help="preferred (default): the first replica of the assignment leads if in sync; unclean: a "
        "leaderless partition gets any live replica (records may be lost)",
    )
    add_common(el)
    el.set_defaults(func=cmd_elect)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``logsource reassign ...``: 0 on success, 1 if a partition failed or on a typed error, 2 on usage."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return int(args.func(args) or 0)
    except LogSourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
