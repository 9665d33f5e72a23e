"""The broker's compiled Produce fast path (protocol/_cproduce.pyx) against the pure-Python reference.

Both paths run in the same process on the same input: the Python path is selected by
switching the compiled hooks (``connection._produce_decode``, ``codecs._cproduce``) off
for one call. On generated Produce frames of every version the fast path takes (v3-v8)
and on their malformed variants (truncated, bit-flipped, lengths changed, random bytes),
``ServerConnection.decode_frame`` gives the same request or the same typed error (class,
message, Kafka error code) both ways; the compiled decode itself returns either None or
exactly the Python result. The response encode gives the same bytes, or None where the
Python code would not take its fast path either.
"""

from __future__ import annotations

import dataclasses
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_logsource.format import encode, encode_kafka
from pyspark_logsource.protocol import codecs, connection
from pyspark_logsource.protocol import messages as m
from pyspark_logsource.protocol.connection import RequestReceived, ServerConnection
from pyspark_logsource.protocol.primitives import ProtocolError

try:
    from pyspark_logsource.protocol import _cproduce as cp
except ImportError:  # not built: `python scripts/build_ext.py` or `pip install -e .` builds it
    cp = None
    if os.environ.get("CI"):
        raise
    pytestmark = pytest.mark.skip(reason="protocol/_cproduce is not built: pure-Python path only")

if (
    cp is not None
):  # bound by protocol.connection unless LOGSOURCE_NO_EXTENSIONS is set: the tests compare anyway
    assert cp.bind(m.RequestHeader, m.ProduceRequest, m.ProducePartitionData, RequestReceived)
    assert cp.bind_responses(m.ProduceResponse, m.ProducePartitionResponse)

PROPS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
VERSIONS = range(3, 9)
_BATCHES = [
    bytes(encode_kafka([b"v"], [b"k"])),
    bytes(encode([b"arrow" * 40], [None])),
    b"",
    b"\x00" * 7,
]


def _decode(frame: bytearray, compiled: bool):
    """decode_frame on one path: ("ok", event) or ("error", type, message, Kafka code)."""
    saved = connection._produce_decode
    connection._produce_decode = cp.decode_produce_frame if compiled else None
    try:
        ev = ServerConnection.decode_frame(bytearray(frame))
        # the records' type too (dataclass equality compares a memoryview and a bytearray by content)
        kinds = [type(p.records) for p in getattr(ev, "request", m.ProduceRequest()).partitions]
        return ("ok", ev, kinds)
    except Exception as e:  # noqa: BLE001 - the point is that both paths raise the same
        return ("error", type(e), str(e), getattr(e, "code", None))
    finally:
        connection._produce_decode = saved


def _encode(header: m.RequestHeader, resp, compiled: bool):
    saved = codecs._cproduce
    codecs._cproduce = cp if compiled else None
    try:
        return ("ok", [bytes(p) for p in codecs.encode_response(header, resp)])
    except Exception as e:  # noqa: BLE001
        return ("error", type(e), str(e), getattr(e, "code", None))
    finally:
        codecs._cproduce = saved


def _frame(version: int, client_id, req: m.ProduceRequest, cid: int = 7) -> bytearray:
    parts = codecs.encode_request(m.RequestHeader(0, version, cid, client_id), req)
    return bytearray(b"".join(bytes(p) for p in parts)[4:])


_names = st.text(min_size=0, max_size=12)
_i32 = st.one_of(st.integers(-2, 8), st.integers(-(2**31), 2**31 - 1))
_i16 = st.one_of(st.sampled_from([-1, 0, 1]), st.integers(-(2**15), 2**15 - 1))


@st.composite
def produce_frames(draw) -> bytearray:
    version = draw(st.sampled_from(VERSIONS))
    client = draw(st.one_of(st.none(), _names))
    n = draw(st.sampled_from([1, 1, 1, 2, 0]))
    parts = [
        m.ProducePartitionData(draw(_names), draw(_i32), draw(st.sampled_from(_BATCHES))) for _ in range(n)
    ]
    txn = draw(st.sampled_from([None, None, None, "t"]))
    req = m.ProduceRequest(parts, draw(_i16), draw(_i32), txn)
    return _frame(version, client, req, draw(_i32))


@st.composite
def mangled(draw) -> bytearray:
    f = draw(produce_frames())
    how = draw(st.sampled_from(["cut", "flip", "grow", "len", "random"]))
    if how == "cut" and f:
        del f[draw(st.integers(0, len(f) - 1)) :]
    elif how == "flip" and f:
        i = draw(st.integers(0, len(f) - 1))
        f[i] ^= 1 << draw(st.integers(0, 7))
    elif how == "grow":
        f += draw(st.binary(min_size=1, max_size=8))
    elif how == "len" and len(f) >= 12:
        # a 16- or 32-bit length field somewhere in the header or body set to an odd value
        i = draw(st.integers(0, len(f) - 4))
        struct.pack_into(">h", f, i, draw(st.sampled_from([-2, -1, 0, 1, 0x7FFF, len(f)])))
    elif how == "random":
        f = bytearray(struct.pack(">hh", 0, draw(st.sampled_from(VERSIONS)))) + draw(st.binary(max_size=60))
    return f


@PROPS
@given(produce_frames())
def test_decode_generated_frames_same_both_ways(frame: bytearray) -> None:
    assert _decode(frame, True) == _decode(frame, False)


@PROPS
@given(mangled())
def test_decode_malformed_frames_same_result_or_same_typed_error(frame: bytearray) -> None:
    fast = cp.decode_produce_frame(bytearray(frame))
    pure = _decode(frame, False)
    if fast is not None:  # what the compiled code accepts, it decodes exactly as the Python code
        assert pure == ("ok", fast, [memoryview])
    assert _decode(frame, True) == pure


@pytest.mark.parametrize("version", VERSIONS)
def test_common_shape_is_decoded_by_the_compiled_path(version: int) -> None:
    rec = _BATCHES[0]
    req = m.ProduceRequest([m.ProducePartitionData("tópic", 3, rec)], acks=1, timeout_ms=1500)
    for client in ("cli", None, "cli", "other"):  # the cached client id and topic name follow changes
        ev = cp.decode_produce_frame(_frame(version, client, req, 42))
        assert isinstance(ev, RequestReceived)
        assert ev.header == m.RequestHeader(0, version, 42, client)
        assert ev.request == req
        rec = ev.request.partitions[0].records
        assert type(rec) is memoryview and not rec.readonly  # the log stamps the batches in place


def test_other_shapes_are_left_to_the_python_path() -> None:
    req = m.ProduceRequest([m.ProducePartitionData("t", 0, _BATCHES[0])])
    frame = _frame(8, "c", req)
    assert cp.decode_produce_frame(bytes(frame)) is None  # not a bytearray
    assert cp.decode_produce_frame(bytearray(frame[:20])) is None  # truncated
    txn = _frame(8, "c", m.ProduceRequest(req.partitions, transactional_id="x"))
    assert cp.decode_produce_frame(txn) is None
    assert _decode(txn, True) == _decode(txn, False)
    bad_utf8 = bytearray(frame)
    bad_utf8[10] = 0xFF  # the client id's first byte
    assert cp.decode_produce_frame(bad_utf8) is None
    assert _decode(bad_utf8, True) == _decode(bad_utf8, False)
    with pytest.raises(ProtocolError):
        ServerConnection.decode_frame(bytearray(frame[:9]))


def test_bind_refuses_classes_whose_fields_changed() -> None:
    @dataclasses.dataclass(slots=True)
    class Other:
        api_key: int
        api_version: int

    try:
        assert not cp.bind(Other, m.ProduceRequest, m.ProducePartitionData, RequestReceived)
        assert cp.decode_produce_frame(_frame(8, "c", m.ProduceRequest([]))) is None
    finally:
        assert cp.bind(m.RequestHeader, m.ProduceRequest, m.ProducePartitionData, RequestReceived)


_i64 = st.one_of(st.integers(-2, 8), st.integers(-(2**63), 2**63 - 1), st.integers(2**63, 2**64))


@st.composite
def produce_responses(draw) -> m.ProduceResponse:
    n = draw(st.sampled_from([1, 1, 1, 2, 0]))
    parts = [
        m.ProducePartitionResponse(
            draw(st.one_of(_names, st.just("\ud800"))),
            draw(st.one_of(_i32, st.just(2**31))),
            draw(st.one_of(_i16, st.just(True))),
            draw(_i64),
            draw(_i64),
            draw(_i64),
            draw(st.sampled_from([None, None, "boom"])),
        )
        for _ in range(n)
    ]
    return m.ProduceResponse(parts, draw(st.one_of(_i32, st.just(-(2**31) - 1))))


@PROPS
@given(st.sampled_from(VERSIONS), _i32, produce_responses())
def test_encode_response_same_bytes_or_same_error(version: int, cid: int, resp: m.ProduceResponse) -> None:
    header = m.RequestHeader(0, version, cid, "c")
    fast = cp.encode_produce_response(cid, version, resp)
    if fast is not None:
        assert [bytes(fast)] == [bytes(p) for p in codecs._encode_produce_response_fast(cid, version, resp)]
    assert _encode(header, resp, True) == _encode(header, resp, False)


def test_encode_common_response_takes_the_compiled_path() -> None:
    resp = m.ProduceResponse([m.ProducePartitionResponse("tópic", 2, 0, 10, -1, 0)], 0)
    for version in VERSIONS:
        out = cp.encode_produce_response(5, version, resp)
        assert out is not None
        assert bytes(out) == bytes(codecs._encode_produce_response_fast(5, version, resp)[0])
    assert cp.encode_produce_response(5, 9, resp) is None  # flexible: the schema codec
    assert cp.encode_produce_response(2**31, 8, resp) is None


def _append(events, results, compiled: bool):
    saved = connection._cproduce_append
    connection._cproduce_append = cp.append_responses if compiled else None
    try:
        return ("ok", bytes(ServerConnection.append_responses(bytearray(b"head"), events, results)))
    except Exception as e:  # noqa: BLE001
        return ("error", type(e), str(e))
    finally:
        connection._cproduce_append = saved


@PROPS
@given(
    st.lists(
        st.tuples(st.sampled_from(VERSIONS), _i32, st.one_of(st.none(), produce_responses())), max_size=6
    )
)
def test_append_responses_same_bytes_both_ways(rows) -> None:
    events = [RequestReceived(m.RequestHeader(0, v, cid, "c"), None) for v, cid, _ in rows]
    results = [r for _, _, r in rows]
    assert _append(events, results, True) == _append(events, results, False)


def test_append_responses_other_apis_and_mismatched_lengths() -> None:
    meta = RequestReceived(m.RequestHeader(3, 1, 9, "c"), None)
    prod = RequestReceived(m.RequestHeader(0, 8, 10, "c"), None)
    results = [
        m.MetadataResponse(brokers=[], topics=[]),
        m.ProduceResponse([m.ProducePartitionResponse("t", 0)]),
    ]
    both = _append([meta, prod], results, True)
    assert both == _append([meta, prod], results, False) and both[0] == "ok"
    assert _append([meta], results, True) == _append([meta], results, False)
    assert _append([meta], results, True)[1] is ValueError


def _feed_all(chunks: list[bytes], max_bytes: int, compiled: bool) -> list:
    """Every feed()'s frames (or its typed error) on one path."""
    from pyspark_logsource.protocol.connection import FrameDecoder

    saved = connection._split_frames
    connection._split_frames = cp.split_frames if compiled else None
    dec, out = FrameDecoder(max_bytes), []
    try:
        for c in chunks:
            try:
                out.append([bytes(f) for f in dec.feed(c)])
            except ProtocolError as e:
                out.append(("error", type(e), str(e), getattr(e, "code", None)))
        out.append((dec.buffered, dec.in_frame))
        return out
    finally:
        connection._split_frames = saved


@st.composite
def streams(draw) -> tuple[list[bytes], int]:
    max_bytes = draw(st.sampled_from([100, 70_000, 1 << 20]))
    parts = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["small", "small", "small", "big", "bad"]))
        if kind == "bad":
            parts.append(struct.pack(">i", draw(st.sampled_from([-1, -(2**31), max_bytes + 1]))))
        else:
            n = draw(st.integers(0, 40)) if kind == "small" else draw(st.integers(65_530, 65_540))
            parts.append(struct.pack(">i", n) + bytes([len(parts) & 0xFF]) * n)
    data = b"".join(parts)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=5)))
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    return chunks, max_bytes


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(streams())
def test_frame_splitting_same_frames_and_errors_both_ways(case) -> None:
    chunks, max_bytes = case
    assert _feed_all(chunks, max_bytes, True) == _feed_all(chunks, max_bytes, False)


def test_split_frames_stops_at_what_the_python_loop_handles() -> None:
    two = struct.pack(">i", 2) + b"ab" + struct.pack(">i", 1) + b"c"
    assert cp.split_frames(bytearray(two), 100, 64) == ([bytearray(b"ab"), bytearray(b"c")], 11)
    assert cp.split_frames(bytearray(two[:-1]), 100, 64) == ([bytearray(b"ab")], 6)  # incomplete
    assert cp.split_frames(bytearray(struct.pack(">i", -1) + two), 100, 64) == ([], 0)  # bad prefix
    assert cp.split_frames(bytearray(two), 1, 64) == ([], 0)  # over the bound
    assert cp.split_frames(bytearray(two), 100, 2) == ([], 0)  # big: filled in place by the Python loop
    assert cp.split_frames(bytearray(b"\x00\x00"), 100, 64) == ([], 0)


@pytest.mark.parametrize("n", [0, 1, 3, 64])
def test_new_produce_responses_same_objects_both_ways(n: int) -> None:
    saved = codecs._new_responses
    try:
        codecs._new_responses = None
        pure = codecs.new_produce_responses("tópic", 4, n)
        codecs._new_responses = cp.new_produce_responses
        fast = codecs.new_produce_responses("tópic", 4, n)
    finally:
        codecs._new_responses = saved
    assert fast == pure
    responses, parts = fast
    assert [r.partitions[0] for r in responses] == parts
    assert all(r.partitions[0] is p for r, p in zip(responses, parts, strict=True))  # filled in place
    assert len({id(p) for p in parts}) == n  # one object per request


def test_bind_responses_refuses_changed_defaults() -> None:
    @dataclasses.dataclass(slots=True)
    class Other:
        partitions: list = dataclasses.field(default_factory=list)
        throttle_time_ms: int = 5

    try:
        assert not cp.bind_responses(Other, m.ProducePartitionResponse)
        assert cp.new_produce_responses("t", 0, 1) is None
    finally:
        assert cp.bind_responses(m.ProduceResponse, m.ProducePartitionResponse)
