"""The producer's sender thread: ready batches into Produce requests, answers into futures.

The thread drains the accumulator, has each batch numbered and stamped with the
producer id, epoch and sequence numbers (idempotence), groups runs of batches
into one Produce request per leader, and resolves each batch from the answer:
done, retried (retriable errors, within ``delivery_timeout_ms``) or failed. The
sequence bookkeeping (which batches are unanswered per partition, how a failed
batch gives its numbers back, how a partition whose broker lost this producer's
state restarts at sequence 0) is owned by a
:class:`~.sequences.PartitionSequences`, which the sender asks and tells.

:class:`Sender` owns the sender thread and its loop. The
:class:`~.producer.Producer` holds one as ``_sender`` and hands it, at
construction, what it uses of the producer and nothing more: the accumulator
(the producer's ``send()`` fills it, the sender drains it), the network
client, the frozen :class:`SenderSettings` and a ``refresh_metadata(topics)``
callable (the producer owns the metadata lock). The producer asks it for the
producer id (``producer_id_and_epoch``) and for the broker's batch layout
(``in_broker_layout``), and starts and joins its thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import (
    LogSourceError,
    NetworkError,
    OutOfOrderSequence,
    RequestTimedOut,
    UnknownProducerId,
)
from ..format import arrow_to_kafka, set_producer
from ..format._speedups import load_extension
from ..protocol.connection import OnePartitionProduce
from ..protocol.messages import InitProducerIdRequest, ProducePartitionData, ProduceRequest
from .accumulator import ProducerBatch, RecordAccumulator
from .answers import OneBatchAnswer, RunsAnswer, run_sizes
from .encoding import encode_records
from .metrics import ClientMetrics
from .network import NetworkClient
from .sequences import FAIL, MAX_UNANSWERED_BATCHES, RESTART, PartitionSequences
from .threads import ClientThread

#: the producer's logger: users configure one logger for the producer and its sender
log = logging.getLogger(__package__ + ".producer")

__all__ = ["MAX_UNANSWERED_BATCHES", "Sender", "SenderSettings", "restamp_producer"]
#: Errors after which the metadata (leaders, partitions) is refreshed before a retry.
_METADATA_ERRORS = (3, 5, 6, 74, 75)


def restamp_producer(buf: bytearray, producer_id: int, epoch: int, base_sequence: int) -> None:
    """Write producer id/epoch/base sequence into an encoded batch and fix its CRC."""
    set_producer(buf, producer_id, epoch, base_sequence)


@dataclass(frozen=True, slots=True)
class SenderSettings:
    """The producer settings the sender reads (see :class:`~.producer.Producer` for their meaning)."""

    idempotent: bool
    acks: int
    codec: int
    retries: int
    retry_backoff: float  # seconds
    delivery_timeout: float  # seconds
    request_timeout_ms: float
    max_request_size: int
    max_batches_per_request: int


def round_calls(
    done: list[ProducerBatch],
    leaders: dict,
    by_node: dict[int, list],
    deadline: float,
    acks: int,
    timeout_ms: int,
    sender: Sender,
    no_leader: type[BaseException],
) -> tuple[int, BaseException] | None:
    """The requests of a numbered round of single batches (Sender._stamp_singles): for each of ``done``, its
    deadline set where it has none and ``(OnePartitionProduce, OneBatchAnswer)`` appended to its leader's
    list in ``by_node``; stops at the first batch whose leader in ``leaders`` is a ``no_leader`` error:
    ``(its index, the error)``. The reference of the compiled ``_csingles.round_calls``."""
    for i, b in enumerate(done):
        if b.deadline == 0.0:
            b.deadline = deadline
        node = leaders[b.tp]
        if isinstance(node, no_leader):
            return i, node
        calls = by_node.get(node)
        if calls is None:
            calls = by_node[node] = []
        calls.append(
            (
                OnePartitionProduce(b.topic, b.partition, b.encoded, acks, timeout_ms),
                OneBatchAnswer(sender, b),
            )
        )
    return None


#: round_calls compiled (client/_csingles.pyx: the pairs made by slot, no __init__ per batch) or the reference
_csingles = load_extension(__package__ + "._csingles")
_round_calls = (
    _csingles.round_calls
    if _csingles is not None and _csingles.bind(OnePartitionProduce, OneBatchAnswer)
    else round_calls
)


class Sender:
    """The producer's sender thread (one per producer; see the module docstring)."""

    def __init__(
        self,
        acc: RecordAccumulator,
        client: NetworkClient,
        settings: SenderSettings,
        refresh_metadata: Callable[[list[str]], None],
    ) -> None:
        self._acc = acc
        self._client = client
        self.settings = settings
        # The settings unpacked: the per-batch methods read them with one attribute lookup each, as when they
        # were the producer's attributes.
        self.idempotent = settings.idempotent
        self.acks = settings.acks
        self.codec = settings.codec
        self.retries = settings.retries
        self.retry_backoff = settings.retry_backoff
        self.delivery_timeout = settings.delivery_timeout
        self.request_timeout_ms = settings.request_timeout_ms
        self.max_request_size = settings.max_request_size
        self.max_batches_per_request = settings.max_batches_per_request
        self._refresh_metadata = refresh_metadata
        #: the producer id and the sequence numbers per partition (their one owner)
        self.sequences = PartitionSequences(settings.idempotent)
        self._drain_mark = 0  # RecordAccumulator.answered when the sender last drained
        self._refresh_needed = False
        self._arrow_body: bool | None = None  # learnt from the broker's ApiVersions on first use
        self._thread = ClientThread(self._run, "logsource-producer-sender")
        #: the producer's metrics (records and bytes of each acknowledged batch), set by the producer
        self.stats: ClientMetrics | None = None

    # ------------------------------------------------------------------ what the producer calls

    def start(self) -> None:
        """Start the sender thread: it runs until the accumulator is closed and has nothing pending."""
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the sender thread to end (close the accumulator first)."""
        self._thread.join(timeout=timeout)

    def producer_id_and_epoch(self) -> tuple[int, int]:
        """This producer's id and epoch, asked of the broker (InitProducerId) on first use."""
        if self.sequences.producer_id_and_epoch()[0] < 0:
            self._init_producer_id()
        return self.sequences.producer_id_and_epoch()

    def in_broker_layout(self, data: bytearray) -> bytearray:
        """Our Arrow-bodied batch as is, or in Kafka's layout for a broker without our extension."""
        if self._arrow_body is None:
            self._arrow_body = self._client.arrow_body
        return data if self._arrow_body else arrow_to_kafka(data)

    # ------------------------------------------------------------------ the sender thread

    def _init_producer_id(self) -> None:
        resp = self._client.request(InitProducerIdRequest())
        self.sequences.set_producer(resp.producer_id, resp.producer_epoch)
        log.debug("producer id %d epoch %d", resp.producer_id, resp.producer_epoch)

    def _run(self) -> None:
        acc = self._acc
        max_run, max_bytes = self.max_batches_per_request, self.max_request_size
        while True:
            more_rounds = self.sequences.room(63)  # the rounds over that would only be held, put back
            with acc.lock:
                while True:
                    runs, next_at = acc.drain(time.monotonic(), max_run, max_bytes)
                    if runs:
                        break
                    if acc.closed and not acc.has_pending():
                        return
                    acc.sender_idle = True
                    timeout = None if next_at is None else max(0.0, next_at - time.monotonic())
                    acc.wakeup.wait(timeout if timeout is None else min(timeout, 1.0))
                    acc.sender_idle = False
                # Drain more rounds while ready so several requests share one write: at one batch per
                # request, the rounds of one partition's single batches in one call.
                rounds = [runs]
                singles = acc.drain_singles(runs, time.monotonic(), more_rounds) if max_run == 1 else None
                for _ in range(0 if singles is not None else more_rounds):
                    more, _ = acc.drain(time.monotonic(), max_run, max_bytes)
                    if not more:
                        break
                    rounds.append(more)
                self._drain_mark = acc.answered  # see _sendable
            try:
                if singles is None:
                    self._send_rounds(rounds)
                else:
                    kept_back = self._ready_to_send(singles)
                    if kept_back is not None:
                        self._send_singles(
                            [b for b in singles if b.tp not in kept_back] if kept_back else singles
                        )
            except Exception as e:  # keep the sender alive; the batches carry the error
                log.exception("producer sender failed")
                for b in singles or [b for r in rounds for run in r for b in run]:
                    if not b.done():
                        self.fail_or_retry(b, e)
            # not kept while this thread waits for the next batches: the answered ones' bytes go now
            rounds = runs = more = singles = b = None  # type: ignore[assignment]

    def _prepare(self, b: ProducerBatch) -> None:
        if b.deadline == 0.0:
            b.deadline = time.monotonic() + self.delivery_timeout
        self.sequences.number(b, self._encode)

    def _encode(self, b: ProducerBatch, pid: int, epoch: int, seq: int, restamp: bool) -> None:
        """Stamp and encode a numbered batch for its send (PartitionSequences.number's ``encode``)."""
        if b.encoded is None:
            buf = b.buf
            if buf is not None:  # the compiled accumulator's C buffer encodes itself (same bytes)
                data = buf.encode(self.codec, pid, epoch, seq)
                b.buf = None
                self._acc.recycle(buf)  # type: ignore[attr-defined]
            else:
                data = encode_records(
                    b.values,
                    b.keys if b.has_keys else None,
                    b.timestamps,
                    b.headers,
                    codec=self.codec,
                    producer_id=pid,
                    producer_epoch=epoch,
                    base_sequence=seq,
                )
            b.encoded = data if self._arrow_body else self.in_broker_layout(data)  # (no call as a rule)
            # The records are no longer needed; memory stays accounted until the answer.
            b.values = b.keys = b.timestamps = b.headers = b.buf = None  # type: ignore[assignment]
        elif restamp:
            restamp_producer(b.encoded, pid, epoch, seq)

    def finish(self, b: ProducerBatch, result=None, error: BaseException | None = None) -> None:
        """Complete a batch; a batch that failed for good gives its sequence numbers back."""
        if self.idempotent and b.base_sequence is not None:
            self.sequences.settle(b, error)
        if error is None and self.stats is not None:
            self.stats.add(b.record_count, b.size if b.encoded is None else len(b.encoded))
        self._acc.complete(b, result, error)

    def finish_ok(self, done: list[tuple[ProducerBatch, tuple]]) -> None:
        """finish() for several appended batches ``(batch, result)``: the locks taken once for all."""
        if self.idempotent:
            self.sequences.settle_appended(done)
        if self.stats is not None:
            self.stats.add(*run_sizes(done))
        self._acc.complete_many(done)

    def _ready_to_send(self, batches: list[ProducerBatch]) -> set[tuple[str, int]] | None:
        """The steps before a send: the producer id, sequence resets, a metadata refresh. None when there
        is no producer id (``batches`` then failed or were put back for a retry); else the partitions whose
        sequences could not be restarted yet: their batches were put back for a retry and must not go out
        under the old numbering (empty as a rule)."""
        if self.idempotent and self.sequences.producer_id_and_epoch()[0] < 0:
            try:
                self._init_producer_id()
            except LogSourceError as e:
                for b in batches:
                    self.fail_or_retry(b, e)
                return None
        kept_back: set[tuple[str, int]] = set()
        if self.sequences.unsettled():  # (rare: one call per round otherwise)
            if self.sequences.has_unresolved():
                self.sequences.resolve()
            error = self._reset_sequences()
            if error is not None:
                resets = set(self.sequences.to_restart())
                kept_back = {b.tp for b in batches if b.tp in resets}
                for b in batches:
                    if b.tp in kept_back:
                        self.fail_or_retry(b, error)
        if self._refresh_needed:
            self._refresh_needed = False
            try:
                self._refresh_metadata(list({b.topic for b in batches}))
            except LogSourceError:
                pass
        return kept_back

    def _send_rounds(self, rounds: list[list[list[ProducerBatch]]]) -> None:
        kept_back = self._ready_to_send([b for r in rounds for run in r for b in run])
        if kept_back is None:
            return
        if kept_back:
            rounds = [k for k in ([run for run in r if run[0].tp not in kept_back] for r in rounds) if k]
            if not rounds:
                return
        if all(len(r) == 1 and len(r[0]) == 1 for r in rounds):
            self._send_singles([r[0][0] for r in rounds])
            return
        # node -> requests in round order; a round holds at most one run per partition
        by_node: dict[int, list[tuple[ProduceRequest, dict]]] = {}
        held: dict[tuple[str, int], list[ProducerBatch]] = {}  # see _sendable
        leaders: dict[tuple[str, int], int] = {}  # looked up once per partition and call
        idempotent, prepare, leader_for = self.idempotent, self._prepare, self._client.leader_for
        for r in rounds:
            open_reqs: dict[int, tuple[list, dict]] = {}
            sizes: dict[int, int] = {}
            for run in r:
                if idempotent:
                    run = self._sendable(run, held)
                    if not run:
                        continue
                head = run[0]
                try:
                    for b in run:
                        prepare(b)
                    node = leaders.get(head.tp)
                    if node is None:
                        node = leaders[head.tp] = leader_for(head.topic, head.partition)
                except LogSourceError as e:
                    for b in run:
                        self.fail_or_retry(b, e)
                    continue
                data = run[0].encoded if len(run) == 1 else b"".join([b.encoded for b in run])
                entry = open_reqs.get(node)
                if entry is not None and entry[0] and sizes[node] + len(data) > self.max_request_size:
                    by_node.setdefault(node, []).append(self._request(entry))
                    entry = None
                if entry is None:
                    entry = open_reqs[node] = ([], {})
                    sizes[node] = 0
                entry[0].append((head.topic, head.partition, data))
                entry[1][head.tp] = run
                sizes[node] += len(data)
            for node, entry in open_reqs.items():
                if entry[0]:
                    by_node.setdefault(node, []).append(self._request(entry))
        for node, items in by_node.items():
            try:
                conn = self._client.node_connection(node)
            except LogSourceError as e:
                for _, runs in items:
                    for run in runs.values():
                        for b in run:
                            self.fail_or_retry(b, e)
                continue
            calls = [(req, self._callback(runs)) for req, runs in items]
            for _, runs in items:
                for run in runs.values():
                    for b in run:
                        b.attempts += 1
            try:
                conn.send_many(calls)
            except LogSourceError:
                pass  # send_many already ran the callbacks of unsent requests with the error
        if held:  # last: if anything above raised, _run puts every unfinished batch back itself
            self._hold(held)

    def _send_singles(self, batches: list[ProducerBatch]) -> None:
        """_send_rounds for rounds of one batch each (batch size 1, one partition ready at a time): each
        batch goes in its own one-partition request, in round order, without the per-round grouping; the
        batches are numbered under one hold of the sequence lock (_stamp_singles)."""
        held: dict[tuple[str, int], list[ProducerBatch]] = {}  # see _sendable
        by_node: dict[int, list[tuple[OnePartitionProduce, OneBatchAnswer]]] = {}
        leaders: dict[tuple[str, int], int | LogSourceError] = {}  # the leader, or why it is not known
        leader_for = self._client.leader_for
        for b in batches:  # before the sequence lock is taken: a lookup may ask the broker
            if b.tp not in leaders:
                try:
                    leaders[b.tp] = leader_for(b.topic, b.partition)
                except LogSourceError as e:
                    leaders[b.tp] = e
        i = 0
        while i < len(batches):
            i, failed, error = self._stamp_singles(batches, i, leaders, held, by_node)
            if failed is not None:  # handled before any later batch is numbered, as one by one
                self.fail_or_retry(failed, error)
        for node, calls in by_node.items():
            try:
                conn = self._client.node_connection(node)
            except LogSourceError as e:
                for _, cb in calls:
                    self.fail_or_retry(cb.batch, e)
                continue
            for _, cb in calls:
                cb.batch.attempts += 1
            try:
                conn.send_many(calls)
            except LogSourceError:
                pass  # send_many already ran the callbacks of unsent requests with the error
        if held:  # as in _send_rounds
            self._hold(held)

    def _stamp_singles(self, batches: list, i: int, leaders: dict, held: dict, by_node: dict) -> tuple:
        """_sendable, _prepare and the request of each of ``batches[i:]``, numbered under one hold of the
        sequence lock (PartitionSequences.number_round); stops after a batch that failed (its encode, or
        no leader). Returns ``(where to go on, the failed batch or None, its error)``."""
        stop = len(batches)  # the round is numbered up to and with the first batch without a leader
        if any(isinstance(node, LogSourceError) for node in leaders.values()):
            stop = i
            while stop < len(batches) - 1 and not isinstance(leaders[batches[stop].tp], LogSourceError):
                stop += 1
            stop += 1
        deadline = time.monotonic() + self.delivery_timeout
        done, i, failed, error = self.sequences.number_round(batches, i, stop, held, self._encode)
        if failed is not None and failed.deadline == 0.0:
            failed.deadline = deadline
        no_leader = _round_calls(
            done, leaders, by_node, deadline, self.acks, int(self.request_timeout_ms), self, LogSourceError
        )
        if no_leader is not None:
            return i, done[no_leader[0]], no_leader[1]
        return i, failed, error

    def _sendable(self, run: list[ProducerBatch], held: dict) -> list[ProducerBatch]:
        """The part of an idempotent run that may be sent now (PartitionSequences.sendable); the rest goes
        into ``held``. Held batches wait until the partition has an answer; a partition with held batches
        sends nothing later in this round."""
        tp = run[0].tp
        if tp in held:
            held[tp].extend(run)
            return []
        n = self.sequences.sendable(run)
        if n == len(run):
            return run
        held[tp] = run[n:]
        return run[:n]

    def _hold(self, held: dict[tuple[str, int], list[ProducerBatch]]) -> None:
        """Put the batches that may not be numbered yet back in the accumulator, until an answer."""
        with self._acc.lock:
            for tp, batches in held.items():
                self._acc.hold(tp, batches, self._drain_mark)

    def _request(self, entry: tuple[list, dict]) -> tuple[ProduceRequest | OnePartitionProduce, dict]:
        """The Produce request of ``entry``'s ``(topic, partition, records)`` (one partition's: same bytes, fewer objects)."""
        parts, timeout_ms = entry[0], int(self.request_timeout_ms)
        if len(parts) == 1:
            topic, partition, data = parts[0]
            return OnePartitionProduce(topic, partition, data, self.acks, timeout_ms), entry[1]
        data = [ProducePartitionData(t, p, d) for t, p, d in parts]
        return ProduceRequest(data, acks=self.acks, timeout_ms=timeout_ms), entry[1]

    def _callback(self, runs: dict[tuple[str, int], list[ProducerBatch]]) -> Callable:
        # The callback lives until the answer, and what is alive while a request is in flight is what the
        # cyclic GC promotes and later walks in its full collections. A request of one batch (as Kafka
        # sends) holds one OneBatchAnswer over the batch; others one RunsAnswer over their runs.
        if len(runs) == 1:
            for run in runs.values():
                if len(run) == 1:
                    return OneBatchAnswer(self, run[0])
        return RunsAnswer(self, runs)

    def fail_or_retry(self, b: ProducerBatch, error: BaseException) -> None:
        """Put a failed batch back for a retry (retriable, within retries and delivery_timeout_ms) or fail it."""
        retriable = isinstance(error, LogSourceError) and error.retriable
        if self.idempotent and isinstance(error, (OutOfOrderSequence, UnknownProducerId)):
            # As Kafka's idempotent producer: always retried, with its sequence numbers unchanged, unless a
            # gap after a batch of unknown fate (it fails, as in Kafka) or lost producer state (the
            # partition's sequences restart): see PartitionSequences.refused.
            verdict = self.sequences.refused(b, error)
            retriable = verdict != FAIL
            if verdict == RESTART:
                log.warning(
                    "%s-%d: broker refused sequence %s (%s); restarting the partition's sequences",
                    b.topic,
                    b.partition,
                    b.base_sequence,
                    error,
                )
        now = time.monotonic()
        if (
            retriable
            and not self._acc.closed
            and b.attempts <= self.retries
            and (b.deadline == 0.0 or now < b.deadline)
        ):
            if getattr(error, "code", None) in _METADATA_ERRORS or isinstance(error, NetworkError):
                self._refresh_needed = True
            with self._acc.lock:
                self._acc.requeue(b, now + self.retry_backoff)
            return
        if retriable and b.deadline and now >= b.deadline:
            error = RequestTimedOut(
                f"batch for {b.topic}-{b.partition} not delivered within delivery_timeout_ms="
                f"{self.delivery_timeout * 1000:.0f}: {error}"
            )
        self.finish(b, error=error)

    def _reset_sequences(self) -> BaseException | None:
        """Restart the sequences of partitions where the broker lost this producer's state (sender thread).

        Kafka bumps the producer epoch here (KIP-360) and holds back the other partitions until
        their in-flight batches are answered; a fresh producer id for just these partitions has
        the same effect at the broker (a new producer, sequences from 0) and leaves the other
        partitions' numbering alone (PartitionSequences.restart). Returns the error if a producer id
        could not be had (the partitions stay marked).
        """
        for tp in self.sequences.to_restart():
            try:
                resp = self._client.request(InitProducerIdRequest())
            except LogSourceError as e:
                log.warning("cannot get a producer id to reset %s-%d (will retry): %s", tp[0], tp[1], e)
                return e
            self.sequences.restart(tp, resp.producer_id, resp.producer_epoch)
            log.info("%s-%d: sequences restart at 0 with producer id %d", tp[0], tp[1], resp.producer_id)
        return None
