"""The idempotent producer's sequence numbers per partition, and their one owner.

:class:`PartitionSequences` owns what Kafka's ``TransactionManager`` owns in the Java producer: the
producer id and epoch, each partition's next sequence number, the last one the broker acknowledged,
the numbered batches still unanswered (in sequence order), a partition's own producer id after its
sequences restarted, the partitions waiting for that restart, and the partitions where a batch failed
for good without the broker saying it was not appended (its sequences stay given out until resolved).

The :class:`~.sender.Sender` asks it and tells it, and never touches its state: number a batch (or a
round of them under one hold of the lock), settle an answered batch (or a run of appended ones), how
much room a partition has, what to restart and restart it with a new producer id (the sender asks the
broker for the id), resolve. It knows nothing of sockets, the accumulator or the client: it is handed
the batches, and an ``encode(batch, producer_id, epoch, base_sequence, restamp)`` callable it runs
under its lock (so a batch's bytes always carry the numbers it was given, even while the I/O thread
renumbers later batches). Its one lock is held as briefly as the sender held it before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import LogSourceError, NetworkError, OutOfOrderSequence, RequestTimedOut, UnknownProducerId
from ..format._speedups import load_extension

if TYPE_CHECKING:
    from .accumulator import ProducerBatch

_INT32_MAX = (1 << 31) - 1
#: unanswered batches with sequence numbers per partition: at most as many as the broker remembers per
#: producer (broker.log.producer_state.MAX_BATCHES_PER_PRODUCER), so a resent one is known as a duplicate
MAX_UNANSWERED_BATCHES = 80

#: ``encode(batch, producer_id, epoch, base_sequence, restamp)``: write the batch's bytes (the sender's)
Encode = Callable[["ProducerBatch", int, int, int, bool], None]

#: what :meth:`PartitionSequences.refused` says of a batch refused with OutOfOrderSequence/UnknownProducerId
RETRY, FAIL, RESTART = "retry", "fail", "restart"


def maybe_appended(error: BaseException) -> bool:
    """True if a sent batch failing for good with ``error`` may still have been appended: no answer
    (timed out, connection lost, expired), a retriable error on its last try after earlier tries, or an
    untyped exception (the sender's catch-all after a bug: not the broker's answer)."""
    if not isinstance(error, LogSourceError):
        return True  # not the broker's answer (the sender's catch-all after a bug): its fate is unknown
    return isinstance(error, (RequestTimedOut, NetworkError)) or error.retriable


def settle_oldest_py(
    done: list, i: int, assigned: dict, last_acked: dict, stamped: dict, unresolved: dict
) -> int:
    """:meth:`PartitionSequences.settle_appended`'s common case over ``done[i:]`` (``(batch, result)``,
    appended), its tables handed in, lock held: each numbered batch that is its partition's oldest
    unanswered one, while no partition has a batch of unknown fate, leaves ``assigned`` and ``stamped``
    and is the partition's last acknowledged; batches without numbers are passed over. Returns the index
    of the first numbered batch that is not such a one (``len(done)`` if none): the general settle's.
    The reference of the compiled ``_cio.settle_oldest``."""
    n = len(done)
    while i < n:
        b = done[i][0]
        seq = b.base_sequence
        if seq is not None:
            if unresolved:
                return i
            queue = assigned.get(b.tp)
            if not queue or queue[0] is not b:
                return i
            del queue[0]
            stamped.pop(id(b), None)
            last_acked[b.tp] = (seq + b.record_count - 1) & _INT32_MAX
        i += 1
    return n


class PartitionSequences:
    """The sequence state of one idempotent producer, per partition (see the module docstring)."""

    def __init__(self, idempotent: bool) -> None:
        self.idempotent = idempotent
        self._producer_id = -1
        self._producer_epoch = -1
        self._next_seq: dict[tuple[str, int], int] = {}
        self._last_acked: dict[tuple[str, int], int] = {}  # last sequence the broker acknowledged
        self._pid_for: dict[tuple[str, int], tuple[int, int]] = {}  # a partition's own id after a restart
        self._resets: set[tuple[str, int]] = set()  # partitions whose sequences restart (restart())
        #: partitions where a sent batch failed for good without the broker saying it was not appended
        #: (expired, timed out): the sequence after it, until the broker acknowledges that one or the
        #: partition has nothing unanswered (see settle, resolve)
        self._unresolved: dict[tuple[str, int], int] = {}
        self._stamped: dict[int, int] = {}  # id(batch) -> producer id of its last send
        self._assigned: dict[tuple[str, int], list[ProducerBatch]] = {}  # unanswered, numbered batches
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the producer id

    def set_producer(self, producer_id: int, epoch: int) -> None:
        """The producer id and epoch the broker gave (InitProducerId)."""
        self._producer_id, self._producer_epoch = producer_id, epoch

    def producer_id_and_epoch(self) -> tuple[int, int]:
        """The producer id and epoch; ``(-1, -1)`` before the broker gave one."""
        return self._producer_id, self._producer_epoch

    # ------------------------------------------------------------------ numbering (sender thread)

    def _number(self, b: ProducerBatch, encode: Encode) -> None:
        """Number (idempotence) and encode a batch for its send; lock held."""
        tp = b.tp
        seq = -1
        if self.idempotent and b.base_sequence is None:
            seq = self._next_seq.get(tp, 0)
            b.base_sequence = seq
            self._next_seq[tp] = (seq + b.record_count) & _INT32_MAX
            queue = self._assigned.get(tp)
            if queue is None:
                queue = self._assigned[tp] = []
            queue.append(b)
        elif b.base_sequence is not None:
            seq = b.base_sequence
        pid_for = self._pid_for.get(tp) if self._pid_for else None
        pid, epoch = pid_for or (self._producer_id, self._producer_epoch)
        if self.idempotent:
            self._stamped[id(b)] = pid
        encode(b, pid, epoch, seq, self.idempotent and (b.restamp or b.attempts == 0))
        b.restamp = False

    def number(self, b: ProducerBatch, encode: Encode) -> None:
        """Give ``b`` its sequence numbers (if it has none) and have ``encode`` write its bytes."""
        with self._lock:
            self._number(b, encode)

    def number_round(
        self, batches: list, start: int, stop: int, held: dict, encode: Encode
    ) -> tuple[list, int, ProducerBatch | None, LogSourceError | None]:
        """Number a round of single batches ``batches[start:stop]`` under one hold of the lock, as
        :meth:`sendable` and :meth:`number` one by one: a partition in ``held`` (``{tp: [batch]}``) or
        without room holds this batch and every later one of it in the round; stops after a batch whose
        ``encode`` raised. Returns ``(the numbered batches in order, where to go on, the failed batch or
        None, its error)``."""
        # _number inlined (one call per batch, encode's, as when the sender numbered the round itself)
        idempotent, assigned, unresolved, next_seq = (
            self.idempotent,
            self._assigned,
            self._unresolved,
            self._next_seq,
        )
        stamped, pid_for = self._stamped, self._pid_for
        done: list = []
        with self._lock:
            own = (self._producer_id, self._producer_epoch)
            for i in range(start, stop):
                b = batches[i]
                tp = b.tp
                seq = b.base_sequence
                if idempotent:
                    if tp in held:  # a new number only while the partition has room
                        held[tp].append(b)
                        continue
                    if seq is None:
                        queue = assigned.get(tp)
                        if (queue is not None and len(queue) >= MAX_UNANSWERED_BATCHES) or tp in unresolved:
                            held[tp] = [b]
                            continue
                        seq = b.base_sequence = next_seq.get(tp, 0)
                        next_seq[tp] = (seq + b.record_count) & _INT32_MAX
                        if queue is None:
                            queue = assigned[tp] = []
                        queue.append(b)
                    pid, epoch = (pid_for.get(tp) if pid_for else None) or own
                    stamped[id(b)] = pid
                    restamp = b.restamp or b.attempts == 0
                else:
                    if seq is None:
                        seq = -1
                    pid, epoch = (pid_for.get(tp) if pid_for else None) or own
                    restamp = False
                try:
                    encode(b, pid, epoch, seq, restamp)
                except LogSourceError as e:
                    return done, i + 1, b, e
                b.restamp = False
                done.append(b)
        return done, stop, None, None

    def sendable(self, run: list[ProducerBatch]) -> int:
        """How many batches of an idempotent run of one partition may be sent now (the rest is held).

        A run carries consecutive sequence numbers only: the broker checks each batch against the one
        before, so a gap (a batch resent while a later one is still unanswered, followed by new batches
        numbered after that one) would be refused as OutOfOrderSequence and misread as lost state. And a
        partition has at most MAX_UNANSWERED_BATCHES batches with sequence numbers unanswered, no more
        than the broker remembers per producer (as Kafka's producer keeps 5 in flight): a batch whose
        answer is lost, resent to a new leader, is then always recognised as a duplicate.
        """
        tp = run[0].tp
        with self._lock:
            unanswered = len(self._assigned.get(tp, ()))
            nxt = self._next_seq.get(tp, 0)
            end = None
            for i, b in enumerate(run):
                seq = b.base_sequence
                if seq is None:
                    if unanswered >= MAX_UNANSWERED_BATCHES or tp in self._unresolved:
                        return i  # (unresolved: numbered once the partition's sequences are settled)
                    seq, nxt = nxt, (nxt + b.record_count) & _INT32_MAX
                    unanswered += 1
                if end is not None and seq != end:
                    return i
                end = (seq + b.record_count) & _INT32_MAX
        return len(run)

    def room(self, most: int) -> int:
        """How many more batches, up to ``most``, the fullest partition may still number."""
        if not self.idempotent or not self._assigned:
            return most
        with self._lock:
            fullest = max(map(len, self._assigned.values()))
        return max(0, min(most, MAX_UNANSWERED_BATCHES - fullest - 1))

    # ------------------------------------------------------------------ answers (I/O thread)

    def settle(self, b: ProducerBatch, error: BaseException | None) -> None:
        """A numbered batch was answered (``error`` None: appended) or failed for good."""
        with self._lock:
            self._settle(b, error)

    def settle_appended(self, batches: list[tuple[ProducerBatch, object]]) -> None:
        """:meth:`settle` of several appended batches ``(batch, result)``, under one hold of the lock."""
        assigned, last_acked, stamped, unresolved = (
            self._assigned,
            self._last_acked,
            self._stamped,
            self._unresolved,
        )
        n = len(batches)
        with self._lock:
            i = _settle_oldest(batches, 0, assigned, last_acked, stamped, unresolved)  # the common case
            while i < n:  # one that is not its partition's oldest, or with a batch of unknown fate about
                self._settle(batches[i][0], None)
                i = _settle_oldest(batches, i + 1, assigned, last_acked, stamped, unresolved)

    def _settle(self, b: ProducerBatch, error: BaseException | None) -> None:
        """settle(); lock held. If the broker refused the batch, later batches move down."""
        tp = b.tp
        self._stamped.pop(id(b), None)
        queue = self._assigned.get(tp, [])
        if queue and queue[0] is b:  # answers come in order: the oldest unanswered batch
            i = 0
        else:
            try:
                i = queue.index(b)
            except ValueError:
                i = -1
        if i >= 0:
            del queue[i]
            if error is None:
                self._last_acked[tp] = (b.base_sequence + b.record_count - 1) & _INT32_MAX
                mark = self._unresolved.get(tp)
                if mark is not None and (b.base_sequence - mark) & _INT32_MAX < 1 << 30:
                    del self._unresolved[tp]  # the broker has every sequence before this batch's
            elif isinstance(error, (OutOfOrderSequence, UnknownProducerId)):
                self._resets.add(tp)  # numbers the broker refuses: the partition's sequences restart
            elif b.attempts and maybe_appended(error):
                # It was sent and may be in the log (its request can still sit in a stalled broker's
                # socket): its numbers are not given back, or a later batch renumbered onto them would be
                # taken for its duplicate and acknowledged unwritten. As Kafka's idempotent producer:
                # the sequences stay, and the partition restarts them once nothing is unanswered if
                # the broker then lacks them.
                end = (b.base_sequence + b.record_count) & _INT32_MAX
                mark = self._unresolved.get(tp)
                if mark is None or (end - mark) & _INT32_MAX < 1 << 30:
                    self._unresolved[tp] = end
            else:
                # Later batches move down so the broker sees no gap; their bytes are
                # restamped before they are (re)sent.
                n = b.record_count
                for later in queue[i:]:
                    later.base_sequence = (later.base_sequence - n) & _INT32_MAX
                    later.restamp = True
                self._next_seq[b.tp] = (self._next_seq.get(b.tp, 0) - n) & _INT32_MAX

    def refused(self, b: ProducerBatch, error: BaseException) -> str:
        """What to do with a batch the broker refused with OutOfOrderSequence or UnknownProducerId:
        :data:`FAIL` it (a gap after a batch that may or may not have been appended, which was not),
        :data:`RESTART` (the partition is marked: every earlier batch was acknowledged, yet the broker
        expects another sequence or lost this producer), or :data:`RETRY` it with its numbers unchanged
        (a batch after an unresolved one, or an answer to a send from before a restart)."""
        with self._lock:
            tp = b.tp
            stale = self._stamped.get(id(b)) != (self._pid_for.get(tp) or (self._producer_id,))[0]
            if stale or b.restamp:
                return RETRY
            queue = self._assigned.get(tp)
            # the oldest unanswered batch of a partition with a batch of unknown fate before it
            if queue and queue[0] is b and tp in self._unresolved and isinstance(error, OutOfOrderSequence):
                # Kafka's producer fails it with OutOfOrderSequence, and restarts the partition's
                # sequences once it is settled (settle).
                return FAIL
            if (
                isinstance(error, UnknownProducerId)
                or b.base_sequence == (self._last_acked.get(tp, -1) + 1) & _INT32_MAX
            ):
                self._resets.add(tp)
                return RESTART
        return RETRY

    # ------------------------------------------------------------------ restarts (sender thread)

    def unsettled(self) -> bool:
        """True while some partition has a batch of unknown fate or waits for a restart."""
        return bool(self._unresolved or self._resets)

    def has_unresolved(self) -> bool:
        """True while some partition has a batch of unknown fate (see :meth:`resolve`)."""
        return bool(self._unresolved)

    def to_restart(self) -> list[tuple[str, int]]:
        """The partitions whose sequences restart, in order (see :meth:`restart`)."""
        if not self._resets:
            return []
        with self._lock:
            return sorted(self._resets)

    def restart(self, tp: tuple[str, int], producer_id: int, epoch: int) -> None:
        """Restart ``tp``'s sequences at 0 under its own new producer id: its unanswered batches are
        renumbered in order and restamped before they are resent; answers to sends from before are
        recognised by their producer id (:meth:`refused`)."""
        with self._lock:
            self._resets.discard(tp)
            self._unresolved.pop(tp, None)
            self._pid_for[tp] = (producer_id, epoch)
            seq = 0
            for b in self._assigned.get(tp, []):
                b.base_sequence = seq
                b.restamp = True
                seq = (seq + b.record_count) & _INT32_MAX
            self._next_seq[tp] = seq
            self._last_acked.pop(tp, None)

    def resolve(self) -> None:
        """Partitions with a batch that may or may not have been appended and nothing unanswered now: if
        the broker acknowledged every sequence given out, nothing is missing; else the sequences restart
        (Kafka's ``maybeResolveSequences``)."""
        with self._lock:
            for tp, _ in list(self._unresolved.items()):
                if self._assigned.get(tp):
                    continue
                if self._next_seq.get(tp, 0) == (self._last_acked.get(tp, -1) + 1) & _INT32_MAX:
                    del self._unresolved[tp]
                else:
                    self._resets.add(tp)  # restart() clears the mark


#: the I/O thread's compiled step (client/_cio.pyx), None when not built or LOGSOURCE_NO_EXTENSIONS is set
_cio = load_extension(__package__ + "._cio")
_settle_oldest = _cio.settle_oldest if _cio is not None else settle_oldest_py
