"""The transaction coordinator in cluster mode (issue 12): ``__transaction_state`` is a replicated internal
topic and its partition's leader coordinates staged writes.

Real ZooKeeper and broker processes (tests/support/cluster.py). Data is staged with the clients the Spark
sink uses (TransactionalProducer + StagedTxns) in partitions led by every broker; the coordinator
is killed -9 right after it recorded a decision (``LOGSOURCE_FAULT=decided:<write id>``, set
for every broker: the one that coordinates dies) and a new leader of ``__transaction_state-0``
completes the markers, answers the driver's retried commit "committed before", aborts the re-run's
data, and aborts an attempt registered before the kill once it is idle past its timeout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

import pytest
from support.brokers import broker_process
from support.cluster import Cluster, wait_for

from pyspark_logsource.client import Admin, Consumer
from pyspark_logsource.client.connection import raise_for_response
from pyspark_logsource.client.network import NetworkClient
from pyspark_logsource.client.txn import StagedTxns, TransactionalProducer
from pyspark_logsource.errors import CoordinatorNotAvailable, InvalidRequest, InvalidTxnState, NotCoordinator
from pyspark_logsource.faults import FAULT_ENV
from pyspark_logsource.protocol import txn_messages as tm
from pyspark_logsource.protocol.coordinator_messages import FindCoordinatorRequest

TXN = "__transaction_state"


def _stage(
    bs: str,
    txns: StagedTxns,
    write_id: str,
    values: list[bytes],
    timeout_ms: int = 60000,
    partitions: tuple[int, ...] = (0, 1, 2),
) -> tm.StagedProducer:
    """One task attempt: register, stage ``values`` round-robin over t's ``partitions`` (acks=all), return its
    commit message."""
    p = TransactionalProducer(bs, acks=-1)
    try:
        pid, epoch = p.producer_id_and_epoch()
        txns.register(write_id, pid, epoch, [("t", q) for q in partitions], timeout_ms)
        futures = [p.send("t", v, partition=partitions[i % len(partitions)]) for i, v in enumerate(values)]
        p.flush()
        counts: Counter = Counter(("t", f.result()[0]) for f in futures)
    finally:
        p.close()
    return tm.StagedProducer(pid, epoch, dict(counts))


def _commit(bs: str, write_id: str, batch_id: int, winner: tm.StagedProducer) -> tm.StagedTxnsResponse:
    with StagedTxns(bs) as txns:
        return txns.commit(write_id, batch_id, [winner])


def _read_committed(bs: str, expected: int) -> list[bytes]:
    """Everything a read_committed consumer gets from t (waits for ``expected`` records, then a little more)."""
    with Consumer(bs) as c:
        c.assign([("t", q) for q in range(3)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(got) < expected:
            got += [m.value for m in c.poll(0.2)]
        got += [m.value for m in c.poll(0.5)]
    return got


def _stable_everywhere(bs: str) -> bool:
    """No open transaction in t: read_committed 'latest' is the log end in every partition."""
    tps = [("t", q) for q in range(3)]
    with Admin(bs) as a:
        return a.list_offsets(tps, "latest", read_committed=True) == a.list_offsets(tps, "latest")


@pytest.mark.cluster
@pytest.mark.slow
def test_a_replicated_coordinator_survives_kill_9_after_its_decision(zk_connect, tmp_path, monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "decided:w-kill")  # every broker process inherits it
    with Cluster(zk_connect, tmp_path, brokers=3) as c:
        c.create_topic("t", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
        c.wait_full_isr("t")
        assert len(set(c.leaders("t").values())) == 3, c.leaders("t")  # the data is led by every broker
        bs = c.bootstrap
        with StagedTxns(bs) as txns:
            coordinator = txns.coordinator("w")  # FindCoordinator key_type 1 creates __transaction_state
            assert coordinator == c.leader(TXN, 0)
            assert len(c.assignment(TXN)[0]) == 3
            topic_config = json.loads(c.zk.get(f"/config/topics/{TXN}")[0])["config"]
            assert topic_config == {"cleanup.policy": "compact", "min.insync.replicas": "2"}

            # a non-coordinator answers NotCoordinator (the client's retry finds the leader instead)
            other = next(b for b in c.running() if b != coordinator)
            net = NetworkClient(bs)
            try:
                net.refresh_metadata(None)
                req = tm.StagedTxnsRequest(tm.COMMIT, "w", 0, 60000, [])
                with pytest.raises(NotCoordinator, match="not the transaction coordinator"):
                    raise_for_response(net.request(req, other))
            finally:
                net.close()

            # batch 0 of write w: one winner, one speculative duplicate (aborted), exactly once
            win = _stage(bs, txns, "w", [b"w0-%d" % i for i in range(9)])
            _stage(bs, txns, "w", [b"dup-%d" % i for i in range(6)])
            assert txns.commit("w", 0, [win]).committed
            assert sorted(_read_committed(bs, 9)) == sorted(b"w0-%d" % i for i in range(9))

            # two drivers commit batch 1 of w at once with different winners while a follower of
            # __transaction_state-0 is stopped (kill -STOP for 1 s, under replica.lag.time.max.ms and the
            # session timeout): both decisions would wait for the ISR together, but the write's lock lets
            # one pass the batch-id check; the other is "committed before" and its data is aborted
            a1 = _stage(bs, txns, "w", [b"a1-%d" % i for i in range(3)])
            b1 = _stage(bs, txns, "w", [b"b1-%d" % i for i in range(3)])
            follower = next(b for b in c.isr(TXN, 0) if b != coordinator)
            with ThreadPoolExecutor(2) as ex:
                os.kill(c.pid(follower), signal.SIGSTOP)
                try:
                    futures = [ex.submit(_commit, bs, "w", 1, w) for w in (a1, b1)]
                    time.sleep(1.0)
                finally:
                    os.kill(c.pid(follower), signal.SIGCONT)
                both = [f.result() for f in futures]
            assert sorted(r.committed for r in both) == [False, True], both
            c.wait_full_isr(TXN)
            first = b"a1-" if both[0].committed else b"b1-"
            batch1 = [first + b"%d" % i for i in range(3)]

            # an attempt of another write registers and stages, then idles: the next coordinator must know it
            _stage(bs, txns, "w-idle", [b"idle-%d" % i for i in range(3)], timeout_ms=4000)
            # the coordinator dies once the decision of w-kill batch 0 is on the ISR, before any marker
            won = _stage(bs, txns, "w-kill", [b"k0-%d" % i for i in range(6)])
            _stage(bs, txns, "w-kill", [b"lost-%d" % i for i in range(3)])
            assert not _stable_everywhere(bs)
            resp = txns.commit("w-kill", 0, [won])  # the client finds the new coordinator and retries
            # the retry is a repeat of a recorded decision: "committed before", its winner kept
            assert not resp.committed and resp.last_committed_batch_id == 0
            assert c.pid(coordinator) is None or coordinator not in c.running()
            c.kill(coordinator)  # reap the process; wait until ZooKeeper dropped it
            new = c.wait_leader(TXN, 0, not_in={coordinator})
            assert txns.coordinator("w-kill", refresh=True) == new
            # it loaded both writes and re-sent markers only for w-kill's decision (w's was recorded complete)
            loaded = wait_for(
                lambda: re.findall(
                    r"(\d+) writes committed, (\d+) decisions to complete, (\d+) writes "
                    "with registered",
                    c.broker_log(new),
                ),
                10,
                what="the state loaded",
            )
            assert loaded[-1] == ("2", "1", "1"), (
                loaded
            )  # w-idle is registered (w-kill's went with its decision)

            # the driver retries batch 0 after its own crash: a re-run's data is aborted, nothing changes
            rerun = _stage(c.bootstrap, txns, "w-kill", [b"rerun-%d" % i for i in range(5)])
            resp = txns.commit("w-kill", 0, [rerun])
            assert not resp.committed and resp.last_committed_batch_id == 0

        bs = c.bootstrap
        # the idle attempt registered before the kill is aborted by the new coordinator after its timeout
        wait_for(lambda: _stable_everywhere(bs), 30, what="every staged transaction decided")
        assert "aborting attempt" in c.broker_log(new), "the new coordinator did not expire the idle attempt"
        # an attempt staged only where another broker leads (the coordinator cannot count it there) expires: its
        # commit must fail, not publish nothing
        remote = tuple(q for q, leader in sorted(c.leaders("t").items()) if leader != new)
        assert remote, c.leaders("t")
        with StagedTxns(bs) as txns:
            expired = _stage(
                bs, txns, "w-exp", [b"exp-%d" % i for i in range(4)], timeout_ms=1500, partitions=remote
            )
            wait_for(lambda: _stable_everywhere(bs), 30, what="the expired attempt aborted")
            with pytest.raises(InvalidTxnState, match="not a registered attempt"):
                txns.commit("w-exp", 0, [expired])
        expected = [b"w0-%d" % i for i in range(9)] + batch1 + [b"k0-%d" % i for i in range(6)]
        assert sorted(_read_committed(bs, 18)) == sorted(
            expected
        )  # each once: no dup, loser, lost, rerun, idle

        # too few live brokers for min.insync.replicas of __transaction_state: CoordinatorNotAvailable
        for b in [b for b in c.running() if b != new]:
            c.kill(b)
        wait_for(lambda: c.isr(TXN, 0) == [new], 30, what=f"ISR of {TXN}-0 shrunk to [{new}]")
        with StagedTxns(c.bootstrap, request_timeout_ms=2000) as txns:
            with pytest.raises(CoordinatorNotAvailable, match="cannot be replicated"):
                txns.register("w2", 1, 0, [("t", 0)], 60000)


@pytest.mark.cluster
def test_no_coordinator_while_fewer_brokers_are_live_than_the_replication_factor(zk_connect, tmp_path):
    with Cluster(
        zk_connect, tmp_path, brokers=2, config={"transaction.state.log.replication.factor": "3"}
    ) as c:
        net = NetworkClient(c.bootstrap)
        try:
            with pytest.raises(CoordinatorNotAvailable, match="needs 3 live brokers"):
                net.request(FindCoordinatorRequest("w", key_type=1))
        finally:
            net.close()
        with StagedTxns(c.bootstrap, request_timeout_ms=1500) as txns, pytest.raises(CoordinatorNotAvailable):
            txns.register("w", 1, 0, [], 60000)
        assert TXN not in c.zk.get_children("/brokers/topics")  # never created under-replicated


@pytest.mark.cluster
def test_a_one_broker_cluster_holds_the_transaction_state_it_can(zk_connect, tmp_path):
    # the harness (as `logsource cluster start --brokers 1`) sets the replication factor and min ISR to 1
    with Cluster(zk_connect, tmp_path, brokers=1) as c:
        c.create_topic("t", partitions=3, replication_factor=1)
        with StagedTxns(c.bootstrap) as txns:
            win = _stage(c.bootstrap, txns, "w", [b"one-%d" % i for i in range(4)])
            assert txns.commit("w", 0, [win]).committed
        assert sorted(_read_committed(c.bootstrap, 4)) == sorted(b"one-%d" % i for i in range(4))
        assert c.partition_state(TXN, 0)["isr"] == [1]


def test_cluster_start_sizes_the_transaction_state_to_the_brokers():
    from pyspark_logsource.broker.cluster.local import cluster_defaults

    got = [
        (
            cluster_defaults(n)["transaction.state.log.replication.factor"],
            cluster_defaults(n)["transaction.state.log.min.isr"],
        )
        for n in (1, 2, 3, 5)
    ]
    assert got == [("1", "1"), ("2", "1"), ("3", "2"), ("3", "2")]


def test_a_repeated_marker_appends_nothing_and_a_stale_commit_closes_nothing(tmp_path):
    """What a coordinator's re-sent markers do at the leader (WriteTxnMarkers): only the first counts.
    And FindCoordinator for transactions on a single broker."""
    with broker_process(tmp_path) as b, closing(NetworkClient(b.bootstrap)) as net, Admin(b.bootstrap) as a:
        a.create_topic("t", partitions=1)

        def markers(pid: int, epoch: int, commit: bool) -> dict:
            resp = net.request(tm.WriteTxnMarkersRequest([tm.TxnMarker(pid, epoch, commit, [("t", 0)])]))
            return resp.markers[0].errors

        def ends() -> tuple[int, int]:
            return (
                a.list_offsets([("t", 0)], "latest")[("t", 0)],
                a.list_offsets([("t", 0)], "latest", read_committed=True)[("t", 0)],
            )

        p = TransactionalProducer(b.bootstrap, acks=-1)
        pid, epoch = p.producer_id_and_epoch()
        for v in (b"a", b"b"):
            p.send("t", v, partition=0)
        p.flush()
        p.close()
        assert ends() == (2, 0)  # staged
        assert markers(pid, epoch - 1, True) == {("t", 0): 0}  # a stale epoch's COMMIT: nothing appended
        assert ends() == (2, 0)
        assert markers(pid, epoch, True) == {("t", 0): 0}
        assert ends() == (3, 3)  # the COMMIT marker
        assert markers(pid, epoch, True) == {("t", 0): 0}  # re-sent by a new coordinator: nothing appended
        assert markers(pid, epoch + 1, False) == {("t", 0): 0}  # a loser's fencing ABORT: appended once
        assert markers(pid, epoch + 1, False) == {("t", 0): 0}
        assert ends() == (4, 4)
        assert sorted(_read_committed_partition(b.bootstrap)) == [b"a", b"b"]

        # FindCoordinator: a single broker coordinates transactions; bad keys are refused
        assert net.request(FindCoordinatorRequest("w", key_type=1)).port == int(b.bootstrap.rsplit(":", 1)[1])
        with pytest.raises(InvalidRequest, match="transactional id is empty"):
            net.request(FindCoordinatorRequest("", key_type=1))
        with pytest.raises(InvalidRequest, match="unknown coordinator key type 2"):
            net.request(FindCoordinatorRequest("w", key_type=2))


def _read_committed_partition(bs: str) -> list[bytes]:
    with Consumer(bs) as c:
        c.assign([("t", 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(got) < 2:
            got += [m.value for m in c.poll(0.2)]
        return got + [m.value for m in c.poll(0.3)]


def test_a_resigned_coordinator_writes_no_marker(tmp_path):
    """A coordinator that stopped leading ``__transaction_state-0`` (``active`` False: on_resigned) while its
    timer's expiry or a request waited for a write's lock aborts nothing: its ABORT could close data its
    successor has just committed. It answers NotCoordinator (the client asks FindCoordinator again)."""
    import asyncio

    from pyspark_logsource import format as fmt
    from pyspark_logsource.broker.builder import open_state
    from pyspark_logsource.broker.config import BrokerConfig
    from pyspark_logsource.broker.state import BrokerState
    from pyspark_logsource.broker.txn.coordinator import TXN_TOPIC, TxnCoordinator
    from pyspark_logsource.format.control import set_transactional

    state = BrokerState(BrokerConfig(log_dirs=[tmp_path]))
    open_state(state)
    try:
        state.logs.create_topic("t", 1)
        state.logs.create_topic(TXN_TOPIC, 1)
        lg = state.logs.get_log("t", 0)
        staged = bytearray(fmt.encode([b"a"], producer_id=7, producer_epoch=0, base_sequence=0))
        set_transactional(staged)
        lg.append(staged, 0)
        assert 7 in lg.txns.open
        c = TxnCoordinator(state)

        async def run() -> None:
            await c.register("w", 7, 0, {("t", 0)}, 1000)
            c.active = False  # on_resigned, while the expiry below waits for the write's lock
            assert await c.expire(now_ms=int(time.time() * 1000) + 60_000) == 0
            with pytest.raises(NotCoordinator):
                await c.abort("w", {7: (0, {("t", 0): 1})})

        asyncio.run(run())
        assert 7 in lg.txns.open and lg.log_end_offset == 1  # no ABORT marker: still staged
    finally:
        state.close()


@pytest.mark.cluster
def test_a_fenced_coordinator_answers_not_coordinator(zk_connect, tmp_path):
    """A coordinator that lost its ZooKeeper session refuses writes until it registered again; its answer is
    NotCoordinator (which StagedTxns retries after FindCoordinator), not the log's NotLeaderOrFollower,
    which failed the Spark write. The broker runs in this process, fenced as a session loss fences it."""
    with Cluster(zk_connect, tmp_path, brokers=1, thread_brokers={1}) as c:
        c.create_topic("t", partitions=3, replication_factor=1)
        with StagedTxns(c.bootstrap) as txns, closing(NetworkClient(c.bootstrap)) as net:
            txns.register("w", 1000, 0, [("t", 0)], 60000)  # creates the topic, loads the coordinator
            state = c.brokers[1]._broker.state
            member = state.cluster
            member.loop.call_soon_threadsafe(member._fence, True, "lost its ZooKeeper session (test)")
            wait_for(lambda: state.fenced, 10, what="the broker fenced")
            reg = tm.StagedTxnsRequest(
                tm.REGISTER, "w", 0, 60000, [tm.StagedProducer(1001, 0, {("t", 1): -1})]
            )
            with pytest.raises(NotCoordinator):
                net.request(reg)
            member.loop.call_soon_threadsafe(member._fence, False, "registered again (test)")
            txns.register("w", 1001, 0, [("t", 1)], 60000)
