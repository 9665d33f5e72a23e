"""The producer's record accumulator: per-partition batches in bounded memory.

``send()`` only appends to the lists of the open batch of its partition. A
batch closes when it reaches ``batch_size`` bytes (or when the sender takes
it after ``linger_ms``, a flush or close); the sender thread then encodes the
whole batch with :func:`pyspark_logsource.format.batch.encode` in one call.

Each batch owns one ``concurrent.futures.Future`` resolving to
``(partition, base_offset, last_offset)``; ``send()`` hands out a
:class:`RecordFuture`, a two-slot view onto that future plus the record's
index, because a real Future per message would cost more than the rest of
``send()``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures._base import FINISHED
from typing import NoReturn

from ..errors import BufferFull, ClientClosed, RequestTimedOut
from ..format._speedups import load_extension
from ..format.batch import HEADER_SIZE
from ..topics import TopicPartition
from .batch_future import DONE_STATES, SHARED_CONDITION, BatchFuture

#: Per-record bytes beside key and value in an encoded batch: a timestamp
#: delta (8) and one key and one value offset (4 + 4).
RECORD_OVERHEAD = 16
BATCH_OVERHEAD = HEADER_SIZE + 16


class ProducerBatch:
    """Records of one partition that travel in one record batch."""

    __slots__ = (
        "topic",
        "partition",
        "values",
        "keys",
        "timestamps",
        "headers",
        "size",
        "created",
        "encoded",
        "record_count",
        "base_sequence",
        "attempts",
        "retry_at",
        "deadline",
        "has_keys",
        "closed",
        "restamp",
        "solo",
        "tp",
        "_future",
        "outcome",
        "buf",
    )

    def __init__(self, topic: str, partition: int, now: float) -> None:
        self.topic = topic
        self.partition = partition
        #: (topic, partition), the key of every per-partition table (a slot: read several times per batch)
        self.tp: TopicPartition = (topic, partition)
        self.values: list = []
        self.keys: list | None = None  # made on the first key: keyless records append nothing here
        self.timestamps: list = []
        self.headers: list | None = None
        self.size = BATCH_OVERHEAD
        self.created = now
        #: made on first use (see ``future``): most batches are answered before anyone asks
        self._future: BatchFuture | None = None
        #: (result, error) once the batch completed
        self.outcome: tuple | None = None
        self.encoded: bytearray | None = None
        self.record_count = 0
        self.base_sequence: int | None = None
        self.attempts = 0
        self.retry_at = 0.0
        self.deadline = 0.0
        self.has_keys = False
        self.closed = False
        self.restamp = False
        self.solo = False
        #: the compiled accumulator's C record buffer (values, keys and timestamps then stay None)
        self.buf = None

    @classmethod
    def from_encoded(
        cls, topic: str, partition: int, data: bytearray, record_count: int, now: float
    ) -> ProducerBatch:
        """A batch that is already encoded (the Arrow send path)."""
        b = cls(topic, partition, now)
        b.values = b.keys = b.timestamps = None  # type: ignore[assignment]
        b.encoded = data
        b.record_count = record_count
        b.size = len(data)
        b.closed = True
        return b

    @property
    def future(self) -> Future:
        """The batch's future, resolving to ``(partition, base_offset, last_offset)``.

        Made when first asked for (``flush()``, a record future's blocking
        ``result()`` or callback, ``send_arrow``), already done if the batch was:
        a Future per batch costs more than the rest of a one-record batch.
        """
        f = self._future
        if f is None:
            with SHARED_CONDITION:
                f = self._future
                if f is None:
                    f = BatchFuture()
                    if self.outcome is not None:
                        f._result, f._exception = self.outcome
                        f._state = FINISHED
                    self._future = f
        return f

    def spill(self) -> None:
        """Move the records from the C buffer into the lists (a record the buffer does not take, e.g. headers)."""
        buf = self.buf
        if buf is not None:
            self.values, self.keys, self.timestamps = buf.to_lists()
            self.has_keys = self.keys is not None
            self.buf = None

    def resolve(self, result, error: BaseException | None) -> None:
        """Complete the batch (once; later calls are ignored) and its future if one was made."""
        with SHARED_CONDITION:
            if self.outcome is not None:
                return
            self.outcome = (result, error)
            f = self._future
            if f is None or f._state in DONE_STATES:
                return
        try:
            if error is not None:
                f.set_exception(error)
            else:
                f.set_result(result)
        except InvalidStateError:  # cancelled by its caller since
            pass

    def done(self) -> bool:
        """Whether the batch completed."""
        return self.outcome is not None or (self._future is not None and self._future.done())

    def __repr__(self) -> str:
        return f"ProducerBatch({self.topic}-{self.partition}, {self.record_count} records, {self.size} bytes)"


class RecordFuture:
    """The future of one sent record: a view onto its batch's future.

    Offers the methods of ``concurrent.futures.Future`` that a caller uses;
    ``result()`` returns ``(partition, offset)`` (offset -1 with ``acks=0``).
    """

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def _value(self, res: tuple[int, int, int]) -> tuple[int, int]:
        base = res[1]
        return (res[0], base + self._index if base >= 0 else -1)

    def result(self, timeout: float | None = None) -> tuple[int, int]:
        """Block until the record is acknowledged; return ``(partition, offset)``."""
        done = self._batch.outcome
        if done is not None and done[1] is None:
            return self._value(done[0])
        try:
            return self._value(self._batch.future.result(timeout))
        except FutureTimeout:
            raise RequestTimedOut(f"record not acknowledged within {timeout} s") from None

    def done(self) -> bool:
        """Whether the record was acknowledged or failed."""
        return self._batch.done()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error of the record, or None once it succeeded."""
        try:
            return self._batch.future.exception(timeout)
        except FutureTimeout:
            raise RequestTimedOut(f"record not acknowledged within {timeout} s") from None

    def add_done_callback(self, fn) -> None:
        """Call ``fn(self)`` when the record completes (at once when it already has)."""
        self._batch.future.add_done_callback(lambda _f: fn(self))

    def cancel(self) -> bool:
        """Records cannot be cancelled once handed to the producer."""
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self._batch.done()

    @property
    def partition(self) -> int:
        """The partition the record was assigned to."""
        return self._batch.partition

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<RecordFuture {self._batch.topic}-{self._batch.partition} #{self._index} {state}>"


class RecordAccumulator:
    """Open and ready batches, memory accounting and the sender's wake-ups."""

    def __init__(self, *, batch_size: int, linger_ms: float, buffer_memory: int, max_block_ms: float) -> None:
        self.batch_size = max(1, int(batch_size))
        self.linger = max(0.0, linger_ms / 1000.0)
        self.buffer_memory = int(buffer_memory)
        self.max_block = max_block_ms / 1000.0
        self.lock = threading.Lock()
        self.wakeup = threading.Condition(self.lock)  # the sender waits here
        self.space = threading.Condition(self.lock)  # send() waits here for memory
        self.open: dict[TopicPartition, ProducerBatch] = {}
        #: the open batch of each topic's sticky partition: the keyless send() finds it in one lookup
        self.sticky: dict[str, ProducerBatch] = {}
        self.ready: dict[TopicPartition, deque[ProducerBatch]] = {}
        #: the batches not yet answered, oldest first (a dict as an ordered set): flush() waits on them in order
        self.incomplete: dict[ProducerBatch, None] = {}
        self.used = 0
        self.flushing = 0
        self.closed = False
        self.sender_idle = True
        #: partitions that send nothing until one of their unanswered batches is answered (see hold)
        self.muted: set[TopicPartition] = set()
        #: batches answered or put back for a retry so far (see hold)
        self.answered = 0

    # ---------------------------------------------------------- called by send()

    def reserve(self, size: int) -> None:
        """Account ``size`` bytes, blocking up to max_block_ms; call with the lock held."""
        if self.used + size <= self.buffer_memory or self.used == 0:
            self.used += size
            return
        if size > self.buffer_memory:
            raise BufferFull(f"a record of {size} bytes is larger than buffer_memory={self.buffer_memory}")
        if self.max_block <= 0:
            self.refuse()
        deadline = time.monotonic() + self.max_block
        # Blocking send(): make sure everything buffered is on its way.
        self.flushing += 1
        try:
            self.wakeup.notify()
            while self.used + size > self.buffer_memory and self.used > 0:
                if self.closed:
                    raise ClientClosed("producer closed while waiting for buffer memory")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BufferFull(
                        f"buffer_memory={self.buffer_memory} bytes is full ({self.used} in use) and "
                        f"max_block_ms={self.max_block * 1000:.0f} passed"
                    )
                self.space.wait(left)
        finally:
            self.flushing -= 1
        self.used += size

    def refuse(self) -> NoReturn:
        """Raise BufferFull for a send() that may not wait (max_block_ms=0) into a full buffer; lock held.

        At once: a caller that keeps sending into a full buffer (a stopped broker) pays for the refusal
        alone, not for a deadline, a wait loop and a float's formatting."""
        self.wakeup.notify()  # everything buffered on its way, as a blocking send() asks
        raise BufferFull(
            f"buffer_memory={self.buffer_memory} bytes is full ({self.used} in use) and max_block_ms=0"
        )

    def new_batch(self, topic: str, partition: int) -> ProducerBatch:
        """Open a batch for a partition; call with the lock held."""
        b = ProducerBatch(topic, partition, time.monotonic())
        self.open[(topic, partition)] = b
        self.incomplete[b] = None
        if self.sender_idle:
            self.wakeup.notify()
        return b

    def close_batch(self, b: ProducerBatch) -> None:
        """Move a full batch to the ready queue; call with the lock held."""
        if b.closed:
            return
        b.closed = True
        b.record_count = len(b.values) if b.buf is None else len(b.buf)
        if self.open.get(b.tp) is b:
            del self.open[b.tp]
        if self.sticky.get(b.topic) is b:
            del self.sticky[b.topic]
        q = self.ready.get(b.tp)
        if q is None:
            q = self.ready[b.tp] = deque()
        q.append(b)
        if self.sender_idle:  # a busy sender drains again before it waits: nothing to wake
            self.wakeup.notify()

    def add_alone(self, topic: str, partition: int, value: bytes, timestamp: int, size: int) -> ProducerBatch:
        """Queue a record that fills a batch on its own (``batch_size`` smaller than the record),
        without opening the batch first; lock held, no open batch for the partition."""
        b = ProducerBatch(topic, partition, time.monotonic())
        # tuples, not lists: nothing is appended to a closed batch, and the GC stops tracking a tuple of
        # bytes or ints at its first young collection instead of promoting it with the queued batch
        b.values = (value,)  # type: ignore[assignment]
        b.timestamps = (timestamp,)  # type: ignore[assignment]
        b.size += size
        b.record_count = 1
        b.closed = True
        self.incomplete[b] = None
        q = self.ready.get(b.tp)
        if q is None:
            q = self.ready[b.tp] = deque()
        q.append(b)
        if self.sender_idle:
            self.wakeup.notify()
        return b

    def add_encoded(self, b: ProducerBatch) -> None:
        """Queue a pre-encoded batch after the partition's open batch; lock held."""
        cur = self.open.get(b.tp)
        if cur is not None:
            self.close_batch(cur)
        self.incomplete[b] = None
        q = self.ready.get(b.tp)
        if q is None:
            q = self.ready[b.tp] = deque()
        q.append(b)
        self.wakeup.notify()

    # ---------------------------------------------------------- called by the sender

    def drain(
        self, now: float, max_run: int = 1, max_bytes: int = 1 << 20
    ) -> tuple[list[list[ProducerBatch]], float | None]:
        """Take sendable batches: per partition a run of up to ``max_run`` consecutive
        batches (``max_bytes`` in all); return the runs and the next wake-up time.

        Call with the lock held. A partition whose first ready batch waits
        for a retry backoff sends nothing, so order within it holds; a batch
        marked ``solo`` (its run was partly a duplicate) travels alone.
        """
        urgent = self.flushing > 0 or self.closed
        next_at: float | None = None
        if self.open:
            for b in list(self.open.values()):
                due = b.created + self.linger
                if urgent or due <= now:
                    self.close_batch(b)
                elif next_at is None or due < next_at:
                    next_at = due
        out = []
        muted = self.muted
        for q in self.ready.values():
            if not q:
                continue
            b = q[0]
            if muted and b.tp in muted:
                continue
            if b.retry_at > now:
                if next_at is None or b.retry_at < next_at:
                    next_at = b.retry_at
                continue
            run = [q.popleft()]
            size = b.size
            if not b.solo:
                while q and len(run) < max_run:
                    nb = q[0]
                    if nb.solo or nb.retry_at > now or size + nb.size > max_bytes:
                        break
                    size += nb.size
                    run.append(q.popleft())
            out.append(run)
        return out, next_at

    def drain_singles(
        self, runs: list[list[ProducerBatch]], now: float, most: int
    ) -> list[ProducerBatch] | None:
        """After ``runs = drain(now, max_run=1)``: when that round is one batch and no other partition has
        an open or ready batch, the batch and up to ``most`` more of its partition, each what one more such
        drain would take (one walk of its queue, not a drain per round); else None. Lock held."""
        if len(runs) != 1 or self.open:
            return None
        out = runs[0]
        q = self.ready[out[0].tp]
        if len(self.ready) > 1 and any(other and other is not q for other in self.ready.values()):
            return None
        while q and len(out) <= most and q[0].retry_at <= now:
            out.append(q.popleft())
        return out

    def hold(self, tp: TopicPartition, batches: list[ProducerBatch], answered: int) -> None:
        """Put drained batches back at the front of their partition's queue, in order; lock held.

        The partition sends nothing more until one of its batches is answered
        or put back for a retry, unless any batch was since the drain that took
        these (``answered`` is the count read then): a wake-up cannot be missed.
        """
        q = self.ready.get(tp)
        if q is None:
            q = self.ready[tp] = deque()
        i = 0  # batches put back for a retry meanwhile keep their place by sequence
        while (
            i < len(q)
            and q[i].base_sequence is not None
            and (batches[0].base_sequence is None or q[i].base_sequence < batches[0].base_sequence)
        ):
            i += 1
        for k, b in enumerate(batches):
            q.insert(i + k, b)
        if self.answered == answered:
            self.muted.add(tp)
        else:
            self.wakeup.notify()

    def _answered(self, tp: TopicPartition) -> None:
        self.answered += 1
        if self.muted and tp in self.muted:
            self.muted.discard(tp)
            self.wakeup.notify()

    def requeue(self, b: ProducerBatch, retry_at: float) -> None:
        """Put a batch back for a retry, ahead of newer batches of its partition; lock held."""
        self._answered(b.tp)
        b.retry_at = retry_at
        q = self.ready.get(b.tp)
        if q is None:
            q = self.ready[b.tp] = deque()
        # Keep sequence order: earlier sequences first; a batch without numbers (not yet numbered, or a
        # producer without idempotence) after the ones put back before it that were made before it, so
        # that a request's batches failing together are retried in their order, not reversed.
        i = 0
        seq, created = b.base_sequence, b.created
        for i, other in enumerate(q):  # noqa: B007 - a retry touches only a few batches
            if other.base_sequence is None:
                if seq is not None or other.created > created:
                    break
            elif seq is not None and other.base_sequence > seq:
                break
        else:
            i = len(q)
        q.insert(i, b)
        self.wakeup.notify()

    def has_pending(self) -> bool:
        """Whether any batch is open or ready; lock held."""
        return bool(self.open) or any(self.ready.values())

    def complete(self, b: ProducerBatch, result=None, error: BaseException | None = None) -> None:
        """Release a batch's memory and resolve its future (lock NOT held)."""
        with self.lock:
            self.answered += 1  # _answered, inlined: one completion per batch
            if self.muted and b.tp in self.muted:
                self.muted.discard(b.tp)
                self.wakeup.notify()
            self.incomplete.pop(b, None)
            self.used -= b.size
            if self.used < 0:
                self.used = 0
            if self.space._waiters:  # a send() blocked on memory (notify_all costs ~1 us even for nobody)
                self.space.notify_all()
        b.resolve(result, error)

    def complete_many(self, done: list[tuple[ProducerBatch, tuple]]) -> None:
        """complete() for several batches that succeeded, ``(batch, result)`` (lock NOT held)."""
        with self.lock:
            self.answered += len(done)
            muted = self.muted
            if muted:  # (rare: a partition held back until an answer)
                for b, _ in done:
                    if b.tp in muted:
                        muted.discard(b.tp)
                        self.wakeup.notify()
            used = self.used - _release_run(done, self.incomplete)
            self.used = used if used > 0 else 0  # only ever lowered: clamped once as at every step
            if self.space._waiters:
                self.space.notify_all()
        resolve_many(done)


def release_run_py(done: list[tuple[ProducerBatch, tuple]], incomplete: dict) -> int:
    """:meth:`RecordAccumulator.complete_many`'s step, lock held: each batch of ``done`` leaves
    ``incomplete``; returns their sizes summed. The reference of the compiled ``_cio.release_run``."""
    size = 0
    for b, _ in done:
        incomplete.pop(b, None)
        size += b.size
    return size


def resolve_run_py(done: list[tuple[ProducerBatch, tuple]], done_states: tuple) -> list[tuple[Future, tuple]]:
    """:func:`resolve_many`'s step, shared condition held: each batch of ``done`` not yet completed gets
    its outcome ``(result, None)``; returns ``(future, result)`` for those whose future was made and is
    not done yet. The reference of the compiled ``_cio.resolve_run``."""
    waiting = []
    for b, result in done:
        if b.outcome is None:
            b.outcome = (result, None)
            f = b._future
            if f is not None and f._state not in done_states:
                waiting.append((f, result))
    return waiting


def resolve_many(done: list[tuple[ProducerBatch, tuple]]) -> None:
    """``b.resolve(result, None)`` for each ``(b, result)``: the shared condition taken once."""
    with SHARED_CONDITION:
        waiting = _resolve_run(done, DONE_STATES)
    for f, result in waiting:
        try:
            f.set_result(result)
        except InvalidStateError:  # cancelled by its caller since: the others must still complete
            pass


#: the compiled accumulator core (client/_caccum.pyx), None when not built or LOGSOURCE_NO_EXTENSIONS is set
_caccum = load_extension(__package__ + "._caccum")
#: the I/O thread's compiled steps (client/_cio.pyx), or their references above
_cio = load_extension(__package__ + "._cio")
_release_run = _cio.release_run if _cio is not None else release_run_py
_resolve_run = _cio.resolve_run if _cio is not None else resolve_run_py

if _caccum is not None:

    class AloneBatch(ProducerBatch):
        """The compiled ``add_alone``'s batch (one record, closed): left untracked by the cyclic GC while it
        holds only strings, numbers, bytes and its C buffer (see ``_caccum``), tracked again before it takes
        what may refer back to it: its future (and the callbacks on it) or an error (and its traceback)."""

        __slots__ = ()

        @property
        def future(self) -> Future:  # noqa: D102 - ProducerBatch.future's
            _caccum.track(self)
            return ProducerBatch.future.fget(self)  # type: ignore[attr-defined]

        def resolve(self, result, error: BaseException | None) -> None:  # noqa: D102 - ProducerBatch.resolve's
            if error is not None:
                _caccum.track(self)
            ProducerBatch.resolve(self, result, error)

    class CompiledAccumulator(_caccum.AccumulatorCore, RecordAccumulator):
        """RecordAccumulator with its memory counter and limits as C fields and each open batch's records
        in a C buffer (``ProducerBatch.buf``), which the compiled send() appends to."""

        #: encoded batches' buffers kept for new batches (as Kafka's BufferPool): a new buffer's memory is
        #: page-faulted in as records are copied, a recycled one is in use already
        POOL = 8

        def __init__(self, **settings: float) -> None:  # noqa: D107 - RecordAccumulator's, and the pool
            RecordAccumulator.__init__(self, **settings)  # type: ignore[arg-type]
            self._pool: list = []
            # add_alone (batch size 1: a batch per record) makes its batch in C, RecordAccumulator's the reference
            self.bind_alone(AloneBatch, BATCH_OVERHEAD, self._pool, deque)

        def new_batch(self, topic: str, partition: int) -> ProducerBatch:
            """Open a batch for a partition, its records in a C buffer; call with the lock held."""
            b = RecordAccumulator.new_batch(self, topic, partition)
            pool = self._pool
            # room for a small batch's values at once (a big one grows by doubling: memory is taken as used)
            b.buf = pool.pop() if pool else _caccum.RecordBuffer(min(self.batch_size, 1 << 16))
            b.values = b.timestamps = None  # type: ignore[assignment]
            return b

        def recycle(self, buf: object) -> None:
            """Keep an encoded batch's buffer for a new batch (any thread; nothing else refers to it)."""
            pool = self._pool
            if len(pool) < self.POOL:
                buf.clear()
                pool.append(buf)

else:
    CompiledAccumulator = None  # type: ignore[assignment,misc]
