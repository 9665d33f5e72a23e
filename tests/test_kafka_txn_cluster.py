"""Kafka's transactions (confluent-kafka) on a 3-broker cluster: one coordinator (the leader of
``__transaction_state-0``) for Kafka clients and our Spark writes alike.

The data partitions are led by every broker, so a commit's markers go to other leaders through
WriteTxnMarkers, and the group's ``__consumer_offsets`` partition may be led elsewhere too (its leader applies
the transaction's offsets when the COMMIT marker arrives). The coordinator is then killed -9 once a decision
is on the ISR (``LOGSOURCE_FAULT=decided:<transactional id>``, inherited by every broker): the new leader of
``__transaction_state-0`` loads the prepare record and completes it; the client's EndTxn retry succeeds.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from support.brokers import WireClient
from support.cluster import Cluster

from pyspark_logsource import format as fmt
from pyspark_logsource.errors import InvalidTxnState
from pyspark_logsource.faults import FAULT_ENV
from pyspark_logsource.format.control import set_transactional
from pyspark_logsource.protocol import producer_txn_messages as ptm
from pyspark_logsource.protocol.messages import InitProducerIdRequest, ProducePartitionData, ProduceRequest

ck = pytest.importorskip("confluent_kafka")

TXN = "__transaction_state"

pytestmark = [pytest.mark.cluster, pytest.mark.kafka_clients, pytest.mark.timeout(300)]


def _read_committed(bs: str, topic: str, partitions: int, want: int, wait_s: float = 30.0) -> list[bytes]:
    c = ck.Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"reader-{time.monotonic_ns()}",
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
        (tp,) = c.committed([ck.TopicPartition(topic, partition)], timeout=20)
        return tp.offset
    finally:
        c.close()


def _producer(bs: str, txn_id: str) -> Any:
    return ck.Producer(
        {"bootstrap.servers": bs, "transactional.id": txn_id, "transaction.timeout.ms": 60000, "linger.ms": 5}
    )


def _txn_batch(pid: int, epoch: int, value: bytes, seq: int = 0) -> bytearray:
    b = fmt.encode([value], producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    set_transactional(b)
    return b


def _pipelined_produces_are_appended_in_their_order(c: Cluster, coordinator: int) -> None:
    """A producer pipelines its batches (sequence 0, 1, 2 ... sent without waiting, as librdkafka's up to 5
    in flight); where the partition's leader asks the coordinator about each (KIP-890), they are still
    appended in that order: 2 before 1 would be OUT_OF_ORDER_SEQUENCE, fatal to the producer (librdkafka's
    0103 on a cluster)."""
    leaders = c.leaders("t")
    q = next(q for q, b in sorted(leaders.items()) if b != coordinator)
    tid = "tx-pipelined"
    with WireClient(c.brokers[coordinator].bootstrap) as w:
        r = w.request(InitProducerIdRequest(tid, 60000), check=False)
        pid, epoch = r.producer_id, r.producer_epoch
        assert w.request(
            ptm.AddPartitionsToTxnRequest.single(tid, pid, epoch, [("t", q)]), check=False
        ).errors == {("t", q): 0}
    n = 8
    with WireClient(c.brokers[leaders[q]].bootstrap) as w:
        for seq in range(n):
            batch = _txn_batch(pid, epoch, b"p-%d" % seq, seq)
            w.send(ProduceRequest([ProducePartitionData("t", q, batch)], acks=-1, transactional_id=tid))
        codes = [w.receive().partitions[0].error_code for _ in range(n)]
    assert codes == [0] * n, codes
    with WireClient(c.brokers[coordinator].bootstrap) as w:
        assert w.request(ptm.EndTxnRequest(tid, pid, epoch, False), check=False).error_code == 0


def _produce_outside_the_transaction_is_refused_by_every_leader(c: Cluster, coordinator: int) -> None:
    leaders = c.leaders("t")
    added, other = [q for q, b in sorted(leaders.items()) if b != coordinator][:2]
    tid = "tx-verify"
    with WireClient(c.brokers[coordinator].bootstrap) as w:
        r = w.request(InitProducerIdRequest(tid, 60000), check=False)
        assert r.error_code == 0
        pid, epoch = r.producer_id, r.producer_epoch
        assert w.request(
            ptm.AddPartitionsToTxnRequest.single(tid, pid, epoch, [("t", added)]), check=False
        ).errors == {("t", added): 0}
    for q, want in ((other, InvalidTxnState.code), (added, 0)):
        with WireClient(c.brokers[leaders[q]].bootstrap) as w:
            req = ProduceRequest(
                [ProducePartitionData("t", q, _txn_batch(pid, epoch, b"v-%d" % q))],
                acks=-1,
                transactional_id=tid,
            )
            assert w.request(req, check=False).partitions[0].error_code == want, (q, leaders, coordinator)
    with WireClient(c.brokers[coordinator].bootstrap) as w:
        assert w.request(ptm.EndTxnRequest(tid, pid, epoch, False), check=False).error_code == 0


def test_kafka_transactions_across_leaders_and_a_coordinator_killed_after_its_decision(
    zk_connect, tmp_path, monkeypatch
):
    monkeypatch.setenv(FAULT_ENV, "decided:tx-kill")  # every broker process inherits it
    with Cluster(zk_connect, tmp_path, brokers=3) as c:
        c.create_topic("t", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
        c.wait_full_isr("t")
        assert len(set(c.leaders("t").values())) == 3, c.leaders("t")
        bs = c.bootstrap

        p = _producer(bs, "tx-a")
        p.init_transactions(60)
        coordinator = c.leader(TXN, 0)
        consumer = ck.Consumer(
            {"bootstrap.servers": bs, "group.id": "g-cluster", "enable.auto.commit": False}
        )
        try:
            p.begin_transaction()
            for i in range(9):
                p.produce("t", value=b"a-%d" % i, partition=i % 3)
            p.send_offsets_to_transaction(
                [ck.TopicPartition("t", 0, 11)], consumer.consumer_group_metadata(), 60
            )
            assert _committed(bs, "g-cluster", "t", 0) < 0
            p.commit_transaction(60)
            assert _committed(bs, "g-cluster", "t", 0) == 11
            p.begin_transaction()
            for i in range(3):
                p.produce("t", value=b"aborted-%d" % i, partition=i % 3)
            p.abort_transaction(60)
        finally:
            consumer.close()
        assert sorted(_read_committed(bs, "t", 3, 9)) == sorted(b"a-%d" % i for i in range(9))

        # KIP-890 part 1 where the partition's leader is not the coordinator: it asks the coordinator
        _produce_outside_the_transaction_is_refused_by_every_leader(c, coordinator)
        _pipelined_produces_are_appended_in_their_order(c, coordinator)

        # the coordinator dies once the commit's prepare record is on the ISR, before any marker
        k = _producer(bs, "tx-kill")
        k.init_transactions(60)
        k.begin_transaction()
        for i in range(6):
            k.produce("t", value=b"k-%d" % i, partition=i % 3)
        k.commit_transaction(120)  # librdkafka finds the new coordinator and retries EndTxn there
        assert coordinator not in c.running() or c.pid(coordinator) is None
        c.kill(coordinator)
        new = c.wait_leader(TXN, 0, not_in={coordinator})
        assert new != coordinator
        expected = [b"a-%d" % i for i in range(9)] + [b"k-%d" % i for i in range(6)]
        assert sorted(_read_committed(c.bootstrap, "t", 3, 15)) == sorted(expected)
        assert "completing PrepareCommit after a restart" in c.broker_log(new)
