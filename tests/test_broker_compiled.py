"""The broker's compiled produce path (issue 25) against its pure-Python references.

``broker/log/_cruns.pyx`` (the coalesced append's loop over plain runs) is imported
directly, so its tests compare it with the reference on both test runs (with the
extensions, and with ``LOGSOURCE_NO_EXTENSIONS=1``, when the log itself uses only the
references). The last tests append random mixes of runs (plain, idempotent, Kafka's
layout, corrupt, retried) together and one by one, on whatever path is in use, and
compare the answers, the bytes and the producer state.
"""

from __future__ import annotations

import os
from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.logdata import make_batch, open_log, region_bytes
from test_format_compiled_body import produced_run
from test_protocol_compiled import cp, mangled, produce_frames  # cp: _cproduce, its classes bound

from pyspark_logsource.broker.log import append as log_append
from pyspark_logsource.broker.log.producer_state import (
    BatchMetadata,
    ProducerAppend,
    ProducerEntry,
    ProducerStateManager,
)
from pyspark_logsource.errors import LogSourceError
from pyspark_logsource.format import encode as fmt_encode
from pyspark_logsource.format import plain_run
from pyspark_logsource.format.crc import crc32c
from pyspark_logsource.format.kafka_encode import encode_kafka
from pyspark_logsource.protocol import connection
from pyspark_logsource.protocol.connection import ServerConnection

try:
    from pyspark_logsource.broker.log import _cruns
except ImportError:  # not built: `python scripts/build_ext.py` builds it in place
    _cruns = None
    if os.environ.get("CI"):
        raise

needs_cruns = pytest.mark.skipif(
    _cruns is None, reason="broker/log/_cruns is not built: pure-Python path only"
)
PROPS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: the buffers a produced run may arrive in: the writable ones the compiled paths take, and those they refuse
BUFFER_KINDS = {
    "bytearray": lambda b: b,
    "view": memoryview,
    "bytes": bytes,
    "readonly": lambda b: memoryview(b).toreadonly(),
    "strided": lambda b: memoryview(b)[::2],
}


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - the reference's error, whatever it is, must be the same
        return ("error", type(e), str(e))


def _manager(tmp_path, state) -> ProducerStateManager:
    """A partition's producer state holding ``state``: pid -> (epoch, [(first seq, last seq)])."""
    m = ProducerStateManager(tmp_path)
    for pid, (epoch, seqs) in state.items():
        m.producers[pid] = ProducerEntry(
            pid, epoch, [BatchMetadata(f, la, 100 + f, 100 + la) for f, la in seqs]
        )
    return m


def _state(m: ProducerStateManager) -> dict:
    return {pid: (e.epoch, list(e.batches), e.last_timestamp) for pid, e in m.producers.items()}


def _both(tmp_path, state, runs, i, offset, epoch, at, max_size, keyless):
    """Run the compiled loop and the reference on copies of ``runs`` and of the producer state: their
    outcomes, lists, buffers and the producer state after a commit."""
    got = []
    cas = partial(plain_run.check_and_stamp, max_size, keyless)
    for fn, spr in (
        (_cruns.stamp_usual_runs, partial(_cruns.stamp_producer_run, max_size, keyless)),
        (log_append.stamp_usual_runs_py, partial(log_append.stamp_producer_run_py, max_size, keyless)),
    ):
        m = _manager(tmp_path, state)
        producers = ProducerAppend(m)
        mine = [bytearray(r) for r in runs]
        parts, stamped, appended = [], [], []
        res = _outcome(fn, cas, spr, producers, mine, i, offset, epoch, at, parts, stamped, appended)
        producers.commit()
        got.append((res, [bytes(p) for p in parts], stamped, appended, mine, _state(m)))
    return got


@st.composite
def producer_state(draw):
    state = {}
    for pid in draw(st.lists(st.sampled_from([1, 2, 3]), unique=True, max_size=3)):
        last = draw(st.sampled_from([-1, 5, 2**31 - 2]))
        seqs = []
        for _ in range(draw(st.integers(0, 3))):
            first = (last + 1) & (2**31 - 1)
            last = (first + draw(st.integers(0, 2))) & (2**31 - 1)
            seqs.append((first, last))
        state[pid] = (draw(st.integers(0, 2)), seqs)
    return state


@st.composite
def producer_batch(draw, state):
    """An idempotent batch of a producer in ``state`` (or a new one): often its next, else any."""
    pid = draw(st.sampled_from([1, 2, 3, 4]))
    epoch, seqs = state.get(pid, (0, []))
    nxt = (seqs[-1][1] + 1) & (2**31 - 1) if seqs else 0
    seq = draw(st.one_of(st.just(nxt), st.just(nxt), st.integers(0, 8), st.just(2**31 - 1)))
    epoch = draw(st.one_of(st.just(epoch), st.integers(0, 3)))
    n = draw(st.integers(1, 3))
    keys = draw(st.one_of(st.none(), st.just([None] * n)))
    out = fmt_encode(
        [b"v%d" % j for j in range(n)], keys, 1000, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    if draw(st.integers(0, 9)) == 0:
        out[draw(st.integers(0, len(out) - 1))] ^= draw(st.integers(1, 255))
    return out


@st.composite
def usual_runs(draw):
    state = draw(producer_state())
    runs = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 3)) == 0:
            runs.append(draw(produced_run()))  # plain, Kafka's layout, transactional, mutated, truncated
        else:
            runs.append(bytearray().join(draw(producer_batch(state)) for _ in range(draw(st.integers(1, 3)))))
    return state, runs


@needs_cruns
@PROPS
@given(usual_runs(), st.data())
def test_stamp_usual_runs_agrees_with_the_reference(tmp_path_factory, sr, data):
    """Random runs (plain; idempotent: next, duplicate, gap, new or old epoch, new producer, wrapped
    sequence, null keys; Kafka's layout, transactional, corrupt, truncated) over a random producer
    state: the same index, offset and byte count, the same lists, stamped buffers and producer state."""
    state, runs = sr
    i = data.draw(st.integers(0, len(runs)))
    offset = data.draw(st.one_of(st.integers(0, 2**40), st.just(2**63 - 3), st.integers(-3, -1)))
    epoch = data.draw(st.one_of(st.integers(-1, 100), st.just(2**31), st.just(-(2**31) - 1)))
    at = data.draw(st.integers(0, 1 << 20))
    max_size = data.draw(st.one_of(st.integers(61, 200), st.just(1 << 20)))
    keyless = data.draw(st.booleans())
    tmp = tmp_path_factory.mktemp("ps")
    compiled, reference = _both(tmp, state, runs, i, offset, epoch, at, max_size, keyless)
    assert compiled == reference


@needs_cruns
@PROPS
@given(usual_runs(), st.data())
def test_stamp_producer_run_agrees_with_the_reference(tmp_path_factory, sr, data):
    """One run in any buffer (bytes, a read-only or strided view), any offset and epoch: the same
    answer, buffer and producer state."""
    state, runs = sr
    kind = data.draw(st.sampled_from(["bytearray", "view", "bytes", "readonly", "strided"]))
    offset = data.draw(st.one_of(st.integers(0, 2**40), st.just(2**63 - 1), st.just(-1), st.just(1.0)))
    epoch = data.draw(st.one_of(st.integers(-1, 100), st.just(2**31)))
    max_size = data.draw(st.one_of(st.integers(61, 200), st.just(1 << 20)))
    keyless = data.draw(st.booleans())
    out = []
    tmp = tmp_path_factory.mktemp("ps")
    for fn in (_cruns.stamp_producer_run, log_append.stamp_producer_run_py):
        mine = bytearray(runs[0])
        buf = BUFFER_KINDS[kind](mine)
        m = _manager(tmp, state)
        producers = ProducerAppend(m)
        stamped: list = []
        res = _outcome(fn, max_size, keyless, buf, offset, epoch, producers, stamped, 5)
        producers.commit()
        out.append((res, stamped, mine, _state(m)))
    assert out[0] == out[1]


@needs_cruns
def test_stamp_usual_runs_passes_errors_through_alike(tmp_path):
    """A check that raises, or answers no pair, an empty list or a non-list: the same typed error both ways."""

    def raises(records, offset, epoch):
        raise ValueError("bad run")

    for cas in (raises, lambda r, o, e: [], lambda r, o, e: (True, []), lambda r, o, e: (False, 7)):
        got = [
            _outcome(
                fn,
                cas,
                None,
                ProducerAppend(_manager(tmp_path, {})),
                [make_batch(0, 1)],
                0,
                0,
                0,
                0,
                [],
                [],
                [],
            )
            for fn in (_cruns.stamp_usual_runs, log_append.stamp_usual_runs_py)
        ]
        assert got[0][0] == got[1][0] == "error"
        assert got[0][1] is got[1][1]


def _outcome_of(r) -> tuple:
    return ("error", type(r).__name__) if isinstance(r, LogSourceError) else tuple(r)


def _one_by_one(log, runs) -> list:
    out = []
    for r in runs:
        try:
            out.append(log.append(r))
        except LogSourceError as e:
            out.append(e)
    return out


@st.composite
def producer_runs(draw):
    """Runs of two idempotent producers (in order, retried, out of order, a new epoch) and plain ones."""
    seqs = {7: 0, 8: 0}
    epochs = {7: 0, 8: 0}
    runs = []
    for _ in range(draw(st.integers(2, 12))):
        kind = draw(
            st.sampled_from(
                ["next", "next", "next", "plain", "retry", "gap", "epoch", "old", "corrupt", "kafka"]
            )
        )
        pid = draw(st.sampled_from([7, 8]))
        n = draw(st.integers(1, 3))
        if kind == "plain":
            runs.append(make_batch(0, n))
            continue
        if kind == "kafka":  # a Kafka client's layout (then the rest of the append takes the general path)
            runs.append(encode_kafka([b"v%d" % j for j in range(n)], None, 1000))
            continue
        if kind == "corrupt":
            b = make_batch(0, 1, producer_id=pid, producer_epoch=epochs[pid], base_sequence=seqs[pid])
            b[-1] ^= 1
            runs.append(b)
            continue
        seq, epoch = seqs[pid], epochs[pid]
        if kind == "retry":
            seq = max(0, seq - draw(st.integers(1, 3)))
        elif kind == "gap":
            seq += draw(st.integers(1, 3))
        elif kind == "epoch":
            epoch = epochs[pid] = epoch + 1
            seq = seqs[pid] = draw(st.sampled_from([0, 0, 1]))
        elif kind == "old":
            epoch = max(0, epoch - 1)
        runs.append(make_batch(0, n, producer_id=pid, producer_epoch=epoch, base_sequence=seq))
        if kind == "next":
            seqs[pid] = seq + n
    return runs


@PROPS
@given(producer_runs())
def test_coalesced_append_answers_and_stores_as_one_by_one(tmp_path_factory, runs):
    """PartitionLog.append_runs (compiled or pure, whichever is in use) against append one by one:
    the same answers (offsets, duplicates, typed errors), the same bytes, the same producer state."""
    path = tmp_path_factory.mktemp("runs")
    a, b = open_log(path / "a"), open_log(path / "b")
    try:
        first = make_batch(0, 1)  # a log that has something: positions and offsets start past 0
        a.append(bytearray(first))
        b.append(bytearray(first))
        got = a.append_runs([bytearray(r) for r in runs])
        want = _one_by_one(b, [bytearray(r) for r in runs])
        assert [_outcome_of(r) for r in got] == [_outcome_of(r) for r in want]
        assert a.log_end_offset == b.log_end_offset
        ra, rb = a.read(0, 1 << 30), b.read(0, 1 << 30)
        assert region_bytes(ra) == region_bytes(rb)
        state = lambda lg: {  # noqa: E731
            pid: (e.epoch, list(e.batches)) for pid, e in lg.producer_state.producers.items()
        }
        assert state(a) == state(b)
    finally:
        a.close()
        b.close()


@st.composite
def kafka_client_runs(draw):
    """Runs a Kafka client writes (Kafka's record layout): uncompressed ones the one-call path takes,
    keyless records (a compacted topic refuses them: KIP-467), compressed, idempotent, corrupt ones."""
    runs = []
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(
            st.sampled_from(["plain", "plain", "plain", "keyless", "gzip", "idempotent", "crc", "records"])
        )
        n = draw(st.integers(1, 3))
        keys = [b"k%d" % j for j in range(n)]
        kw: dict = {}
        if kind == "keyless":
            keys[draw(st.integers(0, n - 1))] = None
        elif kind == "gzip":
            kw["codec"] = "gzip"
        elif kind == "idempotent":
            kw.update(producer_id=5, producer_epoch=0, base_sequence=draw(st.sampled_from([0, 0, 3])))
        b = encode_kafka([b"v%d" % j for j in range(n)], keys, 1000 + n, **kw)
        if kind == "crc":
            b[-1] ^= 1
        elif (
            kind == "records"
        ):  # a record's varint broken, the CRC made to match: only the record check sees it
            b[draw(st.integers(61, len(b) - 1))] ^= draw(st.sampled_from([0x40, 0x80, 0xFF]))
            b[17:21] = crc32c(memoryview(b)[21:]).to_bytes(4, "big")
        runs.append(b)
    return runs


def _answer(r) -> tuple:
    """An append's answer with all a client sees of an error: its type, text, Kafka code, record errors."""
    if isinstance(r, LogSourceError):
        return (type(r).__name__, str(r), r.code, getattr(r, "record_errors", None))
    return tuple(r)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # three logs each
@given(kafka_client_runs(), st.booleans())
def test_kafka_layout_runs_answer_and_store_as_on_the_general_path(tmp_path_factory, runs, compact):
    """Runs in Kafka's layout, on whatever path is in use: appended together (PartitionLog.append_runs)
    and one by one (the one-call write step) they get the answers (typed errors and Kafka codes, KIP-467
    record errors for keyless records on a compacted topic), bytes and producer state the general path
    alone gives; and no segment is marked as holding our Arrow body (Kafka clients' fetches of it are sent
    as stored)."""
    path = tmp_path_factory.mktemp("kafka-runs")
    policy = "compact" if compact else "delete"
    together, alone = open_log(path / "a", cleanup_policy=policy), open_log(path / "b", cleanup_policy=policy)
    saved = log_append.check_and_stamp, log_append.write_plain_batch
    log_append.check_and_stamp = log_append.write_plain_batch = lambda *a: None  # bound by the validator
    try:
        general = open_log(path / "c", cleanup_policy=policy)
    finally:
        log_append.check_and_stamp, log_append.write_plain_batch = saved
    logs = (together, alone, general)
    try:
        answers = [
            together.append_runs([bytearray(r) for r in runs]),
            _one_by_one(alone, [bytearray(r) for r in runs]),
            _one_by_one(general, [bytearray(r) for r in runs]),
        ]
        assert [_answer(r) for r in answers[0]] == [_answer(r) for r in answers[2]]
        assert [_answer(r) for r in answers[1]] == [_answer(r) for r in answers[2]]
        for r in answers[0]:
            if isinstance(r, LogSourceError) and r.code == 87:  # INVALID_RECORD: only a compacted topic's
                assert compact and r.record_errors  # KIP-467: the keyless records are named
        ends = {lg.log_end_offset for lg in logs}
        assert len(ends) == 1
        end = ends.pop()
        regions = [lg.read(0, 1 << 30) for lg in logs]
        assert len({region_bytes(r) for r in regions}) == 1
        for lg, region in zip(logs, regions, strict=True):
            assert [s.holds_arrow for s in lg.segments] == [False]
            assert region.may_hold_arrow is False or end == 0
        state = lambda lg: {pid: (e.epoch, list(e.batches)) for pid, e in lg.producer_state.producers.items()}  # noqa: E731
        assert state(together) == state(alone) == state(general)
    finally:
        for lg in logs:
            lg.close()


def test_a_segment_is_marked_as_holding_our_arrow_body_by_its_first_such_batch(tmp_path):
    """Kafka-layout batches through both one-call paths leave the segment unmarked; our Arrow body, by
    either path, marks it (a Kafka client's fetch of it is then converted)."""
    kafka = encode_kafka([b"v"], [b"k"], 1000)
    for how in ("one", "runs"):
        lg = open_log(tmp_path / how)
        try:
            lg.append(bytearray(kafka))
            lg.append_runs([bytearray(kafka), bytearray(kafka)])
            assert lg.active_segment.holds_arrow is False
            assert lg.read(0, 1 << 20).may_hold_arrow is False
            if how == "one":
                lg.append(make_batch(0, 1))
            else:
                lg.append_runs([bytearray(kafka), make_batch(0, 1)])
            assert lg.active_segment.holds_arrow is True
            assert lg.read(0, 1 << 20).may_hold_arrow is True
        finally:
            lg.close()


# ---------------------------------------------------------------- the read loop's frame decode


def _decode_frames(frames: list, compiled: bool):
    """ServerConnection.decode_frames on one path: the events, and the error's type, text and code."""
    saved = connection._decode_frames, connection._produce_decode
    if compiled:  # whether or not the package uses it (LOGSOURCE_NO_EXTENSIONS=1): the tests compare anyway
        connection._decode_frames, connection._produce_decode = cp.decode_frames, cp.decode_produce_frame
    else:
        connection._decode_frames = connection._produce_decode = None
    try:
        evs, bad = ServerConnection.decode_frames([bytearray(f) for f in frames])
        kinds = [
            [type(p.records) for p in getattr(ev, "request", None).partitions]
            for ev in evs
            if hasattr(ev, "request")
        ]
        return evs, kinds, bad and (type(bad), str(bad), getattr(bad, "code", None))
    finally:
        connection._decode_frames, connection._produce_decode = saved


needs_cproduce = pytest.mark.skipif(
    cp is None, reason="protocol/_cproduce is not built: pure-Python path only"
)


@needs_cproduce
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.lists(st.one_of(produce_frames(), mangled()), max_size=8))
def test_decode_frames_same_events_and_error_both_ways(frames):
    """A read's frames (Produce of every shape, malformed ones among them): the same requests up to
    the first bad frame and the same typed error, compiled loop or Python loop."""
    assert _decode_frames(frames, True) == _decode_frames(frames, False)
