"""The sticky partitioner: compiled (client/_csticky.pxi, in _caccum) against the reference (client/partitioner.py).

Both get the same calls (``partition``, ``on_new_batch``, ``spread``, over a few
topics and partition counts, stale notices among them) and an equally seeded
``random.Random``, and must give the same partitions in the same order, and the
same exception type on bad input. Sans-IO; runs with and without
LOGSOURCE_NO_EXTENSIONS (the compiled module is imported directly).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_logsource.client.partitioner import StickyPartitioner

try:
    from pyspark_logsource.client import _caccum
except ImportError:  # not built: `python scripts/build_ext.py`
    _caccum = None

needs_c = pytest.mark.skipif(_caccum is None, reason="client._caccum is not built")

_TOPIC = st.sampled_from(["t", "u", "v"])
_N = st.integers(0, 5)  # 0: no partition to choose (a typed error from both)
_CALL = st.one_of(
    st.tuples(st.just("partition"), _TOPIC, _N),
    st.tuples(st.just("on_new_batch"), _TOPIC, st.integers(-1, 5), _N),
    st.tuples(
        st.just("spread"),
        _TOPIC,
        st.lists(st.integers(0, 300), max_size=12).map(lambda xs: np.array(xs, dtype=np.int64)),
        _N,
        st.integers(0, 600),
    ),
)


def _run(sticky, calls: list[tuple]) -> list:
    """Each call's result (a list for spread) or its exception type."""
    out: list = []
    for name, *args in calls:
        try:
            r = getattr(sticky, name)(*args)
        except Exception as e:  # the types must match, not only the values
            out.append(type(e))
            continue
        out.append(r.tolist() if isinstance(r, np.ndarray) else r)
    return out


@needs_c
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), calls=st.lists(_CALL, max_size=40))
def test_compiled_sticky_partitioner_gives_the_reference_partitions(seed: int, calls: list[tuple]) -> None:
    want = _run(StickyPartitioner(random.Random(seed)), calls)
    got = _run(_caccum.StickyPartitioner(random.Random(seed)), calls)
    assert got == want


@needs_c
def test_compiled_sticky_partitioner_moves_on_and_ignores_a_stale_notice() -> None:
    s = _caccum.StickyPartitioner(random.Random(7))
    first = s.partition("t", 4)
    assert s.partition("t", 4) == first
    nxt = s.on_new_batch("t", first, 4)
    assert nxt == (first + 1) % 4
    assert s.on_new_batch("t", first, 4) == nxt  # stale: the batch of ``first`` was already noticed
    assert s.partition("t", 2) in (0, 1)  # fewer partitions than the sticky one: a new pick below 2
    with pytest.raises(ValueError):
        s.partition("w", 0)
