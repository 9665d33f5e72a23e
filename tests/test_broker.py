"""The broker over real sockets, started as a separate process (python -m pyspark_logsource.broker)."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

import pytest
from support.brokers import WireClient, broker_process, broker_thread, frame, unique_topic

from pyspark_logsource.errors import (
    CorruptRecord,
    InvalidConfig,
    InvalidPartitions,
    InvalidProducerEpoch,
    InvalidReplicationFactor,
    InvalidRequiredAcks,
    InvalidTopic,
    MessageTooLarge,
    OffsetOutOfRange,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
    UnsupportedVersion,
)
from pyspark_logsource.format import batch as fmt
from pyspark_logsource.protocol import (
    ARROW_BODY_FEATURE,
    SUPPORTED_VERSIONS,
    ApiVersionsRequest,
    ClientConnection,
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    FetchPartition,
    FetchRequest,
    FrameDecoder,
    InitProducerIdRequest,
    ProducePartitionData,
    ProduceRequest,
)

MAX_MESSAGE = 200_000


@pytest.fixture(scope="module")
def broker_config():
    """For conftest's ``broker``."""
    return {"message.max.bytes": MAX_MESSAGE}


@pytest.fixture
def client(broker):
    with WireClient(broker.bootstrap) as c:
        yield c


def new_topic(client: WireClient, partitions: int = 1, config: dict | None = None) -> str:
    name = unique_topic()
    assert client.create_topic(name, partitions, config) == 0
    return name


def values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd"])
def test_produce_fetch_round_trip_across_partitions_and_codecs(client, codec):
    topic = new_topic(client, partitions=3)
    expected = {}
    for p in range(3):
        expected[p] = []
        for b in range(4):
            vals = values(f"{codec}-p{p}-b{b}", 25)
            keys = [f"k{i}".encode() for i in range(25)]
            r = client.produce(topic, p, fmt.encode(vals, keys, codec=codec))
            assert r.error_code == 0 and r.base_offset == b * 25
            expected[p] += list(zip(keys, vals, strict=True))
    for p in range(3):
        recs = client.fetch_all(topic, p)
        assert [r.offset for r in recs] == list(range(100))  # ordered, consecutive
        assert [(r.key, r.value) for r in recs] == expected[p]


def test_one_request_many_partitions_and_topics(client):
    t1, t2 = new_topic(client, 2), new_topic(client, 1)
    req = ProduceRequest(
        [
            ProducePartitionData(t1, 0, fmt.encode([b"a"])),
            ProducePartitionData(t2, 0, fmt.encode([b"b", b"c"])),
            ProducePartitionData(t1, 1, fmt.encode([b"d"])),
            ProducePartitionData(t1, 7, fmt.encode([b"e"])),
        ]
    )
    resp = client.request(req)
    got = {(p.topic, p.partition): p.error_code for p in resp.partitions}
    assert got == {(t1, 0): 0, (t1, 1): 0, (t2, 0): 0, (t1, 7): UnknownTopicOrPartition.code}
    fetch = client.request(
        FetchRequest(
            [FetchPartition(t1, 0, 0), FetchPartition(t2, 0, 0), FetchPartition(t1, 1, 0)], max_wait_ms=0
        )
    )
    vals = {
        (p.topic, p.partition): [r.value for b in fmt.decode_all(bytes(p.records)) for r in b.records()]
        for p in fetch.partitions
    }
    assert vals == {(t1, 0): [b"a"], (t2, 0): [b"b", b"c"], (t1, 1): [b"d"]}
    assert all(p.high_watermark == p.last_stable_offset for p in fetch.partitions)


def test_large_fetch_goes_through_sendfile_and_respects_max_bytes(client):
    topic = new_topic(client)
    blobs = [bytes([i]) * 40_000 for i in range(10)]
    for i in range(0, 10, 2):
        assert client.produce(topic, 0, fmt.encode(blobs[i : i + 2])).error_code == 0  # 80 KB batches
    p = client.fetch(topic, 0, 0, max_bytes=10 << 20)
    assert len(p.records) > 64 * 1024  # above SENDFILE_MIN_BYTES
    assert [r.value for b in fmt.decode_all(bytes(p.records)) for r in b.records()] == blobs
    # max_bytes smaller than one batch: still exactly one whole batch, so the consumer progresses
    p = client.fetch(topic, 0, 0, max_bytes=100)
    assert [r.value for b in fmt.decode_all(bytes(p.records)) for r in b.records()] == blobs[:2]
    # request-level max_bytes caps the sum over partitions
    resp = client.request(
        FetchRequest(
            [FetchPartition(topic, 0, 0), FetchPartition(topic, 0, 2)], max_bytes=1000, max_wait_ms=0
        )
    )
    assert len(resp.partitions[0].records) > 0 and len(resp.partitions[1].records) == 0


def test_large_fetches_to_a_slow_reader_arrive_whole_and_in_order(tmp_path):
    """The broker sendfiles a region straight into the socket and hands what a full socket did not
    take to the event loop: two pipelined 1.6 MB answers to a reader with a small receive buffer
    that starts reading late (the broker's send buffer is small too) arrive byte for byte, in order."""
    with (
        broker_thread(tmp_path, config={"socket.send.buffer.bytes": 32 * 1024}) as b,
        WireClient(b.bootstrap) as c,
    ):
        topic = new_topic(c)
        blobs = [bytes([i]) * 40_000 for i in range(40)]
        for i in range(0, 40, 2):
            assert c.produce(topic, 0, fmt.encode(blobs[i : i + 2])).error_code == 0
        want = c.fetch(topic, 0, 0, max_bytes=10 << 20).records
        _read_two_fetches_late(b.bootstrap, topic, want, blobs)


def _read_two_fetches_late(bootstrap: str, topic: str, want: bytes, blobs: list[bytes]) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)  # before connect: a small window
        s.settimeout(15)
        s.connect((host, int(port)))
        conn = ClientConnection("slow-reader")
        s.sendall(conn.request_bytes(ApiVersionsRequest(arrow_body=True))[1])
        answer: list = []
        while not answer:
            answer = conn.receive_data(s.recv(1 << 16))
        conn.negotiated(answer[0].response)  # Arrow-bodied batches: served from the file, as stored
        for offset in (0, 2):
            s.sendall(
                conn.request_bytes(
                    FetchRequest(
                        [FetchPartition(topic, 0, offset, 10 << 20)], max_wait_ms=0, max_bytes=10 << 20
                    )
                )[1]
            )
        time.sleep(0.5)  # the broker meets a full socket
        got = []
        while len(got) < 2:
            data = s.recv(1 << 16)
            assert data, "broker closed the connection"
            got += conn.receive_data(data)
    assert bytes(got[0].response.partitions[0].records) == bytes(want)
    second = [
        r.value for b in fmt.decode_all(bytes(got[1].response.partitions[0].records)) for r in b.records()
    ]
    assert second == blobs[2:]


def test_fetch_out_of_range_and_unknown(client):
    topic = new_topic(client)
    client.produce(topic, 0, fmt.encode(values("x", 3)))
    p = client.fetch(topic, 0, 99)
    assert p.error_code == OffsetOutOfRange.code and p.high_watermark == 3 and p.log_start_offset == 0
    assert client.fetch(topic, 0, 3).records == b""  # at the log end: empty, no error
    assert client.fetch("nope-" + topic, 0, 0).error_code == UnknownTopicOrPartition.code
    assert client.fetch("bad/name", 0, 0).error_code == InvalidTopic.code


# ------------------------------------------------------------------ long poll


def test_long_poll_waits_max_wait_when_no_data(client):
    topic = new_topic(client)
    t0 = time.monotonic()
    p = client.fetch(topic, 0, 0, max_wait_ms=400)
    took = time.monotonic() - t0
    assert p.error_code == 0 and len(p.records) == 0
    assert 0.35 <= took < 5


def test_long_poll_returns_early_when_data_arrives(broker, client):
    topic = new_topic(client)
    result = {}

    def consumer():
        with WireClient(broker.bootstrap) as c:
            t0 = time.monotonic()
            result["p"] = c.fetch(topic, 0, 0, max_wait_ms=20_000)
            result["took"] = time.monotonic() - t0

    th = threading.Thread(target=consumer)
    th.start()
    time.sleep(0.3)
    client.produce(topic, 0, fmt.encode([b"wake up"]))
    th.join(25)
    assert result["took"] < 10  # far below max_wait
    assert [r.value for r in fmt.decode_all(bytes(result["p"].records))[0].records()] == [b"wake up"]


def test_long_poll_waits_for_min_bytes(broker, client):
    topic = new_topic(client)
    result = {}

    def consumer():
        with WireClient(broker.bootstrap) as c:
            result["p"] = c.fetch(topic, 0, 0, max_wait_ms=20_000, min_bytes=2000)

    th = threading.Thread(target=consumer)
    th.start()
    client.produce(topic, 0, fmt.encode([b"small"]))  # below min_bytes: keep waiting
    time.sleep(0.3)
    assert th.is_alive()
    client.produce(topic, 0, fmt.encode([b"x" * 3000]))
    th.join(25)
    assert not th.is_alive()
    assert sum(b.record_count for b in fmt.decode_all(bytes(result["p"].records))) == 2


# ------------------------------------------------------------------ list offsets, metadata


def test_list_offsets_by_time(client):
    topic = new_topic(client)
    for i, ts in enumerate([1000, 2000, 3000]):
        client.produce(topic, 0, fmt.encode(values(f"b{i}", 2), timestamps=[ts, ts + 10]))
    assert client.list_offset(topic, 0, -2).offset == 0
    assert client.list_offset(topic, 0, -1).offset == 6
    assert (client.list_offset(topic, 0, 1500).offset, client.list_offset(topic, 0, 1500).timestamp) == (
        2,
        2000,
    )
    assert (client.list_offset(topic, 0, 2005).offset, client.list_offset(topic, 0, 2005).timestamp) == (
        3,
        2010,
    )
    assert client.list_offset(topic, 0, 3010).offset == 5
    assert client.list_offset(topic, 0, 0).offset == 0
    assert client.list_offset(topic, 0, 99_999).offset == -1
    assert client.list_offset("missing-" + topic, 0, -1).error_code == UnknownTopicOrPartition.code


def test_metadata_has_explicit_leaders(broker, client):
    topic = new_topic(client, 4)
    md = client.metadata([topic])
    (b,) = md.brokers
    assert (b.node_id, f"{b.host}:{b.port}") == (0, broker.bootstrap)
    assert md.controller_id == 0 and md.cluster_id
    (t,) = md.topics
    assert t.error_code == 0 and not t.is_internal
    assert [(p.partition, p.leader_id, p.leader_epoch, p.replicas, p.isr) for p in t.partitions] == [
        (i, 0, 0, [0], [0]) for i in range(4)
    ]
    all_md = client.metadata(None)
    names = {t.name: t for t in all_md.topics}
    assert topic in names and names["__consumer_offsets"].is_internal


def test_metadata_unknown_auto_create_and_invalid(client):
    name = f"auto-{random.randrange(1 << 30)}"
    assert client.metadata([name]).topics[0].error_code == UnknownTopicOrPartition.code
    t = client.metadata([name], auto_create=True).topics[0]
    assert t.error_code == 0 and len(t.partitions) == 1
    assert client.metadata(["../etc"], auto_create=True).topics[0].error_code == InvalidTopic.code


def test_create_and_delete_topic_errors(client):
    topic = new_topic(client, 2)
    assert client.create_topic(topic, 2) == TopicAlreadyExists.code
    for bad in ["", "a/b", "..", "x" * 250, "sp ace", "__mine"]:
        assert client.create_topic(bad, 1) == InvalidTopic.code
    assert client.create_topic("zero-parts", 0) == InvalidPartitions.code
    assert client.create_topic("bad-config", 1, {"retention.ms": "soon"}) == InvalidConfig.code
    assert client.create_topic("bad-config2", 1, {"no.such.setting": "1"}) == InvalidConfig.code
    resp = client.request(CreateTopicsRequest([CreatableTopic("rf3", 1, 3)]))
    assert resp.topics[0].error_code == InvalidReplicationFactor.code
    resp = client.request(CreateTopicsRequest([CreatableTopic("only-validated", 2)], validate_only=True))
    assert resp.topics[0].error_code == 0 and client.metadata(["only-validated"]).topics[0].error_code != 0
    resp = client.request(DeleteTopicsRequest([topic, topic + "-missing", "__consumer_offsets"]))
    assert [t.error_code for t in resp.topics] == [0, UnknownTopicOrPartition.code, 42]
    assert client.metadata([topic]).topics[0].error_code == UnknownTopicOrPartition.code


def test_delete_topic_wakes_waiting_fetch(broker, client):
    topic = new_topic(client)
    result = {}

    def consumer():
        with WireClient(broker.bootstrap) as c:
            result["p"] = c.fetch(topic, 0, 0, max_wait_ms=20_000)

    th = threading.Thread(target=consumer)
    th.start()
    time.sleep(0.3)
    client.request(DeleteTopicsRequest([topic]))
    th.join(25)
    assert result["p"].error_code == UnknownTopicOrPartition.code


def test_api_versions(client):
    resp = client.request(ApiVersionsRequest())
    assert {a.api_key for a in resp.api_keys} >= {
        0,
        1,
        2,
        3,
        8,
        9,
        10,
        11,
        12,
        13,
        14,
        15,
        16,
        18,
        19,
        20,
        22,
        23,
        32,
        60,
        10100,
    }  # and the transaction APIs
    assert {(a.api_key, a.min_version, a.max_version) for a in resp.api_keys} == {
        (k, lo, hi) for k, (lo, hi) in SUPPORTED_VERSIONS.items()
    }
    assert [f.name for f in resp.supported_features] == [ARROW_BODY_FEATURE]


# ------------------------------------------------------------------ bad input


def test_oversized_batch_gets_message_too_large(client):
    topic = new_topic(client)
    r = client.produce(topic, 0, fmt.encode([b"x" * (MAX_MESSAGE + 1)]))
    assert r.error_code == MessageTooLarge.code and "exceeds" in r.error_message
    assert client.list_offset(topic, 0, -1).offset == 0


def test_wrong_crc_gets_corrupt_record_and_nothing_is_appended(client):
    topic = new_topic(client)
    good = fmt.encode(values("good", 3))
    bad = bytearray(fmt.encode(values("bad", 3)))
    bad[-1] ^= 0xFF
    r = client.produce(topic, 0, bad)
    assert r.error_code == CorruptRecord.code and "CRC" in r.error_message
    # all or nothing: a good batch followed by a bad one appends neither
    assert client.produce(topic, 0, bytes(good) + bytes(bad)).error_code == CorruptRecord.code
    assert client.produce(topic, 0, b"\x00" * 10).error_code == CorruptRecord.code
    assert client.produce(topic, 0, b"").error_code == CorruptRecord.code
    assert client.list_offset(topic, 0, -1).offset == 0
    assert client.produce(topic, 0, good).base_offset == 0


def test_produce_errors_unknown_invalid_internal_acks(client):
    data = fmt.encode([b"v"])
    assert (
        client.produce(f"missing-{random.randrange(1 << 30)}", 0, data).error_code
        == UnknownTopicOrPartition.code
    )
    assert client.produce("bad name!", 0, data).error_code == InvalidTopic.code
    assert client.produce("__consumer_offsets", 0, data).error_code == InvalidTopic.code
    topic = new_topic(client)
    resp = client.request(ProduceRequest([ProducePartitionData(topic, 0, data)], acks=5))
    assert resp.partitions[0].error_code == InvalidRequiredAcks.code


def test_acks_zero_appends_without_response(client):
    topic = new_topic(client)
    for i in range(5):
        client.produce(topic, 0, fmt.encode([str(i).encode()]), acks=0)
    # the next request's response proves the acks=0 ones were handled first (in order)
    assert client.list_offset(topic, 0, -1).offset == 5


def test_unknown_api_versions_version_gets_v0_body_with_error_35_and_keeps_connection(client):
    # a client newer than the broker: Kafka answers with a v0 body, error 35 and its ranges
    client.send_raw(frame(struct.pack(">hhih", 18, 99, 1234, -1) + b"\x00" * 5))
    dec = FrameDecoder()
    frames = []
    while not frames:
        frames += dec.feed(client.sock.recv(1000))
    got_cid, code, n = struct.unpack_from(">ihi", frames[0])
    assert (got_cid, code) == (1234, UnsupportedVersion.code) and n == len(SUPPORTED_VERSIONS)
    ranges = {struct.unpack_from(">hhh", frames[0], 10 + 6 * i) for i in range(n)}
    assert ranges == {(k, lo, hi) for k, (lo, hi) in SUPPORTED_VERSIONS.items()}
    # the connection is still in sync
    new = WireClient.__new__(WireClient)
    new.sock, new.conn, new._ready = client.sock, client.conn, []
    assert new.request(ApiVersionsRequest()).api_keys


@pytest.mark.parametrize("key,version", [(77, 0), (1, 99), (0, 0), (0, 2)])
def test_unsupported_api_key_or_version_closes_the_connection_like_kafka(broker, key, version):
    # the body's layout is unknown, so the stream cannot be resynchronised: Kafka closes it
    with WireClient(broker.bootstrap, arrow_body=None) as c:
        c.send_raw(frame(struct.pack(">hhih", key, version, 1, -1) + b"\x00" * 16))
        assert c.is_closed_by_peer()
    with WireClient(broker.bootstrap) as c:
        assert c.request(ApiVersionsRequest()).api_keys  # the broker is fine


def test_requests_before_a_malformed_frame_are_answered_then_connection_closes(broker, client):
    topic = new_topic(client)
    conn = ClientConnection("mixed")
    _, good = conn.request_bytes(ProduceRequest([ProducePartitionData(topic, 0, fmt.encode([b"kept"]))]))
    garbage = frame(struct.pack(">hhih", 0, 0, 99, -1) + b"\x00")  # produce header, truncated body
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        s.sendall(good + garbage)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    (resp,) = conn.receive_data(data)
    assert resp.response.partitions[0].error_code == 0
    assert [r.value for r in client.fetch_all(topic, 0)] == [b"kept"]


def test_frame_claiming_2gb_is_refused_without_allocating(broker, client):
    pid = broker.pid
    before = rss_kb(pid)
    with WireClient(broker.bootstrap) as evil:
        evil.send_raw(struct.pack(">i", 2**31 - 1) + b"\x00" * 1000)
        assert evil.is_closed_by_peer()
    assert rss_kb(pid) - before < 50_000
    assert client.request(ApiVersionsRequest()).api_keys  # others unaffected


def test_fuzzed_frames_never_crash_broker_or_hurt_others(broker, client):
    topic = new_topic(client)
    rng = random.Random(1234)
    templates = [
        ClientConnection("f").request_bytes(r)[1]
        for r in [
            ProduceRequest([ProducePartitionData(topic, 0, fmt.encode([b"fuzz"]))]),
            FetchRequest([FetchPartition(topic, 0, 0)], max_wait_ms=10),
            CreateTopicsRequest([CreatableTopic("fz", 1)]),
            InitProducerIdRequest(),
        ]
    ]
    # a consumer parked in a long poll on its own connection all through the fuzzing
    waiting_topic = new_topic(client)
    parked = {}

    def consumer():
        with WireClient(broker.bootstrap, timeout=120) as c:
            parked["p"] = c.fetch(waiting_topic, 0, 0, max_wait_ms=60_000)

    th = threading.Thread(target=consumer)
    th.start()
    for i in range(300):
        kind = i % 3
        if kind == 0:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        else:
            body = bytearray(rng.choice(templates)[4:])
            for _ in range(rng.randrange(1, 6)):
                body[rng.randrange(len(body))] = rng.randrange(256)
            if kind == 2:
                del body[rng.randrange(len(body)) :]
            data = frame(bytes(body))
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(5)
            try:
                while s.recv(65536):
                    pass
            except (ConnectionResetError, TimeoutError):
                pass
        if i % 50 == 0:
            assert client.request(ApiVersionsRequest()).api_keys
    assert broker.running
    assert client.request(ApiVersionsRequest()).api_keys
    assert th.is_alive()  # still parked, untouched by the fuzzing
    client.produce(waiting_topic, 0, fmt.encode([b"still here"]))
    th.join(30)
    assert [r.value for r in fmt.decode_all(bytes(parked["p"].records))[0].records()] == [b"still here"]
    # the topic's log is still readable end to end (anything appended is whole, valid batches)
    end = client.list_offset(topic, 0, -1).offset
    assert len(client.fetch_all(topic, 0)) == end


def test_disconnect_mid_request_appends_nothing(broker, client):
    topic = new_topic(client)
    _, data = ClientConnection("t").request_bytes(
        ProduceRequest([ProducePartitionData(topic, 0, fmt.encode(values("half", 50)))])
    )
    for cut in (3, 10, len(data) // 2, len(data) - 1):
        with socket.create_connection(("127.0.0.1", broker.port)) as s:
            s.sendall(data[:cut])
    time.sleep(0.2)
    assert client.list_offset(topic, 0, -1).offset == 0
    assert client.produce(topic, 0, fmt.encode([b"after"])).base_offset == 0


# ------------------------------------------------------------------ idempotence


def test_idempotent_retry_returns_original_offsets(client):
    topic = new_topic(client)
    pid_resp = client.request(InitProducerIdRequest())
    pid, epoch = pid_resp.producer_id, pid_resp.producer_epoch
    assert pid >= 0 and epoch == 0
    b0 = fmt.encode(values("s0", 3), producer_id=pid, producer_epoch=epoch, base_sequence=0)
    b1 = fmt.encode(values("s1", 2), producer_id=pid, producer_epoch=epoch, base_sequence=3)
    assert client.produce(topic, 0, b0).base_offset == 0
    assert client.produce(topic, 0, b1).base_offset == 3
    retry = client.produce(
        topic, 0, fmt.encode(values("s0", 3), producer_id=pid, producer_epoch=epoch, base_sequence=0)
    )
    assert retry.error_code == 0 and retry.base_offset == 0
    assert [r.value for r in client.fetch_all(topic, 0)] == values("s0", 3) + values("s1", 2)
    # epoch bump fences the old epoch
    bumped = client.request(InitProducerIdRequest(producer_id=pid, producer_epoch=epoch))
    assert (bumped.producer_id, bumped.producer_epoch) == (pid, 1)
    old = fmt.encode([b"zombie"], producer_id=pid, producer_epoch=0, base_sequence=5)
    client.produce(topic, 0, fmt.encode([b"new"], producer_id=pid, producer_epoch=1, base_sequence=0))
    assert client.produce(topic, 0, old).error_code == InvalidProducerEpoch.code


# ------------------------------------------------------------------ restarts and crashes


def test_group_offsets_and_producer_ids_survive_restart_and_kill(tmp_path):
    with broker_process(tmp_path) as b:
        with WireClient(b.bootstrap) as c:
            assert c.create_topic("orders", 3) == 0
            for p in range(3):
                c.produce("orders", p, fmt.encode(values(f"o{p}", 10)))
            c.commit("billing", {("orders", 0): 5, ("orders", 2): 10}, metadata="run-1")
            c.commit("audit", {("orders", 1): 1})
            c.commit("billing", {("orders", 0): 7})
            bad = c.commit("billing", {("missing", 0): 1, ("orders", 9): 1})
            assert [p.error_code for p in bad.partitions] == [UnknownTopicOrPartition.code] * 2
            pids = {c.request(InitProducerIdRequest()).producer_id for _ in range(3)}
        b.restart()  # clean
        with WireClient(b.bootstrap) as c:
            got = c.committed("billing")
            assert {k: (v.offset, v.metadata) for k, v in got.items()} == {
                ("orders", 0): (7, ""),  # committed without metadata: Kafka's NO_METADATA, ""
                ("orders", 2): (10, "run-1"),
            }
            one = c.committed("billing", [("orders", 1), ("orders", 2)])
            assert one[("orders", 1)].offset == -1 and one[("orders", 2)].offset == 10
            c.commit("audit", {("orders", 1): 4})
            pids2 = {c.request(InitProducerIdRequest()).producer_id for _ in range(3)}
        b.kill()  # SIGKILL
        b.start()
        with WireClient(b.bootstrap) as c:
            assert c.committed("audit")[("orders", 1)].offset == 4
            assert c.committed("billing")[("orders", 0)].offset == 7
            pids3 = {c.request(InitProducerIdRequest()).producer_id for _ in range(3)}
            assert len(pids | pids2 | pids3) == 9  # never reused, also after kill -9
            # deleting a topic forgets its offsets (tombstones), also across restarts
            c.request(DeleteTopicsRequest(["orders"]))
            assert c.committed("billing") == {}
        b.restart()
        with WireClient(b.bootstrap) as c:
            assert c.committed("billing") == {} and c.committed("audit") == {}


def test_kill_9_loses_nothing_acknowledged_with_flush_messages_1(tmp_path):
    with broker_process(tmp_path, config={"log.flush.interval.messages": "1"}) as b:
        with WireClient(b.bootstrap) as c:
            assert c.create_topic("durable", 2) == 0
            acked = {0: [], 1: []}
            for i in range(60):
                p = i % 2
                vals = values(f"m{i}", 5)
                r = c.produce("durable", p, fmt.encode(vals, codec="lz4" if i % 3 else "none"))
                assert r.error_code == 0
                acked[p] += vals
        b.kill()
        assert not b.running
        b.start()
        with WireClient(b.bootstrap) as c:
            for p in (0, 1):
                recs = c.fetch_all("durable", p)
                assert [r.value for r in recs] == acked[p]
                assert [r.offset for r in recs] == list(range(len(acked[p])))
            # idempotence state was rebuilt from the log: the producer id space moved on
            assert c.request(InitProducerIdRequest()).producer_id >= 0


def test_thread_mode_broker_round_trip(tmp_path):
    with broker_thread(tmp_path) as b:
        with WireClient(b.bootstrap) as c:
            assert c.create_topic("in-thread", 1) == 0
            c.produce("in-thread", 0, fmt.encode([b"hello"]))
            assert [r.value for r in c.fetch_all("in-thread", 0)] == [b"hello"]
        b.restart()
        with WireClient(b.bootstrap) as c:
            assert [r.value for r in c.fetch_all("in-thread", 0)] == [b"hello"]
    assert not b.running


# ------------------------------------------------------------------ layouts served to Kafka clients


def test_kafka_clients_get_kafka_batches_by_sendfile_and_arrow_batches_converted(tmp_path):
    from pyspark_logsource.broker.log.segment import FileRegion
    from pyspark_logsource.broker.session import Session

    with broker_thread(tmp_path) as b, WireClient(b.bootstrap) as c:
        for t in ("kafka-made", "arrow-made"):
            assert c.create_topic(t) == 0
        kafka_batch = fmt.encode_kafka([b"k1", b"k2"], [b"a", None], headers=[[("h", b"1")], []])
        assert c.produce("kafka-made", 0, kafka_batch).error_code == 0
        assert c.produce("arrow-made", 0, fmt.encode([b"v1", b"v2"], [b"a", None])).error_code == 0
        handlers = b._broker.handlers
        kafka_client, our_client = Session("kafka"), Session("ours", arrow_body=True)

        def records(topic, session):
            resp, _, _ = handlers._read(FetchRequest([FetchPartition(topic, 0, 0)]), session)
            return resp.partitions[0].records

        # a topic written by Kafka producers: the stored region itself, for sendfile
        assert isinstance(records("kafka-made", kafka_client), FileRegion)
        assert isinstance(records("kafka-made", our_client), FileRegion)
        # Arrow-bodied batches: ours as stored, Kafka clients' converted to Kafka's layout
        assert isinstance(records("arrow-made", our_client), FileRegion)
        converted = records("arrow-made", kafka_client)
        assert isinstance(converted, bytes)
        assert not any(fmt.is_arrow_body(h) for _, h in fmt.iter_headers(converted))
        assert [(r.key, r.value) for r in fmt.decode_kafka(converted).records()] == [
            (b"a", b"v1"),
            (None, b"v2"),
        ]
        # and over the wire, a Kafka-layout reader sees both topics in Kafka's layout
        with WireClient(b.bootstrap, arrow_body=False) as k:
            for t in ("kafka-made", "arrow-made"):
                data = bytes(k.fetch(t, 0, 0).records)
                assert data and not any(fmt.is_arrow_body(h) for _, h in fmt.iter_headers(data))
    # after a clean restart the segments are opened without a scan: the region's headers decide
    with broker_thread(tmp_path) as b:
        handlers = b._broker.handlers
        assert isinstance(records("kafka-made", kafka_client), FileRegion)
        assert isinstance(records("arrow-made", kafka_client), bytes)


def test_broker_with_arrow_body_disabled_is_a_plain_kafka_broker(tmp_path):
    with (
        broker_thread(tmp_path, config={"logsource.arrow.body.enable": "false"}) as b,
        WireClient(b.bootstrap) as c,
    ):
        assert c.api_versions.supported_features == []
        assert c.create_topic("plain") == 0
        r = c.produce("plain", 0, fmt.encode([b"arrow"]))
        assert r.error_code == CorruptRecord.code and "logsource.arrow.body.enable" in r.error_message
        assert c.produce("plain", 0, fmt.encode_kafka([b"kafka"])).error_code == 0
        data = bytes(c.fetch("plain", 0, 0).records)
        assert [r.value for r in fmt.decode_kafka(data).records()] == [b"kafka"]


def test_pipelined_produces_in_one_read_are_answered_one_by_one(broker, client):
    # one write of 12 requests: the broker appends the runs of one partition together (one lock, one
    # pwritev) but answers each request alone, in order; failures stay with their request
    topic = new_topic(client)
    pid = client.request(InitProducerIdRequest(None, 60_000))

    def mk(seq, **kw):
        return fmt.encode(
            [b"m%d" % seq],
            producer_id=pid.producer_id,
            producer_epoch=pid.producer_epoch,
            base_sequence=seq,
            **kw,
        )

    bad_crc = mk(2)
    bad_crc[-1] ^= 0xFF
    runs = [mk(0), mk(1), bad_crc, mk(2), mk(9), mk(3), mk(0), bytearray(b"\0" * 10), fmt.encode([b"plain"])]
    reqs = [ProduceRequest([ProducePartitionData(topic, 0, r)], acks=1) for r in runs]
    reqs.insert(
        4, ProduceRequest([ProducePartitionData(topic, 0, mk(4))], acks=7)
    )  # another acks: its own group
    reqs.append(ProduceRequest([ProducePartitionData(topic, 0, mk(4))], acks=0))  # no answer
    reqs.append(ProduceRequest([ProducePartitionData(topic, 0, mk(5))], acks=1))
    data = b"".join(client.conn.request_bytes(r)[1] for r in reqs)
    client.send_raw(data)
    got = [client.receive().partitions[0] for _ in range(len(reqs) - 1)]
    codes = [p.error_code for p in got]
    assert codes == [
        0,
        0,
        CorruptRecord.code,
        0,
        InvalidRequiredAcks.code,
        45,
        0,
        0,
        CorruptRecord.code,
        0,
        0,
    ]
    assert [p.base_offset for p in got if p.error_code == 0] == [0, 1, 2, 3, 0, 4, 6]  # mk(0) again: a retry
    fetched = client.request(FetchRequest([FetchPartition(topic, 0, 0, 1 << 20)], max_wait_ms=0))
    values_ = [r.value for b in fmt.decode_all(fetched.partitions[0].records) for r in b.records()]
    assert values_ == [b"m0", b"m1", b"m2", b"m3", b"plain", b"m4", b"m5"]
