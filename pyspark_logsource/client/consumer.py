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

Each assigned partition's position and fetch state is owned by
:class:`~.subscription_state.SubscriptionState` (its transitions: assign,
seek, reset, pause/resume, fetch sent/answered, records taken); the offset
requests that resolve and commit positions are :mod:`.positions`; group
membership is :mod:`.group`, handed this consumer's ``assign`` and ``commit``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

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
from ..format import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from ..protocol.messages import FetchPartition, FetchRequest
from ..topics import TopicPartition
from .fetched import Message, RowSpans, _warm_up_decoder, messages_from_arrow
from .group import GroupMembership
from .malloc_tuning import tune_for_fetches
from .metadata import Bootstrap
from .metrics import ClientMetrics
from .network import NetworkClient
from .positions import OffsetRequests
from .security import ClientSecurity
from .subscription_state import FetchSettings, PartitionState, SubscriptionState
from .threads import ClientThread

log = logging.getLogger(__name__)

#: Fetches in flight per partition: while the application decodes one answer the broker prepares
#: the next (see PartitionState.next_fetch for how the next offset is guessed).
FETCH_PIPELINE_DEPTH = 2


class Consumer:
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
        **security: Any,
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ConfigError(
                f"auto_offset_reset must be earliest, latest or none, got {auto_offset_reset!r}"
            )
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
            raise ConfigError(
                f"isolation_level must be read_committed or read_uncommitted, got {isolation_level!r}"
            )
        #: read_committed (the default): no staged or aborted transactional data, latest = last stable offset
        self.isolation = int(isolation_level == "read_committed")
        tune_for_fetches()  # fetch-sized blocks stay in the process: no page faults per answer
        self._stats = ClientMetrics()
        self._client = NetworkClient(
            bootstrap,
            client_id=client_id or "logsource-consumer",
            request_timeout_ms=request_timeout_ms,
            security=ClientSecurity.from_options(security),  # kafka-python's TLS/SASL option names
            stats=self._stats,
        )
        self._lock = threading.Lock()
        self._data = threading.Condition(self._lock)  # poll() waits here for fetched data
        self._work = threading.Condition(self._lock)  # the fetcher waits here for fetchable partitions
        self._send_order = threading.Lock()  # taken before _lock: fetches are sent in the order planned
        self._waiting = 0  # poll() calls waiting on _data (changed under _lock)
        #: the assignment and every partition's position and fetch state (changed under _lock)
        self._subs = SubscriptionState(
            FetchSettings(
                self.isolation,
                check_crcs,
                auto_offset_reset,
                max_partition_fetch_bytes,
                fetch_max_bytes,
                self.retry_backoff,
            )
        )
        self._offsets = OffsetRequests(self._client, group_id, self.isolation)
        self._rr = 0
        self._closed = False
        self._fetch_error: BaseException | None = None
        self._fetch_error_since = 0.0
        self._metadata_stale = False
        self._group: GroupMembership | None = None  # set by subscribe()
        self._group_options = dict(
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            assignors=list(partition_assignment_strategy),
        )
        self._auto_commit = (enable_auto_commit, auto_commit_interval_ms)
        self._fetch_depth = FETCH_PIPELINE_DEPTH
        self._fetcher = ClientThread(self._fetch_loop, "logsource-consumer-fetcher")
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
            self._subs.assign(tps)
            self._work.notify_all()

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        *,
        pattern: str | None = None,
        on_assign: Callable | None = None,
        on_revoke: Callable | None = None,
    ) -> None:
        """Join the group (``group_id``) for these topics or this regex; poll() rebalances (see client/group.py)."""
        if self._group is None:
            self._group = GroupMembership(
                ",".join(f"{h}:{p}" for h, p in self._client.bootstrap),
                self._offsets.group(),
                client_id=self._client.client_id,
                metadata=self._client,
                assign=self.assign,
                commit=self.commit,
                **self._group_options,
            )
        self._group.configure(*self._auto_commit, on_assign, on_revoke)
        self._group.subscribe(list(topics) if topics is not None else None, pattern)

    def assignment(self) -> list[TopicPartition]:
        """The assigned partitions."""
        return list(self._subs.order)

    @property
    def _parts(self) -> dict[TopicPartition, PartitionState]:
        """The assigned partitions' states (read-only use: diagnostics and tests)."""
        return self._subs.partitions

    def pause(self, *tps: tuple[str, int]) -> None:
        """Stop fetching these partitions and returning their records, until ``resume``."""
        with self._lock:
            for st in [self._subs.state(tp) for tp in tps]:
                st.pause()

    def resume(self, *tps: tuple[str, int]) -> None:
        """Fetch and return these paused partitions' records again."""
        with self._lock:
            for st in [self._subs.state(tp) for tp in tps]:
                st.resume()
            self._work.notify_all()

    def paused(self) -> list[TopicPartition]:
        """The paused partitions."""
        with self._lock:
            return [tp for tp, st in self._subs.partitions.items() if st.paused]

    # ------------------------------------------------------------------ positions

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        """Make ``offset`` the next offset returned for ``tp``."""
        if offset < 0:
            raise OffsetOutOfRange(f"cannot seek {tp[0]}-{tp[1]} to negative offset {offset}")
        with self._lock:
            self._subs.seek(tp, int(offset))
            self._work.notify_all()

    def seek_to_beginning(self, *tps: tuple[str, int]) -> None:
        """Seek to the log start offset (no argument: every assigned partition)."""
        self._seek_to(tps, EARLIEST_TIMESTAMP)

    def seek_to_end(self, *tps: tuple[str, int]) -> None:
        """Seek to the log end offset (no argument: every assigned partition)."""
        self._seek_to(tps, LATEST_TIMESTAMP)

    def _seek_to(self, tps: tuple, spec: int) -> None:
        targets = [(t, p) for t, p in tps] if tps else list(self._subs.order)
        for tp in targets:
            self._subs.state(tp)
        offsets = self._offsets.list_offsets(targets, spec)
        with self._lock:
            for tp in targets:
                self._subs.seek(tp, offsets[tp])
            self._work.notify_all()

    def position(self, tp: tuple[str, int]) -> int:
        """The next offset ``poll()`` will return for ``tp`` (resolved if unknown)."""
        if self._subs.state(tp).position is None:
            self._resolve_positions()
        return self._subs.state(tp).position  # type: ignore[return-value]

    def highwater(self, tp: tuple[str, int]) -> int:
        """The log end offset seen in the last fetch (-1 before any)."""
        return self._subs.state(tp).high_watermark

    def _resolve_positions(self) -> None:
        """Give every partition with an unknown position one (committed offset, else the reset policy)."""
        # racy pre-check without the lock: the common case is "all positions known"
        if self._subs.all_resolved():
            return
        with self._lock:
            unknown, resets = self._subs.unresolved()
        if not unknown:
            return
        found: dict[TopicPartition, int] = {}
        fresh = [tp for tp in unknown if tp not in resets]
        if self.group_id is not None and fresh:
            committed = self._offsets.fetch_committed(fresh)
            found.update({tp: off for tp, off in committed.items() if off is not None and off >= 0})
        rest = [tp for tp in unknown if tp not in found]
        if rest:
            if self.auto_offset_reset == "none":
                with self._lock:
                    self._subs.fail_unresolved(rest)
                return
            spec = EARLIEST_TIMESTAMP if self.auto_offset_reset == "earliest" else LATEST_TIMESTAMP
            found.update(self._offsets.list_offsets(rest, spec))
        with self._lock:
            self._subs.resolve(found)
            self._work.notify_all()

    def commit(self, offsets: dict[tuple[str, int], int | tuple[int, str]] | None = None) -> None:
        """Store offsets for the group (default: the current position of every assigned partition)."""
        self._offsets.group()
        if offsets is None:
            with self._lock:
                offsets = self._subs.positions()
        grp = self._group
        gen, member = (grp.generation, grp.member_id) if grp is not None and grp.member_id else (-1, "")
        self._offsets.commit(offsets, gen, member)

    def committed(self, tp: tuple[str, int]) -> int | None:
        """The group's committed offset for ``tp`` (None when there is none)."""
        return self._offsets.fetch_committed([(tp[0], tp[1])])[(tp[0], tp[1])]

    # ------------------------------------------------------------------ polling

    def poll(self, timeout_ms: float = 1000, max_records: int = 500) -> list[Message]:
        """Return up to ``max_records`` records, waiting up to ``timeout_ms`` for the first."""
        taken: list[tuple[TopicPartition, pa.Table | RowSpans]] = []
        count = 0

        def take(tp: TopicPartition, st: PartitionState) -> bool:
            nonlocal count
            parts, n = st.take(max_records - count)
            for part in parts:
                taken.append((tp, part))
            count += n
            return count >= max_records

        self._wait_and_take(timeout_ms, take, lambda: count > 0, rows=True)
        # the Message objects are made without the lock: the I/O thread hands over answers meanwhile
        out: list[Message] = []
        for tp, part in taken:
            if type(part) is RowSpans:  # compiled: straight from the fetched bytes
                part.messages(tp[0], tp[1], out)
            else:
                out += messages_from_arrow(tp[0], tp[1], part)
        self._stats.add_records(len(out))
        return out

    def poll_arrow(self, timeout_ms: float = 1000) -> dict[TopicPartition, pa.Table]:
        """Return every buffered record as one Arrow table (``ARROW_SCHEMA``) per partition."""
        taken: dict[TopicPartition, list[pa.Table]] = {}

        def take(tp: TopicPartition, st: PartitionState) -> bool:
            tables = st.take_all()
            if tables:
                taken.setdefault(tp, []).extend(tables)
            return False

        self._wait_and_take(timeout_ms, take, lambda: bool(taken))
        self._stats.add_records(sum(t.num_rows for ts in taken.values() for t in ts))
        return {tp: ts[0] if len(ts) == 1 else pa.concat_tables(ts) for tp, ts in taken.items()}

    def metrics(self) -> dict[str, float]:
        """Kafka's consumer metrics: ``records-consumed-total`` (returned by poll), ``bytes-consumed-total``
        (record bytes of the fetch answers), ``request-latency-avg``/``-max`` (ms, every request),
        ``fetch-throttle-time-avg``/``-max`` (ms), ``request-total``, and ``records-lag-max``: the largest
        high watermark minus position over the assigned partitions now (-1 before any fetch answered)."""
        out = self._stats.snapshot("records-consumed-total", "bytes-consumed-total", "fetch")
        with self._lock:
            lags = [
                st.high_watermark - st.position
                for st in self._subs.partitions.values()
                if st.position is not None and st.high_watermark >= 0
            ]
        out["records-lag-max"] = max(lags) if lags else -1
        return out

    def _wait_and_take(self, timeout_ms: float, take, have, rows: bool = False) -> None:
        self._check_open()
        if self._group is not None:
            self._group.tick()
        deadline = time.monotonic() + max(0.0, timeout_ms) / 1000.0
        subs = self._subs
        while True:
            self._resolve_positions()
            # decode what is buffered before taking the lock, which the I/O thread needs for each answer
            subs.decode_buffered(rows)
            with self._lock:
                err = subs.take_error()
                if err is not None:
                    raise err
                order = subs.order
                if order:
                    parts = subs.partitions
                    start = self._rr % len(order)
                    self._rr += 1
                    for tp in order[start:] + order[:start]:
                        st = parts[tp]
                        if st.buffered and st.position is not None and not st.paused:
                            try:
                                if take(tp, st):
                                    break
                            except CorruptRecord:
                                # keep the position: the same bytes would fail again; surface it
                                st.discard_buffered()
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
                if subs.waiting_for_position():
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

    def _fetchable(
        self, now: float, peek: bool = False
    ) -> dict[int, list[tuple[TopicPartition, PartitionState, int]]]:
        # lock held; peek: only answer whether anything is fetchable, change nothing
        out: dict[int, list] = {}
        for tp, st, offset in self._subs.fetchable(now, self._fetch_depth, self.fetch_max_bytes):
            leader = self._client.cluster.leader(*tp)
            if leader is not None and self._client.throttled(leader, now):
                continue  # the broker throttled us (throttle_time_ms): the fetcher thread retries soon
            if leader is None:
                if peek:
                    continue
                self._metadata_stale = True
                st.back_off(now + self.retry_backoff)
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
                    self._client.refresh_metadata(sorted({t for t, _ in self._subs.order}) or None)
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
                        reqs.append((tp, st, offset, st.fetch_sent(offset)))
                    plans.append((node, reqs))
            for node, reqs in plans:
                self._send_fetch(node, reqs)
        return len(plans)

    def _send_fetch(self, node: int, reqs: list) -> None:
        req = FetchRequest(
            [FetchPartition(tp[0], tp[1], off, st.max_bytes) for tp, st, off, _ in reqs],
            max_wait_ms=self.fetch_max_wait_ms,
            min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes,
            isolation_level=self.isolation,
        )

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
            conn = self._client.node_connection(
                node, refresh=False
            )  # maybe on an I/O thread: no blocking refresh
            conn.send(req, done, timeout=self.request_timeout + self.fetch_max_wait_ms / 1000.0)
        except LogSourceError as e:
            self._on_fetch(reqs, None, e)

    def _on_fetch(self, reqs: list, resp, error: BaseException | None) -> bool:
        """Buffer a fetch's answer; True when poll() has new data to wake up for (the caller wakes it)."""
        now = time.monotonic()
        with self._lock:
            for _, st, off, epoch in reqs:
                st.fetch_settled(off, epoch)
            if error is None and resp is not None and resp.error_code:
                error = error_for_code(resp.error_code, "fetch failed")
            if error is not None:
                if not self._closed:
                    log.debug("fetch failed: %s", error)
                    if self._fetch_error is None:
                        self._fetch_error_since = now
                    self._fetch_error = error
                    for _, st, _, _ in reqs:
                        st.back_off(now + self.retry_backoff)
                    if isinstance(error, LogSourceError) and error.retriable:  # a broker gone, a leader moved
                        self._metadata_stale = True
                self._work.notify_all()
                self._data.notify_all()
                return False
            self._fetch_error = None
            self._stats.add_bytes(sum(len(p.records) for p in resp.partitions if p.records is not None))
            got, retry = self._subs.fetch_answered(reqs, resp.partitions, now)
            if retry:
                self._metadata_stale = True
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
            self._group.close()
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
