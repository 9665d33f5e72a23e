"""Kafka's schemas of the admin APIs: CreateTopics, DeleteTopics, DescribeConfigs, DescribeCluster.

Typed messages: :mod:`.admin_messages`. Conventions as in
:mod:`.schemas`: field names are Kafka's JSON names in snake_case, ``valid`` is the range
this broker implements, the field version specs are Kafka's.
"""

from __future__ import annotations

from .schema import I32_MIN, F, message

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
