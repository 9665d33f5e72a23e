"""The idempotent producer when the answers to appended batches are lost and the batches are resent.

A broker remembers the last batches of each producer per partition (Kafka 5, ours 80). Batches whose answers
were lost (a leader killed after replicating them, a cut connection) are resent with the same
sequence numbers and must be recognised as duplicates, never appended twice and never taken
for lost producer state (which restarts the partition's sequences under a new producer id).
So the producer keeps no more batches with sequence numbers unanswered per partition, and
every request carries a partition's batches with consecutive sequence numbers.

A TCP relay in front of a real broker (advertised to the clients in its place) swallows the
broker's answers and then cuts the connections, as a failover does.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

from pyspark_logsource.broker.embedded import EmbeddedBroker
from pyspark_logsource.broker.log.producer_state import MAX_BATCHES_PER_PRODUCER
from pyspark_logsource.client import Admin, Consumer, Producer
from pyspark_logsource.client.producer import MAX_UNANSWERED_BATCHES
from pyspark_logsource.errors import LogSourceError

TOPIC = "resend"
#: more one-record batches than the broker remembers per producer
COUNT = MAX_BATCHES_PER_PRODUCER + 20


class AnswerRelay:
    """Relays 127.0.0.1:port to the broker; while ``swallow`` is set, the broker's answers are dropped."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.upstream = 0
        self.swallow = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", self.upstream))
            self.conns += [client, broker]
            threading.Thread(target=self._pump, args=(client, broker, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(broker, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        try:
            while data := src.recv(65536):
                if not (answers and self.swallow.is_set()):
                    dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        """Close every relayed connection (the swallowed answers are lost)."""
        conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.cut()
        self.server.close()


def test_batches_resent_after_lost_answers_are_duplicates(tmp_path, caplog) -> None:
    assert MAX_UNANSWERED_BATCHES <= MAX_BATCHES_PER_PRODUCER
    relay = AnswerRelay()
    config = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{relay.port}"}
    with EmbeddedBroker(tmp_path / "broker", config=config) as eb:
        relay.upstream = eb.port
        bootstrap = f"127.0.0.1:{relay.port}"
        admin = Admin(bootstrap)
        admin.create_topic(TOPIC, partitions=1)
        admin.close()
        log = eb._broker.state.logs.get_log(TOPIC, 0)
        # 10 requests of 16 batches may be in flight: more batches than the broker remembers
        producer = Producer(
            bootstrap,
            enable_idempotence=True,
            batch_size=1,
            linger_ms=0,
            max_in_flight=10,
            max_batches_per_request=16,
            retry_backoff_ms=20,
            request_timeout_ms=5000,
        )
        caplog.set_level(logging.WARNING, logger="pyspark_logsource.client.producer")
        try:
            first = producer.send(TOPIC, b"first", partition=0).result(10)
            relay.swallow.set()
            # The sender numbers batches under this lock: all (one record each) are ready when it goes on.
            with producer._sender.sequences._lock:
                futures = [producer.send(TOPIC, str(i).encode(), partition=0) for i in range(COUNT)]
                time.sleep(0.2)
            deadline = time.monotonic() + 10
            while log.log_end_offset <= MAX_UNANSWERED_BATCHES and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.5)  # more would arrive here if more batches could be unanswered
            appended_unanswered = log.log_end_offset - 1
            relay.swallow.clear()
            relay.cut()
            offsets = [f.result(30)[1] for f in futures]
        finally:
            producer.close()
        assert 1 <= appended_unanswered <= MAX_UNANSWERED_BATCHES, (
            f"{appended_unanswered} batches of a partition were sent unanswered"
        )
        assert not [r for r in caplog.records if "restarting the partition's sequences" in r.getMessage()]
        consumer = Consumer(bootstrap, auto_offset_reset="earliest")
        try:
            consumer.assign([(TOPIC, 0)])
            got: list[tuple[int, bytes]] = []
            deadline = time.monotonic() + 10
            while len(got) < COUNT + 1 and time.monotonic() < deadline:
                got += [(m.offset, m.value) for m in consumer.poll(timeout_ms=200)]
        finally:
            consumer.close()
    relay.close()
    assert got == [(first[1], b"first")] + [(o, str(i).encode()) for i, o in enumerate(offsets)]
    assert [o for o, _ in got] == list(range(COUNT + 1))


def test_a_request_never_skips_an_unanswered_sequence() -> None:
    """The run the matrix caught: batch 0 put back for a retry while batch 1 is unanswered, then drained
    with a new batch. Sent together, the new one would be numbered 2 and the broker would refuse the
    gap (expected 1) for the whole run, which the producer took for lost state. The retry goes alone;
    the new batch waits, unnumbered, for an answer. (The sender's numbering, without a broker.)"""
    from pyspark_logsource.client.accumulator import ProducerBatch

    producer = Producer("127.0.0.1:9", enable_idempotence=True)
    try:
        tp = (TOPIC, 0)

        def batch(seq: int | None) -> ProducerBatch:
            b = ProducerBatch.from_encoded(TOPIC, 0, bytearray(70), 1, time.monotonic())
            b.base_sequence = seq
            return b

        seqs = producer._sender.sequences
        retried, unanswered, new = batch(None), batch(None), batch(None)
        for b in (retried, unanswered):  # numbered 0 and 1, both unanswered
            seqs.number(b, _no_encode)
        assert (retried.base_sequence, unanswered.base_sequence) == (0, 1)
        held: dict = {}
        assert producer._sender._sendable([retried, new], held) == [retried]
        assert held[tp] == [new] and new.base_sequence is None
        # consecutive sequences travel together, up to the unanswered limit: batch 1 refused, unsent (its
        # number given back), batch 0 unanswered and the next number 1
        seqs.settle(unanswered, LogSourceError("refused"))
        held = {}
        assert producer._sender._sendable([retried, new], held) == [retried, new] and not held
        seqs.settle(retried, None)
        full = [batch(None) for _ in range(MAX_UNANSWERED_BATCHES)]
        for b in full:
            seqs.number(b, _no_encode)
        held = {}
        assert producer._sender._sendable([new], held) == [] and held[tp] == [new]
        seqs.settle_appended([(b, None) for b in full])
    finally:
        producer.close()


def test_a_round_of_single_batches_is_numbered_as_one_by_one() -> None:
    """The sender's round at batch size 1 (_stamp_singles: one hold of the sequence lock for the round)
    against _sendable and _prepare batch by batch: the same sequence numbers, the same batches held (a
    partition at its unanswered limit, and every later batch of it in the round), the same requests in
    order; a batch whose leader is not known stops the round right after it is numbered, before any later
    batch is, and is handed back with the error. (The sender's numbering, without a broker.)"""
    from pyspark_logsource.client.accumulator import ProducerBatch
    from pyspark_logsource.errors import LeaderNotAvailable
    from pyspark_logsource.format import encode

    lost = LeaderNotAvailable("no leader")
    leaders = {(TOPIC, 0): 1, (TOPIC, 1): lost, (TOPIC, 2): 1}
    layout = [0, 2, 0, 1, 0, 2, 1]  # the partition of each batch, in round order
    data = bytes(encode([b"v"]))  # one batch's bytes for both rounds (its timestamp is the clock's)

    def round_of(producer: Producer) -> list[ProducerBatch]:
        sender = sender_of(producer)
        sender.sequences.set_producer(7, 0)
        sender._arrow_body = True
        unanswered[producer] = [  # partition 2 at its unanswered limit
            ProducerBatch.from_encoded(TOPIC, 2, bytearray(70), 1, 0.0) for _ in range(MAX_UNANSWERED_BATCHES)
        ]
        for b in unanswered[producer]:
            sender.sequences.number(b, _no_encode)
        return [ProducerBatch.from_encoded(TOPIC, p, bytearray(data), 1, 0.0) for p in layout]

    def sender_of(producer: Producer):
        return producer._sender

    unanswered: dict = {}
    one, whole = (
        Producer("127.0.0.1:9", enable_idempotence=True),
        Producer("127.0.0.1:9", enable_idempotence=True),
    )
    try:
        # one by one, as the sender did before
        ref, ref_held, ref_sent, ref_failed = round_of(one), {}, [], []
        for b in ref:
            if not sender_of(one)._sendable([b], ref_held):
                continue
            sender_of(one)._prepare(b)
            if isinstance(leaders[b.tp], Exception):
                ref_failed.append(b)
            else:
                ref_sent.append(b)
        # the round under one hold of the lock
        got, held, by_node = round_of(whole), {}, {}
        i, failed, error = sender_of(whole)._stamp_singles(got, 0, leaders, held, by_node)
        assert (i, failed, error) == (4, got[3], lost) and got[4].base_sequence is None
        assert sender_of(whole)._stamp_singles(got, i, leaders, held, by_node) == (7, got[6], lost)
        assert [b.base_sequence for b in got] == [b.base_sequence for b in ref] == [0, None, 1, 0, 2, None, 1]
        assert [bytes(b.encoded) for b in got] == [bytes(b.encoded) for b in ref]
        assert {tp: [ref.index(b) for b in q] for tp, q in ref_held.items()} == {
            tp: [got.index(b) for b in q] for tp, q in held.items()
        }
        assert [got.index(cb.batch) for _, cb in by_node[1]] == [ref.index(b) for b in ref_sent]
        assert [(r.partition, bytes(r.records)) for r, _ in by_node[1]] == [
            (b.partition, bytes(b.encoded)) for b in ref_sent
        ]
        assert [ref.index(b) for b in ref_failed] == [3, 6]
    finally:
        for p in (one, whole):
            sender_of(p).sequences.settle_appended([(b, None) for b in unanswered.get(p, ())])
            p.close()


def _no_encode(b, pid: int, epoch: int, seq: int, restamp: bool) -> None:
    """PartitionSequences' ``encode`` for batches that are numbered, never sent."""
