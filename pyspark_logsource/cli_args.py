"""Arguments and output shared by the ``logsource`` commands (cli.py and the delegated ones)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from .client.metadata import DEFAULT_BOOTSTRAP
from .errors import ConfigError


def bootstrap_default() -> str:
    """$LOGSOURCE_BOOTSTRAP, else the embedded default address."""
    return os.environ.get("LOGSOURCE_BOOTSTRAP", DEFAULT_BOOTSTRAP)


def add_common(p: argparse.ArgumentParser) -> None:
    """--bootstrap-servers and --timeout, as every command that talks to a broker takes them."""
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
