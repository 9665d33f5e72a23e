"""Bounds on a broker's shutdown: a deadline after the first signal (a step's fault point: ``shutdown.<step>``
in :mod:`pyspark_logsource.faults`).

:class:`ShutdownGuard` is armed by :func:`.process.run` at the first SIGTERM/SIGINT; if the shutdown has not
finished ``logsource.shutdown.timeout.ms`` later, it logs what :class:`.server.Broker` was doing
(``Broker.shutdown_step``) and where the event loop thread is, and ends the process non-zero.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import traceback
from typing import Any

log = logging.getLogger("pyspark_logsource.broker")

#: exit status of ``logsource broker`` when a shutdown step failed or the shutdown did not finish in time
EXIT_SHUTDOWN_FAILED = 1


class ShutdownGuard:
    """Bounds a signalled shutdown: :meth:`arm` (at the first signal) starts a watchdog thread that, if the
    shutdown has not finished :attr:`timeout` seconds later, logs what it was waiting for and ends the
    process with :data:`EXIT_SHUTDOWN_FAILED`. A thread, not a loop timer: a step that blocks the event loop
    must not block its own deadline. :meth:`disarm` ends the watch; ``main`` never does, so the watch covers
    the interpreter's exit too (joining executor threads)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.broker: Any = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop_thread = threading.get_ident()

    def arm(self, broker: Any) -> None:
        """Start the deadline (once)."""
        if self._thread is not None:
            return
        self.broker = broker
        self._loop_thread = threading.get_ident()
        self._thread = threading.Thread(target=self._watch, name="shutdown-watchdog", daemon=True)
        self._thread.start()

    def disarm(self) -> None:
        """The shutdown finished: no deadline any more."""
        self._done.set()

    def waiting_for(self) -> str:
        """What the shutdown is doing now, for the log."""
        step = self.broker.shutdown_step if self.broker is not None else None
        if step is not None:
            return step
        others = [
            t.name
            for t in threading.enumerate()
            if not t.daemon and t is not threading.current_thread() and t is not threading.main_thread()
        ]
        return f"the process to exit (threads still running: {', '.join(others) or 'none'})"

    def _watch(self) -> None:
        if self._done.wait(self.timeout):
            return
        frame = sys._current_frames().get(self._loop_thread)
        stack = "".join(traceback.format_stack(frame, limit=8)) if frame is not None else "?"
        log.error(
            "shutdown did not finish within %.1f s (logsource.shutdown.timeout.ms); still %s; exiting with "
            "status %d. The event loop thread is at:\n%s",
            self.timeout,
            self.waiting_for(),
            EXIT_SHUTDOWN_FAILED,
            stack,
        )
        exit_now(EXIT_SHUTDOWN_FAILED)


def exit_now(status: int) -> None:
    """End the process at once (no cleanup: the kernel releases the log dir locks), logs flushed first."""
    for h in logging.getLogger().handlers:
        try:
            h.flush()
        except Exception:  # exiting anyway
            pass
    os._exit(status)
