"""Typed requests and responses: what handlers and clients work with.

Per-partition entries are flat lists that carry their topic name; on the wire
Kafka nests them by topic (:mod:`.codecs` does the grouping). Every field has
the default Kafka gives it when a version lacks it, so callers never branch on
versions. Byte layouts are in :mod:`.schemas`.

The data path (ApiVersions, Metadata, DescribeCluster, Produce, Fetch,
ListOffsets, InitProducerId) is here; the other families have their own
modules, re-exported here so that ``messages.X`` names every core message:
:mod:`.api_keys`, :mod:`.coordinator_messages` (FindCoordinator,
OffsetCommit, OffsetFetch), :mod:`.admin_messages` (CreateTopics,
DeleteTopics, DescribeConfigs); the group membership, transaction and
leader-epoch APIs are in :mod:`.group_messages`, :mod:`.txn_messages` and
:mod:`.epoch_messages`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..format.header import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from .admin_messages import (  # noqa: F401  (re-exported: messages.X names every core message)
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ConfigEntry,
    ConfigResource,
    CreatableTopic,
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from .api_keys import ApiKey, RequestHeader  # noqa: F401
from .coordinator_messages import (  # noqa: F401
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    OffsetCommitPartition,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

#: The feature a logsource broker advertises in ApiVersions (v3+) when it stores
#: and serves our Arrow-bodied record batches next to Kafka's.
ARROW_BODY_FEATURE = "logsource.arrow.body"


# ------------------------------------------------------------------ ApiVersions


@dataclass(slots=True)
class ApiVersionsRequest:
    """Ask which api keys and versions the broker supports.

    ``arrow_body``: this connection accepts Arrow-bodied batches in Fetch (our
    clients set it; it travels as a tagged field Kafka brokers ignore).
    """

    API_KEY = ApiKey.API_VERSIONS
    client_software_name: str = "pyspark-logsource"
    client_software_version: str = "0.1.0"
    arrow_body: bool = False


@dataclass(slots=True)
class ApiVersion:
    """One supported api key with its version range."""

    api_key: int
    min_version: int
    max_version: int


@dataclass(slots=True)
class SupportedFeature:
    """A feature the broker supports (ApiVersions v3+)."""

    name: str
    min_version: int
    max_version: int


@dataclass(slots=True)
class ApiVersionsResponse:
    """The broker's supported api keys, versions and features."""

    error_code: int = 0
    api_keys: list[ApiVersion] = field(default_factory=list)
    throttle_time_ms: int = 0
    supported_features: list[SupportedFeature] = field(default_factory=list)
    error_message: str | None = None  # not on the wire; for raise_for_response


# ------------------------------------------------------------------ Metadata


@dataclass(slots=True)
class MetadataRequest:
    """Describe the cluster; ``topics=None`` means every topic."""

    API_KEY = ApiKey.METADATA
    topics: list[str] | None = None
    allow_auto_topic_creation: bool = False
    #: v10+: each topic's id, aligned with ``topics`` (v12+ may ask by id alone, with a null name)
    topic_ids: list[bytes | None] | None = None
    #: v8-10 / v8+: answer with the operations the principal may do on the cluster / each topic
    include_cluster_authorized_operations: bool = False
    include_topic_authorized_operations: bool = False


@dataclass(slots=True)
class BrokerMetadata:
    """A broker of the cluster."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class PartitionMetadata:
    """A partition with its (explicit) leader, replicas and in-sync replicas."""

    partition: int
    leader_id: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    offline_replicas: list[int] = field(default_factory=list)
    error_code: int = 0


@dataclass(slots=True)
class TopicMetadata:
    """A topic and its partitions (sorted by partition)."""

    name: str
    partitions: list[PartitionMetadata] = field(default_factory=list)
    is_internal: bool = False
    error_code: int = 0
    #: 16 bytes (Metadata v10+); None: the zero uuid
    topic_id: bytes | None = None
    #: v8+: bit set of the allowed AclOperation codes; Int32.MinValue when not asked
    authorized_operations: int = -(1 << 31)


@dataclass(slots=True)
class MetadataResponse:
    """Brokers, controller, cluster id and topics."""

    brokers: list[BrokerMetadata] = field(default_factory=list)
    cluster_id: str | None = None
    controller_id: int = -1
    topics: list[TopicMetadata] = field(default_factory=list)
    throttle_time_ms: int = 0
    #: v8-10: bit set of the allowed AclOperation codes on the cluster; Int32.MinValue when not asked
    cluster_authorized_operations: int = -(1 << 31)


# ------------------------------------------------------------------ Produce


@dataclass(slots=True)
class ProducePartitionData:
    """Record batches for one partition: an opaque run of whole batches."""

    topic: str
    partition: int
    records: Any  # bytes | bytearray | memoryview (decoded: a slice of the frame)


@dataclass(slots=True)
class ProduceRequest:
    """Append batches to many partitions; acks 0 gets no response at all."""

    API_KEY = ApiKey.PRODUCE
    partitions: list[ProducePartitionData] = field(default_factory=list)
    acks: int = 1
    timeout_ms: int = 30000
    transactional_id: str | None = None


@dataclass(slots=True)
class ProducePartitionResponse:
    """Where the partition's batches landed (base offset of the first)."""

    topic: str
    partition: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    #: indexes of the records that caused the error, within their batch (v8+, KIP-467)
    record_errors: tuple[int, ...] = ()


@dataclass(slots=True)
class ProduceResponse:
    """Per-partition outcomes."""

    partitions: list[ProducePartitionResponse] = field(default_factory=list)
    throttle_time_ms: int = 0


# ------------------------------------------------------------------ Fetch


@dataclass(slots=True)
class FetchPartition:
    """Read one partition from ``fetch_offset``, at most ``max_bytes``."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int = 1 << 20
    log_start_offset: int = -1  # followers only
    current_leader_epoch: int = -1
    #: a follower's latest epoch (v12+): the leader answers ``diverging_epoch`` if its log differs there
    last_fetched_epoch: int = -1


@dataclass(slots=True)
class FetchRequest:
    """Long-poll fetch: answer when ``min_bytes`` are available or ``max_wait_ms`` passed.

    Fetch sessions (KIP-227, :mod:`pyspark_logsource.broker.fetch_sessions`): ``session_id`` 0 and epoch
    -1 is a sessionless full fetch; epoch 0 opens a session, later epochs are incremental and may name
    ``forgotten`` (topic, partition) pairs to drop from it.
    """

    API_KEY = ApiKey.FETCH
    partitions: list[FetchPartition] = field(default_factory=list)
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 50 * 1024 * 1024
    isolation_level: int = READ_UNCOMMITTED
    replica_id: int = -1
    session_id: int = 0
    session_epoch: int = -1
    rack_id: str = ""
    #: (topic, partition) pairs an incremental fetch removes from its session (v7+)
    forgotten: list[tuple[str, int]] = field(default_factory=list)


@dataclass(slots=True)
class AbortedTransaction:
    """A transaction aborted in the fetched range (read_committed readers skip its batches)."""

    producer_id: int
    first_offset: int


@dataclass(slots=True)
class FetchPartitionResponse:
    """Records of one partition: whole batches, possibly a partial one at the end.

    On the broker ``records`` may be a FileRegion (sent with sendfile); on the
    client it is a memoryview slice of the received frame.
    """

    topic: str
    partition: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = None
    aborted_transactions: list[AbortedTransaction] | None = None
    preferred_read_replica: int = -1
    #: (v12+, to a follower) the largest epoch both logs hold and where it ends on the leader:
    #: the follower truncates there (KIP-320's form of KIP-101's OffsetsForLeaderEpoch); -1 when not diverging
    diverging_epoch: int = -1
    diverging_end_offset: int = -1


@dataclass(slots=True)
class FetchResponse:
    """Per-partition records and watermarks."""

    partitions: list[FetchPartitionResponse] = field(default_factory=list)
    throttle_time_ms: int = 0
    error_code: int = 0
    session_id: int = 0


# ------------------------------------------------------------------ ListOffsets


@dataclass(slots=True)
class ListOffsetsPartition:
    """``timestamp``: EARLIEST_TIMESTAMP (-2), LATEST_TIMESTAMP (-1) or ms."""

    topic: str
    partition: int
    timestamp: int
    current_leader_epoch: int = -1


@dataclass(slots=True)
class ListOffsetsRequest:
    """Look up offsets by time."""

    API_KEY = ApiKey.LIST_OFFSETS
    partitions: list[ListOffsetsPartition] = field(default_factory=list)
    isolation_level: int = READ_UNCOMMITTED
    replica_id: int = -1


@dataclass(slots=True)
class ListOffsetsPartitionResponse:
    """The first offset with timestamp >= T (-1 if none); for -2/-1 the log start / end."""

    topic: str
    partition: int
    error_code: int = 0
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclass(slots=True)
class ListOffsetsResponse:
    """Per-partition offsets."""

    partitions: list[ListOffsetsPartitionResponse] = field(default_factory=list)
    throttle_time_ms: int = 0


# ------------------------------------------------------------------ InitProducerId


@dataclass(slots=True)
class InitProducerIdRequest:
    """Get a producer id (unique across broker restarts) and epoch for idempotence.

    Passing the current id and epoch (v3+) bumps the epoch (fencing older instances).
    """

    API_KEY = ApiKey.INIT_PRODUCER_ID
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True)
class InitProducerIdResponse:
    """The allocated producer id and epoch."""

    error_code: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    throttle_time_ms: int = 0
    error_message: str | None = None  # not on the wire; for raise_for_response


# ------------------------------------------------------------------ DescribeCluster


@dataclass(slots=True)
class DescribeClusterRequest:
    """Describe the cluster's brokers and controller."""

    API_KEY = ApiKey.DESCRIBE_CLUSTER
    include_cluster_authorized_operations: bool = False
    endpoint_type: int = 1


@dataclass(slots=True)
class DescribeClusterResponse:
    """Cluster id, controller and brokers."""

    error_code: int = 0
    error_message: str | None = None
    cluster_id: str = ""
    controller_id: int = -1
    brokers: list[BrokerMetadata] = field(default_factory=list)
    throttle_time_ms: int = 0
    endpoint_type: int = 1
    #: bit set of the allowed AclOperation codes on the cluster; Int32.MinValue when not asked
    cluster_authorized_operations: int = -(1 << 31)


__all__ = [
    name for name in dir() if not name.startswith("_") and name not in ("annotations", "Any", "IntEnum")
]
_ = (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP)  # re-exported for the protocol's users

#: ListOffsets v7+ (KIP-734): the record with the largest timestamp
MAX_TIMESTAMP = -3
#: ListOffsets v8+ (KIP-405): the local log start (the log start here: no tiered storage)
EARLIEST_LOCAL_TIMESTAMP = -4
#: ListOffsets v9+ (KIP-1005): the last offset in tiered storage (-1 here: none)
LATEST_TIERED_TIMESTAMP = -5
