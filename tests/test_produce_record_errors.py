"""Per-record produce errors (KIP-467, Produce v8+ ``record_errors``): a batch refused because some of
its records have no key on a compacted topic names those records, as Kafka does, so that librdkafka
fails only them with INVALID_RECORD and the others with _INVALID_DIFFERENT_RECORD (librdkafka's
test 0011_produce_batch, test_message_single_partition_record_fail, counts exactly that)."""

from __future__ import annotations

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_logsource.protocol import codecs
from pyspark_logsource.protocol import messages as m
from pyspark_logsource.protocol.primitives import Reader


def test_keyless_records_on_a_compacted_topic_are_named_in_record_errors(broker, topic_name):
    topic = topic_name("compacted")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(30)
    # one batch of 20 (linger): records 0, 10 keyless; the rest keyed
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 500, "retries": 0})
    errors: dict[int, int] = {}

    def report(err, msg):
        errors[int(msg.value())] = err.code() if err else 0

    for i in range(20):
        p.produce(
            topic, str(i).encode(), key=None if i % 10 == 0 else b"k%d" % i, partition=0, on_delivery=report
        )
    assert p.flush(30) == 0
    assert {i for i, e in errors.items() if e == KafkaError.INVALID_RECORD} == {0, 10}
    # the others of the refused batch are failed by the client as "another record was invalid"
    assert {e for i, e in errors.items() if i not in (0, 10)} == {KafkaError._INVALID_DIFFERENT_RECORD}
    # a batch of keyed records alone is accepted
    ok: list = []
    p.produce(topic, b"v", key=b"k", partition=0, on_delivery=lambda err, msg: ok.append(err))
    p.flush(30)
    assert ok == [None]


def test_record_errors_round_trip_from_v8_and_are_absent_before():
    resp = m.ProduceResponse(
        [m.ProducePartitionResponse("t", 0, 87, error_message="no key", record_errors=(0, 10))]
    )
    header = m.RequestHeader(0, 8, 7, "c")
    frame = b"".join(bytes(x) for x in codecs.encode_response(header, resp))
    r = Reader(memoryview(frame)[8:])  # size and correlation id
    back = codecs.decode_response_body(0, 8, r)
    assert back.partitions[0].record_errors == (0, 10)
    assert back.partitions[0].error_code == 87
    header7 = m.RequestHeader(0, 7, 7, "c")
    frame7 = b"".join(bytes(x) for x in codecs.encode_response(header7, resp))
    back7 = codecs.decode_response_body(0, 7, Reader(memoryview(frame7)[8:]))
    assert back7.partitions[0].record_errors == ()
