"""The idempotent producer's sequence owner (client/sequences.py), sans-IO: no broker, no sender.

Its transitions, each told what happened and asked what follows: number, settle (appended, refused
and unsent, refused as OutOfOrderSequence, maybe appended), restart with a new producer id, resolve,
room, and what a refused batch means (retry, fail, restart). Hypothesis drives random sends and
answers in random orders across partitions and checks the broker's view: every appended batch starts
at the sequence after the records appended before it in its partition (no gap, no overlap).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_logsource.client.accumulator import ProducerBatch
from pyspark_logsource.client.sequences import (
    FAIL,
    MAX_UNANSWERED_BATCHES,
    RESTART,
    RETRY,
    PartitionSequences,
)
from pyspark_logsource.errors import (
    InvalidRecord,
    NetworkError,
    OutOfOrderSequence,
    RequestTimedOut,
    UnknownProducerId,
)

T = "t"


def batch(partition: int = 0, records: int = 1) -> ProducerBatch:
    return ProducerBatch.from_encoded(T, partition, bytearray(70), records, 0.0)


class Stamps:
    """The ``encode`` callable: records what each batch was stamped with, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[ProducerBatch, int, int, int, bool]] = []

    def __call__(self, b: ProducerBatch, pid: int, epoch: int, seq: int, restamp: bool) -> None:
        self.calls.append((b, pid, epoch, seq, restamp))

    def last(self, b: ProducerBatch) -> tuple[int, int, int, bool]:
        return [c[1:] for c in self.calls if c[0] is b][-1]


def sent(seqs: PartitionSequences, *batches: ProducerBatch, stamps: Stamps | None = None) -> None:
    for b in batches:
        seqs.number(b, stamps or Stamps())
        b.attempts += 1


def test_numbers_are_consecutive_per_partition_and_kept_on_resend() -> None:
    seqs, stamps = PartitionSequences(True), Stamps()
    seqs.set_producer(7, 2)
    a, b, c = batch(0, 3), batch(0, 2), batch(1, 5)
    for x in (a, b, c):
        seqs.number(x, stamps)
    assert [x.base_sequence for x in (a, b, c)] == [0, 3, 0]
    assert stamps.last(a) == (7, 2, 0, True)  # first send: its bytes are stamped
    a.attempts = 1
    seqs.number(a, stamps)  # a resend keeps its numbers, bytes unchanged
    assert a.base_sequence == 0 and stamps.last(a) == (7, 2, 0, False)
    assert seqs.producer_id_and_epoch() == (7, 2)


def test_not_idempotent_numbers_nothing() -> None:
    seqs, stamps = PartitionSequences(False), Stamps()
    b = batch()
    seqs.number(b, stamps)
    assert b.base_sequence is None and stamps.last(b) == (-1, -1, -1, False)
    assert seqs.room(63) == 63 and seqs.sendable([b]) == 1


def test_settle_appended_frees_room() -> None:
    seqs = PartitionSequences(True)
    full = [batch() for _ in range(MAX_UNANSWERED_BATCHES)]
    sent(seqs, *full)
    assert seqs.room(63) == 0 and seqs.sendable([batch()]) == 0
    seqs.settle_appended([(b, None) for b in full[:10]])
    assert seqs.room(63) == 9 and seqs.sendable([batch()]) == 1
    seqs.settle(full[10], None)
    assert seqs.room(63) == 10
    seqs.settle_appended([(b, None) for b in full[11:]])
    assert seqs.room(63) == 63


def test_a_refused_unsent_batch_gives_its_numbers_back() -> None:
    seqs, stamps = PartitionSequences(True), Stamps()
    a, b, c = batch(records=2), batch(records=3), batch()
    sent(seqs, a, b, c, stamps=stamps)
    seqs.settle(a, InvalidRecord("bad"))  # refused for good: not appended
    assert (b.base_sequence, c.base_sequence) == (0, 3) and b.restamp and c.restamp
    d = batch()
    seqs.number(d, stamps)
    assert d.base_sequence == 4
    seqs.number(b, stamps)  # its resend carries the new numbers
    assert stamps.last(b)[2:] == (0, True) and not b.restamp


def test_out_of_order_sequence_restarts_the_partition_with_a_new_producer_id() -> None:
    seqs, stamps = PartitionSequences(True), Stamps()
    seqs.set_producer(7, 0)
    a, b, other = batch(records=2), batch(), batch(1)
    sent(seqs, a, b, other, stamps=stamps)
    assert seqs.to_restart() == []
    seqs.settle(a, OutOfOrderSequence("lost"))
    assert seqs.to_restart() == [(T, 0)]
    # b answered from before the restart: its send is stale, so retried unchanged
    seqs.restart((T, 0), 9, 1)
    assert seqs.to_restart() == [] and b.base_sequence == 0 and b.restamp
    assert seqs.refused(b, OutOfOrderSequence("old")) == RETRY
    seqs.number(b, stamps)
    assert stamps.last(b) == (9, 1, 0, True)
    seqs.number(c := batch(), stamps)
    assert c.base_sequence == 1 and stamps.last(c)[:2] == (9, 1)
    seqs.number(o2 := batch(1), stamps)  # the other partition keeps its id and numbering
    assert o2.base_sequence == 1 and stamps.last(o2)[:2] == (7, 0)
    assert other.base_sequence == 0


def test_refused_verdicts() -> None:
    seqs = PartitionSequences(True)
    seqs.set_producer(7, 0)
    a, b = batch(), batch()
    sent(seqs, a, b)
    # b after an unanswered a: not the next sequence the broker lacks, so retried as is
    assert seqs.refused(b, OutOfOrderSequence("x")) == RETRY and seqs.to_restart() == []
    # every earlier batch acknowledged, yet refused: the broker lost state
    seqs.settle(a, None)
    assert seqs.refused(b, OutOfOrderSequence("x")) == RESTART and seqs.to_restart() == [(T, 0)]
    seqs.restart((T, 0), 8, 0)
    seqs2 = PartitionSequences(True)
    c = batch()
    sent(seqs2, c)
    assert seqs2.refused(c, UnknownProducerId("x")) == RESTART
    # a batch being restamped (renumbered) is retried
    d, e = batch(), batch()
    seqs3 = PartitionSequences(True)
    sent(seqs3, d, e)
    seqs3.settle(d, InvalidRecord("bad"))
    assert e.restamp and seqs3.refused(e, OutOfOrderSequence("x")) == RETRY


def test_a_maybe_appended_batch_keeps_its_numbers_until_resolved() -> None:
    # RuntimeError: a sent batch failed by the sender's catch-all (a bug, not the broker's answer)
    for error in (RequestTimedOut("expired"), NetworkError("gone"), RuntimeError("unexpected")):
        seqs, stamps = PartitionSequences(True), Stamps()
        a, b = batch(records=2), batch()
        sent(seqs, a, b, stamps=stamps)
        seqs.settle(a, error)  # sent, no answer: maybe in the log
        assert b.base_sequence == 2 and not b.restamp
        new = batch()
        assert seqs.sendable([new]) == 0  # nothing new is numbered while unresolved
        held: dict = {}
        done, i, failed, _ = seqs.number_round([new], 0, 1, held, stamps)
        assert (done, i, failed, held) == ([], 1, None, {(T, 0): [new]})
        # the next one after the gap is refused: it fails, as in Kafka's producer
        assert seqs.refused(b, OutOfOrderSequence("gap")) == FAIL
        seqs.settle(b, OutOfOrderSequence("gap"))
        seqs.resolve()
        assert seqs.to_restart() == [(T, 0)]
        seqs.restart((T, 0), 5, 0)
        assert seqs.sendable([new]) == 1 and not seqs.has_unresolved()


def test_resolve_when_the_broker_had_every_sequence() -> None:
    seqs = PartitionSequences(True)
    a, b = batch(), batch()
    sent(seqs, a, b)
    seqs.settle(a, RequestTimedOut("expired"))
    assert seqs.has_unresolved()
    seqs.resolve()  # b still unanswered: nothing decided yet
    assert seqs.has_unresolved() and seqs.to_restart() == []
    seqs.settle(b, None)  # acknowledged after the unknown one: the broker has a's too
    assert not seqs.has_unresolved()
    c, d = batch(), batch()
    sent(seqs, c, d)
    seqs.settle(d, RequestTimedOut("expired"))  # the last one given out: unknown
    seqs.settle(c, None)
    seqs.resolve()
    assert seqs.to_restart() == [(T, 0)]  # the broker never acknowledged d's sequence


def test_number_round_stops_after_a_failed_encode() -> None:
    seqs = PartitionSequences(True)
    batches = [batch(p) for p in (0, 1, 0, 1)]

    def encode(b, pid, epoch, seq, restamp):
        if b is batches[1]:
            raise InvalidRecord("cannot encode")

    held: dict = {}
    done, i, failed, error = seqs.number_round(batches, 0, 4, held, encode)
    assert done == [batches[0]] and i == 2 and failed is batches[1] and isinstance(error, InvalidRecord)
    assert batches[2].base_sequence is None  # not numbered before the failure is handled


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3), st.booleans()), max_size=40), st.booleans())
def test_a_round_is_numbered_as_one_by_one(layout: list, idempotent: bool) -> None:
    """number_round (one hold of the lock) against sendable + number batch by batch: the same numbers,
    the same stamps (producer id, epoch, sequence, whether the bytes are stamped), the same batches held;
    partition 1 restarted with its own producer id, partition 2 at its unanswered limit."""
    results = []
    for whole in (False, True):
        seqs, stamps = PartitionSequences(idempotent), Stamps()
        seqs.set_producer(7, 3)
        sent(seqs, batch(1))
        seqs.restart((T, 1), 9, 0)
        sent(seqs, *[batch(2) for _ in range(MAX_UNANSWERED_BATCHES)])
        stamps.calls.clear()
        batches = [batch(p, n) for p, n, _ in layout]
        for b, (_, _, resend) in zip(batches, layout, strict=True):
            if resend:  # sent before: numbered, one attempt
                sent(seqs, b)
        held: dict = {}
        if whole:
            done, i, failed, _ = seqs.number_round(batches, 0, len(batches), held, stamps)
            assert i == len(batches) and failed is None
        else:
            done = []
            for b in batches:
                if b.tp in held:
                    held[b.tp].append(b)
                elif idempotent and seqs.sendable([b]) == 0:
                    held[b.tp] = [b]
                else:
                    seqs.number(b, stamps)
                    done.append(b)
        results.append(
            (
                [batches.index(b) for b in done],
                [(batches.index(c[0]), *c[1:]) for c in stamps.calls],
                {tp: [batches.index(b) for b in q] for tp, q in held.items()},
                [b.base_sequence for b in batches],
            )
        )
    assert results[0] == results[1]


ops = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(0, 2), st.integers(1, 4), st.booleans()),
        st.tuples(
            st.just("answer"), st.integers(0, 2), st.sampled_from(["ok", "refused"]), st.integers(1, 4)
        ),
    ),
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_random_sends_and_answers_leave_no_gap_and_no_overlap(ops: list) -> None:
    """Answers come in order per partition (as a broker gives them), interleaved across partitions at
    random; a refused batch fails unsent (its numbers given back). The broker's view: each appended batch
    starts where the records appended before it end, and its bytes carry that number."""
    seqs, stamps = PartitionSequences(True), Stamps()
    unanswered: dict[int, list[ProducerBatch]] = {0: [], 1: [], 2: []}
    appended = {0: 0, 1: 0, 2: 0}  # records the broker holds per partition
    for op in ops:
        if op[0] == "send":
            _, p, records, in_round = op
            b = batch(p, records)
            if seqs.sendable([b]) == 0:
                continue
            if in_round:
                done, _, _, _ = seqs.number_round([b], 0, 1, {}, stamps)
                assert done == [b]
            else:
                seqs.number(b, stamps)
            b.attempts += 1
            unanswered[p].append(b)
            continue
        _, p, outcome, n = op
        answered, unanswered[p] = unanswered[p][:n], unanswered[p][n:]
        if not answered:
            continue
        if outcome == "ok":
            for b in answered:
                if b.restamp:  # renumbered: resent with its new numbers before the broker takes it
                    seqs.number(b, stamps)
                assert b.base_sequence == appended[p] and stamps.last(b)[2] == b.base_sequence
                appended[p] += b.record_count
            seqs.settle_appended([(b, None) for b in answered])
        else:
            for b in answered:  # in order: each refused one moves the later ones down
                seqs.settle(b, InvalidRecord("refused"))
        # the next batch numbered follows the unanswered ones
        for q in unanswered[p]:
            if q.restamp:
                seqs.number(q, stamps)
        end = appended[p] + sum(b.record_count for b in unanswered[p])
        probe = batch(p)
        if seqs.sendable([probe]):
            seqs.number(probe, stamps)
            assert probe.base_sequence == end
            seqs.settle(probe, InvalidRecord("refused"))
    assert seqs.to_restart() == [] and not seqs.has_unresolved()
