"""The authorization rules of the admin, transaction and consumer-group APIs
(broker/security/acls/admin_rules.py) without a broker: allowed and denied principals, per-entry codes
where Kafka answers per entry, a whole-request denial where Kafka checks one resource."""

from __future__ import annotations

from pyspark_logsource.broker.error_responses import error_response
from pyspark_logsource.broker.security.acls.admin_rules import ALL_RULES
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
from pyspark_logsource.errors import (
    ClusterAuthorizationFailed,
    GroupAuthorizationFailed,
    TopicAuthorizationFailed,
    TransactionalIdAuthorizationFailed,
)
from pyspark_logsource.protocol import RESOURCE_BROKER, RESOURCE_TOPIC, ApiKey
from pyspark_logsource.protocol import admin_config_messages as acm
from pyspark_logsource.protocol import consumer_group_messages as cgm
from pyspark_logsource.protocol import producer_txn_messages as ptm
from pyspark_logsource.protocol import records_admin_messages as ra
from pyspark_logsource.protocol import txn_admin_messages as tam

Op, T, G, C, X = (
    Operation,
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)


def allow(rtype, name, op, principal="User:alice") -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, PatternType.LITERAL),
        AccessControlEntry(principal, "*", op, Permission.ALLOW),
    )


def session(user: str = "alice") -> Session:
    s = Session("10.1.2.3:5555")
    s.principal = Principal("User", user)
    return s


def checked(key, respond, *bindings):
    az = Authorizer({"User:admin"})
    az.update(bindings)
    seen = []

    def handler(req, s):
        seen.append(req)
        return respond(req)

    return Enforcer(az, dict, ALL_RULES).wrap(key, handler), seen


def test_alter_configs_per_resource():
    respond = lambda r: acm.IncrementalAlterConfigsResponse(  # noqa: E731
        [acm.AlterConfigsResult(x.resource_type, x.resource_name) for x in r.resources]
    )
    h, seen = checked(ApiKey.INCREMENTAL_ALTER_CONFIGS, respond, allow(T, "mine", Op.ALTER_CONFIGS))
    req = acm.IncrementalAlterConfigsRequest(
        [acm.AlterConfigsResource(RESOURCE_TOPIC, "mine"), acm.AlterConfigsResource(RESOURCE_TOPIC, "theirs")]
        + [acm.AlterConfigsResource(RESOURCE_BROKER, "0")]
    )
    resp = h(req, session())
    codes = {x.resource_name: x.error_code for x in resp.results}
    assert codes == {
        "mine": 0,
        "theirs": TopicAuthorizationFailed.code,
        "0": ClusterAuthorizationFailed.code,
    }
    assert [x.resource_name for x in seen[0].resources] == ["mine"]


def test_create_partitions_and_delete_records_need_alter_and_delete_on_the_topic():
    respond = lambda r: acm.CreatePartitionsResponse([acm.CreatePartitionsResult(t.name) for t in r.topics])  # noqa: E731
    h, _ = checked(ApiKey.CREATE_PARTITIONS, respond, allow(T, "mine", Op.ALTER))
    req = acm.CreatePartitionsRequest(
        [acm.CreatePartitionsTopic("mine", 4), acm.CreatePartitionsTopic("x", 4)]
    )
    assert {r.name: r.error_code for r in h(req, session()).results} == {
        "mine": 0,
        "x": TopicAuthorizationFailed.code,
    }
    respond = lambda r: ra.DeleteRecordsResponse(  # noqa: E731
        [ra.DeleteRecordsPartitionResult(p.topic, p.partition, 5) for p in r.partitions]
    )
    h, _ = checked(ApiKey.DELETE_RECORDS, respond, allow(T, "mine", Op.DELETE))
    req = ra.DeleteRecordsRequest(
        [ra.DeleteRecordsPartition("mine", 0, 5), ra.DeleteRecordsPartition("x", 0, 5)]
    )
    assert {p.topic: p.error_code for p in h(req, session()).partitions} == {
        "mine": 0,
        "x": TopicAuthorizationFailed.code,
    }


def test_delete_groups_per_group():
    respond = lambda r: ra.DeleteGroupsResponse([(gid, 0) for gid in r.groups])  # noqa: E731
    h, seen = checked(ApiKey.DELETE_GROUPS, respond, allow(G, "mine", Op.DELETE))
    resp = h(ra.DeleteGroupsRequest(["mine", "theirs"]), session())
    assert dict(resp.results) == {"mine": 0, "theirs": GroupAuthorizationFailed.code}
    assert seen[0].groups == ["mine"]


def test_transactions_need_write_on_the_transactional_id_and_the_topics():
    respond = lambda r: ptm.EndTxnResponse(0)  # noqa: E731
    h, seen = checked(ApiKey.END_TXN, respond, allow(X, "tx", Op.WRITE))
    assert h(ptm.EndTxnRequest("tx", 1, 0, True), session()).error_code == 0
    denied = h(ptm.EndTxnRequest("other", 1, 0, True), session())
    assert denied.error_code == TransactionalIdAuthorizationFailed.code
    assert len(seen) == 1

    respond = lambda r: error_response(ApiKey.ADD_PARTITIONS_TO_TXN, r, 0, None)  # noqa: E731
    h, seen = checked(
        ApiKey.ADD_PARTITIONS_TO_TXN, respond, allow(X, "tx", Op.WRITE), allow(T, "out", Op.WRITE)
    )
    ok = ptm.AddPartitionsToTxnRequest.single("tx", 1, 0, [("out", 0)])
    h(ok, session())
    assert len(seen) == 1
    resp = h(ptm.AddPartitionsToTxnRequest.single("tx", 1, 0, [("secret", 0)]), session())
    assert resp.results["tx"][("secret", 0)] == TopicAuthorizationFailed.code
    assert len(seen) == 1  # the handler never saw it


def test_txn_offset_commit_needs_the_group_too():
    respond = lambda r: ptm.TxnOffsetCommitResponse({})  # noqa: E731
    h, seen = checked(ApiKey.TXN_OFFSET_COMMIT, respond, allow(X, "tx", Op.WRITE))
    req = ptm.TxnOffsetCommitRequest("tx", "g", 1, 0, [ptm.TxnOffset("in", 0, 10)])
    resp = h(req, session())
    assert not seen
    assert resp.errors == {("in", 0): GroupAuthorizationFailed.code}


def test_list_transactions_shows_only_describable_ids_and_reassignments_need_the_cluster():
    respond = lambda r: tam.ListTransactionsResponse(  # noqa: E731
        [tam.TransactionListing("mine", 1, "Ongoing"), tam.TransactionListing("theirs", 2, "Ongoing")]
    )
    h, _ = checked(ApiKey.LIST_TRANSACTIONS, respond, allow(X, "mine", Op.DESCRIBE))
    resp = h(tam.ListTransactionsRequest(), session())
    assert [t.transactional_id for t in resp.transactions] == ["mine"]
    assert ALL_RULES[ApiKey.ALTER_PARTITION_REASSIGNMENTS] is not None


def test_consumer_group_heartbeat_needs_read_on_the_group():
    respond = lambda r: cgm.ConsumerGroupHeartbeatResponse(member_id="m")  # noqa: E731
    h, seen = checked(
        ApiKey.CONSUMER_GROUP_HEARTBEAT, respond, allow(G, "g", Op.READ), allow(T, "t", Op.DESCRIBE)
    )
    assert h(cgm.ConsumerGroupHeartbeatRequest("g", subscribed_topic_names=["t"]), session()).error_code == 0
    denied = h(cgm.ConsumerGroupHeartbeatRequest("other"), session())
    assert denied.error_code == GroupAuthorizationFailed.code
    denied = h(cgm.ConsumerGroupHeartbeatRequest("g", subscribed_topic_names=["secret"]), session())
    assert denied.error_code == TopicAuthorizationFailed.code
    assert len(seen) == 1
