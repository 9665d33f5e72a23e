"""Quota enforcement on one connection, in the request path (KIP-219: answer at once, then mute).

The server hands each request to :meth:`ConnectionQuotas.call` while any quota is configured. It runs
the handler, measures the handler's time (the request-rate quota: event-loop time of the group's
requests, as a percentage of one thread; the decoding and encoding around the handlers follow in
:meth:`ConnectionQuotas.cycle_done`), records a produce's bytes, or a fetch answer's bytes once
the answer is ready, and when the group is over a quota:

* the response carries ``throttle_time_ms`` (every response type that has the field: it is set on
  the response object, which the codecs and the produce/fetch fast paths encode);
* a fetch answers with no data (Kafka's ``getThrottledResponse``: no partitions, the session kept)
  and its bytes are taken back from the rate (Kafka's ``unrecordQuotaSensor``);
* the connection is muted: :meth:`ConnectionQuotas.mute` (awaited by the server before it reads the
  connection again) holds the next requests until the delay has passed, so a client that ignores
  ``throttle_time_ms`` is throttled all the same. It is a sleep in that connection's task: the event
  loop and the other connections go on.

Exempt, as in Kafka: ApiVersions, the SASL exchange, the inter-broker APIs (transaction markers),
and a request carrying a replica id (a follower's Fetch, OffsetForLeaderEpoch): replication between
brokers is never throttled by client quotas.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from time import perf_counter
from types import CoroutineType
from typing import Any

from ...protocol import ApiKey, FetchResponse
from ..session import Session
from .manager import FETCH, PRODUCE, REQUEST, QuotaManager

#: Kafka's exempt requests: ApiVersions, SASL, and the ClusterAction APIs brokers send each other; and our
#: LocalReadGrant, which moves no data and, while quotas are configured, grants none (broker/local_read.py):
#: a bounds lookup as cheap as ApiVersions, asked once per read, which must not cost a read a throttle wait
EXEMPT = frozenset(
    {
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.LOCAL_READ_GRANT,
    }
)
_PRODUCE = int(ApiKey.PRODUCE)
_FETCH = int(ApiKey.FETCH)


def produce_bytes(request: Any) -> int:
    """The record bytes of a produce request (what the produce byte rate counts)."""
    return sum(len(p.records) for p in request.partitions if p.records is not None)


def fetch_bytes(response: Any) -> int:
    """The record bytes of a fetch answer (a file region counts its length)."""
    n = 0
    for p in response.partitions:
        records = p.records
        if records is not None:
            length = getattr(records, "length", None)
            n += len(records) if length is None else length
    return n


def with_throttle(response: Any, delay_ms: int) -> Any:
    """``response`` with ``throttle_time_ms`` set (a copy: handlers may share response objects)."""
    if response is None or delay_ms <= 0 or not hasattr(response, "throttle_time_ms"):
        return response
    response = copy.copy(response)
    response.throttle_time_ms = delay_ms
    return response


class ConnectionQuotas:
    """One connection's throttling: the throttle time of its responses and when it may be read again."""

    def __init__(self, manager: QuotaManager) -> None:
        self.manager = manager
        #: the manager's clock time before which the connection is not read (0: not muted)
        self.muted_until = 0.0
        # the read being handled: its handlers' time, whether it awaited (a long poll), whose it is
        self._cycle_s = 0.0
        self._cycle_waited = False
        self._group: tuple[str, str] | None = None

    @property
    def on(self) -> bool:
        """True while any quota is configured (until then the server does not call in here)."""
        return self.manager.enabled

    def exempt(self, api_key: int, request: Any) -> bool:
        return api_key in EXEMPT or getattr(request, "replica_id", -1) >= 0

    def call(self, ev: Any, session: Session, handler: Callable[[Any, Session], Any]) -> Any:
        """``handler(ev, session)``'s response with the request's quotas applied (see the module doc)."""
        header, request = ev.header, ev.request
        key = header.api_key
        if self.exempt(key, request):
            t0 = perf_counter()
            result = handler(ev, session)
            self._cycle_s += perf_counter() - t0
            return result
        m = self.manager
        user, client_id = session.principal.name, header.client_id or ""
        self._in_cycle(user, client_id)
        if key == _FETCH:
            most = m.max_fetch_bytes(user, client_id)
            if most is not None and request.max_bytes > most:
                request.max_bytes = most  # one answer never exceeds what the quota allows in its window
        t0 = perf_counter()
        result = handler(ev, session)
        spent = perf_counter() - t0
        self._cycle_s += spent
        now = m.clock()
        delay = self._record(REQUEST, user, client_id, spent, now)
        if key == _PRODUCE:
            delay = max(delay, self._record(PRODUCE, user, client_id, produce_bytes(request), now))
        elif key == _FETCH:
            if type(result) is CoroutineType:
                return self._fetch_later(result, user, client_id, delay)
            result, delay = self._fetch(result, user, client_id, delay, now)
        return self._throttle(result, delay, now)

    def call_run(
        self, run: list[Any], session: Session, handler: Callable[[list, Session], list]
    ) -> list[Any]:
        """A run of produces appended together (:func:`..pipeline.produce_run_length`): each recorded."""
        m = self.manager
        if not m.enabled:
            return handler(run, session)
        user, client_id = session.principal.name, run[0].header.client_id or ""
        t0 = perf_counter()
        results = handler(run, session)
        spent = perf_counter() - t0
        self._cycle_s += spent
        self._in_cycle(user, client_id)
        share = spent / len(run)
        now = m.clock()
        out = []
        for ev, result in zip(run, results, strict=True):
            delay = self._record(REQUEST, user, client_id, share, now)
            delay = max(delay, self._record(PRODUCE, user, client_id, produce_bytes(ev.request), now))
            out.append(self._throttle(result, delay, now))
        return out

    def cycle_done(self, t_read: float) -> None:
        """The requests of one read were handled and answered: the rest of the time since ``t_read``
        (decoding, encoding, writing: Kafka's network-thread time) counts for the request quota too,
        without throttling these answers (Kafka's ``recordNoThrottle``); over quota, the connection is
        muted. A read during which the connection's task waited (a long poll, a produce waiting for its
        replicas, a full socket) is not counted: its time was mostly waiting, or other connections'."""
        group, waited, handled = self._group, self._cycle_waited, self._cycle_s
        self._cycle_s, self._cycle_waited, self._group = 0.0, False, None
        if group is None or waited:
            return
        rest = perf_counter() - t_read - handled
        if rest > 0:
            now = self.manager.clock()
            self._mute_for(self._record(REQUEST, group[0], group[1], rest, now), now)

    async def mute(self) -> None:
        """Wait until the connection's throttle has passed (the server awaits this before reading)."""
        left = self.muted_until - self.manager.clock()
        if left > 0:
            await asyncio.sleep(left)

    # ------------------------------------------------------------ internals

    def _in_cycle(self, user: str, client_id: str) -> None:
        """The read being handled has a request of this group; the first one arms a probe that notes
        whether the connection's task gives the event loop a turn before :meth:`cycle_done` (it awaited)."""
        if self._group is None:
            self._cycle_waited = False
            asyncio.get_running_loop().call_soon(self._yielded)
        self._group = (user, client_id)

    def _yielded(self) -> None:
        if self._group is not None:
            self._cycle_waited = True

    def _record(self, kind: str, user: str, client_id: str, value: float, now: float) -> int:
        m = self.manager
        delay = m.record(kind, user, client_id, value, now)
        if delay:
            m.throttled(kind, user, client_id, delay, now)
        return delay

    def _fetch(self, result: Any, user: str, client_id: str, delay: int, now: float) -> tuple[Any, int]:
        """Record a fetch answer's bytes; over quota: take them back and answer with no data."""
        if not isinstance(result, FetchResponse) or result.error_code:
            return result, delay
        n = fetch_bytes(result)
        fetch_delay = self._record(FETCH, user, client_id, n, now)
        if fetch_delay:
            self.manager.unrecord(FETCH, user, client_id, n, now)
            result = FetchResponse(partitions=[], error_code=0, session_id=result.session_id)
        return result, max(delay, fetch_delay)

    async def _fetch_later(self, coro: Any, user: str, client_id: str, delay: int) -> Any:
        result = await coro
        now = self.manager.clock()
        result, delay = self._fetch(result, user, client_id, delay, now)
        self._mute_for(delay, now)
        return with_throttle(result, delay)

    def _throttle(self, result: Any, delay: int, now: float) -> Any:
        if not delay:
            return result
        self._mute_for(delay, now)
        if type(result) is CoroutineType:  # an acks=all produce: answered once replicated
            return self._throttle_later(result, delay)
        return with_throttle(result, delay)

    async def _throttle_later(self, coro: Any, delay: int) -> Any:
        return with_throttle(await coro, delay)

    def _mute_for(self, delay: int, now: float) -> None:
        if delay > 0:
            self.muted_until = max(self.muted_until, now + delay / 1000.0)
