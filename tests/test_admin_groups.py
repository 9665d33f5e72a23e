"""DeleteGroups (42) and OffsetDelete (47) against a broker process: confluent-kafka's
``delete_consumer_groups``, kafka-python's ``delete_groups`` / ``delete_group_offsets``; each bad case with
its code, and the deletions still there after a restart and a kill -9 (tombstones on __consumer_offsets)."""

from __future__ import annotations

import time

from support.brokers import WireClient, broker_process

from pyspark_logsource.errors import UnknownMemberId
from pyspark_logsource.protocol import records_admin_messages as ra
from pyspark_logsource.protocol.group_messages import ListGroupsRequest


def _member(bootstrap: str, group: str, topic: str):
    """A confluent-kafka consumer of ``topic`` in ``group``, polled until it has its assignment."""
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert c.assignment()
    return c


def _delete_groups(bootstrap: str, groups: list[str]) -> dict[str, int]:
    """confluent-kafka's delete_consumer_groups: group -> error code (0: deleted)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    out = {}
    for gid, fut in admin.delete_consumer_groups(groups, request_timeout=30).items():
        try:
            fut.result(30)
            out[gid] = 0
        except KafkaException as e:
            out[gid] = e.args[0].code()
    return out


def _committed(w: WireClient, group: str, topic: str, n: int) -> list[int]:
    got = w.committed(group, [(topic, p) for p in range(n)])
    return [got[(topic, p)].offset for p in range(n)]


def test_delete_groups_removes_offsets_and_refuses_members_and_unknown_groups(broker, topic_name):
    topic = topic_name("dg")
    with WireClient(broker.bootstrap) as w:
        w.create_topic(topic, 2)
        w.commit("dg-empty", {(topic, 0): 5, (topic, 1): 7})
        w.commit("dg-other", {(topic, 0): 3})
    member = _member(broker.bootstrap, "dg-busy", topic)
    try:
        codes = _delete_groups(broker.bootstrap, ["dg-empty", "dg-busy", "dg-never"])
        assert codes == {"dg-empty": 0, "dg-busy": 68, "dg-never": 69}  # NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND
    finally:
        member.close()  # leaves the group: it is Empty now, and deletable
    with WireClient(broker.bootstrap) as w:
        assert _committed(w, "dg-empty", topic, 2) == [-1, -1]
        assert _committed(w, "dg-other", topic, 1) == [3]  # another group keeps its offsets
        resp = w.request(ra.DeleteGroupsRequest(["dg-busy", "dg-empty", ""]))
        assert resp.results == [("dg-busy", 0), ("dg-empty", 69), ("", 24)]  # 24: INVALID_GROUP_ID
        listed = w.request(ListGroupsRequest())
        assert not {"dg-busy", "dg-empty"} & {x.group_id for x in listed.groups}
        assert w.metadata([topic]).topics[0].error_code == 0  # still serving


def test_kafka_python_delete_groups_and_group_offsets(broker, topic_name):
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition

    topic = topic_name("od")
    other = topic_name("od-other")
    with WireClient(broker.bootstrap) as w:
        w.create_topic(topic, 2)
        w.create_topic(other, 1)
        w.commit("od-empty", {(topic, 0): 5, (topic, 1): 7, (other, 0): 1})
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        from kafka.errors import NoError

        res = a.delete_group_offsets("od-empty", [TopicPartition(topic, 0)])
        assert res == {TopicPartition(topic, 0): NoError}
        with WireClient(broker.bootstrap) as w:
            assert _committed(w, "od-empty", topic, 2) == [-1, 7]
        assert a.delete_groups(["od-empty", "od-never"]) == {
            "od-empty": "OK",
            "od-never": "GroupIdNotFoundError",
        }
    finally:
        a.close()
    with WireClient(broker.bootstrap) as w:
        assert _committed(w, "od-empty", topic, 2) == [-1, -1]
        assert _committed(w, "od-empty", other, 1) == [-1]


def test_offset_delete_refuses_subscribed_topics_and_unknown_ones(broker, topic_name):
    topic = topic_name("ods")
    free = topic_name("ods-free")
    with WireClient(broker.bootstrap) as w:
        w.create_topic(topic, 1)
        w.create_topic(free, 1)
        # a simple commit beside the member's subscription, made while the group is empty (once it has
        # members only they commit: UNKNOWN_MEMBER_ID)
        assert w.commit("ods-g", {(free, 0): 4}).partitions[0].error_code == 0
    member = _member(broker.bootstrap, "ods-g", topic)
    try:
        with WireClient(broker.bootstrap) as w:
            assert w.commit("ods-g", {(free, 0): 5}).partitions[0].error_code == UnknownMemberId.code
            resp = w.request(
                ra.OffsetDeleteRequest("ods-g", [(topic, 0), (free, 0), (free, 5), ("ods-nope", 0)]),
                check=False,
            )
            assert resp.error_code == 0
            assert resp.partitions == [
                (topic, 0, 86),  # GROUP_SUBSCRIBED_TO_TOPIC
                (free, 0, 0),
                (free, 5, 3),  # UNKNOWN_TOPIC_OR_PARTITION
                ("ods-nope", 0, 3),
            ]
            assert _committed(w, "ods-g", free, 1) == [-1]
            unknown = w.request(ra.OffsetDeleteRequest("ods-never", [(free, 0)]), check=False)
            assert (unknown.error_code, unknown.partitions) == (69, [])
            empty_id = w.request(ra.OffsetDeleteRequest("", [(free, 0)]), check=False)
            assert empty_id.error_code == 24
    finally:
        member.close()


def test_deleted_groups_stay_deleted_after_restart_and_kill_9(tmp_path, topic_name):
    topic = topic_name("dg-crash")
    with broker_process(tmp_path / "b") as b:
        with WireClient(b.bootstrap) as w:
            w.create_topic(topic, 1)
            for g in ("keep", "gone-1", "gone-2"):
                w.commit(g, {(topic, 0): 9})
            w.commit("half", {(topic, 0): 3})
        assert _delete_groups(b.bootstrap, ["gone-1"]) == {"gone-1": 0}
        b.restart()
        with WireClient(b.bootstrap) as w:
            assert _committed(w, "gone-1", topic, 1) == [-1]
            assert _committed(w, "keep", topic, 1) == [9]
            assert w.request(ra.OffsetDeleteRequest("half", [(topic, 0)])).partitions == [(topic, 0, 0)]
        assert _delete_groups(b.bootstrap, ["gone-2"]) == {"gone-2": 0}
        b.kill()
        b.start()
        with WireClient(b.bootstrap) as w:
            assert _committed(w, "gone-2", topic, 1) == [-1]
            assert _committed(w, "half", topic, 1) == [-1]
            assert _committed(w, "keep", topic, 1) == [9]
            assert w.request(ra.DeleteGroupsRequest(["gone-1", "gone-2", "half"])).results == [
                ("gone-1", 69),
                ("gone-2", 69),
                ("half", 69),
            ]
