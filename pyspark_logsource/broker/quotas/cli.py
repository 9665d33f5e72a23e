"""``logsource quotas set|list|remove``: client quotas through a running broker (AlterClientQuotas and
DescribeClientQuotas), as Kafka's ``kafka-configs --entity-type users|clients`` does.

The entity: ``--user NAME``, ``--client-id NAME``, or both (a (user, client-id) quota). ``--user`` or
``--client-id`` given without a name, together with ``--default``, names the default of that type (Kafka's
``--entity-default``); ``--user-default`` and ``--client-default`` say the same in one flag. Examples::

    logsource quotas set --user alice --producer-byte-rate 1048576
    logsource quotas set --user --default --consumer-byte-rate 2097152     # every user without its own
    logsource quotas set --user alice --client-default --request-percentage 50
    logsource quotas list [--user alice] [--strict]
    logsource quotas remove --user alice --producer-byte-rate             # one key; none given: all

Exit status: 2 for bad arguments, 1 when the broker refuses (its error, e.g. INVALID_REQUEST naming the key).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ...cli_args import bootstrap_default, print_table
from ...errors import ConfigError, LogSourceError
from ...protocol import quota_messages as qm
from ..config import command_config_options
from .model import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, QUOTA_KEYS, REQUEST_PERCENTAGE

_FLAGS = {
    PRODUCER_BYTE_RATE: "--producer-byte-rate",
    CONSUMER_BYTE_RATE: "--consumer-byte-rate",
    REQUEST_PERCENTAGE: "--request-percentage",
}
_UNSET = object()


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="logsource quotas", description="Configure client quotas (users, client-ids and their defaults)."
    )
    sub = ap.add_subparsers(dest="action", required=True)
    for name, help_ in (
        ("set", "set quota values of an entity"),
        ("list", "list the configured quotas (those of the given entity with --user/--client-id)"),
        ("remove", "remove quota values of an entity (every one it has when no value flag is given)"),
    ):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--user", nargs="?", const=_UNSET, metavar="NAME", help="the user (principal name)")
        p.add_argument("--client-id", nargs="?", const=_UNSET, metavar="NAME", help="the client-id")
        p.add_argument(
            "--default", action="store_true", help="--user/--client-id given without a name: its default"
        )
        p.add_argument("--user-default", action="store_true", help="the default user")
        p.add_argument("--client-default", action="store_true", help="the default client-id")
        for key, flag in _FLAGS.items():
            if name == "set":
                p.add_argument(flag, dest=key, metavar="N", help=f"{key} (a positive number)")
            elif name == "remove":
                p.add_argument(flag, dest=key, action="store_true", help=f"remove {key}")
        if name == "list":
            p.add_argument("--strict", action="store_true", help="only entities of exactly the given types")
        p.add_argument(
            "--bootstrap-server",
            "--bootstrap-servers",
            "-b",
            dest="bootstrap_servers",
            default=bootstrap_default(),
            metavar="HOST:PORT",
            help="a running broker (default: $LOGSOURCE_BOOTSTRAP)",
        )
        p.add_argument("--command-config", metavar="FILE", help="client.properties for a secured listener")
    return ap


def entity_of(args: Any) -> tuple[tuple[str, str | None], ...]:
    """The wire entity the flags name (() when none); ConfigError for a contradiction."""
    out: list[tuple[str, str | None]] = []
    for kind, given, default, flag in (
        (qm.USER, args.user, args.user_default, "--user"),
        (qm.CLIENT_ID, args.client_id, args.client_default, "--client-id"),
    ):
        if default and given is not None:
            raise ConfigError(f"{flag} and {flag}-default name two entities: give one")
        if given is _UNSET:
            if not args.default:
                raise ConfigError(f"{flag} needs a NAME, or --default for the default {kind}")
            out.append((kind, None))
        elif given is not None:
            if given == "":
                raise ConfigError(f"{flag} needs a non-empty NAME")
            out.append((kind, given))
        elif default:
            out.append((kind, None))
    if args.default and not any(g is _UNSET for g in (args.user, args.client_id)):
        raise ConfigError("--default applies to --user or --client-id given without a NAME")
    return tuple(out)


def _number(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{_FLAGS[key]} must be a number, got {text!r}") from None


def _show(entity: qm.Entity) -> tuple[str, str]:
    parts = dict(entity)
    user = "-" if qm.USER not in parts else (parts[qm.USER] or "<default>")
    client = "-" if qm.CLIENT_ID not in parts else (parts[qm.CLIENT_ID] or "<default>")
    return user, client


def _value(key: str, values: dict[str, float]) -> str:
    if key not in values:
        return "-"
    v = values[key]
    return str(int(v)) if v == int(v) and key != REQUEST_PERCENTAGE else repr(v)


def _describe(entity: qm.Entity) -> str:
    user, client = _show(entity)
    parts = ([f"user {user}"] if user != "-" else []) + ([f"client-id {client}"] if client != "-" else [])
    return ", ".join(parts)


def _run(args: Any) -> int:
    from ...client import Admin

    entity = entity_of(args)
    if args.action in ("set", "remove") and not entity:
        raise ConfigError("name the entity: --user and/or --client-id (or --user-default/--client-default)")
    if args.action == "set":
        changes: dict[str, float | None] = {
            k: _number(k, getattr(args, k)) for k in QUOTA_KEYS if getattr(args, k) is not None
        }
        if not changes:
            raise ConfigError("give at least one of " + ", ".join(_FLAGS.values()))
    elif args.action == "remove":
        keys = [k for k in QUOTA_KEYS if getattr(args, k)] or list(QUOTA_KEYS)
        changes = dict.fromkeys(keys)
    options = command_config_options(args.command_config)
    with Admin(args.bootstrap_servers, **options) as admin:
        if args.action == "list":
            components = [
                qm.QuotaFilterComponent(kind, qm.MATCH_DEFAULT if name is None else qm.MATCH_EXACT, name)
                for kind, name in entity
            ]
            entries = admin.describe_client_quotas(components, args.strict)
            rows = [(*_show(e.entity), *(_value(k, e.values) for k in QUOTA_KEYS)) for e in entries]
            rows.sort()
            print_table([("USER", "CLIENT-ID", *(k.upper() for k in QUOTA_KEYS)), *rows])
            return 0
        admin.alter_client_quotas({entity: changes})
    done = ", ".join(k if v is None else f"{k}={_value(k, {k: v})}" for k, v in changes.items())
    print(f"{'set' if args.action == 'set' else 'removed'} {done} for {_describe(entity)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``logsource quotas ...``; returns the exit status (2: bad arguments, 1: the broker refused or failed)."""
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except LogSourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
