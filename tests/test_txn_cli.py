"""``logsource transactions list|describe|describe-producers|abort`` against a broker process, each bad input
with Kafka's code; and in a 2-broker cluster, a partition asked of a broker that does not lead it
(NOT_LEADER_OR_FOLLOWER) and a listing gathered from every broker."""

from __future__ import annotations

from typing import Any

import pytest
from support.brokers import WireClient

from pyspark_logsource import cli, transactions
from pyspark_logsource.protocol import txn_admin_messages as tam

ck = pytest.importorskip("confluent_kafka")

pytestmark = [
    pytest.mark.kafka_clients,
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"transaction.max.timeout.ms": 120000}


def _open_txn(bs: str, topic: str, txn_id: str) -> Any:
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "transaction.timeout.ms": 120000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=0)
    p.flush(30)
    return p


def _run(capsys, *argv: str) -> tuple[int, list[str], str]:
    capsys.readouterr()
    rc = cli.main(["transactions", *argv])
    out = capsys.readouterr()
    return rc, out.out.splitlines(), out.err


def test_list_describe_producers_and_abort(broker, topic_name, capsys):
    bs, t = broker.bootstrap, topic_name("txcli")
    with WireClient(bs) as w:
        assert w.create_topic(t, 1) == 0
    plain = ck.Producer({"bootstrap.servers": bs})
    plain.produce(t, value=b"first", partition=0)
    plain.flush(30)
    p = _open_txn(bs, t, f"{t}-id")
    common = ["-b", bs, "--timeout", "20"]

    rc, out, _ = _run(capsys, "list", "--state", "Ongoing", *common)
    assert rc == 0 and out[0].split() == ["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"]
    row = next(r.split() for r in out[1:] if r.startswith(f"{t}-id"))
    assert row[2] == "Ongoing"
    pid = row[1]

    rc, out, _ = _run(capsys, "describe", f"{t}-id", *common)
    assert rc == 0
    cols = out[1].split()
    assert cols[:4] == [f"{t}-id", pid, "0", "Ongoing"] and cols[4] == "120000" and cols[-1] == f"{t}-0"

    rc, out, _ = _run(capsys, "describe-producers", "--topic", t, "--partition", "0", *common)
    assert rc == 0 and out[0].split()[-1] == "CURRENT-TXN-START-OFFSET"
    starts = {r.split()[0]: r.split()[-1] for r in out[1:]}
    assert starts[pid] == "1" and len(starts) == 1  # the plain producer is not idempotent: not listed

    rc, _, err = _run(capsys, "abort", "--topic", t, "--partition", "0", "--start-offset", "0", *common)
    assert rc == 1 and "no open transaction starts at offset 0" in err
    rc, out, _ = _run(capsys, "abort", "--topic", t, "--partition", "0", "--start-offset", "1", *common)
    assert rc == 0 and f"aborted producer {pid}" in out[0]
    rc, out, _ = _run(capsys, "describe-producers", "--topic", t, "--partition", "0", *common)
    assert {r.split()[0]: r.split()[-1] for r in out[1:]}[pid] == "-1"
    p.abort_transaction(30)


def test_bad_input_exits_1_with_kafkas_code(broker, topic_name, capsys):
    bs = broker.bootstrap
    common = ["-b", bs, "--timeout", "5"]
    rc, _, err = _run(capsys, "describe", "never-used-id", *common)
    assert rc == 1 and "TransactionalIdNotFound (105)" in err
    rc, _, err = _run(capsys, "describe-producers", "--topic", "no-such", "--partition", "0", *common)
    assert rc == 1 and "UnknownTopicOrPartition (3)" in err
    rc, _, err = _run(capsys, "list", "--state", "Sleeping", *common)
    assert rc == 1 and "Sleeping" in err
    with pytest.raises(SystemExit) as e:  # usage: --start-offset is required
        transactions.main(["abort", "--topic", "x", "--partition", "0"])
    assert e.value.code == 2


@pytest.mark.cluster
def test_in_a_cluster_a_non_leader_answers_not_leader_and_every_broker_is_listed(
    zk_connect, tmp_path, capsys
):
    from support.cluster import Cluster

    with Cluster(zk_connect, tmp_path, brokers=2) as c:
        c.create_topic("tc", partitions=2, replication_factor=2)
        c.wait_full_isr("tc")
        bs = c.bootstrap
        p = _open_txn(bs, "tc", "cluster-id")
        leader = c.leader("tc", 0)
        other = next(b for b in c.brokers if b != leader)
        common = ["-b", bs, "--timeout", "20"]
        rc, _, err = _run(
            capsys,
            "describe-producers",
            "--topic",
            "tc",
            "--partition",
            "0",
            "--broker-id",
            str(other),
            *common,
        )
        assert rc == 1 and "NotLeaderOrFollower (6)" in err
        rc, out, _ = _run(
            capsys,
            "describe-producers",
            "--topic",
            "tc",
            "--partition",
            "0",
            "--broker-id",
            str(leader),
            *common,
        )
        assert rc == 0 and out[1].split()[-1] == "0"
        # only the coordinator lists; the other broker answers an empty listing (as Kafka's brokers do)
        answers = {}
        for b, eb in c.brokers.items():
            with WireClient(eb.bootstrap) as w:
                answers[b] = w.request(tam.ListTransactionsRequest(), check=False)
        assert sorted(len(r.transactions) for r in answers.values()) == [0, 1]
        assert all(r.error_code == 0 for r in answers.values())
        rc, out, _ = _run(capsys, "list", *common)
        assert rc == 0 and out[1].split()[0] == "cluster-id"
        p.abort_transaction(30)
