"""The Consumer: assigned partitions, a background prefetcher, positions and group offsets.

A fetcher thread keeps up to ``fetch_max_bytes`` of fetched record batches
ahead of the application, with long-poll Fetch requests to each partition
leader (``fetch_max_wait_ms`` / ``fetch_min_bytes``). ``poll()`` hands out
records as :class:`Message` tuples; ``poll_arrow()`` hands out whole Arrow
tables per partition (no per-record Python objects), which is what Spark
uses.

Positions follow Kafka: ``position(tp)`` is the next offset the application
will get; an unknown position is taken from the group's committed offset
(when ``group_id`` is set) or from ``auto_offset_reset``, which also decides
what happens when a position falls outside the log (``"none"`` raises
OffsetOutOfRange from ``poll()``).

Seeks, positions, offset resets and committed offsets are in :mod:`.positions`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa

from ..errors import (
    ClientClosed,
    ConfigError,
    CorruptRecord,
    LogSourceError,
    OffsetOutOfRange,
    UnknownTopicOrPartition,
    error_for_code,
)
from ..format import iter_headers, read_header
from ..protocol.messages import FetchPartition, FetchRequest
from .fetched import (
    Message,
    _Fetched,
    _PartitionState,
    _warm_up_decoder,
    messages_from_arrow,
)
from .group import GroupMembership
from .metadata import Bootstrap
from .network import NetworkClient
from .positions import ConsumerPositionsMixin
from .txn import committed_only

log = logging.getLogger(__name__)

#: Fetches in flight per partition: while the application decodes one answer the broker prepares
#: the next (see _PartitionState.next_fetch for how the next offset is guessed).
FETCH_PIPELINE_DEPTH = 2

TopicPartition = tuple[str, int]


class Consumer(ConsumerPositionsMixin):
    """Read assigned partitions; blocking API with a background prefetch thread."""

    def __init__(
        self,
        bootstrap: Bootstrap | None = None,
        *,
        group_id: str | None = None,
        auto_offset_reset: str = "earliest",
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_partition_fetch_bytes: int = 1024 * 1024,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        request_timeout_ms: float = 30000,
        retry_backoff_ms: float = 100,
        check_crcs: bool = True,
        client_id: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: float = 5000,
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        partition_assignment_strategy: tuple[str, ...] = ("range",),
        metadata_max_age_ms: float = 300000,
        isolation_level: str = "read_committed",
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ConfigError(f"auto_offset_reset must be earliest, latest or none, got {auto_offset_reset!r}")
        if fetch_max_bytes < 1 or max_partition_fetch_bytes < 1:
            raise ConfigError("fetch sizes must be positive")
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_wait_ms = int(fetch_max_wait_ms)
        self.fetch_min_bytes = int(fetch_min_bytes)
        self.request_timeout = request_timeout_ms / 1000.0
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.check_crcs = check_crcs
        if isolation_level not in ("read_committed", "read_uncommitted"):
            raise ConfigError(f"isolation_level must be read_committed or read_uncommitted, got {isolation_level!r}")
        #: read_committed (the default): no staged or aborted transactional data, latest = last stable offset
        self.isolation = int(isolation_level == "read_committed")
        self._client = NetworkClient(
            bootstrap, client_id=client_id or "logsource-consumer", request_timeout_ms=request_timeout_ms
        )
        self._lock = threading.Lock()
        self._data = threading.Condition(self._lock)  # poll() waits here for fetched data
        self._work = threading.Condition(self._lock)  # the fetcher waits here for fetchable partitions
        self._send_order = threading.Lock()  # taken before _lock: fetches are sent in the order planned
        self._waiting = 0  # poll() calls waiting on _data (changed under _lock)
        self._parts: dict[TopicPartition, _PartitionState] = {}
        self._order: list[TopicPartition] = []
        self._rr = 0
        self._closed = False
        self._fetch_error: BaseException | None = None
        self._fetch_error_since = 0.0
        self._metadata_stale = False
        self._group: GroupMembership | None = None  # set by subscribe()
        self._group_options = dict(session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                                   max_poll_interval_ms=max_poll_interval_ms, metadata_max_age_ms=metadata_max_age_ms,
                                   assignors=list(partition_assignment_strategy))  # fmt: skip
        self._auto_commit = (enable_auto_commit, auto_commit_interval_ms)
        self._fetch_depth = FETCH_PIPELINE_DEPTH
        self._fetcher = threading.Thread(target=self._fetch_loop, name="logsource-consumer-fetcher", daemon=True)
        self._fetcher.start()

    # ------------------------------------------------------------------ assignment

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Read exactly these partitions (replaces the previous assignment)."""
        self._check_open()
        tps = [(str(t), int(p)) for t, p in partitions]
        for topic in {t for t, _ in tps}:
            desc = self._client.topic(topic, refresh=True)
            n = len(desc.partitions)
            for t, p in tps:
                if t == topic and not 0 <= p < n:
                    raise UnknownTopicOrPartition(f"topic {topic!r} has no partition {p} (it has {n})")
        with self._lock:
            old = self._parts
            self._parts = {tp: old.get(tp) or _PartitionState(self.max_partition_fetch_bytes) for tp in tps}
            self._order = list(self._parts)
            self._work.notify_all()

    def subscribe(self, topics: Iterable[str] | None = None, *, pattern: str | None = None,
                  on_assign: Callable | None = None, on_revoke: Callable | None = None) -> None:  # fmt: skip
        """Join the group (``group_id``) for these topics or this regex; poll() rebalances (see client/group.py)."""
        if self._group is None:
            self._group = GroupMembership(",".join(f"{h}:{p}" for h, p in self._client.bootstrap), self._need_group(),
                                          client_id=self._client.client_id, **self._group_options)  # fmt: skip
        self._group.configure(*self._auto_commit, on_assign, on_revoke)
        self._group.subscribe(list(topics) if topics is not None else None, pattern)

    def assignment(self) -> list[TopicPartition]:
        """The assigned partitions."""
        return list(self._order)

    def _state(self, tp: tuple[str, int]) -> _PartitionState:
        st = self._parts.get((tp[0], tp[1]))
        if st is None:
            raise ConfigError(f"partition {tp[0]}-{tp[1]} is not assigned to this consumer")
        return st

    # ------------------------------------------------------------------ polling

    def poll(self, timeout_ms: float = 1000, max_records: int = 500) -> list[Message]:
        """Return up to ``max_records`` records, waiting up to ``timeout_ms`` for the first."""
        taken: list[tuple[TopicPartition, pa.Table]] = []
        count = 0

        def take(tp: TopicPartition, st: _PartitionState) -> bool:
            nonlocal count
            while st.buffered and count < max_records:
                f = st.buffered[0]
                t = f.arrow(st.position)
                if t.num_rows == 0:
                    self._pop(st)
                    st.position = max(st.position, f.next_offset)  # past a compaction gap
                    continue
                part = t.slice(0, max_records - count)
                taken.append((tp, part))
                count += part.num_rows
                st.position = int(part.column("offset")[-1].as_py()) + 1
                if part.num_rows == t.num_rows:
                    self._pop(st)
                    st.position = max(st.position, f.next_offset)  # past a compaction gap
            return count >= max_records

        self._wait_and_take(timeout_ms, take, lambda: count > 0)
        # the Message objects are made without the lock: the I/O thread hands over answers meanwhile
        out: list[Message] = []
        for tp, part in taken:
            out += messages_from_arrow(tp[0], tp[1], part)
        return out

    def poll_arrow(self, timeout_ms: float = 1000) -> dict[TopicPartition, pa.Table]:
        """Return every buffered record as one Arrow table (``ARROW_SCHEMA``) per partition."""
        taken: dict[TopicPartition, list[pa.Table]] = {}

        def take(tp: TopicPartition, st: _PartitionState) -> bool:
            while st.buffered:
                f = st.buffered[0]
                t = f.arrow(st.position)
                self._pop(st)
                if t.num_rows:
                    taken.setdefault(tp, []).append(t)
                # next_offset follows the last record (and a compaction gap after it): no scalar of the
                # offset column needed
                st.position = max(st.position, f.next_offset)
            return False

        self._wait_and_take(timeout_ms, take, lambda: bool(taken))
        return {tp: ts[0] if len(ts) == 1 else pa.concat_tables(ts) for tp, ts in taken.items()}

    def _pop(self, st: _PartitionState) -> None:
        f = st.buffered.popleft()
        st.buffered_bytes -= f.size

    def _wait_and_take(self, timeout_ms: float, take, have) -> None:
        self._check_open()
        if self._group is not None:
            self._group.tick(self)
        deadline = time.monotonic() + max(0.0, timeout_ms) / 1000.0
        while True:
            self._resolve_positions()
            # decode what is buffered before taking the lock, which the I/O thread needs for each answer
            for st in list(self._parts.values()):
                for f in tuple(st.buffered):
                    f.decode()
            with self._lock:
                for st in self._parts.values():
                    if st.error is not None:
                        err, st.error = st.error, None
                        raise err
                order = self._order
                if order:
                    start = self._rr % len(order)
                    self._rr += 1
                    for tp in order[start:] + order[:start]:
                        st = self._parts[tp]
                        if st.buffered and st.position is not None:
                            try:
                                if take(tp, st):
                                    break
                            except CorruptRecord:
                                # keep the position: the same bytes would fail again; surface it
                                st.buffered.clear()
                                st.buffered_bytes = 0
                                self._work.notify()
                                raise
                if have():
                    break
                err = self._fetch_error
                if err is not None and time.monotonic() - self._fetch_error_since > self.request_timeout:
                    self._fetch_error = None
                    raise err
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if any(st.position is None and st.error is None for st in self._parts.values()):
                    left = min(left, self.retry_backoff)
                self._waiting += 1
                try:
                    self._data.wait(left)
                finally:
                    self._waiting -= 1
            if self._closed:
                raise ClientClosed("consumer closed")
        # fetch into the room just made from here: waking the fetcher thread costs two thread switches
        self._issue_fetches()

    def __iter__(self) -> Iterator[Message]:
        """Yield records forever, blocking for new ones (until close())."""
        while not self._closed:
            try:
                batch = self.poll(1000)
            except ClientClosed:
                return
            yield from batch

    # ------------------------------------------------------------------ fetcher thread

    def _fetchable(self, now: float, peek: bool = False) -> dict[int, list[tuple[TopicPartition, _PartitionState, int]]]:
        # lock held; peek: only answer whether anything is fetchable, change nothing
        total = sum(st.buffered_bytes for st in self._parts.values())
        if total >= self.fetch_max_bytes:
            return {}
        out: dict[int, list] = {}
        for tp, st in self._parts.items():
            if (
                st.error is not None
                or st.retry_at > now
                # prefetch a few responses ahead, bounded by fetch_max_bytes
                or len(st.buffered) + len(st.pending) >= 2 + self._fetch_depth
                or (offset := st.next_fetch(self._fetch_depth)) is None
            ):
                continue
            leader = self._client.cluster.leader(*tp)
            if leader is None:
                if peek:
                    continue
                self._metadata_stale = True
                st.retry_at = now + self.retry_backoff
                continue
            out.setdefault(leader, []).append((tp, st, offset))
        return out

    def _fetch_loop(self) -> None:
        _warm_up_decoder()
        # Fetches are chained from the response callback (no thread hop on the hot path);
        # this thread starts them, refreshes metadata and restarts after backoffs and polls.
        while not self._closed:
            if self._metadata_stale:
                self._metadata_stale = False
                try:
                    self._client.refresh_metadata(sorted({t for t, _ in self._order}) or None)
                except LogSourceError as e:
                    with self._lock:
                        self._fetch_error = self._fetch_error or e
                        self._metadata_stale = True
                    time.sleep(self.retry_backoff)
                    continue
            if self._issue_fetches() == 0:
                with self._lock:
                    if not self._closed and not self._fetchable(time.monotonic(), peek=True):
                        self._work.wait(0.1)

    def _issue_fetches(self) -> int:
        """Send a Fetch to each leader with fetchable partitions; return how many were sent."""
        # Fetches leave in the order they are planned: poll() and the I/O thread both plan and send, and
        # a guessed fetch that overtook the one before it was answered first and dropped (then fetched
        # again): 62-110 of ~300 fetches with three in flight, 4-10 with two.
        with self._send_order:
            with self._lock:
                if self._closed:
                    return 0
                groups = self._fetchable(time.monotonic())
                plans = []
                for node, items in groups.items():
                    reqs = []
                    for tp, st, offset in items:
                        st.sent_ahead += bool(st.pending)
                        st.pending.append((offset, st.epoch))
                        reqs.append((tp, st, offset, st.epoch))
                    plans.append((node, reqs))
            for node, reqs in plans:
                self._send_fetch(node, reqs)
        return len(plans)

    def _send_fetch(self, node: int, reqs: list) -> None:
        req = FetchRequest(
            [FetchPartition(tp[0], tp[1], off, st.max_bytes) for tp, st, off, _ in reqs],
            max_wait_ms=self.fetch_max_wait_ms, min_bytes=self.fetch_min_bytes, max_bytes=self.fetch_max_bytes,
            isolation_level=self.isolation,
        )  # fmt: skip

        def done(resp, error) -> None:
            got = self._on_fetch(reqs, resp, error)
            try:
                if error is None and not self._closed:
                    self._issue_fetches()  # chain the next fetch right here, in the I/O thread
            finally:
                # poll() is woken once the next fetch is out: woken first, it took the GIL for its
                # decoding while this thread waited to send, and the broker sat idle meanwhile. The
                # count is read without the lock: a poll() that waits does so before _on_fetch can
                # buffer (it holds the lock until it waits), and one that did not wait sees the data.
                # A busy poll() (message by message) is then not made to hand the lock over once more.
                if got and self._waiting:
                    with self._lock:
                        self._data.notify_all()

        try:
            conn = self._client.node_connection(node, refresh=False)  # maybe on an I/O thread: no blocking refresh
            conn.send(req, done, timeout=self.request_timeout + self.fetch_max_wait_ms / 1000.0)
        except LogSourceError as e:
            self._on_fetch(reqs, None, e)

    def _on_fetch(self, reqs: list, resp, error: BaseException | None) -> bool:
        """Buffer a fetch's answer; True when poll() has new data to wake up for (the caller wakes it)."""
        now = time.monotonic()
        with self._lock:
            for _, st, off, epoch in reqs:
                st.settle(off, epoch)
            if error is None and resp is not None and resp.error_code:
                error = error_for_code(resp.error_code, "fetch failed")
            if error is not None:
                if not self._closed:
                    log.debug("fetch failed: %s", error)
                    if self._fetch_error is None:
                        self._fetch_error_since = now
                    self._fetch_error = error
                    for _, st, _, _ in reqs:
                        st.retry_at = now + self.retry_backoff
                    if isinstance(error, LogSourceError) and error.retriable:  # a broker gone, a leader moved
                        self._metadata_stale = True
                self._work.notify_all()
                self._data.notify_all()
                return False
            self._fetch_error = None
            by_tp = {(p.topic, p.partition): p for p in resp.partitions}
            got = False
            for tp, st, off, epoch in reqs:
                p = by_tp.get(tp)
                if p is None or self._parts.get(tp) is not st or st.epoch != epoch:
                    continue  # unassigned or seeked meanwhile: drop the stale answer
                if off != st.fetch_position:  # a pipelined fetch whose guess missed, or a redundant one
                    last_next = None if p.error_code else st.continues(p.records)
                    if last_next is not None:
                        data = committed_only(p.records, p.aborted_transactions) if self.isolation else p.records
                        st.buffered.append(_Fetched(off, data, epoch, self.check_crcs, last_next))
                        st.buffered_bytes += len(data)
                        st.fetch_position = last_next
                        got = True
                    else:
                        st.dropped += 1
                    continue
                if p.error_code:
                    err = error_for_code(p.error_code, f"fetch {tp[0]}-{tp[1]} at offset {off}")
                    if isinstance(err, OffsetOutOfRange):
                        if self.auto_offset_reset == "none":
                            st.error = OffsetOutOfRange(
                                f"offset {off} is out of range for {tp[0]}-{tp[1]} "
                                f"(log start {p.log_start_offset}, end {p.high_watermark})"
                            )
                        else:
                            log.info("offset %d out of range for %s-%d; resetting to %s", off, tp[0], tp[1],
                                     self.auto_offset_reset)  # fmt: skip
                            st.position = st.fetch_position = None
                            st.reset_pending = True
                            st.epoch += 1
                        got = True
                    elif err.retriable:
                        st.retry_at = now + self.retry_backoff
                        self._metadata_stale = True
                    else:
                        st.error = err
                        got = True
                    continue
                st.high_watermark = p.high_watermark
                st.readable_end = p.last_stable_offset if self.isolation and p.last_stable_offset >= 0 else p.high_watermark
                st.log_start_offset = p.log_start_offset
                data = p.records
                if not data:
                    continue
                last_next = None
                for _, h in iter_headers(data):
                    last_next = h.next_offset
                if last_next is None:
                    # A batch larger than max_bytes: ask for more next time (up to the request bound).
                    try:
                        need = read_header(data, 0).size
                    except CorruptRecord as e:
                        st.error = e
                        got = True
                        continue
                    st.max_bytes = min(max(need, st.max_bytes * 2), max(self.fetch_max_bytes, need))
                    continue
                if last_next <= off:
                    continue
                st.max_bytes = self.max_partition_fetch_bytes
                st.span = last_next - off
                if self.isolation:
                    data = committed_only(data, p.aborted_transactions)
                st.buffered.append(_Fetched(off, data, epoch, self.check_crcs, last_next))
                st.buffered_bytes += len(data)
                st.fetch_position = last_next
                got = True
            # no need to wake the fetcher thread: the response callback sends the next fetches
            return got

    # ------------------------------------------------------------------ lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosed("consumer is closed")

    def close(self) -> None:
        """Stop the fetcher and close the connections."""
        if self._closed:
            return
        if self._group is not None:
            self._group.close(self)
        with self._lock:
            self._closed = True
            self._work.notify_all()
            self._data.notify_all()
        self._client.close()
        self._fetcher.join(timeout=5.0)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
