"""The compiled core (format/_ckafka.pyx) against the pure-Python reference (issue 25).

Both implementations run in the same process on the same input: the Python
path is selected by setting the modules' ``ckafka`` to None for one call. They
must give identical results (walked headers, decoded Arrow tables) or the same
typed error with the same message, on generated input and on the malformed
cases the fuzz tests use (tests/test_format_kafka.py, test_format_props.py).
The compiled functions are also called directly: each returns None exactly
when the Python code raises, and reads nothing past its buffer (buffers that
end at a PROT_NONE page).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
import warnings
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_logsource import format as F
from pyspark_logsource.errors import CorruptRecord, MessageTooLarge, UnsupportedCompressionType
from pyspark_logsource.format import _speedups, header, kafka_decode
from pyspark_logsource.format import compression as C
from pyspark_logsource.format.crc import crc32c

try:
    from pyspark_logsource.format import _ckafka as ck
except ImportError:  # not built: `python setup.py build_ext --inplace` or `pip install -e .` builds it
    ck = None
    if os.environ.get("CI"):
        raise  # CI builds the extension: a missing one is a failure there, not a skip
    pytestmark = pytest.mark.skip(
        reason="the compiled core (pyspark_logsource/format/_ckafka) is not built: pure-Python path only"
    )

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ERRORS = (CorruptRecord, MessageTooLarge, UnsupportedCompressionType, OverflowError)
_MODULES = (header, kafka_decode)


def _run(fn, compiled: bool):
    """``fn()`` on one implementation: ("ok", result) or ("error", type, message)."""
    saved = [m.ckafka for m in _MODULES]
    for m in _MODULES:
        m.ckafka = ck if compiled else None
    try:
        return ("ok", fn())
    except ERRORS as e:
        return ("error", type(e), str(e))
    finally:
        for m, s in zip(_MODULES, saved, strict=True):
            m.ckafka = s


def _same(fn, key=lambda r: r) -> object:
    """Run ``fn`` both ways; assert identical outcomes; return the Python one."""
    py, co = _run(fn, False), _run(fn, True)
    if py[0] == "ok" and co[0] == "ok":
        assert key(co[1]) == key(py[1])
    else:
        assert co == py
    return py


def _table_key(t: pa.Table):
    t.validate(full=True)
    i = t.schema.get_field_index("timestamp")
    return (t.schema, t.set_column(i, "timestamp", t.column(i).cast(pa.int64())).to_pydict())


def _reseal(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return buf


def _kafka_with_records(records: bytes, n: int, codec: int = 0, lod: int | None = None) -> bytearray:
    buf = bytearray(F.HEADER_SIZE) + records
    lod = n - 1 if lod is None else lod
    F.HEADER.pack_into(buf, 0, 0, len(buf) - 12, 0, F.MAGIC, 0, codec, lod, 1000, 2000, -1, -1, -1, n)
    return _reseal(buf)


def _all_paths(buf) -> None:
    """Every public entry point that reaches the compiled code, both ways."""
    b = bytes(buf)
    _same(lambda: F.walk(b, check_crc=True))
    _same(lambda: F.walk(b, check_crc=True, strict=True))
    _same(lambda: F.walk(b, check_crc=False, max_size=300))
    errs_py: list = []
    errs_co: list = []
    py = _run(lambda: F.walk(b, check_crc=True, errors=errs_py), False)
    co = _run(lambda: F.walk(b, check_crc=True, errors=errs_co), True)
    assert co == py and [repr(e) for e in errs_co] == [repr(e) for e in errs_py]
    _same(lambda: F.to_arrow(b), _table_key)
    _same(lambda: F.to_arrow(b, include_control=True), _table_key)
    _same(lambda: [r for d in F.decode_all(b) for r in d.records()])


# ---------------------------------------------------------------- generated input

maybe_blob = st.none() | st.binary(max_size=40)
header_list = st.lists(st.tuples(st.text(max_size=6), maybe_blob), max_size=3)


@st.composite
def kafka_batch(draw, max_records: int = 12) -> bytearray:
    n = draw(st.integers(1, max_records))
    values = draw(st.lists(maybe_blob, min_size=n, max_size=n))
    keys = draw(st.none() | st.lists(maybe_blob, min_size=n, max_size=n))
    headers = draw(st.none() | st.lists(st.none() | header_list, min_size=n, max_size=n))
    ts = draw(st.lists(st.integers(-(2**62), 2**62), min_size=n, max_size=n) | st.integers(0, 2**45))
    return F.encode_kafka(
        values,
        keys,
        ts,
        headers,
        codec=draw(st.sampled_from(["none", "none", "gzip", "lz4", "zstd"])),
        timestamp_type=draw(st.sampled_from([0, 0, 1])),
        base_offset=draw(st.integers(0, 2**40)),
        transactional=draw(st.booleans()),
    )


@st.composite
def fetch(draw) -> bytes:
    """Kafka-layout batches (some control), an Arrow-body one now and then, maybe a partial tail."""
    parts = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["kafka", "kafka", "kafka", "arrow", "control"]))
        if kind == "kafka":
            parts.append(bytes(draw(kafka_batch())))
        elif kind == "arrow":
            parts.append(bytes(F.encode(draw(st.lists(maybe_blob, min_size=1, max_size=5)))))
        else:
            parts.append(bytes(F.encode_kafka([b""], control=True, transactional=True)))
    buf = b"".join(parts)
    if draw(st.booleans()):
        buf = buf[: draw(st.integers(0, len(buf)))]
    return buf


@PROPS
@given(fetch())
def test_generated_fetches_decode_identically(buf):
    _all_paths(buf)


@PROPS
@given(fetch(), st.data())
def test_mutated_fetches_give_the_same_results_or_errors(buf, data):
    b = bytearray(buf)
    if b:
        for _ in range(data.draw(st.integers(1, 4))):
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 255))
    _all_paths(b)


@PROPS
@given(kafka_batch(), st.data())
def test_mutated_bodies_with_valid_crc_give_the_same_results_or_errors(buf, data):
    """Bytes overwritten after the header, CRC recomputed: only the record checks can tell."""
    for _ in range(data.draw(st.integers(1, 4))):
        buf[data.draw(st.integers(21, len(buf) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        delta = data.draw(st.integers(-min(20, len(buf) - F.HEADER_SIZE), 20))
        buf = (
            buf[: len(buf) + delta]
            if delta < 0
            else buf + bytes(data.draw(st.binary(min_size=delta, max_size=delta)))
        )
        struct.pack_into(">i", buf, 8, len(buf) - 12)
    _all_paths(_reseal(buf))
    _same(lambda: F.validate_kafka_records(buf))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_random_garbage(garbage):
    _all_paths(garbage)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200), st.integers(1, 10), st.integers(0, 4))
def test_garbage_records_behind_a_valid_header(records, n, codec):
    _all_paths(_kafka_with_records(records, n, codec))


# ---------------------------------------------------------------- records built field by field


def _varint(v: int, overlong: int = 0) -> bytes:
    """Zigzag varint of ``v`` (64-bit), padded with ``overlong`` redundant continuation bytes."""
    u = ((v << 1) ^ (v >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    if overlong:
        out += bytes([u | 0x80] + [0x80] * (overlong - 1))
        u = 0
    out.append(u)
    return bytes(out)


small = st.integers(-3, 300)
edge = st.sampled_from([-(2**63), -(2**31) - 1, -(2**31), -2, -1, 2**31 - 1, 2**31, 2**35, 2**63 - 1])
field = small | edge


@st.composite
def record(draw, i: int) -> bytes:
    """One record, usually well-formed, each field sometimes wrong (lengths, counts, varints)."""
    key = draw(st.none() | st.binary(max_size=8))
    value = draw(st.none() | st.binary(max_size=8))
    hdrs = draw(st.lists(st.tuples(st.binary(max_size=4), st.none() | st.binary(max_size=4)), max_size=2))
    bad = draw(st.sampled_from([None] * 6 + ["ts", "od", "kl", "vl", "hc", "hk", "hv", "attrs", "tail"]))
    ov = draw(st.integers(0, 6))

    def pick(name: str, good: int) -> bytes:
        return _varint(draw(field), ov) if bad == name else _varint(good)

    body = b"" if bad == "attrs" else b"\x00"
    body += _varint(draw(st.integers(-(2**40), 2**40)), ov if bad == "ts" else 0)
    body += pick("od", i)
    body += pick("kl", -1 if key is None else len(key)) + (key or b"")
    body += pick("vl", -1 if value is None else len(value)) + (value or b"")
    body += pick("hc", len(hdrs))
    for k, v in hdrs:
        body += pick("hk", len(k)) + k + pick("hv", -1 if v is None else len(v)) + (v or b"")
    if bad == "tail":
        body += b"\x00"
    length = draw(field) if draw(st.integers(0, 9)) == 0 else len(body)
    return _varint(length, draw(st.sampled_from([0, 0, 0, 1, 5]))) + body


@st.composite
def records_section(draw) -> tuple[bytes, int, int]:
    n = draw(st.integers(1, 6))
    recs = [draw(record(i)) for i in range(n)]
    claimed = n + draw(st.sampled_from([0, 0, 0, -1, 1]))
    cut = draw(st.sampled_from([0, 0, 0, 1, 3]))
    data = b"".join(recs)
    return (data[: len(data) - cut] if cut else data), max(claimed, 1), n


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records_section())
def test_field_by_field_records_accepted_exactly_when_the_reference_accepts(section):
    data, count, _ = section
    _all_paths(_kafka_with_records(data, count))
    _same(lambda: F.validate_kafka_records(_kafka_with_records(data, count)))
    # the compiled parse directly, over a buffer that ends at an unreadable page
    with guarded(data) as mv:
        got = _parse_direct(mv, [len(data)], [count], [count - 1], True)
    try:
        kafka_decode._parse([data], [count])
        accepted = True
    except (CorruptRecord, OverflowError):
        accepted = False
    assert (got is not None) == accepted


@st.composite
def compacted(draw) -> tuple[bytes, int, int]:
    """A compacted batch: offset deltas increasing with gaps (sometimes not), last offset delta beyond."""
    n = draw(st.integers(1, 6))
    deltas = sorted(draw(st.sets(st.integers(0, 20), min_size=n, max_size=n)))
    if draw(st.integers(0, 4)) == 0:
        deltas[draw(st.integers(0, n - 1))] = draw(st.integers(-2, 25))
    recs = []
    for od in deltas:
        body = b"\x00" + _varint(0) + _varint(od) + _varint(1) + b"k" + _varint(2) + b"vv" + _varint(0)
        recs.append(_varint(len(body)) + body)
    lod = max(max(deltas), n - 1) + draw(st.integers(0, 3))
    return b"".join(recs), n, lod


@PROPS
@given(compacted())
def test_compacted_batches_with_gaps(args):
    data, n, lod = args
    _all_paths(_kafka_with_records(data, n, lod=lod))


# ---------------------------------------------------------------- the fuzz tests' fixed cases


def test_the_hostile_cases_of_test_format_kafka():
    good = F.encode_kafka([b"abc", b"def"], [b"k", None], 10, [[("h", b"v")], None])
    records = bytes(good[F.HEADER_SIZE :])
    bad = [
        _kafka_with_records(records, 3),
        _kafka_with_records(records, 1),
        _kafka_with_records(records[:-1], 2),
        _kafka_with_records(records + b"\x00", 2),
        _kafka_with_records(b"\xff\xff\xff\xff\xff\xff", 1),
        _kafka_with_records(b"\x01", 1),
        _kafka_with_records(b"\x0c\x00\x00\x02\x01\x01\x00", 1),
        _kafka_with_records(b"\x0c\x00\x00\x00\x7e\x01\x00", 1),
        _kafka_with_records(b"x", 1, 5),  # unknown codec
    ]
    for codec in (C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD):
        bad.append(_kafka_with_records(b"not compressed at all", 1, codec))
    bad.append(_kafka_with_records(zlib.compress(b"\x00" * (1 << 20), 9), 1, C.GZIP))
    for b in bad:
        _all_paths(b)
        py = _same(lambda b=b: F.validate_kafka_records(b, max_uncompressed=1 << 16))
        assert py[0] == "error"
        assert _same(lambda b=b: F.to_arrow(bytes(b)), _table_key)[0] == "error"


def test_header_errors_name_the_same_batch():
    """A bad batch after good ones: the same error (type and message) from both walks."""
    good = bytes(F.encode_kafka([b"a", b"b"]))
    # magic, batch length, record count, last offset delta (CRC), attributes, CRC
    for offset, value in [(16, 1), (11, 0), (60, 0), (26, 5), (21, 0x80), (17, good[17] ^ 0xFF)]:
        bad = bytearray(good)
        bad[offset] = value
        buf = good + good + bytes(bad)
        py = _same(lambda buf=buf: F.walk(buf, check_crc=True))
        assert py[0] == "error"
    too_big = good * 3
    assert _same(lambda: F.walk(too_big, max_size=len(good) - 1))[1] is MessageTooLarge
    assert _same(lambda: F.walk(too_big + good[:30], strict=True))[1] is CorruptRecord
    assert len(_same(lambda: F.walk(too_big + good[:70]))[1]) == 3


def test_log_append_time_and_headers_and_nulls():
    buf = F.encode_kafka(
        [b"v", None, b""],
        [None, b"k", b""],
        [5, 6, 7],
        [[("h", b"v"), ("\u00e9", None)], None, []],
        timestamp_type=1,
    )
    F.stamp_log_append_time(buf, 123456)
    py = _same(lambda: F.to_arrow(bytes(buf)), _table_key)
    assert py[1].column("timestamp").cast(pa.int64()).to_pylist() == [123456] * 3
    # a header key that is not UTF-8 is refused the same way
    bad = bytearray(F.encode_kafka([b"v"], headers=[[("ab", b"v")]]))
    i = bytes(bad).index(b"ab")
    bad[i] = 0xFF
    assert _same(lambda: F.to_arrow(bytes(_reseal(bad))), _table_key)[1] is CorruptRecord


def test_kafka_python_batches_decode_identically():
    builder_mod = pytest.importorskip("kafka.record.default_records")
    for codec in (0, 1, 3, 4):
        b = builder_mod.DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 20)
        for i in range(50):
            b.append(
                i,
                1_700_000_000_000 + i,
                b"k%d" % i if i % 3 else None,
                b"v" * i,
                [("h", b"x")] if i % 7 == 0 else [],
            )
        _all_paths(bytes(b.build()) * 2)


# ---------------------------------------------------------------- no read past a buffer

_PAGE = mmap.PAGESIZE


class guarded:
    """A read-only view of ``data`` whose last byte is the last readable one: reading past it faults."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __enter__(self) -> memoryview:
        pages = (len(self.data) + _PAGE - 1) // _PAGE + 1
        self.m = mmap.mmap(-1, (pages + 1) * _PAGE)
        self.c = ctypes.c_char.from_buffer(self.m)
        end = pages * _PAGE
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.mprotect(ctypes.c_void_p(ctypes.addressof(self.c) + end), _PAGE, 0) == 0
        start = end - len(self.data)
        self.m[start:end] = self.data
        self.mv = memoryview(self.m)[start:end]
        return self.mv

    def __exit__(self, *exc) -> None:
        self.mv.release()
        del self.c
        self.m.close()


def _parse_direct(data, ends, counts, lods, consecutive):
    k = len(counts)
    z = np.zeros(k, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    starts = np.zeros(len(e), dtype=np.int64)
    starts[1:] = e[:-1]
    return ck.parse_records(
        data,
        starts,
        e,
        np.asarray(counts, dtype=np.int64),
        np.asarray(lods, dtype=np.int64),
        consecutive,
        z,
        z,
        z,
        np.zeros(k, dtype=np.uint8),
    )


@settings(max_examples=300, deadline=None)
@given(fetch(), st.data())
def test_no_read_past_the_buffer(buf, data):
    """Truncated fetches and huge claimed lengths at a page's end: the walk and parse stay inside."""
    b = bytearray(buf)
    if b and data.draw(st.booleans()):
        b[data.draw(st.integers(0, len(b) - 1))] = 0xFF
    with guarded(bytes(b)) as mv:
        for check in (False, True):
            got = ck.walk(mv, F.BatchHeader, crc32c, check, 1 << 62, False)
            assert got is None or got == _run(lambda check=check: F.walk(bytes(b), check_crc=check), False)[1]
    # a records section claiming a huge record / key / header count, ending at the page
    for tail in (_varint(2**30), b"\x02\x00" + _varint(0) + _varint(0) + _varint(2**30), b"\xff" * 4):
        with guarded(bytes(b[:8]) + tail) as mv:
            assert _parse_direct(mv, [len(mv)], [1], [0], True) is None


def test_inconsistent_arguments_are_refused():
    data = bytes(F.encode_kafka([b"a"])[F.HEADER_SIZE :])
    assert _parse_direct(data, [len(data) + 1], [1], [0], True) is None  # section past the buffer
    z = np.zeros(1, dtype=np.int64)
    one = np.ones(1, dtype=np.int64)
    for starts, ends in (([-1], [len(data)]), ([2], [1]), ([0], [len(data)] * 2)):
        s, e = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
        assert ck.parse_records(data, s, e, one, z, True, z, z, z, np.zeros(1, dtype=np.uint8)) is None
    assert _parse_direct(data, [len(data)], [-1], [0], True) is None
    assert _parse_direct(data, [len(data)], [10**9], [0], True) is None
    assert ck.walk(np.zeros(70, dtype=np.int32), F.BatchHeader, crc32c, True, 1 << 62, False) is None
    assert ck.walk(b"", F.BatchHeader, crc32c, True, 1 << 62, False) == []


def test_implementation_switch():
    assert _speedups.IMPLEMENTATION == ("python" if _speedups.DISABLED else "compiled")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=5000))
def test_the_walks_c_level_crc_is_crc32c(data):
    """The crc32c package's C function the walk calls directly (when wired) gives crc32c()'s values."""
    got = ck.crc32c_direct(data)
    assert got is None or got == crc32c(data)


# ---------------------------------------------------------------- one compiled call per fetch answer


def _parsed_key(r):
    return None if r is None else [x.tolist() if isinstance(x, np.ndarray) else x for x in r]


@PROPS
@given(fetch(), st.data())
def test_parse_walked_is_the_reference_parse_of_plain_runs(buf, data):
    """``parse_walked`` (the header fields read in C from the walk) gives ``_parse_compiled``'s result for
    runs of uncompressed, non-control Kafka-layout batches, None for any other run; ``to_arrow`` and the
    consumer's ``records_to_arrow`` (which take it) decode every fetch as the pure-Python path does."""
    from pyspark_logsource.client.fetched import records_to_arrow

    b = bytearray(buf)
    if len(b) > F.HEADER_SIZE and data.draw(st.booleans()):  # a record byte: the CRC then fails
        b[data.draw(st.integers(F.HEADER_SIZE, len(b) - 1))] ^= 0x40
    b = bytes(b)
    walked = _run(lambda: F.walk(b), False)
    if walked[0] != "ok":
        return
    walked = walked[1]
    got = ck.parse_walked(b, list(walked))
    plain = walked and not any(
        h.attributes & (F.ARROW_BODY | F.CODEC_MASK | F.CONTROL_BIT) for _, h in walked
    )
    if not plain:
        assert got is None
    else:
        heads, positions = [h for _, h in walked], [p for p, _ in walked]
        ref, _ = _run(lambda: kafka_decode._parse_compiled(b, heads, positions, 1 << 30), True)[1]
        assert _parsed_key(got) == _parsed_key(ref)
    _same(lambda: F.to_arrow(b, walked=walked), _table_key)
    _same(lambda: records_to_arrow(b, False), _table_key)
    _same(lambda: records_to_arrow(b, True), _table_key)


def test_parse_walked_refuses_what_it_does_not_take():
    plain = bytes(F.encode_kafka([b"a", None], [None, b"k"]))
    walked = F.walk(plain)
    assert ck.parse_walked(plain, []) is None
    assert ck.parse_walked(plain, walked)[0] == 2
    for other in (
        bytes(F.encode_kafka([b"a"], codec="gzip")),
        bytes(F.encode_kafka([b""], control=True, transactional=True)),
        bytes(F.encode([b"a"])),
    ):
        run = plain + other
        assert ck.parse_walked(run, F.walk(run)) is None
    # a walk that claims more than the buffer holds: refused by the parse's bounds checks, not read
    assert ck.parse_walked(plain[:-3], walked) is None


def test_a_built_module_that_fails_to_import_warns_and_falls_back(tmp_path, monkeypatch) -> None:
    """A compiled module that is there but does not import (a cycle inside it, a stale build) gives a
    RuntimeWarning naming it and the pure path; one that is not built gives the pure path quietly."""
    (tmp_path / "ls_broken_ext.py").write_text("raise ImportError('stale build: undefined symbol')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_speedups, "DISABLED", False)
    with pytest.warns(RuntimeWarning, match="ls_broken_ext is built but failed to import.*undefined symbol"):
        assert _speedups.load_extension("ls_broken_ext") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _speedups.load_extension("ls_not_built_ext") is None
