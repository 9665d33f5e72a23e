"""format/_cvalidate.pyx (the produce path's records check) against the pure-Python reference.

``validate_kafka_records`` runs on three paths in the same process: the reference
(``_parse``, both compiled modules off), ``_ckafka.parse_records`` and
``_cvalidate.check_records``. On generated uncompressed Kafka-layout batches (null and
non-null keys and values, headers) and their malformed variants (bit flips, wrong
record counts, truncated or padded records sections) all give the same answer or the
same CorruptRecord; ``check_records`` returns either None or exactly the reference's
answer, and reads nothing outside the batch it was given.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_logsource.errors import CorruptRecord
from pyspark_logsource.format import encode_kafka, kafka_decode
from pyspark_logsource.format.header import HEADER_SIZE, read_header

try:
    from pyspark_logsource.format import _cvalidate as cv
except ImportError:
    cv = None
    if os.environ.get("CI"):
        raise
    pytestmark = pytest.mark.skip(reason="format/_cvalidate is not built: pure-Python path only")

PROPS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _validate(buf, header, which: str):
    """validate_kafka_records on one path: ("ok", null key?) or ("error", type, message)."""
    saved = kafka_decode.ckafka, kafka_decode.cvalidate
    compiled_parse = saved[0]
    kafka_decode.ckafka, kafka_decode.cvalidate = {
        "pure": (None, None),
        "parse": (compiled_parse, None),
        "check": (compiled_parse, cv),
    }[which]
    try:
        return ("ok", kafka_decode.validate_kafka_records(buf, 0, header))
    except CorruptRecord as e:
        return ("error", type(e), str(e))
    finally:
        kafka_decode.ckafka, kafka_decode.cvalidate = saved


_bytes = st.one_of(st.none(), st.binary(max_size=40))


@st.composite
def batches(draw) -> bytes:
    n = draw(st.integers(1, 6))
    values = [draw(_bytes) for _ in range(n)]
    keys = [draw(_bytes) for _ in range(n)]
    hdrs = [
        draw(st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=5), _bytes), max_size=3)))
        for _ in range(n)
    ]
    return bytes(encode_kafka(values, keys, headers=hdrs))


@st.composite
def mangled(draw) -> tuple[bytearray, object]:
    buf = bytearray(draw(batches()))
    h = read_header(buf, 0)
    how = draw(st.sampled_from(["flip", "count", "cut", "pad", "byte"]))
    if how == "flip":
        i = draw(st.integers(HEADER_SIZE, len(buf) - 1))
        buf[i] ^= 1 << draw(st.integers(0, 7))
    elif how == "byte":
        buf[draw(st.integers(HEADER_SIZE, len(buf) - 1))] = draw(
            st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF])
        )
    elif how == "count":
        h = h._replace(record_count=h.record_count + draw(st.sampled_from([-1, 1, 2, -5])))
    elif how == "cut":
        cut = draw(st.integers(1, len(buf) - HEADER_SIZE))
        del buf[len(buf) - cut :]
        h = h._replace(batch_length=h.batch_length - cut)
    else:
        extra = draw(st.binary(min_size=1, max_size=4))
        buf += extra
        h = h._replace(batch_length=h.batch_length + len(extra))
    return buf, h


@PROPS
@given(batches())
def test_generated_batches_same_answer_on_every_path(buf: bytes) -> None:
    h = read_header(buf, 0)
    pure = _validate(buf, h, "pure")
    assert pure[0] == "ok"
    assert cv.check_records(buf, 0, h.size, h.record_count) == pure[1]
    assert _validate(buf, h, "check") == _validate(buf, h, "parse") == pure


@PROPS
@given(mangled())
def test_malformed_batches_same_answer_or_same_error(case) -> None:
    buf, h = case
    pure = _validate(bytes(buf), h, "pure")
    fast = cv.check_records(bytes(buf), 0, h.size, h.record_count) if h.size <= len(buf) else None
    if fast is not None:  # what the compiled check accepts, the reference accepts with the same answer
        assert pure == ("ok", fast)
    assert _validate(bytes(buf), h, "check") == pure


def test_null_keys_are_reported() -> None:
    buf = bytes(encode_kafka([b"a", b"b"], [b"k", None]))
    h = read_header(buf, 0)
    assert cv.check_records(buf, 0, h.size, h.record_count) is True
    buf = bytes(encode_kafka([b"a"], [b"k"]))
    assert cv.check_records(buf, 0, len(buf), 1) is False


def test_arguments_outside_the_buffer_are_refused() -> None:
    buf = bytes(encode_kafka([b"a"], [b"k"]))
    n = len(buf)
    assert cv.check_records(buf, 0, n + 1, 1) is None
    assert cv.check_records(buf, 1, n, 1) is None
    assert cv.check_records(buf, -1, n, 1) is None
    assert cv.check_records(buf, 0, HEADER_SIZE - 1, 1) is None
    assert cv.check_records("not a buffer", 0, n, 1) is None
    assert cv.check_records(b"x" * 10 + buf, 10, n, 1) is False  # a batch inside a larger run


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(mangled())
def test_no_read_past_the_batch(case) -> None:
    from test_format_compiled import guarded  # a view whose last byte is the last readable one

    buf, h = case
    with guarded(bytes(buf)) as mv:
        # the record lengths claim more than is there (a cut or flipped batch): refused, never a fault
        assert cv.check_records(mv, 0, len(mv), h.record_count) in (None, True, False)
        if h.size <= len(mv):
            fast = cv.check_records(mv, 0, h.size, h.record_count)
            assert fast is None or _validate(bytes(buf), h, "pure") == ("ok", fast)
