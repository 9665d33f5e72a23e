"""The pure parts of the admin APIs, without a broker: Kafka's placement of new partitions
(``plan_new_partitions``), the config arithmetic of (Incremental)AlterConfigs (``altered``), the dynamic
broker configs' precedence and the codecs of CreatePartitions, AlterConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

import pytest

from pyspark_logsource.broker.admin.configs import altered
from pyspark_logsource.broker.cluster.partition_adds import plan_new_partitions
from pyspark_logsource.broker.dynamic_config import BrokerDynamicConfig, check_broker_keys
from pyspark_logsource.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    InvalidRequest,
)
from pyspark_logsource.protocol import codecs
from pyspark_logsource.protocol.admin_config_messages import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterableConfig,
    AlterConfigsResource,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    IncrementalAlterConfigsRequest,
)
from pyspark_logsource.protocol.messages import RequestHeader
from pyspark_logsource.protocol.primitives import Reader


def test_new_partitions_continue_kafkas_round_robin():
    existing = {0: [2, 3, 1], 1: [3, 1, 2]}
    plan = plan_new_partitions(existing, [1, 2, 3], 6, None, 100)
    assert sorted(plan) == [2, 3, 4, 5]
    # leaders go on round-robin from partition 0's leader (broker 2) at partition id 2
    assert [plan[p][0] for p in (2, 3, 4, 5)] == [1, 2, 3, 1]
    assert all(len(set(r)) == 3 for r in plan.values())
    # replication factor 1 on one broker: every new partition on it
    assert plan_new_partitions({0: [0]}, [0], 3, None, 100) == {1: [0], 2: [0]}


@pytest.mark.parametrize(
    ("count", "assignments", "brokers", "error", "words"),
    [
        (2, None, [1, 2, 3], InvalidPartitions, "already has 2"),
        (1, None, [1, 2, 3], InvalidPartitions, "higher than the requested 1"),
        (200, None, [1, 2, 3], InvalidPartitions, "max.partitions.per.topic"),
        (3, [[1, 9]], [1, 2, 3], InvalidReplicaAssignment, "Unknown broker(s) in replica assignment: [9]"),
        (4, [[1, 2]], [1, 2, 3], InvalidReplicaAssignment, "by 2 but 1 assignments"),
        (3, [[1, 1]], [1, 2, 3], InvalidReplicaAssignment, "Duplicate"),
        (3, [[1]], [1, 2, 3], InvalidReplicaAssignment, "Inconsistent replication factor"),
        (3, None, [1], InvalidReplicationFactor, "1 live brokers"),
    ],
)
def test_new_partitions_refused(count, assignments, brokers, error, words):
    with pytest.raises(error, match=None) as e:
        plan_new_partitions({0: [1, 2], 1: [2, 3]}, brokers, count, assignments, 100)
    assert words in str(e.value)


def test_altered_alter_and_incremental():
    cur = {"retention.ms": "5", "cleanup.policy": "delete"}
    assert altered(cur, [AlterableConfig("segment.ms", "9"), AlterableConfig("x", None)], False, {}) == {
        "segment.ms": "9"
    }
    ops = [
        AlterableConfig("retention.ms", None, OP_DELETE),
        AlterableConfig("cleanup.policy", "compact", OP_APPEND),
        AlterableConfig("segment.ms", "7", OP_SET),
    ]
    assert altered(cur, ops, True, {}) == {"cleanup.policy": "delete,compact", "segment.ms": "7"}
    # APPEND starts from the effective value when the resource has none of its own
    throttled = [AlterableConfig("leader.replication.throttled.replicas", "1:2", OP_APPEND)]
    effective = {"leader.replication.throttled.replicas": "0:1"}
    assert altered({}, throttled, True, effective) == {"leader.replication.throttled.replicas": "0:1,1:2"}
    assert altered(cur, [AlterableConfig("cleanup.policy", "delete", OP_SUBTRACT)], True, {}) == {
        "retention.ms": "5",
        "cleanup.policy": "",
    }
    with pytest.raises(InvalidConfig, match="append is not allowed for config key: retention.ms"):
        altered(cur, [AlterableConfig("retention.ms", "1", OP_APPEND)], True, {})
    with pytest.raises(InvalidRequest, match="duplicate config keys: a"):
        altered(cur, [AlterableConfig("a", "1"), AlterableConfig("a", "2")], True, {})
    with pytest.raises(InvalidRequest, match="unknown config operation 9"):
        altered(cur, [AlterableConfig("a", "1", 9)], True, {})
    with pytest.raises(InvalidRequest, match="Null value"):
        altered(cur, [AlterableConfig("a", None, OP_SET)], True, {})


def test_dynamic_broker_precedence():
    dyn = BrokerDynamicConfig(0, {"log.retention.ms": "1000"}, None)
    assert dyn.synonyms("log.retention.ms") == [("log.retention.ms", "1000", 4)]
    dyn.apply({"log.retention.ms": "2000"}, {})
    dyn.apply({"log.retention.ms": "2000"}, {"log.retention.ms": "3000"})
    rows = {k: (v, src, ro) for k, v, src, ro, _ in dyn.describe()}
    assert rows["log.retention.ms"] == ("3000", 2, False)
    assert rows["broker.id"][2] is True
    assert [s for _, _, s in dyn.topic_synonyms("retention.ms")] == [2, 3, 4]
    with pytest.raises(InvalidConfig, match="Cannot update these configs dynamically: broker.id"):
        check_broker_keys({"broker.id": "3"})
    with pytest.raises(InvalidConfig, match="unknown broker config nope"):
        check_broker_keys({"nope": "3"})
    with pytest.raises(InvalidConfig, match="log.segment.bytes"):
        check_broker_keys({"log.segment.bytes": "x"})


def _round_trip(key: int, version: int, req):
    parts = codecs.encode_request(RequestHeader(key, version, 7, "c"), req)
    data = b"".join(bytes(p) for p in parts)[4:]
    r = Reader(memoryview(data))
    header = codecs.decode_request_header(r)
    return codecs.decode_request_body(header, r)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_create_partitions_codec(version):
    req = CreatePartitionsRequest(
        [CreatePartitionsTopic("t", 4, [[1, 2], [2, 3]]), CreatePartitionsTopic("u", 2)], 500, True
    )
    assert _round_trip(37, version, req) == req


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs_codec(version):
    res = AlterConfigsResource(
        2, "t", [AlterableConfig("a", "1", OP_SET), AlterableConfig("b", None, OP_DELETE)]
    )
    req = IncrementalAlterConfigsRequest([res], True)
    assert _round_trip(44, version, req) == req


def test_dynamic_sasl_settings_are_accepted_stored_and_described():
    # Kafka takes these as dynamic listener settings (librdkafka's 0081 sets the first one on a broker)
    check_broker_keys(
        {"sasl.kerberos.min.time.before.relogin": "58000", "sasl.login.refresh.window.factor": "0.5"}
    )
    with pytest.raises(InvalidConfig, match="sasl.kerberos.min.time.before.relogin"):
        check_broker_keys({"sasl.kerberos.min.time.before.relogin": "soon"})
    with pytest.raises(InvalidConfig, match="unknown broker config sasl.kerberos.nope"):
        check_broker_keys({"sasl.kerberos.nope": "1"})
    dyn = BrokerDynamicConfig(0, {}, None)
    rows = {k: (v, src, ro, syn) for k, v, src, ro, syn in dyn.describe()}
    assert rows["sasl.kerberos.min.time.before.relogin"][:3] == ("60000", 5, False)
    dyn.apply(
        {"sasl.kerberos.min.time.before.relogin": "59000"}, {"sasl.kerberos.min.time.before.relogin": "58000"}
    )
    rows = {k: (v, src, ro, syn) for k, v, src, ro, syn in dyn.describe()}
    value, src, ro, syn = rows["sasl.kerberos.min.time.before.relogin"]
    assert (value, src, ro) == ("58000", 2, False)
    assert [(v, s) for _, v, s in syn] == [("58000", 2), ("59000", 3), ("60000", 5)]
    assert rows["sasl.kerberos.service.name"][:2] == (None, 5)
