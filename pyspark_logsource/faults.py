"""Fault injection for the crash tests: named points where a test makes the process die, pause, fail or hang.

The code calls :func:`fault_point` at each step a crash test must be able to
interrupt; nothing happens unless the environment variable ``LOGSOURCE_FAULT``
names the point. Its value is a comma-separated list of ``point``,
``point:detail`` (the point fires only for that detail, e.g. one write id),
each optionally followed by ``@action`` to do something else than the point's
own action (``shutdown.logs@hang``). A process inherits it, so a test sets it
before it starts a broker or a job.

What a point does by default is the point's (:data:`POINTS`):

- ``kill``: the process kills itself with SIGKILL, as ``kill -9`` would, at a
  step a test could not hit from outside (the broker's log cleaner swapping
  segments, its transaction coordinator between a decision and its markers);
- ``pause``: the process prints ``LOGSOURCE_FAULT_PAUSED <point>`` on stderr
  and sleeps (``LOGSOURCE_FAULT_PAUSE_SECONDS``, default 60), so that the test,
  which waits for that line, kills it there (the ETL job's commit protocol); a test
  that lets it go on instead creates the file named by ``LOGSOURCE_FAULT_RESUME``,
  which ends the pause at once (rather than waiting the pause out);
- ``raise``: a RuntimeError ("fault injected ...") is raised there (a broker's
  shutdown step that fails);
- ``hang``: the calling thread blocks for good (a shutdown step that never
  returns blocks the event loop, as a stuck synchronous close would).

This module imports nothing of the package: the broker, the offsets store and
the ETL jobs all call it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time

log = logging.getLogger(__name__)

#: names the points that fire: ``point`` or ``point:detail``, comma-separated
FAULT_ENV = "LOGSOURCE_FAULT"
#: how long a ``pause`` point sleeps (seconds; default 60)
PAUSE_SECONDS_ENV = "LOGSOURCE_FAULT_PAUSE_SECONDS"
#: a file whose creation ends a ``pause`` point's sleep early (optional)
RESUME_FILE_ENV = "LOGSOURCE_FAULT_RESUME"
#: printed on stderr, followed by the point's name, when a ``pause`` point starts sleeping
PAUSED_MARKER = "LOGSOURCE_FAULT_PAUSED"

KILL = "kill"
PAUSE = "pause"
RAISE = "raise"
HANG = "hang"
ACTIONS = (KILL, PAUSE, RAISE, HANG)

#: every fault point and what it does
POINTS: dict[str, str] = {
    # the broker's log cleaner, swapping a cleaned segment in (broker/log: Kafka's suffix protocol)
    "cleaned": KILL,  # the cleaned segment is written (as .cleaned)
    "swap": KILL,  # it is renamed to .swap, with its swap metadata
    "deleted": KILL,  # the segments it replaces are renamed to .deleted
    "renamed": KILL,  # the .swap is renamed to its final name
    # the broker's transaction coordinator (broker/txn); detail: the write id
    "decided": KILL,  # a decision is durable, its markers are not written yet
    # the ETL job's commit protocol (offsets/commit.py, etl/)
    "write": PAUSE,  # before the load's files are written
    "after_write": PAUSE,  # the files are written, the load not committed
    "commit": PAUSE,  # the load is staged, its manifest not committed
    "publish": PAUSE,  # the manifest is committed, the files not published
    "publish_mid": PAUSE,  # some of the files are published
    "rename_copied": PAUSE,  # a copy-then-delete rename has copied, not deleted (tests/support/copy_rename_fs.py)
    # the steps of a broker's shutdown (broker/server.py, Broker.stop): each runs even if one before failed
    "shutdown.listener": RAISE,
    "shutdown.connections": RAISE,
    "shutdown.replication": RAISE,
    "shutdown.cluster": RAISE,
    "shutdown.logs": RAISE,
}


def fault_point(name: str, detail: str | None = None) -> None:
    """Do the point's action here if ``LOGSOURCE_FAULT`` names ``name`` (or ``name:detail``)."""
    action = POINTS.get(name)
    if action is None:
        raise ValueError(f"unknown fault point {name!r} (known: {', '.join(POINTS)})")
    value = os.environ.get(FAULT_ENV)
    if not value:
        return
    for entry in value.split(","):
        spec, _, how = entry.strip().partition("@")
        point, _, want = spec.partition(":")
        if point == name and (not want or want == detail):
            _act(how or action, name if detail is None else f"{name}:{detail}")
            return


def _act(action: str, where: str) -> None:
    if action == KILL:
        log.warning("fault injection: SIGKILL at %r", where)
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == PAUSE:
        print(f"{PAUSED_MARKER} {where.partition(':')[0]}", file=sys.stderr, flush=True)
        _pause(float(os.environ.get(PAUSE_SECONDS_ENV, "60")), os.environ.get(RESUME_FILE_ENV))
    elif action == RAISE:
        log.warning("fault injection: raising at %r", where)
        raise RuntimeError(f"fault injected at {where!r} ({FAULT_ENV})")
    elif action == HANG:
        log.warning("fault injection: %r hangs", where)
        while True:
            time.sleep(3600)
    else:
        raise ValueError(f"unknown fault action {action!r} at {where!r} (known: {', '.join(ACTIONS)})")


def _pause(seconds: float, resume_file: str | None) -> None:
    """Sleep seconds, or until resume_file exists (polled: the pause may be in any thread of any process)."""
    if not resume_file:
        time.sleep(seconds)
        return
    deadline = time.monotonic() + seconds
    while not os.path.exists(resume_file):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(0.05, left))
