"""The ``logsource`` command line.

Built-in commands talk to a broker with the clients: ``topics``, ``produce``,
``consume``, ``groups``. Commands in :data:`DELEGATED` hand their arguments
to another module's ``main(argv) -> int`` (which does its own argparse,
``--help`` included); adding a command there is one line.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import datetime

from .cli_args import add_common, client_options, key_values, print_table
from .errors import ConfigError, LogSourceError, TopicAlreadyExists, UnknownTopicOrPartition

#: name -> (module with ``main(argv) -> int``, one-line help). Add a line to add a command.
DELEGATED: dict[str, tuple[str, str]] = {
    "broker": ("pyspark_logsource.broker.process", "run a broker: --config FILE [--override key=value ...]"),
    "etl": (
        "pyspark_logsource.jobs.etl",
        "exactly-once load of topics into files or an Iceberg table with Spark",
    ),
    "demo": ("pyspark_logsource.demo", "run the demo job on an embedded broker"),
    "cluster": (
        "pyspark_logsource.broker.cluster.local",
        "start|stop|status a local cluster: ZooKeeper and N brokers",
    ),
    "reassign": ("pyspark_logsource.reassign", "execute|list|cancel replica moves, elect-leaders"),
    "users": (
        "pyspark_logsource.broker.users",
        "set|list|delete users' SCRAM credentials (offline or online)",
    ),
    "transactions": ("pyspark_logsource.transactions", "list|describe|describe-producers|abort transactions"),
    "acls": ("pyspark_logsource.broker.acl_cli", "add|list|remove ACLs (kafka-acls' options)"),
    "quotas": ("pyspark_logsource.broker.quotas.cli", "set|list|remove client quotas (users, client-ids)"),
}


# ------------------------------------------------------------------ topics


def _topics(args: argparse.Namespace) -> int:
    from .client import Admin

    with Admin(
        args.bootstrap_servers, request_timeout_ms=args.timeout * 1000, **client_options(args)
    ) as admin:
        if args.action == "create":
            if args.partitions < 1:
                raise ConfigError(f"--partitions must be 1 or more, got {args.partitions}")
            try:
                admin.create_topic(
                    args.topic,
                    args.partitions,
                    key_values(args.config),
                    replication_factor=args.replication_factor,
                )
            except TopicAlreadyExists:
                if not args.if_not_exists:
                    raise
                n = len(admin.describe_topic(args.topic).partitions)
                print(f"Topic {args.topic} exists already, with {n} partition(s); nothing changed.")
                return 0
            rf = "" if args.replication_factor is None else f", replication factor {args.replication_factor}"
            print(f"Created topic {args.topic} with {args.partitions} partition(s){rf}.")
        elif args.action == "alter":
            return _alter_topic(admin, args)
        elif args.action == "delete":
            admin.delete_topic(args.topic)
            print(f"Deleted topic {args.topic}.")
        elif args.action == "delete-records":
            parts = args.partition if args.partition is not None else admin.partitions_for(args.topic)
            starts = admin.delete_records({(args.topic, p): args.before for p in parts})
            print_table(
                [("TOPIC", "PARTITION", "LOG-START-OFFSET")]
                + [(t, str(p), str(o)) for (t, p), o in starts.items()]
            )
        elif args.action == "list":
            for name in admin.list_topics(include_internal=args.include_internal):
                print(name)
        elif args.action == "describe":
            names = [args.topic] if args.topic else admin.list_topics(include_internal=args.include_internal)
            for name in names:
                d = admin.describe_topic(name)
                ends = _offsets(admin, name, d.partitions, "latest")
                starts = _offsets(admin, name, d.partitions, "earliest")
                rf = max((len(p.replicas) for p in d.partitions), default=0)
                configs = ",".join(f"{k}={v}" for k, v in sorted(admin.topic_configs(name).items()))
                print(
                    f"Topic: {d.name}\tPartitionCount: {len(d.partitions)}\tReplicationFactor: {rf}\tConfigs: {configs}"
                )
                for p in d.partitions:
                    tp = (name, p.partition)
                    print(
                        f"\tTopic: {d.name}\tPartition: {p.partition}\tLeader: {p.leader}\tLeaderEpoch: {p.leader_epoch}"
                        f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
                        f"\tLogStartOffset: {starts.get(tp, '-')}\tLogEndOffset: {ends.get(tp, '-')}"
                    )
    return 0


def _alter_topic(admin, args: argparse.Namespace) -> int:
    from .protocol.admin_messages import RESOURCE_TOPIC

    config, delete = key_values(args.config), list(args.delete_config or [])
    if args.partitions is None and not config and not delete:
        raise ConfigError("nothing to alter: give --partitions, --config or --delete-config")
    if args.partitions is not None:
        admin.create_partitions(args.topic, args.partitions)
        print(f"Topic {args.topic} now has {args.partitions} partition(s).")
    if config or delete:
        admin.incremental_alter_configs(RESOURCE_TOPIC, args.topic, config, delete)
        changed = [f"{k}={v}" for k, v in sorted(config.items())] + [f"-{k}" for k in delete]
        print(f"Altered the config of topic {args.topic}: {', '.join(changed)}.")
    return 0


def _offsets(admin, name: str, partitions: list, spec: str) -> dict:
    # a partition without a leader (its replicas are all down) has no offsets to show; the others do
    tps = [(name, p.partition) for p in partitions]
    try:
        return admin.list_offsets(tps, spec)
    except LogSourceError:
        out = {}
        for tp in tps:
            try:
                out.update(admin.list_offsets([tp], spec))
            except LogSourceError:
                pass
        return out


# ------------------------------------------------------------------ produce


def _produce(args: argparse.Namespace) -> int:
    from .client import Admin, Producer

    timeout_ms = args.timeout * 1000
    # Ask first, with the same timeout: a broker that does not answer fails here at once, and a missing
    # topic is created (or refused) visibly instead of by the producer's first Metadata request.
    with Admin(args.bootstrap_servers, request_timeout_ms=timeout_ms, **client_options(args)) as admin:
        created = _auto_create(admin, args.topic)
    progress = _Progress()
    try:
        with Producer(
            args.bootstrap_servers,
            **client_options(args),
            acks=args.acks,
            linger_ms=args.linger_ms,
            compression=args.compression,
            batch_size=args.batch_size,
            max_block_ms=timeout_ms,
            delivery_timeout_ms=timeout_ms,
            request_timeout_ms=min(timeout_ms, 30000),
        ) as producer:
            if created and not args.quiet:
                n = len(producer.partitions_for(args.topic))
                print(
                    f"Created topic {args.topic} with {n} partition(s): the broker creates a topic on first "
                    f"use (auto.create.topics.enable=true).",
                    file=sys.stderr,
                )
            try:
                _send_lines(producer, args, progress)
            except KeyboardInterrupt:
                producer.flush(args.timeout)  # what was read is sent before the count is told
                _check(progress.futures)
                raise
    except KeyboardInterrupt:
        if not args.quiet:
            print(f"Produced {progress.sent} message(s) to {args.topic} (interrupted).", file=sys.stderr)
        raise
    if not args.quiet:
        print(f"Produced {progress.sent} message(s) to {args.topic}.", file=sys.stderr)
    return 0


class _Progress:
    """Messages sent (produce) or read (consume) so far, for the count printed at the end or on Ctrl-C."""

    def __init__(self) -> None:
        self.sent = 0
        self.futures: list = []


def _auto_create(admin, topic: str) -> bool:
    """True if ``topic`` was missing and the broker created it; a clear error when it does not create topics."""
    from .errors import LeaderNotAvailable

    try:
        admin.describe_topic(topic)
        return False
    except UnknownTopicOrPartition:
        pass
    try:
        admin.describe_topic(topic, allow_auto_create=True)
    except LeaderNotAvailable:
        pass  # a cluster created it; its leaders are being elected (the producer waits for them)
    except UnknownTopicOrPartition:
        raise UnknownTopicOrPartition(
            f"topic {topic!r} does not exist and the broker does not create topics on first use "
            f"(auto.create.topics.enable=false); create it with: logsource topics create {topic}"
        ) from None
    return True


def _send_lines(producer, args: argparse.Namespace, progress: _Progress) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    sep = args.key_separator.encode() if args.key_separator is not None else None
    stream = sys.stdin.buffer
    line_no = 0
    futures = progress.futures
    rest = b""
    while True:
        chunk = stream.read1(1 << 20) if hasattr(stream, "read1") else stream.read(1 << 20)
        data = rest + chunk
        if not chunk:
            lines = data.split(b"\n") if data else []
            rest = b""
        else:
            lines = data.split(b"\n")
            rest = lines.pop()
        # Lines are turned into Arrow columns and sent as whole batches (no per-line send()).
        if lines:
            values = pa.array(lines, pa.binary())
            table_cols = {}
            if sep is not None:
                parts = pc.split_pattern(values, sep, max_splits=1)
                lens = pc.list_value_length(parts).to_numpy(zero_copy_only=False)
                bad = (lens < 2).nonzero()[0]
                if len(bad):
                    good = int(bad[0])
                    if good:
                        t = pa.table(
                            {
                                "key": pc.list_element(parts.slice(0, good), 0),
                                "value": pc.list_element(parts.slice(0, good), 1),
                            }
                        )
                        futures.extend(producer.send_arrow(args.topic, t, partition=args.partition))
                        progress.sent += good
                    producer.flush()
                    _check(futures)
                    raise ConfigError(
                        f"line {line_no + good + 1} has no key separator {args.key_separator!r}; "
                        f"{progress.sent} line(s) before it were sent"
                    )
                table_cols["key"] = pc.list_element(parts, 0)
                table_cols["value"] = pc.list_element(parts, 1)
            else:
                table_cols["value"] = values
            futures.extend(producer.send_arrow(args.topic, pa.table(table_cols), partition=args.partition))
            progress.sent += len(lines)
            line_no += len(lines)
            if len(futures) > 64:
                _check(futures[:32])
                del futures[:32]
        if not chunk:
            break
    producer.flush()
    _check(futures)


def _check(futures: list) -> None:
    for f in futures:
        f.result()


# ------------------------------------------------------------------ consume


def _consume(args: argparse.Namespace) -> int:
    from .client import Admin, Consumer

    if args.offset is not None and args.partition is None:
        raise ConfigError("--offset needs --partition")
    reset = "earliest" if args.from_beginning else "latest"
    out = sys.stdout.buffer
    timeout_ms = args.timeout * 1000
    with Admin(args.bootstrap_servers, request_timeout_ms=timeout_ms, **client_options(args)) as admin:
        parts = admin.partitions_for(args.topic)
    if args.partition is not None:
        if args.partition not in parts:
            raise UnknownTopicOrPartition(f"topic {args.topic!r} has no partition {args.partition}")
        parts = [args.partition]
    progress = _Progress()
    try:
        with Consumer(
            args.bootstrap_servers,
            **client_options(args),
            group_id=args.group,
            auto_offset_reset=reset,
            request_timeout_ms=timeout_ms,
        ) as consumer:
            _read(consumer, [(args.topic, p) for p in parts], args, out, progress)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the with-block has closed the consumer (left the group)
        if not args.quiet:
            print(f"Processed a total of {progress.sent} messages (interrupted)", file=sys.stderr)
        raise
    if not args.quiet:
        print(f"Processed a total of {progress.sent} messages", file=sys.stderr)
    return 0


def _read(consumer, tps: list, args: argparse.Namespace, out, progress: _Progress) -> None:
    from .errors import IllegalGeneration, RebalanceInProgress, UnknownMemberId

    if args.group is not None and args.partition is None:
        consumer.subscribe([args.topic])  # a member of the group: it gets its share of the partitions
    else:
        consumer.assign(tps)
    if args.offset is not None:
        if args.offset == "earliest":
            consumer.seek_to_beginning(*tps)
        elif args.offset == "latest":
            consumer.seek_to_end(*tps)
        else:
            consumer.seek(tps[0], int(args.offset))
    elif args.group is None:
        # No group: the console consumer starts at the beginning or the end.
        consumer.seek_to_beginning() if args.from_beginning else consumer.seek_to_end()
    idle_ms = 0.0
    limit = args.max_messages
    while limit is None or progress.sent < limit:
        want = 500 if limit is None else min(500, limit - progress.sent)
        msgs = consumer.poll(timeout_ms=200, max_records=want)
        if not msgs:
            idle_ms += 200
            if args.timeout_ms is not None and idle_ms >= args.timeout_ms:
                break
            continue
        idle_ms = 0.0
        progress.sent += len(msgs)  # counted when read: a Ctrl-C during the write below still counts them
        out.write(_format(msgs, args))
        out.flush()
        if args.group is not None:
            try:
                consumer.commit()
            except (RebalanceInProgress, IllegalGeneration, UnknownMemberId):
                pass  # a rebalance fenced this commit: the partitions' next owner re-reads from the last one


def _format(msgs: list, args: argparse.Namespace) -> bytes:
    sep = args.key_separator.encode()
    parts = []
    for m in msgs:  # console output of a bounded poll, not a hot path
        line = m.value if m.value is not None else b"null"
        if args.print_key:
            line = (m.key if m.key is not None else b"null") + sep + line
        if args.print_offset:
            line = f"{m.partition}:{m.offset}".encode() + sep + line
        parts.append(line)
    return b"\n".join(parts) + b"\n"


# ------------------------------------------------------------------ groups


def _groups(args: argparse.Namespace) -> int:
    from .client import Admin

    with Admin(
        args.bootstrap_servers, request_timeout_ms=args.timeout * 1000, **client_options(args)
    ) as admin:
        if args.action == "list":
            print_table(
                [("GROUP", "STATE", "PROTOCOL-TYPE")]
                + [(x.group_id, x.state, x.protocol_type or "-") for x in admin.list_groups()]
            )
        elif args.action == "describe":
            _describe_group(admin.describe_group(args.group))
        elif args.action == "delete":
            failed = 0
            for gid in args.group:
                try:
                    admin.delete_group(gid)
                    print(f"Deleted group {gid}.")
                except LogSourceError as e:
                    failed += 1
                    print(f"error: group {gid}: {type(e).__name__}: {e}", file=sys.stderr)
            return 1 if failed else 0
        elif args.action == "delete-offsets":
            gone = admin.delete_group_offsets(args.group, args.topic, args.partition)
            print(f"GROUP {args.group}: deleted the committed offsets of {args.topic}")
            print_table([("TOPIC", "PARTITION")] + [(t, str(p)) for t, p in gone])
        else:
            to: str | datetime = "earliest" if args.to_earliest else "latest"
            if args.to_datetime is not None:
                try:
                    to = datetime.fromisoformat(args.to_datetime)
                except ValueError:
                    raise ConfigError(
                        f"--to-datetime wants an ISO 8601 time, got {args.to_datetime!r}"
                    ) from None
            new = admin.reset_offsets(
                args.group, args.topic, to, partitions=args.partition, dry_run=args.dry_run
            )
            print(f"GROUP {args.group}: {'would reset' if args.dry_run else 'reset'} offsets of {args.topic}")
            print_table(
                [("TOPIC", "PARTITION", "NEW-OFFSET")] + [(t, str(p), str(o)) for (t, p), o in new.items()]
            )
    return 0


def _describe_group(d) -> None:
    members = {m.member_id: m for m in d.members}
    print(f"GROUP {d.group_id}  STATE {d.state}  PROTOCOL {d.protocol or '-'}  MEMBERS {len(d.members)}")
    header = ("TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER-ID", "HOST", "CLIENT-ID")
    rows = []
    for r in d.offsets:
        m = members.get(r.member_id or "")
        rows.append(
            (
                r.topic,
                str(r.partition),
                "-" if r.committed is None else str(r.committed),
                str(r.log_end),
                "-" if r.lag is None else str(r.lag),
                m.member_id if m else "-",
                m.host if m else "-",
                m.client_id if m else "-",
            )
        )
    print_table([header] + rows)
    if d.members:
        print()
        print_table(
            [("MEMBER-ID", "HOST", "CLIENT-ID", "ASSIGNMENT")]
            + [
                (
                    m.member_id,
                    m.host,
                    m.client_id or "-",
                    ",".join(f"{t}-{p}" for t, p in m.assignment) or "-",
                )
                for m in d.members
            ]
        )


# ------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of the built-in commands (delegated ones are listed for --help)."""
    p = argparse.ArgumentParser(
        prog="logsource", description="A Kafka-style commit log for log processing, native to PySpark."
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_) in DELEGATED.items():
        sub.add_parser(name, help=help_, add_help=False)

    t = sub.add_parser("topics", help="create, list, describe, alter and delete topics")
    tsub = t.add_subparsers(dest="action", metavar="ACTION", required=True)
    c = tsub.add_parser("create", help="create a topic")
    c.add_argument("topic")
    c.add_argument("--partitions", type=int, default=1, help="number of partitions (default 1)")
    c.add_argument(
        "--replication-factor",
        type=int,
        default=None,
        help="copies of each partition (default: the brokers' default.replication.factor)",
    )
    c.add_argument(
        "--config", action="append", metavar="KEY=VALUE", help="topic config override (repeatable)"
    )
    c.add_argument("--if-not-exists", action="store_true", help="succeed if the topic exists already")
    add_common(c)
    c = tsub.add_parser("list", help="list topic names")
    c.add_argument("--include-internal", action="store_true", help="also list internal __ topics")
    add_common(c)
    c = tsub.add_parser("describe", help="partitions, leaders and offsets of a topic (all when omitted)")
    c.add_argument("topic", nargs="?")
    c.add_argument("--include-internal", action="store_true", help="with no topic: include internal topics")
    add_common(c)
    c = tsub.add_parser("alter", help="add partitions to a topic, or set or delete its config overrides")
    c.add_argument("topic")
    c.add_argument("--partitions", type=int, default=None, help="the new (larger) number of partitions")
    c.add_argument("--config", action="append", metavar="KEY=VALUE", help="set a topic config (repeatable)")
    c.add_argument(
        "--delete-config", action="append", metavar="KEY", help="remove a topic config override (repeatable)"
    )
    add_common(c)
    c = tsub.add_parser("delete", help="delete a topic and its data")
    c.add_argument("topic")
    add_common(c)
    c = tsub.add_parser("delete-records", help="delete the records before an offset (moves the log start)")
    c.add_argument("topic")
    c.add_argument(
        "--partition", type=int, action="append", help="only this partition (repeatable; default all)"
    )
    c.add_argument("--before", type=int, required=True, help="first offset to keep; -1: the high watermark")
    add_common(c)
    t.set_defaults(func=_topics)

    c = sub.add_parser("produce", help="send lines from stdin, one message per line")
    c.add_argument("topic")
    c.add_argument("--key-separator", help="split each line into key and value at the first SEP")
    c.add_argument("--partition", type=int, help="send every line to this partition")
    c.add_argument(
        "--acks", default="1", choices=["0", "1", "all", "-1"], help="acknowledgements (default 1)"
    )
    c.add_argument(
        "--compression", choices=["none", "gzip", "lz4", "zstd"], default=None, help="batch compression"
    )
    c.add_argument("--linger-ms", type=float, default=5.0, help="batching delay (default 5)")
    c.add_argument("--batch-size", type=int, default=16384, help="batch size in bytes (default 16384)")
    c.add_argument("--quiet", "-q", action="store_true", help="no summary on stderr")
    add_common(c)
    c.set_defaults(func=_produce)

    c = sub.add_parser("consume", help="print messages to stdout, one per line")
    c.add_argument("topic")
    c.add_argument(
        "--from-beginning", action="store_true", help="start at the earliest offset (default: the end)"
    )
    c.add_argument("--partition", type=int, help="read only this partition")
    c.add_argument("--offset", help="start offset in --partition: a number, earliest or latest")
    c.add_argument("--max-messages", type=int, help="exit after this many messages")
    c.add_argument("--timeout-ms", type=float, help="exit when no message arrived for this long")
    c.add_argument("--group", help="consumer group: start from its committed offsets and commit as we go")
    c.add_argument("--print-key", action="store_true", help="print KEY<sep>VALUE")
    c.add_argument("--print-offset", action="store_true", help="prefix PARTITION:OFFSET<sep>")
    c.add_argument(
        "--key-separator", default="\t", help="separator for --print-key/--print-offset (default TAB)"
    )
    c.add_argument("--quiet", "-q", action="store_true", help="no summary on stderr")
    add_common(c)
    c.set_defaults(func=_consume)

    g = sub.add_parser("groups", help="consumer groups: list, describe, reset offsets")
    gsub = g.add_subparsers(dest="action", metavar="ACTION", required=True)
    c = gsub.add_parser("list", help="every group with its state")
    add_common(c)
    c = gsub.add_parser("describe", help="state, members, assignment, committed and log end offsets, lag")
    c.add_argument("group")
    add_common(c)
    c = gsub.add_parser("delete", help="delete empty groups and their committed offsets")
    c.add_argument("group", nargs="+")
    add_common(c)
    c = gsub.add_parser("delete-offsets", help="delete a group's committed offsets of a topic")
    c.add_argument("group")
    c.add_argument("--topic", required=True)
    c.add_argument("--partition", type=int, action="append", help="only this partition (repeatable)")
    add_common(c)
    c = gsub.add_parser("reset-offsets", help="set an empty group's committed offsets of a topic")
    c.add_argument("group")
    c.add_argument("--topic", required=True)
    c.add_argument("--partition", type=int, action="append", help="only this partition (repeatable)")
    to = c.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the earliest offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument(
        "--to-datetime", metavar="ISO", help="the first offset at or after this time (naive: local)"
    )
    c.add_argument("--dry-run", action="store_true", help="print the new offsets without committing them")
    add_common(c)
    g.set_defaults(func=_groups)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``logsource`` script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        module = importlib.import_module(DELEGATED[argv[0]][0])
        return int(module.main(argv[1:]) or 0)
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    # `logsource consume ... | head` should end quietly; the previous disposition comes back when
    # main() returns, for a program (or a test session) that calls main() in its own process
    previous = signal.signal(signal.SIGPIPE, signal.SIG_DFL) if hasattr(signal, "SIGPIPE") else None
    # SIGTERM ends a command as Ctrl-C does: counts printed, `consume --group` leaves its group at once
    # (a member killed without leaving holds its partitions until its session times out)
    on_term = _on_sigterm if threading.current_thread() is threading.main_thread() else None
    previous_term = signal.signal(signal.SIGTERM, on_term) if on_term is not None else None
    try:
        if args.command == "produce" and args.acks in ("all", "-1"):
            args.acks = -1
        elif args.command == "produce":
            args.acks = int(args.acks)
        return int(args.func(args) or 0)
    except LogSourceError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except Terminated:
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGPIPE, previous)
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that it unwinds like Ctrl-C."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
