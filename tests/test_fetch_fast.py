"""The hand-written Fetch codecs (protocol/fetch_fast.py) against the schema-compiled codec.

For every Fetch version we serve: the fast encoders write the schema codec's bytes, split into the same
parts (big records and file regions stay their own parts); the fast decoders return the schema codec's
message, or None (the schema codec then decides) for shapes they leave to it; and on fuzzed bytes they
never raise and never accept what the schema codec rejects or reads differently.
"""

from __future__ import annotations

import os
import struct
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_logsource.broker.error_responses import error_response
from pyspark_logsource.broker.log.segment import FileRegion
from pyspark_logsource.protocol import codecs, fetch_fast
from pyspark_logsource.protocol import messages as m
from pyspark_logsource.protocol.codecs import CODECS
from pyspark_logsource.protocol.primitives import ProtocolError, Reader, Writer, is_region
from pyspark_logsource.protocol.schema import skip_tagged_fields

VERSIONS = range(fetch_fast.FIRST_VERSION, fetch_fast.LAST_VERSION + 1)
FETCH = int(m.ApiKey.FETCH)
_SETTINGS = settings(
    max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)


def test_the_fast_paths_know_every_field_of_the_fetch_messages():
    # a field added to a Fetch message switches the fast paths off (safe, but slow): teach them the field
    assert fetch_fast.ENABLED, "protocol/fetch_fast.py does not know a new Fetch message field; add it there"
    assert fetch_fast.FIRST_VERSION == codecs.SUPPORTED_VERSIONS[FETCH][0]
    assert fetch_fast.LAST_VERSION == codecs.SUPPORTED_VERSIONS[FETCH][1]


# ------------------------------------------------------------------ the schema codec, bypassing the fast paths


def schema_request_parts(header: m.RequestHeader, req: m.FetchRequest) -> list:
    w = Writer()
    CODECS[(FETCH, header.api_version)][0].write(w, codecs.APIS[FETCH].req_to(req, header.api_version))
    return w.frame(codecs.encode_request_header(header))


def schema_response_parts(cid: int, version: int, resp: m.FetchResponse) -> list:
    w = Writer()
    CODECS[(FETCH, version)][1].write(w, codecs.APIS[FETCH].resp_to(resp, version))
    return w.frame(struct.pack(">i", cid) + (b"\x00" if version >= 12 else b""))


def schema_request_body(version: int, body: bytes) -> m.FetchRequest:
    r = Reader(body)
    req = codecs.APIS[FETCH].req_from(CODECS[(FETCH, version)][0].read(r), version)
    r.done("FetchRequest")
    return req


def schema_response_body(version: int, body: bytes) -> m.FetchResponse:
    r = Reader(body)
    resp = codecs.APIS[FETCH].resp_from(CODECS[(FETCH, version)][1].read(r), version)
    r.done("FetchResponse")
    return resp


def shape(parts: list) -> list:
    """Parts as compared: bytes-likes as bytes (boundaries included), regions as they are."""
    return [p if is_region(p) else bytes(p) for p in parts]


def wire(parts: list) -> bytes:
    """What the transport sends: bytes parts as they are, regions read from their file (sendfile)."""
    return b"".join(
        os.pread(p.file.fileno(), p.length, p.position) if is_region(p) else bytes(p) for p in parts
    )


def request_body(parts: list, version: int) -> bytes:
    """The body of a request frame: after size, the v1 header and (flexible) its tagged fields."""
    frame = wire(parts)
    r = Reader(frame, 4)
    codecs.decode_request_header(r)
    if version >= 12:
        skip_tagged_fields(r)
    return frame[r.pos :]


def response_body(parts: list, version: int) -> bytes:
    frame = wire(parts)
    return frame[9:] if version >= 12 else frame[8:]


def fast_decode(fn, body: bytes, version: int):
    r = Reader(body)
    got = fn(r, version)
    if got is not None:
        assert r.pos == len(body)
    else:
        assert r.pos == 0
    return got


# ------------------------------------------------------------------ typed messages


names = st.one_of(
    st.sampled_from(["t", "topic", "__consumer_offsets", "a" * 249, "é-topic"]), st.text(max_size=8)
)
i32 = st.one_of(st.integers(-2, 3), st.integers(-(1 << 31), (1 << 31) - 1))
i64 = st.one_of(st.integers(-2, 3), st.integers(-(1 << 63), (1 << 63) - 1))
records = st.one_of(st.none(), st.binary(max_size=60), st.sampled_from([b"", b"\x00" * 70_000]))

partitions = st.builds(m.FetchPartition, names, i32, i64, i32, i64, i32, i32)
requests = st.builds(
    m.FetchRequest,
    st.lists(partitions, max_size=4),
    i32,
    i32,
    i32,
    st.integers(0, 1),
    i32,
    i32,
    i32,
    st.one_of(st.just(""), names),
)
aborted = st.one_of(st.none(), st.lists(st.builds(m.AbortedTransaction, i64, i64), max_size=3))
partition_responses = st.builds(
    m.FetchPartitionResponse,
    names,
    i32,
    st.integers(-(1 << 15), (1 << 15) - 1),
    i64,
    i64,
    i64,
    records,
    aborted,
    i32,
    st.sampled_from([-1, -1, 3]),
    st.sampled_from([-1, -1, 77]),
)
responses = st.builds(
    m.FetchResponse,
    st.lists(partition_responses, max_size=4),
    i32,
    st.integers(-(1 << 15), (1 << 15) - 1),
    i32,
)
headers = st.builds(
    m.RequestHeader,
    st.just(FETCH),
    st.sampled_from(list(VERSIONS)),
    i32,
    st.one_of(st.none(), st.just("logsource-consumer"), st.text(max_size=6)),
)


def check_request(header: m.RequestHeader, req: m.FetchRequest) -> None:
    v = header.api_version
    fast = fetch_fast.encode_request(header, req)
    try:
        want = schema_request_parts(header, req)
    except ProtocolError:
        assert fast is None  # out of range for the wire: the schema codec raises the error
        return
    if fast is not None:
        assert shape(fast) == shape(want)
    # the public entry point writes the schema codec's frame either way
    assert shape(codecs.encode_request(header, req)) == shape(want)
    body = request_body(want, v)
    got = fast_decode(fetch_fast.decode_request, body, v)
    expected = schema_request_body(v, body)
    if got is not None:
        assert got == expected


def check_response(cid: int, v: int, resp: m.FetchResponse) -> None:
    fast = fetch_fast.encode_response(cid, v, resp)
    try:
        want = schema_response_parts(cid, v, resp)
    except ProtocolError:
        assert fast is None
        return
    if fast is not None:
        assert shape(fast) == shape(want)
    assert shape(codecs.encode_response(m.RequestHeader(FETCH, v, cid), resp)) == shape(want)
    body = response_body(want, v)
    got = fast_decode(fetch_fast.decode_response, body, v)
    expected = schema_response_body(v, body)
    if got is not None:
        assert got == expected
    # and the public entry point (after the correlation id: the v1 header's tagged fields, then the body)
    assert codecs.decode_response_body(FETCH, v, Reader((b"\x00" if v >= 12 else b"") + body)) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_common_shapes_take_the_fast_paths_with_the_schema_codecs_bytes(version):
    header = m.RequestHeader(FETCH, version, 42, "logsource-consumer")
    shapes = [
        m.FetchRequest([m.FetchPartition("b1000", 0, 123_456, 200 * 1024)], 100, 1, 4 << 20),
        m.FetchRequest([m.FetchPartition("t", p, 10 * p, 1 << 20) for p in range(3)], isolation_level=1),
        # a follower: replica id, log start offset, leader epochs
        m.FetchRequest(
            [m.FetchPartition("t", 1, 99, 1 << 20, 5, 7, 6), m.FetchPartition("u", 0, 0)],
            500,
            1,
            replica_id=2,
            rack_id="rack-a",
        ),
        m.FetchRequest([]),
    ]
    for req in shapes:
        assert fetch_fast.encode_request(header, req) is not None
        check_request(header, req)
        assert (
            fast_decode(
                fetch_fast.decode_request, request_body(schema_request_parts(header, req), version), version
            )
            is not None
        )
    with tempfile.TemporaryFile() as f:
        f.write(os.urandom(300_000))
        f.flush()
        resps = [
            m.FetchResponse([m.FetchPartitionResponse("b1000", 0, 0, 10_000, 10_000, 0, b"r" * 1000)]),
            m.FetchResponse(
                [
                    m.FetchPartitionResponse("t", 0, 0, 5, 5, 0, FileRegion(f, 100, 200_000)),
                    m.FetchPartitionResponse("t", 1, 0, 5, 5, 0, FileRegion(f, 0, 0)),
                    m.FetchPartitionResponse("t", 2, 1, -1, -1, -1, None),
                    m.FetchPartitionResponse(
                        "u", 0, 0, 9, 7, 0, memoryview(b"x" * 70_000), [m.AbortedTransaction(5, 3)]
                    ),
                    m.FetchPartitionResponse("t", 3, 0, 9, 7, 0, b"", []),
                ],
                3,
                0,
                0,
            ),
            m.FetchResponse([], 0, 0, 0),
        ]
        for resp in resps:
            parts = fetch_fast.encode_response(9, version, resp)
            assert parts is not None
            check_response(9, version, resp)
            body = response_body(parts, version)
            assert fast_decode(fetch_fast.decode_response, body, version) is not None


@given(header=headers, req=requests)
@_SETTINGS
def test_generated_requests(header, req):
    check_request(header, req)


@given(cid=i32, version=st.sampled_from(list(VERSIONS)), resp=responses)
@_SETTINGS
def test_generated_responses(cid, version, resp):
    check_response(cid, version, resp)


@pytest.mark.parametrize("version", VERSIONS)
def test_an_error_partition_carries_empty_records_never_null(version):
    # Kafka answers an error partition with MemoryRecords.EMPTY; librdkafka fails the whole response over a
    # null record set ("invalid MessageSetSize -1"), so it never saw OFFSET_OUT_OF_RANGE (issue 21, bug 1)
    resp = m.FetchResponse([m.FetchPartitionResponse("t", 0, 1, 10, 10, 0, None)])
    # the records field ends the frame: int32 0, or (flexible) compact length 1, then three empty tag sections
    tail = b"\x01\x00\x00\x00" if version >= 12 else b"\x00\x00\x00\x00"
    fast = fetch_fast.encode_response(7, version, resp)
    assert fast is not None
    for parts in (
        fast,
        schema_response_parts(7, version, resp),
        codecs.encode_response(m.RequestHeader(FETCH, version, 7), resp),
    ):
        frame = wire(parts)
        assert frame.endswith(tail), frame.hex()
        (p,) = schema_response_body(version, response_body(parts, version)).partitions
        assert p.error_code == 1 and p.records is not None and bytes(p.records) == b""
    # the shape the fast path leaves to the schema codec (a diverging epoch, v12) and Kafka-style error
    # responses (every partition with the request's error) are written empty too
    resps = [
        m.FetchResponse([m.FetchPartitionResponse("t", 0, 1, 5, 5, 0, None, None, -1, 3, 40)]),
        error_response(
            FETCH, m.FetchRequest([m.FetchPartition("t", 0, 0), m.FetchPartition("u", 1, 0)]), 6, None
        ),
    ]
    for r in resps:
        parts = codecs.encode_response(m.RequestHeader(FETCH, version, 7), r)
        got = schema_response_body(version, response_body(parts, version)).partitions
        assert [bytes(p.records) for p in got] == [b""] * len(r.partitions)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_null_record_set_from_a_peer_still_decodes(version):
    # Kafka's schema makes the field nullable, so a null from another broker is read (as None), not refused
    w = Writer()
    d = codecs.APIS[FETCH].resp_to(m.FetchResponse([m.FetchPartitionResponse("t", 0, 1)]), version)
    d["responses"][0]["partitions"][0]["records"] = None
    CODECS[(FETCH, version)][1].write(w, d)
    body = b"".join(bytes(p) for p in w.frame(b""))[4:]
    assert body.endswith(b"\x00\x00\x00\x00" if version >= 12 else b"\xff\xff\xff\xff")
    want = schema_response_body(version, body)
    assert want.partitions[0].records is None
    got = fast_decode(fetch_fast.decode_response, body, version)
    assert got is None or got == want


def test_shapes_the_fast_paths_leave_to_the_schema_codec():
    # a diverging epoch for a follower (v12): a tagged field
    resp = m.FetchResponse([m.FetchPartitionResponse("t", 0, 0, 5, 5, 0, b"", None, -1, 3, 40)])
    assert fetch_fast.encode_response(1, 12, resp) is None
    body = response_body(codecs.encode_response(m.RequestHeader(FETCH, 12, 1), resp), 12)
    assert fast_decode(fetch_fast.decode_response, body, 12) is None
    got = codecs.decode_response_body(FETCH, 12, Reader(b"\x00" + body))
    assert (got.partitions[0].diverging_epoch, got.partitions[0].diverging_end_offset) == (3, 40)
    # forgotten topics (fetch sessions) and a cluster id (tag 0), as Kafka's followers may send
    w = Writer()
    d = codecs.APIS[FETCH].req_to(m.FetchRequest([m.FetchPartition("t", 0, 1)]), 12)
    d["forgotten_topics_data"] = [{"topic": "gone", "partitions": [1]}]
    d["cluster_id"] = "cluster"
    CODECS[(FETCH, 12)][0].write(w, d)
    body = b"".join(bytes(p) for p in w.frame(b""))[4:]
    assert fast_decode(fetch_fast.decode_request, body, 12) is None
    got = codecs.decode_request_body(m.RequestHeader(FETCH, 12, 1), Reader(b"\x00" + body))
    assert got.partitions == [m.FetchPartition("t", 0, 1)]
    assert got.forgotten == [("gone", 1)]


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 7])
def test_an_incremental_fetch_with_forgotten_partitions_takes_the_schema_codec(version):
    # KIP-227: an incremental fetch names its session and epoch (fast path) and may forget partitions
    # (the schema codec); both round-trip through the public entry points
    header = m.RequestHeader(FETCH, version, 7, "c")
    incremental = m.FetchRequest([m.FetchPartition("t", 0, 5)], session_id=1234, session_epoch=3)
    assert fetch_fast.encode_request(header, incremental) is not None
    check_request(header, incremental)
    forgetting = m.FetchRequest(
        [m.FetchPartition("t", 0, 5)],
        session_id=1234,
        session_epoch=4,
        forgotten=[("t", 1), ("u", 0), ("t", 2)],
    )
    assert fetch_fast.encode_request(header, forgetting) is None
    parts = codecs.encode_request(header, forgetting)
    body = request_body(parts, version)
    assert fast_decode(fetch_fast.decode_request, body, version) is None
    got = codecs.decode_request_body(header, Reader(body if version < 12 else b"\x00" + body))
    assert got.forgotten == [("t", 1), ("t", 2), ("u", 0)]  # nested by topic on the wire
    assert (got.session_id, got.session_epoch, got.partitions) == (1234, 4, forgetting.partitions)


# ------------------------------------------------------------------ fuzzed bytes


def mutations(body: bytes, data) -> list[bytes]:
    out = [body[: data.draw(st.integers(0, len(body)), label="cut")], body + b"\x00"]
    if body:
        flip = bytearray(body)
        at = data.draw(st.integers(0, len(body) - 1), label="at")
        flip[at] ^= data.draw(st.integers(1, 255), label="xor")
        out.append(bytes(flip))
    return out


def agree(fast_fn, schema_fn, body: bytes, version: int) -> None:
    got = fast_decode(fast_fn, body, version)
    if got is None:
        return
    try:
        expected = schema_fn(version, body)
    except ProtocolError:
        pytest.fail(f"the fast decoder accepted bytes the schema codec rejects: {body!r}")
    assert got == expected


@given(header=headers, req=requests, data=st.data())
@_SETTINGS
def test_fuzzed_requests_decode_as_the_schema_codec_does(header, req, data):
    try:
        body = request_body(schema_request_parts(header, req), header.api_version)
    except ProtocolError:
        return
    for b in mutations(body, data):
        agree(fetch_fast.decode_request, schema_request_body, b, header.api_version)


@given(version=st.sampled_from(list(VERSIONS)), resp=responses, data=st.data())
@_SETTINGS
def test_fuzzed_responses_decode_as_the_schema_codec_does(version, resp, data):
    try:
        body = response_body(schema_response_parts(1, version, resp), version)
    except ProtocolError:
        return
    for b in mutations(body, data):
        agree(fetch_fast.decode_response, schema_response_body, b, version)


@given(version=st.sampled_from(list(VERSIONS)), body=st.binary(max_size=120))
@_SETTINGS
def test_random_bytes_never_raise_from_the_fast_decoders(version, body):
    agree(fetch_fast.decode_request, schema_request_body, body, version)
    agree(fetch_fast.decode_response, schema_response_body, body, version)
