"""DeleteRecords (21) and DescribeLogDirs (35): the codecs, the log's start offset, and a broker answering
confluent-kafka's AdminClient, kafka-python's KafkaAdminClient and kcat; restarts and kill -9."""

from __future__ import annotations

import subprocess
import time

import pytest
import test_protocol_schemas as tps
from kafka.protocol import admin as kp_admin
from kafka.protocol import consumer as kp_consumer
from support.brokers import WireClient, broker_process
from support.logdata import all_records, make_batch, open_log

from pyspark_logsource.broker.log.start_offset import LOG_START_OFFSET_FILE, write_log_start_offset
from pyspark_logsource.errors import OffsetOutOfRange
from pyspark_logsource.protocol import ClientConnection, RequestReceived, ServerConnection, frame_bytes
from pyspark_logsource.protocol import records_admin_messages as ra
from pyspark_logsource.protocol import records_admin_schemas as ras
from pyspark_logsource.protocol.codecs import APIS
from pyspark_logsource.protocol.messages import RequestHeader

# ---------------------------------------------------------------- codecs

REQUESTS = [
    ra.DeleteRecordsRequest(
        [
            ra.DeleteRecordsPartition("a", 0, 5),
            ra.DeleteRecordsPartition("a", 1, -1),
            ra.DeleteRecordsPartition("b", 0, 9),
        ],
        1234,
    ),
    ra.DescribeLogDirsRequest(None),
    ra.DescribeLogDirsRequest({"a": [0, 1], "b": [3]}),
    ra.DeleteGroupsRequest(["g1", "g2"]),
    ra.OffsetDeleteRequest("g", [("a", 0), ("a", 1), ("b", 2)]),
]
RESPONSES = [
    ra.DeleteRecordsResponse(
        [ra.DeleteRecordsPartitionResult("a", 0, 5, 0), ra.DeleteRecordsPartitionResult("b", 1, -1, 1)]
    ),
    ra.DeleteGroupsResponse([("g1", 0), ("g2", 68)]),
    ra.OffsetDeleteResponse(0, [("a", 0, 0), ("a", 1, 86)]),
]
LOG_DIRS = ra.DescribeLogDirsResponse(
    [
        ra.LogDirResult(
            "/d1", 0, [ra.LogDirPartition("a", 0, 100, 3), ra.LogDirPartition("b", 1, 7)], 1000, 500
        )
    ]
)


def _versions(key: int) -> list[int]:
    api = APIS[key]
    return list(range(api.min_version, api.max_version + 1))


def _wire_request(req, version):
    client, server = ClientConnection("c"), ServerConnection()
    cid, data = client.request_bytes(req, version)
    (ev,) = server.receive_data(data)
    assert isinstance(ev, RequestReceived)
    return ev.request


def _wire_response(req, resp, version):
    client = ClientConnection()
    cid, _ = client.send_request(req, version)
    parts = ServerConnection.response_parts(RequestHeader(int(req.API_KEY), version, cid, None), resp)
    (got,) = client.receive_data(frame_bytes(parts))
    return got.response


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: type(r).__name__)
def test_requests_round_trip_at_every_version(req):
    for v in _versions(int(req.API_KEY)):
        assert _wire_request(req, v) == req


@pytest.mark.parametrize("resp", RESPONSES, ids=lambda r: type(r).__name__)
def test_responses_round_trip_at_every_version(resp):
    req = next(r for r in REQUESTS if APIS[int(r.API_KEY)].response is type(resp))
    for v in _versions(int(req.API_KEY)):
        assert _wire_response(req, resp, v) == resp


def test_describe_log_dirs_sizes_only_from_v4_and_error_code_from_v3():
    req = ra.DescribeLogDirsRequest(None)
    assert _versions(35) == [1, 2, 3, 4, 5]
    assert _wire_response(req, LOG_DIRS, 4) == LOG_DIRS
    older = _wire_response(req, LOG_DIRS, 3)
    assert (older.results[0].total_bytes, older.results[0].usable_bytes) == (-1, -1)
    assert older.results[0].partitions == LOG_DIRS.results[0].partitions


def test_api_versions_advertises_the_new_apis():
    from pyspark_logsource.protocol import SUPPORTED_VERSIONS

    assert SUPPORTED_VERSIONS[21] == (0, 2)
    assert SUPPORTED_VERSIONS[35] == (1, 5)
    assert SUPPORTED_VERSIONS[42] == (0, 2)
    assert SUPPORTED_VERSIONS[47] == (0, 0)


# the schemas against Kafka's JSON (as kafka-python ships it) and kafka-python's encoders, with the helpers
# of test_protocol_schemas (which checks the schemas of protocol/schemas.py the same way)
SCHEMAS = [
    (ras.DELETE_RECORDS_REQUEST, kp_admin.DeleteRecordsRequest),
    (ras.DELETE_RECORDS_RESPONSE, kp_admin.DeleteRecordsResponse),
    (ras.DESCRIBE_LOG_DIRS_REQUEST, kp_admin.DescribeLogDirsRequest),
    (ras.DESCRIBE_LOG_DIRS_RESPONSE, kp_admin.DescribeLogDirsResponse),
    (ras.DELETE_GROUPS_REQUEST, kp_admin.DeleteGroupsRequest),
    (ras.DELETE_GROUPS_RESPONSE, kp_admin.DeleteGroupsResponse),
    (ras.OFFSET_DELETE_REQUEST, kp_consumer.OffsetDeleteRequest),
    (ras.OFFSET_DELETE_RESPONSE, kp_consumer.OffsetDeleteResponse),
]


@pytest.mark.parametrize("msg", [m for m, _ in SCHEMAS], ids=lambda m: m.name)
def test_schemas_match_kafka_json(msg):
    tps.test_fields_match_kafka_json(msg)


@pytest.mark.parametrize(
    "msg,version,kp_cls",
    [(m, v, k) for m, k in SCHEMAS for v in range(m.version_range()[0], m.version_range()[1] + 1)],
    ids=lambda x: getattr(x, "name", str(x)),
)
def test_codecs_write_kafka_pythons_bytes(msg, version, kp_cls):
    tps.test_codec_matches_kafka_python(msg, version, kp_cls)


def test_a_failing_handler_is_answered_in_each_apis_shape():
    from pyspark_logsource.broker.error_responses import error_response

    for req in REQUESTS:
        resp = error_response(int(req.API_KEY), req, 2, "boom")  # CORRUPT_MESSAGE: any code
        codes = (
            [p.error_code for p in resp.partitions]
            if isinstance(resp, ra.DeleteRecordsResponse)
            else [c for _, c in resp.results]
            if isinstance(resp, ra.DeleteGroupsResponse)
            else [resp.error_code]
        )
        assert codes and set(codes) == {2}, req
        assert _wire_response(req, resp, APIS[int(req.API_KEY)].max_version) == resp


# ---------------------------------------------------------------- the log


def _fill(lg, batches: int, per_batch: int = 10) -> None:
    for _ in range(batches):
        lg.append(make_batch(lg.log_end_offset, per_batch))


def test_log_start_moves_deletes_whole_segments_and_refuses_reads_below(tmp_path):
    lg = open_log(tmp_path, segment_bytes=1024, file_delete_delay_ms=0)
    _fill(lg, 20)
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) > 3
    target = bases[2] + 3  # inside the third segment
    assert lg.delete_records_before(target) == target
    assert lg.log_start_offset == target
    assert [s.base_offset for s in lg.segments] == bases[2:]  # wholly-below segments are gone
    assert not (tmp_path / "t-0" / f"{bases[0]:020d}.log").exists()
    with pytest.raises(OffsetOutOfRange):
        lg.read(target - 1, 1 << 20)
    assert all_records(lg)[0].offset == target
    from pyspark_logsource.broker.log.log import EARLIEST_TIMESTAMP

    assert lg.offset_for_timestamp(EARLIEST_TIMESTAMP) == target
    assert lg.offset_for_timestamp(0) == target  # a timestamp before the start answers the start
    assert lg.delete_records_before(target - 5) == target  # never backwards
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records_before(lg.high_watermark + 1)
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records_before(-3)
    lg.close()
    again = open_log(tmp_path, segment_bytes=1024, file_delete_delay_ms=0)
    assert again.log_start_offset == target  # the checkpoint survives a reopen
    with pytest.raises(OffsetOutOfRange):
        again.read(target - 1, 1 << 20)
    again.close()


def test_log_start_above_the_high_watermark_is_refused_and_follower_caps_at_its_own(tmp_path):
    lg = open_log(tmp_path)
    _fill(lg, 5)
    lg.set_high_watermark(20)
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records_before(21)
    assert lg.follow_log_start_offset(45) == 20  # a follower never starts above what it knows committed
    lg.set_high_watermark(None)
    assert lg.delete_records_before(50) == 50  # the whole log: the active segment stays, its records hidden
    assert lg.log_start_offset == lg.log_end_offset == 50
    lg.append(make_batch(50, 3))
    assert [r.offset for r in all_records(lg)] == [50, 51, 52]
    lg.close()


def test_a_crash_between_the_checkpoint_and_the_deletes_is_finished_at_opening(tmp_path):
    lg = open_log(tmp_path, segment_bytes=1024)
    _fill(lg, 20)
    bases = [s.base_offset for s in lg.segments]
    lg.close()
    write_log_start_offset(tmp_path / "t-0", bases[3] + 1)  # the checkpoint written, no segment deleted yet
    again = open_log(tmp_path, segment_bytes=1024)
    assert again.log_start_offset == bases[3] + 1
    assert [s.base_offset for s in again.segments] == bases[3:]
    again.close()
    # a checkpoint beyond the log end (it cannot be written so, but a damaged disk could) is capped
    write_log_start_offset(tmp_path / "t-0", 10_000)
    capped = open_log(tmp_path, segment_bytes=1024)
    assert capped.log_start_offset == capped.log_end_offset == 200
    capped.close()
    (tmp_path / "t-0" / LOG_START_OFFSET_FILE).write_text("garbage\n")  # unreadable: the first segment's base
    damaged = open_log(tmp_path, segment_bytes=1024)
    assert damaged.log_start_offset == damaged.segments[0].base_offset
    damaged.close()


def test_truncating_fully_moves_the_start_and_persists_it(tmp_path):
    lg = open_log(tmp_path)
    _fill(lg, 3)
    lg.delete_records_before(12)
    lg.truncate_fully_and_start_at(100)
    assert lg.log_start_offset == 100
    lg.close()
    again = open_log(tmp_path)
    assert (again.log_start_offset, again.log_end_offset) == (100, 100)
    again.close()


# ---------------------------------------------------------------- a broker


@pytest.fixture(scope="module")
def admin_broker(broker_factory):
    return broker_factory({"log.segment.bytes": "2048", "file.delete.delay.ms": "0"})


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 1) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, b"v%04d" % i, partition=i % partitions)
        if i % 50 == 0:
            p.flush(30)
    assert p.flush(30) == 0


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _earliest(bootstrap: str, topic: str, partition: int = 0) -> int:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = _admin(bootstrap)  # held until the answer: a collected client never completes its futures
    fut = admin.list_offsets({TopicPartition(topic, partition): OffsetSpec.earliest()})
    return next(iter(fut.values())).result(30).offset


def _consume_all(bootstrap: str, topic: str, partition: int = 0, expect: int = 0) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, partition, -2)])  # OFFSET_BEGINNING
        out: list[int] = []
        deadline = time.monotonic() + 30
        while len(out) < expect and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m.offset())
        return out
    finally:
        c.close()


def _delete_records(bootstrap: str, topic: str, partition: int, offset: int, timeout: float = 30):
    from confluent_kafka import TopicPartition

    admin = _admin(bootstrap)
    fut = admin.delete_records([TopicPartition(topic, partition, offset)])
    return next(iter(fut.values())).result(timeout)


def test_confluent_delete_records_moves_the_start_for_list_offsets_consumers_and_kcat(
    admin_broker, topic_name
):
    topic = topic_name("dr")
    with WireClient(admin_broker.bootstrap) as w:
        w.create_topic(topic, 1)
    _produce(admin_broker.bootstrap, topic, 300)
    res = _delete_records(admin_broker.bootstrap, topic, 0, 120)
    assert res.low_watermark == 120
    assert _earliest(admin_broker.bootstrap, topic) == 120
    assert _consume_all(admin_broker.bootstrap, topic, expect=180) == list(range(120, 300))
    out = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            admin_broker.bootstrap,
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o\n",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert [int(x) for x in out.stdout.split()] == list(range(120, 300))
    # -1: up to the high watermark
    res = _delete_records(admin_broker.bootstrap, topic, 0, -1)
    assert res.low_watermark == 300
    assert _earliest(admin_broker.bootstrap, topic) == 300


def test_delete_records_errors_and_the_broker_still_serves(admin_broker, topic_name):
    from confluent_kafka import KafkaException, TopicPartition

    topic = topic_name("dr-bad")
    with WireClient(admin_broker.bootstrap) as w:
        w.create_topic(topic, 2)
    _produce(admin_broker.bootstrap, topic, 10, partitions=2)
    with pytest.raises(KafkaException) as e:
        _delete_records(admin_broker.bootstrap, topic, 0, 1000)
    assert e.value.args[0].code() == 1  # OFFSET_OUT_OF_RANGE
    with WireClient(admin_broker.bootstrap) as w:
        resp = w.request(
            ra.DeleteRecordsRequest(
                [
                    ra.DeleteRecordsPartition(topic, 0, 1000),
                    ra.DeleteRecordsPartition(topic, 7, 1),
                    ra.DeleteRecordsPartition("no-such-topic-dr", 0, 1),
                    ra.DeleteRecordsPartition(topic, 1, -7),
                    ra.DeleteRecordsPartition("__consumer_offsets", 0, 0),
                    ra.DeleteRecordsPartition(topic, 1, 2),
                ]
            ),
            check=False,
        )
    codes = [(p.topic, p.partition, p.error_code, p.low_watermark) for p in resp.partitions]
    assert codes == [  # answered grouped by topic, in the order asked
        (topic, 0, 1, -1),  # beyond the high watermark: OFFSET_OUT_OF_RANGE
        (topic, 7, 3, -1),  # UNKNOWN_TOPIC_OR_PARTITION
        (topic, 1, 1, -1),  # a negative offset other than -1
        (topic, 1, 0, 2),
        ("no-such-topic-dr", 0, 3, -1),
        ("__consumer_offsets", 0, 17, -1),  # INVALID_TOPIC_EXCEPTION: internal topics are not for this
    ]
    assert _earliest(admin_broker.bootstrap, topic, 1) == 2
    assert _earliest(admin_broker.bootstrap, topic, 0) == 0
    admin = _admin(admin_broker.bootstrap)
    fut = admin.delete_records([TopicPartition(topic, 0, 3)])
    assert next(iter(fut.values())).result(30).low_watermark == 3


def test_describe_log_dirs_with_kafka_python(admin_broker, topic_name):
    from kafka.admin import KafkaAdminClient

    topic = topic_name("dld")
    with WireClient(admin_broker.bootstrap) as w:
        w.create_topic(topic, 2)
    _produce(admin_broker.bootstrap, topic, 40, partitions=2)
    a = KafkaAdminClient(bootstrap_servers=admin_broker.bootstrap)
    try:
        resp = a.describe_log_dirs()
    finally:
        a.close()
    assert topic in repr(resp)  # kafka-python's view of the same answer (its shape varies by version)
    with WireClient(admin_broker.bootstrap) as w:
        mine = w.request(ra.DescribeLogDirsRequest({topic: [0, 1]}))
    assert len(mine.results) == 1
    d = mine.results[0]
    assert d.error_code == 0 and d.total_bytes > 0 and 0 <= d.usable_bytes <= d.total_bytes
    sizes = {(p.topic, p.partition): (p.size, p.offset_lag, p.is_future) for p in d.partitions}
    assert set(sizes) == {(topic, 0), (topic, 1)}
    assert all(s > 0 and lag == 0 and not fut for s, lag, fut in sizes.values())


def test_log_start_survives_a_clean_restart_and_kill_9(tmp_path, topic_name):
    topic = topic_name("dr-crash")
    with broker_process(tmp_path / "b", config={"log.segment.bytes": "2048"}) as b:
        with WireClient(b.bootstrap) as w:
            w.create_topic(topic, 1)
        _produce(b.bootstrap, topic, 200)
        assert _delete_records(b.bootstrap, topic, 0, 77).low_watermark == 77
        b.restart()
        assert _earliest(b.bootstrap, topic) == 77
        assert _delete_records(b.bootstrap, topic, 0, 150).low_watermark == 150
        b.kill()  # SIGKILL right after the answer
        b.start()
        assert _earliest(b.bootstrap, topic) == 150
        assert _consume_all(b.bootstrap, topic, expect=50) == list(range(150, 200))
        with WireClient(b.bootstrap) as w:
            r = w.fetch(topic, 0, 149)
            assert r.error_code == 1  # OFFSET_OUT_OF_RANGE below the start
