"""A Spark task's fetch decode (issue 26): ``_crecords.arrow_run_columns`` against its reference.

* the compiled columns are ``runs.arrow_run_columns_py``'s, byte for byte, or None where it gives None,
  on generated runs of Arrow-body batches (keys present, absent or mixed, value nulls, headers,
  CreateTime and LogAppendTime, timestamps and offsets over the int64 range) and on mangled bodies;
* where it gives columns, their table is the general path's (``_run_to_arrow`` without them), and
  where the general path refuses a run (CorruptRecord), both give None;
* ``to_arrow`` over a fetch holds the same rows with and without the compiled columns.

Both implementations run in one process, so this module also runs with ``LOGSOURCE_NO_EXTENSIONS=1``
(Makefile's PURE_PYTHON_TESTS).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_logsource import format as F
from pyspark_logsource.errors import CorruptRecord
from pyspark_logsource.format import HEADER_SIZE, direct, runs, walk
from pyspark_logsource.format.header import HAS_HEADERS, HAS_KEY_NULLS, HAS_VALUE_NULLS

try:
    from pyspark_logsource.format import _crecords as cr
except ImportError:  # not built: `python scripts/build_ext.py` or `pip install -e .` builds it
    cr = None
    if os.environ.get("CI"):
        raise
    pytestmark = pytest.mark.skip(reason="the compiled core (format/_crecords) is not built")

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_I64 = st.integers(-(2**63), 2**63 - 1)
_opt = st.one_of(st.none(), st.binary(max_size=30))


@st.composite
def batch(draw, keyed: str, base: int):
    """One Arrow-body batch at ``base``; keys per ``keyed``: "all", "none" or "any"."""
    n = draw(st.integers(1, 30))
    nullable = draw(st.integers(0, 9)) == 0  # mostly the common case: no value nulls
    values = draw(st.lists(_opt if nullable else st.binary(max_size=30), min_size=n, max_size=n))
    if keyed == "none":
        keys = None
    elif keyed == "all":
        keys = draw(st.lists(st.binary(max_size=12), min_size=n, max_size=n))
    else:
        keys = draw(
            st.one_of(
                st.none(), st.lists(st.one_of(st.none(), st.binary(max_size=12)), min_size=n, max_size=n)
            )
        )
    headers = None
    if draw(st.integers(0, 9)) == 0:
        headers = draw(
            st.lists(
                st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=4), _opt), max_size=2)),
                min_size=n,
                max_size=n,
            )
        )
    ts = draw(st.one_of(_I64, st.lists(st.integers(-(2**40), 2**40), min_size=n, max_size=n)))
    b = F.encode(values, keys, ts, headers, base_offset=base)
    if draw(st.booleans()):
        F.stamp_log_append_time(b, draw(_I64))
    return b


@st.composite
def runs_of_batches(draw) -> bytearray:
    """Batches end to end at consecutive offsets, as a fetch answer holds them."""
    keyed = draw(st.sampled_from(["all", "none", "any"]))
    nxt = draw(st.one_of(st.integers(0, 2**40), st.just(2**63 - 1000)))
    out = bytearray()
    for _ in range(draw(st.integers(1, 5))):
        b = draw(batch(keyed, nxt))
        nxt += F.read_header(b).record_count
        out += b
    return out


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return len(a) == len(b) and all(
        (x is None and y is None) or (x is not None and y is not None and bytes(x) == bytes(y))
        for x, y in zip(a, b, strict=True)
    )


def _general(data: bytes | bytearray, hs) -> pa.Table:
    saved = runs._arrow_run_columns
    runs._arrow_run_columns = None
    try:
        return runs._run_to_arrow(pa.py_buffer(data), hs)
    finally:
        runs._arrow_run_columns = saved


def _check(data: bytearray, hs) -> tuple | None:
    got = cr.arrow_run_columns(pa.py_buffer(data), hs)
    ref = runs.arrow_run_columns_py(pa.py_buffer(data), hs)
    assert _same(got, ref)
    try:
        table = _general(data, hs)
    except (CorruptRecord, OverflowError):
        assert got is None  # the general path refuses the run: the compiled one leaves it to it
        return None
    if got is not None:
        runs._columns_table(got, table.num_rows).validate(full=True)
        assert runs._columns_table(got, table.num_rows).equals(table)
        assert runs._columns_table(ref, table.num_rows).equals(table)
    return got


@PROPS
@given(runs_of_batches())
def test_compiled_columns_are_the_reference_s_and_the_general_path_s(data):
    hs = runs._header_array(walk(data))
    got = _check(data, hs)
    attrs = [h.attributes for _, h in walk(data)]
    common = not any(a & (HAS_HEADERS | HAS_VALUE_NULLS) for a in attrs)
    keys = {bool(a & HAS_KEY_NULLS) for a in attrs}
    if common and keys == {False}:
        assert got is not None  # the common fetch (keys and values everywhere) takes the compiled path


@PROPS
@given(
    runs_of_batches(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4)
)
def test_mangled_bodies_give_the_reference_s_columns_or_none(data, edits):
    walked = walk(data)
    hs = runs._header_array(walked)  # the headers as walked before the bodies changed (no CRC check here)
    bodies = [p + HEADER_SIZE + i for p, h in walked for i in range(h.size - HEADER_SIZE)]
    for at, byte in edits:
        data[bodies[at % len(bodies)]] = byte
    _check(data, hs)


@PROPS
@given(runs_of_batches(), st.integers(0, 200), st.integers(0, 200))
def test_to_arrow_holds_the_same_rows_either_way(data, lo, hi):
    first = F.read_header(data).base_offset
    start, end = first + lo, first + lo + hi
    compiled = runs.to_arrow(data, start, end, fast=True)
    saved = runs._arrow_run_columns
    runs._arrow_run_columns = None
    try:
        general = runs.to_arrow(data, start, end, fast=True)
    finally:
        runs._arrow_run_columns = saved
    compiled.validate(full=True)
    assert compiled.equals(general)


def test_a_run_without_compiled_columns_leaves_the_general_path_s_error():
    b = F.encode([b"a", b"bc"], [b"k", b"l"], 0)
    hs = runs._header_array(walk(b))
    F.set_base_offset(b, 0)
    b[HEADER_SIZE + 16] = 7  # the first key offset is no longer 0
    assert cr.arrow_run_columns(pa.py_buffer(b), hs) is None
    assert runs.arrow_run_columns_py(pa.py_buffer(b), hs) is None
    with pytest.raises(CorruptRecord, match="do not start at 0"):
        _general(b, hs)


# ------------------------------------------------------------------ a direct read's pieces (format.direct)


def _pieces(data: bytearray) -> tuple | None:
    """``data``'s batches as a direct read holds them (heads, walked, keys, values), or None when a
    batch is not one it takes."""
    heads, keys, values, walked = bytearray(), bytearray(), bytearray(), []
    for pos, h in walk(data):
        a = direct.arrays_size(h)
        if a < 0:
            return None
        k, v = direct.key_value_sizes(h, data[pos + HEADER_SIZE : pos + HEADER_SIZE + a])
        assert k >= 0  # the encoder's batches fill their bodies exactly
        end = pos + HEADER_SIZE + a
        assert direct.crc_matches(h, data[pos:end], data[end : end + k], data[end + k : pos + h.size])
        walked.append((len(heads), h))
        heads += data[pos:end]
        keys += data[end : end + k]
        values += data[end + k : pos + h.size]
    return heads, walked, keys, values


def _check_direct(heads, walked, keys, values) -> tuple | None:
    hs = runs._header_array(walked)
    got = cr.arrow_run_columns(pa.py_buffer(heads), hs, keys, values)
    ref = runs.arrow_run_columns_py(pa.py_buffer(heads), hs, keys, values)
    assert _same(got, ref)
    if got is not None:
        assert got[3] is values and (got[0] is None or keys is None or got[1] is keys)  # no copies
    return got


@PROPS
@given(runs_of_batches(), st.integers(0, 200), st.integers(0, 200))
def test_batches_read_in_pieces_make_the_table_of_batches_read_whole(data, lo, hi):
    pieces = _pieces(data)
    attrs = [h.attributes for _, h in walk(data)]
    assert (pieces is None) == any(a & (HAS_HEADERS | HAS_VALUE_NULLS) for a in attrs)
    if pieces is None:
        return
    got = _check_direct(*pieces)
    # the same runs as read whole (keyed and keyless batches mixed, or a key under a keyless flag: None)
    assert (got is None) == (
        runs.arrow_run_columns_py(pa.py_buffer(data), runs._header_array(walk(data))) is None
    )
    first = F.read_header(data).base_offset
    start, end = first + lo, first + lo + hi
    if got is None:
        with pytest.raises(CorruptRecord):
            direct.direct_to_arrow(*pieces, start, end)
        return
    whole = runs.to_arrow(data, start, end)
    table = direct.direct_to_arrow(*pieces, start, end)
    table.validate(full=True)
    assert table.equals(whole)


@PROPS
@given(
    runs_of_batches(),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    st.sampled_from(["heads", "heads shorter", "keys shorter", "values shorter", "values longer"]),
)
def test_mangled_pieces_give_the_reference_s_columns_or_none(data, edits, how):
    pieces = _pieces(data)
    if pieces is None:
        return
    heads, walked, keys, values = pieces
    if how == "heads":
        arrays = [q + HEADER_SIZE + i for q, h in walked for i in range(direct.arrays_size(h))]
        for at, byte in edits:
            heads[arrays[at % len(arrays)]] = byte
    elif how == "heads shorter":
        heads = heads[: -1 - edits[0][0] % len(heads)]  # the last arrays cut short, or whole batches gone
    elif how == "keys shorter" and keys:
        keys = keys[:-1]
    elif how == "values shorter" and values:
        values = values[:-1]
    elif how == "values longer":
        values = values + b"x"
    else:
        return  # nothing to take a byte from
    got = _check_direct(heads, walked, keys, values)
    if how != "heads":
        assert got is None  # the pieces no longer hold the batches' bytes exactly


def test_a_batch_a_direct_read_does_not_take_has_no_arrays_size():
    plain = F.read_header(F.encode([b"a", b"bc"], [b"k", b"l"], 0))
    assert direct.arrays_size(plain) == 16 * 2 + 8
    keyless = F.read_header(F.encode([b"a", b"bc"], None, 0))
    assert direct.arrays_size(keyless) == 16 * 2 + 8 + 1  # the key validity bitmap
    for b in (
        F.encode([b"a", None], None, 0),  # value nulls
        F.encode([b"a"], None, 0, [[("h", b"1")]]),  # record headers
        F.encode([b"a" * 100], None, 0, codec="gzip"),
    ):
        assert direct.arrays_size(F.read_header(b)) == -1


def test_keyed_batches_of_empty_keys_read_in_pieces_without_a_key_buffer():
    """keys=None stands for no key bytes: both implementations give empty key bytes, not None."""
    data = bytearray(F.encode([b"a", b"bc"], [b"", b""], 0))
    heads, walked, keys, values = _pieces(data)
    assert keys == b""
    got = _check_direct(heads, walked, None, values)
    assert got is not None and bytes(got[1]) == b"" and got[0] is not None
    assert direct.direct_to_arrow(heads, walked, None, values).equals(runs.to_arrow(data))
