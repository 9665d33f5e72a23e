"""The sender's requests of a round of single batches: compiled (client/_csingles.pyx) against the reference.

``sender.round_calls`` (the reference) and ``_csingles.round_calls`` get equal
inputs (numbered batches, leaders by partition, some of them errors, the lists
already made per node) and must give the same result: the same pairs per node in
the same order (the request's fields, the answer's sender and batch), the same
deadlines set, the same index and error where a partition has no leader, the
same exception type on malformed input. Sans-IO; runs with and without
LOGSOURCE_NO_EXTENSIONS (the compiled module is imported directly).
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_logsource.client import sender as sender_module
from pyspark_logsource.client.accumulator import ProducerBatch
from pyspark_logsource.client.answers import OneBatchAnswer
from pyspark_logsource.errors import LeaderNotAvailable, LogSourceError, NetworkError
from pyspark_logsource.protocol.connection import OnePartitionProduce

try:
    from pyspark_logsource.client import _csingles
except ImportError:  # not built: `python scripts/build_ext.py`
    _csingles = None

needs_c = pytest.mark.skipif(_csingles is None, reason="client._csingles is not built")
if _csingles is not None:
    assert _csingles.bind(OnePartitionProduce, OneBatchAnswer)

_TPS = [("t", 0), ("t", 1), ("u", 0)]


def _batch(tp: tuple[str, int], deadline: float, records: bytes) -> ProducerBatch:
    b = ProducerBatch(tp[0], tp[1], 0.0)
    b.deadline = deadline
    b.encoded = bytearray(records)
    return b


_BATCHES = st.lists(
    st.builds(
        _batch,
        st.sampled_from(_TPS),
        st.sampled_from([0.0, 5.0]),
        st.binary(max_size=8),
    ),
    max_size=8,
)
# a partition's leader: a node id, an error the caller means (LogSourceError), or another value (a node
# all the same)
_LEADER = st.one_of(
    st.integers(0, 2),
    st.sampled_from([LeaderNotAvailable("no leader"), NetworkError("down")]),
    st.just("node-x"),
)


def _view(result, by_node, done):
    """What a call leaves, comparable across the two: the result, the pairs per node and the deadlines."""
    if result is not None:
        result = (result[0], type(result[1]), str(result[1]))
    pairs = {
        node: [
            (
                type(req),
                (req.topic, req.partition, bytes(req.records), req.acks, req.timeout_ms),
                type(ans),
                ans.sender,
                done.index(ans.batch),
            )
            for req, ans in calls
        ]
        if isinstance(calls, list)
        else calls
        for node, calls in by_node.items()
    }
    return result, pairs, [b.deadline for b in done]


def _run(fn, done, leaders, by_node, deadline, acks, timeout_ms):
    done, leaders, by_node = copy.deepcopy((done, leaders, by_node))
    try:
        result = fn(done, leaders, by_node, deadline, acks, timeout_ms, "the sender", LogSourceError)
    except Exception as e:  # noqa: BLE001 - compared by type
        return ("raised", type(e))
    return _view(result, by_node, done)


@needs_c
@settings(max_examples=400, deadline=None)
@given(
    done=_BATCHES,
    leaders=st.dictionaries(st.sampled_from(_TPS), _LEADER, min_size=2),
    prior=st.dictionaries(st.integers(0, 2), st.one_of(st.just([]), st.just("not a list")), max_size=2),
    deadline=st.one_of(st.floats(0, 1e9), st.none()),
    acks=st.sampled_from([0, 1, -1]),
    timeout_ms=st.integers(0, 2**31 - 1),
)
def test_the_compiled_round_calls_are_the_reference(done, leaders, prior, deadline, acks, timeout_ms):
    want = _run(sender_module.round_calls, done, leaders, prior, deadline, acks, timeout_ms)
    got = _run(_csingles.round_calls, done, leaders, prior, deadline, acks, timeout_ms)
    assert got == want


@needs_c
@pytest.mark.parametrize(
    "done",
    [
        [object()],  # not a batch: AttributeError
        "xy",  # a str's items have no deadline: AttributeError
        None,  # not iterable: TypeError
    ],
)
def test_malformed_rounds_raise_the_same_error(done):
    args = ({("t", 0): 0}, {}, 1.0, 1, 1000, "s", LogSourceError)
    errors = []
    for fn in (sender_module.round_calls, _csingles.round_calls):
        with pytest.raises(Exception) as info:  # noqa: PT011 - compared below
            fn(done, *args)
        errors.append(type(info.value))
    assert errors[0] is errors[1]


@needs_c
def test_bind_refuses_a_type_without_the_slots():
    class NoSlots:
        pass

    try:
        for args in ((NoSlots, OneBatchAnswer), (OnePartitionProduce, NoSlots)):
            with pytest.raises(TypeError, match="not a __slots__ member"):
                _csingles.bind(*args)
        # the binding is as it was: the pairs are still made right
        b = _batch(("t", 0), 0.0, b"r")
        by_node: dict = {}
        assert _csingles.round_calls([b], {("t", 0): 1}, by_node, 1.0, 1, 1000, "s", LogSourceError) is None
        ((req, ans),) = by_node[1]
        assert (req.topic, req.partition, req.records, req.acks, req.timeout_ms) == (
            "t",
            0,
            b.encoded,
            1,
            1000,
        )
        assert (ans.sender, ans.batch) == ("s", b)
    finally:
        assert _csingles.bind(OnePartitionProduce, OneBatchAnswer)
