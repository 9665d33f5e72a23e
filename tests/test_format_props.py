"""Property tests (hypothesis) of the record batch format: round-trips, CRC, truncation, fuzzing."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pyspark_logsource.errors import CorruptRecord, UnsupportedCompressionType
from pyspark_logsource.format import batch as B
from pyspark_logsource.format.crc import crc32c

CODECS = ["none", "gzip", "lz4", "zstd"]
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INT64 = st.integers(-(2**63), 2**63 - 1)
blob = st.binary(max_size=40)
maybe_blob = st.none() | blob
header_list = st.lists(st.tuples(st.text(max_size=8), maybe_blob), max_size=4)


@st.composite
def batches(draw, max_records: int = 25):
    """Arguments of one encode() call, plus what decoding must give back."""
    n = draw(st.integers(1, max_records))
    values = draw(st.lists(maybe_blob, min_size=n, max_size=n))
    keys = draw(st.none() | st.lists(maybe_blob, min_size=n, max_size=n))
    headers = draw(st.none() | st.lists(st.none() | header_list, min_size=n, max_size=n))
    ts_kind = draw(st.sampled_from(["list", "int"]))
    if ts_kind == "list":
        timestamps = draw(st.lists(st.integers(-(2**62), 2**62), min_size=n, max_size=n))
    else:
        timestamps = draw(st.integers(-(2**62), 2**62))
    kwargs = dict(
        codec=draw(st.sampled_from(CODECS)),
        producer_id=draw(st.integers(-1, 2**63 - 1)),
        producer_epoch=draw(st.integers(-1, 2**15 - 1)),
        base_sequence=draw(st.integers(-1, 2**31 - 1)),
        base_offset=draw(st.integers(0, 2**61)),  # a flipped bit keeps the last offset within int64
        leader_epoch=draw(st.integers(-1, 2**31 - 1)),
    )
    return values, keys, timestamps, headers, kwargs


def expected_records(values, keys, timestamps, headers, base_offset):
    n = len(values)
    ts = timestamps if isinstance(timestamps, list) else [timestamps] * n
    ks = keys if keys is not None else [None] * n
    hs = [list(h) if h else [] for h in (headers or [None] * n)]
    return [B.Record(base_offset + i, ts[i], ks[i], values[i], hs[i]) for i in range(n)]


def arrow_rows(table: pa.Table | pa.RecordBatch) -> list[tuple]:
    """Rows of a decoded table in a comparable form (timestamps as int ms, headers as pairs)."""
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    offs = table.column("offset").to_pylist()
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    hdrs = [[(d["key"], d["value"]) for d in h] if h else [] for h in table.column("headers").to_pylist()]
    return list(zip(offs, ts, keys, values, hdrs, strict=True))


@PROPS
@given(batches())
def test_round_trip_records_and_arrow(args):
    values, keys, timestamps, headers, kwargs = args
    buf = B.encode(values, keys, timestamps, headers, **kwargs)
    want = expected_records(values, keys, timestamps, headers, kwargs["base_offset"])

    h = B.validate(buf)
    assert h.size == len(buf)
    assert h.record_count == len(values)
    assert h.codec == B.compression.codec_id(kwargs["codec"])
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (
        kwargs["producer_id"],
        kwargs["producer_epoch"],
        kwargs["base_sequence"],
    )
    assert (h.base_offset, h.leader_epoch) == (kwargs["base_offset"], kwargs["leader_epoch"])
    assert h.max_timestamp == max(r.timestamp for r in want)
    assert h.base_timestamp == want[0].timestamp

    rb = B.decode(buf)
    assert rb.records() == want
    arrow = rb.to_arrow()
    arrow.validate(full=True)
    assert arrow.schema == B.ARROW_SCHEMA
    assert arrow_rows(arrow) == [tuple(r) for r in want]
    assert arrow.column("timestamp_type").to_pylist() == [B.CREATE_TIME] * len(values)

    table = B.to_arrow(buf)
    table.validate(full=True)
    assert arrow_rows(table) == [tuple(r) for r in want]


@PROPS
@given(st.lists(batches(max_records=6), min_size=1, max_size=12), st.data())
def test_run_of_batches_to_arrow_and_trim(runs, data):
    """A run of batches with consecutive offsets becomes one table; trim keeps [start, end)."""
    parts, want = [], []
    next_offset = data.draw(st.integers(0, 2**40))
    for values, keys, timestamps, headers, kwargs in runs:
        kwargs = dict(kwargs, base_offset=next_offset)
        buf = B.encode(values, keys, timestamps, headers, **kwargs)
        if data.draw(st.booleans()):  # a broker configured for LogAppendTime stamped this one
            timestamps = data.draw(st.integers(0, 2**45))
            B.stamp_log_append_time(buf, timestamps)
        parts.append(bytes(buf))
        want += [tuple(r) for r in expected_records(values, keys, timestamps, headers, next_offset)]
        next_offset += len(values)
    buf = b"".join(parts)
    table = B.to_arrow(buf)
    table.validate(full=True)
    assert table.schema == B.ARROW_SCHEMA
    assert arrow_rows(table) == want
    # the general path and the fast path give identical tables
    assert B.to_arrow(buf, fast=False).equals(table)
    assert B.to_arrow(buf, fast=True).equals(table)

    first, last = want[0][0], want[-1][0]
    start = data.draw(st.none() | st.integers(first - 3, last + 3))
    end = data.draw(st.none() | st.integers(first - 3, last + 3))
    kept = [r for r in want if (start is None or r[0] >= start) and (end is None or r[0] < end)]
    assert arrow_rows(B.to_arrow(buf, start, end)) == kept
    assert arrow_rows(B.trim(table, start, end)) == kept


@st.composite
def arrow_tables(draw):
    """Arrow tables as a Spark writer or a user hands them in: string/binary/large, nulls, slices."""
    n = draw(st.integers(1, 30))
    types = [
        pa.binary(),
        pa.string(),
        pa.large_binary(),
        pa.large_string(),
        pa.binary_view(),
        pa.string_view(),
    ]
    vtype = draw(st.sampled_from(types))
    ktype = draw(st.sampled_from(types))
    text = st.text(max_size=20)
    is_text = (pa.string(), pa.large_string(), pa.string_view())
    vstrat = text if vtype in is_text else blob
    kstrat = text if ktype in is_text else blob
    pad_front = draw(st.integers(0, 9))
    total = n + pad_front + draw(st.integers(0, 5))
    values = draw(st.lists(st.none() | vstrat, min_size=total, max_size=total))
    cols = {"value": pa.array(values, vtype)}
    if draw(st.booleans()):
        cols["key"] = pa.array(draw(st.lists(st.none() | kstrat, min_size=total, max_size=total)), ktype)
    if draw(st.booleans()):
        tsunit = draw(st.sampled_from(["int", "ms", "us"]))
        ts = draw(st.lists(st.none() | st.integers(0, 2**42), min_size=total, max_size=total))
        if tsunit == "int":
            cols["timestamp"] = pa.array(ts, pa.int64())
        elif tsunit == "ms":
            cols["timestamp"] = pa.array(ts, pa.timestamp("ms"))
        else:
            cols["timestamp"] = pa.array([None if t is None else t * 1000 for t in ts], pa.timestamp("us"))
    if draw(st.booleans()):
        hdrs = draw(st.lists(st.none() | header_list, min_size=total, max_size=total))
        cols["headers"] = pa.array(
            [None if h is None else [{"key": k, "value": v} for k, v in h] for h in hdrs], B.HEADER_TYPE
        )
    table = pa.table(cols).slice(pad_front, n)
    if n > 1 and draw(st.booleans()):  # several chunks, as a Spark or a pandas conversion gives
        cut = draw(st.integers(1, n - 1))
        table = pa.concat_tables([table.slice(0, cut), table.slice(cut)])
    elif draw(st.booleans()):
        return table.to_batches()[0] if table.num_rows else table
    return table


def _as_bytes(x):
    return x.encode() if isinstance(x, str) else x


@PROPS
@given(arrow_tables(), st.sampled_from(CODECS), st.integers(0, 2**41))
def test_encode_arrow_round_trip(table, codec, default_ts):
    buf = B.encode_arrow(table, codec=codec, timestamp=default_ts)
    B.validate(buf)
    got = B.decode(buf).to_arrow()
    got.validate(full=True)
    n = table.num_rows
    names = table.schema.names
    assert got.column("value").to_pylist() == [_as_bytes(v) for v in table.column("value").to_pylist()]
    want_keys = [_as_bytes(k) for k in table.column("key").to_pylist()] if "key" in names else [None] * n
    assert got.column("key").to_pylist() == want_keys
    assert got.column("offset").to_pylist() == list(range(n))
    if "timestamp" in names:
        col = table.column("timestamp")
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms")).cast(pa.int64())
        raw = col.to_pylist()
        # all-null timestamps mean "use the default", as do null entries
        want_ts = [default_ts if t is None else t for t in raw]
    else:
        want_ts = [default_ts] * n
    assert got.column("timestamp").cast(pa.int64()).to_pylist() == want_ts
    if "headers" in names:
        want_h = [
            [(d["key"], d["value"]) for d in h] if h else [] for h in table.column("headers").to_pylist()
        ]
    else:
        want_h = [[]] * n
    assert [r.headers for r in B.decode(buf).records()] == want_h


def _flip(buf: bytes | bytearray, bit: int) -> bytearray:
    out = bytearray(buf)
    out[bit // 8] ^= 1 << (bit % 8)
    return out


@PROPS
@given(batches(max_records=8), st.data())
def test_any_flipped_bit_after_the_stampable_fields_is_detected(args, data):
    values, keys, timestamps, headers, kwargs = args
    buf = B.encode(values, keys, timestamps, headers, **kwargs)
    bit = data.draw(st.integers(8 * 8, len(buf) * 8 - 1))  # everything from batch_length on
    assume(not 12 * 8 <= bit < 16 * 8)  # leader epoch is stamped, outside the CRC
    bad = _flip(buf, bit)
    with pytest.raises(CorruptRecord):
        B.validate(bad)
    with pytest.raises(CorruptRecord):
        B.decode(bad)
    # the same flip inside a run of batches: the bad batch is reported, never served. A flip
    # that makes batch_length point past the end makes it look like a partial trailing batch,
    # which a fetch skips (as Kafka does): then only the batch before it comes back.
    run = bytes(B.encode([b"before"], timestamps=1)) + bytes(bad)
    try:
        table = B.to_arrow(run)
    except CorruptRecord:
        return
    assert 8 * 8 <= bit < 12 * 8 and B.read_header(bad).size > len(bad)
    assert table.column("value").to_pylist() == [b"before"]


@PROPS
@given(batches(max_records=8), st.integers(0, 8 * 8 - 1) | st.integers(12 * 8, 16 * 8 - 1))
def test_flipped_bits_in_base_offset_or_leader_epoch_are_not_corruption(args, bit):
    values, keys, timestamps, headers, kwargs = args
    buf = B.encode(values, keys, timestamps, headers, **kwargs)
    bad = _flip(buf, bit)
    h = B.validate(bad)
    assert h.crc == B.read_header(buf).crc
    got = B.decode(bad).records()
    assert [r[1:] for r in got] == [r[1:] for r in B.decode(buf).records()]
    assert got[0].offset == h.base_offset


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches(max_records=6), st.data())
def test_truncated_input_raises_corrupt_record(args, data):
    values, keys, timestamps, headers, kwargs = args
    buf = bytes(B.encode(values, keys, timestamps, headers, **kwargs))
    cut = data.draw(st.integers(0, len(buf) - 1))
    part = buf[:cut]
    for fn in (B.decode, B.validate):
        with pytest.raises(CorruptRecord):
            fn(part)
    # a fetch that ends mid-batch: the partial batch is skipped, never decoded
    assert list(B.iter_headers(part)) == []
    assert B.to_arrow(part).num_rows == 0
    assert B.decode_all(part) == []


def _reseal(buf: bytearray) -> bytearray:
    """Recompute the CRC so that only the structural checks can catch a bad body."""
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return buf


def _decode_or_corrupt(buf) -> None:
    """Decoding must either give a valid Arrow batch or raise one of the two typed errors."""
    try:
        rb = B.decode(buf)
        rb.to_arrow().validate(full=True)
        rb.records()
        B.to_arrow(bytes(buf)).validate(full=True)
    except (CorruptRecord, UnsupportedCompressionType):
        pass


@FUZZ
@given(st.binary(max_size=300))
def test_random_garbage_raises_only_corrupt_record(garbage):
    _decode_or_corrupt(garbage)
    try:
        list(B.iter_headers(garbage, check_crc=True))
    except CorruptRecord:
        pass


@FUZZ
@given(
    st.integers(1, 40),
    st.integers(0, B.KNOWN_ATTRIBUTES),
    st.binary(max_size=400),
)
def test_garbage_body_with_valid_crc_raises_only_corrupt_record(n, attrs, body):
    """A plausible header over a garbage body, CRC recomputed: structurally bad, must be caught."""
    buf = bytearray(B.HEADER_SIZE) + body
    B.HEADER.pack_into(
        buf, 0, 0, len(buf) - 12, 0, B.MAGIC, 0, attrs & B.KNOWN_ATTRIBUTES, n - 1, 1000, 1000, -1, -1, -1, n
    )
    _decode_or_corrupt(_reseal(buf))


@FUZZ
@given(batches(max_records=10), st.data())
def test_mutated_body_with_valid_crc_raises_only_corrupt_record(args, data):
    """Real batches with bytes overwritten in the body (or attributes) and the CRC recomputed."""
    values, keys, timestamps, headers, kwargs = args
    buf = B.encode(values, keys, timestamps, headers, **kwargs)
    for _ in range(data.draw(st.integers(1, 4))):
        where = data.draw(st.integers(21, len(buf) - 1))
        buf[where] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):  # also try a body cut short or grown, with a consistent length field
        delta = data.draw(st.integers(-min(20, len(buf) - B.HEADER_SIZE), 20))
        buf = (
            buf[: len(buf) + delta]
            if delta < 0
            else buf + bytes(data.draw(st.binary(min_size=delta, max_size=delta)))
        )
        struct.pack_into(">i", buf, 8, len(buf) - 12)
    _decode_or_corrupt(_reseal(buf))


@PROPS
@given(st.lists(batches(max_records=5), min_size=1, max_size=6), st.data())
def test_iter_headers_skips_a_trailing_partial_batch(runs, data):
    whole = [bytes(B.encode(v, k, t, h, **kw)) for v, k, t, h, kw in runs]
    tail = data.draw(st.sampled_from(whole))
    cut = data.draw(st.integers(0, len(tail) - 1))
    buf = b"".join(whole) + tail[:cut]
    got = list(B.iter_headers(buf, check_crc=True))
    positions = list(np.cumsum([0] + [len(w) for w in whole[:-1]]))
    assert [p for p, _ in got] == positions
    assert [h.size for _, h in got] == [len(w) for w in whole]
    assert len(B.decode_all(buf)) == len(whole)


@PROPS
@given(batches(max_records=8), st.integers(0, 2**62), st.integers(-1, 2**31 - 1), st.integers(0, 2**45))
def test_stamping_helpers(args, base_offset, epoch, now_ms):
    values, keys, timestamps, headers, kwargs = args
    buf = B.encode(values, keys, timestamps, headers, **kwargs)
    before = B.decode(buf).records()
    crc = B.read_header(buf).crc
    B.set_base_offset(buf, base_offset)
    B.set_leader_epoch(buf, epoch)
    h = B.validate(buf)  # the CRC still holds: both fields are outside it
    assert (h.base_offset, h.leader_epoch, h.crc) == (base_offset, epoch, crc)
    assert h.last_offset == base_offset + len(values) - 1
    assert h.next_offset == base_offset + len(values)
    got = B.decode(buf).records()
    assert [r.offset for r in got] == list(range(base_offset, base_offset + len(values)))
    assert [r[1:] for r in got] == [r[1:] for r in before]

    B.stamp_log_append_time(buf, now_ms)
    h = B.validate(buf)
    assert h.timestamp_type == B.LOG_APPEND_TIME
    assert h.max_timestamp == now_ms
    rb = B.decode(buf).to_arrow()
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [now_ms] * len(values)
    assert rb.column("timestamp_type").to_pylist() == [B.LOG_APPEND_TIME] * len(values)
    assert rb.column("value").to_pylist() == [r.value for r in before]


@FUZZ
@given(st.lists(batches(max_records=4), min_size=2, max_size=6), st.data())
def test_fast_path_accepts_exactly_what_the_general_path_accepts(runs, data):
    """Mutate bytes of a run (CRCs recomputed): the vectorised path either raises
    CorruptRecord like batch-by-batch decoding does, or returns the identical table."""
    parts = []
    for values, keys, timestamps, headers, kwargs in runs:
        codec = data.draw(st.sampled_from(["none", "none", "lz4"]))
        parts.append(B.encode(values, keys, timestamps, headers, **dict(kwargs, codec=codec)))
    victim = data.draw(st.integers(0, len(parts) - 1))
    buf = parts[victim]
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.integers(B.HEADER_SIZE, len(buf) - 1))
        buf[where] = data.draw(st.integers(0, 255))
    _reseal(buf)
    run = b"".join(bytes(p) for p in parts)
    outcomes = []
    for fast in (False, True):
        try:
            outcomes.append(B.to_arrow(run, fast=fast))
        except (CorruptRecord, UnsupportedCompressionType) as e:
            outcomes.append(type(e))
    slow, quick = outcomes
    if isinstance(slow, pa.Table):
        assert isinstance(quick, pa.Table) and quick.equals(slow)
        quick.validate(full=True)
    else:
        assert quick is slow
