"""The per-API authorization table (broker/security/acls/checks.py) without a broker: each rule's
answer for an allowed and a denied principal, the split of mixed requests (the allowed part reaches the
handler, the denied part is answered with Kafka's code), and the audit line."""

from __future__ import annotations

import asyncio
import logging

import pytest

from pyspark_logsource.broker.security.acls.checks import Enforcer
from pyspark_logsource.broker.security.acls.model import (
    AccessControlEntry,
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from pyspark_logsource.broker.session import Principal, Session
from pyspark_logsource.protocol import ApiKey
from pyspark_logsource.protocol import coordinator_messages as cm
from pyspark_logsource.protocol import group_messages as g
from pyspark_logsource.protocol import messages as m
from pyspark_logsource.protocol import txn_messages as tm

Op, T, G, C, X = (
    Operation,
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)


def allow(rtype, name, op, principal="User:alice", pattern=PatternType.LITERAL) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, "*", op, Permission.ALLOW)
    )


def session(user: str = "alice") -> Session:
    s = Session("10.1.2.3:5555")
    s.principal = Principal("User", user)
    return s


def enforce(key, *bindings, topics=None):
    """(checked handler, the requests the handler saw)."""
    az = Authorizer({"User:admin"})
    az.update(bindings)
    seen = []

    def handler(req, s):
        seen.append(req)
        return RESPONSES[key](req)

    return Enforcer(az, lambda: topics or {}).wrap(key, handler), seen


RESPONSES = {
    ApiKey.PRODUCE: lambda r: m.ProduceResponse(
        [m.ProducePartitionResponse(p.topic, p.partition) for p in r.partitions]
    ),
    ApiKey.FETCH: lambda r: m.FetchResponse(
        [m.FetchPartitionResponse(p.topic, p.partition) for p in r.partitions]
    ),
    ApiKey.OFFSET_COMMIT: lambda r: cm.OffsetCommitResponse(
        [cm.OffsetCommitPartitionResponse(p.topic, p.partition) for p in r.partitions]
    ),
    ApiKey.INIT_PRODUCER_ID: lambda r: m.InitProducerIdResponse(producer_id=7),
    ApiKey.FIND_COORDINATOR: lambda r: cm.FindCoordinatorResponse(node_id=0, key=r.key),
    ApiKey.LIST_GROUPS: lambda r: g.ListGroupsResponse(
        groups=[g.ListedGroup("mine"), g.ListedGroup("theirs")]
    ),
    ApiKey.WRITE_TXN_MARKERS: lambda r: tm.WriteTxnMarkersResponse([]),
    tm.STAGED_TXNS_KEY: lambda r: tm.StagedTxnsResponse(),
    ApiKey.METADATA: lambda r: m.MetadataResponse(
        topics=[m.TopicMetadata(t) for t in (r.topics or ["a", "b"])]
    ),
}


def test_produce_mixed_topics_only_allowed_partitions_reach_the_handler(caplog):
    checked, seen = enforce(ApiKey.PRODUCE, allow(T, "ok", Op.WRITE))
    req = m.ProduceRequest([m.ProducePartitionData("ok", 0, b"x"), m.ProducePartitionData("no", 1, b"y")])
    with caplog.at_level(logging.WARNING, "pyspark_logsource.broker.audit"):
        resp = checked(req, session())
    assert [p.topic for p in seen[0].partitions] == ["ok"]
    assert {(p.topic, p.error_code) for p in resp.partitions} == {("ok", 0), ("no", 29)}
    assert "no" in next(p.error_message for p in resp.partitions if p.topic == "no")
    assert caplog.messages == [
        "request denied: principal=User:alice client=10.1.2.3 api=PRODUCE resources=TOPIC:no(WRITE)"
    ]


def test_transactional_produce_needs_write_on_the_transactional_id():
    checked, seen = enforce(ApiKey.PRODUCE, allow(T, "ok", Op.WRITE))
    req = m.ProduceRequest([m.ProducePartitionData("ok", 0, b"x")], transactional_id="tx")
    assert checked(req, session()).partitions[0].error_code == 53 and not seen


def test_fetch_by_a_follower_needs_cluster_action():
    checked, _ = enforce(ApiKey.FETCH, allow(T, "*", Op.READ))
    follower = m.FetchRequest([m.FetchPartition("t", 0, 0)], replica_id=2)
    assert checked(follower, session()).error_code == 31
    assert checked(m.FetchRequest([m.FetchPartition("t", 0, 0)]), session()).partitions[0].error_code == 0
    assert checked(follower, session("admin")).partitions[0].error_code == 0  # super user


def test_fetch_with_nothing_allowed_is_answered_without_the_handler():
    checked, seen = enforce(ApiKey.FETCH)
    resp = checked(m.FetchRequest([m.FetchPartition("t", 0, 0)]), session())
    assert [p.error_code for p in resp.partitions] == [29] and not seen


def test_offset_commit_needs_group_read_then_topic_read():
    req = cm.OffsetCommitRequest(
        "grp", [cm.OffsetCommitPartition("t", 0, 5), cm.OffsetCommitPartition("u", 0, 5)]
    )
    checked, _ = enforce(ApiKey.OFFSET_COMMIT, allow(T, "t", Op.READ))
    assert {p.error_code for p in checked(req, session()).partitions} == {30}
    checked, _ = enforce(
        ApiKey.OFFSET_COMMIT, allow(T, "t", Op.READ), allow(G, "gr", Op.READ, pattern=PatternType.PREFIXED)
    )
    assert {(p.topic, p.error_code) for p in checked(req, session()).partitions} == {("t", 0), ("u", 29)}


@pytest.mark.parametrize(
    "bindings, code",
    [
        ((), 31),
        ((allow(C, "kafka-cluster", Op.IDEMPOTENT_WRITE),), 0),
        ((allow(T, "any-topic", Op.WRITE),), 0),  # Kafka: WRITE on any topic allows idempotence
        ((allow(T, "any-topic", Op.READ),), 31),
    ],
)
def test_idempotent_init_producer_id(bindings, code):
    checked, _ = enforce(ApiKey.INIT_PRODUCER_ID, *bindings)
    assert checked(m.InitProducerIdRequest(None, 60000), session()).error_code == code


def test_transactional_init_producer_id_and_find_coordinator():
    checked, _ = enforce(ApiKey.INIT_PRODUCER_ID, allow(X, "tx-", Op.WRITE, pattern=PatternType.PREFIXED))
    assert checked(m.InitProducerIdRequest("tx-1", 60000), session()).error_code == 0
    assert checked(m.InitProducerIdRequest("other", 60000), session()).error_code == 53
    fc, _ = enforce(ApiKey.FIND_COORDINATOR, allow(X, "tx-1", Op.WRITE), allow(G, "grp", Op.READ))
    assert fc(cm.FindCoordinatorRequest("tx-1", 1), session()).error_code == 0  # WRITE implies DESCRIBE
    assert fc(cm.FindCoordinatorRequest("tx-2", 1), session()).error_code == 53
    assert fc(cm.FindCoordinatorRequest("grp", 0), session()).error_code == 0
    assert fc(cm.FindCoordinatorRequest("nope", 0), session()).error_code == 30


def test_list_groups_filters_unless_cluster_describe():
    checked, _ = enforce(ApiKey.LIST_GROUPS, allow(G, "mine", Op.DESCRIBE))
    assert [x.group_id for x in checked(g.ListGroupsRequest(), session()).groups] == ["mine"]
    checked, _ = enforce(ApiKey.LIST_GROUPS, allow(C, "kafka-cluster", Op.DESCRIBE))
    assert len(checked(g.ListGroupsRequest(), session()).groups) == 2


def test_metadata_auto_creation_needs_create():
    topics = {"exists": 1}
    checked, seen = enforce(ApiKey.METADATA, allow(T, "*", Op.DESCRIBE), topics=topics)
    resp = checked(m.MetadataRequest(["exists", "new"], allow_auto_topic_creation=True), session())
    assert seen[0].topics == ["exists"]
    assert {(t.name, t.error_code) for t in resp.topics} == {("exists", 0), ("new", 29)}
    checked, seen = enforce(
        ApiKey.METADATA, allow(T, "*", Op.DESCRIBE), allow(C, "kafka-cluster", Op.CREATE), topics=topics
    )
    checked(m.MetadataRequest(["exists", "new"], allow_auto_topic_creation=True), session())
    assert seen[0].topics == ["exists", "new"]
    checked, _ = enforce(ApiKey.METADATA, allow(T, "a", Op.READ))
    assert [t.name for t in checked(m.MetadataRequest(None), session()).topics] == ["a"]


def test_write_txn_markers_need_cluster_action():
    checked, _ = enforce(ApiKey.WRITE_TXN_MARKERS)
    resp = checked(tm.WriteTxnMarkersRequest([tm.TxnMarker(5, 0, True, [("t", 0)])]), session())
    assert resp.markers[0].errors == {("t", 0): 31}


def test_staged_txns_need_write_on_the_write_id_and_the_topics():
    req = tm.StagedTxnsRequest(1, "spark-write-1", producers=[tm.StagedProducer(5, 0, {("out", 0): 3})])
    checked, _ = enforce(tm.STAGED_TXNS_KEY, allow(T, "out", Op.WRITE))
    assert checked(req, session()).error_code == 53
    checked, _ = enforce(tm.STAGED_TXNS_KEY, allow(X, "spark-write-1", Op.WRITE))
    assert checked(req, session()).error_code == 29
    checked, seen = enforce(
        tm.STAGED_TXNS_KEY, allow(X, "spark-write-1", Op.WRITE), allow(T, "out", Op.WRITE)
    )
    assert checked(req, session()).error_code == 0 and seen


def test_a_coroutine_handler_gets_the_denied_entries_merged():
    az = Authorizer()
    az.update([allow(T, "ok", Op.READ)])

    async def handler(req, s):
        return RESPONSES[ApiKey.FETCH](req)

    checked = Enforcer(az, dict).wrap(ApiKey.FETCH, handler)
    req = m.FetchRequest([m.FetchPartition("ok", 0, 0), m.FetchPartition("no", 0, 0)])
    resp = asyncio.run(checked(req, session()))
    assert {(p.topic, p.error_code) for p in resp.partitions} == {("ok", 0), ("no", 29)}


def test_an_api_without_a_rule_is_refused_to_all_but_super_users():
    az = Authorizer({"User:admin"})
    checked = Enforcer(az, dict).wrap(9999, lambda req, s: "answered")
    assert checked(m.ProduceRequest(), session("admin")) == "answered"
    with pytest.raises(Exception, match="no authorization rule"):
        checked(m.ProduceRequest(), session())
