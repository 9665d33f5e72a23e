"""Exactly-once Spark writes against a 3-broker cluster (issue 12 in cluster mode).

A streaming query ``logsource -> filter/explode -> logsource`` (the exactly-once sink) runs in
the session's SparkSession while a producer feeds its input. Meanwhile the transaction
coordinator's broker is killed -9, the query is stopped and restarted from its checkpoint, the
leader of an output partition is killed -9, and both brokers come back. The query keeps
committing micro-batches throughout. Afterwards our read_committed Consumer, Spark's batch read
and a confluent-kafka consumer (isolation.level=read_committed) each see exactly the expected
outputs: for each input offset, its outputs, once each.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from support.cluster import Cluster, confluent_read_to_eof, wait_for

from pyspark_logsource.broker.internal_topics import TRANSACTION_STATE_TOPIC, partition_for
from pyspark_logsource.client import Admin, Consumer, Producer

PARTITIONS = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
IN, OUT = "eos_cluster_in", "eos_cluster_out"


def _coordinator(c: Cluster, write_id: str) -> int | None:
    """The broker coordinating ``write_id``'s transactions: the leader of its ``__transaction_state``
    partition once that topic is replicated through ZooKeeper; before, the controller."""
    parts = c.assignment(TRANSACTION_STATE_TOPIC)
    if not parts:
        return c.controller()
    return c.leader(TRANSACTION_STATE_TOPIC, partition_for(write_id, len(parts)))


def _published(bs: str) -> int:
    """Records visible to read_committed readers in the output (its last stable offsets)."""
    with Admin(bs) as a:
        return sum(
            a.list_offsets([(OUT, p) for p in range(PARTITIONS)], "latest", read_committed=True).values()
        )


def _expected(inputs: dict[tuple[int, int], int]) -> Counter:
    """Input value n at (partition, offset) gives n % 3 outputs ``partition:offset:i``."""
    exp: Counter = Counter()
    for (p, o), v in inputs.items():
        for i in range(v % 3):
            exp[f"{p}:{o}:{i}".encode()] += 1
    return exp


def _input_log(bs: str) -> dict[tuple[int, int], int]:
    """Every record of the input topic: (partition, offset) -> value."""
    with Consumer(bs) as cons:
        with Admin(bs) as a:
            ends = a.list_offsets([(IN, p) for p in range(PARTITIONS)], "latest")
        cons.assign(list(ends))
        cons.seek_to_beginning()
        out: dict[tuple[int, int], int] = {}
        deadline = time.monotonic() + 60
        while len(out) < sum(ends.values()) and time.monotonic() < deadline:
            for m in cons.poll(500, max_records=5000):
                out[(m.partition, m.offset)] = int(m.value)
    assert len(out) == sum(ends.values()), f"read {len(out)} of {sum(ends.values())} input records"
    return out


def _read_committed_consumer(bs: str, expected: int) -> Counter:
    got: Counter = Counter()
    with Consumer(bs, isolation_level="read_committed") as cons:
        cons.assign([(OUT, p) for p in range(PARTITIONS)])
        cons.seek_to_beginning()
        deadline = time.monotonic() + 60
        while sum(got.values()) < expected and time.monotonic() < deadline:
            got.update(m.value for m in cons.poll(500, max_records=5000))
        got.update(m.value for m in cons.poll(1000))  # anything beyond the expected shows up too
    return got


def _confluent_read_committed(bs: str) -> Counter:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    from confluent_kafka import Consumer as KConsumer

    k = KConsumer(
        {
            "bootstrap.servers": bs,
            "group.id": "eos-cluster-rdk",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    k.assign([TopicPartition(OUT, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    try:
        return Counter(m.value() for m in confluent_read_to_eof(k, PARTITIONS))
    finally:
        k.close()


def _check(got: Counter, expected: Counter, reader: str) -> None:
    dupes = {k: n for k, n in got.items() if n > 1}
    assert not dupes, f"{reader}: {len(dupes)} outputs read more than once, e.g. {list(dupes.items())[:5]}"
    missing, extra = set(expected) - set(got), set(got) - set(expected)
    assert not missing and not extra, (
        f"{reader}: {len(missing)} outputs missing (e.g. {sorted(missing)[:5]}), "
        f"{len(extra)} unexpected (e.g. {sorted(extra)[:5]})"
    )


class _Feeder:
    """Feeds the input: values 0, 1, 2, ... round-robin over its partitions, acks=all; records where each landed."""

    def __init__(self, bs: str) -> None:
        self.bs = bs
        self.acked: dict[tuple[int, int], int] = {}
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="eos-cluster-feeder")

    def _run(self) -> None:
        try:
            with Producer(self.bs, acks="all", linger_ms=2, delivery_timeout_ms=120000) as p:
                n = 0
                while not self._stop.is_set():
                    futs = [
                        (v, p.send(IN, str(v).encode(), partition=v % PARTITIONS)) for v in range(n, n + 6)
                    ]
                    for v, f in futs:
                        part, off = f.result(130)[:2]
                        self.acked[(part, off)] = v
                    n += 6
                    time.sleep(0.1)  # ~50 inputs a second: small data, many micro-batches
        except BaseException as e:
            self.errors.append(e)

    def start(self) -> _Feeder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)
        assert not self._thread.is_alive(), "the feeder did not stop"
        assert not self.errors, f"the feeder failed: {self.errors!r}"


def _start_query(spark: Any, bs: str, checkpoint: str) -> Any:
    from pyspark.sql import functions as F

    src = (
        spark.readStream.format("logsource")
        .option("bootstrap.servers", bs)
        .option("subscribe", IN)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "600")
        .load()
    )
    n = F.col("value").cast("string").cast("int") % 3
    out = (
        src.where(n > 0)
        .select("partition", "offset", F.explode(F.sequence(F.lit(0), n - 1)).alias("i"))
        .select(F.concat_ws(":", "partition", "offset", "i").alias("value"))
    )
    return (
        out.writeStream.format("logsource")
        .option("bootstrap.servers", bs)
        .option("topic", OUT)
        .option("checkpointLocation", checkpoint)
        .option("transaction.timeout.ms", "20000")
        .trigger(processingTime="300 milliseconds")
        .start()
    )


def _last_batch(q: Any) -> int:
    p = q.lastProgress
    return -1 if p is None else int(p["batchId"])


def _failure(q: Any) -> str | None:
    """The query's failure with its chain of causes (the task's Python error is deep in it)."""
    if q.exception() is None:
        return None
    causes, e = [], q._jsq.exception().get()
    while e is not None and len(causes) < 8:
        causes.append(str(e.toString())[-1500:])
        e = e.getCause()
    return "\n  caused by: ".join(causes)


def _wait_batches(
    q: Any, bs: str, after_batch: int, after_published: int, what: str, timeout: float = 180
) -> None:
    """Until the query completed two micro-batches past ``after_batch`` and the published output grew."""

    def moved() -> bool:
        if q.exception() is not None:
            raise AssertionError(f"the query failed {what}: {_failure(q)}")
        return _last_batch(q) >= after_batch + 2 and _published(bs) > after_published

    t0 = time.monotonic()
    try:
        wait_for(moved, timeout, interval=0.2, what=f"micro-batches committed {what}")
        print(f"batch {_last_batch(q)} committed {what} ({time.monotonic() - t0:.1f} s)", flush=True)
    except AssertionError:
        if q.exception() is not None:
            raise AssertionError(f"the query failed {what}: {_failure(q)}") from None
        raise


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.kafka_clients
# measured wall time: 241 s under a load average of 12-13, and 256, 268, 272 s in three runs in a row under
# 21-27 (2 cores shared by other jobs; not measured on an idle machine). Of a 268 s run (load 20-27) the test
# body took 208 s: cluster start and the first micro-batch (Spark's planner workers starting) 80 s of it,
# each kill phase 4-25 s, the drain and the three readers' checks 20 s; the rest is the session's Spark start
@pytest.mark.kill9
@pytest.mark.timeout(1200)
def test_streaming_exactly_once_while_the_coordinator_and_an_output_leader_are_killed(
    zk_connect, tmp_path, spark
):
    began = time.monotonic()

    def phase(what: str) -> None:  # where the wall time goes (pytest -s)
        print(f"{time.monotonic() - began:6.1f} s: {what}", flush=True)

    with Cluster(zk_connect, tmp_path / "cluster", brokers=3) as c:
        for t in (IN, OUT):
            c.create_topic(t, partitions=PARTITIONS, replication_factor=3, config=TOPIC_CONFIG)
            c.wait_full_isr(t)
        # every broker leads a partition of each topic, so each kill moves some leader
        assert sorted(c.leaders(IN).values()) == sorted(c.leaders(OUT).values()) == [1, 2, 3]
        bs = ",".join(f"127.0.0.1:{b.port}" for b in c.brokers.values())  # dead or alive: clients cope
        ckpt = str(tmp_path / "ckpt")
        feeder = _Feeder(bs).start()
        q = _start_query(spark, bs, ckpt)
        write_id = f"spark-query-{q.id}"
        try:
            _wait_batches(q, bs, -1, 0, "at the start", timeout=300)  # a loaded machine: slow first batches

            # 1. kill -9 the transaction coordinator while micro-batches stage and commit
            coordinator = _coordinator(c, write_id)
            assert coordinator is not None
            batch, published = _last_batch(q), _published(bs)
            c.kill(coordinator, wait_deregistered=False)
            _wait_batches(q, bs, batch, published, f"after the coordinator (broker {coordinator}) was killed")
            assert _coordinator(c, write_id) not in (None, coordinator)
            # it comes back (with min.insync.replicas 2 of 3, two dead brokers would stop every write)
            phase("coordinator killed, batches committed")
            c.start(coordinator)
            for t in (IN, OUT, TRANSACTION_STATE_TOPIC):
                c.wait_full_isr(t)

            # 2. stop the query and restart it from its checkpoint (same query id: same write id)
            q.stop()
            q = _start_query(spark, bs, ckpt)
            assert f"spark-query-{q.id}" == write_id
            _wait_batches(q, bs, -1, _published(bs), "after the restart from the checkpoint")

            # 3. kill -9 the leader of an output partition that does not coordinate the write
            now = _coordinator(c, write_id)
            victim = next(b for b in c.leaders(OUT).values() if b is not None and b != now)
            batch, published = _last_batch(q), _published(bs)
            c.kill(victim, wait_deregistered=False)
            _wait_batches(q, bs, batch, published, f"after an output leader (broker {victim}) was killed")
            phase("output leader killed, batches committed")
            c.start(victim)
            for t in (IN, OUT, TRANSACTION_STATE_TOPIC):
                c.wait_full_isr(t)
            batch, published = _last_batch(q), _published(bs)
            _wait_batches(q, bs, batch, published, "after both brokers were restarted")
            phase("both restarted, batches committed")
            # enough input for the checks below (> 1000 outputs; n inputs in a row give n outputs): on an
            # idle machine the phases above can pass in less time than the feeder needs for it
            wait_for(lambda: len(feeder.acked) >= 1020, 120, interval=0.2, what="1020 acknowledged inputs")
        except BaseException:
            q.stop()  # the shared session keeps no query running against a closed cluster
            raise
        finally:
            feeder.stop()
        try:
            q.processAllAvailable()
        finally:
            q.stop()
        assert q.exception() is None, q.exception()

        phase("drained and stopped")
        inputs = _input_log(bs)
        assert all(inputs.get(where) == v for where, v in feeder.acked.items()), (
            "an acknowledged input is missing"
        )
        expected = _expected(inputs)
        assert sum(expected.values()) > 1000
        _check(_read_committed_consumer(bs, sum(expected.values())), expected, "our read_committed Consumer")
        rows = spark.read.format("logsource").option("bootstrap.servers", bs).option("subscribe", OUT).load()
        _check(
            Counter(bytes(r.value) for r in rows.select("value").collect()), expected, "Spark's batch read"
        )
        _check(_confluent_read_committed(bs), expected, "confluent-kafka (read_committed)")
        phase(f"{sum(expected.values())} outputs of {len(inputs)} inputs checked by three readers")


@pytest.mark.cluster
@pytest.mark.timeout(60)
def test_a_broker_answers_no_request_before_it_has_joined_its_cluster(tmp_path):
    """A restarting broker binds its port first (its registration names it) but serves requests only once it
    has joined the cluster: before, its Metadata named no topics, and a Spark write planned against it in
    that window failed with 'topic does not exist' (seen in the test above when a broker came back)."""
    import errno
    import socket
    import subprocess
    import sys

    with socket.socket() as s1, socket.socket() as s2:
        s1.bind(("127.0.0.1", 0))
        s2.bind(("127.0.0.1", 0))
        port, no_zookeeper = s1.getsockname()[1], s2.getsockname()[1]  # free ports: nothing listens there
    overrides = {
        "broker.id": "1",
        "zookeeper.connect": f"127.0.0.1:{no_zookeeper}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(tmp_path / "logs"),
    }
    argv = [sys.executable, "-m", "pyspark_logsource.broker"]
    for k, v in overrides.items():
        argv += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:

        def bound() -> bool:
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError as e:
                    return e.errno == errno.EADDRINUSE
                return False

        wait_for(bound, 30, what="the broker bound its port")
        for _ in range(10):  # joining (ZooKeeper unreachable): refused, never answered with an empty cluster
            assert proc.poll() is None, "the broker exited"
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
            time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait(30)
