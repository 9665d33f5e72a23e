"""Arguments and output shared by the ``logsource`` commands (cli.py and the delegated ones)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .client.metadata import DEFAULT_BOOTSTRAP
from .errors import ConfigError, LogSourceError


def bootstrap_default() -> str:
    """$LOGSOURCE_BOOTSTRAP, else the embedded default address."""
    return os.environ.get("LOGSOURCE_BOOTSTRAP", DEFAULT_BOOTSTRAP)


def add_common(p: argparse.ArgumentParser) -> None:
    """--bootstrap-servers, --timeout and --command-config, as every command that talks to a broker
    takes them (hand :func:`client_options` of the parsed arguments to the client)."""
    p.add_argument(
        "--bootstrap-servers",
        "-b",
        default=bootstrap_default(),
        metavar="HOST:PORT[,HOST:PORT]",
        help=f"broker addresses (default: $LOGSOURCE_BOOTSTRAP, else {DEFAULT_BOOTSTRAP})",
    )
    p.add_argument(
        "--timeout",
        type=seconds,
        default=30.0,
        metavar="SECONDS",
        help="give up with an error when the brokers do not answer (or acknowledge) within this time (default 30)",
    )
    add_command_config(p)


def add_command_config(p: argparse.ArgumentParser) -> None:
    """--command-config FILE: a client.properties with Kafka's client keys, for a secured listener."""
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="client.properties for a secured listener, with Kafka's client keys (security.protocol, "
        "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ssl.keystore.location, ...)",
    )


def command_config_options(path: str | None) -> dict[str, Any]:
    """A ``--command-config client.properties`` file (Kafka's tools' habit) as our clients' keyword
    arguments (kafka-python's names); {} without a file. LogSourceError if it cannot be read,
    ConfigError on a bad JAAS line or store type (never showing a password); the client checks the rest."""
    from .client.kafka_security import client_options as options_from_properties
    from .properties import parse_properties

    if not path:
        return {}
    try:
        options = options_from_properties(parse_properties(Path(path).read_text()))
    except OSError as e:
        raise LogSourceError(f"cannot read --command-config {path}: {e.strerror or e}") from None
    except ConfigError as e:
        raise ConfigError(f"--command-config {path}: {e}") from None
    return options


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The security options of a command's ``--command-config`` (see :func:`add_common`)."""
    return command_config_options(getattr(args, "command_config", None))


def seconds(text: str) -> float:
    """argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"a positive number of seconds, got {text!r}")
    return value


def key_values(items: Sequence[str] | None) -> dict[str, str]:
    """KEY=VALUE arguments as a dict (ConfigError on anything else)."""
    out = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise ConfigError(f"expected key=value, got {item!r}")
        out[k.strip()] = v.strip()
    return out


def print_table(rows: list[tuple[str, ...]]) -> None:
    """Print rows as left-aligned columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
