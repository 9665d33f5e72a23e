"""The authorization rules of the admin, transaction and consumer-group APIs added after :mod:`.checks`'
first table (Kafka's ``KafkaApis`` checks for each), merged into :data:`.checks.RULES` by
:data:`ALL_RULES`.

Where Kafka answers per entry (configs, partitions, groups) the denied entries get their own code and
the rest reach the handler (a :class:`~.checks.Split`); where Kafka checks one resource for the whole
request (a transactional id, a group, the cluster) the request is denied as a whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....errors import ClusterAuthorizationFailed, GroupAuthorizationFailed, TopicAuthorizationFailed
from ....protocol import RESOURCE_TOPIC, ApiKey
from ....protocol import admin_config_messages as acm
from ....protocol import records_admin_messages as ra
from .checks import (
    RULES,
    TOPIC_DENIED,
    Check,
    Split,
    _entries_split,
    _msg,
    _partitions_split,
    cluster_rule,
)
from .model import CLUSTER_NAME, Operation, ResourceType

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
Op = Operation


def _alter_configs(req: Any, c: Check) -> Split | None:
    ok = c.topic_ok()

    def allowed(r: Any) -> bool:
        if r.resource_type == RESOURCE_TOPIC:
            return ok(Op.ALTER_CONFIGS, r.resource_name)
        return c.allowed(Op.ALTER_CONFIGS, C, CLUSTER_NAME)

    def denied(r: Any) -> Any:
        code = TOPIC_DENIED if r.resource_type == RESOURCE_TOPIC else ClusterAuthorizationFailed.code
        return acm.AlterConfigsResult(r.resource_type, r.resource_name, code, "not authorized")

    return _entries_split(req, "resources", allowed, denied, "results")


def _create_partitions(req: Any, c: Check) -> Split | None:
    ok = c.topic_ok()
    return _entries_split(
        req,
        "topics",
        lambda t: ok(Op.ALTER, t.name),
        lambda t: acm.CreatePartitionsResult(t.name, TOPIC_DENIED, _msg(t.name)),
        "results",
    )


def _delete_records(req: Any, c: Check) -> Split | None:
    return _partitions_split(
        req,
        "partitions",
        Op.DELETE,
        c,
        lambda x: ra.DeleteRecordsPartitionResult(x.topic, x.partition, -1, TOPIC_DENIED),
        "partitions",
    )


def _delete_groups(req: Any, c: Check) -> Split | None:
    return _entries_split(
        req,
        "groups",
        lambda gid: c.allowed(Op.DELETE, G, gid),
        lambda gid: (gid, GroupAuthorizationFailed.code),
        "results",
    )


def _offset_delete(req: Any, c: Check) -> None:
    c.group(Op.DELETE, req.group_id)
    ok = c.topic_ok()
    for topic, _ in req.partitions:
        if not ok(Op.READ, topic):
            raise TopicAuthorizationFailed(_msg(topic))


def _topics_read(topics: Any, c: Check) -> None:
    ok = c.topic_ok()
    for topic in topics:
        if not ok(Op.READ, topic):
            raise TopicAuthorizationFailed(_msg(topic))


def _add_partitions_to_txn(req: Any, c: Check) -> None:
    if any(x.verify_only for x in req.transactions):  # a leader's KIP-890 verification (v4)
        c.cluster(Op.CLUSTER_ACTION)
        return
    ok = c.topic_ok()
    for x in req.transactions:
        c.txn_id(Op.WRITE, x.transactional_id)
        for topic, _ in x.partitions:
            if not ok(Op.WRITE, topic):
                raise TopicAuthorizationFailed(_msg(topic))


def _add_offsets_to_txn(req: Any, c: Check) -> None:
    c.txn_id(Op.WRITE, req.transactional_id)
    c.group(Op.READ, req.group_id)


def _end_txn(req: Any, c: Check) -> None:
    c.txn_id(Op.WRITE, req.transactional_id)


def _txn_offset_commit(req: Any, c: Check) -> None:
    c.txn_id(Op.WRITE, req.transactional_id)
    c.group(Op.READ, req.group_id)
    _topics_read(dict.fromkeys(o.topic for o in req.offsets), c)


def _list_transactions(req: Any, c: Check) -> Split:
    def keep(resp: Any) -> Any:
        resp.transactions = [
            t for t in resp.transactions if c.allowed(Op.DESCRIBE, X, t.transactional_id, audit_denial=False)
        ]
        return resp

    return Split(req, keep)


def _describe_transactions(req: Any, c: Check) -> None:
    for tid in req.transactional_ids:
        c.txn_id(Op.DESCRIBE, tid)


def _describe_producers(req: Any, c: Check) -> None:
    _topics_read(dict.fromkeys(t for t, _ in req.partitions), c)


def _consumer_group_heartbeat(req: Any, c: Check) -> None:
    c.group(Op.READ, req.group_id)
    ok = c.topic_ok()
    for topic in req.subscribed_topic_names or ():
        if not ok(Op.DESCRIBE, topic):
            raise TopicAuthorizationFailed(_msg(topic))


def _consumer_group_describe(req: Any, c: Check) -> Split | None:
    from ....protocol.consumer_group_messages import DescribedConsumerGroup

    return _entries_split(
        req,
        "group_ids",
        lambda gid: c.allowed(Op.DESCRIBE, G, gid),
        lambda gid: DescribedConsumerGroup(gid, GroupAuthorizationFailed.code, "not authorized"),
        "groups",
    )


EXTRA_RULES: dict[int, Callable[[Any, Check], Split | None]] = {
    ApiKey.ALTER_CONFIGS: _alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _alter_configs,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.DESCRIBE_LOG_DIRS: cluster_rule(Op.DESCRIBE),
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.ELECT_LEADERS: cluster_rule(Op.ALTER),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: cluster_rule(Op.ALTER),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: cluster_rule(Op.DESCRIBE),
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.END_TXN: _end_txn,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    # client quotas: Kafka's KafkaApis checks DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster
    ApiKey.DESCRIBE_CLIENT_QUOTAS: cluster_rule(Op.DESCRIBE_CONFIGS),
    ApiKey.ALTER_CLIENT_QUOTAS: cluster_rule(Op.ALTER_CONFIGS),
}

#: every API's rule: the first table and these
ALL_RULES: dict[int, Callable[[Any, Check], Split | None]] = {**RULES, **EXTRA_RULES}
