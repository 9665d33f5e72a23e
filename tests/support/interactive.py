"""Run a command as from an interactive shell, where Ctrl-C reaches it.

A suite started as a background job of a non-interactive shell (``make test &``, ``nohup``) inherits
SIGINT ignored (POSIX: an asynchronous list without job control ignores SIGINT and SIGQUIT), and every
command it starts inherits that too, so a test's Ctrl-C would reach nothing. ``as_from_a_terminal(argv)``
restores SIGINT's default before the command is executed (``exec`` keeps the process id, so
``send_signal`` reaches the command itself).
"""

from __future__ import annotations

import sys

_RESET = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"


def as_from_a_terminal(argv: list[str]) -> list[str]:
    """``argv`` run with SIGINT at its default disposition, whatever the suite inherited."""
    return [sys.executable, "-c", _RESET, *argv]
