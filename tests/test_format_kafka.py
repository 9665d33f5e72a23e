"""Kafka's v2 record layout: our codec, checked against kafka-python's independent implementation."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_logsource import format as F
from pyspark_logsource.errors import CorruptRecord, UnsupportedCompressionType
from pyspark_logsource.format import compression as C
from pyspark_logsource.format.crc import crc32c

kafka_records = pytest.importorskip("kafka.record.default_records")
DefaultRecordBatch = kafka_records.DefaultRecordBatch
DefaultRecordBatchBuilder = kafka_records.DefaultRecordBatchBuilder

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

VALUES = [b"v0", None, b"", b"x" * 300, b"\xff\x00"]
KEYS = [b"k0", b"k1", None, b"", b"k" * 200]
TS = [1_700_000_000_000, 1_700_000_000_005, 1_699_999_999_990, 1_700_000_000_001, 1_700_000_000_000]
HEADERS = [[("h", b"v"), ("e", None)], None, [], [("\u00e9t\u00e9", b"\x00")], None]


def _ours(buf) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in F.decode(buf).records()]


def _theirs(buf) -> list[tuple]:
    b = DefaultRecordBatch(bytes(buf))
    assert b.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in b]


def _expected(base=0, headers=True):
    hs = HEADERS if headers else [None] * len(VALUES)
    return [
        (base + i, t, k, v, list(h or []))
        for i, (t, k, v, h) in enumerate(zip(TS, KEYS, VALUES, hs, strict=True))
    ]


def _reseal(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return buf


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("headers", [True, False])
def test_encode_kafka_round_trips_and_kafka_python_reads_it(codec, headers):
    buf = F.encode_kafka(
        VALUES,
        KEYS,
        TS,
        HEADERS if headers else None,
        codec=codec,
        base_offset=42,
        producer_id=7,
        producer_epoch=1,
        base_sequence=3,
    )
    h = F.read_header(buf)
    assert not F.is_arrow_body(h) and h.codec == C.codec_id(codec)
    assert _ours(buf) == _expected(42, headers)
    assert _theirs(buf) == _expected(42, headers)
    kb = DefaultRecordBatch(bytes(buf))
    assert (kb.producer_id, kb.producer_epoch, kb.base_sequence, kb.compression_type) == (7, 1, 3, h.codec)
    F.validate_kafka_records(buf)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode_identically(codec):
    cid = C.codec_id(codec)
    builder = DefaultRecordBatchBuilder(2, cid, False, 9, 2, 100, 1 << 20)
    for i, (t, k, v, hs) in enumerate(zip(TS, KEYS, VALUES, HEADERS, strict=True)):
        builder.append(i, t, k, v, list(hs or []))
    buf = builder.build()
    F.validate(buf)
    F.validate_kafka_records(buf)
    assert _ours(buf) == _expected()
    table = F.to_arrow(bytes(buf))
    assert table.column("value").to_pylist() == VALUES
    # and back to an Arrow body with the same content and header fields
    arrow = F.kafka_to_arrow_batch(buf)
    assert F.read_header(arrow).is_arrow_body
    assert _ours(arrow) == _expected()
    assert F.read_header(arrow)._replace(batch_length=0, crc=0, attributes=0) == F.read_header(buf)._replace(
        batch_length=0, crc=0, attributes=0
    )


@pytest.mark.parametrize("codec", CODECS)
def test_arrow_to_kafka_keeps_header_fields_and_content(codec):
    arrow = F.encode(
        VALUES, KEYS, TS, HEADERS, codec=codec, producer_id=5, producer_epoch=2, base_sequence=11
    )
    F.set_base_offset(arrow, 1000)
    F.set_leader_epoch(arrow, 3)
    kafka = F.arrow_to_kafka(arrow)
    ha, hk = F.read_header(arrow), F.read_header(kafka)
    assert not hk.is_arrow_body and hk.codec == ha.codec
    same = (
        "base_offset",
        "leader_epoch",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "record_count",
        "last_offset_delta",
    )
    assert [getattr(ha, f) for f in same] == [getattr(hk, f) for f in same]
    assert _theirs(kafka) == _ours(arrow) == _expected(1000)


def test_log_append_time_gives_max_timestamp_to_every_record():
    for make in (F.encode, F.encode_kafka):
        buf = make([b"a", b"b"], None, [5, 9])
        F.stamp_log_append_time(buf, 123)
        assert [r.timestamp for r in F.decode(buf).records()] == [123, 123]
        assert F.to_arrow(bytes(buf)).column("timestamp_type").to_pylist() == [1, 1]
    kafka = F.arrow_to_kafka(F.encode([b"a", b"b"], None, [5, 9], timestamp_type=F.LOG_APPEND_TIME))
    theirs = DefaultRecordBatch(bytes(kafka))
    assert theirs.timestamp_type == 1 and [r.timestamp for r in theirs] == [9, 9]


def test_mixed_runs_decode_in_log_order():
    parts, expected, off = [], [], 0
    for i in range(12):
        vals = [f"m{i}-{j}".encode() for j in range(1 + i % 3)]
        make = F.encode if i % 3 else F.encode_kafka
        b = make(vals, None, 1000 + i, codec=["none", "lz4", "gzip", "snappy"][i % 4])
        F.set_base_offset(b, off)
        off += len(vals)
        parts.append(bytes(b))
        expected += vals
    run = b"".join(parts)
    for fast in (True, False, None):
        t = F.to_arrow(run, fast=fast)
        assert t.column("value").to_pylist() == expected
        assert t.column("offset").to_pylist() == list(range(off))
    assert [v for b in F.decode_all(run) for v in b.to_arrow().column("value").to_pylist()] == expected
    assert F.to_arrow(run, 3, 7).column("offset").to_pylist() == [3, 4, 5, 6]
    # and a Kafka client's view of the same run: every batch in Kafka's layout, same content
    kafka_run = F.to_kafka(run)
    assert all(not h.is_arrow_body for _, h in F.walk(kafka_run))
    assert F.to_arrow(kafka_run).equals(F.to_arrow(run))


def test_control_batches_are_skipped_by_data_readers():
    data = F.encode_kafka([b"a"], None, 1)
    ctrl = F.encode_kafka([b"\x00\x00\x00\x01"], [b"\x00\x00\x00\x00"], 2, control=True, transactional=True)
    F.set_base_offset(ctrl, 1)
    run = bytes(data) + bytes(ctrl)
    assert F.to_arrow(run).column("offset").to_pylist() == [0]
    assert F.to_arrow(run, include_control=True).column("offset").to_pylist() == [0, 1]
    assert F.decode(ctrl).is_control and F.read_header(ctrl).is_control


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.none() | st.binary(max_size=40),
            st.none() | st.binary(max_size=300),
            st.integers(-(2**40), 2**40),
        ),
        min_size=1,
        max_size=80,
    ),
    st.sampled_from(CODECS),
    st.booleans(),
)
def test_arrow_to_kafka_to_arrow_is_identity(rows, codec, with_headers):
    keys, values, ts = map(list, zip(*rows, strict=True))
    headers = [[("k", v)] if i % 3 == 0 else None for i, v in enumerate(values)] if with_headers else None
    arrow = F.encode(values, keys, ts, headers, codec=codec, producer_id=1, producer_epoch=0, base_sequence=0)
    kafka = F.arrow_to_kafka(arrow)
    assert F.to_arrow(bytes(kafka)).equals(F.to_arrow(bytes(arrow)))
    back = F.kafka_to_arrow_batch(kafka)
    assert F.to_arrow(bytes(back)).equals(F.to_arrow(bytes(arrow)))
    assert _theirs(kafka) == _ours(arrow)


# ---------------------------------------------------------------- hostile input


def _kafka_with_records(records: bytes, n: int, codec: int = 0) -> bytearray:
    buf = bytearray(F.HEADER_SIZE) + records
    F.HEADER.pack_into(buf, 0, 0, len(buf) - 12, 0, F.MAGIC, 0, codec, n - 1, 0, 0, -1, -1, -1, n)
    return _reseal(buf)


def test_truncated_and_inconsistent_kafka_batches_raise_corrupt_record():
    good = F.encode_kafka([b"abc", b"def"], [b"k", None], 10, [[("h", b"v")], None])
    records = bytes(good[F.HEADER_SIZE :])
    bad = [
        _kafka_with_records(records, 3),  # count larger than the records
        _kafka_with_records(records, 1),  # trailing record
        _kafka_with_records(records[:-1], 2),  # truncated
        _kafka_with_records(records + b"\x00", 2),  # trailing byte
        _kafka_with_records(b"\xff\xff\xff\xff\xff\xff", 1),  # overlong varint
        _kafka_with_records(b"\x01", 1),  # negative length
        _kafka_with_records(b"\x0c\x00\x00\x02\x01\x01\x00", 1),  # offset delta 1 for the first record
        _kafka_with_records(b"\x0c\x00\x00\x00\x7e\x01\x00", 1),  # key longer than its record
    ]
    for b in bad:
        with pytest.raises(CorruptRecord):
            F.validate_kafka_records(b)
        with pytest.raises(CorruptRecord):
            F.decode(b).records()
        with pytest.raises(CorruptRecord):
            F.to_arrow(bytes(b))


def test_compressed_garbage_and_bombs_are_refused():
    for codec in (C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD):
        with pytest.raises(CorruptRecord):
            F.validate_kafka_records(_kafka_with_records(b"not compressed at all", 1, codec))
    bomb = zlib.compress(b"\x00" * (64 << 20), 9)
    gz = _kafka_with_records(bomb, 1, C.GZIP)
    with pytest.raises(CorruptRecord, match="more than"):
        F.validate_kafka_records(gz, max_uncompressed=1 << 20)
    # a snappy block claiming 4 GiB is refused from its length preamble, before decompressing
    claim = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) + b"\x00" * 8
    with pytest.raises(CorruptRecord, match="more than"):
        F.validate_kafka_records(_kafka_with_records(claim, 1, C.SNAPPY), max_uncompressed=1 << 20)
    xerial = C.XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", len(claim)) + claim
    with pytest.raises(CorruptRecord, match="more than"):
        F.validate_kafka_records(_kafka_with_records(xerial, 1, C.SNAPPY), max_uncompressed=1 << 20)
    with pytest.raises(UnsupportedCompressionType):
        F.walk(_kafka_with_records(b"x", 1, 5), strict=True)


def test_layout_bits_are_checked():
    arrow = F.encode([b"a"], headers=[[("k", b"v")]])
    attrs = F.read_header(arrow).attributes
    assert attrs & F.ARROW_BODY and attrs & F.HAS_HEADERS
    struct.pack_into(">h", arrow, 21, attrs & ~F.ARROW_BODY)  # HAS_HEADERS without ARROW_BODY
    with pytest.raises(CorruptRecord, match="illegal"):
        F.read_header(_reseal(arrow))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(1, 10), st.integers(0, 4))
def test_garbage_records_raise_only_corrupt_record(records, n, codec):
    b = _kafka_with_records(records, n, codec)
    for fn in (F.validate_kafka_records, lambda x: F.decode(x).records(), lambda x: F.to_arrow(bytes(x))):
        try:
            fn(b)
        except CorruptRecord:
            pass


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutated_kafka_batches_raise_only_corrupt_record(data):
    buf = F.encode_kafka([b"abc", None, b"x" * 130], [None, b"k", b"kk"], 7, [None, [("h", b"v")], None])
    body = bytearray(buf[F.HEADER_SIZE :])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] = data.draw(st.integers(0, 255))
    b = _kafka_with_records(bytes(body), 3)
    try:
        F.validate_kafka_records(b)
        F.decode(b).to_arrow().validate(full=True)
    except CorruptRecord:
        pass
