"""Kafka's wire protocol, sans-IO: typed requests/responses and their bytes.

No sockets, no files: :class:`ClientConnection` and :class:`ServerConnection`
turn bytes into events and messages into frame parts.

- :mod:`.schemas` (with :mod:`.group_schemas`, :mod:`.admin_schemas`, :mod:`.txn_schemas`):
  Kafka's message schemas (transcribed from Kafka's JSON), and
  :mod:`.schema`, which compiles one codec per (API key, version);
- :mod:`.codecs`: the table of codecs, request/response headers (v1/v2 and
  v0/v1), and the fast paths for Produce;
- :mod:`.messages`: the typed messages handlers and clients use;
- :mod:`.adapters` (with :mod:`.coordinator_adapters`, :mod:`.group_adapters`,
  :mod:`.admin_adapters`): between typed messages and the schemas' nesting by topic.

Every length read from the network is bounded by the bytes left in the frame
before anything is allocated. A frame must be consumed exactly: trailing bytes
are an error. Bytes that do not parse raise :class:`ProtocolError` (a subclass
of InvalidRequest); the broker then closes that connection only. An unknown
(key, version) is answered as Kafka answers it: ApiVersions with a v0 body and
error 35 (UnsupportedVersion), anything else by closing the connection.

Our extension, invisible to Kafka clients and brokers: a broker that stores
Arrow-bodied batches advertises the feature ``logsource.arrow.body`` in
ApiVersions v3+, and our clients ask for them with a tagged field of the
ApiVersionsRequest (tag 10000) that Kafka brokers skip.
"""

from __future__ import annotations

from .codecs import (
    APIS,
    CODECS,
    SUPPORTED_VERSIONS,
    decode_request_body,
    decode_request_header,
    decode_response_body,
    encode_request,
    encode_response,
    is_flexible,
    is_supported,
)
from .connection import (
    DEFAULT_MAX_FRAME_BYTES,
    ClientConnection,
    FrameDecoder,
    RequestReceived,
    ResponseReceived,
    ServerConnection,
    UnsupportedRequest,
    frame_bytes,
)
from .messages import (
    ARROW_BODY_FEATURE,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    AbortedTransaction,
    ApiKey,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BrokerMetadata,
    ConfigEntry,
    ConfigResource,
    CreatableTopic,
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitPartition,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionMetadata,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    RequestHeader,
    SupportedFeature,
    TopicMetadata,
)
from .primitives import FrameTooLarge, ProtocolError, Reader, Writer, is_region, part_length

__all__ = [
    "RESOURCE_BROKER",
    "RESOURCE_TOPIC",
    "APIS",
    "ARROW_BODY_FEATURE",
    "AbortedTransaction",
    "ApiKey",
    "ApiVersion",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "BrokerMetadata",
    "CODECS",
    "ClientConnection",
    "ConfigEntry",
    "ConfigResource",
    "CreatableTopic",
    "CreateTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DEFAULT_MAX_FRAME_BYTES",
    "DeleteTopicResult",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "EARLIEST_TIMESTAMP",
    "FetchPartition",
    "FetchPartitionResponse",
    "FetchRequest",
    "FetchResponse",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "FrameDecoder",
    "FrameTooLarge",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "LATEST_TIMESTAMP",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "MetadataRequest",
    "MetadataResponse",
    "OffsetCommitPartition",
    "OffsetCommitPartitionResponse",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetFetchPartitionResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "PartitionMetadata",
    "ProducePartitionData",
    "ProducePartitionResponse",
    "ProduceRequest",
    "ProduceResponse",
    "ProtocolError",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "Reader",
    "RequestHeader",
    "RequestReceived",
    "ResponseReceived",
    "SUPPORTED_VERSIONS",
    "ServerConnection",
    "SupportedFeature",
    "TopicMetadata",
    "UnsupportedRequest",
    "Writer",
    "decode_request_body",
    "decode_request_header",
    "decode_response_body",
    "encode_request",
    "encode_response",
    "frame_bytes",
    "is_flexible",
    "is_region",
    "is_supported",
    "part_length",
]
