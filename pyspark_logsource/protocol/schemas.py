"""Kafka's request and response schemas, transcribed from Kafka's message JSON.

Field names are the JSON names in snake_case. ``valid`` is the range this
broker implements (it may stop below Kafka's newest version, for example
before topic ids replace topic names); the field version specs are Kafka's.
The reference is ``clients/src/main/resources/common/message/<Name>.json`` in
apache/kafka.
"""

from __future__ import annotations

from .schema import F, Message, message

I32_MIN = -(1 << 31)

# ------------------------------------------------------------------ ApiVersions (18)

API_VERSIONS_REQUEST = message(
    "ApiVersionsRequest",
    "0-4",
    "3+",
    F("client_software_name", "string", "3+"),
    F("client_software_version", "string", "3+"),
)
API_VERSIONS_RESPONSE = message(
    "ApiVersionsResponse",
    "0-4",
    "3+",
    F("error_code", "int16"),
    F(
        "api_keys",
        "[]ApiVersion",
        "0+",
        F("api_key", "int16"),
        F("min_version", "int16"),
        F("max_version", "int16"),
    ),
    F("throttle_time_ms", "int32", "1+"),
    F(
        "supported_features",
        "[]SupportedFeatureKey",
        "3+",
        F("name", "string", "3+"),
        F("min_version", "int16", "3+"),
        F("max_version", "int16", "3+"),
        tag=0,
        tagged="3+",
    ),
    F("finalized_features_epoch", "int64", "3+", tag=1, tagged="3+", default=-1),
    F(
        "finalized_features",
        "[]FinalizedFeatureKey",
        "3+",
        F("name", "string", "3+"),
        F("max_version_level", "int16", "3+"),
        F("min_version_level", "int16", "3+"),
        tag=2,
        tagged="3+",
    ),
    F("zk_migration_ready", "bool", "3+", tag=3, tagged="3+", default=False),
)

# ------------------------------------------------------------------ Metadata (3)

METADATA_REQUEST = message(
    "MetadataRequest",
    "0-12",
    "9+",
    F(
        "topics",
        "[]MetadataRequestTopic",
        "0+",
        F("topic_id", "uuid", "10+"),
        F("name", "string", "0+", nullable="10+"),
        nullable="1+",
    ),
    F("allow_auto_topic_creation", "bool", "4+", default=True),
    F("include_cluster_authorized_operations", "bool", "8-10"),
    F("include_topic_authorized_operations", "bool", "8+"),
)
METADATA_RESPONSE = message(
    "MetadataResponse",
    "0-12",
    "9+",
    F("throttle_time_ms", "int32", "3+"),
    F(
        "brokers",
        "[]MetadataResponseBroker",
        "0+",
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", "1+", nullable="1+", default="null"),
    ),
    F("cluster_id", "string", "2+", nullable="2+", default="null"),
    F("controller_id", "int32", "1+", default=-1),
    F(
        "topics",
        "[]MetadataResponseTopic",
        "0+",
        F("error_code", "int16"),
        F("name", "string", "0+", nullable="12+"),
        F("topic_id", "uuid", "10+"),
        F("is_internal", "bool", "1+", default=False),
        F(
            "partitions",
            "[]MetadataResponsePartition",
            "0+",
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", "7+", default=-1),
            F("replica_nodes", "[]int32"),
            F("isr_nodes", "[]int32"),
            F("offline_replicas", "[]int32", "5+"),
        ),
        F("topic_authorized_operations", "int32", "8+", default=I32_MIN),
    ),
    F("cluster_authorized_operations", "int32", "8-10", default=I32_MIN),
)

# ------------------------------------------------------------------ Produce (0)

PRODUCE_REQUEST = message(
    "ProduceRequest",
    "3-9",
    "9+",
    F("transactional_id", "string", "3+", nullable="3+", default="null"),
    F("acks", "int16"),
    F("timeout_ms", "int32"),
    F(
        "topic_data",
        "[]TopicProduceData",
        "0+",
        F("name", "string", "0-12"),
        F(
            "partition_data",
            "[]PartitionProduceData",
            "0+",
            F("index", "int32"),
            F("records", "records", "0+", nullable="0+"),
        ),
    ),
)
PRODUCE_RESPONSE = message(
    "ProduceResponse",
    "3-9",
    "9+",
    F(
        "responses",
        "[]TopicProduceResponse",
        "0+",
        F("name", "string", "0-12"),
        F(
            "partition_responses",
            "[]PartitionProduceResponse",
            "0+",
            F("index", "int32"),
            F("error_code", "int16"),
            F("base_offset", "int64"),
            F("log_append_time_ms", "int64", "2+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F(
                "record_errors",
                "[]BatchIndexAndErrorMessage",
                "8+",
                F("batch_index", "int32", "8+"),
                F("batch_index_error_message", "string", "8+", nullable="8+", default="null"),
            ),
            F("error_message", "string", "8+", nullable="8+", default="null"),
        ),
    ),
    F("throttle_time_ms", "int32", "1+"),
)

# ------------------------------------------------------------------ Fetch (1)

FETCH_REQUEST = message(
    "FetchRequest",
    "4-12",
    "12+",
    F("cluster_id", "string", "12+", nullable="12+", tag=0, tagged="12+", default="null"),
    F("replica_id", "int32", "0-14", default=-1),
    F("max_wait_ms", "int32"),
    F("min_bytes", "int32"),
    F("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    F("isolation_level", "int8", "4+"),
    F("session_id", "int32", "7+"),
    F("session_epoch", "int32", "7+", default=-1),
    F(
        "topics",
        "[]FetchTopic",
        "0+",
        F("topic", "string", "0-12"),
        F(
            "partitions",
            "[]FetchPartition",
            "0+",
            F("partition", "int32"),
            F("current_leader_epoch", "int32", "9+", default=-1),
            F("fetch_offset", "int64"),
            F("last_fetched_epoch", "int32", "12+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("partition_max_bytes", "int32"),
        ),
    ),
    F(
        "forgotten_topics_data",
        "[]ForgottenTopic",
        "7+",
        F("topic", "string", "7-12"),
        F("partitions", "[]int32", "7+"),
    ),
    F("rack_id", "string", "11+", default=""),
)
FETCH_RESPONSE = message(
    "FetchResponse",
    "4-12",
    "12+",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "7+"),
    F("session_id", "int32", "7+"),
    F(
        "responses",
        "[]FetchableTopicResponse",
        "0+",
        F("topic", "string", "0-12"),
        F(
            "partitions",
            "[]PartitionData",
            "0+",
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("high_watermark", "int64"),
            F("last_stable_offset", "int64", "4+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F(
                "diverging_epoch",
                "EpochEndOffset",
                "12+",
                F("epoch", "int32", "12+", default=-1),
                F("end_offset", "int64", "12+", default=-1),
                tag=0,
                tagged="12+",
            ),
            F(
                "current_leader",
                "LeaderIdAndEpoch",
                "12+",
                F("leader_id", "int32", "12+", default=-1),
                F("leader_epoch", "int32", "12+", default=-1),
                tag=1,
                tagged="12+",
            ),
            F(
                "snapshot_id",
                "SnapshotId",
                "12+",
                F("end_offset", "int64", default=-1),
                F("epoch", "int32", default=-1),
                tag=2,
                tagged="12+",
            ),
            F(
                "aborted_transactions",
                "[]AbortedTransaction",
                "4+",
                F("producer_id", "int64", "4+"),
                F("first_offset", "int64", "4+"),
                nullable="4+",
            ),
            F("preferred_read_replica", "int32", "11+", default=-1),
            F("records", "records", "0+", nullable="0+"),
        ),
    ),
)

# ------------------------------------------------------------------ ListOffsets (2)

LIST_OFFSETS_REQUEST = message(
    "ListOffsetsRequest",
    "1-6",
    "6+",
    F("replica_id", "int32"),
    F("isolation_level", "int8", "2+"),
    F(
        "topics",
        "[]ListOffsetsTopic",
        "0+",
        F("name", "string"),
        F(
            "partitions",
            "[]ListOffsetsPartition",
            "0+",
            F("partition_index", "int32"),
            F("current_leader_epoch", "int32", "4+", default=-1),
            F("timestamp", "int64"),
            F("max_num_offsets", "int32", "0", default=1),
        ),
    ),
)
LIST_OFFSETS_RESPONSE = message(
    "ListOffsetsResponse",
    "1-6",
    "6+",
    F("throttle_time_ms", "int32", "2+"),
    F(
        "topics",
        "[]ListOffsetsTopicResponse",
        "0+",
        F("name", "string"),
        F(
            "partitions",
            "[]ListOffsetsPartitionResponse",
            "0+",
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("old_style_offsets", "[]int64", "0"),
            F("timestamp", "int64", "1+", default=-1),
            F("offset", "int64", "1+", default=-1),
            F("leader_epoch", "int32", "4+", default=-1),
        ),
    ),
)

# ------------------------------------------------------------------ FindCoordinator (10)

FIND_COORDINATOR_REQUEST = message(
    "FindCoordinatorRequest",
    "0-4",
    "3+",
    F("key", "string", "0-3"),
    F("key_type", "int8", "1+"),
    F("coordinator_keys", "[]string", "4+"),
)
FIND_COORDINATOR_RESPONSE = message(
    "FindCoordinatorResponse",
    "0-4",
    "3+",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "0-3"),
    F("error_message", "string", "1-3", nullable="1-3"),
    F("node_id", "int32", "0-3"),
    F("host", "string", "0-3"),
    F("port", "int32", "0-3"),
    F(
        "coordinators",
        "[]Coordinator",
        "4+",
        F("key", "string", "4+"),
        F("node_id", "int32", "4+"),
        F("host", "string", "4+"),
        F("port", "int32", "4+"),
        F("error_code", "int16", "4+"),
        F("error_message", "string", "4+", nullable="4+"),
    ),
)

# ------------------------------------------------------------------ OffsetCommit (8)

OFFSET_COMMIT_REQUEST = message(
    "OffsetCommitRequest",
    "2-8",
    "8+",
    F("group_id", "string"),
    F("generation_id_or_member_epoch", "int32", "1+", default=-1),
    F("member_id", "string", "1+"),
    F("group_instance_id", "string", "7+", nullable="7+", default="null"),
    F("retention_time_ms", "int64", "2-4", default=-1),
    F(
        "topics",
        "[]OffsetCommitRequestTopic",
        "0+",
        F("name", "string", "0-9"),
        F(
            "partitions",
            "[]OffsetCommitRequestPartition",
            "0+",
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "6+", default=-1),
            F("commit_timestamp", "int64", "1", default=-1),
            F("committed_metadata", "string", "0+", nullable="0+"),
        ),
    ),
)
OFFSET_COMMIT_RESPONSE = message(
    "OffsetCommitResponse",
    "2-8",
    "8+",
    F("throttle_time_ms", "int32", "3+"),
    F(
        "topics",
        "[]OffsetCommitResponseTopic",
        "0+",
        F("name", "string", "0-9"),
        F(
            "partitions",
            "[]OffsetCommitResponsePartition",
            "0+",
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ),
    ),
)

# ------------------------------------------------------------------ OffsetFetch (9)

OFFSET_FETCH_REQUEST = message(
    "OffsetFetchRequest",
    "1-7",
    "6+",
    F("group_id", "string", "0-7"),
    F(
        "topics",
        "[]OffsetFetchRequestTopic",
        "0-7",
        F("name", "string", "0-7"),
        F("partition_indexes", "[]int32", "0-7"),
        nullable="2-7",
    ),
    F("require_stable", "bool", "7+"),
)
OFFSET_FETCH_RESPONSE = message(
    "OffsetFetchResponse",
    "1-7",
    "6+",
    F("throttle_time_ms", "int32", "3+"),
    F(
        "topics",
        "[]OffsetFetchResponseTopic",
        "0-7",
        F("name", "string", "0-7"),
        F(
            "partitions",
            "[]OffsetFetchResponsePartition",
            "0-7",
            F("partition_index", "int32", "0-7"),
            F("committed_offset", "int64", "0-7"),
            F("committed_leader_epoch", "int32", "5-7", default=-1),
            F("metadata", "string", "0-7", nullable="0-7"),
            F("error_code", "int16", "0-7"),
        ),
    ),
    F("error_code", "int16", "2-7"),
)

# ------------------------------------------------------------------ InitProducerId (22)

INIT_PRODUCER_ID_REQUEST = message(
    "InitProducerIdRequest",
    "0-4",
    "2+",
    F("transactional_id", "string", "0+", nullable="0+"),
    F("transaction_timeout_ms", "int32"),
    F("producer_id", "int64", "3+", default=-1),
    F("producer_epoch", "int16", "3+", default=-1),
)
INIT_PRODUCER_ID_RESPONSE = message(
    "InitProducerIdResponse",
    "0-4",
    "2+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64", default=-1),
    F("producer_epoch", "int16"),
)

# ------------------------------------------------------------------ WriteTxnMarkers (27)
#
# Sent by a transaction coordinator to the leaders of the partitions a transaction touched
# (v0 was removed in Kafka 4.0).

WRITE_TXN_MARKERS_REQUEST = message(
    "WriteTxnMarkersRequest",
    "1-2",
    "1+",
    F(
        "markers",
        "[]WritableTxnMarker",
        "0+",
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("transaction_result", "bool"),
        F("topics", "[]WritableTxnMarkerTopic", "0+", F("name", "string"), F("partition_indexes", "[]int32")),
        F("coordinator_epoch", "int32"),
        F("transaction_version", "int8", "2+", default=0),
    ),
)
WRITE_TXN_MARKERS_RESPONSE = message(
    "WriteTxnMarkersResponse",
    "1-2",
    "1+",
    F(
        "markers",
        "[]WritableTxnMarkerResult",
        "0+",
        F("producer_id", "int64"),
        F(
            "topics",
            "[]WritableTxnMarkerTopicResult",
            "0+",
            F("name", "string"),
            F(
                "partitions",
                "[]WritableTxnMarkerPartitionResult",
                "0+",
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ),
        ),
    ),
)

# ------------------------------------------------------------------ CreateTopics (19)

CREATE_TOPICS_REQUEST = message(
    "CreateTopicsRequest",
    "2-7",
    "5+",
    F(
        "topics",
        "[]CreatableTopic",
        "0+",
        F("name", "string"),
        F("num_partitions", "int32"),
        F("replication_factor", "int16"),
        F(
            "assignments",
            "[]CreatableReplicaAssignment",
            "0+",
            F("partition_index", "int32"),
            F("broker_ids", "[]int32"),
        ),
        F(
            "configs",
            "[]CreatableTopicConfig",
            "0+",
            F("name", "string"),
            F("value", "string", "0+", nullable="0+"),
        ),
    ),
    F("timeout_ms", "int32", default=60000),
    F("validate_only", "bool", "1+"),
)
CREATE_TOPICS_RESPONSE = message(
    "CreateTopicsResponse",
    "2-7",
    "5+",
    F("throttle_time_ms", "int32", "2+"),
    F(
        "topics",
        "[]CreatableTopicResult",
        "0+",
        F("name", "string"),
        F("topic_id", "uuid", "7+"),
        F("error_code", "int16"),
        F("error_message", "string", "1+", nullable="0+"),
        F("topic_config_error_code", "int16", "5+", tag=0, tagged="5+"),
        F("num_partitions", "int32", "5+", default=-1),
        F("replication_factor", "int16", "5+", default=-1),
        F(
            "configs",
            "[]CreatableTopicConfigs",
            "5+",
            F("name", "string", "5+"),
            F("value", "string", "5+", nullable="5+"),
            F("read_only", "bool", "5+"),
            F("config_source", "int8", "5+", default=-1),
            F("is_sensitive", "bool", "5+"),
            nullable="5+",
        ),
    ),
)

# ------------------------------------------------------------------ DeleteTopics (20)

DELETE_TOPICS_REQUEST = message(
    "DeleteTopicsRequest",
    "1-6",
    "4+",
    F(
        "topics",
        "[]DeleteTopicState",
        "6+",
        F("name", "string", "6+", nullable="6+", default="null"),
        F("topic_id", "uuid", "6+"),
    ),
    F("topic_names", "[]string", "0-5"),
    F("timeout_ms", "int32"),
)
DELETE_TOPICS_RESPONSE = message(
    "DeleteTopicsResponse",
    "1-6",
    "4+",
    F("throttle_time_ms", "int32", "1+"),
    F(
        "responses",
        "[]DeletableTopicResult",
        "0+",
        F("name", "string", "0+", nullable="6+"),
        F("topic_id", "uuid", "6+"),
        F("error_code", "int16"),
        F("error_message", "string", "5+", nullable="5+", default="null"),
    ),
)

# ------------------------------------------------------------------ DescribeConfigs (32)

DESCRIBE_CONFIGS_REQUEST = message(
    "DescribeConfigsRequest",
    "1-4",
    "4+",
    F(
        "resources",
        "[]DescribeConfigsResource",
        "0+",
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configuration_keys", "[]string", "0+", nullable="0+"),
    ),
    F("include_synonyms", "bool", "1+"),
    F("include_documentation", "bool", "3+"),
)
DESCRIBE_CONFIGS_RESPONSE = message(
    "DescribeConfigsResponse",
    "1-4",
    "4+",
    F("throttle_time_ms", "int32"),
    F(
        "results",
        "[]DescribeConfigsResult",
        "0+",
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F(
            "configs",
            "[]DescribeConfigsResourceResult",
            "0+",
            F("name", "string"),
            F("value", "string", "0+", nullable="0+"),
            F("read_only", "bool"),
            F("is_default", "bool", "0"),
            F("config_source", "int8", "1+", default=-1),
            F("is_sensitive", "bool"),
            F(
                "synonyms",
                "[]DescribeConfigsSynonym",
                "1+",
                F("name", "string", "1+"),
                F("value", "string", "1+", nullable="0+"),
                F("source", "int8", "1+"),
            ),
            F("config_type", "int8", "3+"),
            F("documentation", "string", "3+", nullable="0+"),
        ),
    ),
)

# ------------------------------------------------------------------ DescribeCluster (60)

DESCRIBE_CLUSTER_REQUEST = message(
    "DescribeClusterRequest",
    "0-1",
    "0+",
    F("include_cluster_authorized_operations", "bool"),
    F("endpoint_type", "int8", "1+", default=1),
)
DESCRIBE_CLUSTER_RESPONSE = message(
    "DescribeClusterResponse",
    "0-1",
    "0+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+", default="null"),
    F("endpoint_type", "int8", "1+", default=1),
    F("cluster_id", "string"),
    F("controller_id", "int32", default=-1),
    F(
        "brokers",
        "[]DescribeClusterBroker",
        "0+",
        F("broker_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", "0+", nullable="0+", default="null"),
    ),
    F("cluster_authorized_operations", "int32", default=I32_MIN),
)

# ------------------------------------------------------------------ group membership (not served yet)
#
# The classic group protocol, at the versions kafka-python 3.x (JoinGroup <= 7,
# SyncGroup <= 5), librdkafka 2.x (JoinGroup <= 5, SyncGroup and Heartbeat <= 3,
# LeaveGroup <= 1) and the Java client 3.x/4.x (the newest below) negotiate.
# librdkafka enables its group consumer only if JoinGroup, SyncGroup, Heartbeat
# and LeaveGroup v0 are advertised, so every range starts at 0. Not in SCHEMAS
# until the group coordinator is wired.

# ------------------------------------------------------------------ JoinGroup (11)

JOIN_GROUP_REQUEST = message(
    "JoinGroupRequest",
    "0-9",
    "6+",
    F("group_id", "string"),
    F("session_timeout_ms", "int32"),
    F("rebalance_timeout_ms", "int32", "1+", default=-1),
    F("member_id", "string"),
    F("group_instance_id", "string", "5+", nullable="5+", default="null"),
    F("protocol_type", "string"),
    F("protocols", "[]JoinGroupRequestProtocol", "0+", F("name", "string"), F("metadata", "bytes")),
    F("reason", "string", "8+", nullable="8+", default="null"),
)
JOIN_GROUP_RESPONSE = message(
    "JoinGroupResponse",
    "0-9",
    "6+",
    F("throttle_time_ms", "int32", "2+"),
    F("error_code", "int16"),
    F("generation_id", "int32", default=-1),
    F("protocol_type", "string", "7+", nullable="7+", default="null"),
    F("protocol_name", "string", "0+", nullable="7+"),
    F("leader", "string"),
    F("skip_assignment", "bool", "9+", default=False),
    F("member_id", "string"),
    F(
        "members",
        "[]JoinGroupResponseMember",
        "0+",
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", nullable="5+", default="null"),
        F("metadata", "bytes"),
    ),
)

# ------------------------------------------------------------------ Heartbeat (12)

HEARTBEAT_REQUEST = message(
    "HeartbeatRequest",
    "0-4",
    "4+",
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+", default="null"),
)
HEARTBEAT_RESPONSE = message(
    "HeartbeatResponse",
    "0-4",
    "4+",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
)

# ------------------------------------------------------------------ LeaveGroup (13)

LEAVE_GROUP_REQUEST = message(
    "LeaveGroupRequest",
    "0-5",
    "4+",
    F("group_id", "string"),
    F("member_id", "string", "0-2"),
    F(
        "members",
        "[]MemberIdentity",
        "3+",
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", nullable="3+", default="null"),
        F("reason", "string", "5+", nullable="5+", default="null"),
    ),
)
LEAVE_GROUP_RESPONSE = message(
    "LeaveGroupResponse",
    "0-5",
    "4+",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F(
        "members",
        "[]MemberResponse",
        "3+",
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", nullable="3+"),
        F("error_code", "int16", "3+"),
    ),
)

# ------------------------------------------------------------------ SyncGroup (14)

SYNC_GROUP_REQUEST = message(
    "SyncGroupRequest",
    "0-5",
    "4+",
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+", default="null"),
    F("protocol_type", "string", "5+", nullable="5+", default="null"),
    F("protocol_name", "string", "5+", nullable="5+", default="null"),
    F(
        "assignments",
        "[]SyncGroupRequestAssignment",
        "0+",
        F("member_id", "string"),
        F("assignment", "bytes"),
    ),
)
SYNC_GROUP_RESPONSE = message(
    "SyncGroupResponse",
    "0-5",
    "4+",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("protocol_type", "string", "5+", nullable="5+", default="null"),
    F("protocol_name", "string", "5+", nullable="5+", default="null"),
    F("assignment", "bytes"),
)

# ------------------------------------------------------------------ DescribeGroups (15)

DESCRIBE_GROUPS_REQUEST = message(
    "DescribeGroupsRequest",
    "0-6",
    "5+",
    F("groups", "[]string"),
    F("include_authorized_operations", "bool", "3+"),
)
DESCRIBE_GROUPS_RESPONSE = message(
    "DescribeGroupsResponse",
    "0-6",
    "5+",
    F("throttle_time_ms", "int32", "1+"),
    F(
        "groups",
        "[]DescribedGroup",
        "0+",
        F("error_code", "int16"),
        F("error_message", "string", "6+", nullable="6+", default="null"),
        F("group_id", "string"),
        F("group_state", "string"),
        F("protocol_type", "string"),
        F("protocol_data", "string"),
        F(
            "members",
            "[]DescribedGroupMember",
            "0+",
            F("member_id", "string"),
            F("group_instance_id", "string", "4+", nullable="4+", default="null"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("member_metadata", "bytes"),
            F("member_assignment", "bytes"),
        ),
        F("authorized_operations", "int32", "3+", default=I32_MIN),
    ),
)

# ------------------------------------------------------------------ ListGroups (16)

LIST_GROUPS_REQUEST = message(
    "ListGroupsRequest",
    "0-5",
    "3+",
    F("states_filter", "[]string", "4+"),
    F("types_filter", "[]string", "5+"),
)
LIST_GROUPS_RESPONSE = message(
    "ListGroupsResponse",
    "0-5",
    "3+",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F(
        "groups",
        "[]ListedGroup",
        "0+",
        F("group_id", "string"),
        F("protocol_type", "string"),
        F("group_state", "string", "4+"),
        F("group_type", "string", "5+"),
    ),
)

# ------------------------------------------------------------------ consumer protocol (embedded)
#
# The "consumer" protocol's member metadata (JoinGroup protocols[].metadata) and
# assignment (SyncGroup assignments[].assignment): an int16 version, then this
# body. Kafka reads a newer version with its newest format (fields are only
# ever appended), so decode with min(version, 3) and ignore trailing bytes.

CONSUMER_PROTOCOL_SUBSCRIPTION = message(
    "ConsumerProtocolSubscription",
    "0-3",
    "none",
    F("topics", "[]string"),
    F("user_data", "bytes", "0+", nullable="0+", default="null"),
    F(
        "owned_partitions",
        "[]TopicPartition",
        "1+",
        F("topic", "string", "1+"),
        F("partitions", "[]int32", "1+"),
    ),
    F("generation_id", "int32", "2+", default=-1),
    F("rack_id", "string", "3+", nullable="3+", default="null"),
)
CONSUMER_PROTOCOL_ASSIGNMENT = message(
    "ConsumerProtocolAssignment",
    "0-3",
    "none",
    F("assigned_partitions", "[]TopicPartition", "0+", F("topic", "string"), F("partitions", "[]int32")),
    F("user_data", "bytes", "0+", nullable="0+", default="null"),
)

# ------------------------------------------------------------------ OffsetForLeaderEpoch (23)
#
# Kafka 4.0 serves 2-4 (0-1 were removed); v2 added current_leader_epoch, v3 replica_id.

OFFSET_FOR_LEADER_EPOCH_REQUEST = message(
    "OffsetForLeaderEpochRequest",
    "2-4",
    "4+",
    F("replica_id", "int32", "3+", default=-2),
    F(
        "topics",
        "[]OffsetForLeaderTopic",
        "0+",
        F("topic", "string"),
        F(
            "partitions",
            "[]OffsetForLeaderPartition",
            "0+",
            F("partition", "int32"),
            F("current_leader_epoch", "int32", "2+", default=-1),
            F("leader_epoch", "int32"),
        ),
    ),
)
OFFSET_FOR_LEADER_EPOCH_RESPONSE = message(
    "OffsetForLeaderEpochResponse",
    "2-4",
    "4+",
    F("throttle_time_ms", "int32", "2+"),
    F(
        "topics",
        "[]OffsetForLeaderTopicResult",
        "0+",
        F("topic", "string"),
        F(
            "partitions",
            "[]EpochEndOffset",
            "0+",
            F("error_code", "int16"),
            F("partition", "int32"),
            F("leader_epoch", "int32", "1+", default=-1),
            F("end_offset", "int64", "0+", default=-1),
        ),
    ),
)

#: api key -> (request schema, response schema)
SCHEMAS: dict[int, tuple[Message, Message]] = {
    0: (PRODUCE_REQUEST, PRODUCE_RESPONSE),
    1: (FETCH_REQUEST, FETCH_RESPONSE),
    2: (LIST_OFFSETS_REQUEST, LIST_OFFSETS_RESPONSE),
    3: (METADATA_REQUEST, METADATA_RESPONSE),
    8: (OFFSET_COMMIT_REQUEST, OFFSET_COMMIT_RESPONSE),
    9: (OFFSET_FETCH_REQUEST, OFFSET_FETCH_RESPONSE),
    10: (FIND_COORDINATOR_REQUEST, FIND_COORDINATOR_RESPONSE),
    18: (API_VERSIONS_REQUEST, API_VERSIONS_RESPONSE),
    19: (CREATE_TOPICS_REQUEST, CREATE_TOPICS_RESPONSE),
    20: (DELETE_TOPICS_REQUEST, DELETE_TOPICS_RESPONSE),
    11: (JOIN_GROUP_REQUEST, JOIN_GROUP_RESPONSE),
    12: (HEARTBEAT_REQUEST, HEARTBEAT_RESPONSE),
    13: (LEAVE_GROUP_REQUEST, LEAVE_GROUP_RESPONSE),
    14: (SYNC_GROUP_REQUEST, SYNC_GROUP_RESPONSE),
    15: (DESCRIBE_GROUPS_REQUEST, DESCRIBE_GROUPS_RESPONSE),
    16: (LIST_GROUPS_REQUEST, LIST_GROUPS_RESPONSE),
    22: (INIT_PRODUCER_ID_REQUEST, INIT_PRODUCER_ID_RESPONSE),
    27: (WRITE_TXN_MARKERS_REQUEST, WRITE_TXN_MARKERS_RESPONSE),
    23: (OFFSET_FOR_LEADER_EPOCH_REQUEST, OFFSET_FOR_LEADER_EPOCH_RESPONSE),
    32: (DESCRIBE_CONFIGS_REQUEST, DESCRIBE_CONFIGS_RESPONSE),
    60: (DESCRIBE_CLUSTER_REQUEST, DESCRIBE_CLUSTER_RESPONSE),
}
