"""``logsource transactions``: inspect Kafka clients' transactions and abort a hanging one (Kafka's
``kafka-transactions`` tool)::

    logsource transactions list [--state Ongoing] [--producer-id PID] [--duration-ms MS] [--pattern REGEX]
    logsource transactions describe ID                  # state, producer id/epoch, timeout, start, partitions
    logsource transactions describe-producers --topic T --partition P [--broker-id B]
    logsource transactions abort --topic T --partition P --start-offset O

``abort`` ends the transaction whose first record in T-P is at offset O (see ``describe-producers``'
CURRENT-TXN-START-OFFSET): the partition's leader writes an ABORT marker for its producer, so
``read_committed`` readers move past it. Each command exits 1 on a Kafka error (named with its code).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime, timezone

from .cli_args import add_common, client_options, print_table
from .client.admin import Admin
from .errors import LogSourceError


def _admin(args: argparse.Namespace) -> Admin:
    return Admin(args.bootstrap_servers, request_timeout_ms=args.timeout * 1000, **client_options(args))


def _ms(ts: int) -> str:
    if ts < 0:
        return "-"
    return datetime.fromtimestamp(ts / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def cmd_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        listed = admin.list_transactions(
            args.state or (), args.producer_id or (), args.duration_ms, args.pattern
        )
    if not listed:
        print("no transactions")
        return 0
    print_table(
        [("TRANSACTIONAL-ID", "PRODUCER-ID", "STATE")]
        + [(t.transactional_id, str(t.producer_id), t.state) for t in listed]
    )
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        (d,) = admin.describe_transactions([args.transactional_id]).values()
    if isinstance(d, LogSourceError):
        raise d
    print_table(
        [
            (
                "TRANSACTIONAL-ID",
                "PRODUCER-ID",
                "PRODUCER-EPOCH",
                "STATE",
                "TIMEOUT-MS",
                "START",
                "PARTITIONS",
            ),
            (
                d.transactional_id,
                str(d.producer_id),
                str(d.producer_epoch),
                d.state,
                str(d.timeout_ms),
                _ms(d.start_time_ms),
                ",".join(f"{t}-{p}" for t, p in d.partitions) or "-",
            ),
        ]
    )
    return 0


def cmd_describe_producers(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        producers = admin.describe_producers(args.topic, args.partition, args.broker_id)
    if not producers:
        print(f"no producers in {args.topic}-{args.partition}")
        return 0
    print_table(
        [
            (
                "PRODUCER-ID",
                "PRODUCER-EPOCH",
                "LAST-SEQUENCE",
                "LAST-TIMESTAMP",
                "COORDINATOR-EPOCH",
                "CURRENT-TXN-START-OFFSET",
            )
        ]
        + [
            (
                str(p.producer_id),
                str(p.producer_epoch),
                str(p.last_sequence),
                _ms(p.last_timestamp),
                str(p.coordinator_epoch),
                str(p.current_txn_start_offset),
            )
            for p in producers
        ]
    )
    return 0


def cmd_abort(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        p = admin.abort_transaction(args.topic, args.partition, args.start_offset)
    print(
        f"aborted producer {p.producer_id} (epoch {p.producer_epoch})'s transaction in "
        f"{args.topic}-{args.partition} starting at offset {args.start_offset}"
    )
    return 0


def _partition_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--topic", "-t", required=True, help="the topic")
    sp.add_argument("--partition", "-p", type=int, required=True, help="the partition")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="logsource transactions",
        description="List and describe Kafka clients' transactions, a partition's producers, and abort a "
        "hanging transaction (Kafka's kafka-transactions tool).",
    )
    sub = p.add_subparsers(dest="command", required=True)

    ls = sub.add_parser("list", help="transactional ids, their producer id and state")
    ls.add_argument(
        "--state", action="append", help="only this state (Ongoing, Empty, CompleteCommit...); repeatable"
    )
    ls.add_argument("--producer-id", type=int, action="append", help="only this producer id; repeatable")
    ls.add_argument(
        "--duration-ms", type=int, default=-1, help="only transactions running at least this long"
    )
    ls.add_argument("--pattern", help="only transactional ids matching this regular expression")
    add_common(ls)
    ls.set_defaults(func=cmd_list)

    de = sub.add_parser("describe", help="one transactional id's state at its coordinator")
    de.add_argument("transactional_id", metavar="ID", help="the transactional id")
    add_common(de)
    de.set_defaults(func=cmd_describe)

    dp = sub.add_parser("describe-producers", help="the producers a partition's leader knows")
    _partition_args(dp)
    dp.add_argument("--broker-id", type=int, help="ask this broker instead of the leader")
    add_common(dp)
    dp.set_defaults(func=cmd_describe_producers)

    ab = sub.add_parser("abort", help="abort the hanging transaction starting at an offset of a partition")
    _partition_args(ab)
    ab.add_argument("--start-offset", type=int, required=True, help="the offset of its first record")
    add_common(ab)
    ab.set_defaults(func=cmd_abort)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``logsource transactions ...``: 0 on success, 1 on a typed error (Kafka's code named), 2 on usage."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return int(args.func(args) or 0)
    except LogSourceError as e:
        print(f"error: {type(e).__name__} ({e.code}): {e}", file=sys.stderr)
        return 1
