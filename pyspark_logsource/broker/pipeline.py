"""Responses of one connection that wait for replication, sent in request order.

An ``acks=all`` Produce is appended when the request is handled but answered
only once the in-sync replicas have it. Awaiting that before handling the
connection's next request would allow one produce per replication round trip
(a producer pipelines several). Instead the server parks the answer here and
goes on: the next produces are appended at once, one follower fetch carries
them all, and one high-watermark move answers them together. Kafka's protocol
only requires that responses leave in request order, which this queue keeps:
every later response waits behind the parked ones (:attr:`busy`).

A producer that pipelines one message per request delivers many produces for
one partition in one read: :func:`produce_run_length` finds such runs, which
the broker appends together (one lock, one write) and answers one by one.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

#: parked responses per connection before the reader waits for the oldest (a client's in-flight
#: limit is far below; this bounds a client that pipelines without limit)
MAX_PARKED = 64


def produce_run_length(events: list, start: int) -> int:
    """How many requests from ``events[start]`` on are produces that may be appended together: each
    for the same single partition with the same acks (0 or 1: answered at once) and no transactional id."""
    first = events[start]
    req = getattr(first, "request", None)
    if (
        first.header.api_key != 0
        or len(req.partitions) != 1
        or req.acks not in (0, 1)
        or req.transactional_id is not None
    ):
        return 1
    p = req.partitions[0]
    topic, partition, acks = p.topic, p.partition, req.acks
    n = start + 1
    while n < len(events):
        ev = events[n]
        r = getattr(ev, "request", None)
        if (
            ev.header.api_key != 0
            or r is None
            or len(r.partitions) != 1
            or r.acks != acks
            or r.transactional_id is not None
            or r.partitions[0].partition != partition
            or r.partitions[0].topic != topic
        ):
            break
        n += 1
    return n - start


class OrderedResponses:
    """Parked responses of one connection, written in order as they complete."""

    def __init__(self, write: Callable[[Any, Any], Awaitable[None]]) -> None:
        #: ``write(header, response)`` sends one response (None: nothing to send)
        self._write = write
        self._parked: deque[tuple[Any, asyncio.Task]] = deque()
        self._drainer: asyncio.Task | None = None
        self.error: BaseException | None = None

    @property
    def busy(self) -> bool:
        """True while parked responses are unsent: later responses must wait (:meth:`flush`)."""
        return bool(self._parked)

    async def park(self, header: Any, response: Awaitable[Any]) -> None:
        """Park the response to ``header``'s request; it is written when done, after those parked before it."""
        self._parked.append((header, asyncio.ensure_future(response)))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.ensure_future(self._drain())
        if len(self._parked) >= MAX_PARKED:
            await asyncio.wait([self._parked[0][1]])

    async def flush(self) -> None:
        """Wait until every parked response was written; re-raise the error that stopped the writing."""
        while self._drainer is not None and not self._drainer.done():
            await asyncio.shield(self._drainer)
        if self.error is not None:
            raise self.error

    async def _drain(self) -> None:
        try:
            while self._parked:
                header, task = self._parked[0]
                result = await task
                await self._write(header, result)
                self._parked.popleft()
        except BaseException as e:  # the connection failed (or closes): the reader sees it on flush
            self.error = e
            self.cancel()

    def cancel(self) -> None:
        """Drop every parked response (the connection is closing)."""
        for _, task in self._parked:
            task.cancel()
        self._parked.clear()
        if self._drainer is not None and self._drainer is not asyncio.current_task():
            self._drainer.cancel()
