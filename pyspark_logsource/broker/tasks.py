"""Background tasks of the broker: :func:`spawn` keeps each alive until it ends and logs how it failed.

The event loop keeps only weak references to its tasks: a task nobody holds
may be garbage-collected mid-run, and an exception it ends with is reported
only when it is collected, if ever. Every task the broker starts and does not
await (a marker's confirmation, a membership write waiting for the ISR, the
replica fetchers, the ISR updater) goes through :func:`spawn`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)

#: the running background tasks of every loop in this process (a thread-mode broker has its own loop)
_running: set[asyncio.Task] = set()


def spawn(
    coro: Coroutine[Any, Any, Any], name: str | None = None, loop: asyncio.AbstractEventLoop | None = None
) -> asyncio.Task:
    """Run ``coro`` as a task of ``loop`` (default: the running loop; RuntimeError without one), held until
    it ends; an exception it ends with is logged with its traceback. Returns the task (to cancel it)."""
    task = (loop or asyncio.get_running_loop()).create_task(coro, name=name)
    _running.add(task)
    task.add_done_callback(_ended)
    return task


def running() -> int:
    """How many spawned tasks have not ended (tests)."""
    return len(_running)


def _ended(task: asyncio.Task) -> None:
    _running.discard(task)
    if task.cancelled():
        return
    exc = task.exception()  # retrieved here, so the loop does not report it again at collection
    if exc is not None:
        log.error("background task %s failed", task.get_name(), exc_info=exc)
