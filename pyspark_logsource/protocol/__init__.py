"""The wire protocol, sans-IO: typed requests/responses and their bytes.

No sockets, no files: :class:`ClientConnection` and :class:`ServerConnection`
turn bytes into events and messages into frame parts. Kafka's api keys are
kept; every API is at version 0 of *this* protocol (it is Kafka-shaped, not
Kafka-wire-compatible). Error codes are those of :mod:`pyspark_logsource.errors`.

Byte layout (all integers big-endian)::

    frame            size int32 (bytes after it; 0 <= size <= socket.request.max.bytes,
                     checked before the frame is buffered), then:
    request          api_key int16, api_version int16, correlation_id int32,
                     client_id STRING?, body
    response         correlation_id int32, error_code int16, error_message STRING?,
                     body (present only when error_code == 0)

    STRING?          int16 length (-1 = null) + UTF-8      (STRING: never null)
    BYTES?           int32 length (-1 = null) + bytes
    [X]              int32 count (-1 = null), then count X; the count is bounded by
                     the bytes left in the frame before any item is read
    BOOL             int8 0/1

    Per-partition lists are grouped by topic on the wire: [topic STRING, [partition ...]].

    Produce 0        req  transactional_id STRING?, acks int16, timeout_ms int32,
                          [topic, [partition int32, records BYTES?]]
                          (records: an opaque run of whole record batches, format/batch.py)
                     resp [topic, [partition int32, error_code int16, error_message STRING?,
                          base_offset int64, log_append_time_ms int64, log_start_offset int64]]
                          (acks=0: no response frame at all)
    Fetch 1          req  replica_id int32, max_wait_ms int32, min_bytes int32, max_bytes int32,
                          isolation_level int8, [topic, [partition int32, fetch_offset int64,
                          log_start_offset int64, partition_max_bytes int32]]
                     resp [topic, [partition int32, error_code int16, high_watermark int64,
                          last_stable_offset int64, log_start_offset int64, records BYTES?]]
                          (records may end with a partial batch; the broker sends them
                          from the log file with sendfile)
    ListOffsets 2    req  replica_id int32, isolation_level int8, [topic, [partition int32,
                          timestamp int64 (-2 earliest, -1 latest, else ms)]]
                     resp [topic, [partition int32, error_code int16, timestamp int64, offset int64]]
    Metadata 3       req  [topic STRING]? (null = all), allow_auto_topic_creation BOOL
                     resp [node_id int32, host STRING, port int32, rack STRING?],
                          cluster_id STRING?, controller_id int32,
                          [error_code int16, name STRING, is_internal BOOL,
                           [error_code int16, partition int32, leader_id int32, leader_epoch int32,
                            replicas [int32], isr [int32], offline_replicas [int32]]]
    OffsetCommit 8   req  group_id STRING, generation_id int32, member_id STRING,
                          [topic, [partition int32, offset int64, metadata STRING?]]
                     resp [topic, [partition int32, error_code int16]]
    OffsetFetch 9    req  group_id STRING, [topic, [partition int32]]? (null = all)
                     resp [topic, [partition int32, offset int64 (-1 none), metadata STRING?,
                          error_code int16]]
    ApiVersions 18   req  (empty)
                     resp [api_key int16, min_version int16, max_version int16]
    CreateTopics 19  req  [name STRING, num_partitions int32 (-1 default), replication_factor int16,
                          [config_name STRING, config_value STRING?]], timeout_ms int32,
                          validate_only BOOL
                     resp [name STRING, error_code int16, error_message STRING?, num_partitions int32]
    DeleteTopics 20  req  [name STRING], timeout_ms int32
                     resp [name STRING, error_code int16, error_message STRING?]
    InitProducerId 22 req transactional_id STRING?, transaction_timeout_ms int32,
                          producer_id int64, producer_epoch int16
                     resp producer_id int64, producer_epoch int16

An unknown api key or version gets a body-less response with error code 35
(UnsupportedVersion). Bytes that do not parse raise :class:`ProtocolError`
(a subclass of InvalidRequest); the broker then closes that connection only.
A frame must be consumed exactly: trailing bytes are an error.
"""

from __future__ import annotations

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
    APIS,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    SUPPORTED_VERSIONS,
    ApiKey,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BrokerMetadata,
    CreatableTopic,
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
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
    Response,
    TopicMetadata,
    decode_request_body,
    decode_request_header,
    decode_response_body,
    encode_error_response,
    encode_request,
    encode_response,
    is_supported,
)
from .primitives import FrameTooLarge, ProtocolError, Reader, Writer, is_region, part_length

__all__ = [
    "APIS",
    "DEFAULT_MAX_FRAME_BYTES",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "ApiVersion",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "BrokerMetadata",
    "ClientConnection",
    "CreatableTopic",
    "CreateTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeleteTopicResult",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "FetchPartition",
    "FetchPartitionResponse",
    "FetchRequest",
    "FetchResponse",
    "FrameDecoder",
    "FrameTooLarge",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
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
    "Reader",
    "RequestHeader",
    "RequestReceived",
    "Response",
    "ResponseReceived",
    "ServerConnection",
    "TopicMetadata",
    "UnsupportedRequest",
    "Writer",
    "decode_request_body",
    "decode_request_header",
    "decode_response_body",
    "encode_error_response",
    "encode_request",
    "encode_response",
    "frame_bytes",
    "is_region",
    "is_supported",
    "part_length",
]
