"""The idempotent producer against a broker process that stops (SIGSTOP) while batches are in flight.

Requests time out and are retried on a new connection while the old connection's requests still sit in
the stopped broker's socket buffer; on SIGCONT the broker appends those too. As with Kafka's producer:
every acknowledged record is in the log exactly once, in the order it was sent, and a record is never
acknowledged without being written. A batch that expired (``delivery_timeout_ms``) may or may not be in
the log (Kafka's TimeoutException says the same); the batches after it keep their sequence numbers (a
batch renumbered onto an expired one's numbers would be taken by the broker for its duplicate and
acknowledged unwritten), and the partition restarts its sequences if the broker lacks them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections import Counter

import pytest
from support.brokers import broker_process

from pyspark_logsource import Admin, Consumer, Producer
from pyspark_logsource.broker.embedded import EmbeddedBroker
from pyspark_logsource.errors import OutOfOrderSequence, RequestTimedOut


def _log_values(bootstrap: str, topic: str, at_least: int) -> list[bytes]:
    c = Consumer(bootstrap, auto_offset_reset="earliest")
    try:
        c.assign([(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msgs = c.poll(timeout_ms=300)
            got += [m.value for m in msgs]
            if not msgs and len(got) >= at_least:
                break
        return got
    finally:
        c.close()


def _send_through_a_stop(b, producer: Producer, n: int, stop_at: int, stop_s: float) -> list:
    futures = []
    for i in range(n):
        futures.append(producer.send("t", b"%06d" % i, partition=0))
        if i == stop_at:
            os.kill(b.pid, signal.SIGSTOP)
            stopped = time.monotonic()
    try:
        time.sleep(max(0.0, stop_s - (time.monotonic() - stopped)))
    finally:
        os.kill(b.pid, signal.SIGCONT)
    producer.flush(60)
    return futures


def _check(values: list[bytes], futures: list) -> None:
    counts = Counter(values)
    acked = [i for i, f in enumerate(futures) if f.exception() is None]
    assert [i for i in acked if counts[b"%06d" % i] != 1] == []  # acknowledged: written, exactly once
    assert max(counts.values()) == 1  # nothing twice, acknowledged or not
    assert values == sorted(values)  # the order sent
    assert all(
        isinstance(f.exception(), (RequestTimedOut, OutOfOrderSequence)) for f in futures if f.exception()
    )


def test_a_broker_stopped_before_the_producer_id_keeps_the_order(tmp_path):
    """The broker stops before InitProducerId is answered: the drained batches go back to the queue
    in their order (before: each put at the front, so the whole run was numbered and written reversed)."""
    with broker_process(tmp_path / "b") as b:
        with Admin(b.bootstrap) as a:
            a.create_topic("t", 1)
        p = Producer(
            b.bootstrap,
            batch_size=1,
            linger_ms=0,
            request_timeout_ms=300,
            retry_backoff_ms=20,
            max_in_flight=5,
        )
        try:
            futures = _send_through_a_stop(b, p, 300, 0, 1.5)
        finally:
            p.close()
        values = _log_values(b.bootstrap, "t", 300)
    assert all(f.exception() is None for f in futures)
    _check(values, futures)
    assert values == [b"%06d" % i for i in range(300)]


# 16: the sender's rounds path; 1: its one-batch-per-request path (drain_singles, _stamp_singles)
@pytest.mark.parametrize("per_request", [16, 1])
def test_batches_expired_in_a_stopped_broker_are_not_renumbered(tmp_path, per_request):
    """Batches expire while the broker is stopped, some of them with their requests in its socket buffer:
    before, the later batches took the expired ones' numbers, and the broker answered them as duplicates
    of the expired batches it appended on SIGCONT: acknowledged, never written."""
    with broker_process(tmp_path / "b") as b:
        with Admin(b.bootstrap) as a:
            a.create_topic("t", 1)
        p = Producer(
            b.bootstrap,
            batch_size=1,
            linger_ms=0,
            max_batches_per_request=per_request,
            request_timeout_ms=300,
            retry_backoff_ms=20,
            delivery_timeout_ms=1500,
            max_in_flight=5,
        )
        try:
            p.send("t", b"warm", partition=0).result(10)  # the producer id is known before the stop
            futures = _send_through_a_stop(b, p, 600, 100, 3.5)
            # the partition goes on after the stop: a gap left by unwritten expired batches is closed
            after = [p.send("t", b"%06d" % (600 + i), partition=0) for i in range(20)]
            p.flush(30)
        finally:
            p.close()
        values = _log_values(b.bootstrap, "t", 1)
    assert values[0] == b"warm"
    assert any(f.exception() is not None for f in futures)  # the stop did expire batches
    assert all(f.exception() is None for f in after)
    _check(values[1:], futures + after)


class _RequestRelay:
    """Relays 127.0.0.1:port to a broker; while ``drop`` is set, the clients' bytes are dropped (requests
    that never reach the broker), the broker's answers still relayed."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.upstream = 0
        self.drop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pump, args=(client, broker, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(broker, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        try:
            while data := src.recv(65536):
                if not (requests and self.drop.is_set()):
                    dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


# 16: the sender's rounds path; 1: its one-batch-per-request path (drain_singles, _stamp_singles)
@pytest.mark.parametrize("per_request", [16, 1])
def test_a_gap_left_by_an_expired_batch_is_out_of_order_as_in_kafka(tmp_path, per_request):
    """Batch X's requests never reach the broker and X expires; batch Y, numbered after X while X was
    unanswered, then reaches it: a gap. As Kafka's producer: X fails with its timeout, Y with
    OutOfOrderSequence at once (before: retried with the same numbers until it expired too), and the
    partition's sequences restart, so Z, sent next, is written."""
    relay = _RequestRelay()
    config = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{relay.port}"}
    with EmbeddedBroker(tmp_path / "broker", config=config) as eb:
        relay.upstream = eb.port
        bootstrap = f"127.0.0.1:{relay.port}"
        with Admin(bootstrap) as a:
            a.create_topic("t", 1)
        p = Producer(
            bootstrap,
            batch_size=1,
            linger_ms=0,
            max_batches_per_request=per_request,
            request_timeout_ms=500,
            retry_backoff_ms=20,
            delivery_timeout_ms=4000,
        )
        try:
            p.send("t", b"warm", partition=0).result(10)
            relay.drop.set()
            x = p.send("t", b"x", partition=0)
            time.sleep(2.0)
            y = p.send("t", b"y", partition=0)  # numbered after X, X still unanswered
            assert isinstance(x.exception(10), RequestTimedOut)
            relay.drop.clear()  # Y's next try reaches the broker: the sequence after X's
            assert isinstance(y.exception(10), OutOfOrderSequence)
            assert p.send("t", b"z", partition=0).result(10)
        finally:
            p.close()
        values = _log_values(bootstrap, "t", 2)
    assert values == [b"warm", b"z"]
