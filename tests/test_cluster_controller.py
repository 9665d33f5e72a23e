"""The coordination modules against a real ZooKeeper: controller election and failover, epoch fencing of
a stale controller, replica assignment, leader election from the ISR (no unclean election by default),
topic deletion, and a broker fencing itself when its session expires.

Controllers here run without brokers (a ZkClient, a registry and a Controller per "broker"), which keeps
them fast; the broker-level tests run three in-thread brokers. Sessions are expired as kazoo's own test
harness does: a second client attaches to the session with its id and password and closes it.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from support.brokers import WireClient
from support.cluster import expire_session, wait_for

from pyspark_logsource.broker.cluster import paths
from pyspark_logsource.broker.cluster.controller import Controller, assign_replicas, elect_leader, next_state
from pyspark_logsource.broker.cluster.paths import LeaderAndIsr
from pyspark_logsource.broker.cluster.registry import BrokerRegistry
from pyspark_logsource.broker.cluster.zk import ZkClient
from pyspark_logsource.broker.config import BrokerConfig
from pyspark_logsource.broker.embedded import EmbeddedBroker
from pyspark_logsource.broker.groups.offsets import OFFSETS_TOPIC
from pyspark_logsource.broker.internal_topics import partition_for
from pyspark_logsource.errors import (
    BrokerIdConflict,
    ConfigError,
    CoordinatorLoadInProgress,
    InvalidReplicationFactor,
    LeaderNotAvailable,
    NetworkError,
    NotController,
    NotCoordinator,
    NotLeaderOrFollower,
    StaleControllerEpoch,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from pyspark_logsource.format import batch as fmt
from pyspark_logsource.protocol import (
    RESOURCE_TOPIC,
    ConfigResource,
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

SESSION_MS = 2000


# ------------------------------------------------------------------ pure functions


def test_assignment_spreads_leaders_and_replicas_evenly():
    for brokers, partitions, rf in (
        ([1, 2, 3], 3, 3),
        ([1, 2, 3], 6, 2),
        ([3, 5, 7, 9, 11], 10, 3),
        ([4], 4, 1),
    ):
        plan = assign_replicas(brokers, partitions, rf)
        assert sorted(plan) == list(range(partitions))
        assert all(len(r) == rf and len(set(r)) == rf and set(r) <= set(brokers) for r in plan.values())
        leaders = Counter(r[0] for r in plan.values())
        assert set(leaders.values()) == {partitions // len(brokers)}, plan  # every broker leads equally
        held = Counter(b for r in plan.values() for b in r)
        assert set(held.values()) == {partitions * rf // len(brokers)}, plan
    # Kafka's layout with a fixed start: leaders round-robin, followers shifted
    assert assign_replicas([1, 2, 3], 3, 3, start_index=0) == {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
    with pytest.raises(InvalidReplicationFactor, match="larger than the 2 available brokers"):
        assign_replicas([1, 2], 1, 3)
    with pytest.raises(InvalidReplicationFactor):
        assign_replicas([1, 2], 1, 0)


def test_leader_election_picks_the_first_live_isr_replica_and_is_never_unclean_by_default():
    s = LeaderAndIsr(leader=1, leader_epoch=4, isr=[1, 3], controller_epoch=1)
    # the leader is alive: nothing to elect
    assert elect_leader([1, 2, 3], s, {1, 2, 3}, unclean=False) is None
    # the leader died: the first replica in assignment order that is alive and in sync; epoch + 1
    assert elect_leader([1, 2, 3], s, {2, 3}, unclean=False) == LeaderAndIsr(3, 5, [3], 0)
    # no in-sync replica alive: 2 is alive but out of sync, so the partition goes leaderless (leader -1)
    # and keeps its ISR, so the last in-sync replica leads again when it returns
    assert elect_leader([1, 2, 3], LeaderAndIsr(1, 4, [1], 1), {2, 3}, unclean=False) == LeaderAndIsr(
        -1, 5, [1], 0
    )
    assert elect_leader([1, 2, 3], LeaderAndIsr(-1, 5, [1], 1), {2, 3}, unclean=False) is None
    assert elect_leader([1, 2, 3], LeaderAndIsr(-1, 5, [1], 1), {1, 2}, unclean=False) == LeaderAndIsr(
        1, 6, [1], 0
    )
    # unclean.leader.election.enable=true: a live out-of-sync replica leads alone
    assert elect_leader([1, 2, 3], LeaderAndIsr(1, 4, [1], 1), {2, 3}, unclean=True) == LeaderAndIsr(
        2, 5, [2], 0
    )


def test_a_leaderless_partition_keeps_its_last_in_sync_replica_on_every_later_look():
    # the controller looks at every partition again on each broker or topic event; a partition left
    # leaderless with its dead last in-sync replica keeps that replica in its ISR (as Kafka's controller
    # does), else it could never have a clean leader again
    gone = elect_leader([1, 2], LeaderAndIsr(1, 4, [1], 1), {2}, unclean=False)
    assert gone == LeaderAndIsr(-1, 5, [1], 0)
    assert next_state([1, 2], gone, {2}, unclean=False) is None
    assert next_state([1, 2], gone, {2, 3}, unclean=False) is None
    assert next_state([1, 2, 3], LeaderAndIsr(-1, 5, [1, 3], 1), {2}, unclean=False) is None
    assert next_state([1, 2], gone, {1, 2}, unclean=False) == LeaderAndIsr(1, 6, [1], 0)
    # a live leader: dead followers leave the ISR, the leader stays in it
    assert next_state([1, 2, 3], LeaderAndIsr(1, 4, [1, 2, 3], 1), {1, 3}, unclean=False) == LeaderAndIsr(
        1, 4, [1, 3], 0
    )
    assert next_state([1, 2, 3], LeaderAndIsr(1, 4, [1, 3], 1), {1, 3}, unclean=False) is None


def test_topic_ids_are_kafkas_base64_uuids_never_reserved_nor_starting_with_a_dash(monkeypatch):
    import uuid as uuid_mod

    ids = {paths.new_topic_id() for _ in range(2000)}
    assert len(ids) == 2000 and all(len(i) == 22 and not i.startswith("-") for i in ids)
    # the draws Kafka's Uuid.randomUuid() refuses (zero, the metadata topic's, a leading "-") are drawn again
    draws = iter([bytes(16), bytes(15) + b"\x01", b"\xf8" + bytes(15), b"\x12" * 16])
    monkeypatch.setattr(paths.uuid, "uuid4", lambda: uuid_mod.UUID(bytes=next(draws)))
    assert paths.new_topic_id() == "EhISEhISEhISEhISEhISEg"


def test_cluster_config_keys_are_read_and_validated():
    c = BrokerConfig.from_properties(
        {
            "zookeeper.connect": "127.0.0.1:2181,127.0.0.2:2181/kafka",
            "default.replication.factor": "3",
            "unclean.leader.election.enable": "true",
            "replica.lag.time.max.ms": "1500",
            "zookeeper.session.timeout.ms": "3000",
            "min.insync.replicas": "2",
        }
    )
    assert c.cluster_mode and c.zookeeper_connect.endswith("/kafka")
    assert (c.default_replication_factor, c.unclean_leader_election_enable, c.replica_lag_time_max_ms) == (
        3,
        True,
        1500,
    )
    assert c.zookeeper_connection_timeout_ms == 3000  # defaults to the session timeout, as in Kafka
    assert c.log.min_insync_replicas == 2
    assert (c.auto_leader_rebalance_enable, c.leader_imbalance_check_interval_seconds) == (True, 300)
    single = BrokerConfig.from_properties({})
    assert not single.cluster_mode and single.unclean_leader_election_enable is False
    bad = [
        ({"zookeeper.connect": "localhost"}, "host:port"),
        ({"zookeeper.connect": "h:2181/a/"}, "chroot"),
        ({"default.replication.factor": "3"}, "single broker"),
        ({"unclean.leader.election.enable": "yes"}, "true or false"),
        ({"zookeeper.connect": "h:1", "zookeeper.session.timeout.ms": "x"}, "integer"),
        ({"replica.fetch.wait.max.ms": "800", "replica.lag.time.max.ms": "500"}, "less than"),
    ]
    for props, words in bad:
        with pytest.raises(ConfigError, match=words):
            BrokerConfig.from_properties(props)


# ------------------------------------------------------------------ controllers without brokers


class Node:
    """One 'broker' for the controller: its session, registration and controller, nothing else."""

    def __init__(
        self, zk_connect: str, broker_id: int, unclean: bool = False, rebalance_s: float | None = None
    ) -> None:
        self.zk = ZkClient(zk_connect, SESSION_MS)
        self.zk.start()
        for p in paths.PERSISTENT_PATHS:
            self.zk.ensure_path(p)
        self.registry = BrokerRegistry(self.zk, broker_id)
        self.registry.watch()
        self.registry.register("127.0.0.1", 9000 + broker_id)
        self.controller = Controller(
            self.zk, self.registry, broker_id, unclean, rebalance_interval_s=rebalance_s
        )
        self.controller.start()

    def close(self) -> None:
        self.controller.stop()
        self.zk.stop()


def _state(zk: KazooClient, topic: str, p: int) -> tuple[dict, int]:
    data, stat = zk.get(paths.partition_state_path(topic, p))
    return json.loads(data), stat.version


@pytest.fixture
def observer(zk_connect):
    zk = KazooClient(zk_connect, timeout=10.0)
    zk.start(timeout=15)
    yield zk
    zk.stop()
    zk.close()


def _controller(zk: KazooClient) -> int | None:
    try:
        return json.loads(zk.get(paths.CONTROLLER)[0])["brokerid"]
    except Exception:
        return None


@contextmanager
def _controlled_nodes(
    zk_connect: str, observer: KazooClient, ids: tuple[int, ...] = (1, 2, 3), **kw: object
) -> Iterator[tuple[dict[int, Node], int, Controller]]:
    """Nodes ``ids`` with an active controller that sees them all: (nodes, its id, its controller); closes
    every node still in ``nodes`` at the end (a test may pop and add nodes)."""
    nodes = {b: Node(zk_connect, b, **kw) for b in ids}
    try:
        cid = wait_for(lambda: _controller(observer), what="a controller")
        ctl = nodes[cid].controller
        wait_for(
            lambda: ctl.active and len(ctl.registry.live()) == len(ids),
            what="controller active, brokers seen",
        )
        yield nodes, cid, ctl
    finally:
        for n in nodes.values():
            n.close()


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_controller_election_failover_and_a_stale_controller_cannot_write(zk_connect, observer):
    nodes = {b: Node(zk_connect, b) for b in (1, 2, 3)}
    try:
        first = wait_for(lambda: _controller(observer), what="a controller")
        c1 = nodes[first].controller
        wait_for(lambda: c1.active and len(c1.registry.live()) == 3, what="the winner active, brokers seen")
        assert sum(n.controller.active for n in nodes.values()) == 1
        assert int(observer.get(paths.CONTROLLER_EPOCH)[0]) == c1.epoch
        # only the controller creates topics; with leaders spread over the brokers
        other = next(b for b in nodes if b != first)
        with pytest.raises(NotController):
            nodes[other].controller.create_topic("t", 3, 3, {})
        plan = c1.create_topic("t", 3, 3, {"retention.ms": "1000"})
        assert sorted(r[0] for r in plan.values()) == [1, 2, 3]
        assert json.loads(observer.get(paths.topic_config_path("t"))[0]) == {
            "version": 1,
            "config": {"retention.ms": "1000"},
        }
        with pytest.raises(TopicAlreadyExists):
            c1.create_topic("t", 1, 1, {})
        for p, replicas in plan.items():
            s, _ = _state(observer, "t", p)
            assert (s["leader"], s["isr"], s["leader_epoch"], s["controller_epoch"]) == (
                replicas[0],
                replicas,
                0,
                c1.epoch,
            )

        # the controller's session expires: another broker is elected with the next epoch
        old_epoch = c1.epoch
        expire_session(zk_connect, nodes[first].zk.client)
        second = wait_for(
            lambda: (c := _controller(observer)) not in (None, first) and c, what="a new controller"
        )
        c2 = nodes[second].controller
        wait_for(lambda: c2.active, what="the new controller active")
        assert c2.epoch == old_epoch + 1 == int(observer.get(paths.CONTROLLER_EPOCH)[0])

        # the old controller, had it not noticed yet, cannot write: its multi-op checks the epoch's version
        # (a partition the expired broker does not lead: the new controller may drop that broker from its
        # ISR meanwhile, with its own write, but elects no leader there)
        p0 = next(p for p, r in plan.items() if r[0] != first)
        before = _state(observer, "t", p0)
        c1.active = True  # as if it still believed it was the controller
        with pytest.raises(StaleControllerEpoch):
            c1._write_state("t", p0, LeaderAndIsr(-1, 99, [first], 0), before[1])
        after = _state(observer, "t", p0)
        assert not c1.active and after[0]["leader"] == before[0]["leader"] != -1
        assert after[0]["leader_epoch"] == before[0]["leader_epoch"] != 99
        assert after == before or after[0]["controller_epoch"] == c2.epoch
        with pytest.raises(NotController):
            c1.create_topic("u", 1, 1, {})
        assert observer.exists(paths.topic_path("u")) is None
    finally:
        for n in nodes.values():
            n.close()


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_leaders_move_within_the_isr_on_broker_loss_never_unclean_and_topics_are_deleted(
    zk_connect, observer
):
    with _controlled_nodes(zk_connect, observer) as (nodes, cid, ctl):
        plan = ctl.create_topic("t", 3, 3, {}, assignment=None)
        victim = next(b for b in (1, 2, 3) if b != cid)
        led = [p for p, r in plan.items() if r[0] == victim]
        # partition "solo": ISR is the victim alone (its followers fell behind), so no clean successor
        ctl.create_topic("solo", 1, 2, {}, assignment={0: [victim, cid]})
        s, v = _state(observer, "solo", 0)
        observer.set(
            paths.partition_state_path("solo", 0), json.dumps({**s, "isr": [victim]}).encode(), version=v
        )

        nodes.pop(victim).close()  # its session ends: /brokers/ids/<victim> goes
        for p in led:
            s = wait_for(
                lambda p=p: (s := _state(observer, "t", p)[0])["leader"] != victim and s, what="a new leader"
            )
            assert s["leader"] in plan[p] and s["leader"] in s["isr"] and victim not in s["isr"]
            assert s["leader_epoch"] == 1 and s["controller_epoch"] == ctl.epoch
        for p in set(plan) - set(led):  # still led by a live broker: the dead follower leaves the ISR
            wait_for(
                lambda p=p: victim not in _state(observer, "t", p)[0]["isr"],
                what="ISR without the dead broker",
            )
            assert _state(observer, "t", p)[0]["leader_epoch"] == 0
        # no unclean election: the live out-of-sync replica does not lead
        s = wait_for(
            lambda: (s := _state(observer, "solo", 0)[0])["leader"] == -1 and s, what="solo leaderless"
        )
        assert s["isr"] == [victim]
        # the controller looks again (another broker event, a late topics watch): the ISR stays [victim]
        with ctl._lock:
            ctl._reconcile(["solo"])
        assert _state(observer, "solo", 0)[0] == s

        # the victim returns: as the last in-sync replica it leads "solo" again
        nodes[victim] = Node(zk_connect, victim)
        s = wait_for(
            lambda: (s := _state(observer, "solo", 0)[0])["leader"] == victim and s, what="solo led again"
        )
        assert s["leader_epoch"] == 2

        # deletion: through /admin/delete_topics, everything of the topic goes
        with pytest.raises(UnknownTopicOrPartition):
            ctl.request_delete("nope")
        ctl.request_delete("t")
        wait_for(lambda: observer.exists(paths.topic_path("t")) is None, what="t deleted")
        wait_for(lambda: not observer.get_children(paths.DELETE_TOPICS), what="the deletion request done")
        assert observer.exists(paths.topic_config_path("t")) is None
        assert observer.get_children(paths.BROKER_TOPICS) == ["solo"]


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_a_dead_controller_that_was_the_only_replica_leads_its_partition_again_on_return(
    zk_connect, observer
):
    # The controller dies with its session (as on kill -9): /controller and its registration go together,
    # and the new controller leaves the partition leaderless. Every later look at it (here: another broker
    # joins) once wrote an empty ISR, after which the partition never had a leader again.
    with _controlled_nodes(zk_connect, observer) as (nodes, cid, ctl):
        ctl.create_topic("solo", 1, 1, {}, assignment={0: [cid]})
        dead = nodes.pop(cid)
        dead.zk.stop()  # the session ends at once, without resigning first
        dead.controller.stop()
        new = wait_for(lambda: (c := _controller(observer)) not in (None, cid) and c, what="a new controller")
        nctl = nodes[new].controller
        s = wait_for(
            lambda: (s := _state(observer, "solo", 0)[0])["leader"] == -1 and s, what="solo leaderless"
        )
        nodes[4] = Node(zk_connect, 4)
        wait_for(lambda: nctl._events.empty() and 4 in nctl._registrations, what="the new broker handled")
        with nctl._lock:  # the event being handled, if any, is done
            assert _state(observer, "solo", 0)[0] == s and s["isr"] == [cid]
        nodes[cid] = Node(zk_connect, cid)
        s = wait_for(
            lambda: (s := _state(observer, "solo", 0)[0])["leader"] == cid and s, what="solo led again"
        )
        assert s["isr"] == [cid] and s["leader_epoch"] == 2


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_unclean_election_when_enabled(zk_connect, observer):
    with _controlled_nodes(zk_connect, observer, (1, 2), unclean=True) as (nodes, cid, ctl):
        victim = 3 - cid
        ctl.create_topic("u", 1, 2, {}, assignment={0: [victim, cid]})
        s, v = _state(observer, "u", 0)
        observer.set(
            paths.partition_state_path("u", 0), json.dumps({**s, "isr": [victim]}).encode(), version=v
        )
        nodes.pop(victim).close()
        s = wait_for(lambda: (s := _state(observer, "u", 0)[0])["leader"] == cid and s, what="unclean leader")
        assert s["isr"] == [cid] and s["leader_epoch"] == 1


@pytest.mark.cluster
@pytest.mark.timeout(60)
def test_leadership_goes_back_to_preferred_replicas_when_in_sync(zk_connect, observer):
    nodes = {b: Node(zk_connect, b, rebalance_s=0.3) for b in (1, 2, 3)}
    try:
        cid = wait_for(lambda: _controller(observer), what="a controller")
        ctl = nodes[cid].controller
        wait_for(lambda: ctl.active and len(ctl.registry.live()) == 3, what="controller active, brokers seen")
        ctl.create_topic("r", 3, 3, {}, assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
        # after failovers: 1 no longer leads partition 0 (in sync), 2 no longer leads 1 and is out of sync
        for p, leader, isr in ((0, 2, [1, 2, 3]), (1, 3, [3, 1])):
            s, v = _state(observer, "r", p)
            observer.set(
                paths.partition_state_path("r", p),
                json.dumps({**s, "leader": leader, "leader_epoch": 3, "isr": isr}).encode(),
                version=v,
            )
        s = wait_for(
            lambda: (s := _state(observer, "r", 0)[0])["leader"] == 1 and s, what="1 leading 0 again"
        )
        assert s["leader_epoch"] == 4 and s["isr"] == [1, 2, 3]
        assert _state(observer, "r", 1)[0]["leader"] == 3  # its preferred replica is not in sync: stays
        assert _state(observer, "r", 2)[0]["leader_epoch"] == 0  # balanced: untouched
    finally:
        for n in nodes.values():
            n.close()


@pytest.mark.cluster
@pytest.mark.timeout(60)
def test_a_broker_id_held_by_another_live_session_is_refused(zk_connect):
    a = ZkClient(zk_connect, SESSION_MS)
    a.start()
    BrokerRegistry(a, 7).register("127.0.0.1", 1)
    b = ZkClient(zk_connect, SESSION_MS)
    b.start()
    try:
        with pytest.raises(BrokerIdConflict, match="broker.id 7"):
            BrokerRegistry(b, 7).register("127.0.0.1", 2, wait_s=0.5)
    finally:
        a.stop()
        b.stop()


# ------------------------------------------------------------------ brokers


def _brokers(zk_connect: str, base: Path, n: int = 3) -> dict[int, EmbeddedBroker]:
    out = {}
    for b in range(1, n + 1):
        out[b] = EmbeddedBroker(
            base / f"b{b}",
            config={
                "broker.id": b,
                "zookeeper.connect": zk_connect,
                "zookeeper.session.timeout.ms": SESSION_MS,
                "default.replication.factor": 2,
            },
        )
        out[b].start()
    return out


@pytest.mark.cluster
@pytest.mark.timeout(180)
def test_brokers_in_a_cluster_metadata_roles_creation_and_deletion(zk_connect, observer, tmp_path):
    brokers = _brokers(zk_connect, tmp_path)
    try:
        cid = wait_for(lambda: _controller(observer), what="a controller")
        with WireClient(brokers[cid % 3 + 1].bootstrap) as w:
            md = wait_for(
                lambda: (m := w.metadata(None)) and len(m.brokers) == 3 and m, what="3 brokers in Metadata"
            )
            assert sorted(b.node_id for b in md.brokers) == [1, 2, 3] and md.controller_id == cid
            assert len({md.cluster_id} | {b._broker.state.cluster_id for b in brokers.values()}) == 1
            # CreateTopics goes to the controller (Kafka's rule)
            r = w.request(CreateTopicsRequest([CreatableTopic("t", 3, 3)])).topics[0]
            assert r.error_code == NotController.code
        with WireClient(brokers[cid].bootstrap) as w:
            r = w.request(
                CreateTopicsRequest(
                    [
                        CreatableTopic("t", 3, 3, {"min.insync.replicas": "2"}),
                        CreatableTopic("big", 1, 4),
                        CreatableTopic("dflt", 2),
                    ]
                )
            ).topics
            assert (r[0].error_code, r[0].num_partitions, r[0].replication_factor) == (0, 3, 3)
            assert (
                r[1].error_code == InvalidReplicationFactor.code
                and "3 available brokers" in r[1].error_message
            )
            assert (r[2].error_code, r[2].replication_factor) == (0, 2)  # default.replication.factor
            assert observer.exists(paths.topic_path("big")) is None
        # every broker answers Metadata with every partition's leader, replicas and ISR, leaders spread
        for b in brokers.values():
            with WireClient(b.bootstrap) as w:
                parts = wait_for(
                    lambda w=w: (t := w.metadata(["t"]).topics[0]).error_code == 0 and t.partitions,
                    what="t in metadata",
                )
                assert sorted(p.leader_id for p in parts) == [1, 2, 3]
                assert all(sorted(p.replicas) == [1, 2, 3] and p.leader_id == p.replicas[0] for p in parts)
        # each broker has a local log for its replicas, with the topic config from /config/topics/<t>
        for b in brokers.values():
            logs = b._broker.state.logs
            assert sorted(p for (t, p) in [(lg.topic, lg.partition) for lg in logs.logs()] if t == "t") == [
                0,
                1,
                2,
            ]
            assert logs.topic_config("t").min_insync_replicas == 2
        # a produce to a follower is refused: NotLeaderOrFollower; the leader takes it
        leaders = {p.partition: p.leader_id for p in parts}
        follower = next(b for b in (1, 2, 3) if b != leaders[0])
        with WireClient(brokers[follower].bootstrap) as w:
            assert w.produce("t", 0, fmt.encode([b"x"])).error_code == NotLeaderOrFollower.code
            assert w.fetch("t", 0, 0).error_code == NotLeaderOrFollower.code
        with WireClient(brokers[leaders[0]].bootstrap) as w:
            assert w.produce("t", 0, fmt.encode([b"x"]), acks=1).error_code == 0

        # any broker describes a topic's config, from /config/topics/<t> (Admin asks any broker)
        with WireClient(brokers[cid % 3 + 1].bootstrap) as w:
            d = w.request(DescribeConfigsRequest([ConfigResource(RESOURCE_TOPIC, "t")])).results[0]
            entries = {e.name: e for e in d.configs}
            assert d.error_code == 0 and entries["min.insync.replicas"].value == "2"
            assert entries["min.insync.replicas"].source == 1 and entries["retention.ms"].source == 5

        # producer ids are unique across the brokers: each takes a block from /latest_producer_id_block
        pids = set()
        for b in brokers.values():
            with WireClient(b.bootstrap) as w:
                pids |= {w.request(InitProducerIdRequest()).producer_id for _ in range(2)}
        assert len(pids) == 6
        block = json.loads(observer.get(paths.PRODUCER_ID_BLOCK)[0])
        assert int(block["block_end"]) >= max(pids)

        # a group's coordinator is the leader of its __consumer_offsets partition: the first FindCoordinator
        # creates the topic and answers CoordinatorNotAvailable until that partition has a leader (clients
        # retry); then every broker names it, and the others answer the group's requests with NotCoordinator
        def find(b: EmbeddedBroker) -> tuple[int, int] | None:
            with WireClient(b.bootstrap) as w:
                fc = w.request(FindCoordinatorRequest("g"), check=False)
            return (fc.node_id, fc.port) if fc.error_code == 0 else None

        coord, port = wait_for(lambda: find(brokers[1]), what="a coordinator of group g")
        with WireClient(brokers[1].bootstrap) as w:
            parts = w.metadata([OFFSETS_TOPIC]).topics[0].partitions
        by_id = {q.partition: q.leader_id for q in parts}
        assert coord == by_id[partition_for("g", len(parts))] and port == brokers[coord].port
        for bid, b in brokers.items():  # each broker's view of the new topic may lag a little
            assert wait_for(lambda b=b: find(b), what=f"broker {bid} naming the coordinator") == (coord, port)
        with WireClient(brokers[coord % 3 + 1].bootstrap) as w:
            assert w.request(OffsetFetchRequest("g"), check=False).error_code == NotCoordinator.code
        with WireClient(brokers[coord].bootstrap) as w:

            def loaded_answer() -> (
                OffsetFetchResponse | None
            ):  # CoordinatorLoadInProgress while it reads the log
                r = w.request(OffsetFetchRequest("g"), check=False)
                return None if r.error_code == CoordinatorLoadInProgress.code else r

            assert wait_for(loaded_answer, what="the group's partition loaded").error_code == 0

        # Metadata's auto-creation from any broker: LeaderNotAvailable at first, then leaders (RF 1 by default)
        with WireClient(brokers[cid % 3 + 1].bootstrap) as w:
            assert w.metadata(["auto"], auto_create=True).topics[0].error_code == LeaderNotAvailable.code
            parts = wait_for(
                lambda: (
                    (t := w.metadata(["auto"]).topics[0]).error_code == 0
                    and t.partitions
                    and t.partitions[0].error_code == 0
                    and t.partitions
                ),
                what="auto-created topic led",
            )
            assert len(parts) == 1 and len(parts[0].replicas) == 2 and parts[0].leader_id in (1, 2, 3)

        # deletion through the controller: znodes gone, every broker's logs of t go
        with WireClient(brokers[cid].bootstrap) as w:
            r = w.request(DeleteTopicsRequest(["t"])).topics[0]
            assert r.error_code == 0
            r = w.request(DeleteTopicsRequest(["t"])).topics[0]
            assert r.error_code == UnknownTopicOrPartition.code
        assert (
            observer.exists(paths.topic_path("t")) is None
            and observer.exists(paths.topic_config_path("t")) is None
        )
        for b in brokers.values():
            wait_for(
                lambda b=b: not any(lg.topic == "t" for lg in b._broker.state.logs.logs()),
                what="logs deleted",
            )

        # deleted and at once created again: every replica starts empty, the old record is not served
        with WireClient(brokers[cid].bootstrap) as w:
            assert w.request(CreateTopicsRequest([CreatableTopic("again", 1, 3)])).topics[0].error_code == 0
            leader = _state(observer, "again", 0)[0]["leader"]
        with WireClient(brokers[leader].bootstrap) as w:
            assert w.produce("again", 0, fmt.encode([b"old"]), acks=1).error_code == 0
        with WireClient(brokers[cid].bootstrap) as w:
            assert w.request(DeleteTopicsRequest(["again"])).topics[0].error_code == 0
            assert w.request(CreateTopicsRequest([CreatableTopic("again", 1, 3)])).topics[0].error_code == 0
        leader = _state(observer, "again", 0)[0]["leader"]
        for b in brokers.values():
            wait_for(
                lambda b=b: (
                    b._broker.state.role("again", 0) is not None
                    and b._broker.state.role("again", 0).leader == leader
                ),
                what="roles of the new topic",
            )
            assert b._broker.state.logs.get_log("again", 0).log_end_offset == 0
        with WireClient(brokers[leader].bootstrap) as w:
            r = wait_for(
                lambda: (r := w.produce("again", 0, fmt.encode([b"new"]), acks=1)).error_code == 0 and r,
                what="the new topic writable",
            )
            assert r.base_offset == 0

        # a replica's log of another incarnation of the topic (its partition.metadata names another topic id,
        # as when the topic was deleted and made again while it was away) is set aside; it copies the new one
        away = next(b for b in (1, 2, 3) if b != leader)
        meta = brokers[away].data_dir / "logs" / "again-0" / "partition.metadata"
        wait_for(
            lambda: brokers[away]._broker.state.logs.get_log("again", 0).log_end_offset == 1,
            what="replicated",
        )
        brokers[away].stop()
        old_id = meta.read_text()
        meta.write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
        brokers[away].start()
        lg = wait_for(
            lambda: (lg := brokers[away]._broker.state.logs.get_log("again", 0)).log_end_offset == 1 and lg,
            what="the replica holding the topic again",
        )
        assert (lg.directory / "partition.metadata").read_text() == old_id
        assert list((brokers[away].data_dir / "logs").glob("again-0.*-stray"))
    finally:
        for b in brokers.values():
            b.close()


@pytest.mark.cluster
@pytest.mark.timeout(180)
def test_a_leader_whose_session_expires_stops_leading_and_rejoins(zk_connect, observer, tmp_path, caplog):
    caplog.set_level(logging.INFO, "pyspark_logsource.broker.cluster.member")
    brokers = _brokers(zk_connect, tmp_path)
    try:
        cid = wait_for(lambda: _controller(observer), what="a controller")
        victim = next(b for b in (1, 2, 3) if b != cid)  # not the controller
        with WireClient(brokers[cid].bootstrap) as w:
            r = w.request(
                CreateTopicsRequest(
                    [CreatableTopic("t", 3, 3), CreatableTopic("solo", assignments={0: [victim]})]
                )
            ).topics
            assert [x.error_code for x in r] == [0, 0]
        # the broker leading a partition of t
        p = next(q for q in range(3) if _state(observer, "t", q)[0]["leader"] == victim)
        state = brokers[victim]._broker.state
        with WireClient(brokers[victim].bootstrap) as w:
            assert w.produce("t", p, fmt.encode([b"before"]), acks=1).error_code == 0
            old_zk = state.zk.client.client_id
            expire_session(zk_connect, state.zk.client)
            # fenced from LOST until it registered again and re-read its roles; then a follower
            wait_for(lambda: _state(observer, "t", p)[0]["leader"] != victim, what="a new leader")
            wait_for(
                lambda: (
                    w.produce("t", p, fmt.encode([b"zombie"]), acks=1).error_code == NotLeaderOrFollower.code
                ),
                what="the old leader refusing writes",
            )
        wait_for(lambda: str(victim) in observer.get_children(paths.BROKER_IDS), what="re-registered")
        assert state.zk.client.client_id != old_zk
        wait_for(lambda: not state.fenced, what="unfenced on the new session")
        said = [r.getMessage() for r in caplog.records if r.name.endswith("member")]
        fenced = next(i for i, m in enumerate(said) if f"broker {victim} lost its ZooKeeper session" in m)
        assert any(f"broker {victim} registered on a new ZooKeeper session" in m for m in said[fenced:])
        new = _state(observer, "t", p)[0]
        assert new["leader"] != victim and new["leader_epoch"] >= 1
        assert state.role("t", p).leader == new["leader"]
        # its only-replica partition was leaderless while it was away and is its own again, at a new epoch
        solo = wait_for(
            lambda: (s := _state(observer, "solo", 0)[0])["leader"] == victim and s, what="solo led"
        )
        assert solo["leader_epoch"] >= 1
        with WireClient(brokers[victim].bootstrap) as w:
            wait_for(
                lambda: w.produce("solo", 0, fmt.encode([b"back"])).error_code == 0, what="solo writable"
            )
    finally:
        for b in brokers.values():
            b.close()


@pytest.mark.cluster
@pytest.mark.timeout(60)
def test_a_broker_without_zookeeper_fails_to_start_with_a_clear_error(tmp_path):
    from pyspark_logsource.broker.cluster.zookeeper import free_port

    b = EmbeddedBroker(
        tmp_path / "b",
        config={"zookeeper.connect": f"127.0.0.1:{free_port()}", "zookeeper.connection.timeout.ms": 500},
    )
    with pytest.raises(NetworkError, match="cannot connect to ZooKeeper"):
        b.start()
    assert not b.running
    b.close()


@pytest.mark.cluster
@pytest.mark.timeout(60)
def test_logs_not_assigned_in_zookeeper_are_set_aside_not_served_nor_deleted(zk_connect, tmp_path):
    with (
        EmbeddedBroker(tmp_path / "b") as single,
        WireClient(single.bootstrap) as w,
    ):  # a single broker's data
        assert w.create_topic("old") == 0
        assert w.produce("old", 0, fmt.encode([b"kept"])).error_code == 0
    b = EmbeddedBroker(
        tmp_path / "b",
        config={"broker.id": 1, "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": SESSION_MS},
    )
    b.start()
    try:
        logs = b._broker.state.logs
        wait_for(lambda: not any(lg.topic == "old" for lg in logs.logs()), what="the stray log set aside")
        stray = list((tmp_path / "b" / "logs").glob("old-0.*-stray"))
        assert len(stray) == 1 and list(stray[0].glob("*.log"))
        with WireClient(b.bootstrap) as w:
            assert w.metadata(["old"]).topics[0].error_code == UnknownTopicOrPartition.code
    finally:
        b.close()


@pytest.mark.cluster
@pytest.mark.timeout(90)
def test_a_broker_stops_cleanly_while_zookeeper_is_down(zookeeper, zk_connect, tmp_path, caplog):
    import time

    caplog.set_level(logging.INFO, "pyspark_logsource.broker.state")
    b = EmbeddedBroker(
        tmp_path / "b",
        config={"broker.id": 1, "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": SESSION_MS},
    )
    b.start()
    try:
        wait_for(lambda: b._broker.state.cluster.is_controller(), what="the broker as controller")
        with WireClient(b.bootstrap) as w:
            assert w.request(CreateTopicsRequest([CreatableTopic("t", 1, 1)])).topics[0].error_code == 0
            zookeeper.kill()
            try:
                # ZooKeeper down: the broker keeps serving its partition (the session is only suspended)
                assert w.produce("t", 0, fmt.encode([b"while-zk-is-down"])).error_code == 0
                t0 = time.monotonic()
                b.stop()
                assert time.monotonic() - t0 < 15
            finally:
                zookeeper.start()
        assert any("broker 1 stopped; logs flushed and closed" in r.getMessage() for r in caplog.records)
        assert list((tmp_path / "b" / "logs" / "t-0").glob("*.log"))
        b.start()  # recovers from a clean shutdown and rejoins
        with WireClient(b.bootstrap) as w:
            got = wait_for(lambda: (r := w.fetch("t", 0, 0)).error_code == 0 and r, what="t served again")
            assert [r.value for r in fmt.decode_all(bytes(got.records))[0].records()] == [b"while-zk-is-down"]
    finally:
        b.close()
