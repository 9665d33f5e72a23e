"""Kafka's schemas of the record and group admin APIs: DeleteRecords (21), DescribeLogDirs (35),
DeleteGroups (42) and OffsetDelete (47).

Transcribed from Kafka's ``clients/src/main/resources/common/message/*.json`` (4.x); typed messages
and adapters: :mod:`.records_admin_messages`. Conventions as in :mod:`.schemas`. ``valid`` is every
version Kafka 4.x brokers accept (DescribeLogDirs from v1: Kafka 4.0 removed v0; v5 adds ``IsCordoned``).
"""

from __future__ import annotations

from .schema import F, message

# ------------------------------------------------------------------ DeleteRecords (21)

DELETE_RECORDS_REQUEST = message(
    "DeleteRecordsRequest",
    "0-2",
    "2+",
    F(
        "topics",
        "[]DeleteRecordsTopic",
        "0+",
        F("name", "string"),
        F(
            "partitions",
            "[]DeleteRecordsPartition",
            "0+",
            F("partition_index", "int32"),
            F("offset", "int64"),
        ),
    ),
    F("timeout_ms", "int32"),
)
DELETE_RECORDS_RESPONSE = message(
    "DeleteRecordsResponse",
    "0-2",
    "2+",
    F("throttle_time_ms", "int32"),
    F(
        "topics",
        "[]DeleteRecordsTopicResult",
        "0+",
        F("name", "string"),
        F(
            "partitions",
            "[]DeleteRecordsPartitionResult",
            "0+",
            F("partition_index", "int32"),
            F("low_watermark", "int64"),
            F("error_code", "int16"),
        ),
    ),
)

# ------------------------------------------------------------------ DescribeLogDirs (35)

DESCRIBE_LOG_DIRS_REQUEST = message(
    "DescribeLogDirsRequest",
    "1-5",
    "2+",
    F(
        "topics",
        "[]DescribableLogDirTopic",
        "0+",
        F("topic", "string"),
        F("partitions", "[]int32"),
        nullable="0+",
    ),
)
DESCRIBE_LOG_DIRS_RESPONSE = message(
    "DescribeLogDirsResponse",
    "1-5",
    "2+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "3+"),
    F(
        "results",
        "[]DescribeLogDirsResult",
        "0+",
        F("error_code", "int16"),
        F("log_dir", "string"),
        F(
            "topics",
            "[]DescribeLogDirsTopic",
            "0+",
            F("name", "string"),
            F(
                "partitions",
                "[]DescribeLogDirsPartition",
                "0+",
                F("partition_index", "int32"),
                F("partition_size", "int64"),
                F("offset_lag", "int64"),
                F("is_future_key", "bool"),
            ),
        ),
        F("total_bytes", "int64", "4+", default=-1),
        F("usable_bytes", "int64", "4+", default=-1),
        F("is_cordoned", "bool", "5+"),
    ),
)

# ------------------------------------------------------------------ DeleteGroups (42)

DELETE_GROUPS_REQUEST = message(
    "DeleteGroupsRequest",
    "0-2",
    "2+",
    F("groups_names", "[]string"),
)
DELETE_GROUPS_RESPONSE = message(
    "DeleteGroupsResponse",
    "0-2",
    "2+",
    F("throttle_time_ms", "int32"),
    F("results", "[]DeletableGroupResult", "0+", F("group_id", "string"), F("error_code", "int16")),
)

# ------------------------------------------------------------------ OffsetDelete (47)

OFFSET_DELETE_REQUEST = message(
    "OffsetDeleteRequest",
    "0",
    "none",
    F("group_id", "string"),
    F(
        "topics",
        "[]OffsetDeleteRequestTopic",
        "0+",
        F("name", "string"),
        F("partitions", "[]OffsetDeleteRequestPartition", "0+", F("partition_index", "int32")),
    ),
)
OFFSET_DELETE_RESPONSE = message(
    "OffsetDeleteResponse",
    "0",
    "none",
    F("error_code", "int16"),
    F("throttle_time_ms", "int32"),
    F(
        "topics",
        "[]OffsetDeleteResponseTopic",
        "0+",
        F("name", "string"),
        F(
            "partitions",
            "[]OffsetDeleteResponsePartition",
            "0+",
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ),
    ),
)
