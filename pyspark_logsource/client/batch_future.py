"""The future of a producer batch: a ``concurrent.futures.Future`` that is cheap to create.

With batch size 1 a batch, and so a future, is made per record; ``Future()`` makes its own
Condition and RLock, which cost more than the rest of opening a batch. Every
:class:`BatchFuture` shares one condition instead (``SHARED_CONDITION``), which
:class:`~.accumulator.ProducerBatch` also takes to publish its outcome.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING

#: One condition shared by every batch future: a ``Future()`` makes its own Condition and
#: RLock, which cost more than the rest of opening a batch (and with batch size 1 a
#: batch is opened per record). A shared condition only means a wake-up may be for
#: another future, so the waits below loop until their own future is done.
SHARED_CONDITION = threading.Condition()
DONE_STATES = (FINISHED, CANCELLED, CANCELLED_AND_NOTIFIED)


class BatchFuture(Future):
    """A ``concurrent.futures.Future`` that is cheap to create (shared condition)."""

    def __init__(self) -> None:  # noqa: D107 - Future.__init__ without its own Condition
        self._condition = SHARED_CONDITION
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiters = []
        self._done_callbacks = []

    def _wait_done(self, timeout: float | None) -> None:
        if self._state in DONE_STATES:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while self._state not in DONE_STATES:
                if deadline is None:
                    self._condition.wait()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    self._condition.wait(left)

    def result(self, timeout: float | None = None):
        """As ``Future.result``."""
        self._wait_done(timeout)
        return super().result(0)

    def exception(self, timeout: float | None = None):
        """As ``Future.exception``."""
        self._wait_done(timeout)
        return super().exception(0)

    # set_result/set_exception as Future's, minus the work nobody asked for: the shared
    # condition is notified only while someone waits on it, callbacks run only if added.
    def set_result(self, result) -> None:
        """As ``Future.set_result``."""
        self._finish(result, None)

    def set_exception(self, exception: BaseException) -> None:
        """As ``Future.set_exception``."""
        self._finish(None, exception)

    def _finish(self, result, exception: BaseException | None) -> None:
        with SHARED_CONDITION:
            if self._state in DONE_STATES:
                raise InvalidStateError(f"{self._state}: {self!r}")
            self._result, self._exception = result, exception
            self._state = FINISHED
            for waiter in self._waiters:
                if exception is None:
                    waiter.add_result(self)
                else:
                    waiter.add_exception(self)
            if SHARED_CONDITION._waiters:
                SHARED_CONDITION.notify_all()
        if self._done_callbacks:
            self._invoke_callbacks()
