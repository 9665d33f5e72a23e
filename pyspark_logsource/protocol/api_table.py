"""The API table: each API Kafka clients may send us, its typed messages and adapters, and one request
and one response codec per version (:class:`Api`, :data:`APIS`); what ApiVersions advertises
(:data:`SUPPORTED_VERSIONS`) and the (key, version) -> codecs index (:data:`CODECS`). A new API family
adds its rows here; the framing that uses them is :mod:`.codecs`."""

from __future__ import annotations

from typing import Any

from . import acl_messages as aclm
from . import adapters as a
from . import admin_adapters as aa
from . import admin_config_adapters as aca
from . import admin_config_messages as acm
from . import admin_config_schemas as acs
from . import admin_messages as am
from . import consumer_group_messages as cgm
from . import coordinator_adapters as ca
from . import coordinator_messages as cm
from . import epoch_messages as em
from . import group_adapters as ga
from . import group_messages as gm
from . import local_read_messages as lrm
from . import messages as m
from . import producer_txn_messages as ptm
from . import quota_messages as qm
from . import reassign_messages as rm
from . import records_admin_messages as ram
from . import records_admin_schemas as ras
from . import sasl_messages as sm
from . import txn_admin_messages as tam
from . import txn_messages as tm
from .schema import Codec, F, Message
from .schemas import API_VERSIONS_REQUEST, SCHEMAS

#: Tag of our extension field in ApiVersionsRequest (v3+): the client accepts Arrow-bodied
#: batches in Fetch. Kafka brokers skip unknown tags, so it is safe to send to any broker.
LOGSOURCE_ARROW_TAG = 10_000

_API_VERSIONS_REQUEST_EXT = Message(
    API_VERSIONS_REQUEST.name,
    API_VERSIONS_REQUEST.valid,
    API_VERSIONS_REQUEST.flexible,
    API_VERSIONS_REQUEST.fields
    + (F("logsource_arrow_body", "bool", "3+", tag=LOGSOURCE_ARROW_TAG, tagged="3+", default=False),),
)


class Api:
    """An API: its typed messages, adapters and one codec pair per version."""

    __slots__ = (
        "key",
        "request",
        "response",
        "req_to",
        "req_from",
        "resp_to",
        "resp_from",
        "min_version",
        "max_version",
        "codecs",
    )

    def __init__(
        self,
        key: int,
        request: type,
        response: type,
        adapters: str,
        module: Any = a,
        schemas: tuple[Message, Message] | None = None,
    ) -> None:
        self.key, self.request, self.response = key, request, response
        self.req_to = getattr(module, f"{adapters}_req_to")
        self.req_from = getattr(module, f"{adapters}_req_from")
        self.resp_to = getattr(module, f"{adapters}_resp_to")
        self.resp_from = getattr(module, f"{adapters}_resp_from")
        req_schema, resp_schema = SCHEMAS[key] if schemas is None else schemas
        if key == m.ApiKey.API_VERSIONS:
            req_schema = _API_VERSIONS_REQUEST_EXT
        self.min_version, self.max_version = req_schema.version_range()
        #: version -> (request codec, response codec)
        self.codecs = {
            v: (Codec(req_schema, v), Codec(resp_schema, v))
            for v in range(self.min_version, self.max_version + 1)
        }


APIS: dict[int, Api] = {
    api.key: api
    for api in [
        Api(m.ApiKey.PRODUCE, m.ProduceRequest, m.ProduceResponse, "produce"),
        Api(m.ApiKey.FETCH, m.FetchRequest, m.FetchResponse, "fetch"),
        Api(m.ApiKey.LIST_OFFSETS, m.ListOffsetsRequest, m.ListOffsetsResponse, "list_offsets"),
        Api(m.ApiKey.METADATA, m.MetadataRequest, m.MetadataResponse, "metadata"),
        Api(m.ApiKey.OFFSET_COMMIT, cm.OffsetCommitRequest, cm.OffsetCommitResponse, "offset_commit", ca),
        Api(m.ApiKey.OFFSET_FETCH, cm.OffsetFetchRequest, cm.OffsetFetchResponse, "offset_fetch", ca),
        Api(
            m.ApiKey.FIND_COORDINATOR,
            cm.FindCoordinatorRequest,
            cm.FindCoordinatorResponse,
            "find_coordinator",
            ca,
        ),
        Api(m.ApiKey.JOIN_GROUP, gm.JoinGroupRequest, gm.JoinGroupResponse, "join_group", ga),
        Api(m.ApiKey.HEARTBEAT, gm.HeartbeatRequest, gm.HeartbeatResponse, "heartbeat", ga),
        Api(m.ApiKey.LEAVE_GROUP, gm.LeaveGroupRequest, gm.LeaveGroupResponse, "leave_group", ga),
        Api(m.ApiKey.SYNC_GROUP, gm.SyncGroupRequest, gm.SyncGroupResponse, "sync_group", ga),
        Api(
            m.ApiKey.DESCRIBE_GROUPS,
            gm.DescribeGroupsRequest,
            gm.DescribeGroupsResponse,
            "describe_groups",
            ga,
        ),
        Api(m.ApiKey.LIST_GROUPS, gm.ListGroupsRequest, gm.ListGroupsResponse, "list_groups", ga),
        Api(m.ApiKey.API_VERSIONS, m.ApiVersionsRequest, m.ApiVersionsResponse, "api_versions"),
        Api(m.ApiKey.CREATE_TOPICS, am.CreateTopicsRequest, am.CreateTopicsResponse, "create_topics", aa),
        Api(m.ApiKey.DELETE_TOPICS, am.DeleteTopicsRequest, am.DeleteTopicsResponse, "delete_topics", aa),
        Api(m.ApiKey.INIT_PRODUCER_ID, m.InitProducerIdRequest, m.InitProducerIdResponse, "init_pid"),
        Api(
            m.ApiKey.OFFSET_FOR_LEADER_EPOCH,
            em.OffsetForLeaderEpochRequest,
            em.OffsetForLeaderEpochResponse,
            "offset_for_leader_epoch",
            em,
        ),
        Api(
            m.ApiKey.DESCRIBE_CONFIGS,
            am.DescribeConfigsRequest,
            am.DescribeConfigsResponse,
            "describe_configs",
            aa,
        ),
        Api(
            m.ApiKey.DESCRIBE_CLUSTER,
            m.DescribeClusterRequest,
            m.DescribeClusterResponse,
            "describe_cluster",
            aa,
        ),
        Api(
            m.ApiKey.WRITE_TXN_MARKERS,
            tm.WriteTxnMarkersRequest,
            tm.WriteTxnMarkersResponse,
            "write_txn_markers",
            tm,
        ),
        Api(
            m.ApiKey.CREATE_PARTITIONS,
            acm.CreatePartitionsRequest,
            acm.CreatePartitionsResponse,
            "create_partitions",
            aca,
            (acs.CREATE_PARTITIONS_REQUEST, acs.CREATE_PARTITIONS_RESPONSE),
        ),
        Api(
            m.ApiKey.ALTER_CONFIGS,
            acm.AlterConfigsRequest,
            acm.AlterConfigsResponse,
            "alter_configs",
            aca,
            (acs.ALTER_CONFIGS_REQUEST, acs.ALTER_CONFIGS_RESPONSE),
        ),
        Api(
            m.ApiKey.INCREMENTAL_ALTER_CONFIGS,
            acm.IncrementalAlterConfigsRequest,
            acm.IncrementalAlterConfigsResponse,
            "incremental_alter_configs",
            aca,
            (acs.INCREMENTAL_ALTER_CONFIGS_REQUEST, acs.INCREMENTAL_ALTER_CONFIGS_RESPONSE),
        ),
        Api(
            m.ApiKey.DELETE_RECORDS,
            ram.DeleteRecordsRequest,
            ram.DeleteRecordsResponse,
            "delete_records",
            ram,
            (ras.DELETE_RECORDS_REQUEST, ras.DELETE_RECORDS_RESPONSE),
        ),
        Api(
            m.ApiKey.DESCRIBE_LOG_DIRS,
            ram.DescribeLogDirsRequest,
            ram.DescribeLogDirsResponse,
            "describe_log_dirs",
            ram,
            (ras.DESCRIBE_LOG_DIRS_REQUEST, ras.DESCRIBE_LOG_DIRS_RESPONSE),
        ),
        Api(
            m.ApiKey.DELETE_GROUPS,
            ram.DeleteGroupsRequest,
            ram.DeleteGroupsResponse,
            "delete_groups",
            ram,
            (ras.DELETE_GROUPS_REQUEST, ras.DELETE_GROUPS_RESPONSE),
        ),
        Api(
            m.ApiKey.OFFSET_DELETE,
            ram.OffsetDeleteRequest,
            ram.OffsetDeleteResponse,
            "offset_delete",
            ram,
            (ras.OFFSET_DELETE_REQUEST, ras.OFFSET_DELETE_RESPONSE),
        ),
        Api(
            m.ApiKey.ADD_PARTITIONS_TO_TXN,
            ptm.AddPartitionsToTxnRequest,
            ptm.AddPartitionsToTxnResponse,
            "add_partitions",
            ptm,
        ),
        Api(
            m.ApiKey.ADD_OFFSETS_TO_TXN,
            ptm.AddOffsetsToTxnRequest,
            ptm.AddOffsetsToTxnResponse,
            "add_offsets",
            ptm,
        ),
        Api(m.ApiKey.END_TXN, ptm.EndTxnRequest, ptm.EndTxnResponse, "end_txn", ptm),
        Api(
            m.ApiKey.TXN_OFFSET_COMMIT,
            ptm.TxnOffsetCommitRequest,
            ptm.TxnOffsetCommitResponse,
            "txn_offset_commit",
            ptm,
        ),
        Api(
            m.ApiKey.ELECT_LEADERS,
            rm.ElectLeadersRequest,
            rm.ElectLeadersResponse,
            "elect_leaders",
            rm,
            (rm.ELECT_LEADERS_REQUEST, rm.ELECT_LEADERS_RESPONSE),
        ),
        Api(
            m.ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            rm.AlterPartitionReassignmentsRequest,
            rm.AlterPartitionReassignmentsResponse,
            "alter_reassignments",
            rm,
            (rm.ALTER_PARTITION_REASSIGNMENTS_REQUEST, rm.ALTER_PARTITION_REASSIGNMENTS_RESPONSE),
        ),
        Api(
            m.ApiKey.LIST_PARTITION_REASSIGNMENTS,
            rm.ListPartitionReassignmentsRequest,
            rm.ListPartitionReassignmentsResponse,
            "list_reassignments",
            rm,
            (rm.LIST_PARTITION_REASSIGNMENTS_REQUEST, rm.LIST_PARTITION_REASSIGNMENTS_RESPONSE),
        ),
        # SASL and SCRAM credentials (sasl_messages.py: schemas, messages and adapters together)
        *(
            Api(key, req, resp, name, sm, schemas)
            for key, req, resp, name, schemas in (
                (
                    m.ApiKey.SASL_HANDSHAKE,
                    sm.SaslHandshakeRequest,
                    sm.SaslHandshakeResponse,
                    "sasl_handshake",
                    (sm.SASL_HANDSHAKE_REQUEST, sm.SASL_HANDSHAKE_RESPONSE),
                ),
                (
                    m.ApiKey.SASL_AUTHENTICATE,
                    sm.SaslAuthenticateRequest,
                    sm.SaslAuthenticateResponse,
                    "sasl_authenticate",
                    (sm.SASL_AUTHENTICATE_REQUEST, sm.SASL_AUTHENTICATE_RESPONSE),
                ),
                (
                    m.ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                    sm.DescribeUserScramCredentialsRequest,
                    sm.DescribeUserScramCredentialsResponse,
                    "describe_scram",
                    (sm.DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST, sm.DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE),
                ),
                (
                    m.ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                    sm.AlterUserScramCredentialsRequest,
                    sm.AlterUserScramCredentialsResponse,
                    "alter_scram",
                    (sm.ALTER_USER_SCRAM_CREDENTIALS_REQUEST, sm.ALTER_USER_SCRAM_CREDENTIALS_RESPONSE),
                ),
            )
        ),
        Api(
            m.ApiKey.CONSUMER_GROUP_HEARTBEAT,
            cgm.ConsumerGroupHeartbeatRequest,
            cgm.ConsumerGroupHeartbeatResponse,
            "consumer_heartbeat",
            cgm,
            (cgm.CONSUMER_GROUP_HEARTBEAT_REQUEST, cgm.CONSUMER_GROUP_HEARTBEAT_RESPONSE),
        ),
        Api(
            m.ApiKey.CONSUMER_GROUP_DESCRIBE,
            cgm.ConsumerGroupDescribeRequest,
            cgm.ConsumerGroupDescribeResponse,
            "consumer_describe",
            cgm,
            (cgm.CONSUMER_GROUP_DESCRIBE_REQUEST, cgm.CONSUMER_GROUP_DESCRIBE_RESPONSE),
        ),
        Api(
            m.ApiKey.DESCRIBE_PRODUCERS,
            tam.DescribeProducersRequest,
            tam.DescribeProducersResponse,
            "describe_producers",
            tam,
            (tam.DESCRIBE_PRODUCERS_REQUEST, tam.DESCRIBE_PRODUCERS_RESPONSE),
        ),
        Api(
            m.ApiKey.DESCRIBE_TRANSACTIONS,
            tam.DescribeTransactionsRequest,
            tam.DescribeTransactionsResponse,
            "describe_transactions",
            tam,
            (tam.DESCRIBE_TRANSACTIONS_REQUEST, tam.DESCRIBE_TRANSACTIONS_RESPONSE),
        ),
        Api(
            m.ApiKey.LIST_TRANSACTIONS,
            tam.ListTransactionsRequest,
            tam.ListTransactionsResponse,
            "list_transactions",
            tam,
            (tam.LIST_TRANSACTIONS_REQUEST, tam.LIST_TRANSACTIONS_RESPONSE),
        ),
        # ACLs (acl_messages.py: schemas, messages and adapters together)
        *(
            Api(key, req, resp, name, aclm, schemas)
            for key, req, resp, name, schemas in (
                (
                    m.ApiKey.DESCRIBE_ACLS,
                    aclm.DescribeAclsRequest,
                    aclm.DescribeAclsResponse,
                    "describe_acls",
                    (aclm.DESCRIBE_ACLS_REQUEST, aclm.DESCRIBE_ACLS_RESPONSE),
                ),
                (
                    m.ApiKey.CREATE_ACLS,
                    aclm.CreateAclsRequest,
                    aclm.CreateAclsResponse,
                    "create_acls",
                    (aclm.CREATE_ACLS_REQUEST, aclm.CREATE_ACLS_RESPONSE),
                ),
                (
                    m.ApiKey.DELETE_ACLS,
                    aclm.DeleteAclsRequest,
                    aclm.DeleteAclsResponse,
                    "delete_acls",
                    (aclm.DELETE_ACLS_REQUEST, aclm.DELETE_ACLS_RESPONSE),
                ),
            )
        ),
        # client quotas (quota_messages.py: schemas, messages and adapters together)
        *(
            Api(key, req, resp, name, qm, schemas)
            for key, req, resp, name, schemas in (
                (
                    m.ApiKey.DESCRIBE_CLIENT_QUOTAS,
                    qm.DescribeClientQuotasRequest,
                    qm.DescribeClientQuotasResponse,
                    "describe_client_quotas",
                    (qm.DESCRIBE_CLIENT_QUOTAS_REQUEST, qm.DESCRIBE_CLIENT_QUOTAS_RESPONSE),
                ),
                (
                    m.ApiKey.ALTER_CLIENT_QUOTAS,
                    qm.AlterClientQuotasRequest,
                    qm.AlterClientQuotasResponse,
                    "alter_client_quotas",
                    (qm.ALTER_CLIENT_QUOTAS_REQUEST, qm.ALTER_CLIENT_QUOTAS_RESPONSE),
                ),
            )
        ),
        # our extension (not Kafka's): the staged transactions of a Spark write
        Api(
            tm.STAGED_TXNS_KEY,
            tm.StagedTxnsRequest,
            tm.StagedTxnsResponse,
            "staged_txns",
            tm,
            (tm.STAGED_TXNS_REQUEST, tm.STAGED_TXNS_RESPONSE),
        ),
        # our extension: a local short-circuit read's grant (the fds come over the broker's Unix socket)
        Api(
            lrm.LOCAL_READ_GRANT_KEY,
            lrm.LocalReadGrantRequest,
            lrm.LocalReadGrantResponse,
            "local_read_grant",
            lrm,
            (lrm.LOCAL_READ_GRANT_REQUEST, lrm.LOCAL_READ_GRANT_RESPONSE),
        ),
    ]
}

#: api key -> (min version, max version) this implementation speaks; what ApiVersions advertises.
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    k: (api.min_version, api.max_version) for k, api in APIS.items()
}

#: (api key, version) -> (request codec, response codec): the table.
CODECS: dict[tuple[int, int], tuple[Codec, Codec]] = {
    (k, v): pair for k, api in APIS.items() for v, pair in api.codecs.items()
}
