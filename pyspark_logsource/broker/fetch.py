"""The fetch read path, for consumers and followers alike: Kafka's ``FetchIsolation``, the read, the long poll.

This module owns the fetch isolation: how far into a partition's log a fetch may
read (Kafka's ``FetchIsolation``):

* :attr:`FetchIsolation.LOG_END`: a follower (``replica_id`` >= 0 in a cluster)
  reads everything its leader appended, up to the log end;
* :attr:`FetchIsolation.HIGH_WATERMARK`: a ``read_uncommitted`` consumer reads
  below the high watermark (what the ISR has);
* :attr:`FetchIsolation.TXN_COMMITTED`: a ``read_committed`` consumer reads below
  the last stable offset (nothing at or past the oldest open transaction) and
  gets the aborted transactions of what it read.

:func:`read_partitions` walks a request's partitions within its byte budget,
turning each partition's typed error into its error code; the caller's
``resolve`` finds the partition's log and high watermark (the consumer's leader
check, the follower's epoch check, diverging epoch and LEO update live in the
callers: ``handlers.py`` and ``cluster/handlers.py``). :func:`long_poll` is the one long-poll wait (Kafka's DelayedFetch):
answer at once on an error or once ``min_bytes`` are there, else park on the
partitions' waiters (woken by appends and high-watermark moves) until they are,
or ``max_wait_ms`` passed.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from typing import Any

from ..errors import LogSourceError
from ..protocol import AbortedTransaction, FetchPartitionResponse, FetchRequest, FetchResponse
from .error_responses import error_fields
from .waiters import FetchWaiters

#: one partition of a fetch (request, partition, its response): (its log, its high watermark) to read, or None
#: when the response is complete already and must be answered at once (a follower's diverging epoch)
Resolve = Callable[[FetchRequest, Any, FetchPartitionResponse], "tuple[Any, int] | None"]


class FetchIsolation(enum.Enum):
    """How far a fetch reads (Kafka's FetchIsolation)."""

    #: followers: up to the log end
    LOG_END = 0
    #: read_uncommitted consumers: below the high watermark
    HIGH_WATERMARK = 1
    #: read_committed consumers: below the last stable offset
    TXN_COMMITTED = 2

    @staticmethod
    def for_consumer(isolation_level: int) -> FetchIsolation:
        """A consumer's isolation from its request's ``isolation_level`` (1: read_committed)."""
        return _TXN_COMMITTED if isolation_level else _HIGH_WATERMARK


# module constants: an Enum member looked up on its class costs ~0.12 us (Python 3.11), several per partition
_LOG_END = FetchIsolation.LOG_END
_HIGH_WATERMARK = FetchIsolation.HIGH_WATERMARK
_TXN_COMMITTED = FetchIsolation.TXN_COMMITTED


def read_partitions(
    req: FetchRequest,
    max_bytes: int,
    isolation: FetchIsolation,
    resolve: Resolve,
    convert: Callable[[Any], Any] | None = None,
    over_limit_ok: bool = False,
) -> tuple[FetchResponse, int, bool]:
    """Read each partition of ``req`` from ``fetch_offset`` as ``isolation`` allows, within
    ``min(req.max_bytes, max_bytes)`` and each partition's ``max_bytes``; (response, bytes read, answer now).

    ``resolve`` finds a partition's log and high watermark (the callers' checks); ``convert`` turns a file
    region into what the client reads (None: as stored). Only the first partition read may exceed its limit
    (to make progress; a larger batch elsewhere waits for a fetch where it comes first), any may with
    ``over_limit_ok``. A partition's LogSourceError becomes its error code (no records; what was filled in is
    kept) and, like a resolved answer (``resolve`` returned None), makes the fetch answer now.
    """
    # the read is inline, not a function per partition: a call costs ~0.1 us, several % of a small fetch
    budget = min(req.max_bytes, max_bytes)
    total, now, out = 0, False, []
    for fp in req.partitions:
        r = FetchPartitionResponse(fp.topic, fp.partition, records=b"")
        try:
            found = resolve(req, fp, r)
            if found is None:
                now = True
                out.append(r)
                continue
            lg, hw = found
            r.high_watermark = hw
            if isolation is _LOG_END:
                r.last_stable_offset = hw
                bound = lg.log_end_offset
            else:
                # read_committed: nothing at or past the oldest open transaction (staged data)
                r.last_stable_offset = lso = lg.txns.last_stable_offset(hw)
                bound = lso if isolation is _TXN_COMMITTED else hw
            r.log_start_offset = lg.log_start_offset
            limit = min(fp.max_bytes, budget - total)
            if limit > 0:
                # no bound at the log end (a single broker, a follower, or all replicated): it costs an index probe
                region = lg.read(fp.fetch_offset, limit, bound if bound < lg.log_end_offset else None)
                if region.length <= limit or over_limit_ok or total == 0:
                    r.records = region if convert is None else convert(region)
                    total += region.length
            if isolation is _TXN_COMMITTED:
                r.aborted_transactions = [
                    AbortedTransaction(a.producer_id, a.first_offset)
                    for a in lg.txns.aborted_between(fp.fetch_offset, lso)
                ]
        except LogSourceError as e:
            r.error_code = error_fields(e).code
            r.records = None
            now = True
        out.append(r)
    return FetchResponse(partitions=out), total, now


async def long_poll(
    req: FetchRequest, read: Callable[[], tuple[FetchResponse, int, bool]], waiters: FetchWaiters
) -> FetchResponse:
    """Kafka's DelayedFetch: ``read()`` now, and again each time an append or a high-watermark move wakes one
    of the partitions, until it answers now (an error), has ``min_bytes``, or ``max_wait_ms`` passed."""
    resp, total, now = read()
    if now or total >= req.min_bytes or req.max_wait_ms <= 0 or not req.partitions:
        return resp
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000
    keys = {(fp.topic, fp.partition) for fp in req.partitions}
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return resp
        fut = loop.create_future()
        timer = loop.call_later(remaining, _wake, fut)
        waiters.add(keys, fut)
        try:
            await fut
        finally:
            timer.cancel()
            waiters.remove(keys, fut)
        resp, total, now = read()
        if now or total >= req.min_bytes:
            return resp


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
