"""Fetch sessions (KIP-227): the broker-wide session cache and what each fetch reads and answers.

A consumer fetching many partitions sends them all once (a *full* fetch, epoch 0); the broker keeps them
in a session and answers with its id. Later fetches (*incremental*, epoch 1, 2, ...) carry only the
partitions whose fetch position changed, and ``forgotten_topics_data`` for those the consumer dropped;
the answer carries only the partitions with something new (Kafka's ``CachedPartition``: records, a moved
high watermark or log start offset, an error, a preferred read replica, a diverging epoch).

Kafka's rules (``kafka.server.FetchSession``), which this module follows:

* session id 0, epoch -1: a sessionless full fetch (librdkafka and our own clients);
* epoch 0: a full fetch that opens a session when the cache has room (any session id given is closed
  first); epoch -1 with a session id closes that session and answers sessionless;
* epoch > 0: incremental; an unknown session id is FETCH_SESSION_ID_NOT_FOUND (70), an epoch other than
  the session's next one INVALID_FETCH_SESSION_EPOCH (71) (the session stays);
* the cache holds ``max.incremental.fetch.session.cache.slots`` sessions. When full, a new session evicts
  the least recently used one if it was idle longer than ``min.incremental.fetch.session.eviction.ms``,
  else the smallest session older than that if the new one is larger (followers, privileged, are
  evicted last); otherwise the fetch is answered without a session (id 0);
* partitions that returned records move to the end of the session's order, so the next fetches start
  with the others (fairness under ``max_bytes``).

Followers fetch sessionless here (their fetches go to the replica manager), so every session is a
consumer's (unprivileged); the privileged rule is kept for the eviction order only.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import FetchSessionIdNotFound, InvalidFetchSessionEpoch
from ..protocol import FetchPartition, FetchPartitionResponse, FetchRequest, FetchResponse

#: the two session errors' codes (top-level in the FetchResponse)
FETCH_SESSION_ID_NOT_FOUND = FetchSessionIdNotFound.code
INVALID_FETCH_SESSION_EPOCH = InvalidFetchSessionEpoch.code

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


def next_epoch(epoch: int) -> int:
    """Kafka's ``FetchMetadata.nextEpoch``: 1, 2, ... wrapping from int32's max back to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


def records_size(records: Any) -> int:
    """Bytes of a partition's records as the broker holds them (a FileRegion, bytes, or None)."""
    if records is None:
        return 0
    n = getattr(records, "length", None)
    return len(records) if n is None else n


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: what the consumer asked last, and what it was last told."""

    request: FetchPartition
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_respond(self, r: FetchPartitionResponse) -> bool:
        """Kafka's ``maybeUpdateResponseData``: whether the answer must carry ``r``; remembers what it told."""
        must = records_size(r.records) > 0
        if self.high_watermark != r.high_watermark:
            must = True
            self.high_watermark = r.high_watermark
        if self.log_start_offset != r.log_start_offset:
            must = True
            self.log_start_offset = r.log_start_offset
        if r.preferred_read_replica >= 0 or r.diverging_epoch >= 0:
            must = True
        if r.error_code:
            self.high_watermark = -1  # re-sent once the error goes away
            must = True
        return must


@dataclass(slots=True)
class FetchSession:
    """A session: its partitions in fetch order, the epoch the next incremental fetch must carry."""

    id: int
    privileged: bool
    partitions: dict[tuple[str, int], CachedPartition]
    created_ms: float
    last_used_ms: float
    epoch: int = 1


@dataclass(slots=True)
class FetchContext:
    """One fetch's view of its session: the full request to read, and how to shape the answer.

    ``error`` set: answer it at once (no read). ``request`` lists every partition to read (an incremental
    fetch's are the session's, in its order)."""

    request: FetchRequest
    kind: str  # "sessionless", "full" or "incremental"
    error: int = 0
    session: FetchSession | None = None
    _respond: Callable[[FetchResponse], FetchResponse] | None = field(default=None, repr=False)

    def respond(self, resp: FetchResponse) -> FetchResponse:
        """The answer to send for ``resp`` (the read of :attr:`request`), with the session id."""
        return resp if self._respond is None else self._respond(resp)


class FetchSessionCache:
    """The broker's fetch sessions (one per broker, shared by every connection)."""

    def __init__(
        self,
        max_slots: int = 1000,
        eviction_ms: int = 120_000,
        clock: Callable[[], float] = lambda: time.monotonic() * 1000,
    ) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._clock = clock
        self._sessions: dict[int, FetchSession] = {}
        self._lock = threading.Lock()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        """The session with this id, if cached."""
        return self._sessions.get(session_id)

    # ------------------------------------------------------------ a fetch

    def new_context(self, req: FetchRequest, privileged: bool = False) -> FetchContext:
        """Kafka's ``FetchManager.newContext``: classify ``req`` and update its session."""
        sid, epoch = req.session_id, req.session_epoch
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch closes any session it names
            if sid != INVALID_SESSION_ID:
                with self._lock:
                    self._sessions.pop(sid, None)
            if epoch == FINAL_EPOCH:
                return FetchContext(req, "sessionless", _respond=_sessionless)
            ctx = FetchContext(req, "full")
            ctx._respond = lambda resp: self._open(req, resp, privileged)
            return ctx
        with self._lock:
            s = self._sessions.get(sid)
            if s is None:
                return FetchContext(req, "incremental", error=FETCH_SESSION_ID_NOT_FOUND)
            if s.epoch != epoch:
                return FetchContext(req, "incremental", error=INVALID_FETCH_SESSION_EPOCH)
            for topic, partition in req.forgotten:
                s.partitions.pop((topic, partition), None)
            for fp in req.partitions:
                c = s.partitions.get((fp.topic, fp.partition))
                if c is None:
                    s.partitions[(fp.topic, fp.partition)] = CachedPartition(fp)
                else:
                    c.request = fp
            s.epoch = next_epoch(s.epoch)
            s.last_used_ms = self._clock()
            full = FetchRequest(
                [c.request for c in s.partitions.values()],
                req.max_wait_ms,
                req.min_bytes,
                req.max_bytes,
                req.isolation_level,
                req.replica_id,
                sid,
                epoch,
                req.rack_id,
            )
        ctx = FetchContext(full, "incremental", session=s)
        ctx._respond = lambda resp: self._incremental(s, resp)
        return ctx

    @staticmethod
    def error_response(ctx: FetchContext) -> FetchResponse:
        """The answer to a fetch refused for its session: the error, no partitions, session id 0."""
        return FetchResponse(error_code=ctx.error, session_id=INVALID_SESSION_ID)

    def _open(self, req: FetchRequest, resp: FetchResponse, privileged: bool) -> FetchResponse:
        """A full fetch's answer: every partition; a new session's id if the cache makes room for one."""
        by_key = {(r.topic, r.partition): r for r in resp.partitions}
        parts: dict[tuple[str, int], CachedPartition] = {}
        for fp in req.partitions:
            r = by_key.get((fp.topic, fp.partition))
            c = CachedPartition(fp)
            if r is not None:
                c.must_respond(r)
            parts[(fp.topic, fp.partition)] = c
        now = self._clock()
        with self._lock:
            if len(self._sessions) >= self.max_slots and not self._evict(privileged, len(parts), now):
                resp.session_id = INVALID_SESSION_ID
                return resp
            sid = self._new_id()
            self._sessions[sid] = FetchSession(sid, privileged, parts, now, now)
        resp.session_id = sid
        return resp

    def _incremental(self, s: FetchSession, resp: FetchResponse) -> FetchResponse:
        """An incremental fetch's answer: only the partitions with news; those with records move last."""
        out = []
        with self._lock:
            for r in resp.partitions:
                key = (r.topic, r.partition)
                c = s.partitions.get(key)
                if c is None:  # forgotten by a concurrent fetch of the same session
                    continue
                if c.must_respond(r):
                    out.append(r)
                    if records_size(r.records) > 0:
                        s.partitions[key] = s.partitions.pop(key)
        resp.partitions = out
        resp.session_id = s.id
        return resp

    # ------------------------------------------------------------ the slots

    def _evict(self, privileged: bool, size: int, now: float) -> bool:
        """Kafka's ``tryEvict`` (under the lock): free one slot for a new session of ``size`` partitions."""
        lru = min(self._sessions.values(), key=lambda s: s.last_used_ms, default=None)
        if lru is None:
            return False
        if now - lru.last_used_ms > self.eviction_ms:
            del self._sessions[lru.id]
            self.evictions += 1
            return True
        # sessions older than eviction_ms may lose their slot to a larger (or privileged) newcomer; a
        # privileged newcomer may also evict younger unprivileged ones
        old = [
            s
            for s in self._sessions.values()
            if now - s.created_ms > self.eviction_ms or (privileged and not s.privileged)
        ]
        if not old:
            return False
        victim = min(old, key=lambda s: (s.privileged, len(s.partitions), s.id))
        if (privileged, size) <= (victim.privileged, len(victim.partitions)):
            return False
        del self._sessions[victim.id]
        self.evictions += 1
        return True

    def _new_id(self) -> int:
        while True:
            sid = random.randint(1, 0x7FFFFFFF)
            if sid not in self._sessions:
                return sid


def _sessionless(resp: FetchResponse) -> FetchResponse:
    resp.session_id = INVALID_SESSION_ID
    return resp
