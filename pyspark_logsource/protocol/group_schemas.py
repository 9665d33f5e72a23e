"""Kafka's schemas of the group coordinator's APIs: FindCoordinator, OffsetCommit, OffsetFetch,
the classic group membership APIs and the ``consumer`` protocol embedded in them.

Typed messages: :mod:`.coordinator_messages` and :mod:`.group_messages`. Conventions as in
:mod:`.schemas`: field names are Kafka's JSON names in snake_case, ``valid`` is the range
this broker implements, the field version specs are Kafka's.
"""

from __future__ import annotations

from .schema import I32_MIN, F, message

# ------------------------------------------------------------------ FindCoordinator (10)

FIND_COORDINATOR_REQUEST = message(
    "FindCoordinatorRequest",
    "0-6",
    "3+",
    F("key", "string", "0-3"),
    F("key_type", "int8", "1+"),
    F("coordinator_keys", "[]string", "4+"),
)
FIND_COORDINATOR_RESPONSE = message(
    "FindCoordinatorResponse",
    "0-6",
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
