"""The fetch purgatory: futures of long-polling fetches, parked per partition until an append wakes them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class FetchWaiters:
    """Futures parked per (topic, partition); woken (result None) by :meth:`notify`. Event-loop thread only."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = {}

    def add(self, keys: Iterable[tuple[str, int]], fut: asyncio.Future) -> None:
        """Park ``fut`` until an append to one of ``keys``."""
        for k in keys:
            self._waiters.setdefault(k, set()).add(fut)

    def remove(self, keys: Iterable[tuple[str, int]], fut: asyncio.Future) -> None:
        """Forget ``fut``."""
        for k in keys:
            s = self._waiters.get(k)
            if s is not None:
                s.discard(fut)
                if not s:
                    del self._waiters[k]

    def notify(self, topic: str, partition: int) -> None:
        """Wake the fetches waiting on a partition (after an append, a high-watermark move, a deletion)."""
        s = self._waiters.get((topic, partition))
        if s:
            for f in s:
                if not f.done():
                    f.set_result(None)

    def notify_topic(self, topic: str) -> None:
        """Wake every fetch waiting on a partition of ``topic`` (it was deleted: they answer UnknownTopic)."""
        for key in [k for k in self._waiters if k[0] == topic]:
            self.notify(*key)

    def cancel_all(self) -> None:
        """Cancel every parked future (broker shutdown)."""
        for futs in self._waiters.values():
            for f in futs:
                if not f.done():
                    f.cancel()
