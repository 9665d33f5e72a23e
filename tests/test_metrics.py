"""The broker's Prometheus endpoint (``metrics.listener``) against broker processes: a scrape parsed with
prometheus_client's parser; message and byte counters equal to what was produced and consumed (our
clients and confluent-kafka); lag per group equal to the log end minus the committed offset; the
under-replicated count following a follower killed -9 and back; bad requests; 500 idle or slow
connections to the metrics port leave the Kafka listener serving."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request

import confluent_kafka as ck
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.brokers import broker_process
from support.cluster import Cluster, wait_for

from pyspark_logsource.client import Admin, Consumer, Producer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """Every sample of a scrape: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory):
    port = free_port()
    with broker_process(
        tmp_path_factory.mktemp("metrics"), config={"metrics.listener": f"http://127.0.0.1:{port}"}
    ) as b:
        b.metrics_port = port
        yield b


def test_counters_equal_what_was_produced_and_consumed_and_lag(metrics_broker, topic_name):
    b, port = metrics_broker, metrics_broker.metrics_port
    topic = topic_name("m")
    with Admin(b.bootstrap) as a:
        a.create_topic(topic, partitions=1)
    ours, theirs = 700, 300
    with Producer(b.bootstrap, linger_ms=5) as p:
        for i in range(ours):
            p.send(topic, b"ours-%d" % i, partition=0)
        p.flush(30)
    kp = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(theirs):
        kp.produce(topic, b"theirs-%d" % i, partition=0)
    assert kp.flush(30) == 0
    s = scrape(port)
    n = ours + theirs
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == n
    size = value(s, "kafka_log_log_size", topic=topic, partition="0")
    assert size > 0
    assert (
        value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == size
    )  # every byte appended
    assert value(s, "kafka_log_log_logendoffset", topic=topic, partition="0") == n
    assert value(s, "kafka_log_log_logstartoffset", topic=topic, partition="0") == 0
    assert value(s, "kafka_network_requestmetrics_requests_total", request="Produce") >= 2
    assert value(s, "kafka_network_requestmetrics_totaltimems_count", request="Produce") >= 2
    assert value(s, "kafka_network_requestmetrics_localtimems_bucket", request="Produce", le="+Inf") >= 2
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(s, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 0

    # consumed once, from the start: the bytes out are the log's bytes
    got = 0
    with Consumer(b.bootstrap) as c:
        c.assign([(topic, 0)])
        deadline = time.monotonic() + 30
        while got < n and time.monotonic() < deadline:
            got += len(c.poll(500))
    assert got == n
    s = scrape(port)
    assert value(s, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= size
    assert value(s, "kafka_network_requestmetrics_requests_total", request="FetchConsumer") >= 1

    # a group that committed 400 (confluent-kafka) and one that committed all (ours): lag = end - committed
    kc = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "lag-a", "enable.auto.commit": False})
    kc.commit(offsets=[ck.TopicPartition(topic, 0, 400)], asynchronous=False)
    kc.close()
    with Consumer(b.bootstrap, group_id="lag-b", enable_auto_commit=False) as c:
        c.assign([(topic, 0)])
        c.commit({(topic, 0): n})
    s = scrape(port)
    end = value(s, "kafka_log_log_logendoffset", topic=topic, partition="0")
    assert (
        value(s, "kafka_consumergroup_current_offset", consumergroup="lag-a", topic=topic, partition="0")
        == 400
    )
    assert value(s, "kafka_consumergroup_lag", consumergroup="lag-a", topic=topic, partition="0") == end - 400
    assert value(s, "kafka_consumergroup_lag", consumergroup="lag-b", topic=topic, partition="0") == 0
    assert value(s, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 2


def http(port: int, raw: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_only_get_metrics_is_served(metrics_broker):
    port = metrics_broker.metrics_port
    for path in ("/", "/metrics/x", "/favicon.ico", "/../metrics"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)
        assert e.value.code == 404, path
    assert http(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 405 ")
    assert http(port, b"DELETE /other HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404 ")
    assert http(port, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert http(port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n").startswith(
        b"HTTP/1.1 400 "
    )
    ok = http(port, b"GET /metrics?x=1 HTTP/1.1\r\n\r\n")
    assert ok.startswith(b"HTTP/1.1 200 ") and b"kafka_log_log_size" in ok


def test_500_idle_and_slow_metrics_connections_leave_kafka_serving(metrics_broker, topic_name):
    b, port = metrics_broker, metrics_broker.metrics_port
    topic = topic_name("busy")
    with Admin(b.bootstrap) as a:
        a.create_topic(topic, partitions=1)
    socks: list[socket.socket] = []
    stop = threading.Event()

    def trickle() -> None:  # the slow ones: a byte of a request head now and then
        while not stop.wait(0.2):
            for s in socks[::10]:
                try:
                    s.send(b"G")
                except OSError:
                    pass

    latencies = []
    with Producer(b.bootstrap, linger_ms=0) as p:
        p.send(topic, b"warm", partition=0).result(10)
        for _ in range(500):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        try:
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                t0 = time.monotonic()
                p.send(topic, b"x" * 100, partition=0).result(10)
                latencies.append(time.monotonic() - t0)
        finally:
            stop.set()
            t.join()
            for s in socks:
                s.close()
    assert len(latencies) > 50, len(latencies)
    assert max(latencies) < 1.0, max(latencies)
    # the endpoint itself is back once they are gone
    wait_for(lambda: scrape(port) is not None, timeout=10, what="a scrape after the flood")
    s = scrape(port)
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == len(latencies) + 1


def test_pipelined_one_message_requests_each_counted(metrics_broker, topic_name):
    """One message per produce request, five in flight: the broker appends such runs together and counts
    them with one call per run; every request and message must still be counted once."""
    b, port = metrics_broker, metrics_broker.metrics_port
    topic = topic_name("m1")
    with Admin(b.bootstrap) as a:
        a.create_topic(topic, partitions=1)
    before = scrape(port)
    n = 2000
    with Producer(b.bootstrap, batch_size=1, linger_ms=0, max_in_flight=5, max_batches_per_request=1) as p:
        for i in range(n):
            p.send(topic, b"one-%d" % i, partition=0)
        p.flush(30)
    s = scrape(port)

    def delta(name: str, **labels: str) -> float:
        return value(s, name, **labels) - (value(before, name, **labels) or 0)

    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == n
    assert delta("kafka_network_requestmetrics_requests_total", request="Produce") == n
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="Produce") == n
    assert delta("kafka_network_requestmetrics_localtimems_bucket", request="Produce", le="+Inf") == n
    size = value(s, "kafka_log_log_size", topic=topic, partition="0")
    assert value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == size


def test_refused_batches_are_not_counted_in(metrics_broker, topic_name):
    """Kafka counts messages and bytes in as appended: a batch the log refuses (a keyless record on a
    compacted topic) adds nothing, the next accepted one adds its own."""
    b, port = metrics_broker, metrics_broker.metrics_port
    topic = topic_name("mc")
    with Admin(b.bootstrap) as a:
        a.create_topic(topic, partitions=1, config={"cleanup.policy": "compact"})
    kp = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "retries": 0})
    errors = []
    kp.produce(topic, b"keyless", partition=0, on_delivery=lambda err, msg: errors.append(err))
    kp.flush(30)
    assert errors and errors[0] is not None  # refused: INVALID_RECORD
    assert value(scrape(port), "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) in (None, 0)
    kp.produce(topic, b"v", key=b"k", partition=0)
    assert kp.flush(30) == 0
    s = scrape(port)
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 1
    size = value(s, "kafka_log_log_size", topic=topic, partition="0")
    assert value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == size


@pytest.mark.cluster
def test_under_replicated_follows_a_follower_killed_and_back(zk_connect, tmp_path):
    ports = {bid: free_port() for bid in (1, 2, 3)}
    per_broker = {bid: {"metrics.listener": f"http://127.0.0.1:{p}"} for bid, p in ports.items()}
    with Cluster(zk_connect, tmp_path, brokers=3, broker_config=per_broker) as c:
        c.create_topic("urp", partitions=1, replication_factor=3)
        c.wait_full_isr("urp")
        leader = c.leader("urp", 0)
        follower = next(b for b in c.assignment("urp")[0] if b != leader)

        def urp() -> float:
            return value(scrape(ports[leader]), "kafka_server_replicamanager_underreplicatedpartitions")

        assert urp() == 0
        s = scrape(ports[leader])
        assert value(s, "kafka_server_replicamanager_leadercount") >= 1
        controllers = sum(
            value(scrape(ports[b]), "kafka_controller_kafkacontroller_activecontrollercount") for b in ports
        )
        assert controllers == 1
        c.kill(follower)
        wait_for(lambda: urp() == 1, timeout=30, what="under-replicated at 1")
        assert value(scrape(ports[leader]), "kafka_server_replicamanager_isrshrinks_total") >= 1
        c.start(follower)
        wait_for(lambda: urp() == 0, timeout=60, what="under-replicated back at 0")
        assert value(scrape(ports[leader]), "kafka_server_replicamanager_isrexpands_total") >= 1


def test_metrics_listener_setting():
    from pyspark_logsource.broker.config import BrokerConfig
    from pyspark_logsource.errors import ConfigError

    assert BrokerConfig.from_properties({}).metrics_listener is None  # off by default
    assert BrokerConfig.from_properties({"metrics.listener": ""}).metrics_listener is None
    got = BrokerConfig.from_properties({"metrics.listener": "http://127.0.0.1:9404/"}).metrics_listener
    assert got == ("127.0.0.1", 9404)
    assert BrokerConfig.from_properties({"metrics.listener": "0.0.0.0:0"}).metrics_listener == ("0.0.0.0", 0)
    for bad in ("https://127.0.0.1:9404", "http://127.0.0.1", "http://h:99999", "http://h:port"):
        with pytest.raises(ConfigError):
            BrokerConfig.from_properties({"metrics.listener": bad})


def test_request_time_buckets_follow_prometheus_le():
    from pyspark_logsource.broker.metrics.registry import FOLD_EVERY, BrokerMetrics, RequestCollector

    m = BrokerMetrics()
    # 0.1 ms is in le="0.1" (a bound holds its value), 20 s only in +Inf; more than one fold's worth
    for i in range(FOLD_EVERY + 10):
        m.record("Produce", 0.0001 if i % 2 else 0.0, 0.0, 20.0 if i == 0 else 0.0)
    fams = {f.name: f for f in RequestCollector(m).collect()}
    assert {s.value for s in fams["kafka_network_requestmetrics_requests"].samples} == {FOLD_EVERY + 10}
    q = {
        s.labels["le"]: s.value
        for s in fams["kafka_network_requestmetrics_requestqueuetimems"].samples
        if "le" in s.labels
    }
    assert q["0.1"] == FOLD_EVERY + 10
    remote = {
        s.labels["le"]: s.value
        for s in fams["kafka_network_requestmetrics_remotetimems"].samples
        if "le" in s.labels
    }
    assert remote["10000.0"] == FOLD_EVERY + 9 and remote["+Inf"] == FOLD_EVERY + 10


def test_a_run_of_requests_counts_as_that_many_requests():
    from pyspark_logsource.broker.metrics.registry import FOLD_EVERY, BrokerMetrics, RequestCollector

    m = BrokerMetrics()
    # runs of 3 pipelined produces (one entry each) beside single requests, across a fold
    for _ in range(FOLD_EVERY):
        m.record_run("Produce", 0.0002, 0.003, 3)
    for _ in range(10):
        m.record("Produce", 0.0, 0.02, 0.0)
    n = 3 * FOLD_EVERY + 10
    fams = {f.name: f for f in RequestCollector(m).collect()}
    assert {s.value for s in fams["kafka_network_requestmetrics_requests"].samples} == {n}
    local = {
        s.name: s for s in fams["kafka_network_requestmetrics_localtimems"].samples if "le" not in s.labels
    }
    assert local["kafka_network_requestmetrics_localtimems_count"].value == n
    assert local["kafka_network_requestmetrics_localtimems_sum"].value == pytest.approx(
        3 * FOLD_EVERY * 3 + 200
    )
    buckets = {
        s.labels["le"]: s.value
        for s in fams["kafka_network_requestmetrics_localtimems"].samples
        if "le" in s.labels
    }
    assert buckets["2.5"] == 0 and buckets["5.0"] == 3 * FOLD_EVERY and buckets["25.0"] == n


def test_a_taken_metrics_port_stops_the_broker_with_a_clear_error(tmp_path):
    from pyspark_logsource.errors import NetworkError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(NetworkError, match="exited with status 1") as e:
            with broker_process(tmp_path, config={"metrics.listener": f"http://127.0.0.1:{port}"}):
                pass
        assert "address already in use" in str(e.value).lower()
    # it released the log dir's lock: the same dir starts with a free port
    with broker_process(tmp_path, config={"metrics.listener": f"http://127.0.0.1:{free_port()}"}) as b:
        with Admin(b.bootstrap) as a:
            a.create_topic("after", partitions=1)
