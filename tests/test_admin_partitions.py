"""CreatePartitions (37): confluent-kafka's and kafka-python's admin clients, ours and the CLI against one
broker process, and a three-broker cluster where the controller assigns the new partitions' replicas.

Each call is checked for its effect (the partition count in Metadata, a record produced to and consumed from
a new partition, the new partitions' replicas in the ISR taking acks=all) and every bad input for Kafka's
error code: fewer or as many partitions (INVALID_PARTITIONS), an unknown topic (UNKNOWN_TOPIC_OR_PARTITION),
a broker that does not exist (INVALID_REPLICA_ASSIGNMENT), more replicas than live brokers
(INVALID_REPLICATION_FACTOR).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from support.cluster import Cluster, wait_for

from pyspark_logsource.client import Admin
from pyspark_logsource.errors import InvalidPartitions, UnknownTopicOrPartition

INVALID_PARTITIONS, UNKNOWN_TOPIC, INVALID_RF, INVALID_ASSIGNMENT = 37, 3, 38, 39


def _error(fut) -> tuple[int, str]:
    with pytest.raises(KafkaException) as e:
        fut.result(30)
    return e.value.args[0].code(), e.value.args[0].str()


def _partitions(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def _produce_consume(bootstrap: str, topic: str, partition: int, acks: str = "1") -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks})
    errors = []
    p.produce(topic, b"in-new-partition", partition=partition, on_delivery=lambda e, m: errors.append(e))
    assert p.flush(30) == 0
    assert errors == [None]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        msg = None
        for _ in range(100):
            msg = c.poll(0.3)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.value() == b"in-new-partition" and msg.partition() == partition
    finally:
        c.close()


def test_confluent_create_partitions(broker, topic_name):
    topic = topic_name("grow")
    Admin(broker.bootstrap).create_topic(topic, 1)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    # validate_only: nothing changes
    assert a.create_partitions([NewPartitions(topic, 4)], validate_only=True)[topic].result(30) is None
    assert _partitions(a, topic) == 1
    assert a.create_partitions([NewPartitions(topic, 4)])[topic].result(30) is None
    assert _partitions(a, topic) == 4
    _produce_consume(broker.bootstrap, topic, 3)


def test_create_partitions_bad_input(broker, topic_name):
    topic = topic_name("grow-bad")
    Admin(broker.bootstrap).create_topic(topic, 2)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    code, msg = _error(a.create_partitions([NewPartitions(topic, 1)])[topic])
    assert code == INVALID_PARTITIONS and "currently has 2 partitions" in msg
    code, msg = _error(a.create_partitions([NewPartitions(topic, 2)])[topic])
    assert code == INVALID_PARTITIONS and "already has 2 partitions" in msg
    code, _ = _error(a.create_partitions([NewPartitions("no-such-topic-grow", 3)])["no-such-topic-grow"])
    assert code == UNKNOWN_TOPIC
    code, msg = _error(a.create_partitions([NewPartitions(topic, 3, [[77]])])[topic])
    assert code == INVALID_ASSIGNMENT and "77" in msg
    code, _ = _error(a.create_partitions([NewPartitions(topic, 4, [[0]])])[topic])  # 2 new, 1 list
    assert code == INVALID_ASSIGNMENT
    assert _partitions(a, topic) == 2  # nothing changed, the broker still serves
    _produce_consume(broker.bootstrap, topic, 1)


def test_our_admin_and_kafka_python(broker, topic_name):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KpNewPartitions

    topic = topic_name("grow-ours")
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, 1)
        admin.create_partitions(topic, 2)
        assert admin.partitions_for(topic) == [0, 1]
        with pytest.raises(InvalidPartitions):
            admin.create_partitions(topic, 2)
        with pytest.raises(UnknownTopicOrPartition):
            admin.create_partitions("no-such-topic-ours", 2)
        kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            kp.create_partitions({topic: KpNewPartitions(total_count=5)})
        finally:
            kp.close()
        assert admin.partitions_for(topic) == [0, 1, 2, 3, 4]


def test_new_partitions_survive_a_restart(broker_factory, topic_name):
    b = broker_factory()
    topic = topic_name("grow-restart")
    Admin(b.bootstrap).create_topic(topic, 1)
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    _produce_consume(b.bootstrap, topic, 2)
    b.restart()
    with Admin(b.bootstrap) as admin:
        assert admin.partitions_for(topic) == [0, 1, 2]


def test_cli_alter_partitions(broker, topic_name):
    topic = topic_name("grow-cli")
    Admin(broker.bootstrap).create_topic(topic, 1)
    cli = [sys.executable, "-m", "pyspark_logsource.cli", "topics", "alter", topic, "-b", broker.bootstrap]
    r = subprocess.run([*cli, "--partitions", "3"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"Topic {topic} now has 3 partition(s)." in r.stdout
    assert Admin(broker.bootstrap).partitions_for(topic) == [0, 1, 2]
    r = subprocess.run([*cli, "--partitions", "2"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "InvalidPartitions" in r.stderr + r.stdout


@pytest.mark.cluster
def test_cluster_create_partitions_with_three_replicas(zk_connect, tmp_path):
    with Cluster(zk_connect, tmp_path, brokers=3) as c:
        c.create_topic("grown", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
        c.wait_full_isr("grown")
        first = c.assignment("grown")[0]
        a = AdminClient({"bootstrap.servers": c.bootstrap})
        assert (
            a.create_partitions([NewPartitions("grown", 4)], validate_only=True)["grown"].result(30) is None
        )
        assert len(c.assignment("grown")) == 1
        assert a.create_partitions([NewPartitions("grown", 4)])["grown"].result(30) is None
        assignment = c.assignment("grown")
        assert sorted(assignment) == [0, 1, 2, 3] and assignment[0] == first
        assert all(sorted(r) == [1, 2, 3] for r in assignment.values())
        # Kafka's round robin goes on from partition 0's leader: the new leaders are the next brokers
        ids = [1, 2, 3]
        start = ids.index(first[0])
        assert [assignment[p][0] for p in (1, 2, 3)] == [ids[(start + p) % 3] for p in (1, 2, 3)]
        c.wait_full_isr("grown")
        assert {p: sorted(c.isr("grown", p)) for p in range(4)} == {p: [1, 2, 3] for p in range(4)}
        assert _partitions(a, "grown") == 4
        for p in (1, 2, 3):
            _produce_consume(c.bootstrap, "grown", p, acks="all")
        hws = c.assert_replicas_identical("grown")  # the followers fetched the new partitions
        assert [hws[p] for p in (1, 2, 3)] == [1, 1, 1]

        code, _ = _error(a.create_partitions([NewPartitions("grown", 5, [[1, 2, 9]])])["grown"])
        assert code == INVALID_ASSIGNMENT
        code, _ = _error(a.create_partitions([NewPartitions("grown", 3)])["grown"])
        assert code == INVALID_PARTITIONS
        # a broker down: three replicas no longer fit
        victim = next(b for b in ids if b != c.controller())
        c.kill(victim)
        code, msg = _error(a.create_partitions([NewPartitions("grown", 6)])["grown"])
        assert code == INVALID_RF and "2 live brokers" in msg
        wait_for(lambda: len(c.assignment("grown")) == 4, timeout=5)
