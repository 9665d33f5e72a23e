"""ZooKeeper faults: a leader's session expires; ZooKeeper itself is restarted.

Real ZooKeeper (the session's server), real broker processes. To expire a session the test
does what kazoo's own test harness does (``KazooTestHarness.expire_session``): a second client
attaches to the broker's session with its id and password and closes it. The broker whose
session is expired therefore runs in a thread of the test process (it is still a whole broker
on its own socket), so the test can read its session id and password; the others are processes.
"""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient, KazooState
from support.brokers import WireClient
from support.cluster import Cluster, expire_session, wait_for

from pyspark_logsource.client import Consumer, Producer
from pyspark_logsource.errors import NotLeaderOrFollower
from pyspark_logsource.format import batch as fmt

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(240)]


def _kazoo(cluster: Cluster, broker_id: int) -> KazooClient:
    """The KazooClient of an in-thread broker."""
    state = cluster.brokers[broker_id]._broker.state
    return state.zk.client


def _produce_to(broker_bootstrap: str, topic: str, partition: int, value: bytes) -> int:
    """One acks=all produce straight to one broker; returns the partition's error code."""
    with WireClient(broker_bootstrap, timeout=15) as w:
        resp = w.produce(topic, partition, fmt.encode([value]), acks=-1)
    return resp.error_code


def test_leader_session_expires(zk_connect, tmp_path):
    with Cluster(zk_connect, tmp_path, brokers=3, thread_brokers={1}) as c:
        c.create_topic("t", 3, 3, {"min.insync.replicas": "2"})
        c.wait_full_isr("t")
        # the partition broker 1 leads (leaders are spread evenly: each broker leads one)
        p = wait_for(
            lambda: [q for q, lead in c.leaders("t").items() if lead == 1], what="a partition led by 1"
        )[0]
        old_epoch = c.partition_state("t", p)["leader_epoch"]
        with Producer(c.bootstrap, acks="all") as prod:
            for i in range(20):
                prod.send("t", b"before-%d" % i, partition=p)
            prod.flush(30)
        old = c.brokers[1].bootstrap
        assert _produce_to(old, "t", p, b"direct-before") == 0

        expire_session(zk_connect, _kazoo(c, 1))

        new = c.wait_leader("t", p, not_in={1})
        state = c.partition_state("t", p)
        assert state["leader_epoch"] > old_epoch
        assert new in (2, 3)
        # the old leader no longer takes writes for the partition: refused as not the leader
        # (Kafka's answer). Any zombie write it did acknowledge must survive the failover.
        zombies: dict[bytes, int] = {}

        def refused() -> bool:
            value = b"zombie-%d" % len(zombies)
            zombies[value] = _produce_to(old, "t", p, value)
            return zombies[value] == NotLeaderOrFollower.code

        wait_for(refused, 30, what="the old leader refusing writes with NotLeaderOrFollower")
        # broker 1 comes back with a new session: registered again, a follower catching up
        c.wait_registered([1])
        with Producer(c.bootstrap, acks="all") as prod:
            futs = [prod.send("t", b"after-%d" % i, partition=p) for i in range(20)]
            prod.flush(60)
            assert all(f.result(0)[0] == p for f in futs)
        c.wait_full_isr("t")
        hws = c.assert_replicas_identical("t")
        with Consumer(c.bootstrap) as cons:
            cons.assign([("t", p)])
            got = []
            deadline = time.monotonic() + 30
            while len(got) < hws[p] and time.monotonic() < deadline:
                got += cons.poll(timeout_ms=200)
        values = [m.value for m in got]
        assert [v for v in values if v.startswith(b"before-")] == [b"before-%d" % i for i in range(20)]
        assert [v for v in values if v.startswith(b"after-")] == [b"after-%d" % i for i in range(20)]
        assert b"direct-before" in values
        acked_zombies = {v for v, code in zombies.items() if code == 0}
        assert acked_zombies <= set(values), "a write the old leader acknowledged was lost"


def test_zookeeper_restart(zookeeper, zk_connect, tmp_path):
    with Cluster(zk_connect, tmp_path, brokers=3) as c:
        c.create_topic("z", 3, 3, {"min.insync.replicas": "2"})
        c.wait_full_isr("z")
        leaders = c.leaders("z")
        controller = c.controller()
        bootstrap = c.bootstrap
        with Producer(bootstrap, acks="all") as prod:
            for i in range(30):
                prod.send("z", b"up-%d" % i, partition=i % 3)
            prod.flush(30)

        zookeeper.kill()  # ZooKeeper crashes; its dataDir stays
        try:
            down_since = time.monotonic()
            # brokers keep serving existing partitions with the roles they have: acks=all writes
            # (the ISR is whole) and reads go on while ZooKeeper is away
            with Producer(bootstrap, acks="all", delivery_timeout_ms=20000) as prod:
                futs = [prod.send("z", b"down-%d" % i, partition=i % 3) for i in range(30)]
                prod.flush(20)
                assert all(f.result(0)[1] >= 10 for f in futs)
            with Consumer(bootstrap) as cons:
                cons.assign([("z", q) for q in range(3)])
                got = []
                deadline = time.monotonic() + 20
                while len(got) < 60 and time.monotonic() < deadline:
                    got += cons.poll(timeout_ms=200)
            assert sorted(m.value for m in got) == sorted(
                [b"up-%d" % i for i in range(30)] + [b"down-%d" % i for i in range(30)]
            )
            # down for longer than the brokers' session timeout (2 s)
            time.sleep(max(0.0, 3.0 - (time.monotonic() - down_since)))
        finally:
            zookeeper.start()  # same port, same data

        # registrations recover (the sessions survive a server restart, or the brokers register anew)
        c.wait_registered([1, 2, 3], timeout=30)
        wait_for(lambda: c.controller() is not None, 30, what="a controller after the restart")
        assert c.controller() == controller or c.controller() in (1, 2, 3)
        c.wait_full_isr("z")
        assert set(c.leaders("z")) == set(leaders)
        # and the cluster does its ZooKeeper work again: a new topic, a failover
        c.create_topic("z2", 3, 3, {"min.insync.replicas": "2"})
        c.wait_full_isr("z2")
        victim = c.leader("z", 0)
        c.kill(victim)
        c.wait_leader("z", 0, not_in={victim})
        with Producer(c.bootstrap, acks="all") as prod:
            f = prod.send("z", b"after", partition=0)
            prod.flush(60)
            assert f.result(0)[0] == 0
        c.start(victim)
        c.wait_full_isr("z")
        c.assert_replicas_identical("z")


def test_zookeeper_server_launcher(tmp_path):
    """The launcher the fixture and `logsource cluster` use: a crash and a restart keep the port and the data."""
    from pyspark_logsource.broker.cluster.zookeeper import ZooKeeperServer, four_letter_word
    from pyspark_logsource.errors import ConfigError

    with pytest.raises(ConfigError, match="ensure-zookeeper"):
        ZooKeeperServer(tmp_path / "nojar", jar=str(tmp_path / "missing.jar")).start()
    with ZooKeeperServer(tmp_path / "zk", tick_time_ms=100, fsync=False) as zk:
        assert "Mode: standalone" in four_letter_word(zk.host, zk.port, "srvr")
        port = zk.port
        client = KazooClient(zk.connect, timeout=4.0)
        client.start(timeout=15)
        try:
            client.create("/kept", b"v", makepath=True)
            zk.kill()
            assert not zk.running and four_letter_word(zk.host, port, "ruok", timeout=0.2) == ""
            zk.start()
            assert zk.port == port
            wait_for(lambda: client.state == KazooState.CONNECTED, 15, what="the client reconnected")
            assert client.get("/kept")[0] == b"v"  # the data survives (the session may or may not)
        finally:
            client.stop()
            client.close()
    assert not zk.running
