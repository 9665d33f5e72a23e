"""A consumer's subscription state: the assigned partitions and each one's position and fetch state.

Modelled on aiokafka's ``consumer/subscription_state.py`` (Kafka's
``SubscriptionState``): :class:`SubscriptionState` owns the assignment and a
:class:`PartitionState` per assigned partition, and every change to them is
one of the named transitions below. Who drives them:

* the application (``Consumer.assign/seek/pause/resume``): :meth:`SubscriptionState.assign`,
  :meth:`PartitionState.seek`, :meth:`PartitionState.pause` / :meth:`~PartitionState.resume`;
* position resolution (committed offset, else ``auto_offset_reset``):
  :meth:`SubscriptionState.unresolved`, :meth:`PartitionState.reset_to`, :meth:`PartitionState.fail`;
* the fetch pipeline: :meth:`SubscriptionState.fetchable` and :meth:`PartitionState.next_fetch`
  (which partitions fetch now, and where: guessed ahead when one is in flight), :meth:`PartitionState.fetch_sent`,
  :meth:`PartitionState.fetch_settled`, :meth:`SubscriptionState.fetch_answered`
  (buffer the records, or reset, back off or fail);
* ``poll()`` / ``poll_arrow()``: :meth:`PartitionState.take` / :meth:`PartitionState.take_all`
  hand out buffered rows and advance the position past them.

Not thread-safe by itself: the consumer holds its lock around every call
(its fetches are answered on an I/O thread while ``poll()`` runs on the
application's), except where a method says otherwise.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from ..errors import ConfigError, CorruptRecord, OffsetOutOfRange, error_for_code
from ..format import iter_headers, read_header
from ..protocol.messages import FetchPartitionResponse
from ..topics import TopicPartition
from .committed import committed_only
from .fetched import RowSpans, _Fetched

log = logging.getLogger(__name__)

#: What a fetch answer meant for one partition (:meth:`PartitionState.answered`).
ANSWER_NOTHING = 0  # nothing for poll() (no new records, a stale or dropped answer)
ANSWER_READY = 1  # records buffered, or an error or reset for poll() to act on: wake it
ANSWER_RETRY = 2  # a retriable error (a leader moved): backing off, the metadata is stale


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """The consumer's settings that decide what a fetch answer does to a partition's state."""

    #: 1: read_committed (aborted transactions filtered out, readable end = last stable offset), 0: read_uncommitted
    isolation: int
    check_crcs: bool
    #: "earliest", "latest" or "none": what an out-of-range position does
    auto_offset_reset: str
    #: a partition's fetch size, and the bound a too-small one grows to for a batch larger than it
    max_partition_fetch_bytes: int
    fetch_max_bytes: int
    #: seconds a partition waits after a retriable fetch error
    retry_backoff: float


class PartitionState:
    """One assigned partition: its position, what is fetched ahead of it, and the fetch pipeline."""

    __slots__ = (
        "position",
        "fetch_position",
        "buffered",
        "buffered_bytes",
        "epoch",
        "pending",
        "span",
        "error",
        "high_watermark",
        "readable_end",
        "log_start_offset",
        "max_bytes",
        "retry_at",
        "reset_pending",
        "sent_ahead",
        "dropped",
        "paused",
    )

    def __init__(self, max_bytes: int) -> None:
        #: the next offset poll() returns; None until resolved (committed offset, else the reset policy)
        self.position: int | None = None
        #: where the next fetch starts: the end of what is buffered (None with the position)
        self.fetch_position: int | None = None
        #: fetched answers not yet handed out, oldest first, and their size in bytes
        self.buffered: deque[_Fetched] = deque()
        self.buffered_bytes = 0
        #: bumped by every seek and reset: answers to fetches sent before it are dropped
        self.epoch = 0
        #: (offset, epoch) of each fetch in flight, oldest first
        self.pending: list[tuple[int, int]] = []
        #: offsets the last answer covered: the guess for where a pipelined fetch starts (0: none yet)
        self.span = 0
        #: an error for the next poll() to raise (no valid position with reset "none", a fetch error)
        self.error: BaseException | None = None
        #: the log end offset seen in the last fetch (-1 before any)
        self.high_watermark = -1
        #: the end of what a fetch can return (the high watermark, or the last stable offset for read_committed)
        self.readable_end = -1
        #: the log start offset seen in the last fetch (-1 before any)
        self.log_start_offset = -1
        #: this partition's fetch size: grows for a batch larger than it, back to the setting after
        self.max_bytes = max_bytes
        #: monotonic time before which no fetch is sent (a backoff after an error)
        self.retry_at = 0.0
        #: the position was lost (out of range): the reset policy resolves it, not the committed offset
        self.reset_pending = False
        #: fetches sent while another was in flight, and their answers dropped (the guess missed)
        self.sent_ahead = self.dropped = 0
        #: paused by the application: neither fetched nor handed out until resumed
        self.paused = False

    # ------------------------------------------------------------ position

    def seek(self, offset: int | None) -> None:
        """Make ``offset`` the position; what was fetched, or is in flight, for the old one is discarded."""
        self.position = self.fetch_position = offset
        self.buffered.clear()
        self.buffered_bytes = 0
        self.epoch += 1
        self.error = None
        self.reset_pending = False
        self.retry_at = 0.0

    def reset_to(self, offset: int) -> None:
        """A resolved position (committed offset, or the reset policy's log start or end)."""
        self.seek(offset)

    def await_reset(self) -> None:
        """The position fell outside the log: forget it until the reset policy resolves it again."""
        self.position = self.fetch_position = None
        self.reset_pending = True
        self.epoch += 1

    def fail(self, error: BaseException) -> None:
        """Keep ``error`` for the next poll() to raise."""
        self.error = error

    def take_error(self) -> BaseException | None:
        """The error kept for poll(), now handed over (None: none)."""
        err, self.error = self.error, None
        return err

    def pause(self) -> None:
        """Stop fetching and handing out records (what is buffered is kept)."""
        self.paused = True

    def resume(self) -> None:
        """Undo :meth:`pause`."""
        self.paused = False

    # ------------------------------------------------------------ handing records out (poll)

    def take(self, limit: int) -> tuple[list[pa.Table | RowSpans], int]:
        """Up to ``limit`` buffered rows from the position on (Arrow tables, or row spans of the fetched
        bytes where the compiled core indexed them), and their count; the position moves past them."""
        out: list[pa.Table | RowSpans] = []
        count = 0
        buffered = self.buffered
        while buffered and count < limit:
            f = buffered[0]
            part, after, done = f.take(self.position, limit - count)
            rows = part.num_rows
            if rows:
                out.append(part)
                count += rows
                self.position = after
            if done:
                buffered.popleft()
                self.buffered_bytes -= f.size
                self.position = max(self.position, f.next_offset)  # past a compaction gap
        return out, count

    def take_all(self) -> list[pa.Table]:
        """Every buffered row from the position on (tables without rows left out); the position moves past."""
        out: list[pa.Table] = []
        buffered = self.buffered
        while buffered:
            f = buffered[0]
            t = f.arrow(self.position)
            buffered.popleft()
            self.buffered_bytes -= f.size
            if t.num_rows:
                out.append(t)
            # next_offset follows the last record (and a compaction gap after it): no scalar of the
            # offset column needed
            self.position = max(self.position, f.next_offset)
        return out

    def discard_buffered(self) -> None:
        """Drop what is buffered, keeping the position (undecodable bytes: the same would fail again)."""
        self.buffered.clear()
        self.buffered_bytes = 0

    # ------------------------------------------------------------ the fetch pipeline

    def next_fetch(self, depth: int) -> int | None:
        """Where this partition's next fetch starts, or None (``depth`` fetches in flight, or no guess).

        :meth:`SubscriptionState.fetchable` asks only a partition that may
        fetch now (not failed, paused or backing off, and with room for
        another answer). At the fetch position when no fetch in flight
        starts there. Else, pipelined (depth > 1), the
        first of fetch position + k * span (the last answer's span) not in
        flight: exact for batches of one size; a wrong guess costs one fetch,
        whose answer ``continues`` rejects. Never at or past the readable
        end, where a fetch would wait (and hold up the connection's requests).
        """
        fp = self.fetch_position
        pending = self.pending
        if fp is None or len(pending) >= depth:
            return None
        epoch = self.epoch
        mine = {o for o, e in pending if e == epoch}
        if fp not in mine:
            return fp
        # the guesses go on from the fetch position, one span each, not from the newest fetch in flight:
        # a guess inside a batch (answered from the batch's start) was repeated by every later guess,
        # each of them duplicating the fetch before it
        span = self.span
        nxt = fp + span
        while span > 0 and nxt in mine:
            nxt += span
        return nxt if span > 0 and nxt < self.readable_end else None

    def fetch_sent(self, offset: int) -> int:
        """A fetch at ``offset`` is on its way; returns the epoch its answer must match."""
        self.sent_ahead += bool(self.pending)
        self.pending.append((offset, self.epoch))
        return self.epoch

    def fetch_settled(self, offset: int, epoch: int) -> None:
        """The fetch at ``offset`` was answered (or failed)."""
        try:
            self.pending.remove((offset, epoch))
        except ValueError:
            pass

    def back_off(self, until: float) -> None:
        """No fetch before monotonic time ``until``."""
        self.retry_at = until

    def continues(self, data: bytes | bytearray | memoryview) -> int | None:
        """For an answer to a fetch that did not start at the fetch position (a pipelined guess): the offset
        after its data if that data covers the fetch position (it continues what is buffered; rows before
        the position are skipped when consumed), else None (a gap or nothing new: drop the answer)."""
        walked = iter_headers(data) if data else []
        if not walked or self.fetch_position is None:
            return None
        first, last_next = walked[0][1].base_offset, walked[-1][1].next_offset
        return last_next if first <= self.fetch_position < last_next else None

    def answered(
        self, offset: int, epoch: int, p: FetchPartitionResponse, settings: FetchSettings, now: float
    ) -> int:
        """Apply one partition's fetch answer ``p`` (of the fetch at ``offset``); returns an ``ANSWER_*``."""
        if offset != self.fetch_position:  # a pipelined fetch whose guess missed, or a redundant one
            last_next = None if p.error_code else self.continues(p.records)
            if last_next is None:
                self.dropped += 1
                return ANSWER_NOTHING
            data = committed_only(p.records, p.aborted_transactions) if settings.isolation else p.records
            self.buffered.append(_Fetched(offset, data, epoch, settings.check_crcs, last_next))
            self.buffered_bytes += len(data)
            self.fetch_position = last_next
            return ANSWER_READY
        if p.error_code:
            return self._fetch_failed(offset, p, settings, now)
        self.high_watermark = p.high_watermark
        self.readable_end = (
            p.last_stable_offset if settings.isolation and p.last_stable_offset >= 0 else p.high_watermark
        )
        self.log_start_offset = p.log_start_offset
        data = p.records
        if not data:
            return ANSWER_NOTHING
        walked = iter_headers(data)
        last_next = walked[-1][1].next_offset if walked else None
        if last_next is None:
            # A batch larger than max_bytes: ask for more next time (up to the request bound).
            try:
                need = read_header(data, 0).size
            except CorruptRecord as e:
                self.error = e
                return ANSWER_READY
            self.max_bytes = min(max(need, self.max_bytes * 2), max(settings.fetch_max_bytes, need))
            return ANSWER_NOTHING
        if last_next <= offset:
            return ANSWER_NOTHING
        self.max_bytes = settings.max_partition_fetch_bytes
        self.span = last_next - offset
        if settings.isolation:
            data = committed_only(data, p.aborted_transactions, walked)
        self.buffered.append(_Fetched(offset, data, epoch, settings.check_crcs, last_next))
        self.buffered_bytes += len(data)
        self.fetch_position = last_next
        return ANSWER_READY

    def _fetch_failed(
        self, offset: int, p: FetchPartitionResponse, settings: FetchSettings, now: float
    ) -> int:
        tp = (p.topic, p.partition)
        err = error_for_code(p.error_code, f"fetch {tp[0]}-{tp[1]} at offset {offset}")
        if isinstance(err, OffsetOutOfRange):
            if settings.auto_offset_reset == "none":
                self.error = OffsetOutOfRange(
                    f"offset {offset} is out of range for {tp[0]}-{tp[1]} "
                    f"(log start {p.log_start_offset}, end {p.high_watermark})"
                )
            else:
                log.info(
                    "offset %d out of range for %s-%d; resetting to %s",
                    offset,
                    tp[0],
                    tp[1],
                    settings.auto_offset_reset,
                )
                self.await_reset()
            return ANSWER_READY
        if err.retriable:
            self.retry_at = now + settings.retry_backoff
            return ANSWER_RETRY
        self.error = err
        return ANSWER_READY


class SubscriptionState:
    """The assigned partitions, in assignment order, and each one's :class:`PartitionState`."""

    __slots__ = ("partitions", "order", "settings")

    def __init__(self, settings: FetchSettings) -> None:
        #: the assigned partitions' states (replaced, not edited, by assign())
        self.partitions: dict[TopicPartition, PartitionState] = {}
        #: the assigned partitions in the order given (poll() starts at a different one each time)
        self.order: list[TopicPartition] = []
        self.settings = settings

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """Replace the assignment; a partition assigned before keeps its state (position, buffered data)."""
        old = self.partitions
        size = self.settings.max_partition_fetch_bytes
        self.partitions = {tp: old.get(tp) or PartitionState(size) for tp in tps}
        self.order = list(self.partitions)

    def state(self, tp: tuple[str, int]) -> PartitionState:
        """The state of an assigned partition (ConfigError if it is not assigned)."""
        st = self.partitions.get((tp[0], tp[1]))
        if st is None:
            raise ConfigError(f"partition {tp[0]}-{tp[1]} is not assigned to this consumer")
        return st

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        """Move ``tp``'s position to ``offset`` (see :meth:`PartitionState.seek`)."""
        self.state(tp).seek(offset)

    def positions(self) -> dict[TopicPartition, int]:
        """The known positions (what a commit without offsets stores)."""
        return {tp: st.position for tp, st in self.partitions.items() if st.position is not None}

    def all_resolved(self) -> bool:
        """True when no partition waits for a position (safe without the lock: a snapshot)."""
        return all(st.position is not None or st.error is not None for st in list(self.partitions.values()))

    def unresolved(self) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """(partitions without a position, those of them whose position the reset policy decides)."""
        unknown = [tp for tp, st in self.partitions.items() if st.position is None and st.error is None]
        return unknown, [tp for tp in unknown if self.partitions[tp].reset_pending]

    def resolve(self, found: dict[TopicPartition, int]) -> None:
        """Give the partitions still without a position the ones found (assignment may have changed meanwhile)."""
        for tp, off in found.items():
            st = self.partitions.get(tp)
            if st is not None and st.position is None:
                st.reset_to(off)

    def fail_unresolved(self, tps: Iterable[TopicPartition]) -> None:
        """No position and reset policy "none": poll() raises OffsetOutOfRange for these."""
        for tp in tps:
            st = self.partitions.get(tp)
            if st is not None and st.position is None:
                st.fail(
                    OffsetOutOfRange(f"no valid position for {tp[0]}-{tp[1]} and auto_offset_reset='none'")
                )

    def take_error(self) -> BaseException | None:
        """The first partition error kept for poll(), handed over (None: none)."""
        for st in self.partitions.values():
            if st.error is not None:
                return st.take_error()
        return None

    def waiting_for_position(self) -> bool:
        """True if a partition waits for its position to be resolved (poll() retries after a backoff)."""
        return any(st.position is None and st.error is None for st in self.partitions.values())

    def fetchable(
        self, now: float, depth: int, max_buffered: int
    ) -> list[tuple[TopicPartition, PartitionState, int]]:
        """(partition, state, offset) of each partition to fetch now: none while ``max_buffered`` bytes are buffered.

        A partition fetches unless failed, paused, backing off, or with
        ``2 + depth`` answers buffered or in flight; ``depth`` bounds the
        fetches in flight and :meth:`PartitionState.next_fetch` says where.
        """
        parts = self.partitions
        if sum(st.buffered_bytes for st in parts.values()) >= max_buffered:
            return []
        out = []
        # the cheap checks inline (called at every fetch answer, for every partition)
        for tp, st in parts.items():
            if (
                st.error is not None
                or st.paused
                or st.retry_at > now
                # prefetch a few responses ahead, bounded by fetch_max_bytes
                or len(st.buffered) + len(st.pending) >= 2 + depth
                or (offset := st.next_fetch(depth)) is None
            ):
                continue
            out.append((tp, st, offset))
        return out

    def decode_buffered(self, rows: bool = False) -> None:
        """Decode every buffered answer (without the lock: a snapshot; decoding is idempotent); ``rows``
        (poll()): index it for Messages instead where the compiled core takes it (``_Fetched.index``)."""
        for st in list(self.partitions.values()):
            for f in tuple(st.buffered):
                if rows:
                    f.index()
                else:
                    f.decode()

    def fetch_answered(
        self,
        reqs: list[tuple[TopicPartition, PartitionState, int, int]],
        answers: list[FetchPartitionResponse],
        now: float,
    ) -> tuple[bool, bool]:
        """A fetch's answer: each (partition, state, offset, epoch) of ``reqs`` sent gets its part of ``answers``.

        Returns (records, or an error or reset, for poll() to act on; a
        retriable error: the metadata is stale). A part is dropped when its
        partition was unassigned, or seeked or reset, since the fetch was sent.
        """
        by_tp = {(p.topic, p.partition): p for p in answers}
        current, settings = self.partitions, self.settings
        got = retry = False
        for tp, st, offset, epoch in reqs:
            p = by_tp.get(tp)
            if p is None or current.get(tp) is not st or st.epoch != epoch:
                continue  # unassigned or seeked meanwhile: drop the stale answer
            outcome = st.answered(offset, epoch, p, settings, now)
            if outcome == ANSWER_READY:
                got = True
            elif outcome == ANSWER_RETRY:
                retry = True
        return got, retry
