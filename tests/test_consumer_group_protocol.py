"""KIP-848's consumer group protocol (``group.protocol=consumer``): ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69), with confluent-kafka consumers and with raw requests for the bad input."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from support.brokers import WireClient

from pyspark_logsource.protocol import codecs
from pyspark_logsource.protocol import consumer_group_messages as cg
from pyspark_logsource.protocol.group_messages import (
    DescribeGroupsRequest,
    JoinGroupProtocol,
    JoinGroupRequest,
    ListGroupsRequest,
)
from pyspark_logsource.protocol.primitives import Reader, Writer

HEARTBEAT_MS = 300


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    # short heartbeats and sessions keep the test quick; Kafka's defaults are 5000 and 45000 ms
    return {
        "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
        "group.consumer.session.timeout.ms": "3000",
        "group.max.size": "3",
    }


def _topic(bootstrap: str, name: str, partitions: int, records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures die with it
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result()
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        p.produce(name, str(i).encode(), partition=i % partitions)
    assert p.flush(15) == 0


def _consumer(bootstrap: str, group: str, topic: str, **extra: Any):
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )
    c.subscribe([topic])
    return c


def _commit(c, m) -> None:
    """A synchronous commit, retried on STALE_MEMBER_EPOCH as Kafka's Java consumer retries it: a commit
    sent while the member's epoch moves (its heartbeat's answer is on the way) names the old epoch."""
    from confluent_kafka import KafkaError, KafkaException

    for _ in range(50):
        try:
            c.commit(m, asynchronous=False)
            return
        except KafkaException as e:
            if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                raise
            time.sleep(0.05)  # the background heartbeat brings the new epoch
    raise AssertionError("the commit stayed stale")


def _parts(c) -> list[int]:
    return sorted(tp.partition for tp in c.assignment())


# ------------------------------------------------------------------ sans-IO: the codecs


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_and_describe_round_trip(version: int) -> None:
    tid = uuid.uuid4().bytes
    cases = [
        (
            68,
            cg.ConsumerGroupHeartbeatRequest(
                "g",
                "m-1",
                3,
                "i-1",
                "rack",
                30000,
                ["a", "b"],
                "x.*" if version >= 1 else None,
                "range",
                {tid: [0, 2]},
                version,
            ),
            cg.ConsumerGroupHeartbeatResponse(0, None, "m-1", 4, 5000, {tid: [1, 3]}),
        ),
        (
            68,
            cg.ConsumerGroupHeartbeatRequest("g", "m", 0, api_version=version),
            cg.ConsumerGroupHeartbeatResponse(110, "fenced"),
        ),
        (
            69,
            cg.ConsumerGroupDescribeRequest(["g", "h"], True),
            cg.ConsumerGroupDescribeResponse(
                [
                    cg.DescribedConsumerGroup(
                        "g",
                        0,
                        None,
                        "Stable",
                        5,
                        5,
                        "uniform",
                        [
                            cg.DescribedConsumerMember(
                                "m",
                                5,
                                "c",
                                "/h",
                                None,
                                None,
                                ["t"],
                                None,
                                {(tid, "t"): [0, 1]},
                                {(tid, "t"): [0]},
                                0 if version >= 1 else -1,
                            )
                        ],
                    ),
                    cg.DescribedConsumerGroup("h", 69, "Group h is not a consumer group."),
                ]
            ),
        ),
    ]
    for key, req, resp in cases:
        api = codecs.APIS[key]
        req_codec, resp_codec = api.codecs[version]
        for codec, to, frm, msg in (
            (req_codec, api.req_to, api.req_from, req),
            (resp_codec, api.resp_to, api.resp_from, resp),
        ):
            w = Writer()
            codec.write(w, to(msg, version))
            data = b"".join(bytes(p) for p in w.parts) + bytes(w.buf)
            r = Reader(data)
            assert frm(codec.read(r), version) == msg
            r.done("round trip")


# ------------------------------------------------------------------ confluent-kafka consumers


def test_two_consumers_share_then_one_leaves_without_duplicates(broker, topic_name) -> None:
    """Each of two consumers gets 2 of 4 partitions; when one leaves the other gets all 4; with synchronous
    commits no record is consumed twice by the group and every offset is committed."""
    from confluent_kafka import TopicPartition

    topic, group = topic_name("kip848"), f"g-{uuid.uuid4().hex[:8]}"
    n = 200
    _topic(broker.bootstrap, topic, 4, n)
    seen: list[int] = []
    c1 = _consumer(broker.bootstrap, group, topic)
    c2 = _consumer(broker.bootstrap, group, topic)
    try:
        deadline = time.time() + 20
        while time.time() < deadline and not (len(_parts(c1)) == 2 and len(_parts(c2)) == 2):
            for c in (c1, c2):
                m = c.poll(0.05)
                if m is not None and not m.error():
                    seen.append(int(m.value()))
                    _commit(c, m)
        assert len(_parts(c1)) == 2 and len(_parts(c2)) == 2, (_parts(c1), _parts(c2))
        assert sorted(_parts(c1) + _parts(c2)) == [0, 1, 2, 3]
        for _ in range(20):  # both consume some before one leaves
            for c in (c1, c2):
                m = c.poll(0.05)
                if m is not None and not m.error():
                    seen.append(int(m.value()))
                    _commit(c, m)
        c2.close()
        deadline = time.time() + 20
        while time.time() < deadline and (len(seen) < n or len(_parts(c1)) < 4):
            m = c1.poll(0.1)
            if m is not None and not m.error():
                seen.append(int(m.value()))
                _commit(c1, m)
        assert _parts(c1) == [0, 1, 2, 3]
        assert sorted(seen) == list(range(n)), "every record consumed exactly once by the group"
        committed = c1.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
        assert [tp.offset for tp in committed] == [n // 4] * 4
    finally:
        c1.close()
    # the commits survive the members: a new member of the group starts where they stopped
    c3 = _consumer(broker.bootstrap, group, topic)
    try:
        deadline = time.time() + 10
        while time.time() < deadline and len(_parts(c3)) < 4:
            m = c3.poll(0.1)
            assert m is None or m.error() is not None, "nothing left to consume"
        assert _parts(c3) == [0, 1, 2, 3]
        assert c3.poll(1.0) is None
    finally:
        c3.close()


def test_one_protocol_per_group_id(broker, topic_name) -> None:
    """A classic consumer on a consumer-protocol group gets INCONSISTENT_GROUP_PROTOCOL; a heartbeat for a
    classic group gets GROUP_ID_NOT_FOUND (as Kafka answers both)."""
    from confluent_kafka import Consumer, KafkaError

    topic, group = topic_name("kip848"), f"g-{uuid.uuid4().hex[:8]}"
    _topic(broker.bootstrap, topic, 2, 4)
    c1 = _consumer(broker.bootstrap, group, topic)
    classic = None
    try:
        deadline = time.time() + 15
        while time.time() < deadline and len(_parts(c1)) < 2:
            c1.poll(0.1)
        assert _parts(c1) == [0, 1]
        classic = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "classic"}
        )
        classic.subscribe([topic])
        error = None
        deadline = time.time() + 15
        while time.time() < deadline and error is None:
            m = classic.poll(0.2)
            c1.poll(0)
            if m is not None and m.error() is not None:
                error = m.error()
        assert error is not None and error.code() == KafkaError.INCONSISTENT_GROUP_PROTOCOL, error
        assert _parts(c1) == [0, 1], "the consumer-protocol member keeps its partitions"
    finally:
        if classic is not None:
            classic.close()
        c1.close()
    # the other way round: a classic group's id refuses a consumer-protocol heartbeat
    classic_group = f"classic-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as w:
        join = JoinGroupRequest(
            classic_group, 10000, 10000, "", "consumer", [JoinGroupProtocol("range", b"")]
        )
        r = w.request(join, check=False)
        if r.error_code == 79:  # MEMBER_ID_REQUIRED: join again with the id
            join.member_id = r.member_id
            r = w.request(join, check=False)
        assert r.error_code == 0
        hb = w.request(_join_hb(classic_group, topic), check=False)
        assert hb.error_code == 69 and "not a consumer group" in hb.error_message


# ------------------------------------------------------------------ raw heartbeats: bad input


def _join_hb(
    group: str, topic: str, member: str | None = None, **kw: Any
) -> cg.ConsumerGroupHeartbeatRequest:
    return cg.ConsumerGroupHeartbeatRequest(
        group,
        uuid.uuid4().hex if member is None else member,
        0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=[topic],
        **kw,
    )


def test_bad_heartbeats_get_their_codes_and_the_group_goes_on(broker, topic_name) -> None:
    topic, group = topic_name("kip848"), f"g-{uuid.uuid4().hex[:8]}"
    _topic(broker.bootstrap, topic, 4, 0)
    with WireClient(broker.bootstrap) as w:
        a = w.request(_join_hb(group, topic))
        assert a.member_epoch >= 1 and sorted(a.assignment[next(iter(a.assignment))]) == [0, 1, 2, 3]
        # a stale (newer than known) member epoch: FENCED_MEMBER_EPOCH
        r = w.request(cg.ConsumerGroupHeartbeatRequest(group, a.member_id, a.member_epoch + 5), check=False)
        assert r.error_code == 110 and "epoch" in r.error_message
        # an unknown member id
        r = w.request(cg.ConsumerGroupHeartbeatRequest(group, "nobody", 1), check=False)
        assert r.error_code == 25
        # an unknown server assignor
        r = w.request(_join_hb(group, topic, server_assignor="roundrobin"), check=False)
        assert r.error_code == 112 and "uniform" in r.error_message
        # a join without subscription, and one without a member id (v1): INVALID_REQUEST
        r = w.request(cg.ConsumerGroupHeartbeatRequest(group, "m", 0, rebalance_timeout_ms=1000), check=False)
        assert r.error_code == 42
        r = w.request(_join_hb(group, topic, member=""), check=False)
        assert r.error_code == 42
        # the member goes on: its heartbeat with its epoch is answered
        ok = w.request(cg.ConsumerGroupHeartbeatRequest(group, a.member_id, a.member_epoch))
        assert ok.member_epoch == a.member_epoch
        # a second member: the first is told to revoke 2 partitions before the second gets them
        b = w.request(_join_hb(group, topic, server_assignor="range"))
        assert b.member_epoch > a.member_epoch and b.assignment == {}, "nothing is free yet"
        ra = w.request(cg.ConsumerGroupHeartbeatRequest(group, a.member_id, a.member_epoch))
        kept = next(iter(ra.assignment.values()))
        assert len(kept) == 2 and ra.member_epoch == a.member_epoch, "revocation first, same epoch"
        tid = next(iter(ra.assignment))
        # a commit with the member's epoch is accepted, a stale one gets STALE_MEMBER_EPOCH
        # (OffsetCommit v8's generation field carries the member epoch)
        from pyspark_logsource.protocol import coordinator_messages as cm

        commit = cm.OffsetCommitRequest(
            group, [cm.OffsetCommitPartition(topic, kept[0], 0)], ra.member_epoch, a.member_id
        )
        assert [p.error_code for p in w.request(commit).partitions] == [0]
        commit.generation_id = ra.member_epoch + 7
        assert [p.error_code for p in w.request(commit, check=False).partitions] == [113]
        commit.member_id = "nobody"
        assert [p.error_code for p in w.request(commit, check=False).partitions] == [25]
        rb = w.request(cg.ConsumerGroupHeartbeatRequest(group, b.member_id, b.member_epoch))
        assert rb.assignment in (None, {}), "still owned by a until it confirms the revocation"
        ra2 = w.request(
            cg.ConsumerGroupHeartbeatRequest(group, a.member_id, a.member_epoch, owned={tid: kept})
        )
        assert ra2.member_epoch == b.member_epoch
        rb2 = w.request(cg.ConsumerGroupHeartbeatRequest(group, b.member_id, b.member_epoch))
        assert sorted(rb2.assignment[tid]) == sorted({0, 1, 2, 3} - set(kept))
        # a's previous epoch is accepted if it owns no more than assigned (a lost answer), else fenced
        r = w.request(cg.ConsumerGroupHeartbeatRequest(group, a.member_id, a.member_epoch, owned={tid: kept}))
        assert r.member_epoch == ra2.member_epoch
        r = w.request(
            cg.ConsumerGroupHeartbeatRequest(group, a.member_id, a.member_epoch, owned={tid: [0, 1, 2, 3]}),
            check=False,
        )
        assert r.error_code == 110
        # ConsumerGroupDescribe: epochs, assignor, each member's assignment; unknown groups GROUP_ID_NOT_FOUND
        d = w.request(cg.ConsumerGroupDescribeRequest([group, "no-such-group"]))
        g, missing = d.groups
        assert g.error_code == 0 and g.group_epoch == g.assignment_epoch == b.member_epoch
        assert g.group_state == "Stable" and g.assignor_name == "range"
        assert {m.member_id: sorted(m.assignment[(tid, topic)]) for m in g.members} == {
            a.member_id: sorted(kept),
            b.member_id: sorted({0, 1, 2, 3} - set(kept)),
        }
        assert missing.error_code == 69
        # ListGroups shows the group with its type; DescribeGroups (classic) says it is not a classic group
        listed = {x.group_id: x for x in w.request(ListGroupsRequest()).groups}
        assert listed[group].group_type == "consumer" and listed[group].state == "Stable"
        dg = w.request(DescribeGroupsRequest([group])).groups[0]
        assert dg.error_code == 69
        # the group is full at group.max.size=3
        w.request(_join_hb(group, topic))
        r = w.request(_join_hb(group, topic), check=False)
        assert r.error_code == 81
        # a member leaves with epoch -1
        left = w.request(cg.ConsumerGroupHeartbeatRequest(group, b.member_id, -1))
        assert left.member_epoch == -1
        r = w.request(cg.ConsumerGroupHeartbeatRequest(group, b.member_id, rb2.member_epoch), check=False)
        assert r.error_code == 25


def test_static_member_returns_to_its_assignment(broker, topic_name) -> None:
    """A static member that leaves with epoch -2 keeps its partitions; its instance id is taken back by a
    new member id with the same assignment; while it is held, another join with it is UNRELEASED_INSTANCE_ID."""
    topic, group = topic_name("kip848"), f"g-{uuid.uuid4().hex[:8]}"
    _topic(broker.bootstrap, topic, 2, 0)
    with WireClient(broker.bootstrap) as w:
        a = w.request(_join_hb(group, topic, instance_id="i-1"))
        r = w.request(_join_hb(group, topic, instance_id="i-1"), check=False)
        assert r.error_code == 111
        left = w.request(cg.ConsumerGroupHeartbeatRequest(group, a.member_id, -2, instance_id="i-1"))
        assert left.member_epoch == -2
        back = w.request(_join_hb(group, topic, instance_id="i-1"))
        assert back.member_id != a.member_id
        assert back.member_epoch == a.member_epoch and back.assignment == a.assignment


def test_session_expiry_frees_the_partitions(broker, topic_name) -> None:
    topic, group = topic_name("kip848"), f"g-{uuid.uuid4().hex[:8]}"
    _topic(broker.bootstrap, topic, 2, 0)
    with WireClient(broker.bootstrap) as w:
        a = w.request(_join_hb(group, topic))
        time.sleep(3.5)  # group.consumer.session.timeout.ms=3000
        r = w.request(cg.ConsumerGroupHeartbeatRequest(group, a.member_id, a.member_epoch), check=False)
        assert r.error_code == 25
        b = w.request(_join_hb(group, topic))
        assert sorted(next(iter(b.assignment.values()))) == [0, 1]


def test_metadata_answers_topic_ids_and_by_id(broker, topic_name) -> None:
    """Assignments name topics by id: Metadata v10+ carries each topic's id, and v12 answers a topic asked
    for by id alone (librdkafka does so for an assigned topic); an unknown id gets UNKNOWN_TOPIC_ID."""
    from pyspark_logsource.protocol.messages import MetadataRequest

    topic = topic_name("kip848")
    _topic(broker.bootstrap, topic, 1, 0)
    with WireClient(broker.bootstrap) as w:
        (t,) = w.request(MetadataRequest([topic])).topics
        assert t.topic_id is not None and any(t.topic_id)
        other = uuid.uuid4().bytes
        by_id = w.request(MetadataRequest([None, None], topic_ids=[t.topic_id, other])).topics  # type: ignore[list-item]
        assert [(x.name, x.error_code) for x in by_id] == [(topic, 0), (None, 100)]


def test_server_assignors_spread_evenly_and_uniform_is_sticky() -> None:
    from pyspark_logsource.broker.groups.server_assignors import range_, uniform

    subs = {"a": {"t", "u"}, "b": {"t", "u"}, "c": {"t"}}
    parts = {"t": 4, "u": 3}
    out = uniform(subs, parts, {})
    owned = [(t, p) for a in out.values() for t, ps in a.items() for p in ps]
    assert sorted(owned) == sorted([("t", p) for p in range(4)] + [("u", p) for p in range(3)]), "each once"
    loads = sorted(sum(len(ps) for ps in a.values()) for a in out.values())
    assert loads[-1] - loads[0] <= 1 and "u" not in out["c"]
    # a member leaves: the others keep what they had and take over its partitions
    rest = uniform({"a": subs["a"], "b": subs["b"]}, parts, out)
    for m in ("a", "b"):
        for t, ps in out[m].items():
            assert ps <= rest[m].get(t, set())
    # range: contiguous ranges per topic, the first members one more
    r = range_({"x": {"t"}, "y": {"t"}}, {"t": 5}, {})
    assert r == {"x": {"t": {0, 1, 2}}, "y": {"t": {3, 4}}}
