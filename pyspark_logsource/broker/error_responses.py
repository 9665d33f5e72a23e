"""What a client is told when a request fails: the error code and message of an exception
(:func:`error_fields`, Kafka's ``ApiError.fromThrowable``), and each API's error response
(:func:`error_response`).

A handler that fails as a whole (a bad group id, a broker bug) still owes the
client a response in the API's own shape; this is Kafka's
``AbstractRequest.getErrorResponse``. A handler that fails for one entry (a
partition, a topic, a group) puts :func:`error_fields` of the error in that entry.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .. import protocol as p
from ..errors import UnknownServerError, code_of
from ..protocol import acl_messages as am
from ..protocol import admin_config_messages as acm
from ..protocol import consumer_group_messages as cgm
from ..protocol import epoch_messages as em
from ..protocol import group_messages as g
from ..protocol import local_read_messages as lrm
from ..protocol import producer_txn_messages as ptm
from ..protocol import quota_messages as qm
from ..protocol import reassign_messages as rm
from ..protocol import records_admin_messages as ra
from ..protocol import sasl_messages as sm
from ..protocol import txn_admin_messages as tam
from ..protocol import txn_messages as tm

#: the message of UNKNOWN_SERVER_ERROR: the exception's own text and traceback go to the broker's log only
UNKNOWN_SERVER_ERROR_MESSAGE = "the broker hit an unexpected error; its log has the details"


class ErrorFields(NamedTuple):
    """The error code and message of a response (or of one entry of it)."""

    code: int
    message: str


def error_fields(exc: BaseException) -> ErrorFields:
    """The code and message that answer ``exc``: a typed broker error's own code and message; anything
    else (a bug, a client-side error) is UNKNOWN_SERVER_ERROR with a fixed message, never the exception's
    text, which may name paths, hosts or secrets (as Kafka, which sends no message with that code)."""
    code = code_of(exc)
    if code == UnknownServerError.code:
        return ErrorFields(code, UNKNOWN_SERVER_ERROR_MESSAGE)
    return ErrorFields(code, exc.message or str(exc))  # type: ignore[attr-defined]  (a LogSourceError)


def error_response(api_key: int, req: Any, code: int, message: str | None) -> Any:
    """The response to ``req`` where every entry (or the top level) carries ``code``."""
    k = p.ApiKey
    if api_key == k.PRODUCE:
        return p.ProduceResponse(
            [
                p.ProducePartitionResponse(x.topic, x.partition, code, error_message=message)
                for x in req.partitions
            ]
        )
    if api_key == k.FETCH:
        return p.FetchResponse(
            [p.FetchPartitionResponse(x.topic, x.partition, code) for x in req.partitions], error_code=code
        )
    if api_key == k.LIST_OFFSETS:
        return p.ListOffsetsResponse(
            [p.ListOffsetsPartitionResponse(x.topic, x.partition, code) for x in req.partitions]
        )
    if api_key == k.METADATA:
        return p.MetadataResponse(topics=[p.TopicMetadata(t, error_code=code) for t in req.topics or ()])
    if api_key == k.OFFSET_COMMIT:
        return p.OffsetCommitResponse(
            [p.OffsetCommitPartitionResponse(x.topic, x.partition, code) for x in req.partitions]
        )
    if api_key == k.OFFSET_FETCH:
        return p.OffsetFetchResponse(
            [p.OffsetFetchPartitionResponse(t, q, error_code=code) for t, q in req.partitions or ()],
            error_code=code,
        )
    if api_key == k.FIND_COORDINATOR:
        return p.FindCoordinatorResponse(code, message, key=req.key)
    if api_key == k.API_VERSIONS:
        return p.ApiVersionsResponse(code)
    if api_key == k.CREATE_TOPICS:
        return p.CreateTopicsResponse([p.CreateTopicResult(t.name, code, message) for t in req.topics])
    if api_key == k.DELETE_TOPICS:
        return p.DeleteTopicsResponse([p.DeleteTopicResult(t, code, message) for t in req.topics])
    if api_key == k.INIT_PRODUCER_ID:
        return p.InitProducerIdResponse(code)
    if api_key == k.DESCRIBE_CONFIGS:
        return p.DescribeConfigsResponse(
            [p.DescribeConfigsResult(r.resource_type, r.resource_name, code, message) for r in req.resources]
        )
    if api_key == k.DESCRIBE_CLUSTER:
        return p.DescribeClusterResponse(code, message)
    if api_key in (k.JOIN_GROUP, k.SYNC_GROUP, k.HEARTBEAT, k.LIST_GROUPS):
        cls = {
            k.JOIN_GROUP: g.JoinGroupResponse,
            k.SYNC_GROUP: g.SyncGroupResponse,
            k.HEARTBEAT: g.HeartbeatResponse,
            k.LIST_GROUPS: g.ListGroupsResponse,
        }[api_key]
        return cls(error_code=code)
    if api_key == k.LEAVE_GROUP:
        return g.LeaveGroupResponse(code, [g.LeaveGroupMemberResponse(mid, code) for mid in req.members])
    if api_key == k.DESCRIBE_GROUPS:
        return g.DescribeGroupsResponse(
            [g.DescribedGroup(gid, code, error_message=message) for gid in req.groups]
        )
    if api_key == k.ADD_PARTITIONS_TO_TXN:
        return ptm.AddPartitionsToTxnResponse(
            {x.transactional_id: dict.fromkeys(x.partitions, code) for x in req.transactions}
        )
    if api_key == k.TXN_OFFSET_COMMIT:
        return ptm.TxnOffsetCommitResponse({(o.topic, o.partition): code for o in req.offsets})
    if api_key == k.ADD_OFFSETS_TO_TXN:
        return ptm.AddOffsetsToTxnResponse(code)
    if api_key == k.END_TXN:
        return ptm.EndTxnResponse(code)
    if api_key == k.DELETE_RECORDS:
        return ra.DeleteRecordsResponse(
            [ra.DeleteRecordsPartitionResult(x.topic, x.partition, -1, code) for x in req.partitions]
        )
    if api_key == k.DESCRIBE_LOG_DIRS:
        return ra.DescribeLogDirsResponse(error_code=code)
    if api_key == k.DELETE_GROUPS:
        return ra.DeleteGroupsResponse([(gid, code) for gid in req.groups])
    if api_key == k.OFFSET_DELETE:
        return ra.OffsetDeleteResponse(code)
    if api_key == k.ELECT_LEADERS:
        parts = [(t, q) for t, qs in (req.topic_partitions or {}).items() for q in qs]
        return rm.ElectLeadersResponse([rm.PartitionError(t, q, code, message) for t, q in parts], code)
    if api_key == k.ALTER_PARTITION_REASSIGNMENTS:
        return rm.AlterPartitionReassignmentsResponse([], code, message)
    if api_key == k.LIST_PARTITION_REASSIGNMENTS:
        return rm.ListPartitionReassignmentsResponse([], code, message)
    if api_key == k.LIST_TRANSACTIONS:
        return tam.ListTransactionsResponse(error_code=code)
    if api_key == k.DESCRIBE_TRANSACTIONS:
        return tam.DescribeTransactionsResponse(
            [tam.TransactionDescription(t, code) for t in req.transactional_ids]
        )
    if api_key == k.DESCRIBE_PRODUCERS:
        return tam.DescribeProducersResponse(
            [tam.PartitionProducers(t, q, code, message) for t, q in req.partitions]
        )
    if api_key == k.CONSUMER_GROUP_HEARTBEAT:
        return cgm.ConsumerGroupHeartbeatResponse(code, message)
    if api_key == k.CONSUMER_GROUP_DESCRIBE:
        return cgm.ConsumerGroupDescribeResponse(
            [cgm.DescribedConsumerGroup(gid, code, message) for gid in req.group_ids]
        )
    if api_key == k.CREATE_PARTITIONS:
        return acm.CreatePartitionsResponse(
            [acm.CreatePartitionsResult(t.name, code, message) for t in req.topics]
        )
    if api_key in (k.ALTER_CONFIGS, k.INCREMENTAL_ALTER_CONFIGS):
        results = [
            acm.AlterConfigsResult(r.resource_type, r.resource_name, code, message) for r in req.resources
        ]
        if api_key == k.ALTER_CONFIGS:
            return acm.AlterConfigsResponse(results)
        return acm.IncrementalAlterConfigsResponse(results)
    if api_key == k.DESCRIBE_CLIENT_QUOTAS:
        return qm.DescribeClientQuotasResponse(code, message, None)
    if api_key == k.ALTER_CLIENT_QUOTAS:
        return qm.AlterClientQuotasResponse(
            [qm.QuotaAlterResult(e.entity, code, message) for e in req.entries]
        )
    if api_key == lrm.LOCAL_READ_GRANT_KEY:
        return lrm.LocalReadGrantResponse(code, message)
    if api_key == tm.STAGED_TXNS_KEY:
        return tm.StagedTxnsResponse(code, message)
    return _security_or_replication_error_response(api_key, req, code, message)


def _security_or_replication_error_response(api_key: int, req: Any, code: int, message: str | None) -> Any:
    k = p.ApiKey
    if api_key == k.SASL_HANDSHAKE:
        return sm.SaslHandshakeResponse(code, [])
    if api_key == k.SASL_AUTHENTICATE:
        return sm.SaslAuthenticateResponse(code, message, b"")
    if api_key == k.DESCRIBE_USER_SCRAM_CREDENTIALS:
        return sm.DescribeUserScramCredentialsResponse([], code, message)
    if api_key == k.ALTER_USER_SCRAM_CREDENTIALS:
        users = [name for name, _ in req.deletions] + [u.name for u in req.upsertions]
        return sm.AlterUserScramCredentialsResponse([(u, code, message) for u in dict.fromkeys(users)])
    if api_key == k.DESCRIBE_ACLS:
        return am.DescribeAclsResponse(code, message, [])
    if api_key == k.CREATE_ACLS:
        return am.CreateAclsResponse([(code, message) for _ in req.creations])
    if api_key == k.DELETE_ACLS:
        return am.DeleteAclsResponse([am.DeleteAclsFilterResult(code, message, []) for _ in req.filters])
    if api_key == k.OFFSET_FOR_LEADER_EPOCH:
        return em.OffsetForLeaderEpochResponse(
            [em.EpochEndOffset(x.topic, x.partition, code) for x in req.partitions]
        )
    if api_key == k.WRITE_TXN_MARKERS:
        return tm.WriteTxnMarkersResponse(
            [tm.TxnMarkerResult(m.producer_id, dict.fromkeys(m.partitions, code)) for m in req.markers]
        )
    raise ValueError(f"no error response for api key {api_key}")
