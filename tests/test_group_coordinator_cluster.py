"""The group coordinator in a cluster: the leader of the group's replicated ``__consumer_offsets`` partition.

Kafka's design: ``__consumer_offsets`` is an internal topic with ``offsets.topic.replication.factor``
replicas, a group's coordinator leads the partition its id hashes to, and committed offsets and
memberships are written there and count once the ISR has them. So a commit survives the kill -9 of
the coordinator: a new leader is elected from the ISR, FindCoordinator names it, the offsets are all
there, and consumers go on from them (ours rejoin the group at the new coordinator; a confluent-kafka
consumer starting afterwards resumes from the last commit).
"""

from __future__ import annotations

import time

import pytest
from support.cluster import Cluster, wait_for

from pyspark_logsource.broker.internal_topics import partition_for
from pyspark_logsource.client import Admin, Consumer, Producer
from pyspark_logsource.client.network import NetworkClient
from pyspark_logsource.errors import CoordinatorNotAvailable, NotCoordinator, code_of
from pyspark_logsource.protocol import group_messages as g
from pyspark_logsource.protocol.coordinator_messages import (
    FindCoordinatorRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

OFFSETS = "__consumer_offsets"


def _read(cons: Consumer, n: int, timeout: float = 60) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got.extend(cons.poll(500))
    return got


def _coordinator(client: NetworkClient, group: str) -> int:
    """FindCoordinator's answer, retried while there is none (CoordinatorNotAvailable)."""
    return wait_for(lambda: client.coordinator(group, refresh=True), what=f"a coordinator of {group}")


def test_committed_offsets_survive_the_kill_of_the_coordinator(zk_connect, tmp_path):
    # min.insync.replicas=2 for __consumer_offsets too: commits need two copies
    with Cluster(zk_connect, tmp_path, brokers=3, config={"min.insync.replicas": "2"}) as c:
        c.create_topic("t", partitions=2, replication_factor=3, config={"min.insync.replicas": "2"})
        c.wait_full_isr("t")
        with Producer(c.bootstrap, acks="all") as p:
            for i in range(100):
                p.send("t", f"{i % 2}:{i // 2}", partition=i % 2)  # value: partition:offset
            p.flush(30)
        admin = Admin(c.bootstrap)
        try:
            coordinator = _coordinator(admin._client, "g1")
            # the offsets topic was made on that first FindCoordinator, with three replicas
            assert c.zk.exists(f"/brokers/topics/{OFFSETS}")
            c.wait_full_isr(OFFSETS)
            assert coordinator == c.leader(OFFSETS, 0)

            # a group request to a broker that does not lead the group's partition: NotCoordinator
            other = next(b for b in c.brokers if b != coordinator)
            admin._client.refresh_metadata(None)
            with pytest.raises(NotCoordinator):
                admin._client.request(OffsetFetchRequest("g1", [("t", 0)]), other)
            with pytest.raises(NotCoordinator):
                admin._client.request(g.HeartbeatRequest("g1", 1, "m"), other)

            # a member of the group reads part of the data and commits; it stays in the group across the kill
            cons = Consumer(c.bootstrap, group_id="g1", enable_auto_commit=False, session_timeout_ms=6000)
            try:
                cons.subscribe(["t"])
                got = _read(cons, 100)
                assert len(got) == 100
                cons.commit({("t", 0): 30, ("t", 1): 20})
                assert admin.group_offsets("g1") == {("t", 0): 30, ("t", 1): 20}

                c.kill(coordinator)  # kill -9; returns once ZooKeeper expired its session
                new = c.wait_leader(OFFSETS, 0, not_in={coordinator})
                assert wait_for(
                    lambda: _coordinator(admin._client, "g1") == new,
                    what="FindCoordinator naming the new leader",
                )
                # every commit is there (it was on the ISR before it was answered)
                assert wait_for(lambda: admin.group_offsets("g1")) == {("t", 0): 30, ("t", 1): 20}
                # the member rejoins at the new coordinator and commits there
                cons.commit({("t", 0): 40, ("t", 1): 35})
                assert admin.group_offsets("g1") == {("t", 0): 40, ("t", 1): 35}
                assert admin.describe_group("g1").state in (
                    "Stable",
                    "PreparingRebalance",
                    "CompletingRebalance",
                )
            finally:
                cons.close()
        finally:
            admin.close()

        # a new consumer of the group resumes from the last commit: nothing re-read, nothing skipped
        with Consumer(c.bootstrap, group_id="g1", enable_auto_commit=False) as cons:
            cons.subscribe(["t"])
            got = _read(cons, 25)
            time.sleep(0.5)
            got.extend(cons.poll(200))
        want = {f"0:{o}" for o in range(40, 50)} | {f"1:{o}" for o in range(35, 50)}
        values = [m.value.decode() if isinstance(m.value, bytes) else m.value for m in got]
        assert sorted(values) == sorted(want)

        # a Kafka client finds the same coordinator and resumes from the same place
        from confluent_kafka import Consumer as KConsumer

        k = KConsumer(
            {
                "bootstrap.servers": c.bootstrap,
                "group.id": "g1",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
            }
        )
        try:
            k.subscribe(["t"])
            seen: list[str] = []
            deadline = time.monotonic() + 60
            while len(seen) < 25 and time.monotonic() < deadline:
                m = k.poll(0.5)
                if m is not None and m.error() is None:
                    seen.append(m.value().decode())
            assert sorted(seen) == sorted(want)
        finally:
            k.close()

        # a commit that cannot reach min.insync.replicas copies is refused (the client retries elsewhere) and
        # never shows: the other surviving broker dies, the coordinator is alone in the ISR
        c.kill(next(b for b in c.running() if b != new))
        wait_for(
            lambda: c.partition_state(OFFSETS, 0)["isr"] == [new], what="the ISR shrinking to the coordinator"
        )
        client = NetworkClient(c.brokers[new].bootstrap, request_timeout_ms=10000)
        try:
            client.refresh_metadata(None)
            resp = client.request(OffsetCommitRequest("g1", [OffsetCommitPartition("t", 0, 49)]), new)
            assert [p.error_code for p in resp.partitions] == [CoordinatorNotAvailable.code]
            fetched = client.request(OffsetFetchRequest("g1", [("t", 0)]), new)
            assert [p.offset for p in fetched.partitions] == [40]
        finally:
            client.close()


def test_no_coordinator_while_fewer_brokers_are_live_than_the_replication_factor(zk_connect, tmp_path):
    # Kafka's rule: the offsets topic is never created under-replicated; clients are told to retry
    with Cluster(zk_connect, tmp_path, brokers=2, config={"offsets.topic.replication.factor": "3"}) as c:
        client = NetworkClient(c.bootstrap, request_timeout_ms=5000)
        try:
            try:
                resp = client.request(FindCoordinatorRequest("g"))
                code = resp.error_code
            except CoordinatorNotAvailable as e:
                code = code_of(e)
            assert code == CoordinatorNotAvailable.code
        finally:
            client.close()
        assert not c.zk.exists(f"/brokers/topics/{OFFSETS}")


def test_a_two_broker_cluster_spreads_groups_over_the_offsets_partitions(zk_connect, tmp_path):
    # the harness (as `logsource cluster start --brokers 2`) sets offsets.topic.replication.factor to 2
    with Cluster(zk_connect, tmp_path, brokers=2, config={"offsets.topic.num.partitions": "4"}) as c:
        c.create_topic("t", partitions=1, replication_factor=2)
        groups = [f"g{i}" for i in range(6)]
        for i, group in enumerate(groups):
            with Consumer(c.bootstrap, group_id=group, enable_auto_commit=False) as cons:
                cons.assign([("t", 0)])
                cons.commit({("t", 0): i})
                assert cons.committed(("t", 0)) == i
        c.wait_full_isr(OFFSETS)
        assert all(sorted(c.partition_state(OFFSETS, p)["isr"]) == [1, 2] for p in range(4))
        with Admin(c.bootstrap) as admin:
            # each group's coordinator leads its partition; both brokers coordinate some (ListGroups asks each)
            coordinators = {gr: admin._client.coordinator(gr, refresh=True) for gr in groups}
            assert coordinators == {gr: c.leader(OFFSETS, partition_for(gr, 4)) for gr in groups}
            assert len(set(coordinators.values())) == 2
            assert [x.group_id for x in admin.list_groups()] == groups
            assert [admin.group_offsets(gr) for gr in groups] == [{("t", 0): i} for i in range(6)]


def test_a_one_broker_cluster_keeps_its_groups_across_a_kill(zk_connect, tmp_path):
    # as `logsource cluster start --brokers 1`: one copy; the broker leads the partition again on restart
    with Cluster(zk_connect, tmp_path, brokers=1) as c:
        c.create_topic("t", partitions=1, replication_factor=1)
        with Consumer(c.bootstrap, group_id="solo", enable_auto_commit=False) as cons:
            cons.assign([("t", 0)])
            cons.commit({("t", 0): 3})
        c.kill(1)
        c.start(1)
        with Admin(c.bootstrap) as admin:
            assert wait_for(lambda: admin.group_offsets("solo")) == {("t", 0): 3}


def test_cluster_start_sizes_the_offsets_topic_to_the_brokers():
    from pyspark_logsource.broker.cluster.local import cluster_defaults

    assert [cluster_defaults(n)["offsets.topic.replication.factor"] for n in (1, 2, 3, 5)] == [
        "1",
        "2",
        "3",
        "3",
    ]
