"""Kafka's request and response schemas, transcribed from Kafka's message JSON.

Field names are the JSON names in snake_case. ``valid`` is the range this
broker implements (it may stop below Kafka's newest version, for example
before topic ids replace topic names); the field version specs are Kafka's.
The reference is ``clients/src/main/resources/common/message/<Name>.json`` in
apache/kafka.

This module holds the data-path schemas (ApiVersions, Metadata, Produce, Fetch,
ListOffsets, OffsetForLeaderEpoch) and the table :data:`SCHEMAS` of every served
API; the other families are in :mod:`.group_schemas` (the group coordinator's
APIs), :mod:`.admin_schemas` and :mod:`.txn_schemas`.
"""

from __future__ import annotations

from .admin_schemas import (
    CREATE_TOPICS_REQUEST,
    CREATE_TOPICS_RESPONSE,
    DELETE_TOPICS_REQUEST,
    DELETE_TOPICS_RESPONSE,
    DESCRIBE_CLUSTER_REQUEST,
    DESCRIBE_CLUSTER_RESPONSE,
    DESCRIBE_CONFIGS_REQUEST,
    DESCRIBE_CONFIGS_RESPONSE,
)

# The consumer protocol's schemas are re-exported (the `x as x` form): tests read them here.
from .group_schemas import (
    CONSUMER_PROTOCOL_ASSIGNMENT as CONSUMER_PROTOCOL_ASSIGNMENT,
)
from .group_schemas import (
    CONSUMER_PROTOCOL_SUBSCRIPTION as CONSUMER_PROTOCOL_SUBSCRIPTION,
)
from .group_schemas import (
    DESCRIBE_GROUPS_REQUEST,
    DESCRIBE_GROUPS_RESPONSE,
    FIND_COORDINATOR_REQUEST,
    FIND_COORDINATOR_RESPONSE,
    HEARTBEAT_REQUEST,
    HEARTBEAT_RESPONSE,
    JOIN_GROUP_REQUEST,
    JOIN_GROUP_RESPONSE,
    LEAVE_GROUP_REQUEST,
    LEAVE_GROUP_RESPONSE,
    LIST_GROUPS_REQUEST,
    LIST_GROUPS_RESPONSE,
    OFFSET_COMMIT_REQUEST,
    OFFSET_COMMIT_RESPONSE,
    OFFSET_FETCH_REQUEST,
    OFFSET_FETCH_RESPONSE,
    SYNC_GROUP_REQUEST,
    SYNC_GROUP_RESPONSE,
)
from .producer_txn_schemas import (
    ADD_OFFSETS_TO_TXN_REQUEST,
    ADD_OFFSETS_TO_TXN_RESPONSE,
    ADD_PARTITIONS_TO_TXN_REQUEST,
    ADD_PARTITIONS_TO_TXN_RESPONSE,
    END_TXN_REQUEST,
    END_TXN_RESPONSE,
    TXN_OFFSET_COMMIT_REQUEST,
    TXN_OFFSET_COMMIT_RESPONSE,
)
from .schema import I32_MIN, F, Message, message
from .txn_schemas import (
    INIT_PRODUCER_ID_REQUEST,
    INIT_PRODUCER_ID_RESPONSE,
    WRITE_TXN_MARKERS_REQUEST,
    WRITE_TXN_MARKERS_RESPONSE,
)

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
    "0-13",
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
    "0-13",
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
    F("error_code", "int16", "13+"),
)

# ------------------------------------------------------------------ Produce (0)

PRODUCE_REQUEST = message(
    "ProduceRequest",
    "3-10",
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
    "3-10",
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
            F(
                "current_leader",
                "LeaderIdAndEpoch",
                "10+",
                F("leader_id", "int32", "10+", default=-1),
                F("leader_epoch", "int32", "10+", default=-1),
                tag=0,
                tagged="10+",
            ),
        ),
    ),
    F("throttle_time_ms", "int32", "1+"),
    F(
        "node_endpoints",
        "[]NodeEndpoint",
        "10+",
        F("node_id", "int32", "10+"),
        F("host", "string", "10+"),
        F("port", "int32", "10+"),
        F("rack", "string", "10+", nullable="10+", default="null"),
        tag=0,
        tagged="10+",
    ),
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
    "1-10",
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
    F("timeout_ms", "int32", "10+"),
)
LIST_OFFSETS_RESPONSE = message(
    "ListOffsetsResponse",
    "1-10",
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
    24: (ADD_PARTITIONS_TO_TXN_REQUEST, ADD_PARTITIONS_TO_TXN_RESPONSE),
    25: (ADD_OFFSETS_TO_TXN_REQUEST, ADD_OFFSETS_TO_TXN_RESPONSE),
    26: (END_TXN_REQUEST, END_TXN_RESPONSE),
    28: (TXN_OFFSET_COMMIT_REQUEST, TXN_OFFSET_COMMIT_RESPONSE),
    23: (OFFSET_FOR_LEADER_EPOCH_REQUEST, OFFSET_FOR_LEADER_EPOCH_RESPONSE),
    32: (DESCRIBE_CONFIGS_REQUEST, DESCRIBE_CONFIGS_RESPONSE),
    60: (DESCRIBE_CLUSTER_REQUEST, DESCRIBE_CLUSTER_RESPONSE),
}
