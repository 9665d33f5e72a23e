"""Kafka's transactions through Kafka's own clients (confluent-kafka / librdkafka, kafka-python) against a real
broker process, and each bad request with the code Kafka answers.

What is shown: a committed transaction is visible to ``read_committed`` consumers and an aborted one never;
offsets sent in a transaction reach the group only when it commits; a second producer with the same
``transactional.id`` fences the first and aborts what it left open; a transaction left open past its
``transaction.timeout.ms`` is aborted by the coordinator and stops pinning the last stable offset; a broker
killed once the decision is durable completes it after the restart. Raw requests pin the error codes.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from support.brokers import WireClient, broker_process

from pyspark_logsource import format as fmt
from pyspark_logsource.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    InvalidTxnState,
    OperationNotAttempted,
    ProducerFenced,
    UnknownTopicOrPartition,
)
from pyspark_logsource.format.control import set_transactional
from pyspark_logsource.protocol import producer_txn_messages as ptm
from pyspark_logsource.protocol.messages import InitProducerIdRequest, ProducePartitionData, ProduceRequest

ck = pytest.importorskip("confluent_kafka")

pytestmark = [
    pytest.mark.kafka_clients,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"transaction.max.timeout.ms": 60000}


def _producer(bs: str, txn_id: str, timeout_ms: int = 30000) -> Any:
    return ck.Producer(
        {
            "bootstrap.servers": bs,
            "transactional.id": txn_id,
            "transaction.timeout.ms": timeout_ms,
            "message.timeout.ms": min(timeout_ms, 30000),
            "linger.ms": 5,
        }
    )


def _read_committed(bs: str, topic: str, partitions: int, want: int, *, wait_s: float = 10.0) -> list[bytes]:
    """Values a read_committed consumer gets from the start, until ``want`` arrived or ``wait_s`` passed."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"reader-{topic}-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[bytes] = []
        end = time.monotonic() + wait_s
        while time.monotonic() < end and len(got) < want:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
        if len(got) >= want:  # anything beyond what was expected must not be there either
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    got.append(m.value())
        return got
    finally:
        c.close()


def _committed(bs: str, group: str, topic: str, partition: int) -> int:
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = c.committed([ck.TopicPartition(topic, partition)], timeout=10)
        return tp.offset
    finally:
        c.close()


def _create(bs: str, topic: str, partitions: int = 1) -> None:
    with WireClient(bs) as w:
        assert w.create_topic(topic, partitions) == 0


# ------------------------------------------------------------------ confluent-kafka round trips


def test_committed_transaction_is_visible_and_aborted_one_never(broker, topic_name):
    bs, t = broker.bootstrap, topic_name("txn")
    _create(bs, t, 2)
    p = _producer(bs, f"id-{t}")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(t, value=b"commit-%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(t, value=b"abort-%d" % i, partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(t, value=b"commit-last", partition=1)
    p.commit_transaction(30)
    got = _read_committed(bs, t, 2, 11)
    assert sorted(got) == sorted([b"commit-%d" % i for i in range(10)] + [b"commit-last"])


def test_offsets_sent_in_a_transaction_reach_the_group_only_when_it_commits(broker, topic_name):
    bs, src, out = broker.bootstrap, topic_name("src"), topic_name("out")
    _create(bs, src)
    _create(bs, out)
    group = f"g-{src}"
    p = _producer(bs, f"id-{src}")
    p.init_transactions(30)
    consumer = ck.Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        meta = consumer.consumer_group_metadata()
        p.begin_transaction()
        p.produce(out, value=b"aborted")
        p.send_offsets_to_transaction([ck.TopicPartition(src, 0, 7)], meta, 30)
        assert _committed(bs, group, src, 0) < 0  # pending: not the group's until the commit
        p.abort_transaction(30)
        assert _committed(bs, group, src, 0) < 0  # aborted offsets never become the group's

        p.begin_transaction()
        p.produce(out, value=b"committed")
        p.send_offsets_to_transaction([ck.TopicPartition(src, 0, 42)], meta, 30)
        assert _committed(bs, group, src, 0) < 0
        p.commit_transaction(30)
        assert _committed(bs, group, src, 0) == 42
    finally:
        consumer.close()
    assert _read_committed(bs, out, 1, 1) == [b"committed"]


def test_a_second_producer_with_the_same_id_fences_the_first(broker, topic_name):
    bs, t = broker.bootstrap, topic_name("fence")
    _create(bs, t)
    old = _producer(bs, f"id-{t}")
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(t, value=b"zombie")
    old.flush(30)
    new = _producer(bs, f"id-{t}")
    new.init_transactions(30)  # bumps the epoch, aborts the zombie's open transaction
    with pytest.raises(ck.KafkaException) as e:
        old.commit_transaction(30)
    assert e.value.args[0].code() in (ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED)
    new.begin_transaction()
    new.produce(t, value=b"new")
    new.commit_transaction(30)
    assert _read_committed(bs, t, 1, 1) == [b"new"]


def test_a_transaction_open_past_its_timeout_is_aborted_and_readers_move_on(broker, topic_name):
    bs, t = broker.bootstrap, topic_name("timeout")
    _create(bs, t)
    stuck = _producer(bs, f"id-{t}", timeout_ms=2000)
    stuck.init_transactions(30)
    stuck.begin_transaction()
    stuck.produce(t, value=b"left-open")
    stuck.flush(30)
    plain = ck.Producer({"bootstrap.servers": bs})
    plain.produce(t, value=b"after")
    plain.flush(30)
    # the open transaction pins the last stable offset until the coordinator aborts it (2 s + its 1 s tick)
    t0 = time.monotonic()
    got = _read_committed(bs, t, 1, 1, wait_s=20)
    assert got == [b"after"]
    assert time.monotonic() - t0 < 15
    with pytest.raises(ck.KafkaException):  # the coordinator bumped the epoch: the late commit is fenced
        stuck.commit_transaction(10)


def test_kafka_python_transactions_round_trip(broker, topic_name):
    kafka = pytest.importorskip("kafka")
    bs, t = broker.bootstrap, topic_name("kp")
    _create(bs, t)
    p = kafka.KafkaProducer(bootstrap_servers=bs, transactional_id=f"id-{t}")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(t, b"kp-committed")
        p.commit_transaction()
        p.begin_transaction()
        p.send(t, b"kp-aborted")
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    assert _read_committed(bs, t, 1, 1) == [b"kp-committed"]


# ------------------------------------------------------------------ bad requests: Kafka's codes


def _init(w: WireClient, txn_id: str, timeout_ms: int = 10000) -> tuple[int, int]:
    r = w.request(InitProducerIdRequest(txn_id, timeout_ms), check=False)
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


def _txn_batch(pid: int, epoch: int, value: bytes) -> bytearray:
    b = fmt.encode([value], producer_id=pid, producer_epoch=epoch, base_sequence=0)
    set_transactional(b)
    return b


def test_bad_transaction_requests_get_kafkas_codes_and_the_broker_keeps_serving(broker, topic_name):
    bs, t = broker.bootstrap, topic_name("bad")
    _create(bs, t, 2)
    tid = f"id-{t}"
    with WireClient(bs) as w:
        # a timeout above transaction.max.timeout.ms (60 s here)
        r = w.request(InitProducerIdRequest(tid, 60001), check=False)
        assert r.error_code == InvalidTransactionTimeout.code
        pid, epoch = _init(w, tid)
        # EndTxn for an id the coordinator never saw
        assert w.request(ptm.EndTxnRequest(f"nobody-{t}", pid, epoch, True), check=False).error_code == (
            InvalidProducerIdMapping.code
        )
        # EndTxn with nothing ongoing
        assert (
            w.request(ptm.EndTxnRequest(tid, pid, epoch, True), check=False).error_code
            == InvalidTxnState.code
        )
        # AddPartitionsToTxn with a missing topic: that one fails, the rest is not attempted
        r = w.request(
            ptm.AddPartitionsToTxnRequest.single(tid, pid, epoch, [(t, 0), ("no-such-topic", 0)]), check=False
        )
        assert r.errors == {
            (t, 0): OperationNotAttempted.code,
            ("no-such-topic", 0): UnknownTopicOrPartition.code,
        }
        # a partition out of range is unknown too
        r = w.request(ptm.AddPartitionsToTxnRequest.single(tid, pid, epoch, [(t, 7)]), check=False)
        assert r.errors == {(t, 7): UnknownTopicOrPartition.code}
        r = w.request(ptm.AddPartitionsToTxnRequest.single(tid, pid, epoch, [(t, 0)]), check=False)
        assert r.errors == {(t, 0): 0}
        # KIP-890 part 1: produce outside the transaction's partitions is refused, inside is appended
        produce = ProduceRequest(
            [ProducePartitionData(t, 1, _txn_batch(pid, epoch, b"outside"))], acks=-1, transactional_id=tid
        )
        (pr,) = w.request(produce, check=False).partitions
        assert pr.error_code == InvalidTxnState.code
        produce = ProduceRequest(
            [ProducePartitionData(t, 0, _txn_batch(pid, epoch, b"inside"))], acks=-1, transactional_id=tid
        )
        (pr,) = w.request(produce, check=False).partitions
        assert pr.error_code == 0
        # a second instance bumps the epoch: the first one's EndTxn is fenced
        pid2, epoch2 = _init(w, tid)
        assert (pid2, epoch2) == (
            pid,
            epoch + 2,
        )  # + 1 fences the open transaction's abort, + 1 the new instance
        assert (
            w.request(ptm.EndTxnRequest(tid, pid, epoch, True), check=False).error_code == ProducerFenced.code
        )
        assert w.request(ptm.AddOffsetsToTxnRequest(tid, pid, epoch, "g"), check=False).error_code == (
            ProducerFenced.code
        )
        # a wrong producer id for the transactional id
        assert w.request(ptm.EndTxnRequest(tid, pid + 1000, epoch2, True), check=False).error_code == (
            InvalidProducerIdMapping.code
        )
        # the current instance still works, and nothing of the fenced one was committed
        assert w.request(
            ptm.AddPartitionsToTxnRequest.single(tid, pid2, epoch2, [(t, 1)]), check=False
        ).errors == {(t, 1): 0}
        produce = ProduceRequest(
            [ProducePartitionData(t, 1, _txn_batch(pid2, epoch2, b"second"))], acks=-1, transactional_id=tid
        )
        assert w.request(produce, check=False).partitions[0].error_code == 0
        assert w.request(ptm.EndTxnRequest(tid, pid2, epoch2, True), check=False).error_code == 0
        assert w.request(ptm.EndTxnRequest(tid, pid2, epoch2, True), check=False).error_code == 0  # a retry
        assert (
            w.request(ptm.EndTxnRequest(tid, pid2, epoch2, False), check=False).error_code
            == InvalidTxnState.code
        )
    assert _read_committed(bs, t, 2, 1) == [b"second"]
    assert ConcurrentTransactions.retriable


# ------------------------------------------------------------------ a crash between the decision and its markers


def test_a_broker_killed_after_a_kafka_commit_decision_completes_it_on_restart(tmp_path, monkeypatch):
    from pyspark_logsource.faults import FAULT_ENV

    tid = "id-crash"
    monkeypatch.setenv(
        FAULT_ENV, f"decided:{tid}"
    )  # the broker process inherits it: SIGKILL before the markers
    with broker_process(tmp_path) as b:
        bs = b.bootstrap
        _create(bs, "crash", 2)
        with WireClient(bs) as w:
            pid, epoch = _init(w, tid)
            assert w.request(
                ptm.AddPartitionsToTxnRequest.single(tid, pid, epoch, [("crash", 0), ("crash", 1)]),
                check=False,
            ).errors == {("crash", 0): 0, ("crash", 1): 0}
            for part in (0, 1):
                produce = ProduceRequest(
                    [ProducePartitionData("crash", part, _txn_batch(pid, epoch, b"win-%d" % part))],
                    acks=-1,
                    transactional_id=tid,
                )
                assert w.request(produce, check=False).partitions[0].error_code == 0
            with pytest.raises(Exception):  # noqa: B017 - the broker dies once the prepare record is durable
                w.request(ptm.EndTxnRequest(tid, pid, epoch, True), check=False)
        monkeypatch.delenv(FAULT_ENV)
        b.kill()
        b.restart()
        assert sorted(_read_committed(bs, "crash", 2, 2)) == [b"win-0", b"win-1"]
        with WireClient(bs) as w:  # the decision completed: a retry of the commit succeeds, an abort cannot
            assert w.request(ptm.EndTxnRequest(tid, pid, epoch, True), check=False).error_code == 0
            assert w.request(ptm.EndTxnRequest(tid, pid, epoch, False), check=False).error_code == (
                InvalidTxnState.code
            )
            assert _init(w, tid) == (pid, epoch + 1)


def test_transactional_offsets_survive_a_restart_as_decided(tmp_path):
    """The group's offsets are rebuilt from ``__consumer_offsets`` after kill -9: a committed transaction's
    offsets count, an aborted one's do not, an open one's stay pending until its transaction is decided."""
    with broker_process(tmp_path) as b:
        bs = b.bootstrap
        _create(bs, "src")
        _create(bs, "out")
        consumer = ck.Consumer(
            {"bootstrap.servers": bs, "group.id": "g-restart", "enable.auto.commit": False}
        )
        meta = consumer.consumer_group_metadata()
        consumer.close()
        p = _producer(bs, "id-restart")
        p.init_transactions(30)
        for offset, commit in ((42, True), (50, False)):
            p.begin_transaction()
            p.produce("out", value=b"%d" % offset)
            p.send_offsets_to_transaction([ck.TopicPartition("src", 0, offset)], meta, 30)
            p.commit_transaction(30) if commit else p.abort_transaction(30)
        p.begin_transaction()  # left open across the crash
        p.produce("out", value=b"60")
        p.send_offsets_to_transaction([ck.TopicPartition("src", 0, 60)], meta, 30)
        p.flush(30)
        b.kill()
        b.restart()
        assert _committed(bs, "group-restart-probe", "src", 0) < 0
        assert _committed(bs, "g-restart", "src", 0) == 42
        q = _producer(bs, "id-restart")  # a new instance aborts the open transaction: 60 never counts
        q.init_transactions(30)
        assert _committed(bs, "g-restart", "src", 0) == 42
        q.begin_transaction()
        q.produce("out", value=b"70")
        q.send_offsets_to_transaction([ck.TopicPartition("src", 0, 70)], meta, 30)
        q.commit_transaction(30)
        assert _committed(bs, "g-restart", "src", 0) == 70
        assert sorted(_read_committed(bs, "out", 1, 2)) == [b"42", b"70"]
