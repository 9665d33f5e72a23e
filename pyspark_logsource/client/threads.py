"""The clients' background threads (I/O, sender, fetcher, heartbeat).

Each runs with SIGINT and SIGTERM blocked, as librdkafka's threads do: the
kernel then delivers a Ctrl-C or a SIGTERM to the main thread, where Python
runs its handlers and where the interrupted wait is (``logsource produce``
blocked on its standard input ends on Ctrl-C). Delivered to one of these
threads instead, the signal interrupted no wait of the main thread's, and the
exception could surface late, or be lost inside compiled code that cannot
raise.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

#: the signals a client's thread never takes (where the platform lets a thread choose)
BLOCKED_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


class ClientThread(threading.Thread):
    """A daemon thread running ``target`` with :data:`BLOCKED_SIGNALS` blocked in it."""

    def __init__(self, target: Callable[[], object], name: str) -> None:
        super().__init__(target=target, name=name, daemon=True)

    def run(self) -> None:
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED_SIGNALS)
        super().run()
