"""The sans-IO protocol: round trips of every API, framing bounds, and fuzzing."""

from __future__ import annotations

import os
import struct
import tempfile
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_logsource.errors import UnsupportedVersion
from pyspark_logsource.format import batch
from pyspark_logsource.protocol import (
    APIS,
    CODECS,
    SUPPORTED_VERSIONS,
    ApiKey,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BrokerMetadata,
    ClientConnection,
    ConfigEntry,
    ConfigResource,
    CreatableTopic,
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FrameDecoder,
    FrameTooLarge,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitPartition,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionMetadata,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProtocolError,
    RequestHeader,
    RequestReceived,
    ServerConnection,
    TopicMetadata,
    UnsupportedRequest,
    decode_request_header,
    decode_response_body,
    encode_request,
    frame_bytes,
    is_region,
    part_length,
)
from pyspark_logsource.protocol import producer_txn_messages as ptm
from pyspark_logsource.protocol import txn_messages as tm
from pyspark_logsource.protocol.primitives import Reader

# one request and one response per API, with every field away from its default
REQUESTS = [
    ProduceRequest(
        [
            ProducePartitionData("a", 0, b"xyz"),
            ProducePartitionData("b", 3, None),
            ProducePartitionData("a", 1, b""),
        ],
        acks=-1,
        timeout_ms=1234,
        transactional_id="tx",
    ),
    FetchRequest(
        [FetchPartition("a", 0, 17, 1000, 3), FetchPartition("b", 2, 0, 5)],
        max_wait_ms=250,
        min_bytes=10,
        max_bytes=999,
        isolation_level=1,
        replica_id=-1,
    ),
    ListOffsetsRequest(
        [ListOffsetsPartition("a", 0, -2), ListOffsetsPartition("a", 1, 1_700_000_000_000)], 1, 5
    ),
    MetadataRequest(["a", "b"], True),
    MetadataRequest(None, False),
    OffsetCommitRequest(
        "g", [OffsetCommitPartition("a", 0, 10, "meta"), OffsetCommitPartition("b", 1, 0)], 3, "m"
    ),
    OffsetFetchRequest("g", [("a", 0), ("b", 5)]),
    OffsetFetchRequest("g", None),
    ApiVersionsRequest(),
    CreateTopicsRequest([CreatableTopic("a", 3, 1, {"retention.ms": "10", "x": None})], 100, True),
    DeleteTopicsRequest(["a", "b"], 77),
    InitProducerIdRequest("tx", 9, 42, 3),
    FindCoordinatorRequest("group-1", 0),
    DescribeConfigsRequest(
        [ConfigResource(2, "a", ["retention.ms"]), ConfigResource(4, "0", None)], True, True
    ),
    DescribeClusterRequest(True, 1),
    tm.StagedTxnsRequest(
        tm.COMMIT,
        "spark-query-1",
        7,
        30000,
        [tm.StagedProducer(5, 1, {("a", 0): 10, ("b", 2): 3}), tm.StagedProducer(6, 0, {})],
    ),
    ptm.AddPartitionsToTxnRequest.single("tx", 7, 3, [("a", 0), ("a", 2), ("b", 1)]),
    ptm.AddPartitionsToTxnRequest(
        [
            ptm.TxnPartitions("tx", 7, 3, [("a", 0), ("b", 1)], verify_only=True),
            ptm.TxnPartitions("ty", 8, 0, [("c", 2)]),
        ]
    ),
    ptm.AddOffsetsToTxnRequest("tx", 7, 3, "g"),
    ptm.EndTxnRequest("tx", 7, 3, True),
    ptm.TxnOffsetCommitRequest(
        "tx",
        "g",
        7,
        3,
        [ptm.TxnOffset("a", 0, 12, "m", 4), ptm.TxnOffset("b", 1, 5, None, 2)],
        9,
        "m-1",
        "i-1",
    ),
    tm.WriteTxnMarkersRequest(
        [
            tm.TxnMarker(5, 2, True, [("a", 0), ("a", 1), ("b", 0)], 3),
            tm.TxnMarker(6, 1, False, [("a", 2)], 0),
        ]
    ),
]

RESPONSES = [
    ProduceResponse(
        partitions=[
            ProducePartitionResponse("a", 0, 0, 10, 11, 0),
            ProducePartitionResponse("b", 3, 3, -1, -1, -1, "nope"),
        ]
    ),
    # an error partition's records: written empty even when None (test_fetch_fast pins that), so b"" round-trips
    FetchResponse(
        partitions=[
            FetchPartitionResponse("a", 0, 0, 100, 100, 0, b"data"),
            FetchPartitionResponse("b", 1, 1, -1, -1, -1, b""),
        ]
    ),
    ListOffsetsResponse(partitions=[ListOffsetsPartitionResponse("a", 0, 0, 5, 6)]),
    MetadataResponse(
        brokers=[BrokerMetadata(0, "127.0.0.1", 9092, None), BrokerMetadata(1, "h", 1, "r")],
        cluster_id="c",
        controller_id=0,
        topics=[
            TopicMetadata("a", [PartitionMetadata(0, 0, 2, [0], [0], [], 0)], False, 0),
            TopicMetadata("bad", [], False, 17),
        ],
    ),
    MetadataResponse(),
    OffsetCommitResponse(
        partitions=[OffsetCommitPartitionResponse("a", 0, 0), OffsetCommitPartitionResponse("b", 1, 3)]
    ),
    OffsetFetchResponse(partitions=[OffsetFetchPartitionResponse("a", 0, 10, "meta", 0)]),
    OffsetFetchResponse(),
    ApiVersionsResponse(api_keys=[ApiVersion(0, 0, 0), ApiVersion(18, 0, 3)]),
    CreateTopicsResponse(
        topics=[CreateTopicResult("a", 0, None, 3), CreateTopicResult("b", 36, "exists", -1)]
    ),
    DeleteTopicsResponse(topics=[DeleteTopicResult("a"), DeleteTopicResult("b", 3, "unknown")]),
    InitProducerIdResponse(producer_id=1 << 40, producer_epoch=7),
    FindCoordinatorResponse(0, None, 3, "host", 9092, 0, "group-1"),
    DescribeConfigsResponse(
        [
            DescribeConfigsResult(2, "a", 0, None, [ConfigEntry("retention.ms", "10", False, 1)]),
            DescribeConfigsResult(4, "0", 42, "nope"),
        ]
    ),
    DescribeClusterResponse(0, None, "cluster", 0, [BrokerMetadata(0, "h", 1, None)]),
    tm.StagedTxnsResponse(48, "staged data was aborted", 6, False),
    ptm.AddPartitionsToTxnResponse({"tx": {("a", 0): 0, ("a", 2): 55, ("b", 1): 3}}, 5),
    ptm.AddPartitionsToTxnResponse({"tx": {("a", 0): 0, ("b", 1): 48}, "ty": {("c", 2): 49}}, 0, 0),
    ptm.AddOffsetsToTxnResponse(90, 5),
    ptm.EndTxnResponse(48, -1, -1, 5),
    ptm.TxnOffsetCommitResponse({("a", 0): 0, ("b", 1): 47}, 5),
    tm.WriteTxnMarkersResponse(
        [tm.TxnMarkerResult(5, {("a", 0): 0, ("a", 1): 6}), tm.TxnMarkerResult(6, {("a", 2): 0})]
    ),
]


def _normalise(obj):
    """Turn memoryviews into bytes so decoded messages compare equal to the originals."""
    if isinstance(obj, memoryview):
        return bytes(obj)
    if hasattr(obj, "__dataclass_fields__"):
        return type(obj)(**{k: _normalise(getattr(obj, k)) for k in obj.__dataclass_fields__})
    if isinstance(obj, list):
        return [_normalise(x) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_normalise(x) for x in obj)
    return obj


def _grouped(req):
    """Per-partition lists come back grouped by topic in order of first appearance."""
    parts = getattr(req, "partitions", None)
    if isinstance(parts, list) and parts and hasattr(parts[0], "topic"):
        order = {}
        for p in parts:
            order.setdefault(p.topic, len(order))
        req.partitions = sorted(parts, key=lambda p: order[p.topic])
    return req


def _key_of_response(resp) -> int:
    return next(k for k, a in APIS.items() if a.response is type(resp))


#: every (api key, version) the codec table holds
PAIRS = sorted(CODECS)


def _wire_request(req, version):
    client, server = ClientConnection("client-1"), ServerConnection()
    cid, data = client.request_bytes(req, version)
    (ev,) = server.receive_data(data)
    assert isinstance(ev, RequestReceived)
    assert ev.header == RequestHeader(int(req.API_KEY), version, cid, "client-1")
    return _normalise(ev.request)


def _wire_response(resp, version):
    key = _key_of_response(resp)
    req = next(r for r in REQUESTS if isinstance(r, APIS[key].request))
    client = ClientConnection()
    cid, _ = client.send_request(req, version)
    parts = ServerConnection.response_parts(RequestHeader(key, version, cid, None), resp)
    (got,) = client.receive_data(frame_bytes(parts))
    assert got.correlation_id == cid and got.api_key == key and client.in_flight == 0
    return _normalise(got.response)


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: type(r).__name__)
def test_request_round_trip_at_the_newest_version(req):
    key = int(req.API_KEY)
    client, server = ClientConnection("client-1"), ServerConnection()
    cid, data = client.request_bytes(req)
    # deliver one byte at a time: framing must reassemble
    events = []
    for i in range(len(data)):
        events += server.receive_data(data[i : i + 1])
    assert len(events) == 1 and isinstance(events[0], RequestReceived)
    assert events[0].header == RequestHeader(key, client.versions[key], cid, "client-1")
    assert _normalise(events[0].request) == _grouped(_normalise(req))


@pytest.mark.parametrize("key,version", PAIRS)
def test_every_version_round_trips_what_it_carries(key, version):
    # what a version cannot carry comes back as Kafka's default; one more trip changes nothing
    for req in (r for r in REQUESTS if int(r.API_KEY) == key):
        if key == ApiKey.OFFSET_FETCH and version < 2 and req.partitions is None:
            continue  # v0/v1 cannot ask for all partitions
        once = _wire_request(req, version)
        assert _wire_request(once, version) == once
        if isinstance(getattr(req, "partitions", None), list) and hasattr(req.partitions[0], "topic"):
            assert [(p.topic, p.partition) for p in once.partitions] == [
                (p.topic, p.partition) for p in _grouped(_normalise(req)).partitions
            ]
    for resp in (r for r in RESPONSES if _key_of_response(r) == key):
        once = _wire_response(resp, version)
        assert _wire_response(once, version) == once


@pytest.mark.parametrize("resp", RESPONSES, ids=lambda r: type(r).__name__)
def test_response_round_trip_at_the_newest_version(resp):
    key = _key_of_response(resp)
    assert _wire_response(resp, SUPPORTED_VERSIONS[key][1]) == _grouped(_normalise(resp))


def test_flexible_versions_use_header_v2_and_response_header_v1_except_api_versions():
    # Metadata v12 is flexible: client id stays a classic string, then an empty tagged-field section
    _, data = ClientConnection("c").request_bytes(MetadataRequest(["t"]), 12)
    assert data[4:14] == struct.pack(">hhih", 3, 12, 0, 1) and data[14:15] == b"c" and data[15] == 0
    parts = ServerConnection.response_parts(RequestHeader(3, 12, 7), MetadataResponse())
    assert frame_bytes(parts)[4:9] == struct.pack(">i", 7) + b"\x00"
    # ApiVersions v3 is flexible, but its response header is v0 so that old clients can read it
    parts = ServerConnection.response_parts(RequestHeader(18, 3, 7), ApiVersionsResponse())
    assert frame_bytes(parts)[4:10] == struct.pack(">ih", 7, 0)


def test_produce_fast_paths_write_the_same_bytes_as_the_schema_codec():
    from pyspark_logsource.protocol import codecs
    from pyspark_logsource.protocol.primitives import Writer

    req = ProduceRequest([ProducePartitionData("topic", 3, b"x" * 100)], acks=-1, timeout_ms=999)
    resp = ProduceResponse([ProducePartitionResponse("topic", 3, 0, 42, 1234, 7)], throttle_time_ms=5)
    # the request's bytes around the records are built once per (client, acks, timeout, partition)
    # and reused: later requests (other correlation ids, records, sizes, client ids) match too
    reqs = [
        req,
        ProduceRequest([ProducePartitionData("topic", 3, b"y" * 70_000)], acks=-1, timeout_ms=999),
        ProduceRequest([ProducePartitionData("t\u00e9", 0, bytearray(b"z"))], acks=0, timeout_ms=1),
    ]
    for version in range(3, 9):
        for cid, client, r in [
            (11, "cli", req),
            (12, "cli", req),
            (13, None, req),
            (14, "cli", reqs[1]),
            (2**31 - 1, "\u00e9", reqs[2]),
            (0, "cli", reqs[2]),
        ]:
            header = RequestHeader(0, version, cid, client)
            fast = frame_bytes(encode_request(header, r))
            w = Writer()
            CODECS[(0, version)][0].write(w, codecs.APIS[0].req_to(r, version))
            assert fast == frame_bytes(w.frame(codecs.encode_request_header(header)))
        header = RequestHeader(0, version, 11, "cli")
        fast = frame_bytes(ServerConnection.response_parts(header, resp))
        w = Writer()
        CODECS[(0, version)][1].write(w, codecs.APIS[0].resp_to(resp, version))
        assert fast == frame_bytes(w.frame(struct.pack(">i", 11)))


def test_top_level_errors_live_in_each_apis_own_fields():
    client = ClientConnection()
    cid, _ = client.send_request(InitProducerIdRequest())
    parts = ServerConnection.response_parts(RequestHeader(22, 4, cid), InitProducerIdResponse(error_code=47))
    (got,) = client.receive_data(frame_bytes(parts))
    assert got.response.error_code == 47


def test_pipelined_requests_and_responses_in_one_buffer():
    client, server = ClientConnection(), ServerConnection()
    data = b"".join(client.request_bytes(MetadataRequest([f"t{i}"]))[1] for i in range(50))
    events = server.receive_data(data)
    assert [e.request.topics[0] for e in events] == [f"t{i}" for i in range(50)]
    out = b"".join(
        frame_bytes(ServerConnection.response_parts(e.header, MetadataResponse(cluster_id=str(i))))
        for i, e in enumerate(events)
    )
    got = client.receive_data(out)
    assert [g.response.cluster_id for g in got] == [str(i) for i in range(50)]


def test_acks_zero_expects_no_response():
    client = ClientConnection()
    client.send_request(ProduceRequest([ProducePartitionData("a", 0, b"x")], acks=0))
    assert client.in_flight == 0
    client.send_request(ProduceRequest([ProducePartitionData("a", 0, b"x")], acks=1))
    assert client.in_flight == 1


def test_unknown_api_key_and_version_are_unsupported_requests():
    server, client = ServerConnection(), ClientConnection()
    for key, version in [(99, 0), (int(ApiKey.FETCH), 13), (int(ApiKey.PRODUCE), 2), (-1, 0)]:
        body = struct.pack(">hhih", key, version, 5, -1) + b"whatever"
        (ev,) = server.receive_data(struct.pack(">i", len(body)) + body)
        assert isinstance(ev, UnsupportedRequest) and ev.header.correlation_id == 5 and not ev.answerable
    # an unknown ApiVersions version: a v0 body with error 35 and our ranges, which the client reads
    body = struct.pack(">hhih", 18, 9, 5, -1) + b"whatever"
    (ev,) = server.receive_data(struct.pack(">i", len(body)) + body)
    assert isinstance(ev, UnsupportedRequest) and ev.answerable
    cid, _ = client.send_request(ApiVersionsRequest(), 4)
    data = bytearray(frame_bytes(ServerConnection.unsupported_parts(ev.header)))
    struct.pack_into(">i", data, 4, cid)
    (got,) = client.receive_data(data)
    assert got.response.error_code == UnsupportedVersion.code
    assert {(a.api_key, a.min_version, a.max_version) for a in got.response.api_keys} == {
        (k, lo, hi) for k, (lo, hi) in SUPPORTED_VERSIONS.items()
    }


def test_correlation_mismatch_and_unsolicited_response_raise():
    client = ClientConnection()
    parts = ServerConnection.response_parts(RequestHeader(18, 4, 0), ApiVersionsResponse())
    with pytest.raises(ProtocolError, match="no request in flight"):
        client.receive_data(frame_bytes(parts))
    client = ClientConnection()
    client.send_request(ApiVersionsRequest())
    parts = ServerConnection.response_parts(RequestHeader(18, 4, 99), ApiVersionsResponse())
    with pytest.raises(ProtocolError, match="correlation id 99"):
        client.receive_data(frame_bytes(parts))


def test_frame_claiming_2gb_is_refused_before_allocation():
    dec = FrameDecoder(max_frame_bytes=100 * 1024 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(FrameTooLarge, match="2147483647"):
            dec.feed(struct.pack(">i", 2**31 - 1) + b"\x00" * 100)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    with pytest.raises(FrameTooLarge):
        FrameDecoder().feed(struct.pack(">i", -5))
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_frame_bytes=10).feed(struct.pack(">i", 11))
    assert FrameDecoder(max_frame_bytes=10).feed(struct.pack(">i", 10) + b"x" * 10) == [bytearray(b"x" * 10)]


BIG = 1 << 20  # big fetch answers arrive in many reads


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 7, 1000, BIG - 1, BIG, BIG + 12345]), min_size=1, max_size=5),
    cuts=st.lists(st.one_of(st.integers(1, 8), st.integers(1, 1 << 21)), min_size=1, max_size=12),
)
def test_frames_survive_any_chunking_including_big_frames(sizes, cuts):
    frames = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    dec = FrameDecoder(max_frame_bytes=8 << 20)
    got: list[bytes] = []
    pos = 0
    for step in [*cuts, len(stream)]:  # the cuts in turn, then the rest at once
        got += [bytes(f) for f in dec.feed(memoryview(stream)[pos : pos + step])]
        pos = min(pos + step, len(stream))
        if pos < len(stream):
            assert dec.buffered == pos - sum(4 + len(f) for f in got)
    assert got == frames
    assert not dec.in_frame and dec.buffered == 0


def test_lying_lengths_inside_a_frame_are_refused():
    hdr = struct.pack(">hhih", 3, 1, 1, -1)
    # metadata topics array claiming 2**31-1 items in a 5-byte body
    body = hdr + struct.pack(">i", 2**31 - 1) + b"\x00"
    with pytest.raises(ProtocolError, match="cannot fit"):
        ServerConnection().receive_data(struct.pack(">i", len(body)) + body)
    # produce records claiming 1 GB
    body = hdr[:0] + struct.pack(">hhih", 0, 3, 1, -1) + struct.pack(">hhi", -1, 1, 0)
    body += (
        struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", 1)
        + struct.pack(">ii", 0, 1 << 30)
    )
    with pytest.raises(ProtocolError, match="truncated bytes"):
        ServerConnection().receive_data(struct.pack(">i", len(body)) + body)
    # trailing garbage
    _, good = ClientConnection().request_bytes(ApiVersionsRequest())
    bad = bytearray(good) + b"zz"
    struct.pack_into(">i", bad, 0, len(bad) - 4)
    with pytest.raises(ProtocolError, match="trailing"):
        ServerConnection().receive_data(bad)
    # invalid utf-8 client id
    body = struct.pack(">hhih", 18, 0, 1, 2) + b"\xff\xfe"
    with pytest.raises(ProtocolError, match="UTF-8"):
        ServerConnection().receive_data(struct.pack(">i", len(body)) + body)


def test_produce_records_decode_as_writable_zero_copy_slices():
    data = batch.encode([b"v1", b"v2"], producer_id=-1, producer_epoch=-1, base_sequence=-1)
    _, frame = ClientConnection().request_bytes(ProduceRequest([ProducePartitionData("t", 0, bytes(data))]))
    (ev,) = ServerConnection().receive_data(frame)
    rec = ev.request.partitions[0].records
    assert isinstance(rec, memoryview) and not rec.readonly and bytes(rec) == bytes(data)
    batch.set_base_offset(rec, 77)  # the broker stamps in place
    assert batch.read_header(rec).base_offset == 77


def test_large_produce_payload_is_a_separate_part():
    payload = os.urandom(200_000)
    _, parts = ClientConnection().send_request(ProduceRequest([ProducePartitionData("t", 0, payload)]))
    assert any(p is payload for p in parts)
    (ev,) = ServerConnection().receive_data(frame_bytes(parts))
    assert bytes(ev.request.partitions[0].records) == payload


class _Region:
    """A file region as the log hands it out (file, position, length)."""

    def __init__(self, file, position, length):
        self.file, self.position, self.length = file, position, length


def test_fetch_response_with_file_regions_is_zero_copy():
    with tempfile.TemporaryFile() as f:
        content = os.urandom(300_000)
        f.write(content)
        f.flush()
        regions = [_Region(f, 1000, 50_000), _Region(f, 100_000, 0), _Region(f, 200_000, 100_000)]
        resp = FetchResponse(
            partitions=[FetchPartitionResponse("t", i, 0, 10, 10, 0, r) for i, r in enumerate(regions)]
        )
        client = ClientConnection()
        cid, _ = client.send_request(FetchRequest([FetchPartition("t", i, 0) for i in range(3)]))
        parts = ServerConnection.response_parts(RequestHeader(1, SUPPORTED_VERSIONS[1][1], cid), resp)
        assert [p for p in parts if is_region(p)] == [regions[0], regions[2]]
        size = struct.unpack_from(">i", parts[0])[0]
        assert size + 4 == sum(part_length(p) for p in parts)
        # what the transport does: bytes parts written, regions read from the file (sendfile)
        wire = bytearray()
        for p in parts:
            if is_region(p):
                wire += os.pread(p.file.fileno(), p.length, p.position)
            else:
                wire += p
        (got,) = client.receive_data(bytes(wire))
        recs = [p.records for p in got.response.partitions]
        assert all(isinstance(r, memoryview) for r in recs)
        assert bytes(recs[0]) == content[1000:51_000]
        assert bytes(recs[1]) == b""
        assert bytes(recs[2]) == content[200_000:300_000]
        with pytest.raises(TypeError):
            frame_bytes(parts)


def test_encoding_out_of_range_values_raises_protocol_error():
    with pytest.raises(ProtocolError, match="too long"):
        encode_request(RequestHeader(3, 1, 0), MetadataRequest(["x" * 40000]))
    with pytest.raises(ProtocolError, match="cannot encode"):
        encode_request(RequestHeader(1, 11, 0), FetchRequest([FetchPartition("t", 2**40, 0)]))


# ------------------------------------------------------------------ fuzzing


def _valid_frames() -> list[bytes]:
    out = []
    for req in REQUESTS:
        lo, hi = SUPPORTED_VERSIONS[int(req.API_KEY)]
        for version in range(lo, hi + 1):
            try:
                out.append(ClientConnection("fuzz").request_bytes(req, version)[1])
            except ProtocolError:
                pass  # a request this version cannot express
    return out


VALID = _valid_frames()


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_fuzz_server_random_bytes(data):
    server = ServerConnection(max_frame_bytes=1 << 16)
    try:
        server.receive_data(data)
    except ProtocolError:
        pass


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(VALID),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=8),
    st.integers(0, 400),
)
def test_fuzz_server_mutated_frames(frame, flips, cut):
    body = bytearray(frame[4:])
    for pos, val in flips:
        body[pos % len(body)] = val
    if cut < 20:  # a complete frame whose body is cut short
        del body[max(0, len(body) - cut) :]
    data = struct.pack(">i", len(body)) + bytes(body)
    server = ServerConnection(max_frame_bytes=1 << 16)
    try:
        events = server.receive_data(data)
    except ProtocolError:
        return
    for ev in events:
        assert isinstance(ev, (RequestReceived, UnsupportedRequest))


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, len(RESPONSES) - 1),
    st.integers(0, 20),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
    st.binary(max_size=40),
)
def test_fuzz_client_mutated_responses(idx, pick, flips, tail):
    resp = RESPONSES[idx]
    key = _key_of_response(resp)
    lo, hi = SUPPORTED_VERSIONS[key]
    version = lo + pick % (hi - lo + 1)
    body = bytearray(frame_bytes(ServerConnection.response_parts(RequestHeader(key, version, 0), resp)))[8:]
    for pos, val in flips:
        if body:
            body[pos % len(body)] = val
    body += tail if len(tail) % 3 == 0 else b""
    try:
        decode_response_body(key, version, Reader(bytes(body)))
    except ProtocolError:
        pass


@settings(max_examples=2000, deadline=None)
@given(st.binary(min_size=0, max_size=64))
def test_fuzz_request_header(data):
    try:
        decode_request_header(Reader(data))
    except ProtocolError:
        pass


def test_frames_before_a_bad_length_prefix_are_returned_first():
    _, good = ClientConnection().request_bytes(ApiVersionsRequest())
    dec = FrameDecoder(max_frame_bytes=1000)
    frames = dec.feed(good + good + struct.pack(">i", 5000) + b"junk")
    assert len(frames) == 2 and isinstance(dec.error, FrameTooLarge)
    with pytest.raises(FrameTooLarge):
        dec.feed(b"more")


def test_client_picks_the_highest_common_version_and_refuses_apis_the_broker_lacks():
    client = ClientConnection()
    client.negotiated(ApiVersionsResponse(api_keys=[ApiVersion(3, 0, 9), ApiVersion(18, 0, 3)]))
    assert client.version_for(3) == 9 and client.version_for(18) == 3
    with pytest.raises(UnsupportedVersion, match="does not support api key 1"):
        client.send_request(FetchRequest([FetchPartition("t", 0, 0)]))
    client.negotiated(ApiVersionsResponse(api_keys=[ApiVersion(0, 10, 12)]))  # only versions we do not speak
    with pytest.raises(UnsupportedVersion, match="versions"):
        client.version_for(0)


def test_client_connection_falls_back_when_the_broker_refuses_its_api_versions_version():
    """A broker that speaks ApiVersions only up to v2 answers v4 as Kafka does (a v0 body, error 35,
    its ranges); the client retries at v2 and negotiates the rest from that answer."""
    import socket
    import threading

    from pyspark_logsource.client.connection import BrokerConnection

    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[int] = []

    def old_broker() -> None:
        conn, _ = listener.accept()
        server = ServerConnection()
        with conn:
            while True:
                data = conn.recv(1 << 16)
                if not data:
                    return
                for ev in server.receive_data(data):
                    seen.append(ev.header.api_version)
                    ranges = [ApiVersion(18, 0, 2), ApiVersion(3, 0, 4)]
                    if ev.header.api_version > 2:  # Kafka's answer: a v0 body, error 35, its own ranges
                        header = RequestHeader(18, 0, ev.header.correlation_id)
                        resp = ApiVersionsResponse(UnsupportedVersion.code, ranges)
                    else:
                        header, resp = ev.header, ApiVersionsResponse(api_keys=ranges)
                    conn.sendall(frame_bytes(ServerConnection.response_parts(header, resp)))

    t = threading.Thread(target=old_broker, daemon=True)
    t.start()
    c = BrokerConnection("127.0.0.1", listener.getsockname()[1])
    try:
        assert seen == [SUPPORTED_VERSIONS[18][1], 2]
        assert c._proto.versions == {18: 2, 3: 4}
        assert not c.arrow_body  # no logsource.arrow.body feature: Kafka's layout
    finally:
        c.close()
        listener.close()


_INT64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    version=st.integers(3, 8),
    topic=st.text(min_size=0, max_size=40),
    partition=st.integers(-(2**31), 2**31 - 1),
    error=st.integers(-(2**15), 2**15 - 1),
    base=_INT64,
    lat=_INT64,
    lso=_INT64,
    throttle=st.integers(-(2**31), 2**31 - 1),
    cid=st.integers(-(2**31), 2**31 - 1),
)
def test_produce_response_fast_path_equals_the_schema_codec(
    version, topic, partition, error, base, lat, lso, throttle, cid
):
    # the fast path packs a cached per-(version, topic) frame Struct; the table's codec is the reference
    from pyspark_logsource.protocol import codecs
    from pyspark_logsource.protocol.primitives import Writer

    resp = ProduceResponse(
        [ProducePartitionResponse(topic, partition, error, base, lat, lso)], throttle_time_ms=throttle
    )
    for _ in range(2):  # built, then from the cache
        fast = codecs._encode_produce_response_fast(cid, version, resp)
        w = Writer()
        CODECS[(0, version)][1].write(w, codecs.APIS[0].resp_to(resp, version))
        assert frame_bytes(fast) == frame_bytes(w.frame(struct.pack(">i", cid)))
    if version >= 5:  # v3-v4 carry no log start offset: the decoded one is -1
        decoded = codecs.decode_response_body(0, version, Reader(frame_bytes(fast)[8:]))
        assert decoded.partitions[0] == resp.partitions[0] and decoded.throttle_time_ms == throttle
