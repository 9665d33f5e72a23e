"""Producer / Consumer / Admin against a broker running as a separate process, over real sockets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest
from support.brokers import RECENT_TS, broker_process, unique_topic

from pyspark_logsource import Admin, Consumer, Producer
from pyspark_logsource.client import hash_partition, read_range
from pyspark_logsource.errors import (
    BufferFull,
    ClientClosed,
    ConfigError,
    InvalidTopic,
    MessageTooLarge,
    NetworkError,
    OffsetOutOfRange,
    RequestTimedOut,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker_config():
    """For conftest's ``layout_broker``: our broker as we use it, and as a plain Kafka broker (our clients
    then speak Kafka's layout)."""
    return {"message.max.bytes": "100000"}


@pytest.fixture()
def admin(layout_broker):
    with Admin(layout_broker.bootstrap) as a:
        yield a


def new_topic(admin: Admin, partitions: int = 1, **config) -> str:
    name = unique_topic()
    admin.create_topic(name, partitions, config or None)
    return name


def consume_all(bootstrap: str, tps, expected: int, timeout: float = 20.0, **kw) -> list:
    with Consumer(bootstrap, **kw) as c:
        c.assign(tps)
        out: list = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(c.poll(200, max_records=10_000))
        return out


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("codec", [None, "gzip", "lz4", "zstd"])
def test_round_trip_partitions_and_codecs(layout_broker, admin, codec):
    topic = new_topic(admin, 3)
    n = 3000
    with Producer(layout_broker.bootstrap, compression=codec, linger_ms=2, batch_size=4096) as p:
        futs = [
            p.send(
                topic,
                b"value-%d" % i,
                key=b"user-%d" % (i % 37),
                headers=[("i", b"%d" % i)] if i % 5 == 0 else None,
            )
            for i in range(n)
        ]
        p.flush()
        results = [f.result(5) for f in futs]
    # every key went to its stable partition, offsets are unique per partition
    for i, (part, off) in enumerate(results):
        assert part == hash_partition(b"user-%d" % (i % 37), 3)
        assert off >= 0
    assert len(set(results)) == n
    msgs = consume_all(layout_broker.bootstrap, [(topic, 0), (topic, 1), (topic, 2)], n)
    assert len(msgs) == n
    by_value = {m.value: m for m in msgs}
    for i, (part, off) in enumerate(results):
        m = by_value[b"value-%d" % i]
        assert (m.partition, m.offset) == (part, off)
        assert m.key == b"user-%d" % (i % 37)
        assert m.headers == ((("i", b"%d" % i),) if i % 5 == 0 else ())
        assert m.topic == topic


def test_ordering_within_partition(layout_broker, admin):
    topic = new_topic(admin, 4)
    n = 5000
    with Producer(layout_broker.bootstrap, linger_ms=1, batch_size=2000) as p:
        futs = [p.send(topic, b"%08d" % i, key=b"same-key") for i in range(n)]
        p.flush()
    part = futs[0].result()[0]
    assert {f.result()[0] for f in futs} == {part}
    offsets = [f.result()[1] for f in futs]
    assert offsets == list(range(offsets[0], offsets[0] + n))
    msgs = consume_all(layout_broker.bootstrap, [(topic, part)], n)
    assert [m.value for m in msgs] == [b"%08d" % i for i in range(n)]
    assert [m.offset for m in msgs] == offsets


def test_keyed_partitioning_stable_across_processes(layout_broker, admin):
    topic = new_topic(admin, 7)
    keys = [b"k%d" % i for i in range(200)]
    with Producer(layout_broker.bootstrap) as p:
        here = [p.partition_for(topic, k) for k in keys]
        sent = [p.send(topic, b"v", key=k) for k in keys]
        p.flush()
        assert [f.result()[0] for f in sent] == here
    code = (
        "import sys; from pyspark_logsource import Producer\n"
        f"p = Producer({layout_broker.bootstrap!r})\n"
        f"print(','.join(str(p.partition_for({topic!r}, b'k%d' % i)) for i in range(200)))\n"
        "p.close()\n"
    )
    # a different process has a different hash() salt; the partitioner must not care
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, check=True
    )
    assert [int(x) for x in out.stdout.strip().split(",")] == here
    assert here == [hash_partition(k, 7) for k in keys]


def test_keyless_records_stick_to_a_partition_per_batch(layout_broker, admin):
    topic = new_topic(admin, 4)
    with Producer(layout_broker.bootstrap, batch_size=100_000, linger_ms=50) as p:
        futs = [p.send(topic, b"x" * 10) for _ in range(100)]
        p.flush()
    # all 100 fit one batch: one partition, consecutive offsets
    assert len({f.result()[0] for f in futs}) == 1


def test_send_arrow_routes_rows_and_reports_ranges(layout_broker, admin):
    topic = new_topic(admin, 3)
    n = 2000
    keys = [b"key-%d" % (i % 11) for i in range(n)]
    values = [b"val-%d" % i for i in range(n)]
    ts = pa.array([RECENT_TS + i for i in range(n)], pa.int64()).cast(pa.timestamp("ms"))
    table = pa.table({"key": keys, "value": values, "timestamp": ts})
    with Producer(layout_broker.bootstrap) as p:
        futs = p.send_arrow(topic, table)
        p.flush()
        ranges = [f.result(5) for f in futs]
        # explicit partition column wins
        t2 = pa.table({"value": [b"a", b"b", b"c"], "partition": pa.array([2, 2, 0], pa.int32())})
        r2 = [f.result(5) for f in p.send_arrow(topic, t2)]
    assert sum(last - base + 1 for _, base, last in ranges) == n
    assert sorted((p_, last - base + 1) for p_, base, last in r2) == [(0, 1), (2, 2)]
    msgs = consume_all(layout_broker.bootstrap, [(topic, 0), (topic, 1), (topic, 2)], n + 3)
    for m in msgs:
        if m.key is not None:
            assert m.partition == hash_partition(m.key, 3)
            i = int(m.value.split(b"-")[1])
            assert m.timestamp == RECENT_TS + i
    assert sorted(m.value for m in msgs if m.partition == 2 and m.key is None) == [b"a", b"b"]


# ---------------------------------------------------------------- consumer behaviour


def test_long_poll_returns_early_when_data_arrives(layout_broker, admin):
    topic = new_topic(admin, 1)
    with Consumer(layout_broker.bootstrap, fetch_max_wait_ms=8000, auto_offset_reset="latest") as c:
        c.assign([(topic, 0)])
        assert c.position((topic, 0)) == 0
        t0 = time.monotonic()
        assert c.poll(400) == []
        waited = time.monotonic() - t0
        assert 0.35 <= waited < 3.0

        def later():
            time.sleep(0.5)
            with Producer(layout_broker.bootstrap, linger_ms=0) as p:
                p.send(topic, b"hello").result(5)

        th = threading.Thread(target=later)
        t0 = time.monotonic()
        th.start()
        msgs = c.poll(10_000)
        elapsed = time.monotonic() - t0
        th.join()
        assert [m.value for m in msgs] == [b"hello"]
        # the broker answered the long poll when data arrived, not after fetch_max_wait_ms (8 s)
        assert elapsed < 5.0


def test_seek_rewinds_and_poll_arrow(layout_broker, admin):
    topic = new_topic(admin, 1)
    with Producer(layout_broker.bootstrap) as p:
        for i in range(100):
            p.send(topic, b"%d" % i)
    with Consumer(layout_broker.bootstrap) as c:
        tp = (topic, 0)
        c.assign([tp])
        got = []
        while len(got) < 100:
            got += c.poll(1000)
        assert c.position(tp) == 100
        c.seek(tp, 42)
        again = c.poll(2000, max_records=5)
        assert [m.offset for m in again] == [42, 43, 44, 45, 46]
        c.seek_to_beginning()
        tables = {}
        deadline = time.monotonic() + 10
        rows = 0
        while rows < 100 and time.monotonic() < deadline:
            for k, t in c.poll_arrow(1000).items():
                tables.setdefault(k, []).append(t)
                rows += t.num_rows
        table = pa.concat_tables(tables[tp])
        assert table.column("offset").to_pylist() == list(range(100))
        assert table.column("value").to_pylist() == [b"%d" % i for i in range(100)]
        c.seek_to_end()
        assert c.position(tp) == 100


def test_out_of_range_position_uses_auto_offset_reset(layout_broker, admin):
    topic = new_topic(admin, 1)
    tp = (topic, 0)
    with Producer(layout_broker.bootstrap) as p:
        for i in range(10):
            p.send(topic, b"%d" % i)
    with Consumer(layout_broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        c.seek(tp, 1_000_000)
        msgs = []
        deadline = time.monotonic() + 10
        while len(msgs) < 10 and time.monotonic() < deadline:
            msgs += c.poll(500)
        assert [m.offset for m in msgs] == list(range(10))
    with Consumer(layout_broker.bootstrap, auto_offset_reset="latest") as c:
        c.assign([tp])
        c.seek(tp, 1_000_000)
        assert c.poll(1000) == []
        assert c.position(tp) == 10
    with Consumer(layout_broker.bootstrap, auto_offset_reset="none") as c:
        c.assign([tp])
        c.seek(tp, 1_000_000)
        with pytest.raises(OffsetOutOfRange):
            for _ in range(20):
                c.poll(200)
        # no position at all and no reset policy
    with Consumer(layout_broker.bootstrap, auto_offset_reset="none") as c:
        c.assign([tp])
        with pytest.raises(OffsetOutOfRange):
            c.poll(200)


def test_group_offsets_survive_broker_restart(tmp_path):
    with broker_process(tmp_path / "b") as b:
        with Admin(b.bootstrap) as a:
            a.create_topic("orders", 2)
        with Producer(b.bootstrap) as p:
            for i in range(50):
                p.send("orders", b"%d" % i, partition=i % 2)
        with Consumer(b.bootstrap, group_id="billing") as c:
            c.assign([("orders", 0), ("orders", 1)])
            got = []
            while len(got) < 50:
                got += c.poll(1000)
            c.commit()
            assert c.committed(("orders", 0)) == 25
        b.restart()
        with Consumer(b.bootstrap, group_id="billing") as c:
            c.assign([("orders", 0), ("orders", 1)])
            assert c.committed(("orders", 1)) == 25
            assert c.position(("orders", 0)) == 25  # resumes from the committed offset
            assert c.poll(300) == []
        with Admin(b.bootstrap) as a:
            assert a.group_offsets("billing") == {("orders", 0): 25, ("orders", 1): 25}
            a.commit_group_offsets("billing", {("orders", 0): 20})
            lag = {(r.topic, r.partition): r for r in a.group_lag("billing")}
            assert lag[("orders", 0)].lag == 5 and lag[("orders", 0)].log_end == 25
            assert lag[("orders", 1)].lag == 0


# ---------------------------------------------------------------- admin


def test_admin_topics_and_offsets(layout_broker, admin):
    topic = new_topic(admin, 2)
    assert topic in admin.list_topics()
    assert all(not t.startswith("__") for t in admin.list_topics())
    d = admin.describe_topic(topic)
    assert [p.partition for p in d.partitions] == [0, 1]
    assert all(p.leader >= 0 and p.leader in p.replicas for p in d.partitions)
    assert admin.partitions_for(topic) == [0, 1]
    t0 = int(time.time() * 1000)
    with Producer(layout_broker.bootstrap) as p:
        for i in range(10):
            p.send(topic, b"x", partition=0, timestamp_ms=t0 + i * 1000)
    tps = [(topic, 0), (topic, 1)]
    assert admin.list_offsets(tps, "earliest") == {(topic, 0): 0, (topic, 1): 0}
    assert admin.list_offsets(tps, "latest") == {(topic, 0): 10, (topic, 1): 0}
    assert admin.list_offsets([(topic, 0)], t0 + 3500) == {(topic, 0): 4}
    # no record at or after T: the log end offset
    assert admin.list_offsets([(topic, 0)], t0 + 10**9) == {(topic, 0): 10}
    with pytest.raises(TopicAlreadyExists):
        admin.create_topic(topic, 2)
    admin.create_topic(topic, 2, exist_ok=True)
    admin.delete_topic(topic)
    assert topic not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartition):
        admin.partitions_for(topic)
    with pytest.raises(ConfigError):
        admin.list_offsets(tps, "yesterday")


def test_broker_errors_are_typed_with_messages(layout_broker, admin):
    with pytest.raises(InvalidTopic) as e:
        admin.create_topic("../etc/passwd", 1)
    assert "passwd" in str(e.value)
    with pytest.raises(UnknownTopicOrPartition):
        admin.describe_topic("no-such-topic-here")
    topic = new_topic(admin, 2)
    with Producer(layout_broker.bootstrap) as p:
        with pytest.raises(UnknownTopicOrPartition):
            p.send(topic, b"x", partition=5)
        # message.max.bytes=100000 on this broker: the batch is refused, the producer survives
        big = p.send(topic, b"x" * 200_000, partition=0)
        with pytest.raises(MessageTooLarge):
            big.result(10)
        assert isinstance(big.exception(), MessageTooLarge)
        ok = p.send(topic, b"small", partition=0)
        assert ok.result(10) == (0, 0)
        with pytest.raises(InvalidTopic):
            p.send("bad/topic", b"x")
    with pytest.raises(ClientClosed):
        p.send(topic, b"late")


def test_read_range_trims_and_checks_bounds(layout_broker, admin):
    topic = new_topic(admin, 1)
    with Producer(layout_broker.bootstrap, batch_size=300, linger_ms=0) as p:
        for i in range(500):
            p.send(topic, b"%d" % i)
    batches = list(read_range(layout_broker.bootstrap, topic, 0, 123, 456, max_bytes=2048))
    assert len(batches) > 1
    t = pa.Table.from_batches(batches)
    assert t.column("offset").to_pylist() == list(range(123, 456))
    assert t.column("value").to_pylist() == [b"%d" % i for i in range(123, 456)]
    assert list(read_range(layout_broker.bootstrap, topic, 0, 10, 10)) == []
    with pytest.raises(OffsetOutOfRange):
        list(read_range(layout_broker.bootstrap, topic, 0, 400, 501))
    with pytest.raises(OffsetOutOfRange):
        list(read_range(layout_broker.bootstrap, topic, 0, 600, 700))


# ---------------------------------------------------------------- failures


def test_buffer_full_when_broker_stalls_and_nothing_lost(tmp_path):
    with broker_process(tmp_path / "b") as b:
        with Admin(b.bootstrap) as a:
            a.create_topic("stall", 1)
        p = Producer(b.bootstrap, buffer_memory=64 * 1024, max_block_ms=300, linger_ms=0, batch_size=1024)
        try:
            p.send("stall", b"warm").result(10)
            os.kill(b.pid, signal.SIGSTOP)  # a broker that stops answering
            sent = []
            try:
                with pytest.raises(BufferFull):
                    for i in range(10_000):
                        sent.append(p.send("stall", b"%05d" % i + b"x" * 200))
            finally:
                os.kill(b.pid, signal.SIGCONT)
            assert 100 < len(sent) < 10_000
            p.flush(30)
            assert all(f.exception() is None for f in sent)
        finally:
            p.close()
        msgs = consume_all(b.bootstrap, [("stall", 0)], len(sent) + 1)
        assert [m.value[:5] for m in msgs[1:]] == [b"%05d" % i for i in range(len(sent))]


def test_idempotent_retries_across_kill_9_leave_no_duplicates(tmp_path):
    with broker_process(tmp_path / "b") as b:
        with Admin(b.bootstrap) as a:
            a.create_topic("idem", 2)
        p = Producer(
            b.bootstrap, linger_ms=1, batch_size=2048, retry_backoff_ms=50, delivery_timeout_ms=60_000
        )
        try:
            futs = [p.send("idem", b"%06d" % i, key=b"%d" % (i % 5)) for i in range(3000)]
            b.kill()  # SIGKILL while batches are in flight
            time.sleep(0.3)
            b.start()
            futs += [p.send("idem", b"%06d" % i, key=b"%d" % (i % 5)) for i in range(3000, 6000)]
            p.flush(60)
            results = [f.result() for f in futs]
        finally:
            p.close()
        assert len(set(results)) == 6000
        msgs = consume_all(b.bootstrap, [("idem", 0), ("idem", 1)], 6000)
        values = sorted(m.value for m in msgs)
        # every acknowledged record exactly once, at the offset its future reported
        assert values == [b"%06d" % i for i in range(6000)]
        where = {m.value: (m.partition, m.offset) for m in msgs}
        assert all(where[b"%06d" % i] == results[i] for i in range(6000))


def test_dead_broker_gives_network_errors(tmp_path):
    with broker_process(tmp_path / "b") as b:
        bootstrap = b.bootstrap
        with Admin(bootstrap) as a:
            a.create_topic("gone", 1)
        p = Producer(
            bootstrap,
            delivery_timeout_ms=1500,
            retry_backoff_ms=100,
            request_timeout_ms=1000,
            linger_ms=0,
            max_block_ms=1000,
        )
        c = Consumer(bootstrap, request_timeout_ms=1000, retry_backoff_ms=50)
        c.assign([("gone", 0)])
        p.send("gone", b"warm").result(10)
        b.kill()
        try:
            f = p.send("gone", b"lost?")
            with pytest.raises(RequestTimedOut) as e:
                f.result(10)
            assert "delivery_timeout_ms" in str(e.value)
            with pytest.raises(NetworkError):  # a topic the producer never saw needs metadata
                p.send("other", b"x")
            with pytest.raises(NetworkError):
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    c.poll(200)
        finally:
            c.close()
            p.close(5)
    with pytest.raises(NetworkError) as e:
        Admin(bootstrap).list_topics()
    assert bootstrap in str(e.value)
    with pytest.raises(NetworkError):
        Producer(bootstrap, max_block_ms=500).send("gone", b"x")
    with pytest.raises(ConfigError):
        Admin("no-port-here")


def test_a_response_stalled_mid_frame_still_times_out_and_close_is_prompt():
    """The reader thread blocks in recv() (SO_RCVTIMEO, MSG_WAITALL for the rest of a large frame):
    a broker that stops in the middle of a 300 KB answer still fails the request at its deadline,
    and close() does not wait for the missing bytes."""
    import socket as socket_

    from pyspark_logsource.client.connection import BrokerConnection
    from pyspark_logsource.protocol import SUPPORTED_VERSIONS, ServerConnection
    from pyspark_logsource.protocol.messages import ApiVersion, ApiVersionsResponse, MetadataRequest

    listener = socket_.create_server(("127.0.0.1", 0))
    stalled = threading.Event()

    def fake_broker() -> None:
        conn, _ = listener.accept()
        server = ServerConnection()
        with conn:
            answered = False
            while not stalled.is_set():
                for ev in server.receive_data(conn.recv(1 << 16)):
                    if not answered:  # ApiVersions: the real answer
                        resp = ApiVersionsResponse(
                            api_keys=[
                                ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
                            ]
                        )
                        conn.sendall(b"".join(ServerConnection.response_parts(ev.header, resp)))
                        answered = True
                    else:  # the next request: a 300 KB frame's length, its correlation id, then silence
                        conn.sendall(
                            (300_000).to_bytes(4, "big")
                            + ev.header.correlation_id.to_bytes(4, "big")
                            + bytes(70_000)
                        )
                        stalled.set()
            time.sleep(3)

    t = threading.Thread(target=fake_broker, daemon=True)
    t.start()
    host, port = listener.getsockname()
    c = BrokerConnection(host, port, request_timeout_ms=600)
    try:
        start = time.monotonic()
        with pytest.raises(RequestTimedOut):
            c.request(MetadataRequest(topics=None))
        # the reader thread's deadline check (0.6 s + at most one 0.2 s recv timeout), not the waiting
        # caller's own fallback at the request timeout + 1 s
        assert stalled.is_set() and time.monotonic() - start < 1.5
    finally:
        start = time.monotonic()
        c.close()
        assert time.monotonic() - start < 1.5
        listener.close()


_WRITE_AFTER_SHUTDOWN = """
import signal, socket, threading
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as a command-line tool has it
from pyspark_logsource.client.connection import BrokerConnection
from pyspark_logsource.errors import LogSourceError
from pyspark_logsource.protocol import SUPPORTED_VERSIONS, ServerConnection
from pyspark_logsource.protocol.messages import ApiVersion, ApiVersionsResponse, MetadataRequest

listener = socket.create_server(("127.0.0.1", 0))

def fake_broker():
    conn, _ = listener.accept()
    for ev in ServerConnection().receive_data(conn.recv(1 << 16)):
        resp = ApiVersionsResponse(api_keys=[ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())])
        conn.sendall(b"".join(ServerConnection.response_parts(ev.header, resp)))
    threading.Event().wait(30)

threading.Thread(target=fake_broker, daemon=True).start()
c = BrokerConnection(*listener.getsockname(), request_timeout_ms=2000)
c._sock.shutdown(socket.SHUT_WR)  # what close() does while another thread is about to write
try:
    c.request(MetadataRequest(topics=None))
except LogSourceError as e:
    print("typed:", type(e).__name__)
"""


def test_a_write_to_a_shut_down_connection_is_a_typed_error_not_sigpipe():
    """A process whose SIGPIPE is the default (the ``logsource`` CLI) writing to a connection that
    close() (or the network) shut down gets NetworkError; before, the kernel's SIGPIPE killed it."""
    p = subprocess.run(
        [sys.executable, "-c", _WRITE_AFTER_SHUTDOWN], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert p.stdout.strip() == "typed: NetworkError"


def test_the_cli_called_in_process_gives_back_the_sigpipe_disposition():
    """main() sets SIGPIPE to the default for ``| head``; a program (or a test session) calling it in its
    own process gets its disposition back, so its later socket writes are not killed by SIGPIPE."""
    from pyspark_logsource.cli import main

    before = signal.getsignal(signal.SIGPIPE)
    assert main(["topics", "list", "-b", "127.0.0.1:1"]) == 1  # no broker there: a typed error, then back
    assert signal.getsignal(signal.SIGPIPE) == before
