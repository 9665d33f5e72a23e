"""The client I/O thread's completion steps: each compiled twin (``client/_cio.pyx``) against its pure-Python
reference on the same inputs (hypothesis), and the bulk settle against settling batch by batch.

The compiled twins are compared whenever they are built, on either path (LOGSOURCE_NO_EXTENSIONS or not);
the Makefile runs this file both ways, so the bindings each module picks are exercised too.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_logsource.client import accumulator, answers, dispatch, sequences
from pyspark_logsource.client.accumulator import ProducerBatch, release_run_py, resolve_run_py
from pyspark_logsource.client.answers import run_sizes_py
from pyspark_logsource.client.batch_future import DONE_STATES, BatchFuture
from pyspark_logsource.client.dispatch import match_answers_py, pop_times_py
from pyspark_logsource.client.sequences import PartitionSequences, settle_oldest_py
from pyspark_logsource.errors import InvalidRecord, RequestTimedOut
from pyspark_logsource.format._speedups import DISABLED
from pyspark_logsource.protocol import messages as m
from pyspark_logsource.protocol.connection import ResponseReceived
from pyspark_logsource.protocol.primitives import ProtocolError
from pyspark_logsource.protocol.produce_answers import ProduceAnswer

try:  # the compiled twins, compared with the references on either path
    from pyspark_logsource.client import _cio
    from pyspark_logsource.protocol import _canswers
except ImportError:  # not built: the references alone are checked
    _cio = _canswers = None

needs_cio = pytest.mark.skipif(_cio is None, reason="the compiled core is not built")
_ANSWER_CLASSES = [ProduceAnswer] + ([_canswers.ProduceAnswer] if _canswers is not None else [])


def test_each_module_binds_the_twin_of_its_path() -> None:
    on = _cio is not None and not DISABLED
    assert (
        (sequences._settle_oldest is _cio.settle_oldest)
        if on
        else sequences._settle_oldest is settle_oldest_py
    )
    assert (
        (accumulator._release_run is _cio.release_run) if on else accumulator._release_run is release_run_py
    )
    assert (
        (accumulator._resolve_run is _cio.resolve_run) if on else accumulator._resolve_run is resolve_run_py
    )
    assert (answers.run_sizes is _cio.run_sizes) if on else answers.run_sizes is run_sizes_py
    assert (
        (dispatch.match_answers is _cio.match_answers) if on else dispatch.match_answers is match_answers_py
    )
    assert (dispatch.pop_times is _cio.pop_times) if on else dispatch.pop_times is pop_times_py


# ------------------------------------------------------------------ the sequences' settle of appended runs

#: a partition's queue of unanswered batches, drawn as (partition, records) of each; the answered run as
#: indexes into all the batches made (a batch may be answered out of its queue's order, or twice), or -1
#: for a batch without sequence numbers
_SETTLE = st.tuples(
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3)), max_size=10),
    st.lists(st.integers(-1, 12), max_size=12),
    st.booleans(),  # a partition with a batch of unknown fate
    st.integers(0, 12),  # where the run starts
)


def _settle_state(spec: tuple) -> tuple:
    queued, run, unresolved, _ = spec
    batches, assigned, stamped = [], {}, {}
    seq = dict.fromkeys(range(3), 0)
    for p, records in queued:
        b = ProducerBatch.from_encoded("t", p, bytearray(70), records, 0.0)
        b.base_sequence = seq[p]
        seq[p] = (seq[p] + records) & 0x7FFFFFFF
        assigned.setdefault(b.tp, []).append(b)
        stamped[id(b)] = 7
        batches.append(b)
    loose = ProducerBatch.from_encoded("t", 0, bytearray(70), 1, 0.0)  # never numbered
    done = [(batches[i] if 0 <= i < len(batches) else loose, (0, i, i)) for i in run]
    return done, assigned, {("t", 9): 4}, stamped, ({("t", 1): 5} if unresolved else {}), batches


def _settle_view(state: tuple, index: int) -> tuple:
    _, assigned, last_acked, stamped, unresolved, batches = state
    label = {id(b): k for k, b in enumerate(batches)}
    return (
        index,
        {tp: [label[id(b)] for b in q] for tp, q in assigned.items()},
        last_acked,
        sorted(label[i] for i in stamped),
        unresolved,
    )


@needs_cio
@settings(max_examples=400, deadline=None)
@given(_SETTLE)
def test_settle_oldest_twins_change_the_same_tables(spec: tuple) -> None:
    views = []
    for twin in (settle_oldest_py, _cio.settle_oldest):
        state = _settle_state(spec)
        index = twin(state[0], min(spec[3], len(state[0])), *state[1:5])
        views.append(_settle_view(state, index))
    assert views[0] == views[1]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3)), min_size=1, max_size=12),
    st.lists(st.integers(0, 2), max_size=6),  # partitions answered so far, one batch each
    st.sampled_from([None, "refused", "lost"]),  # an earlier batch failed for good: its way
    st.lists(st.booleans(), max_size=12),  # which answered batches come out of their queue's order
)
def test_settle_appended_is_settle_batch_by_batch(sends: list, before: list, failed, shuffle: list) -> None:
    """The bulk settle of an appended run leaves the sequences as settle(b, None) of each in order does."""
    results = []
    for bulk in (True, False):
        seqs = PartitionSequences(True)
        seqs.set_producer(7, 0)
        batches = [ProducerBatch.from_encoded("t", p, bytearray(70), n, 0.0) for p, n in sends]
        for b in batches:
            seqs.number(b, lambda *a: None)
            b.attempts = 1
        for p in before:  # answered one by one, the oldest of the partition
            q = [b for b in batches if b.partition == p and b.outcome is None]
            if q:
                seqs.settle(q[0], None)
                q[0].outcome = (None, None)
        left = [b for b in batches if b.outcome is None]
        if failed is not None and left:  # a batch that fails for good: numbers given back, or unknown fate
            seqs.settle(left[0], InvalidRecord("refused") if failed == "refused" else RequestTimedOut("lost"))
            left = left[1:]
        run = list(left)
        for k, swap in enumerate(shuffle[: max(0, len(run) - 1)]):
            if swap:
                run[k], run[k + 1] = run[k + 1], run[k]
        done = [(b, (b.partition, 0, 0)) for b in run]
        if bulk:
            seqs.settle_appended(done)
        else:
            for b, _ in done:
                seqs.settle(b, None)
        label = {id(b): k for k, b in enumerate(batches)}
        results.append(
            (
                {tp: [label[id(b)] for b in q] for tp, q in seqs._assigned.items()},
                dict(seqs._last_acked),
                dict(seqs._unresolved),
                sorted(label[i] for i in seqs._stamped),
                dict(seqs._next_seq),
                [b.base_sequence for b in batches],
            )
        )
    assert results[0] == results[1]


# ------------------------------------------------------------------ the accumulator's completion


def _batches(spec: list) -> list[tuple[ProducerBatch, tuple]]:
    """(size, encoded or not, outcome set, future state) per batch -> (batch, result) pairs."""
    done = []
    for k, (size, encoded, completed, future) in enumerate(spec):
        b = ProducerBatch("t", k % 3, 0.0)
        b.size, b.record_count = size, k % 4 + 1
        b.encoded = bytearray(size // 2) if encoded else None
        if completed:
            b.outcome = ("earlier", None)
        if future != "none":
            f = b._future = BatchFuture()
            if future == "done":
                f.set_result("earlier")
        done.append((b, (b.partition, k, k + b.record_count - 1)))
    if len(done) > 1:
        done.append(done[0])  # a batch twice in a run: completed once
    return done


_RUN = st.lists(
    st.tuples(
        st.integers(0, 1 << 20), st.booleans(), st.booleans(), st.sampled_from(["none", "pending", "done"])
    ),
    max_size=10,
)


@needs_cio
@settings(max_examples=300, deadline=None)
@given(_RUN)
def test_release_resolve_and_sizes_twins_agree(spec: list) -> None:
    got = []
    for release, resolve, sizes in (
        (release_run_py, resolve_run_py, run_sizes_py),
        (_cio.release_run, _cio.resolve_run, _cio.run_sizes),
    ):
        done = _batches(spec)
        others = [ProducerBatch("u", 0, 0.0) for _ in range(3)]
        incomplete = dict.fromkeys([b for b, _ in done] + others)
        total = release(done, incomplete)
        records_bytes = sizes(done)
        waiting = resolve(done, DONE_STATES)
        index = {id(b): k for k, (b, _) in enumerate(done)}
        got.append(
            (
                total,
                records_bytes,
                sorted(index.get(id(b), -1) for b in incomplete),
                [b.outcome for b, _ in done],
                [(index[id(b)], r) for f, r in waiting for b, _ in done if b._future is f],
            )
        )
    assert got[0] == got[1]
    assert got[0][2] == [-1, -1, -1]  # only the others are left


def test_complete_many_resolves_futures_and_frees_memory() -> None:
    acc = accumulator.RecordAccumulator(batch_size=1, linger_ms=0, buffer_memory=1 << 20, max_block_ms=10)
    done = _batches([(100, False, False, "pending"), (50, True, False, "none"), (30, False, True, "done")])
    acc.incomplete.update(dict.fromkeys(b for b, _ in done))
    acc.used = 180
    acc.muted.add(done[1][0].tp)
    acc.complete_many(done)
    assert acc.used == 0 and not acc.incomplete and not acc.muted and acc.answered == len(done)
    assert done[0][0].future.result(0) == done[0][1] and done[1][0].future.result(0) == done[1][1]
    assert done[2][0].outcome == ("earlier", None) and done[2][0].future.result(0) == "earlier"


# ------------------------------------------------------------------ the connection's match of answers


@st.composite
def _answers(draw) -> tuple[list, list]:
    n = draw(st.integers(0, 8))
    pending = [(cid, object(), 1.5) for cid in range(n)]
    out = []
    for cid in range(n):
        if draw(st.integers(0, 9)) == 0:
            cid += draw(st.integers(1, 3))  # an answer to another request
        throttle = draw(st.sampled_from([0, 0, 1, 250, 2**31 - 1]))
        if draw(st.booleans()):
            out.append(draw(st.sampled_from(_ANSWER_CLASSES))(cid, "t", 0, 0, 5, -1, 0, throttle))
        else:
            out.append(ResponseReceived(cid, 0, m.ProduceResponse([], throttle)))
    extra = draw(st.integers(0, 2))  # pending requests beyond the answers (or answers beyond them)
    return out, pending + [(n + k, object(), 2.0) for k in range(extra)] if draw(st.booleans()) else pending[
        : n - extra
    ]


@needs_cio
@settings(max_examples=300, deadline=None)
@given(_answers())
def test_match_answers_twins_agree(case: tuple) -> None:
    answers_, pending = case
    got = []
    for twin in (match_answers_py, _cio.match_answers):
        q = deque(pending)
        try:
            out = twin(answers_, q)
        except (ProtocolError, IndexError) as e:
            out = (type(e), str(e))
        got.append((out, list(q)))
    assert got[0] == got[1]


@needs_cio
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=20), st.data())
def test_pop_times_twins_agree(times: list, data) -> None:
    n = data.draw(st.integers(1, len(times)))
    qs = [deque(times), deque(times)]
    assert pop_times_py(qs[0], n) == _cio.pop_times(qs[1], n)
    assert qs[0] == qs[1] == deque(times[n:])


def test_a_future_made_before_the_answer_gets_the_result() -> None:
    b = ProducerBatch("t", 0, 0.0)
    f = b.future
    accumulator.resolve_many([(b, (0, 5, 5))])
    assert isinstance(f, Future) and f.result(0) == (0, 5, 5) and b.outcome == ((0, 5, 5), None)
