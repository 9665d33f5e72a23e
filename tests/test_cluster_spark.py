"""Spark against a 3-broker cluster while a partition leader is killed with kill -9.

A batch read, a streaming query and ``logsource etl`` (its kill test: the job killed -9 at a commit
point, then loads in this process while another leader dies) run against real broker processes
and a real ZooKeeper (tests/support/cluster.py). Each reads every record exactly once: the clients follow
the leader to its successor, and a new leader's high watermark is waited for, never read past.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from support.cluster import Cluster, confluent_read_to_eof, wait_for

from pyspark_logsource.client import Admin, Consumer, Producer
from pyspark_logsource.client.txn import StagedTxns
from pyspark_logsource.faults import PAUSED_MARKER

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.timeout(400)]

MIN_ISR = {"min.insync.replicas": "2"}


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    """One 3-broker cluster for the module (its own chroot of the session's ZooKeeper)."""
    from kazoo.client import KazooClient

    if not zookeeper.running:
        zookeeper.start()
    chroot = f"/test-cluster-spark-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(zookeeper.connect, timeout=10.0)
    zk.start(timeout=15)
    try:
        zk.ensure_path(chroot)
    finally:
        zk.stop()
        zk.close()
    with Cluster(zookeeper.connect + chroot, tmp_path_factory.mktemp("cluster-spark"), brokers=3) as c:
        yield c


def _bootstrap(c: Cluster) -> str:
    # every broker, dead or alive: a client must cope with a bootstrap list naming a dead broker
    return ",".join(f"127.0.0.1:{b.port}" for b in c.brokers.values())


def _heal(c: Cluster, topic: str) -> None:
    for bid, b in c.brokers.items():
        if not b.running:
            c.start(bid)
    c.wait_full_isr(topic)


def _produce(bs: str, topic: str, values: range) -> dict[bytes, tuple[int, int]]:
    with Producer(bs, acks="all", linger_ms=2) as p:
        futs = {str(i).encode(): p.send(topic, str(i), key=str(i)) for i in values}
        p.flush(60)
        return {v: f.result(1) for v, f in futs.items()}


def _assert_exactly_once(rows, acked: dict[bytes, tuple[int, int]]) -> None:
    """Every acknowledged record once, where it was acknowledged; per partition, offsets dense from 0."""
    seen: dict[bytes, tuple[int, int]] = {}
    by_part: dict[int, list[int]] = {}
    for value, partition, offset in rows:
        value = bytes(value)
        assert value not in seen, f"{value!r} read twice: {seen[value]} and {(partition, offset)}"
        seen[value] = (partition, offset)
        by_part.setdefault(partition, []).append(offset)
    for p, offs in by_part.items():
        assert sorted(offs) == list(range(len(offs))), f"partition {p}: gap or repeat in offsets"
    missing = {v: w for v, w in acked.items() if seen.get(v) != w}
    counts = {p: len(offs) for p, offs in sorted(by_part.items())}
    assert not missing, (
        f"{len(missing)} acknowledged records not read where acknowledged (read per partition: {counts}), e.g. "
        + ", ".join(f"{v!r} acked at {w}, read at {seen.get(v)}" for v, w in list(missing.items())[:3])
    )


def test_batch_read_and_sink_while_a_leader_is_killed(cluster, spark):
    c, topic, sink = cluster, "spark-batch", "spark-sink"
    for t in (topic, sink):
        c.create_topic(t, partitions=3, replication_factor=3, config=MIN_ISR)
        c.wait_full_isr(t)
    bs = _bootstrap(c)
    acked = _produce(bs, topic, range(3000))
    # the sink's transactions need __transaction_state, created on first use only while as many brokers
    # as its replication factor (3) are live (Kafka's rule): it exists before the failure, as in service
    with StagedTxns(bs) as txns:
        txns.coordinator("spark-sink")
    c.wait_full_isr("__transaction_state")
    victim = c.leader(topic, 0)
    c.kill(victim, wait_deregistered=False)  # no wait: the read starts while partition 0 has no live leader
    df = spark.read.format("logsource").option("bootstrap.servers", bs).option("subscribe", topic).load()
    rows = [(r.value, r.partition, r.offset) for r in df.select("value", "partition", "offset").collect()]
    assert c.leader(topic, 0) != victim
    _assert_exactly_once(rows, acked)
    assert len(rows) == 3000
    # the sink, with the victim still dead: each task's producer writes to the new leaders
    df.select("key", "value").write.format("logsource").mode("append").option("bootstrap.servers", bs).option(
        "topic", sink
    ).save()
    with Consumer(bs, auto_offset_reset="earliest") as cons:
        cons.assign([(sink, p) for p in range(3)])
        cons.seek_to_beginning()
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < 3000 and time.monotonic() < deadline:
            got.extend(cons.poll(500, max_records=5000))
    assert sorted(int(m.value) for m in got) == list(range(3000))
    _heal(c, topic)
    c.wait_full_isr(sink)


def test_streaming_query_while_a_leader_is_killed(cluster, spark, tmp_path):
    c, topic = cluster, "spark-stream"
    c.create_topic(topic, partitions=3, replication_factor=3, config=MIN_ISR)
    c.wait_full_isr(topic)
    bs = _bootstrap(c)
    acked: dict[bytes, tuple[int, int]] = {}
    done = threading.Event()

    def produce() -> None:
        with Producer(bs, acks="all", linger_ms=2, delivery_timeout_ms=60000) as p:
            for chunk in range(20):
                acked.update(_send_chunk(p, topic, range(chunk * 100, chunk * 100 + 100)))
                time.sleep(0.1)
        done.set()

    q = (
        spark.readStream.format("logsource")
        .option("bootstrap.servers", bs)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("value", "partition", "offset")
        .writeStream.format("memory")
        .queryName("cluster_stream")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        t = threading.Thread(target=produce)
        t.start()
        wait_for(lambda: len(acked) >= 500, 60, what="500 records acknowledged")
        victim = c.leader(topic, 1)
        c.kill(victim, wait_deregistered=False)
        t.join(120)
        assert done.is_set()
        q.processAllAvailable()
        rows = [(r.value, r.partition, r.offset) for r in spark.table("cluster_stream").collect()]
    finally:
        q.stop()
    assert c.leader(topic, 1) != victim
    _assert_exactly_once(rows, acked)
    assert len(rows) == 2000
    _heal(c, topic)


def _send_chunk(p: Producer, topic: str, values: range) -> dict[bytes, tuple[int, int]]:
    futs = {str(i).encode(): p.send(topic, str(i), key=str(i)) for i in values}
    p.flush(60)
    return {v: f.result(1) for v, f in futs.items()}


@pytest.mark.slow  # a cold Spark driver process (the job that is killed), like tests/test_etl_failures.py
@pytest.mark.kill9
def test_etl_stays_exactly_once_while_a_leader_and_the_job_are_killed(cluster, spark, tmp_path):
    """The ETL kill test against the cluster: the job is killed -9 at its commit point while a
    partition leader is killed too; then loads run here while another leader dies; the output
    holds every offset of the log exactly once."""
    from test_etl_failures import PARTITIONS, Job, assert_exactly_committed, start_producer, stop_producer

    from pyspark_logsource import etl

    c, topic = cluster, "etl-cluster"
    c.create_topic(topic, partitions=PARTITIONS, replication_factor=3, config=MIN_ISR)
    c.wait_full_isr(topic)
    bs = _bootstrap(c)
    out = tmp_path / "out"
    argv = ["--bootstrap-servers", bs, "--subscribe", topic, "--output", str(out), "--no-progress"]
    producer = start_producer(bs, topic, rate=400)
    try:
        with Admin(bs) as admin:
            wait_for(
                lambda: (
                    sum(admin.list_offsets([(topic, p) for p in range(PARTITIONS)], "latest").values()) > 500
                ),
                60,
                what="records in the topic",
            )
        job = Job(argv + ["--master", "local[1]", "--max-offsets-per-load", "3000"], pause_at="commit")
        assert job.wait_for(f"{PAUSED_MARKER} commit"), job.output
        first = c.leader(topic, 0)
        c.kill(first, wait_deregistered=False)
        assert job.kill9(), job.output
        assert etl.status(etl.parse_args(["--output", str(out), "--status"]), log=lambda s: None) == 0
        assert_exactly_committed(out)
        # a load in this process (the session's Spark) while the leader of another partition dies
        second = next(b for b in (c.leader(topic, 1), c.leader(topic, 2)) if b is not None and b != first)
        killer = threading.Timer(0.5, lambda: c.kill(second, wait_deregistered=False))
        killer.start()
        etl.run_load(spark, etl.parse_args(argv), log=lambda s: None)
        killer.join()
        assert_exactly_committed(out)
    finally:
        stop_producer(producer)
    _heal(c, topic)
    etl.run_load(spark, etl.parse_args(argv), log=lambda s: None)  # everything up to the log end
    with Admin(bs) as admin:
        ends = admin.list_offsets([(topic, p) for p in range(PARTITIONS)], "latest")
    committed = assert_exactly_committed(out)
    assert committed == ends and sum(ends.values()) > 500


@pytest.mark.kafka_clients
def test_confluent_kafka_sees_every_broker_and_survives_a_leader_kill(cluster):
    """librdkafka learns the cluster from Metadata (all three brokers, each partition's leader) and its
    idempotent acks=all producer rides through kill -9 of a leader without a loss or a duplicate."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    from confluent_kafka import Producer as KProducer

    c, topic = cluster, "rdkafka-cluster"
    c.create_topic(topic, partitions=3, replication_factor=3, config=MIN_ISR)
    c.wait_full_isr(topic)
    bs = _bootstrap(c)
    p = KProducer({"bootstrap.servers": bs, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    md = p.list_topics(topic, timeout=10)
    assert sorted(md.brokers) == sorted(c.brokers)
    assert {pm.id: pm.leader for pm in md.topics[topic].partitions.values()} == c.leaders(topic)
    acked: dict[bytes, tuple[int, int]] = {}

    def on_delivery(err, msg) -> None:
        assert err is None, err
        acked[msg.value()] = (msg.partition(), msg.offset())

    for i in range(3000):
        p.produce(topic, str(i).encode(), key=str(i).encode(), on_delivery=on_delivery)
        if i == 1000:
            p.flush(30)
            c.kill(c.leader(topic, 0), wait_deregistered=False)
        p.poll(0)
    assert p.flush(90) == 0
    assert len(acked) == 3000
    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "rdk-cluster",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, part, OFFSET_BEGINNING) for part in range(3)])
    try:
        rows = [(m.value(), m.partition(), m.offset()) for m in confluent_read_to_eof(consumer, 3)]
    finally:
        consumer.close()
    _assert_exactly_once(rows, acked)
    assert len(rows) == 3000
    _heal(c, topic)
