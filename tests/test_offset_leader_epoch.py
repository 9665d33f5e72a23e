"""The committed leader epoch of group offsets (KIP-320): OffsetCommit v6+ and TxnOffsetCommit v2+ carry it,
OffsetFetch v5+ returns it, and ``__consumer_offsets`` keeps it across restarts.

A consumer resuming from a committed offset validates the epoch against the log to detect truncation;
librdkafka's 0103_transactions compares ``committed()`` with the position it committed, epoch included.
Round trips through confluent-kafka (plain and transactional commits), kafka-python and our codec at
old and new versions; a value stored before the epoch existed reads as -1.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest
from support.brokers import WireClient, broker_process

from pyspark_logsource import format as fmt
from pyspark_logsource.broker.groups.offsets import OFFSETS_TOPIC, GroupOffsetStore, _encode_key
from pyspark_logsource.broker.log import LogManager
from pyspark_logsource.broker.log.config import LogConfig
from pyspark_logsource.protocol.api_keys import ApiKey
from pyspark_logsource.protocol.coordinator_messages import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
)

ck = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.kafka_clients, pytest.mark.timeout(180)]


def _committed(bs: str, group: str, topic: str, partition: int) -> Any:
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = c.committed([ck.TopicPartition(topic, partition)], timeout=10)
        return tp
    finally:
        c.close()


def _commit(bs: str, group: str, tp: Any) -> None:
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        (r,) = c.commit(offsets=[tp], asynchronous=False)
        assert r.error is None
    finally:
        c.close()


def _send_in_txn(bs: str, txn_id: str, group: str, tp: Any) -> None:
    meta = ck.Consumer({"bootstrap.servers": bs, "group.id": group}).consumer_group_metadata()
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    p.send_offsets_to_transaction([tp], meta, 30)
    p.commit_transaction(30)


def test_confluent_kafka_commits_come_back_with_their_leader_epoch(broker, topic_name):
    bs = broker.bootstrap
    t = topic_name("epoch")
    with WireClient(bs) as w:
        assert w.create_topic(t, 2) == 0
    p = ck.Producer({"bootstrap.servers": bs})
    for i in range(3):
        p.produce(t, value=b"%d" % i, partition=0)
    assert p.flush(10) == 0

    # a consumer committing what it consumed: the epoch of the message's leader (0 on a fresh topic)
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": "g-consumed", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(t, 0, 0)])
    got = []
    end = time.monotonic() + 15
    while len(got) < 3 and time.monotonic() < end:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    assert len(got) == 3 and got[-1].leader_epoch() == 0
    c.commit(message=got[-1], asynchronous=False)
    c.close()
    tp = _committed(bs, "g-consumed", t, 0)
    assert (tp.offset, tp.leader_epoch) == (3, 0)

    # an explicit epoch, and one committed without any (-1 comes back as None)
    _commit(bs, "g-explicit", ck.TopicPartition(t, 1, 17, leader_epoch=5))
    tp = _committed(bs, "g-explicit", t, 1)
    assert (tp.offset, tp.leader_epoch) == (17, 5)
    _commit(bs, "g-explicit", ck.TopicPartition(t, 1, 18))
    tp = _committed(bs, "g-explicit", t, 1)
    assert (tp.offset, tp.leader_epoch) == (18, None)


def test_offsets_sent_in_a_transaction_keep_their_leader_epoch(broker, topic_name):
    """What librdkafka's 0103 checks: ``committed()`` equals the position sent with
    ``send_offsets_to_transaction``, epoch included."""
    bs = broker.bootstrap
    t = topic_name("txn-epoch")
    with WireClient(bs) as w:
        assert w.create_topic(t, 1) == 0
    _send_in_txn(bs, "epoch-txn", "g-txn", ck.TopicPartition(t, 0, 9, leader_epoch=2))
    tp = _committed(bs, "g-txn", t, 0)
    assert (tp.offset, tp.leader_epoch) == (9, 2)


def test_kafka_python_round_trips_the_leader_epoch(broker, topic_name):
    kafka = pytest.importorskip("kafka")
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTP

    bs = broker.bootstrap
    t = topic_name("kp-epoch")
    with WireClient(bs) as w:
        assert w.create_topic(t, 1) == 0
    c = kafka.KafkaConsumer(bootstrap_servers=bs, group_id="g-kp", enable_auto_commit=False)
    try:
        tp = KTP(t, 0)
        c.commit({tp: OffsetAndMetadata(11, "kp", 4)})
        assert c.committed(tp, metadata=True) == OffsetAndMetadata(11, "kp", 4)
    finally:
        c.close()


def test_the_codec_carries_the_epoch_from_v6_and_older_versions_store_minus_one(broker, topic_name):
    bs = broker.bootstrap
    t = topic_name("wire-epoch")
    with WireClient(bs) as w:
        assert w.create_topic(t, 2) == 0
        assert w.conn.version_for(ApiKey.OFFSET_COMMIT) >= 6 and w.conn.version_for(ApiKey.OFFSET_FETCH) >= 5
        w.request(OffsetCommitRequest("g-wire", [OffsetCommitPartition(t, 0, 30, "m", 7)]))
        w.conn.versions[ApiKey.OFFSET_COMMIT] = 5  # before the field: the epoch is not sent
        w.request(OffsetCommitRequest("g-wire", [OffsetCommitPartition(t, 1, 40, "m", 7)]))
        got = {(p.topic, p.partition): p for p in w.request(OffsetFetchRequest("g-wire", None)).partitions}
        assert (got[(t, 0)].offset, got[(t, 0)].leader_epoch) == (30, 7)
        assert (got[(t, 1)].offset, got[(t, 1)].leader_epoch) == (40, -1)
        w.conn.versions[ApiKey.OFFSET_FETCH] = 4  # an old reader gets the offset, no epoch on the wire
        old = w.request(OffsetFetchRequest("g-wire", [(t, 0)])).partitions[0]
        assert (old.offset, old.leader_epoch, old.error_code) == (30, -1, 0)


def test_epochs_survive_a_restart(tmp_path):
    with broker_process(tmp_path) as b:
        bs = b.bootstrap
        with WireClient(bs) as w:
            assert w.create_topic("src", 2) == 0
        _commit(bs, "g-plain", ck.TopicPartition("src", 0, 12, leader_epoch=3))
        _send_in_txn(bs, "restart-txn", "g-txn", ck.TopicPartition("src", 1, 21, leader_epoch=6))
        b.kill()
        b.restart()
        tp = _committed(bs, "g-plain", "src", 0)
        assert (tp.offset, tp.leader_epoch) == (12, 3)
        tp = _committed(bs, "g-txn", "src", 1)
        assert (tp.offset, tp.leader_epoch) == (21, 6)


def test_a_value_stored_before_the_epoch_existed_reads_as_minus_one(tmp_path):
    """Version 0 values (``>hqq`` then the metadata) are what ``__consumer_offsets`` holds from before."""
    logs = LogManager([tmp_path], LogConfig(), background=False)
    try:
        store = GroupOffsetStore(logs, 1)
        old = struct.pack(">hqq", 0, 77, 1_700_000_000_000) + b"\x00old-meta"
        logs.get_log(OFFSETS_TOPIC, 0).append(fmt.encode([old], [_encode_key("g", "t", 0)]))
        store.commit("g", [("t", 1, 5, None, 9)])
        reread = GroupOffsetStore(logs, 1)
        got = reread.fetch("g", None)
        assert got[("t", 0)] == (77, "old-meta", 1_700_000_000_000, -1)
        assert (got[("t", 1)].offset, got[("t", 1)].metadata, got[("t", 1)].leader_epoch) == (5, None, 9)
    finally:
        logs.close()
