"""Kafka's replication_test matrix, against real broker processes and a real ZooKeeper.

3 brokers; a topic with 3 partitions, RF=3 and min.insync.replicas=2; an idempotent acks=all
producer and a consumer run in the background throughout. Each case fails a broker picked by
role: {clean shutdown (SIGTERM), hard kill (kill -9)} x {shut down once, 5 bounces} x {the leader
of partition 0, the controller}. "Once" leaves the broker down while traffic continues (two
copies still satisfy min.insync.replicas); a bounce restarts it and chases the role again, as
Kafka's clean_bounce/hard_bounce do. Afterwards every acknowledged message is consumed at the
offset it was acknowledged with, no message twice, offsets dense; and once every replica has
caught up, each holds the leader's bytes below the high watermark.

The cases share one cluster (each on its own topic, every broker running again before the
next); the whole matrix takes about 2.5-3 minutes on 2 busy cores.
"""

from __future__ import annotations

import itertools
import time

import pytest
from support.cluster import Cluster, Traffic, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.replication_matrix, pytest.mark.timeout(300)]

PARTITIONS = 3
#: seconds of traffic before the first failure and after each one
TRAFFIC_SECONDS = 0.5


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    from kazoo.client import KazooClient

    if not zookeeper.running:
        zookeeper.start()
    chroot = f"/replication-matrix-{int(time.time() * 1000)}"
    zk = KazooClient(zookeeper.connect)
    zk.start(timeout=15)
    zk.ensure_path(chroot)
    zk.stop()
    zk.close()
    with Cluster(zookeeper.connect + chroot, tmp_path_factory.mktemp("matrix"), brokers=3) as c:
        yield c


def _victim(c: Cluster, topic: str, target: str) -> int:
    if target == "controller":
        return wait_for(c.controller, what="a controller")
    return c.wait_leader(topic, 0)


CASES = list(itertools.product(("clean", "hard"), ("shutdown", "bounce"), ("leader", "controller")))


@pytest.mark.parametrize("mode,failure,target", CASES, ids=["-".join(c) for c in CASES])
def test_replication(cluster: Cluster, mode: str, failure: str, target: str) -> None:
    c = cluster
    for bid in c.brokers:  # a previous case may have left one down
        if not c.brokers[bid].running:
            c.start(bid)
    topic = f"rep-{mode}-{failure}-{target}"
    c.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    c.wait_full_isr(topic)
    traffic = Traffic(c.bootstrap, topic, PARTITIONS).start()
    downed: list[int] = []
    try:
        traffic.wait_acked(50)
        time.sleep(TRAFFIC_SECONDS)
        rounds = 1 if failure == "shutdown" else 5
        for _ in range(rounds):
            victim = _victim(c, topic, target)
            before = traffic.acked_count()
            if mode == "clean":
                c.stop(victim)
            else:
                c.kill(victim)  # waits until ZooKeeper expired its session
            if target == "leader":
                c.wait_leader(topic, 0, not_in={victim})
            else:
                wait_for(lambda v=victim: c.controller() not in (None, v), 30, what="a new controller")
            if failure == "shutdown":
                downed.append(victim)
            else:
                c.start(victim)
                c.wait_full_isr(topic, min_size=2)
            # the survivors keep acknowledging acks=all writes
            traffic.wait_acked(20, timeout=60)
            assert traffic.acked_count() > before
            time.sleep(TRAFFIC_SECONDS)
        traffic.stop_producing()
        for bid in downed:
            c.start(bid)
        c.wait_full_isr(topic)
        hws = c.assert_replicas_identical(topic)
        traffic.wait_consumed(hws)
    finally:
        traffic.close()
    print(
        f"{topic}: sent {traffic.sent}, acknowledged {traffic.acked_count()}, not acknowledged {len(traffic.failed)}, "
        f"high watermarks {hws}"
    )
    traffic.check()
    assert traffic.acked_count() > 100, f"only {traffic.acked_count()} messages acknowledged"
    assert sum(hws.values()) >= traffic.acked_count()
