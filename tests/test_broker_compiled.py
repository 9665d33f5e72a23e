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

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.logdata import make_batch, open_log, region_bytes
from test_format_compiled_body import produced_run

from pyspark_logsource.broker.log import append as log_append
from pyspark_logsource.broker.log.config import LogConfig
from pyspark_logsource.errors import LogSourceError

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


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - the reference's error, whatever it is, must be the same
        return ("error", type(e), str(e))


def _both(check_and_stamp, runs, i, offset, epoch, at):
    """Run the compiled loop and the reference on copies of ``runs``: their outcomes, lists and buffers."""
    got = []
    for fn in (_cruns.stamp_plain_runs, log_append.stamp_plain_runs_py):
        mine = [bytearray(r) for r in runs]
        parts, stamped, appended = [], [], []
        res = _outcome(fn, check_and_stamp, mine, i, offset, epoch, at, parts, stamped, appended)
        got.append((res, [bytes(p) for p in parts], stamped, appended, mine))
    return got


@needs_cruns
@PROPS
@given(st.lists(produced_run(), min_size=1, max_size=6), st.data())
def test_stamp_plain_runs_agrees_with_the_reference(runs, data):
    """Random runs (plain, idempotent, Kafka's layout, transactional, corrupt, truncated): the same
    index, offset and byte count, the same lists and the same stamped buffers."""
    i = data.draw(st.integers(0, len(runs)))
    offset = data.draw(st.one_of(st.integers(0, 2**40), st.just(2**63 - 3)))
    epoch = data.draw(st.integers(-1, 100))
    at = data.draw(st.integers(0, 1 << 20))
    max_size = data.draw(st.one_of(st.integers(61, 400), st.just(1 << 20)))
    cas = LogConfig(max_message_bytes=max_size)
    validator = log_append.AppendValidator("t-0", "t", cas)
    compiled, reference = _both(validator.check_and_stamp, runs, i, offset, epoch, at)
    assert compiled == reference


@needs_cruns
def test_stamp_plain_runs_passes_errors_through_alike():
    """A check that raises, or answers an empty list, or a non-list: the same typed error both ways."""
    runs = [make_batch(0, 1)]

    def raises(records, offset, epoch):
        raise ValueError("bad run")

    for cas in (raises, lambda r, o, e: [], lambda r, o, e: (1, 2)):
        compiled, reference = _both(cas, runs, 0, 0, 0, 0)
        assert compiled[0][0] == "error"
        assert compiled[0][1] is reference[0][1]


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
            st.sampled_from(["next", "next", "next", "plain", "retry", "gap", "epoch", "old", "corrupt"])
        )
        pid = draw(st.sampled_from([7, 8]))
        n = draw(st.integers(1, 3))
        if kind == "plain":
            runs.append(make_batch(0, n))
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
