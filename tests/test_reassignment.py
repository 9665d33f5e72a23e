"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46).

- The codecs against Kafka's JSON and kafka-python's independent encoder (every version we serve),
  and the typed messages through the adapters.
- The rules without a server: preferred / unclean elections, Kafka's ``reassignTo`` and target checks.
- A single broker answers as Kafka with one broker.
- A 4-broker cluster (real ZooKeeper, broker processes): a partition of replication factor 3 moved from
  brokers [1, 2, 3] to [2, 3, 4] under an idempotent ``acks=all`` producer, its leader killed -9 in the
  middle: every acknowledged record is on the new replicas, the old one's log is gone, Metadata shows the
  target; a preferred election after a failover gives the leadership back; bad input gets Kafka's codes
  and leaves the cluster working. One cluster for all of it.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol import admin as kp_admin
from kafka.protocol.schemas import load_json
from test_protocol_schemas import (
    _check_struct,
    _decode,
    _encode,
    _kp_decode_encode,
    _kp_encode,
    _same,
    _struct_strategy,
)

from pyspark_logsource.broker.cluster.election import preferred, unclean
from pyspark_logsource.broker.cluster.paths import LeaderAndIsr
from pyspark_logsource.broker.cluster.reassignment import Assignment, leader_after, validate_target
from pyspark_logsource.errors import (
    ElectionNotNeeded,
    EligibleLeadersNotAvailable,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    PreferredLeaderNotAvailable,
)
from pyspark_logsource.protocol import codecs
from pyspark_logsource.protocol import reassign_messages as rm
from pyspark_logsource.protocol.connection import ClientConnection, RequestReceived, ServerConnection
from pyspark_logsource.protocol.schema import Codec, Message, versions

pytestmark = [
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

# ------------------------------------------------------------------ codecs

MESSAGES: list[tuple[Message, type]] = [
    (rm.ELECT_LEADERS_REQUEST, kp_admin.ElectLeadersRequest),
    (rm.ELECT_LEADERS_RESPONSE, kp_admin.ElectLeadersResponse),
    (rm.ALTER_PARTITION_REASSIGNMENTS_REQUEST, kp_admin.AlterPartitionReassignmentsRequest),
    (rm.ALTER_PARTITION_REASSIGNMENTS_RESPONSE, kp_admin.AlterPartitionReassignmentsResponse),
    (rm.LIST_PARTITION_REASSIGNMENTS_REQUEST, kp_admin.ListPartitionReassignmentsRequest),
    (rm.LIST_PARTITION_REASSIGNMENTS_RESPONSE, kp_admin.ListPartitionReassignmentsResponse),
]
CASES = [(m, v, kp) for m, kp in MESSAGES for v in range(m.version_range()[0], m.version_range()[1] + 1)]


def test_the_apis_are_served_at_the_versions_current_clients_send():
    assert codecs.SUPPORTED_VERSIONS[43] == (0, 2)
    assert codecs.SUPPORTED_VERSIONS[45] == (0, 1)
    assert codecs.SUPPORTED_VERSIONS[46] == (0, 0)


@pytest.mark.parametrize("msg,kp", MESSAGES, ids=lambda x: getattr(x, "name", ""))
def test_fields_match_kafka_json(msg: Message, kp: type) -> None:
    kj = load_json(msg.name)
    assert msg.flexible == kj["flexibleVersions"]
    assert msg.version_range() == versions(kj["validVersions"])  # every version Kafka 4 has
    errors = []
    lo, hi = msg.version_range()
    for v in range(lo, hi + 1):
        errors += _check_struct(msg.name, msg.name, msg.fields, kj["fields"], v, msg.is_flexible(v))
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("msg,version,kp", CASES, ids=lambda x: getattr(x, "name", str(x)))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_codec_round_trips_and_matches_kafka_python(msg: Message, version: int, kp: type, data: Any) -> None:
    codec = Codec(msg, version)
    d = data.draw(_struct_strategy(msg.fields, version, codec.flexible), label=msg.name)
    ours = _encode(codec, d)
    assert _same(d, _decode(codec, ours))
    assert ours == _kp_encode(kp, msg, version, d), f"{codec!r}: our bytes differ from kafka-python's"
    assert _kp_decode_encode(kp, version, ours) == ours


def _through_the_wire(req: Any, version: int) -> Any:
    client, server = ClientConnection("t"), ServerConnection()
    _, data = client.request_bytes(req, version)
    (ev,) = server.receive_data(data)
    assert isinstance(ev, RequestReceived)
    return ev.request


def _response_through_the_wire(req: Any, resp: Any, version: int) -> Any:
    from pyspark_logsource.protocol.api_keys import RequestHeader
    from pyspark_logsource.protocol.connection import frame_bytes

    client = ClientConnection()
    cid, _ = client.send_request(req, version)
    parts = ServerConnection.response_parts(RequestHeader(int(req.API_KEY), version, cid, None), resp)
    (got,) = client.receive_data(frame_bytes(parts))
    return got.response


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_messages_through_the_adapters(version):
    req = rm.ElectLeadersRequest(rm.UNCLEAN, {"a": [0, 2], "b": [1]}, 5000)
    got = _through_the_wire(req, version)
    # v0 cannot carry the election type: it is a preferred election
    assert got == rm.ElectLeadersRequest(
        rm.UNCLEAN if version else rm.PREFERRED, {"a": [0, 2], "b": [1]}, 5000
    )
    assert _through_the_wire(rm.ElectLeadersRequest(), version).topic_partitions is None  # all partitions
    resp = rm.ElectLeadersResponse(
        [
            rm.PartitionError("a", 0),
            rm.PartitionError("a", 2, 84, "not needed"),
            rm.PartitionError("b", 1, 80),
        ],
        error_code=0,
    )
    assert _response_through_the_wire(req, resp, version) == resp


@pytest.mark.parametrize("version", [0, 1])
def test_alter_and_list_reassignment_messages_through_the_adapters(version):
    req = rm.AlterPartitionReassignmentsRequest(
        {("t", 0): [2, 3, 4], ("t", 1): None, ("u", 0): [1]}, 9000, True
    )
    assert _through_the_wire(req, version) == req  # None: cancel
    resp = rm.AlterPartitionReassignmentsResponse(
        [rm.PartitionError("t", 0), rm.PartitionError("t", 1, 85, "none")], 0, None
    )
    assert _response_through_the_wire(req, resp, version) == resp
    lreq = rm.ListPartitionReassignmentsRequest({"t": [0, 1]}, 100)
    assert _through_the_wire(lreq, 0) == lreq
    assert _through_the_wire(rm.ListPartitionReassignmentsRequest(), 0).topics is None
    lresp = rm.ListPartitionReassignmentsResponse([rm.OngoingReassignment("t", 0, [2, 3, 4, 1], [4], [1])])
    assert _response_through_the_wire(lreq, lresp, 0) == lresp


# ------------------------------------------------------------------ rules


def test_preferred_election_rules():
    s = LeaderAndIsr(2, 5, [2, 3, 1], 1)
    new = preferred("t", 0, [1, 2, 3], s, {1, 2, 3})
    assert (new.leader, new.leader_epoch, new.isr) == (1, 6, [2, 3, 1])
    with pytest.raises(ElectionNotNeeded):
        preferred("t", 0, [2, 1, 3], s, {1, 2, 3})
    with pytest.raises(PreferredLeaderNotAvailable, match="not in the ISR"):
        preferred("t", 0, [1, 2, 3], LeaderAndIsr(2, 5, [2, 3], 1), {1, 2, 3})
    with pytest.raises(PreferredLeaderNotAvailable, match="not alive"):
        preferred("t", 0, [1, 2, 3], s, {2, 3})


def test_unclean_election_rules():
    with pytest.raises(ElectionNotNeeded):
        unclean("t", 0, [1, 2], LeaderAndIsr(1, 3, [1], 0), {1, 2})
    clean = unclean("t", 0, [1, 2, 3], LeaderAndIsr(1, 3, [1, 3], 0), {2, 3})
    assert (clean.leader, clean.isr) == (3, [3])  # an in-sync replica first
    dirty = unclean("t", 0, [1, 2, 3], LeaderAndIsr(-1, 3, [1], 0), {2, 3})
    assert (dirty.leader, dirty.leader_epoch, dirty.isr) == (2, 4, [2])
    with pytest.raises(EligibleLeadersNotAvailable):
        unclean("t", 0, [1, 2], LeaderAndIsr(-1, 3, [1], 0), {3})


def test_reassign_to_is_kafkas_and_a_new_target_starts_from_the_original_replicas():
    a = Assignment([1, 2, 3], [], []).reassign_to([2, 3, 4])
    assert a == Assignment([2, 3, 4, 1], [4], [1])
    assert (a.original, a.target, a.reassigning) == ([2, 3, 1], [2, 3, 4], True)
    again = a.reassign_to([3, 5, 6])  # replaces the one in progress: still from [1, 2, 3]
    assert again == Assignment([3, 5, 6, 2, 1], [5, 6], [2, 1])
    cancel = a.reassign_to(a.original)
    assert cancel == Assignment([2, 3, 1], [], []) and not cancel.reassigning
    assert leader_after([2, 3, 4], LeaderAndIsr(1, 0, [1, 2, 3, 4], 0), {1, 2, 3, 4}) == 2
    assert leader_after([2, 3, 4], LeaderAndIsr(3, 0, [1, 2, 3, 4], 0), {1, 2, 3, 4}) == 3
    assert leader_after([4], LeaderAndIsr(3, 0, [3], 0), {3, 4}) is None


@pytest.mark.parametrize(
    "target,allow,error",
    [
        ([], True, InvalidReplicaAssignment),
        ([2, 2, 3], True, InvalidReplicaAssignment),
        ([2, -1, 3], True, InvalidReplicaAssignment),
        ([2, 3, 9], True, InvalidReplicaAssignment),  # broker 9 does not exist
        ([2, 3], False, InvalidReplicationFactor),
        ([2, 3], True, None),
        ([2, 3, 4], False, None),
    ],
)
def test_target_checks(target, allow, error):
    current = Assignment([1, 2, 3], [], [])
    if error is None:
        validate_target(target, {1, 2, 3, 4}, current, allow)
    else:
        with pytest.raises(error):
            validate_target(target, {1, 2, 3, 4}, current, allow)


# ------------------------------------------------------------------ one broker


def test_a_single_broker_answers_as_kafka_with_one_broker(broker, topic_name):
    from confluent_kafka import ElectionType, KafkaError
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient

    from pyspark_logsource.client import Admin
    from pyspark_logsource.errors import NoReassignmentInProgress, UnknownTopicOrPartition

    t = topic_name("single")
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(t, 2)
        (me,) = admin.cluster().brokers  # the one broker id
        got = admin.elect_leaders([(t, 0), (t, 1), ("missing-topic", 0)])
        assert isinstance(got[(t, 0)], ElectionNotNeeded) and isinstance(got[(t, 1)], ElectionNotNeeded)
        assert isinstance(got[("missing-topic", 0)], UnknownTopicOrPartition)
        assert admin.elect_leaders(None) == {}  # all partitions: none needed one
        res = admin.alter_partition_reassignments({(t, 0): [me], (t, 1): [me, 7], ("missing-topic", 0): [me]})
        assert res[(t, 0)] is None  # already so
        assert isinstance(res[(t, 1)], InvalidReplicaAssignment) and "not alive" in str(res[(t, 1)])
        assert isinstance(res[("missing-topic", 0)], UnknownTopicOrPartition)
        assert isinstance(
            admin.alter_partition_reassignments({(t, 0): None})[(t, 0)], NoReassignmentInProgress
        )
        assert admin.list_partition_reassignments() == {}
    # confluent-kafka's elect_leaders (librdkafka sends ElectLeaders v2)
    ca = AdminClient({"bootstrap.servers": broker.bootstrap})
    out = ca.elect_leaders(ElectionType.PREFERRED, [CTP(t, 0)]).result(30)
    (err,) = out.values()
    assert isinstance(err, KafkaError) and err.code() == KafkaError.ELECTION_NOT_NEEDED


# ------------------------------------------------------------------ a cluster

TOPIC = "moved"


def _topic_znode(c: Any) -> dict:
    return c._json(f"/brokers/topics/{TOPIC}") or {}


def _partition_dirs(c: Any, broker_id: int) -> list[str]:
    return sorted(d.name for d in c.log_dir(broker_id).glob(f"{TOPIC}-0*"))


def _wait_reassigned(c: Any, target: list[int], timeout: float = 90.0) -> None:
    from support.cluster import wait_for

    def done() -> bool:
        z = _topic_znode(c)
        return (
            z.get("partitions", {}).get("0") == target
            and not z.get("adding_replicas")
            and not z.get("removing_replicas")
            and set(c.isr(TOPIC, 0)) <= set(target)
        )

    wait_for(done, timeout, what=f"{TOPIC}-0 reassigned to {target}: {_topic_znode(c)}")


def _not_controller(c: Any, broker_id: int) -> None:
    """Move the controller off ``broker_id`` (a clean bounce) so that stopping it does not stop the answers."""
    from support.cluster import wait_for

    if c.controller() == broker_id:
        c.restart(broker_id)
        wait_for(lambda: c.controller() not in (None, broker_id), 30, what="another controller")


@pytest.mark.cluster
def test_reassignment_onto_a_fourth_broker_under_acks_all_with_the_leader_killed(
    zk_connect, tmp_path, capsys
):
    from confluent_kafka import ElectionType, KafkaError
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP
    from support.cluster import Cluster, Traffic, wait_for

    from pyspark_logsource.client import Admin, Producer
    from pyspark_logsource.errors import NoReassignmentInProgress, UnknownTopicOrPartition

    # no automatic rebalance: leadership goes back to the preferred replica only when asked
    config = {"auto.leader.rebalance.enable": "false", "min.insync.replicas": "2"}
    with Cluster(zk_connect, tmp_path, brokers=4, config=config) as c:
        ca = AdminClient({"bootstrap.servers": c.bootstrap})
        (fut,) = ca.create_topics(
            [
                NewTopic(
                    TOPIC,
                    num_partitions=1,
                    replica_assignment=[[1, 2, 3]],
                    config={"file.delete.delay.ms": "0"},
                )
            ]
        ).values()
        fut.result(60)
        c.wait_full_isr(TOPIC)
        assert c.leader(TOPIC, 0) == 1
        # some data for broker 4 to copy, then an idempotent acks=all producer and a consumer throughout
        with Producer(c.bootstrap, acks="all") as p:
            for i in range(3000):
                p.send(TOPIC, b"pre-%d-" % i + b"x" * 1000, partition=0)
            p.flush(60)
        traffic = Traffic(c.bootstrap, TOPIC, partitions=1, rate=200).start()
        try:
            traffic.wait_acked(100)
            with Admin(c.bootstrap) as admin:
                # -- phase 1 starts: [1, 2, 3] -> [2, 3, 4]; the leader (1) is killed -9 while 4 copies
                assert admin.alter_partition_reassignments({(TOPIC, 0): [2, 3, 4]}) == {(TOPIC, 0): None}
                z = _topic_znode(c)
                assert (z["partitions"]["0"], z["adding_replicas"], z["removing_replicas"]) == (
                    [2, 3, 4, 1],
                    {"0": [4]},
                    {"0": [1]},
                ), "the reassignment was not in progress at the kill"
                c.kill(1)
                ongoing = admin.list_partition_reassignments()  # from the controller, a new one if it was 1
                if ongoing:  # (4 may have joined the ISR meanwhile: then it is done)
                    o = ongoing[(TOPIC, 0)]
                    assert (o.replicas, o.adding, o.removing) == ([2, 3, 4, 1], [4], [1])
                _wait_reassigned(c, [2, 3, 4])
                traffic.wait_acked(300)
            traffic.stop_producing()
            hw = c.high_watermark(TOPIC, 0)
            traffic.wait_consumed({0: hw})
            traffic.check()  # every acknowledged record consumed where it was acknowledged
        finally:
            traffic.close()
        # every acknowledged record is on each new replica, byte for byte below the high watermark
        assert c.assert_replicas_identical(TOPIC)[0] == hw >= 3000 + len(traffic.acked)
        with Admin(c.bootstrap) as admin:
            assert admin.describe_topic(TOPIC).partitions[0].replicas == [2, 3, 4]  # Metadata: the target
            assert admin.list_partition_reassignments() == {}
        # the old replica was down at the end: when it returns, its log is set aside, never served
        c.start(1)
        wait_for(lambda: f"{TOPIC}-0" not in _partition_dirs(c, 1), 30, what="broker 1's old log set aside")

        # -- a live removed replica deletes its log: [2, 3, 4] -> [1, 3, 4] (kafka-python's admin)
        kp = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:
            kp.alter_partition_reassignments({KTP(TOPIC, 0): [1, 3, 4]})
            _wait_reassigned(c, [1, 3, 4])
            wait_for(
                lambda: _partition_dirs(c, 2) == [],
                30,
                what=f"broker 2's log deleted: {_partition_dirs(c, 2)}",
            )
            assert c.assert_replicas_identical(TOPIC)[0] == hw
            assert not kp.list_partition_reassignments()  # kafka-python reads ListPartitionReassignments

            # -- preferred leader election after a failover
            with Admin(c.bootstrap) as admin:
                if c.leader(TOPIC, 0) != 1:
                    assert admin.elect_leaders([(TOPIC, 0)]) == {(TOPIC, 0): None}
                    assert c.leader(TOPIC, 0) == 1
                c.kill(1)
                moved = c.wait_leader(TOPIC, 0, not_in={1})
                got = admin.elect_leaders([(TOPIC, 0)])
                assert isinstance(got[(TOPIC, 0)], PreferredLeaderNotAvailable)  # 80: 1 is down
                c.start(1)
                c.wait_full_isr(TOPIC)
                assert c.leader(TOPIC, 0) == moved  # nothing moves it back by itself
                # all partitions: the answer names those elected (or failed), here ours
                assert admin.elect_leaders(None)[(TOPIC, 0)] is None
                assert c.leader(TOPIC, 0) == 1
                # answered once Metadata shows it
                assert admin.describe_topic(TOPIC).partitions[0].leader == 1
            # a new client: one whose metadata names the old controller gets NOT_CONTROLLER (41), which
            # librdkafka does not retry for ElectLeaders (as against Kafka in ZooKeeper mode)
            ca = AdminClient({"bootstrap.servers": c.bootstrap})
            (err,) = ca.elect_leaders(ElectionType.PREFERRED, [CTP(TOPIC, 0)]).result(30).values()
            assert err.code() == KafkaError.ELECTION_NOT_NEEDED  # 84

            # -- bad input, each with Kafka's code; nothing changes
            with Admin(c.bootstrap) as admin:
                bad = admin.alter_partition_reassignments(
                    {(TOPIC, 0): [1, 3, 9]}, allow_replication_factor_change=True
                )
                assert isinstance(bad[(TOPIC, 0)], InvalidReplicaAssignment) and "9" in str(bad[(TOPIC, 0)])
                assert isinstance(
                    admin.alter_partition_reassignments({(TOPIC, 0): [3, 3, 4]})[(TOPIC, 0)],
                    InvalidReplicaAssignment,
                )
                assert isinstance(
                    admin.alter_partition_reassignments({(TOPIC, 0): [2, 3]}, False)[(TOPIC, 0)],
                    InvalidReplicationFactor,
                )
                assert isinstance(
                    admin.alter_partition_reassignments({("no-such-topic", 0): [1]})[("no-such-topic", 0)],
                    UnknownTopicOrPartition,
                )
                assert isinstance(
                    admin.alter_partition_reassignments({(TOPIC, 5): [1]})[(TOPIC, 5)],
                    UnknownTopicOrPartition,
                )
                assert isinstance(
                    admin.alter_partition_reassignments({(TOPIC, 0): None})[(TOPIC, 0)],
                    NoReassignmentInProgress,
                )
                assert c.assignment(TOPIC) == {0: [1, 3, 4]} and admin.list_partition_reassignments() == {}

                from pyspark_logsource import reassign

                # -- the controller killed -9 in phase 1: the next one carries the move on from ZooKeeper
                _not_controller(c, 2)
                assert admin.cluster().controller_id != 2  # the client's view too: it asks the controller
                old = c.controller()
                # stopped, broker 2 stays registered for its 2 s session: the move is accepted, and nothing
                # is copied before the controller that took it is dead
                os.kill(c.pid(2), signal.SIGSTOP)
                try:
                    assert admin.alter_partition_reassignments({(TOPIC, 0): [1, 3, 2]}) == {(TOPIC, 0): None}
                    c.kill(old, wait_deregistered=False)
                finally:
                    os.kill(c.pid(2), signal.SIGCONT)
                _wait_reassigned(c, [1, 3, 2])
                assert c.controller() not in (None, old)
                c.wait_deregistered(old)
                c.start(old)
                wait_for(lambda: f"{TOPIC}-0" not in _partition_dirs(c, 4), 30, what="broker 4's log gone")
                c.wait_full_isr(TOPIC)

                # -- cancel: a reassignment that cannot finish (its new replica is gone) is rolled back
                _not_controller(c, 4)
                assert admin.cluster().controller_id != 4  # the client's view too: it asks the controller
                os.kill(c.pid(4), signal.SIGSTOP)  # accepted while registered; killed before it copies
                try:
                    assert admin.alter_partition_reassignments({(TOPIC, 0): [1, 3, 4]}) == {(TOPIC, 0): None}
                finally:
                    c.kill(4)
                o = admin.list_partition_reassignments()[(TOPIC, 0)]
                assert (o.replicas, o.adding, o.removing) == ([1, 3, 4, 2], [4], [2])
                capsys.readouterr()
                assert reassign.main(["list", "-b", c.bootstrap, "--timeout", "20"]) == 0
                listed = capsys.readouterr().out.splitlines()
                assert listed[1].split() == [TOPIC, "0", "1,3,4,2", "4", "2"], listed
                assert admin.alter_partition_reassignments({(TOPIC, 0): None}) == {(TOPIC, 0): None}
                _wait_reassigned(c, [1, 3, 2])
                assert admin.list_partition_reassignments() == {}
                c.start(4)
                wait_for(
                    lambda: f"{TOPIC}-0" not in _partition_dirs(c, 4),
                    30,
                    what="broker 4 holds no log of the cancelled move",
                )
            # the cluster works on: every replica in sync, acks=all writes committed
            with Producer(c.bootstrap, acks="all") as p:
                assert p.send(TOPIC, b"after", partition=0).result(30)[1] == hw
            c.wait_full_isr(TOPIC)
            assert c.assert_replicas_identical(TOPIC)[0] == hw + 1
        finally:
            kp.close()


def test_a_truncation_at_the_log_end_drops_an_empty_last_epoch(tmp_path):
    """Found by the cluster test below: a broker that led an epoch and wrote nothing in it keeps that epoch
    at its log end; as a follower it asks with it, the new leader answers "diverged at an older epoch,
    ending at your log end", and a truncation that cut nothing must still drop the empty epoch (Kafka's
    truncateTo), or the follower asks again forever and never rejoins the ISR."""
    from support.logdata import make_batch, open_log

    log = open_log(tmp_path)
    log.epochs.assign(1, 0)
    log.append(make_batch(0, 5))
    log.epochs.assign(3, 5)  # led epoch 3 from offset 5, wrote nothing
    assert log.epochs.entries() == [(1, 0), (3, 5)]
    assert log.truncate_to(5) == 5
    assert log.epochs.entries() == [(1, 0)] and log.epochs.latest_epoch == 1


def test_the_reassign_command(broker, topic_name, tmp_path, capsys):
    from pyspark_logsource import cli, reassign
    from pyspark_logsource.client import Admin

    t = topic_name("cli")
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(t, 2)
        (me,) = admin.cluster().brokers
    b = ["-b", broker.bootstrap, "--timeout", "10"]

    def run(*argv: str) -> tuple[int, str]:
        rc = cli.main(["reassign", *argv])
        out = capsys.readouterr()
        return rc, out.out + out.err

    rc, out = run("execute", *b, "--topic", t, "--partition", "0", "--replicas", f"{me},42")
    assert rc == 1 and "InvalidReplicaAssignment (39)" in out and "42" in out
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 1, "replicas": [me]}]})
    )
    rc, out = run("execute", *b, "--file", str(plan))
    assert rc == 0 and "started" in out
    rc, out = run("cancel", *b, "--topic", t, "--partition", "1")
    assert rc == 1 and "NoReassignmentInProgress (85)" in out
    assert run("list", *b) == (0, "no reassignment in progress\n")
    rc, out = run("elect-leaders", *b, "--topic", t)
    assert rc == 1 and out.count("ElectionNotNeeded (84)") == 2
    assert run("elect-leaders", *b) == (0, "every partition is led by its preferred replica\n")
    # usage errors
    rc, out = run("execute", *b, "--topic", t, "--partition", "0", "--replicas", "a,b")
    assert rc == 1 and "--replicas must be broker ids" in out
    with pytest.raises(SystemExit):
        reassign.main(["nope"])
