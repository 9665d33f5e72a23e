"""The in-flight bound of a client connection (``max_in_flight``), shared by the threads that send on it."""

from __future__ import annotations

import threading
import time


class InFlightWindow:
    """The in-flight bound of a connection: slots taken per request, returned per answer.

    When the window is full, a sender waits until a quarter of it is free again
    (or the answers stop coming) rather than for one slot: otherwise, once the
    pipeline is full, every answer frees one slot, the next request goes out
    alone, and client and broker settle into one request per system call each way.
    """

    __slots__ = ("_cond", "free", "size", "_refill", "_need")

    def __init__(self, size: int) -> None:
        self._cond = threading.Condition(threading.Lock())
        self.size = size
        self.free = size
        self._refill = max(1, size // 4)
        self._need = size  # the fewest free slots a waiter waits for

    def acquire(self, want: int, timeout: float) -> int:
        """Take between 1 and ``want`` slots; 0 if none freed up within ``timeout`` seconds."""
        with self._cond:
            if self.free == 0:
                need = min(want, self._refill)
                deadline = time.monotonic() + timeout
                while self.free < need:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    if not self._cond._waiters or need < self._need:
                        self._need = need
                    self._cond.wait(left)
                if self.free == 0:
                    return 0
            k = min(want, self.free)
            self.free -= k
            return k

    def release(self, n: int) -> None:
        """Return ``n`` slots."""
        with self._cond:
            self.free = min(self.size, self.free + n)
            # wake the waiters once enough is free for one of them, not per answer (each wake-up
            # of the sender for a slot it then waits again for costs both threads the GIL)
            if self._cond._waiters and self.free >= self._need:
                self._cond.notify_all()
