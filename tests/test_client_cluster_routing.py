"""The clients' routing and failover, against real broker processes (kill -9, restart on the same port).

What a cluster needs of the clients, shown here with single brokers (the
3-broker cluster tests are in tests/test_cluster_spark.py): ``bootstrap.servers``
as a list or a comma-separated string with a dead first entry; a broker that
dies under an idempotent producer, a consumer, a Spark-style ``read_range``
and group offset requests, then comes back: the producer resends with the
same producer id and sequence numbers (the broker's deduplication makes every
record appear exactly once), the consumer keeps its position, the reader
resumes where it was.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
from support.brokers import broker_process

from pyspark_logsource.client import Admin, Consumer, Producer, read_range
from pyspark_logsource.errors import NetworkError


def _dead_address() -> str:
    """A loopback address nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _consume_all(bootstrap, topic: str, partitions: int, expect: int, timeout: float = 30.0) -> list:
    out = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(out) < expect and time.monotonic() < deadline:
            out.extend(c.poll(500, max_records=10000))
    return out


@pytest.mark.parametrize("as_list", [False, True], ids=["string", "list"])
def test_bootstrap_list_with_an_unreachable_first_server(broker, as_list):
    servers = [_dead_address(), broker.bootstrap]
    bootstrap = servers if as_list else ",".join(servers)
    topic = f"boot-{int(as_list)}"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=2)
        with Producer(bootstrap, acks="all") as p:
            for i in range(50):
                p.send(topic, str(i), key=str(i))
            p.flush(30)
        ends = admin.list_offsets([(topic, 0), (topic, 1)], "latest")
        assert sum(ends.values()) == 50
        admin.commit_group_offsets(f"g-{topic}", {(topic, 0): 3})
        assert admin.group_offsets(f"g-{topic}") == {(topic, 0): 3}
    got = _consume_all(bootstrap, topic, 2, 50)
    assert sorted(int(m.value) for m in got) == list(range(50))
    rows = sum(rb.num_rows for rb in read_range(bootstrap, topic, 0, 0, ends[(topic, 0)]))
    assert rows == ends[(topic, 0)]


def test_no_reachable_bootstrap_server_names_each(broker):
    a, b = _dead_address(), _dead_address()
    with Admin([a, b], request_timeout_ms=2000) as admin, pytest.raises(NetworkError) as ei:
        admin.list_topics()
    assert a in str(ei.value) and b in str(ei.value)


def _restart(b, pause: float = 0.3) -> None:
    b.kill()
    time.sleep(pause)
    b.start()


def test_idempotent_producer_and_consumer_ride_through_broker_kills(tmp_path):
    """Producer and consumer run while the broker is killed with -9 twice and comes back on its port."""
    topic, n_parts, total = "ride", 2, 6000
    with broker_process(tmp_path / "b") as b:
        bootstrap = [_dead_address(), b.bootstrap]
        with Admin(bootstrap) as admin:
            admin.create_topic(topic, partitions=n_parts)
        futures, errors = [], []
        consumed: list = []
        stop = threading.Event()

        def produce() -> None:
            with Producer(
                bootstrap,
                acks="all",
                linger_ms=2,
                batch_size=2048,
                max_in_flight=5,
                retry_backoff_ms=50,
                delivery_timeout_ms=60000,
            ) as p:
                for i in range(total):
                    futures.append(p.send(topic, str(i), key=str(i)))
                    if i % 50 == 0:
                        time.sleep(0.01)  # spread the sends over the kills
                try:
                    p.flush(60)
                except Exception as e:  # surfaced below
                    errors.append(e)

        def consume() -> None:
            with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
                c.assign([(topic, p) for p in range(n_parts)])
                while not stop.is_set() and len(consumed) < total:
                    consumed.extend(c.poll(200, max_records=5000))

        threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
        for t in threads:
            t.start()
        at_kill = []
        for _ in range(2):
            time.sleep(0.6)
            at_kill.append(len(futures))
            _restart(b)
        threads[0].join(90)
        threads[1].join(60)
        stop.set()
        assert not errors
        assert 0 < at_kill[0] < total, "the first kill should land while the producer is sending"
        results = [f.result(1) for f in futures]
        # every record acknowledged once, at one offset; the log holds each exactly once, without gaps
        assert len(set(results)) == total
        by_part: dict[int, list[int]] = {}
        for m in consumed:
            by_part.setdefault(m.partition, []).append(m.offset)
        for p, offs in by_part.items():
            assert offs == list(range(len(offs))), f"partition {p}: gap or duplicate in consumed offsets"
        assert sorted(int(m.value) for m in consumed) == list(range(total))
        with Admin(bootstrap) as admin:
            ends = admin.list_offsets([(topic, p) for p in range(n_parts)], "latest")
        assert sum(ends.values()) == total  # nothing appended twice


def test_read_range_resumes_after_the_broker_restarts(tmp_path):
    with broker_process(tmp_path / "rr") as b:
        with Producer(b.bootstrap, acks="all") as p:
            for _ in range(3000):
                p.send("rr", b"x" * 100, partition=0)
            p.flush(30)
        it = read_range(b.bootstrap, "rr", 0, 0, 3000, max_bytes=16384)
        first = next(it)
        offsets = first.column("offset").to_pylist()
        _restart(b)
        for rb in it:
            offsets.extend(rb.column("offset").to_pylist())
        assert offsets == list(range(3000))


def test_group_offsets_follow_the_coordinator_across_a_restart(tmp_path):
    with broker_process(tmp_path / "g") as b:
        with Admin(b.bootstrap) as admin:
            admin.create_topic("gt", partitions=1)
            admin.commit_group_offsets("g1", {("gt", 0): 0})
            with Consumer(b.bootstrap, group_id="g1", enable_auto_commit=False) as c:
                c.assign([("gt", 0)])
                c.commit({("gt", 0): 0})
                _restart(b)
                c.commit({("gt", 0): 0})  # the coordinator's connection was lost: found again
                assert c.committed(("gt", 0)) == 0
            assert admin.group_offsets("g1") == {("gt", 0): 0}


def test_idempotent_producer_restarts_sequences_when_the_broker_forgot_it(broker):
    """The partition's producer state is gone (the topic was deleted and created again under the
    producer): the broker answers UnknownProducerId, and the producer, as Kafka's does, restarts
    the partition's sequences (a new producer id here) instead of failing the records."""
    topic = "forgotten"
    with Admin(broker.bootstrap) as admin, Producer(broker.bootstrap, acks="all", linger_ms=1) as p:
        admin.create_topic(topic, partitions=1)
        first = [p.send(topic, f"a{i}", partition=0) for i in range(100)]
        p.flush(30)
        assert [f.result(1)[1] for f in first] == list(range(100))
        admin.delete_topic(topic)
        admin.create_topic(topic, partitions=1)
        second = [p.send(topic, f"b{i}", partition=0) for i in range(100)]
        p.flush(30)
        assert [f.result(1)[1] for f in second] == list(range(100))
    got = _consume_all(broker.bootstrap, topic, 1, 100)
    assert [m.value for m in got] == [f"b{i}".encode() for i in range(100)]


@pytest.mark.parametrize("bad", [[], ["127.0.0.1:9092", "nohost"], ("127.0.0.1:x",), "127.0.0.1:70000,"])
def test_a_malformed_bootstrap_list_is_a_config_error(bad):
    from pyspark_logsource.client import parse_bootstrap
    from pyspark_logsource.errors import ConfigError

    with pytest.raises(ConfigError):
        parse_bootstrap(bad)
    with pytest.raises(ConfigError):
        Admin(bad)


def test_bootstrap_list_forms_parse_alike():
    from pyspark_logsource.client import parse_bootstrap

    want = [("127.0.0.1", 9092), ("broker-2", 9093)]
    assert parse_bootstrap("127.0.0.1:9092, broker-2:9093") == want
    assert parse_bootstrap(["127.0.0.1:9092", "PLAINTEXT://broker-2:9093"]) == want
    assert parse_bootstrap(("127.0.0.1:9092", "broker-2:9093")) == want
