"""ListTransactions (66), DescribeTransactions (65), DescribeProducers (61) and the abort of a hanging
transaction against a broker process: through our Admin, kafka-python 3.0's KafkaAdminClient (an
independent client of the same APIs; confluent-kafka 2.16's AdminClient has none of them) and raw requests
for the error codes. The CLI (``logsource transactions``) is tests/test_txn_cli.py."""

from __future__ import annotations

import time
from typing import Any

import pytest
from support.brokers import WireClient

from pyspark_logsource.client.admin import Admin
from pyspark_logsource.errors import ConfigError, TransactionalIdNotFound, UnknownTopicOrPartition
from pyspark_logsource.protocol import txn_admin_messages as tam

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

pytestmark = [
    pytest.mark.kafka_clients,
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"transaction.max.timeout.ms": 120000}


def _open_txn(bs: str, topic: str, txn_id: str, n: int = 3) -> Any:
    """A confluent-kafka producer with a transaction left open (records flushed into ``topic``)."""
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "transaction.timeout.ms": 120000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=f"{txn_id}-{i}".encode(), partition=0)
    p.flush(30)
    return p


def _create(bs: str, topic: str) -> None:
    with WireClient(bs) as w:
        assert w.create_topic(topic, 1) == 0


def test_list_and_describe_an_open_and_a_committed_transaction(broker, topic_name):
    bs, t = broker.bootstrap, topic_name("txadm")
    _create(bs, t)
    plain = ck.Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    plain.produce(t, value=b"a", partition=0)
    plain.produce(t, value=b"b", partition=0)
    plain.flush(30)
    done = ck.Producer({"bootstrap.servers": bs, "transactional.id": f"{t}-done"})
    done.init_transactions(30)
    done.begin_transaction()
    done.produce(t, value=b"c", partition=0)
    done.commit_transaction(30)
    hanging = _open_txn(bs, t, f"{t}-open")
    with Admin(bs) as a:
        listed = {x.transactional_id: x for x in a.list_transactions()}
        assert listed[f"{t}-open"].state == "Ongoing" and listed[f"{t}-done"].state == "CompleteCommit"
        pid = listed[f"{t}-open"].producer_id
        assert [
            x.transactional_id for x in a.list_transactions(states=["Ongoing"]) if t in x.transactional_id
        ] == [f"{t}-open"]
        assert [x.transactional_id for x in a.list_transactions(producer_ids=[pid])] == [f"{t}-open"]
        assert [x.transactional_id for x in a.list_transactions(pattern=f"{t}-d.*")] == [f"{t}-done"]
        time.sleep(0.3)
        long_ones = {x.transactional_id for x in a.list_transactions(states=["Ongoing"], duration_ms=200)}
        assert f"{t}-open" in long_ones
        assert not a.list_transactions(states=["Ongoing"], duration_ms=3_600_000)
        with pytest.raises(ConfigError, match="Bogus"):
            a.list_transactions(states=["Bogus"])

        d = a.describe_transactions([f"{t}-open", f"{t}-nope"])
        open_d = d[f"{t}-open"]
        assert isinstance(open_d, tam.TransactionDescription)
        assert (open_d.state, open_d.producer_id, open_d.timeout_ms) == ("Ongoing", pid, 120000)
        assert open_d.partitions == [(t, 0)] and open_d.start_time_ms > 0
        assert isinstance(d[f"{t}-nope"], TransactionalIdNotFound)

        producers = {p.producer_id: p for p in a.describe_producers(t, 0)}
        assert producers[pid].current_txn_start_offset == 4  # a, b, c and c's COMMIT marker before it
        assert producers[pid].last_sequence == 2 and producers[pid].last_timestamp > 0
        others = [p for p in producers.values() if p.producer_id != pid]
        assert len(others) == 2 and all(p.current_txn_start_offset == -1 for p in others)

    # the same through kafka-python's admin client
    kp = kafka.KafkaAdminClient(bootstrap_servers=bs)
    try:
        by_broker = kp.list_transactions(state_filters=["Ongoing"])  # node id -> listings
        got = {x.transactional_id: x for xs in by_broker.values() for x in xs}
        assert got[f"{t}-open"].producer_id == pid
        desc = kp.describe_transactions([f"{t}-open"])[f"{t}-open"]
        assert desc.producer_id == pid
        with pytest.raises(kafka.errors.TransactionalIdNotFoundError):
            kp.describe_transactions([f"{t}-nope"])
        state = kp.describe_producers([kafka.TopicPartition(t, 0)])[kafka.TopicPartition(t, 0)]
        assert {p.producer_id for p in state.active_producers} == set(producers)
    finally:
        kp.close()
    hanging.abort_transaction(30)


def test_a_hanging_transaction_is_aborted_at_its_start_offset_and_readers_move_on(broker, topic_name):
    bs, t = broker.bootstrap, topic_name("hang")
    _create(bs, t)
    hanging = _open_txn(bs, t, f"{t}-h", n=2)
    after = ck.Producer({"bootstrap.servers": bs})
    after.produce(t, value=b"after", partition=0)
    after.flush(30)
    reader = ck.Consumer({"bootstrap.servers": bs, "group.id": f"r-{t}", "isolation.level": "read_committed"})
    try:
        reader.assign([ck.TopicPartition(t, 0, 0)])
        assert reader.poll(1.0) is None or reader.poll(0.5) is None  # pinned by the open transaction
        with Admin(bs) as a:
            with pytest.raises(ConfigError, match="no open transaction starts at offset 1"):
                a.abort_transaction(t, 0, 1)
            aborted = a.abort_transaction(t, 0, 0)
            assert aborted.current_txn_start_offset == 0
            assert all(p.current_txn_start_offset == -1 for p in a.describe_producers(t, 0))
        got = []
        end = time.monotonic() + 10
        while time.monotonic() < end and not got:
            m = reader.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
        assert got == [b"after"]  # the aborted records never show, the LSO moved past them
    finally:
        reader.close()
    # the producer does not know: its coordinator still commits (as Kafka's), but the records stay aborted
    hanging.commit_transaction(30)
    again = ck.Consumer({"bootstrap.servers": bs, "group.id": f"r2-{t}", "isolation.level": "read_committed"})
    try:
        again.assign([ck.TopicPartition(t, 0, 0)])
        seen, end = [], time.monotonic() + 3
        while time.monotonic() < end:
            m = again.poll(0.2)
            if m is not None and not m.error():
                seen.append(m.value())
        assert seen == [b"after"]
    finally:
        again.close()


def test_bad_requests_get_kafkas_codes(broker, topic_name):
    bs, t = broker.bootstrap, topic_name("bad")
    _create(bs, t)
    with WireClient(bs) as w:
        resp = w.request(tam.DescribeProducersRequest([(t, 5), ("no-such-topic", 0)]), check=False)
        assert {(x.topic, x.partition): x.error_code for x in resp.partitions} == {
            (t, 5): UnknownTopicOrPartition.code,
            ("no-such-topic", 0): UnknownTopicOrPartition.code,
        }
        resp = w.request(tam.DescribeTransactionsRequest(["never-seen"]), check=False)
        assert [x.error_code for x in resp.transactions] == [TransactionalIdNotFound.code]  # 105
        resp = w.request(tam.ListTransactionsRequest(transactional_id_pattern="("), check=False)
        assert resp.error_code == 42  # INVALID_REQUEST: the pattern does not compile
        resp = w.request(tam.ListTransactionsRequest(["Ongoing", "Nope"]), check=False)
        assert (resp.error_code, resp.unknown_state_filters) == (0, ["Nope"])
    with Admin(bs) as a:
        with pytest.raises(UnknownTopicOrPartition):
            a.describe_producers("no-such-topic", 0)
