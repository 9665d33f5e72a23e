"""Client quotas enforced by a real broker on real clients (issue 23's Must show, the quota lines).

The broker runs in a thread of this process (an embedded broker) so the tests can set quotas on its
quota table directly (``state.quotas.set_entity``), as the quota stores and AlterClientQuotas will.
Rates are measured on the client side (acknowledged or received bytes over time) after the first
quota window; the only timing asserts are the +-10% of the quota (and loose "much faster" ones).
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer as CkConsumer
from support.brokers import WireClient, broker_thread, unique_topic
from support.quota_clients import Producing as _Producing
from support.quota_clients import rate as _rate

from pyspark_logsource.broker.quotas.model import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
)
from pyspark_logsource.client import Consumer, Producer
from pyspark_logsource.client.admin import Admin
from pyspark_logsource.format import batch as fmt
from pyspark_logsource.protocol import MetadataRequest, ProducePartitionData, ProduceRequest

MB = 1_000_000


@pytest.fixture(scope="module")
def qbroker():
    with broker_thread() as b:
        yield b


def _quotas(b):
    return b._broker.state.quotas


def _set(b, client_id: str, **values: float) -> None:
    _quotas(b).set_entity(QuotaEntity(None, client_id), values)


def test_produce_quota_holds_a_producer_at_its_rate_beside_an_unthrottled_one(qbroker):
    topic = unique_topic("qp")
    Admin(qbroker.bootstrap).create_topic(topic, partitions=1)
    alone = _Producing(qbroker.bootstrap, topic, "qp-fast").start()
    time.sleep(3)
    alone.finish()
    rate_alone = _rate(alone.acked, alone.t0, 1, 3)

    _set(qbroker, "qp-slow", **{PRODUCER_BYTE_RATE: MB})
    slow = _Producing(qbroker.bootstrap, topic, "qp-slow").start()
    fast = _Producing(qbroker.bootstrap, topic, "qp-fast").start()
    time.sleep(14)
    slow.finish()
    fast.finish()
    rate_slow = _rate(slow.acked, slow.t0, 2, 14)
    rate_fast = _rate(fast.acked, fast.t0, 2, 14)
    print(
        f"alone {rate_alone / MB:.2f} MB/s; with quota {rate_slow / MB:.3f} MB/s beside {rate_fast / MB:.2f} MB/s"
    )
    assert 0.9 * MB <= rate_slow <= 1.1 * MB
    assert rate_fast > 0.3 * rate_alone and rate_fast > 5 * MB  # loose: it keeps (most of) its rate
    # confluent-kafka sees the throttle: its throttle_cb and its statistics' per-broker throttle window
    assert slow.throttle_cb and max(slow.throttle_cb) > 0
    assert slow.stats_throttle
    assert not fast.throttle_cb


def test_fetch_quota_holds_a_consumer_at_its_rate_and_our_consumer_honors_it(qbroker):
    topic = unique_topic("qf")
    Admin(qbroker.bootstrap).create_topic(topic, partitions=1)
    fill = _Producing(qbroker.bootstrap, topic, "qf-fill").start()
    while sum(n for _, n in fill.acked) < 30 * MB:
        time.sleep(0.1)
    fill.finish()

    _set(qbroker, "qf-slow", **{CONSUMER_BYTE_RATE: MB})
    got: dict[str, list[tuple[float, int]]] = {"slow": [], "fast": []}
    stop = threading.Event()

    def ours() -> None:  # our Consumer, throttled
        c = Consumer(qbroker.bootstrap, client_id="qf-slow", enable_auto_commit=False)
        c.assign([(topic, 0)])
        c.seek((topic, 0), 0)
        seen = 0
        while not stop.is_set():
            c.poll(200, max_records=5000)
            # the bytes of the fetch answers (what the quota counts; poll() hands them out later)
            fetched = c.metrics()["bytes-consumed-total"]
            if fetched > seen:
                got["slow"].append((time.monotonic(), fetched - seen))
                seen = fetched
        got["metrics"] = c.metrics()
        c.close()

    def theirs() -> None:  # a confluent-kafka consumer beside it, unthrottled
        c = CkConsumer(
            {
                "bootstrap.servers": qbroker.bootstrap,
                "group.id": unique_topic("qf-g"),
                "client.id": "qf-fast",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([topic])
        while not stop.is_set():
            for m in c.consume(1000, 0.2):
                if not m.error():
                    got["fast"].append((time.monotonic(), len(m.value())))
        c.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=f, daemon=True) for f in (ours, theirs)]
    for t in threads:
        t.start()
    time.sleep(10)
    stop.set()
    for t in threads:
        t.join(30)
    rate_slow = _rate(got["slow"], t0, 2, 10)
    fast_total = sum(n for _, n in got["fast"])
    print(
        f"throttled consumer {rate_slow / MB:.3f} MB/s; unthrottled read {fast_total / MB:.1f} MB; {got['metrics']}"
    )
    assert 0.9 * MB <= rate_slow <= 1.1 * MB
    assert fast_total >= 29 * MB  # the unthrottled consumer read the whole topic meanwhile
    assert got["metrics"]["fetch-throttle-time-max"] > 0
    assert got["metrics"]["fetch-throttle-time-avg"] > 0


def test_a_quota_change_takes_effect_within_two_seconds(qbroker):
    topic = unique_topic("qc")
    Admin(qbroker.bootstrap).create_topic(topic, partitions=1)
    _set(qbroker, "qc", **{PRODUCER_BYTE_RATE: MB})
    p = _Producing(qbroker.bootstrap, topic, "qc").start()
    time.sleep(4)
    t_up = time.monotonic() - p.t0
    _set(qbroker, "qc", **{PRODUCER_BYTE_RATE: 3 * MB})
    time.sleep(6)
    t_down = time.monotonic() - p.t0
    _set(qbroker, "qc", **{PRODUCER_BYTE_RATE: 0.2 * MB})
    time.sleep(6)
    p.finish()
    before = _rate(p.acked, p.t0, 1, t_up)
    raised = _rate(p.acked, p.t0, t_up + 2, t_down)
    lowered = _rate(p.acked, p.t0, t_down + 2, t_down + 6)
    print(
        f"1 MB/s: {before / MB:.2f}; raised to 3: {raised / MB:.2f}; lowered to 0.2: {lowered / MB:.3f} MB/s"
    )
    assert 0.9 * MB <= before <= 1.1 * MB
    assert raised >= 2 * MB
    assert lowered <= 0.22 * MB


def test_a_client_that_ignores_throttle_time_is_held_by_the_muted_connection(qbroker):
    topic = unique_topic("qr")
    Admin(qbroker.bootstrap).create_topic(topic, partitions=1)
    _set(qbroker, "qr-raw", **{PRODUCER_BYTE_RATE: MB})
    records = fmt.encode([b"r" * 1000] * 16)  # ~16 KB per request
    size = len(records)
    w = WireClient(qbroker.bootstrap, client_id="qr-raw", arrow_body=False)
    frames = [
        w.conn.request_bytes(ProduceRequest([ProducePartitionData(topic, 0, records)], acks=1))[1]
        for _ in range(1200)
    ]
    acked: list[tuple[float, int]] = []
    throttles: list[int] = []
    stop = threading.Event()

    def write() -> None:  # back to back, never looking at throttle_time_ms
        try:
            for f in frames:
                if stop.is_set():
                    return
                w.sock.sendall(f)
        except OSError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    t0 = time.monotonic()
    writer.start()
    w.sock.settimeout(1.0)
    while time.monotonic() - t0 < 8:
        try:
            resp = w.receive()
        except TimeoutError:
            continue
        assert resp.partitions[0].error_code == 0
        acked.append((time.monotonic(), size))
        throttles.append(resp.throttle_time_ms)
    stop.set()
    w.close()
    rate = _rate(acked, t0, 2, 8)
    print(f"raw socket client: {rate / MB:.3f} MB/s at a 1 MB/s quota; max throttle_time_ms {max(throttles)}")
    assert 0.9 * MB <= rate <= 1.1 * MB
    assert max(throttles) > 0


def test_request_quota_holds_a_client_of_many_tiny_requests_to_its_share(qbroker):
    manager = qbroker._broker.quotas

    def hammer(client_id: str, seconds: float) -> tuple[int, list[int]]:
        w = WireClient(qbroker.bootstrap, client_id=client_id)
        n, throttles = 0, []
        end = time.monotonic() + seconds
        while time.monotonic() < end:  # a raw client: it ignores throttle_time_ms too
            throttles.append(w.request(MetadataRequest([])).throttle_time_ms)
            n += 1
        w.close()
        return n, throttles

    free, _ = hammer("qq-free", 3)
    _set(qbroker, "qq-tight", **{REQUEST_PERCENTAGE: 2.0})
    held, throttles = hammer("qq-tight", 6)
    group = next(s for s in manager.groups() if s.kind == "Request" and s.client_id == "qq-tight")
    share, _ = manager.measured(group)
    print(
        f"Metadata: {free / 3:.0f}/s unthrottled, {held / 6:.0f}/s at 2% of a thread (measured {share:.2f}%)"
    )
    assert max(throttles) > 0
    assert held / 6 < 0.5 * free / 3
    assert share <= 2.0 * 1.25  # the measured share of one thread, over the quota window


@pytest.mark.spark
def test_a_spark_batch_read_is_held_to_its_fetch_quota(spark, qbroker):
    from pyspark.sql import functions as F

    topic = unique_topic("qs")
    Admin(qbroker.bootstrap).create_topic(topic, partitions=1)
    fill = _Producing(qbroker.bootstrap, topic, "qs-fill").start()
    while sum(n for _, n in fill.acked) < 4 * MB:
        time.sleep(0.02)
    fill.finish()

    def read(client_id: str) -> tuple[int, float]:
        t0 = time.monotonic()
        df = (
            spark.read.format("logsource")
            .option("bootstrap.servers", qbroker.bootstrap)
            .option("subscribe", topic)
            .option("client.id", client_id)
            .load()
        )
        total = df.select(F.sum(F.length("value"))).first()[0]
        return total, time.monotonic() - t0

    free_bytes, free_s = read("qs-free")  # also the warm-up (Spark's Python workers start)
    _set(qbroker, "qs-spark", **{CONSUMER_BYTE_RATE: MB})
    held_bytes, held_s = read("qs-spark")
    print(f"Spark read of {free_bytes / MB:.1f} MB: {free_s:.1f} s unthrottled, {held_s:.1f} s at 1 MB/s")
    assert held_bytes == free_bytes >= 4 * MB
    assert held_s >= 0.9 * free_bytes / MB  # what the quota implies (the batches' overhead only adds to it)


def test_our_producer_honors_throttle_time_and_reports_it(qbroker):
    topic = unique_topic("qo")
    Admin(qbroker.bootstrap).create_topic(topic, partitions=1)
    _set(qbroker, "qo", **{PRODUCER_BYTE_RATE: MB})
    # one request in flight: each is sent after the previous answer and its throttle (with more in
    # flight, those already sent wait in the muted connection, as with Kafka's clients)
    p = Producer(qbroker.bootstrap, client_id="qo", buffer_memory=2 * MB, max_in_flight=1)
    acked: list[tuple[float, int]] = []
    seen, value = 0, b"o" * 1000
    t0 = time.monotonic()
    while time.monotonic() - t0 < 8:
        for _ in range(100):
            p.send(topic, value)
        sent = p.metrics()["byte-total"]  # acknowledged batches' bytes
        if sent > seen:
            acked.append((time.monotonic(), sent - seen))
            seen = sent
    m = p.metrics()
    p.close(timeout=30)
    rate = _rate(acked, t0, 2, 8)
    print(f"our producer at 1 MB/s: {rate / MB:.3f} MB/s; {m}")
    assert 0.9 * MB <= rate <= 1.1 * MB
    assert m["produce-throttle-time-max"] > 0
    # it waited out each throttle before sending again: its requests were not held in the muted broker
    # connection, so they were answered far quicker than the throttles it was given
    assert m["request-latency-avg"] < 0.5 * m["produce-throttle-time-avg"]
