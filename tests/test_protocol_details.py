"""Protocol details Kafka clients rely on (issue 21): Metadata's topic auto-creation, a fetch that starts
inside a batch, OffsetCommit's metadata string coming back in OffsetFetch.

Real clients (confluent-kafka, kafka-python, kcat) against a real broker process.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from support.brokers import WireClient

from pyspark_logsource import format as fmt
from pyspark_logsource.errors import InvalidRequest, OffsetMetadataTooLarge, UnknownTopicOrPartition

pytestmark = [
    pytest.mark.kafka_clients,
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

PARTITIONS = 3  # num.partitions of this module's broker: auto-created topics get it


@pytest.fixture(scope="module")
def broker_config():
    return {"num.partitions": PARTITIONS, "default.replication.factor": 1}


@pytest.fixture(scope="module")
def no_auto_broker(broker_factory):
    return broker_factory({"auto.create.topics.enable": "false"})


def _partitions(bootstrap: str, topic: str) -> list[int]:
    with WireClient(bootstrap) as w:
        t = w.metadata([topic]).topics[0]
        assert t.error_code == 0, t
        return sorted(p.partition for p in t.partitions)


# ------------------------------------------------------------------ Metadata auto-creation


def test_confluent_kafka_producer_auto_creates_a_new_topic(broker, topic_name):
    from confluent_kafka import Producer

    bs, topic = broker.bootstrap, topic_name("ck-auto")
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    errors: list = []
    p.produce(topic, b"v", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    assert errors == [None]
    # librdkafka asked for the topic with allow_auto_topic_creation=true: created with num.partitions
    assert _partitions(bs, topic) == list(range(PARTITIONS))


def test_kafka_python_producer_auto_creates_a_new_topic(broker, topic_name):
    from kafka import KafkaProducer

    bs, topic = broker.bootstrap, topic_name("kp-auto")
    p = KafkaProducer(bootstrap_servers=bs)
    try:
        md = p.send(topic, b"v").get(timeout=30)
        assert md.offset == 0
    finally:
        p.close()
    assert _partitions(bs, topic) == list(range(PARTITIONS))


def test_metadata_without_allow_auto_topic_creation_creates_nothing(broker, topic_name):
    topic = topic_name("no-allow")
    with WireClient(broker.bootstrap) as w:
        assert w.metadata([topic], auto_create=False).topics[0].error_code == UnknownTopicOrPartition.code
        assert w.metadata([topic], auto_create=False).topics[0].error_code == UnknownTopicOrPartition.code
        assert topic not in {t.name for t in w.metadata().topics}


def test_a_broker_with_auto_create_disabled_creates_nothing(no_auto_broker, topic_name):
    from confluent_kafka import Producer

    bs, topic = no_auto_broker.bootstrap, topic_name("disabled")
    with WireClient(bs) as w:
        assert w.metadata([topic], auto_create=True).topics[0].error_code == UnknownTopicOrPartition.code
    p = Producer({"bootstrap.servers": bs, "message.timeout.ms": 3000})
    errors: list = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert len(errors) == 1 and errors[0] is not None  # never delivered: the topic does not exist
    with WireClient(bs) as w:
        assert topic not in {t.name for t in w.metadata().topics}


# ------------------------------------------------------------------ a fetch inside a batch


def test_a_fetch_inside_a_batch_returns_the_whole_batch(broker, topic_name):
    """Kafka answers a fetch at an offset inside a batch with the whole batch (from its base offset);
    the client skips the records before its position."""
    from confluent_kafka import Consumer, TopicPartition

    bs, topic = broker.bootstrap, topic_name("mid-batch")
    values = [f"v{i}".encode() for i in range(10)]
    with WireClient(bs) as w:
        assert w.create_topic(topic, 1) == 0
        assert w.produce(topic, 0, fmt.encode_kafka(values)).error_code == 0  # one batch, offsets 0-9
        assert w.produce(topic, 0, fmt.encode_kafka([b"next"])).error_code == 0  # offset 10
        p = w.fetch(topic, 0, 5)
        batches = fmt.decode_all(bytes(p.records))
        assert [b.header.base_offset for b in batches] == [0, 10]
        assert [r.value for r in batches[0].records()] == values

    # kcat from offset 5: offsets 5..10, nothing before
    r = subprocess.run(
        ["kcat", "-C", "-b", bs, "-t", topic, "-p", "0", "-o", "5", "-e", "-f", "%o:%s\\n"],
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == [f"{i}:v{i}" for i in range(5, 10)] + ["10:next"]

    # confluent-kafka assigned at offset 7
    c = Consumer({"bootstrap.servers": bs, "group.id": topic, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 7)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))
        assert got == [(7, b"v7"), (8, b"v8"), (9, b"v9"), (10, b"next")]
    finally:
        c.close()


# ------------------------------------------------------------------ OffsetCommit's metadata


def test_offset_commit_metadata_comes_back_in_offset_fetch(broker, topic_name):
    from confluent_kafka import Consumer, TopicPartition

    bs, topic = broker.bootstrap, topic_name("commit-meta")
    with WireClient(bs) as w:
        assert w.create_topic(topic, 2) == 0
    group = f"{topic}-g"
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(
            offsets=[
                TopicPartition(topic, 0, 3, metadata="checkpoint-a"),
                TopicPartition(topic, 1, 0, metadata=""),
            ],
            asynchronous=False,
        )
        got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
        assert [(t.partition, t.offset, t.metadata) for t in got] == [(0, 3, "checkpoint-a"), (1, 0, "")]
    finally:
        c.close()
    # the raw protocol: a null metadata (v2+ allow it on the wire) reads back as Kafka stores it (empty),
    # a long one byte for byte
    with WireClient(bs) as w:
        long = "m" * 4000
        assert w.commit(group, {(topic, 0): 4}, metadata=long).partitions[0].error_code == 0
        assert w.committed(group, [(topic, 0)])[(topic, 0)].metadata == long
        # longer than offset.metadata.max.bytes (4096): OFFSET_METADATA_TOO_LARGE, nothing stored; the
        # same for every partition of the commit
        r = w.commit(group, {(topic, 0): 9, (topic, 1): 9}, metadata="m" * 4097)
        assert [p.error_code for p in r.partitions] == [OffsetMetadataTooLarge.code] * 2
        assert w.committed(group, [(topic, 0)])[(topic, 0)].offset == 4
        assert w.commit(group, {(topic, 1): 5}, metadata=None).partitions[0].error_code == 0
        assert w.committed(group, [(topic, 1)])[(topic, 1)].metadata == ""


# ------------------------------------------------------------------ ListOffsets v7-v10


def test_list_offsets_max_timestamp_local_start_and_tiered(broker, topic_name):
    """KIP-734's MAX_TIMESTAMP (-3): the first record with the largest timestamp; KIP-405's
    EARLIEST_LOCAL (-4) is the log start and KIP-1005's LATEST_TIERED (-5) is -1 without tiered storage."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    bs, topic = broker.bootstrap, topic_name("max-ts")
    with WireClient(bs) as w:
        assert w.create_topic(topic, 2) == 0
        assert w.api_versions is not None
        assert (
            w.produce(topic, 0, fmt.encode_kafka([b"a", b"b", b"c"], timestamps=[100, 300, 200])).error_code
            == 0
        )
        assert w.produce(topic, 0, fmt.encode_kafka([b"d", b"e"], timestamps=[300, 50])).error_code == 0
        got = w.list_offset(topic, 0, -3)
        assert (got.error_code, got.offset, got.timestamp) == (0, 1, 300)
        assert (w.list_offset(topic, 0, -4).offset, w.list_offset(topic, 0, -5).offset) == (0, -1)
        empty = w.list_offset(topic, 1, -3)  # no record: Kafka answers -1, -1
        assert (empty.error_code, empty.offset, empty.timestamp) == (0, -1, -1)
        assert w.list_offset(topic, 0, -6).error_code == InvalidRequest.code  # not a sentinel Kafka has

    admin = AdminClient({"bootstrap.servers": bs})
    futs = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp()}, request_timeout=30)
    res = next(iter(futs.values())).result(30)
    assert (res.offset, res.timestamp) == (1, 300)
