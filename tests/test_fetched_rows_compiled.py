"""poll()'s compiled path (issue 25): Messages straight from fetched Arrow-body bytes, against the reference.

* ``crecords.batch_rows`` gives the descriptor ``fetched.batch_rows_py`` gives, or None where it does
  (another kind of batch, a body ``decode_arrow`` refuses), on generated batches (null and present keys
  and values, CreateTime and LogAppendTime, timestamps over the int64 range) and on mangled bodies;
* ``crecords.arrow_messages`` gives ``fetched.arrow_messages_py``'s Messages for any row range, and the
  same ValueError for a range outside the batch;
* ``_Fetched.take`` over the descriptors (compiled) and over the Arrow table (the Python path) give the
  same Messages, positions and ends for any sequence of takes from any position; what the compiled path
  does not take (headers, compression, Kafka's layout, a body it refuses, a CRC mismatch) is the table
  path's, with its typed error.

Both implementations run in one process, so this module also runs with ``LOGSOURCE_NO_EXTENSIONS=1``
(Makefile's PURE_PYTHON_TESTS).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_logsource import format as F
from pyspark_logsource.client import fetched
from pyspark_logsource.client.fetched import Message, _Fetched, arrow_messages_py, kafka_messages_py
from pyspark_logsource.errors import CorruptRecord
from pyspark_logsource.format import HEADER_SIZE, walk
from pyspark_logsource.format.kafka_encode import encode_kafka
from pyspark_logsource.format.rows import batch_rows_py, kafka_rows_py

try:
    from pyspark_logsource.format import _crecords as cr
except ImportError:  # not built: `python scripts/build_ext.py` or `pip install -e .` builds it
    cr = None
    if os.environ.get("CI"):
        raise
    pytestmark = pytest.mark.skip(reason="the compiled core (format/_crecords) is not built")

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_opt = st.one_of(st.none(), st.binary(max_size=40))
_I64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def batches(draw, min_size: int = 1, kafka: bool | None = False):
    """One batch: an Arrow body, or Kafka's record layout (``kafka``; None: either)."""
    values = draw(st.lists(_opt, min_size=min_size, max_size=40))
    n = len(values)
    keys = draw(st.one_of(st.none(), st.lists(_opt, min_size=n, max_size=n)))
    ts = draw(st.one_of(_I64, st.lists(st.integers(-(2**40), 2**40), min_size=n, max_size=n)))
    log_append = draw(st.booleans())
    base = draw(st.integers(0, 2**40))
    if kafka is None:
        kafka = draw(st.booleans())
    b = (encode_kafka if kafka else F.encode)(values, keys, ts, base_offset=base)
    if log_append:
        F.stamp_log_append_time(b, draw(_I64))
    return b


def fetch_of(bs: list[bytearray], cut: int = 0) -> memoryview:
    """Batches end to end at consecutive offsets (as a fetch answer), the last ``cut`` bytes cut off."""
    out = bytearray()
    nxt = 0
    for b in bs:
        F.set_base_offset(b, nxt)
        nxt += F.read_header(b).record_count
        out += b
    return memoryview(out[: len(out) - cut])


def _messages_table(data, position: int, limits: list[int], check_crc: bool = True):
    """(messages, positions, ends) of takes through the Arrow table (the Python path)."""
    saved = fetched.crecords
    fetched.crecords = None
    try:
        return _takes(_Fetched(0, data, 0, check_crc), position, limits)
    finally:
        fetched.crecords = saved


def _messages_spans(data, position: int, limits: list[int], check_crc: bool = True):
    saved = fetched.crecords
    fetched.crecords = cr
    try:
        f = _Fetched(0, data, 0, check_crc)
        got = _takes(f, position, limits)
        return got, f.spans is not None
    finally:
        fetched.crecords = saved


def _takes(f: _Fetched, position: int, limits: list[int]):
    out = []
    for limit in limits:
        part, position, done = f.take(position, limit)
        if isinstance(part, fetched.RowSpans):
            msgs: list = []
            part.messages("t", 3, msgs)
        else:
            msgs = fetched._messages_py("t", 3, part, Message)
        assert len(msgs) == part.num_rows
        out.append((msgs, position, done))
        if done:
            break
    return out


@PROPS
@given(batches())
def test_descriptors_are_the_reference_s(b):
    ((pos, h),) = walk(b)
    d = cr.batch_rows(b, pos, h)
    assert d is not None
    assert d == batch_rows_py(b, pos, h)
    assert all(type(x) is int for x in d[:3] + d[4:]) and type(d[3]) is bool


@PROPS
@given(batches(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4))
def test_mangled_bodies_give_the_reference_s_descriptor_or_none(b, edits):
    ((pos, h),) = walk(b)
    body = len(b) - HEADER_SIZE
    for at, byte in edits:
        b[HEADER_SIZE + at % body] = byte
    d = cr.batch_rows(b, pos, h)
    assert d == batch_rows_py(b, pos, h)
    try:
        F.decode_arrow(b, pos, check_crc=False)
    except CorruptRecord:
        assert d is None  # the table path raises: the compiled path leaves it the bytes
    else:
        assert d is not None
        out_c: list = []
        out_py: list = []
        cr.arrow_messages(b, d, 0, d[2], Message, "t", 0, (), out_c)
        arrow_messages_py(b, d, 0, d[2], Message, "t", 0, (), out_py)
        assert out_c == out_py


@PROPS
@given(batches(), st.integers(-3, 45), st.integers(-3, 45))
def test_messages_are_the_reference_s(b, lo, hi):
    ((pos, h),) = walk(b)
    d = cr.batch_rows(b, pos, h)
    got = []
    for fn in (cr.arrow_messages, arrow_messages_py):
        out: list = []
        try:
            fn(b, d, lo, hi, Message, "t", 7, (), out)
        except ValueError:
            got.append(ValueError)
        else:
            got.append(out)
    assert got[0] == got[1]
    if got[0] is not ValueError:
        assert all(type(m) is Message for m in got[0])
        assert [m.offset for m in got[0]] == list(range(h.base_offset + lo, h.base_offset + hi))


@PROPS
@given(batches(), st.integers(0, 12), st.integers(-(10**6), 10**6))
def test_a_broken_descriptor_is_refused_before_any_byte_is_read(b, field, shift):
    """``arrow_messages`` reads the descriptor's fields without bounds checks: a short one, None, or
    positions moved past the batch's end give ValueError/TypeError, never a read outside the bytes."""
    ((pos, h),) = walk(b)
    d = cr.batch_rows(b, pos, h)
    for bad in (d[:field], d + (0,)):
        with pytest.raises(ValueError):
            cr.arrow_messages(b, bad, 0, d[2], Message, "t", 0, (), [])
    with pytest.raises(TypeError):
        cr.arrow_messages(b, None, 0, d[2], Message, "t", 0, (), [])
    if field in (6, 7) and d[field] >= 0:  # a validity bitmap moved past the end
        moved = d[:field] + (len(b) - (d[2] + 7) // 8 + 1 + abs(shift),) + d[field + 1 :]
        with pytest.raises(ValueError):
            cr.arrow_messages(b, moved, 0, d[2], Message, "t", 0, (), [])


@PROPS
@given(
    st.lists(batches(kafka=None), min_size=1, max_size=5),
    st.integers(0, 300),
    st.lists(st.integers(1, 70), min_size=1, max_size=12),
    st.integers(0, 80),
    st.booleans(),
)
def test_takes_are_the_table_path_s(bs, position, limits, cut, crc):
    data = fetch_of(bs, cut)
    want = _messages_table(data, position, limits, crc)
    got, indexed = _messages_spans(data, position, limits, crc)
    assert got == want
    assert indexed


def test_other_batches_take_the_table_path_with_its_errors():
    v = [b"a", None, b"ccc"]
    with_headers = F.encode(v, headers=[[("h", b"x")], None, None])
    compressed = F.encode(v * 30, codec="gzip")
    kafka_headers = encode_kafka(v, headers=[None, [("h", b"x")], None])
    kafka_compressed = encode_kafka(v * 30, codec="gzip")
    compacted = encode_kafka(v)
    compacted[23:27] = (5).to_bytes(4, "big")  # last offset delta 5 over 3 records (CRC checks off)
    for bs in (
        [with_headers],
        [compressed],
        [kafka_headers],
        [kafka_compressed],
        [F.encode(v), kafka_headers],
        [compacted],
    ):
        data = fetch_of([bytearray(b) for b in bs])
        want = _messages_table(data, 0, [2, 50], False)
        got, indexed = _messages_spans(data, 0, [2, 50], False)
        assert got == want and not indexed
    for bs in ([encode_kafka(v)], [F.encode(v), encode_kafka(v)]):  # Kafka's layout without headers: indexed
        data = fetch_of(bs)
        want = _messages_table(data, 0, [2, 50])
        got, indexed = _messages_spans(data, 0, [2, 50])
        assert got == want and indexed
    bad_crc = F.encode(v)
    bad_crc[-1] ^= 1
    refused = F.encode(v)
    refused[HEADER_SIZE + 3 * 8] = 9  # the key offsets no longer start at 0 (CRC checks off)
    kafka_bad_crc = encode_kafka(v)
    kafka_bad_crc[-1] ^= 1
    kafka_refused = encode_kafka(v)
    kafka_refused[HEADER_SIZE] = 0x7F  # the first record's length runs past the batch
    for b, crc in ((bad_crc, True), (refused, False), (kafka_bad_crc, True), (kafka_refused, False)):
        data = fetch_of([bytearray(b)])
        with pytest.raises(CorruptRecord) as want:
            _messages_table(data, 0, [5], crc)
        with pytest.raises(CorruptRecord) as got:
            _messages_spans(data, 0, [5], crc)
        assert str(got.value) == str(want.value)


def test_a_fetch_without_whole_batches_takes_nothing():
    data = fetch_of([F.encode([b"x" * 100])], cut=10)
    assert _messages_spans(data, 0, [5]) == ([([], 0, True)], True)
    assert _messages_table(data, 0, [5]) == [([], 0, True)]


def test_an_answer_decoded_for_poll_arrow_after_poll_took_part_of_it_goes_on_from_the_table():
    # poll() took rows through the descriptors; a poll_arrow() then decoded the answer (the partition
    # was paused, so not taken): the next poll() goes on through the table, from the same position
    data = fetch_of([F.encode([b"a", b"b", b"c"]), F.encode([b"d", None])])
    want = _messages_table(data, 0, [2, 2, 9])
    saved = fetched.crecords
    fetched.crecords = cr
    try:
        f = _Fetched(0, data, 0, True)
        first = _takes(f, 0, [2])
        f.decode()
        rest = _takes(f, first[-1][1], [2, 9])
    finally:
        fetched.crecords = saved
    assert first + rest == want


def test_control_compressed_and_header_batches_get_no_descriptor():
    b = F.encode([b"a", b"b"])
    ((pos, h),) = walk(b)
    assert cr.batch_rows(b, pos, h) == batch_rows_py(b, pos, h) is not None
    for bit in (0x20, 0x400, 0x01):  # control, headers, gzip
        other = h._replace(attributes=h.attributes | bit)
        assert cr.batch_rows(b, pos, other) is None and batch_rows_py(b, pos, other) is None


@PROPS
@given(batches(kafka=True))
def test_kafka_descriptors_are_the_reference_s(b):
    ((pos, h),) = walk(b)
    d = cr.kafka_rows(b, pos, h)
    assert d is not None
    assert d == kafka_rows_py(b, pos, h)
    assert all(type(x) is int for x in d[:3] + d[4:]) and type(d[3]) is bool
    assert cr.batch_rows(b, pos, h) is None and batch_rows_py(b, pos, h) is None


@PROPS
@given(
    batches(kafka=True),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_mangled_kafka_records_give_the_reference_s_descriptor_or_none(b, edits):
    ((pos, h),) = walk(b)
    body = len(b) - HEADER_SIZE
    for at, byte in edits:
        b[HEADER_SIZE + at % body] = byte
    d = cr.kafka_rows(b, pos, h)
    assert d == kafka_rows_py(b, pos, h)
    try:
        t = F.decode_kafka(b, pos, check_crc=False).records()
    except CorruptRecord:
        assert d is None  # the table path raises: the compiled path leaves it the bytes
    else:
        assert (d is None) == any(r.headers for r in t)
    if d is not None:
        out_c: list = []
        out_py: list = []
        cr.kafka_messages(b, d, 0, d[2], Message, "t", 0, (), out_c)
        kafka_messages_py(b, d, 0, d[2], Message, "t", 0, (), out_py)
        assert out_c == out_py


@PROPS
@given(batches(kafka=True), st.integers(-3, 45), st.integers(-3, 45))
def test_kafka_messages_are_the_reference_s(b, lo, hi):
    ((pos, h),) = walk(b)
    d = cr.kafka_rows(b, pos, h)
    got = []
    for fn in (cr.kafka_messages, kafka_messages_py):
        out: list = []
        try:
            fn(b, d, lo, hi, Message, "t", 7, (), out)
        except ValueError:
            got.append(ValueError)
        else:
            got.append(out)
    assert got[0] == got[1]
    if got[0] is not ValueError:
        assert all(type(m) is Message for m in got[0])
        assert [m.offset for m in got[0]] == list(range(h.base_offset + lo, h.base_offset + hi))


@PROPS
@given(batches(kafka=True), st.integers(0, 6), st.integers(-(10**6), 10**6))
def test_a_broken_kafka_descriptor_is_refused_before_any_byte_is_read(b, field, shift):
    """``kafka_messages`` reads the descriptor's fields without bounds checks: a short one, None, or
    the records' span moved outside the bytes give ValueError/TypeError, never a read outside them."""
    ((pos, h),) = walk(b)
    d = cr.kafka_rows(b, pos, h)
    for bad in (d[:field], d + (0,)):
        with pytest.raises(ValueError):
            cr.kafka_messages(b, bad, 0, d[2], Message, "t", 0, (), [])
    with pytest.raises(TypeError):
        cr.kafka_messages(b, None, 0, d[2], Message, "t", 0, (), [])
    for moved in (d[:5] + (-1 - abs(shift),) + d[6:], d[:6] + (len(b) + 1 + abs(shift),)):
        with pytest.raises(ValueError):
            cr.kafka_messages(b, moved, 0, d[2], Message, "t", 0, (), [])
    if shift:  # the start moved inside the bytes: a record misread is refused, or rows as parsed there
        moved = d[:5] + (min(max(d[5] + shift % 50, 0), d[6]),) + d[6:]
        try:
            cr.kafka_messages(b, moved, 0, d[2], Message, "t", 0, (), [])
        except ValueError:
            pass


def test_kafka_control_compressed_and_compacted_batches_get_no_descriptor():
    b = encode_kafka([b"a", b"b"])
    ((pos, h),) = walk(b)
    assert cr.kafka_rows(b, pos, h) == kafka_rows_py(b, pos, h) is not None
    for bit in (0x20, 0x01):  # control, gzip
        other = h._replace(attributes=h.attributes | bit)
        assert cr.kafka_rows(b, pos, other) is None and kafka_rows_py(b, pos, other) is None
    gap = h._replace(last_offset_delta=5)
    assert cr.kafka_rows(b, pos, gap) is None and kafka_rows_py(b, pos, gap) is None
