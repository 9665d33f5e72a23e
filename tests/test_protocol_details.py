"""Protocol details Kafka clients rely on (issue 21): Metadata's topic auto-creation, a fetch that starts
inside a batch, OffsetCommit's metadata string coming back in OffsetFetch.

Real clients (confluent-kafka, kafka-python, kcat) against a real broker process.
"""

from __future__ import annotations

import pytest
from support.brokers import WireClient

from pyspark_logsource.errors import UnknownTopicOrPartition

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
