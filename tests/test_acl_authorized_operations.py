"""Authorized operations (KIP-430): confluent-kafka's describe_topics / describe_cluster /
describe_consumer_groups with ``include_authorized_operations=True`` against a broker with ACLs on get
exactly the operations the principal's ACLs allow (READ implies DESCRIBE, ALTER_CONFIGS implies
DESCRIBE_CONFIGS, as Kafka's authorizer); a super user and a broker without an authorizer get every
operation of the resource type; without the flag, None. Plus the bit-set arithmetic and the codecs."""

from __future__ import annotations

import pytest
from support.brokers import broker_process
from support.secure import add_users_offline, broker_properties, ck_config, make_pki, write_properties

from pyspark_logsource.broker.security.acls.model import Operation, ResourceType
from pyspark_logsource.broker.security.acls.operations import SUPPORTED, from_bitfield, to_bitfield
from pyspark_logsource.protocol import codecs
from pyspark_logsource.protocol import group_messages as g
from pyspark_logsource.protocol import messages as m
from pyspark_logsource.protocol.api_keys import RequestHeader
from pyspark_logsource.protocol.primitives import Reader

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, TopicCollection, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
)
from confluent_kafka.admin import ResourceType as CkResourceType  # noqa: E402

pytestmark = pytest.mark.kafka_clients

A = AclOperation
ALL_TOPIC = {A.READ, A.WRITE, A.CREATE, A.DELETE, A.ALTER, A.DESCRIBE, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS}
ALL_CLUSTER = {
    A.CREATE,
    A.ALTER,
    A.DESCRIBE,
    A.CLUSTER_ACTION,
    A.DESCRIBE_CONFIGS,
    A.ALTER_CONFIGS,
    A.IDEMPOTENT_WRITE,
}
ALL_GROUP = {A.READ, A.DESCRIBE, A.DELETE}
TOPIC, GROUP = "authz-ops-topic", "authz-ops-group"


def test_bitfield_is_kafkas_to32bitfield():
    assert to_bitfield([Operation.READ, Operation.DESCRIBE]) == (1 << 3) | (1 << 8)
    assert from_bitfield(to_bitfield(SUPPORTED[ResourceType.CLUSTER])) == set(SUPPORTED[ResourceType.CLUSTER])
    assert from_bitfield(-(1 << 31)) == set()
    assert {o.name for o in SUPPORTED[ResourceType.TOPIC]} == {a.name for a in ALL_TOPIC}
    assert {o.name for o in SUPPORTED[ResourceType.CLUSTER]} == {a.name for a in ALL_CLUSTER}


def _rt_response(key: int, resp, version: int):
    frame = b"".join(bytes(p) for p in codecs.encode_response(RequestHeader(key, version, 7, "c"), resp))
    r = Reader(frame[4:])
    r.i32()  # the correlation id
    return codecs.decode_response_body(key, version, r)


def _round_trip(req, version: int):
    parts = codecs.encode_request(RequestHeader(req.API_KEY, version, 7, "c"), req)
    r = Reader(memoryview(b"".join(bytes(p) for p in parts)[4:]))
    return codecs.decode_request_body(codecs.decode_request_header(r), r)


@pytest.mark.parametrize("version", [8, 10, 11, 12])
def test_metadata_flags_and_fields_round_trip(version):
    got = _round_trip(m.MetadataRequest(["t"], True, None, True, True), version)
    # the cluster flag exists in v8-10 only (v11+ asks DescribeCluster)
    assert (got.include_cluster_authorized_operations, got.include_topic_authorized_operations) == (
        version <= 10,
        True,
    )
    resp = m.MetadataResponse([], "c", 0, [m.TopicMetadata("t", [], authorized_operations=264)], 0, 1234)
    back = _rt_response(m.ApiKey.METADATA, resp, version)
    assert back.topics[0].authorized_operations == 264
    assert back.cluster_authorized_operations == (1234 if version <= 10 else -(1 << 31))


def test_describe_groups_field_round_trips_from_v3():
    resp = g.DescribeGroupsResponse([g.DescribedGroup("x", 0, "Empty", authorized_operations=264)])
    for version, want in ((2, -(1 << 31)), (3, 264), (5, 264)):
        back = _rt_response(m.ApiKey.DESCRIBE_GROUPS, resp, version)
        assert back.groups[0].authorized_operations == want


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    d = tmp_path_factory.mktemp("authz-ops")
    pki = make_pki(d / "pki")
    props = broker_properties(
        d,
        pki,
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
            "connection.failed.authentication.delay.ms": "0",
        },
    )
    cfg = write_properties(d / "server.properties", props)
    add_users_offline(cfg, d)
    props.pop("log.dirs")
    with broker_process(d, config=props) as b:
        conf = {
            u: ck_config(b.bootstrap_on("SASL_PLAINTEXT"), pki, "SASL_PLAINTEXT", "SCRAM-SHA-512", u)
            for u in ("admin", "alice")
        }
        admin = AdminClient(conf["admin"])
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)

        def allow(rtype, name, op):
            return AclBinding(
                rtype, name, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW
            )

        acls = [
            allow(CkResourceType.TOPIC, TOPIC, A.READ),  # implies DESCRIBE
            allow(CkResourceType.TOPIC, TOPIC, A.ALTER_CONFIGS),  # implies DESCRIBE_CONFIGS
            allow(CkResourceType.BROKER, "kafka-cluster", A.DESCRIBE),
            allow(CkResourceType.BROKER, "kafka-cluster", A.IDEMPOTENT_WRITE),
            allow(CkResourceType.GROUP, GROUP, A.READ),
        ]
        for f in admin.create_acls(acls).values():
            f.result(30)
        # the group exists (Empty) once alice commits an offset in it
        c = Consumer({**conf["alice"], "group.id": GROUP, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
        c.close()
        yield conf


def _topic_ops(conf: dict, include: bool):
    a = AdminClient(conf)
    fut = a.describe_topics(TopicCollection([TOPIC]), include_authorized_operations=include)[TOPIC]
    ops = fut.result(30).authorized_operations
    return None if ops is None else set(ops)


def _cluster_ops(conf: dict, include: bool):
    a = AdminClient(conf)  # kept until the result: the future fails when its client is destroyed
    ops = a.describe_cluster(include_authorized_operations=include).result(30).authorized_operations
    return None if ops is None else set(ops)


def _group_ops(conf: dict, include: bool):
    a = AdminClient(conf)
    desc = a.describe_consumer_groups([GROUP], include_authorized_operations=include)[GROUP].result(30)
    return None if desc.authorized_operations is None else set(desc.authorized_operations)


def test_user_gets_exactly_the_operations_its_acls_allow(secured):
    alice = secured["alice"]
    assert _topic_ops(alice, True) == {A.READ, A.DESCRIBE, A.ALTER_CONFIGS, A.DESCRIBE_CONFIGS}
    assert _cluster_ops(alice, True) == {A.DESCRIBE, A.IDEMPOTENT_WRITE}
    assert _group_ops(alice, True) == {A.READ, A.DESCRIBE}


def test_super_user_gets_every_operation_and_none_without_the_flag(secured):
    admin = secured["admin"]
    assert _topic_ops(admin, True) == ALL_TOPIC
    assert _cluster_ops(admin, True) == ALL_CLUSTER
    assert _group_ops(admin, True) == ALL_GROUP
    for who in ("admin", "alice"):
        assert _topic_ops(secured[who], False) is None
        assert _cluster_ops(secured[who], False) is None
        assert _group_ops(secured[who], False) is None


def test_without_an_authorizer_every_operation(broker, topic_name):
    topic = topic_name("authz-none")
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    desc = a.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(30)
    assert set(desc.authorized_operations) == ALL_TOPIC
    assert (
        set(a.describe_cluster(include_authorized_operations=True).result(30).authorized_operations)
        == ALL_CLUSTER
    )
    assert a.describe_cluster().result(30).authorized_operations is None
