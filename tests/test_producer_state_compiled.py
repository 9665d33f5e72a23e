"""An idempotent append's compiled producer path (issue 25) against its pure-Python references.

``format/_cbody.producer_run`` (the walk of an idempotent producer's run, the fields its checks need)
against ``plain_run.producer_run_py``, and ``broker/log/_cproducers`` (``stage_next``, ``commit``)
against ``ProducerAppend.stage_next_py`` and ``ProducerAppend.commit_py``: the same results and the same staged
batches, tails, copies and entries. Both are imported directly, so these compare them on both test runs
(with the extensions, and with ``LOGSOURCE_NO_EXTENSIONS=1``); the appends of idempotent runs through
the log are in tests/test_broker_compiled.py.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_broker_compiled import BUFFER_KINDS, _manager, _state, producer_batch, producer_state
from test_format_compiled_body import produced_run

from pyspark_logsource.broker.log import producer_state as ps
from pyspark_logsource.broker.log.producer_state import (
    BatchMetadata,
    ProducerAppend,
    ProducerEntry,
    ProducerStateManager,
)
from pyspark_logsource.format import plain_run


def _compiled(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:  # not built: `python scripts/build_ext.py` builds it in place
        if os.environ.get("CI"):
            raise
        return None


_cbody = _compiled("pyspark_logsource.format._cbody")
_cproducers = _compiled("pyspark_logsource.broker.log._cproducers")
if _cproducers is not None:
    _cproducers.bind(BatchMetadata, ProducerEntry)

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
needs_cbody = pytest.mark.skipif(_cbody is None, reason="format/_cbody is not built")
needs_cproducers = pytest.mark.skipif(_cproducers is None, reason="broker/log/_cproducers is not built")


@st.composite
def idempotent_run(draw):
    """An idempotent producer's run (any producer, often its next sequences), plain or damaged, or any
    other produced run (Kafka's layout, transactional, null keys, a byte changed, cut, grown)."""
    if draw(st.integers(0, 2)) == 0:
        return draw(produced_run())
    state = draw(producer_state())
    return bytearray().join(draw(producer_batch(state)) for _ in range(draw(st.integers(1, 4))))


@needs_cbody
@PROPS
@given(idempotent_run(), st.data())
def test_producer_run_agrees_with_the_reference(run, data) -> None:
    kind = data.draw(st.sampled_from(["bytearray", "view", "bytes", "readonly", "strided", "empty"]))
    buf = bytearray() if kind == "empty" else BUFFER_KINDS[kind](run)
    max_size = data.draw(st.one_of(st.integers(0, 200), st.just(1 << 20)))
    keyless = data.draw(st.booleans())
    got = _cbody.producer_run(max_size, keyless, buf)
    assert got == plain_run.producer_run_py(max_size, keyless, buf)
    if got is not None:  # the fields of the headers, in order, and the run read to its end
        assert got[0][0] == 0 and sum(b[1] + 12 for b in got) == len(buf)


def test_producer_run_gives_each_batch_its_header_fields() -> None:
    from pyspark_logsource.format import encode
    from pyspark_logsource.format.header import walk

    run = bytearray().join(
        encode(
            [b"a" * i for i in range(1, n + 1)],
            None,
            5000 + n,
            producer_id=7,
            producer_epoch=3,
            base_sequence=s,
        )
        for n, s in ((1, 0), (3, 1), (2, 2**31 - 2))
    )
    want = [
        (pos, h.batch_length, h.last_offset_delta, h.max_timestamp, 7, 3, h.base_sequence, h.record_count)
        for pos, h in walk(run, check_crc=True, strict=True)
    ]
    assert plain_run.producer_run(1 << 20, False, run) == want
    assert [w[6] for w in want] == [0, 1, 2**31 - 2] and [w[7] for w in want] == [1, 3, 2]


@st.composite
def stagings(draw):
    """A producer state and the calls of one append: stage a batch (often its producer's next), look an
    entry up as ``check`` does (which makes the staged copies), or roll back to a savepoint."""
    state = draw(producer_state())
    calls = []
    for _ in range(draw(st.integers(1, 12))):
        what = draw(st.sampled_from(["stage", "stage", "stage", "stage", "entry", "rollback"]))
        pid = draw(st.sampled_from([1, 2, 3, 4]))
        if what == "stage":
            epoch, seqs = state.get(pid, (0, []))
            nxt = (seqs[-1][1] + 1) & (2**31 - 1) if seqs else 0
            calls.append(
                (
                    "stage",
                    pid,
                    draw(st.one_of(st.just(epoch), st.integers(0, 3))),
                    draw(st.one_of(st.just(nxt), st.integers(0, 8), st.just(2**31 - 1), st.just(-1))),
                    draw(st.integers(0, 3)),
                    draw(st.integers(0, 2**40)),
                    draw(st.integers(-1, 10**13)),
                )
            )
        elif what == "entry":
            calls.append(("entry", pid))
        else:
            calls.append(("rollback", draw(st.integers(0, 12))))
    return state, calls


def _replay(tmp, state, calls, stage, commit) -> tuple:
    m = _manager(tmp, state)
    append = ProducerAppend(m)
    results = []
    for call in calls:
        if call[0] == "stage":
            # the tails of a run's previous batches, as the log stages one run after another
            results.append(stage(append, *call[1:]))
        elif call[0] == "entry":
            e = append._entry(call[1])
            results.append(None if e is None else (e.epoch, list(e.batches), e.last_timestamp))
        else:
            append.rollback(min(call[1], append.savepoint()))
            results.append(append.savepoint())
    copies = {p: (e.epoch, list(e.batches), e.last_timestamp) for p, e in (append._copies or {}).items()}
    staged = list(append._staged)
    tails = dict(append._tails)
    commit(append)
    return results, staged, tails, copies, _state(m)


@needs_cproducers
@PROPS
@given(stagings())
def test_stage_next_and_commit_agree_with_the_reference(tmp_path_factory, sc) -> None:
    """Random appends over a random producer state (next sequences, gaps, new and old epochs, new
    producers, wrapped sequences, copies made by a second batch's check, rollbacks): the same answers,
    staged batches, tails and copies, and the same entries after the commit."""
    state, calls = sc
    tmp = tmp_path_factory.mktemp("ps")
    compiled = _replay(tmp, state, calls, _cproducers.stage_next, _cproducers.commit)
    reference = _replay(tmp, state, calls, ProducerAppend.stage_next_py, ProducerAppend.commit_py)
    assert compiled == reference
    for batch in compiled[1]:  # the staged batches are BatchMetadata, as the reference makes them
        assert type(batch[2]) is BatchMetadata


def test_the_log_uses_the_compiled_pair_when_it_is_built() -> None:
    if _cproducers is None or os.environ.get("LOGSOURCE_NO_EXTENSIONS"):
        assert ps._cproducers is None
        assert ProducerAppend.stage_next is ProducerAppend.stage_next_py
        assert ProducerAppend.commit is ProducerAppend.commit_py
    else:
        assert (
            ProducerAppend.stage_next is _cproducers.stage_next
            and ProducerAppend.commit is _cproducers.commit
        )
        m = ProducerStateManager(Path(tempfile.mkdtemp()))
        append = ProducerAppend(m)  # bound as methods: called on an append as its own
        assert append.stage_next(9, 0, 0, 2, 100, 5) and not append.stage_next(9, 0, 5, 0, 103, 5)
        append.commit()
        assert list(m.producers[9].batches) == [BatchMetadata(0, 2, 100, 102)]
