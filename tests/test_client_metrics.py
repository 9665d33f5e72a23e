"""``Producer.metrics()`` and ``Consumer.metrics()`` (Kafka's names) against a broker process whose metrics
endpoint counts the same traffic from its side: the records and bytes our clients report equal the
broker's messages and bytes in and out of the topic."""

from __future__ import annotations

import time

import pytest
from support.brokers import broker_process
from test_metrics import free_port, scrape, value

from pyspark_logsource.client import Admin, Consumer, Producer

N = 2000


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory):
    port = free_port()
    config = {"metrics.listener": f"http://127.0.0.1:{port}"}
    with broker_process(tmp_path_factory.mktemp("client-metrics"), config=config) as b:
        b.metrics_port = port
        yield b


@pytest.mark.parametrize("layout", ["records", "arrow"])
def test_producer_and_consumer_metrics_match_the_broker(metrics_broker, topic_name, layout):
    b = metrics_broker
    topic = topic_name("cm")
    with Admin(b.bootstrap) as a:
        a.create_topic(topic, partitions=1)
    with Producer(b.bootstrap, linger_ms=5, batch_size=16384) as p:
        before = p.metrics()
        assert before["record-send-total"] == 0 and before["byte-total"] == 0
        if layout == "records":
            for i in range(N):
                p.send(topic, b"value-%06d" % i, key=b"k%d" % (i % 7), partition=0)
        else:
            import pyarrow as pa

            p.send_arrow(topic, pa.table({"value": [b"value-%06d" % i for i in range(N)]}), partition=0)
        p.flush(30)
        m = p.metrics()
    s = scrape(b.metrics_port)
    assert (
        m["record-send-total"]
        == N
        == value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic)
    )
    assert m["byte-total"] == value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert m["request-total"] >= 2  # ApiVersions, Metadata, Produce ...
    assert 0 < m["request-latency-avg"] <= m["request-latency-max"] < 30_000
    assert m["produce-throttle-time-avg"] == 0 and m["produce-throttle-time-max"] == 0
    assert m["incomplete_batches"] == 0

    with Consumer(b.bootstrap, max_partition_fetch_bytes=1 << 20) as c:
        assert c.metrics()["records-lag-max"] == -1  # nothing fetched yet
        c.assign([(topic, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < N // 2 and time.monotonic() < deadline:
            got += c.poll(500, max_records=N // 2 - len(got))
        assert len(got) == N // 2
        mid = c.metrics()
        assert mid["records-consumed-total"] == N // 2
        assert mid["records-lag-max"] == N - N // 2  # the high watermark minus the position
        while len(got) < N and time.monotonic() < deadline:
            got += c.poll(500)
        assert len(got) == N
        time.sleep(0.3)  # a fetch chained after the last answer may still be in flight: let it land
        m = c.metrics()
    assert m["records-consumed-total"] == N
    assert m["records-lag-max"] == 0
    assert m["fetch-throttle-time-max"] == 0
    assert 0 < m["request-latency-avg"] <= m["request-latency-max"]
    s = scrape(b.metrics_port)
    # the bytes this consumer received are the bytes the broker sent out of the topic (it is the only reader)
    assert m["bytes-consumed-total"] == value(
        s, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic
    )
    assert m["bytes-consumed-total"] >= value(s, "kafka_log_log_size", topic=topic, partition="0")
