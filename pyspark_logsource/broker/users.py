"""``logsource users set|list|delete``: users' SCRAM credentials, offline or through a running broker.

Offline (``--config server.properties``, no ``--bootstrap-servers``): writes the broker's credential store
directly, as Kafka's ``kafka-storage format --add-scram`` does before the first start — the data
directory's ``scram-credentials.json`` on a single broker, ZooKeeper's ``/config/users/<user>`` when
``zookeeper.connect`` is set. Online (``--bootstrap-servers``): AlterUserScramCredentials and
DescribeUserScramCredentials, with ``--command-config client.properties`` for a secured listener.

The password is read from ``--password-file`` (first line), never from the command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..cli_args import bootstrap_default, print_table
from ..errors import LogSourceError
from .config import BrokerConfig, command_config_options, parse_overrides
from .security.credential_store import CredentialStore, FileCredentialStore, ZkCredentialStore
from .security.scram_credentials import HASHES, MIN_ITERATIONS, from_password


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="logsource users", description="Manage users' SCRAM credentials.")
    sub = ap.add_subparsers(dest="action", required=True)
    for name, help_ in (
        ("set", "create or replace a user's credential for a mechanism"),
        ("list", "list the users and their mechanisms"),
        ("delete", "delete a user's credential for a mechanism"),
    ):
        p = sub.add_parser(name, help=help_)
        if name != "list":
            p.add_argument("name", help="the user name")
            p.add_argument("--mechanism", required=True, choices=sorted(HASHES))
        if name == "set":
            p.add_argument("--password-file", required=True, metavar="FILE", help="first line: the password")
            p.add_argument(
                "--iterations", type=int, default=MIN_ITERATIONS, help="PBKDF2 iterations (>= 4096)"
            )
        where = p.add_mutually_exclusive_group(required=True)
        where.add_argument(
            "--config", "-c", metavar="FILE", help="server.properties: write the store offline"
        )
        where.add_argument(
            "--bootstrap-servers",
            "-b",
            metavar="HOST:PORT",
            nargs="?",
            const=bootstrap_default(),
            help="a running broker (the API)",
        )
        p.add_argument("--override", "-o", action="append", default=[], metavar="KEY=VALUE")
        p.add_argument("--command-config", metavar="FILE", help="client.properties for a secured listener")
    return ap


def _password(path: str) -> str:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise LogSourceError(f"cannot read --password-file {path}: {e.strerror or e}") from None
    if not lines or not lines[0]:
        raise LogSourceError(f"--password-file {path} is empty")
    return lines[0]


def _offline_store(config: BrokerConfig) -> CredentialStore:
    if not config.cluster_mode:
        return FileCredentialStore(config.log_dirs[0])
    from .cluster.zk import ZkClient

    assert config.zookeeper_connect is not None
    zk = ZkClient(config.zookeeper_connect, config.zookeeper_session_timeout_ms)
    zk.start()
    return ZkCredentialStore(zk)


def _offline(args: Any) -> int:
    config = BrokerConfig.load(args.config, parse_overrides(args.override))
    store = _offline_store(config)
    try:
        if args.action == "set":
            store.set(
                args.name,
                args.mechanism,
                from_password(args.mechanism, _password(args.password_file), args.iterations),
            )
            print(f"set the {args.mechanism} credential of user {args.name}")
        elif args.action == "delete":
            store.delete(args.name, args.mechanism)
            print(f"deleted the {args.mechanism} credential of user {args.name}")
        else:
            rows = [
                (u, m, str(c.iterations))
                for u, creds in sorted(store.snapshot().items())
                for m, c in sorted(creds.items())
            ]
            print_table([("USER", "MECHANISM", "ITERATIONS"), *rows])
    finally:
        zk = getattr(store, "zk", None)
        if zk is not None:
            zk.stop()
    return 0


def _online(args: Any) -> int:
    from ..client import Admin

    options = command_config_options(args.command_config)
    with Admin(args.bootstrap_servers, **options) as admin:
        if args.action == "set":
            admin.set_scram_credential(
                args.name, args.mechanism, _password(args.password_file), args.iterations
            )
            print(f"set the {args.mechanism} credential of user {args.name}")
        elif args.action == "delete":
            admin.delete_scram_credential(args.name, args.mechanism)
            print(f"deleted the {args.mechanism} credential of user {args.name}")
        else:
            rows = [
                (u, m, str(i)) for u, creds in sorted(admin.scram_credentials().items()) for m, i in creds
            ]
            print_table([("USER", "MECHANISM", "ITERATIONS"), *rows])
    return 0


def main(argv: list[str] | None = None) -> int:
    """``logsource users ...``; returns the exit status (2: bad arguments or config, 1: failed)."""
    args = build_parser().parse_args(argv)
    try:
        return _offline(args) if args.config else _online(args)
    except LogSourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
