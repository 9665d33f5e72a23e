"""Kafka's schemas of the admin APIs that change a cluster: CreatePartitions (37), AlterConfigs (33) and
IncrementalAlterConfigs (44).

Typed messages: :mod:`.admin_config_messages`, adapters: :mod:`.admin_config_adapters`. Conventions as in
:mod:`.schemas`: field names are Kafka's JSON names in snake_case, ``valid`` is the range this broker
implements (every version of Kafka's JSON), the field version specs are Kafka's.
"""

from __future__ import annotations

from .schema import F, message

# ------------------------------------------------------------------ CreatePartitions (37)

CREATE_PARTITIONS_REQUEST = message(
    "CreatePartitionsRequest",
    "0-3",
    "2+",
    F(
        "topics",
        "[]CreatePartitionsTopic",
        "0+",
        F("name", "string"),
        F("count", "int32"),
        F(
            "assignments",
            "[]CreatePartitionsAssignment",
            "0+",
            F("broker_ids", "[]int32"),
            nullable="0+",
        ),
    ),
    F("timeout_ms", "int32"),
    F("validate_only", "bool"),
)
CREATE_PARTITIONS_RESPONSE = message(
    "CreatePartitionsResponse",
    "0-3",
    "2+",
    F("throttle_time_ms", "int32"),
    F(
        "results",
        "[]CreatePartitionsTopicResult",
        "0+",
        F("name", "string"),
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+", default="null"),
    ),
)

# ------------------------------------------------------------------ AlterConfigs (33)

ALTER_CONFIGS_REQUEST = message(
    "AlterConfigsRequest",
    "0-2",
    "2+",
    F(
        "resources",
        "[]AlterConfigsResource",
        "0+",
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F(
            "configs",
            "[]AlterableConfig",
            "0+",
            F("name", "string"),
            F("value", "string", "0+", nullable="0+"),
        ),
    ),
    F("validate_only", "bool"),
)
ALTER_CONFIGS_RESPONSE = message(
    "AlterConfigsResponse",
    "0-2",
    "2+",
    F("throttle_time_ms", "int32"),
    F(
        "responses",
        "[]AlterConfigsResourceResponse",
        "0+",
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
    ),
)

# ------------------------------------------------------------------ IncrementalAlterConfigs (44)

INCREMENTAL_ALTER_CONFIGS_REQUEST = message(
    "IncrementalAlterConfigsRequest",
    "0-1",
    "1+",
    F(
        "resources",
        "[]AlterConfigsResource",
        "0+",
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F(
            "configs",
            "[]AlterableConfig",
            "0+",
            F("name", "string"),
            F("config_operation", "int8"),
            F("value", "string", "0+", nullable="0+"),
        ),
    ),
    F("validate_only", "bool"),
)
INCREMENTAL_ALTER_CONFIGS_RESPONSE = message(
    "IncrementalAlterConfigsResponse",
    "0-1",
    "1+",
    F("throttle_time_ms", "int32"),
    F(
        "responses",
        "[]AlterConfigsResourceResponse",
        "0+",
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
    ),
)
