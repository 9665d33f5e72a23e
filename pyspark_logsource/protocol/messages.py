"""Typed requests and responses, and their byte encoding (version 0 of each API).

Requests and responses are flat lists of per-partition entries that carry
their topic name; on the wire they are grouped by topic (Kafka's nesting), in
order of first appearance. See the package docstring for the byte layout.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from .primitives import ZERO_COPY_THRESHOLD, ProtocolError, Reader, Writer

# ------------------------------------------------------------------ api keys


class ApiKey(IntEnum):
    """Kafka's api keys for the requests this protocol carries."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22


#: api key -> (min version, max version) this implementation speaks.
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {int(k): (0, 0) for k in ApiKey}

#: ListOffsets special timestamps.
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def _group(entries: list, topic_of: Callable[[Any], str] = lambda e: e.topic) -> dict[str, list]:
    groups: dict[str, list] = {}
    for e in entries:
        groups.setdefault(topic_of(e), []).append(e)
    return groups


# ------------------------------------------------------------------ headers


@dataclass(slots=True)
class RequestHeader:
    """api_key int16, api_version int16, correlation_id int32, client_id nullable string."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def encode_request_header(h: RequestHeader) -> bytes:
    """Encode a request header."""
    w = Writer()
    w.i16(h.api_key)
    w.i16(h.api_version)
    w.i32(h.correlation_id)
    w.nstring(h.client_id)
    return bytes(w.buf)


_HEADER_FIXED = struct.Struct(">hhi")


_HEADER_FIXED_ID = struct.Struct(">hhih")


def decode_request_header(r: Reader) -> RequestHeader:
    """Decode a request header from the start of a frame."""
    pos = r.pos
    if r.end - pos >= 10:
        key, version, cid, n = _HEADER_FIXED_ID.unpack_from(r.buf, pos)
        if n == -1:
            r.pos = pos + 10
            return RequestHeader(key, version, cid, None)
        if 0 <= n <= r.end - pos - 10:
            try:
                client_id = str(r.buf[pos + 10 : pos + 10 + n], "utf-8")
            except UnicodeDecodeError:
                pass  # the general path below raises the ProtocolError
            else:
                r.pos = pos + 10 + n
                return RequestHeader(key, version, cid, client_id)
    if r.end - r.pos < 8:
        raise ProtocolError(f"truncated request header: {r.end - r.pos} bytes")
    key, version, cid = _HEADER_FIXED.unpack_from(r.buf, r.pos)
    r.pos += 8
    return RequestHeader(key, version, cid, r.nstring())


# ------------------------------------------------------------------ base classes


@dataclass(slots=True)
class Response:
    """Every response body starts with a top-level error code and message.

    When ``error_code`` is not 0 the rest of the body is absent (for example
    UnsupportedVersion for an unknown api key); per-partition errors are in
    the entries.
    """

    error_code: int = 0
    error_message: str | None = None


# ------------------------------------------------------------------ ApiVersions 18


@dataclass(slots=True)
class ApiVersionsRequest:
    """Ask which api keys and versions the broker supports."""

    API_KEY = ApiKey.API_VERSIONS


@dataclass(slots=True)
class ApiVersion:
    """One supported api key with its version range."""

    api_key: int
    min_version: int
    max_version: int


@dataclass(slots=True)
class ApiVersionsResponse(Response):
    """The broker's supported api keys and versions."""

    api_keys: list[ApiVersion] = field(default_factory=list)


def _enc_api_versions_req(w: Writer, m: ApiVersionsRequest) -> None:
    pass


def _dec_api_versions_req(r: Reader) -> ApiVersionsRequest:
    return ApiVersionsRequest()


def _enc_api_versions_resp(w: Writer, m: ApiVersionsResponse) -> None:
    w.array(m.api_keys, lambda w, a: (w.i16(a.api_key), w.i16(a.min_version), w.i16(a.max_version)))


def _dec_api_versions_resp(r: Reader, m: ApiVersionsResponse) -> None:
    m.api_keys = r.array(lambda r: ApiVersion(r.i16(), r.i16(), r.i16()), 6)


# ------------------------------------------------------------------ Metadata 3


@dataclass(slots=True)
class MetadataRequest:
    """Describe the cluster; ``topics=None`` means every topic."""

    API_KEY = ApiKey.METADATA
    topics: list[str] | None = None
    allow_auto_topic_creation: bool = False


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


@dataclass(slots=True)
class MetadataResponse(Response):
    """Brokers, controller, cluster id and topics."""

    brokers: list[BrokerMetadata] = field(default_factory=list)
    cluster_id: str | None = None
    controller_id: int = -1
    topics: list[TopicMetadata] = field(default_factory=list)


def _enc_metadata_req(w: Writer, m: MetadataRequest) -> None:
    w.narray(m.topics, Writer.string)
    w.boolean(m.allow_auto_topic_creation)


def _dec_metadata_req(r: Reader) -> MetadataRequest:
    topics = r.narray(Reader.string, 2)
    return MetadataRequest(topics, r.boolean())


def _int32s(w: Writer, xs: list[int]) -> None:
    w.array(xs, Writer.i32)


def _enc_partition_md(w: Writer, p: PartitionMetadata) -> None:
    w.i16(p.error_code)
    w.i32(p.partition)
    w.i32(p.leader_id)
    w.i32(p.leader_epoch)
    _int32s(w, p.replicas)
    _int32s(w, p.isr)
    _int32s(w, p.offline_replicas)


def _dec_partition_md(r: Reader) -> PartitionMetadata:
    err, part, leader, epoch = r.i16(), r.i32(), r.i32(), r.i32()
    replicas = r.array(Reader.i32, 4)
    isr = r.array(Reader.i32, 4)
    offline = r.array(Reader.i32, 4)
    return PartitionMetadata(part, leader, epoch, replicas, isr, offline, err)


def _enc_metadata_resp(w: Writer, m: MetadataResponse) -> None:
    def broker(w: Writer, b: BrokerMetadata) -> None:
        w.i32(b.node_id)
        w.string(b.host)
        w.i32(b.port)
        w.nstring(b.rack)

    def topic(w: Writer, t: TopicMetadata) -> None:
        w.i16(t.error_code)
        w.string(t.name)
        w.boolean(t.is_internal)
        w.array(t.partitions, _enc_partition_md)

    w.array(m.brokers, broker)
    w.nstring(m.cluster_id)
    w.i32(m.controller_id)
    w.array(m.topics, topic)


def _dec_metadata_resp(r: Reader, m: MetadataResponse) -> None:
    def broker(r: Reader) -> BrokerMetadata:
        return BrokerMetadata(r.i32(), r.string(), r.i32(), r.nstring())

    def topic(r: Reader) -> TopicMetadata:
        err, name, internal = r.i16(), r.string(), r.boolean()
        return TopicMetadata(name, r.array(_dec_partition_md, 26), internal, err)

    m.brokers = r.array(broker, 12)
    m.cluster_id = r.nstring()
    m.controller_id = r.i32()
    m.topics = r.array(topic, 9)


# ------------------------------------------------------------------ CreateTopics 19


@dataclass(slots=True)
class CreatableTopic:
    """A topic to create; ``config`` uses Kafka's topic-level spellings."""

    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1
    config: dict[str, str | None] = field(default_factory=dict)


@dataclass(slots=True)
class CreateTopicsRequest:
    """Create topics."""

    API_KEY = ApiKey.CREATE_TOPICS
    topics: list[CreatableTopic] = field(default_factory=list)
    timeout_ms: int = 30000
    validate_only: bool = False


@dataclass(slots=True)
class CreateTopicResult:
    """Outcome for one topic of a CreateTopics request."""

    name: str
    error_code: int = 0
    error_message: str | None = None
    num_partitions: int = -1


@dataclass(slots=True)
class CreateTopicsResponse(Response):
    """Per-topic outcomes."""

    topics: list[CreateTopicResult] = field(default_factory=list)


def _enc_create_topics_req(w: Writer, m: CreateTopicsRequest) -> None:
    def topic(w: Writer, t: CreatableTopic) -> None:
        w.string(t.name)
        w.i32(t.num_partitions)
        w.i16(t.replication_factor)
        w.array(t.config.items(), lambda w, kv: (w.string(kv[0]), w.nstring(kv[1])))

    w.array(m.topics, topic)
    w.i32(m.timeout_ms)
    w.boolean(m.validate_only)


def _dec_create_topics_req(r: Reader) -> CreateTopicsRequest:
    def topic(r: Reader) -> CreatableTopic:
        name, n, rf = r.string(), r.i32(), r.i16()
        cfg = dict(r.array(lambda r: (r.string(), r.nstring()), 4))
        return CreatableTopic(name, n, rf, cfg)

    topics = r.array(topic, 12)
    return CreateTopicsRequest(topics, r.i32(), r.boolean())


def _enc_create_topics_resp(w: Writer, m: CreateTopicsResponse) -> None:
    def topic(w: Writer, t: CreateTopicResult) -> None:
        w.string(t.name)
        w.i16(t.error_code)
        w.nstring(t.error_message)
        w.i32(t.num_partitions)

    w.array(m.topics, topic)


def _dec_create_topics_resp(r: Reader, m: CreateTopicsResponse) -> None:
    m.topics = r.array(lambda r: CreateTopicResult(r.string(), r.i16(), r.nstring(), r.i32()), 10)


# ------------------------------------------------------------------ DeleteTopics 20


@dataclass(slots=True)
class DeleteTopicsRequest:
    """Delete topics by name."""

    API_KEY = ApiKey.DELETE_TOPICS
    topics: list[str] = field(default_factory=list)
    timeout_ms: int = 30000


@dataclass(slots=True)
class DeleteTopicResult:
    """Outcome for one topic of a DeleteTopics request."""

    name: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class DeleteTopicsResponse(Response):
    """Per-topic outcomes."""

    topics: list[DeleteTopicResult] = field(default_factory=list)


def _enc_delete_topics_req(w: Writer, m: DeleteTopicsRequest) -> None:
    w.array(m.topics, Writer.string)
    w.i32(m.timeout_ms)


def _dec_delete_topics_req(r: Reader) -> DeleteTopicsRequest:
    return DeleteTopicsRequest(r.array(Reader.string, 2), r.i32())


def _enc_delete_topics_resp(w: Writer, m: DeleteTopicsResponse) -> None:
    w.array(m.topics, lambda w, t: (w.string(t.name), w.i16(t.error_code), w.nstring(t.error_message)))


def _dec_delete_topics_resp(r: Reader, m: DeleteTopicsResponse) -> None:
    m.topics = r.array(lambda r: DeleteTopicResult(r.string(), r.i16(), r.nstring()), 6)


# ------------------------------------------------------------------ Produce 0


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


@dataclass(slots=True)
class ProduceResponse(Response):
    """Per-partition outcomes."""

    partitions: list[ProducePartitionResponse] = field(default_factory=list)


def _enc_produce_req(w: Writer, m: ProduceRequest) -> None:
    w.nstring(m.transactional_id)
    w.i16(m.acks)
    w.i32(m.timeout_ms)
    w.array(
        _group(m.partitions).items(),
        lambda w, kv: (w.string(kv[0]), w.array(kv[1], lambda w, p: (w.i32(p.partition), w.nbytes(p.records)))),
    )


# The common produce request: no transactional id, one topic, one partition, records to the end.
_PRODUCE_REQ_HEAD = struct.Struct(">hhiih")  # txn len (-1), acks, timeout, topic count, name length
_PRODUCE_REQ_PART = struct.Struct(">iii")  # partition count, partition, records length


def _dec_produce_req(r: Reader) -> ProduceRequest:
    # Fast path: one unpack per fixed run of fields; anything else takes the general path below,
    # which re-reads from the same position and raises the precise error.
    buf, pos, end = r.buf, r.pos, r.end
    if end - pos >= 26:
        txn_len, acks, timeout, ntopics, name_len = _PRODUCE_REQ_HEAD.unpack_from(buf, pos)
        head = pos + 14 + name_len
        if txn_len == -1 and ntopics == 1 and name_len >= 0 and head + 12 <= end:
            nparts, partition, n = _PRODUCE_REQ_PART.unpack_from(buf, head)
            if nparts == 1 and n >= 0 and head + 12 + n == end:
                try:
                    name = str(buf[pos + 14 : head], "utf-8")
                except UnicodeDecodeError:
                    name = None
                if name is not None:
                    r.pos = end
                    return ProduceRequest([ProducePartitionData(name, partition, buf[head + 12 : end])], acks, timeout)
    txn, acks, timeout = r.nstring(), r.i16(), r.i32()
    out: list[ProducePartitionData] = []
    for _ in range(r.count(6)):
        name = r.string()
        for _ in range(r.count(8)):
            p = r.i32()
            out.append(ProducePartitionData(name, p, r.nbytes()))
    return ProduceRequest(out, acks, timeout, txn)


def _enc_produce_resp(w: Writer, m: ProduceResponse) -> None:
    def part(w: Writer, p: ProducePartitionResponse) -> None:
        w.i32(p.partition)
        w.i16(p.error_code)
        w.nstring(p.error_message)
        w.i64(p.base_offset)
        w.i64(p.log_append_time_ms)
        w.i64(p.log_start_offset)

    w.array(_group(m.partitions).items(), lambda w, kv: (w.string(kv[0]), w.array(kv[1], part)))


_PRODUCE_RESP_BODY_HEAD = struct.Struct(">ih")  # topic count, name length
_PRODUCE_RESP_BODY_PART = struct.Struct(">iihhqqq")  # 1 partition, partition, error, null message, 3 offsets


def _dec_produce_resp(r: Reader, m: ProduceResponse) -> None:
    buf, pos, end = r.buf, r.pos, r.end
    if end - pos >= 6:
        ntopics, name_len = _PRODUCE_RESP_BODY_HEAD.unpack_from(buf, pos)
        head = pos + 6 + name_len
        if ntopics == 1 and name_len >= 0 and head + 36 == end:
            nparts, p, err, msg_len, base, lat, lso = _PRODUCE_RESP_BODY_PART.unpack_from(buf, head)
            if nparts == 1 and msg_len == -1:
                try:
                    name = str(buf[pos + 6 : head], "utf-8")
                except UnicodeDecodeError:
                    name = None
                if name is not None:
                    r.pos = end
                    m.partitions = [ProducePartitionResponse(name, p, err, base, lat, lso, None)]
                    return
    out: list[ProducePartitionResponse] = []
    for _ in range(r.count(6)):
        name = r.string()
        for _ in range(r.count(32)):
            p, err, msg = r.i32(), r.i16(), r.nstring()
            out.append(ProducePartitionResponse(name, p, err, r.i64(), r.i64(), r.i64(), msg))
    m.partitions = out


# ------------------------------------------------------------------ Fetch 1


@dataclass(slots=True)
class FetchPartition:
    """Read one partition from ``fetch_offset``, at most ``max_bytes``."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int = 1 << 20
    log_start_offset: int = -1  # reserved for followers


@dataclass(slots=True)
class FetchRequest:
    """Long-poll fetch: answer when ``min_bytes`` are available or ``max_wait_ms`` passed."""

    API_KEY = ApiKey.FETCH
    partitions: list[FetchPartition] = field(default_factory=list)
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 50 * 1024 * 1024
    isolation_level: int = READ_UNCOMMITTED
    replica_id: int = -1


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


@dataclass(slots=True)
class FetchResponse(Response):
    """Per-partition records and watermarks."""

    partitions: list[FetchPartitionResponse] = field(default_factory=list)


def _enc_fetch_req(w: Writer, m: FetchRequest) -> None:
    w.i32(m.replica_id)
    w.i32(m.max_wait_ms)
    w.i32(m.min_bytes)
    w.i32(m.max_bytes)
    w.i8(m.isolation_level)

    def part(w: Writer, p: FetchPartition) -> None:
        w.i32(p.partition)
        w.i64(p.fetch_offset)
        w.i64(p.log_start_offset)
        w.i32(p.max_bytes)

    w.array(_group(m.partitions).items(), lambda w, kv: (w.string(kv[0]), w.array(kv[1], part)))


def _dec_fetch_req(r: Reader) -> FetchRequest:
    replica, wait, minb, maxb, iso = r.i32(), r.i32(), r.i32(), r.i32(), r.i8()
    out: list[FetchPartition] = []
    for _ in range(r.count(6)):
        name = r.string()
        for _ in range(r.count(24)):
            p, off, lso, mb = r.i32(), r.i64(), r.i64(), r.i32()
            out.append(FetchPartition(name, p, off, mb, lso))
    return FetchRequest(out, wait, minb, maxb, iso, replica)


def _enc_fetch_resp(w: Writer, m: FetchResponse) -> None:
    def part(w: Writer, p: FetchPartitionResponse) -> None:
        w.i32(p.partition)
        w.i16(p.error_code)
        w.i64(p.high_watermark)
        w.i64(p.last_stable_offset)
        w.i64(p.log_start_offset)
        w.nbytes(p.records)

    w.array(_group(m.partitions).items(), lambda w, kv: (w.string(kv[0]), w.array(kv[1], part)))


def _dec_fetch_resp(r: Reader, m: FetchResponse) -> None:
    out: list[FetchPartitionResponse] = []
    for _ in range(r.count(6)):
        name = r.string()
        for _ in range(r.count(34)):
            p, err, hw, lso, lstart = r.i32(), r.i16(), r.i64(), r.i64(), r.i64()
            out.append(FetchPartitionResponse(name, p, err, hw, lso, lstart, r.nbytes()))
    m.partitions = out


# ------------------------------------------------------------------ ListOffsets 2


@dataclass(slots=True)
class ListOffsetsPartition:
    """``timestamp``: EARLIEST_TIMESTAMP (-2), LATEST_TIMESTAMP (-1) or ms."""

    topic: str
    partition: int
    timestamp: int


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


@dataclass(slots=True)
class ListOffsetsResponse(Response):
    """Per-partition offsets."""

    partitions: list[ListOffsetsPartitionResponse] = field(default_factory=list)


def _enc_list_offsets_req(w: Writer, m: ListOffsetsRequest) -> None:
    w.i32(m.replica_id)
    w.i8(m.isolation_level)
    w.array(
        _group(m.partitions).items(),
        lambda w, kv: (w.string(kv[0]), w.array(kv[1], lambda w, p: (w.i32(p.partition), w.i64(p.timestamp)))),
    )


def _dec_list_offsets_req(r: Reader) -> ListOffsetsRequest:
    replica, iso = r.i32(), r.i8()
    out: list[ListOffsetsPartition] = []

    def topic(r: Reader) -> None:
        name = r.string()
        r.array(lambda r: out.append(ListOffsetsPartition(name, r.i32(), r.i64())), 12)

    r.array(topic, 6)
    return ListOffsetsRequest(out, iso, replica)


def _enc_list_offsets_resp(w: Writer, m: ListOffsetsResponse) -> None:
    def part(w: Writer, p: ListOffsetsPartitionResponse) -> None:
        w.i32(p.partition)
        w.i16(p.error_code)
        w.i64(p.timestamp)
        w.i64(p.offset)

    w.array(_group(m.partitions).items(), lambda w, kv: (w.string(kv[0]), w.array(kv[1], part)))


def _dec_list_offsets_resp(r: Reader, m: ListOffsetsResponse) -> None:
    out: list[ListOffsetsPartitionResponse] = []

    def topic(r: Reader) -> None:
        name = r.string()
        r.array(lambda r: out.append(ListOffsetsPartitionResponse(name, r.i32(), r.i16(), r.i64(), r.i64())), 22)

    r.array(topic, 6)
    m.partitions = out


# ------------------------------------------------------------------ OffsetCommit 8


@dataclass(slots=True)
class OffsetCommitPartition:
    """The next offset to consume for a partition, plus free-form metadata."""

    topic: str
    partition: int
    offset: int
    metadata: str | None = None


@dataclass(slots=True)
class OffsetCommitRequest:
    """Store offsets for a named group."""

    API_KEY = ApiKey.OFFSET_COMMIT
    group_id: str = ""
    partitions: list[OffsetCommitPartition] = field(default_factory=list)
    generation_id: int = -1
    member_id: str = ""


@dataclass(slots=True)
class OffsetCommitPartitionResponse:
    """Outcome of committing one partition."""

    topic: str
    partition: int
    error_code: int = 0


@dataclass(slots=True)
class OffsetCommitResponse(Response):
    """Per-partition outcomes."""

    partitions: list[OffsetCommitPartitionResponse] = field(default_factory=list)


def _enc_offset_commit_req(w: Writer, m: OffsetCommitRequest) -> None:
    w.string(m.group_id)
    w.i32(m.generation_id)
    w.string(m.member_id)

    def part(w: Writer, p: OffsetCommitPartition) -> None:
        w.i32(p.partition)
        w.i64(p.offset)
        w.nstring(p.metadata)

    w.array(_group(m.partitions).items(), lambda w, kv: (w.string(kv[0]), w.array(kv[1], part)))


def _dec_offset_commit_req(r: Reader) -> OffsetCommitRequest:
    group, gen, member = r.string(), r.i32(), r.string()
    out: list[OffsetCommitPartition] = []

    def topic(r: Reader) -> None:
        name = r.string()
        r.array(lambda r: out.append(OffsetCommitPartition(name, r.i32(), r.i64(), r.nstring())), 14)

    r.array(topic, 6)
    return OffsetCommitRequest(group, out, gen, member)


def _enc_offset_commit_resp(w: Writer, m: OffsetCommitResponse) -> None:
    w.array(
        _group(m.partitions).items(),
        lambda w, kv: (w.string(kv[0]), w.array(kv[1], lambda w, p: (w.i32(p.partition), w.i16(p.error_code)))),
    )


def _dec_offset_commit_resp(r: Reader, m: OffsetCommitResponse) -> None:
    out: list[OffsetCommitPartitionResponse] = []

    def topic(r: Reader) -> None:
        name = r.string()
        r.array(lambda r: out.append(OffsetCommitPartitionResponse(name, r.i32(), r.i16())), 6)

    r.array(topic, 6)
    m.partitions = out


# ------------------------------------------------------------------ OffsetFetch 9


@dataclass(slots=True)
class OffsetFetchRequest:
    """Read a group's committed offsets; ``partitions=None`` means all of them."""

    API_KEY = ApiKey.OFFSET_FETCH
    group_id: str = ""
    partitions: list[tuple[str, int]] | None = None


@dataclass(slots=True)
class OffsetFetchPartitionResponse:
    """A committed offset (-1: none) and its metadata."""

    topic: str
    partition: int
    offset: int = -1
    metadata: str | None = None
    error_code: int = 0


@dataclass(slots=True)
class OffsetFetchResponse(Response):
    """Per-partition committed offsets."""

    partitions: list[OffsetFetchPartitionResponse] = field(default_factory=list)


def _enc_offset_fetch_req(w: Writer, m: OffsetFetchRequest) -> None:
    w.string(m.group_id)
    if m.partitions is None:
        w.narray(None, Writer.string)
        return
    w.array(
        _group(m.partitions, lambda tp: tp[0]).items(),
        lambda w, kv: (w.string(kv[0]), w.array(kv[1], lambda w, tp: w.i32(tp[1]))),
    )


def _dec_offset_fetch_req(r: Reader) -> OffsetFetchRequest:
    group = r.string()
    out: list[tuple[str, int]] = []

    def topic(r: Reader) -> None:
        name = r.string()
        r.array(lambda r: out.append((name, r.i32())), 4)

    topics = r.narray(topic, 6)
    return OffsetFetchRequest(group, None if topics is None else out)


def _enc_offset_fetch_resp(w: Writer, m: OffsetFetchResponse) -> None:
    def part(w: Writer, p: OffsetFetchPartitionResponse) -> None:
        w.i32(p.partition)
        w.i64(p.offset)
        w.nstring(p.metadata)
        w.i16(p.error_code)

    w.array(_group(m.partitions).items(), lambda w, kv: (w.string(kv[0]), w.array(kv[1], part)))


def _dec_offset_fetch_resp(r: Reader, m: OffsetFetchResponse) -> None:
    out: list[OffsetFetchPartitionResponse] = []

    def topic(r: Reader) -> None:
        name = r.string()
        r.array(
            lambda r: out.append(OffsetFetchPartitionResponse(name, r.i32(), r.i64(), r.nstring(), r.i16())), 16
        )

    r.array(topic, 6)
    m.partitions = out


# ------------------------------------------------------------------ InitProducerId 22


@dataclass(slots=True)
class InitProducerIdRequest:
    """Get a producer id (unique across broker restarts) and epoch for idempotence.

    Passing the current id and epoch bumps the epoch (fencing older instances).
    """

    API_KEY = ApiKey.INIT_PRODUCER_ID
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True)
class InitProducerIdResponse(Response):
    """The allocated producer id and epoch."""

    producer_id: int = -1
    producer_epoch: int = -1


def _enc_init_pid_req(w: Writer, m: InitProducerIdRequest) -> None:
    w.nstring(m.transactional_id)
    w.i32(m.transaction_timeout_ms)
    w.i64(m.producer_id)
    w.i16(m.producer_epoch)


def _dec_init_pid_req(r: Reader) -> InitProducerIdRequest:
    return InitProducerIdRequest(r.nstring(), r.i32(), r.i64(), r.i16())


def _enc_init_pid_resp(w: Writer, m: InitProducerIdResponse) -> None:
    w.i64(m.producer_id)
    w.i16(m.producer_epoch)


def _dec_init_pid_resp(r: Reader, m: InitProducerIdResponse) -> None:
    m.producer_id = r.i64()
    m.producer_epoch = r.i16()


# ------------------------------------------------------------------ registry


class _Api:
    __slots__ = ("key", "request", "response", "enc_req", "dec_req", "enc_resp", "dec_resp")

    def __init__(self, key, request, response, enc_req, dec_req, enc_resp, dec_resp) -> None:
        self.key, self.request, self.response = key, request, response
        self.enc_req, self.dec_req, self.enc_resp, self.dec_resp = enc_req, dec_req, enc_resp, dec_resp


APIS: dict[int, _Api] = {
    a.key: a
    for a in [
        _Api(ApiKey.PRODUCE, ProduceRequest, ProduceResponse, _enc_produce_req, _dec_produce_req,
             _enc_produce_resp, _dec_produce_resp),
        _Api(ApiKey.FETCH, FetchRequest, FetchResponse, _enc_fetch_req, _dec_fetch_req,
             _enc_fetch_resp, _dec_fetch_resp),
        _Api(ApiKey.LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse, _enc_list_offsets_req,
             _dec_list_offsets_req, _enc_list_offsets_resp, _dec_list_offsets_resp),
        _Api(ApiKey.METADATA, MetadataRequest, MetadataResponse, _enc_metadata_req, _dec_metadata_req,
             _enc_metadata_resp, _dec_metadata_resp),
        _Api(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse, _enc_offset_commit_req,
             _dec_offset_commit_req, _enc_offset_commit_resp, _dec_offset_commit_resp),
        _Api(ApiKey.OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse, _enc_offset_fetch_req,
             _dec_offset_fetch_req, _enc_offset_fetch_resp, _dec_offset_fetch_resp),
        _Api(ApiKey.API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse, _enc_api_versions_req,
             _dec_api_versions_req, _enc_api_versions_resp, _dec_api_versions_resp),
        _Api(ApiKey.CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse, _enc_create_topics_req,
             _dec_create_topics_req, _enc_create_topics_resp, _dec_create_topics_resp),
        _Api(ApiKey.DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse, _enc_delete_topics_req,
             _dec_delete_topics_req, _enc_delete_topics_resp, _dec_delete_topics_resp),
        _Api(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest, InitProducerIdResponse, _enc_init_pid_req,
             _dec_init_pid_req, _enc_init_pid_resp, _dec_init_pid_resp),
    ]
}

RESPONSE_TYPES: dict[type, int] = {a.response: a.key for a in APIS.values()}


def is_supported(api_key: int, api_version: int) -> bool:
    """True if this implementation speaks ``api_key`` at ``api_version``."""
    rng = SUPPORTED_VERSIONS.get(api_key)
    return rng is not None and rng[0] <= api_version <= rng[1]


# ------------------------------------------------------------------ whole messages

_ENCODE_ERRORS = (struct.error, ValueError, OverflowError, TypeError, AttributeError)


_I16 = struct.Struct(">h")
_PRODUCE_REQ_FRAME_HEAD = struct.Struct(">ihhi")  # size, api key, version, correlation id
_PRODUCE_REQ_BODY_HEAD = struct.Struct(">hhiih")  # txn -1, acks, timeout, 1 topic, name length
_PRODUCE_REQ_BODY_PART = struct.Struct(">iii")  # 1 partition, partition, records length


def _encode_produce_request_fast(header: RequestHeader, m: ProduceRequest) -> list[Any] | None:
    if len(m.partitions) != 1 or m.transactional_id is not None or type(m) is not ProduceRequest:
        return None
    p = m.partitions[0]
    rec = p.records
    if not isinstance(rec, (bytes, bytearray)):
        return None
    name = p.topic.encode("utf-8")
    client = header.client_id.encode("utf-8") if header.client_id is not None else None
    if len(name) > 0x7FFF or (client is not None and len(client) > 0x7FFF):
        return None
    n = len(rec)
    size = 8 + 2 + (len(client) if client is not None else 0) + 14 + len(name) + 12 + n
    out = bytearray(_PRODUCE_REQ_FRAME_HEAD.pack(size, header.api_key, header.api_version, header.correlation_id))
    out += _I16.pack(len(client)) + client if client is not None else b"\xff\xff"
    out += _PRODUCE_REQ_BODY_HEAD.pack(-1, m.acks, m.timeout_ms, 1, len(name))
    out += name
    out += _PRODUCE_REQ_BODY_PART.pack(1, p.partition, n)
    if n >= ZERO_COPY_THRESHOLD:
        return [out, rec]
    out += rec
    return [out]


def encode_request(header: RequestHeader, request: Any) -> list[Any]:
    """Encode a whole request frame; returns its parts (see Writer)."""
    if header.api_key == 0 and type(request) is ProduceRequest:
        try:
            fast = _encode_produce_request_fast(header, request)
        except _ENCODE_ERRORS:
            fast = None  # the general path raises the precise error
        if fast is not None:
            return fast
    api = APIS[header.api_key]
    if not isinstance(request, api.request):
        raise TypeError(f"{type(request).__name__} does not match api key {header.api_key}")
    w = Writer()
    try:
        api.enc_req(w, request)
    except _ENCODE_ERRORS as e:
        raise ProtocolError(f"cannot encode {type(request).__name__}: {e}") from e
    return w.frame(encode_request_header(header))


def decode_request_body(header: RequestHeader, r: Reader) -> Any:
    """Decode the body of a request whose header was already read."""
    req = APIS[header.api_key].dec_req(r)
    r.done(type(req).__name__)
    return req


# A produce response for one partition without error messages, as one pack:
# size, correlation id, error code, null message, 1 topic, name length (name follows),
# then 1 partition, partition, error code, null message, base offset, append time, log start.
_PRODUCE_RESP_HEAD = struct.Struct(">iihhih")
_PRODUCE_RESP_PART = struct.Struct(">iihhqqq")


def _encode_produce_response_fast(correlation_id: int, response: ProduceResponse) -> list[Any] | None:
    parts = response.partitions
    if response.error_code or response.error_message is not None or len(parts) != 1:
        return None
    p = parts[0]
    if p.error_message is not None:
        return None
    name = p.topic.encode("utf-8")
    if len(name) > 0x7FFF:
        return None
    out = bytearray(_PRODUCE_RESP_HEAD.pack(50 + len(name), correlation_id, 0, -1, 1, len(name)))
    out += name
    out += _PRODUCE_RESP_PART.pack(1, p.partition, p.error_code, -1, p.base_offset, p.log_append_time_ms,
                                   p.log_start_offset)  # fmt: skip
    return [out]


def encode_response(correlation_id: int, api_key: int, response: Response) -> list[Any]:
    """Encode a whole response frame; returns its parts (FileRegions stay as parts)."""
    if api_key == 0:
        try:
            fast = _encode_produce_response_fast(correlation_id, response)
        except _ENCODE_ERRORS:
            fast = None  # the general path raises the precise error
        if fast is not None:
            return fast
    w = Writer()
    w.i16(response.error_code)
    w.nstring(response.error_message)
    if response.error_code == 0:
        try:
            APIS[api_key].enc_resp(w, response)
        except _ENCODE_ERRORS as e:
            raise ProtocolError(f"cannot encode {type(response).__name__}: {e}") from e
    return w.frame(correlation_id.to_bytes(4, "big", signed=True))


def encode_error_response(correlation_id: int, error_code: int, message: str | None) -> list[Any]:
    """Encode a body-less error response (e.g. UnsupportedVersion for an unknown api key)."""
    w = Writer()
    w.i16(error_code)
    w.nstring(message)
    return w.frame(correlation_id.to_bytes(4, "big", signed=True))


def decode_response_body(api_key: int, r: Reader) -> Response:
    """Decode a response body (after the correlation id) for a request of ``api_key``."""
    api = APIS[api_key]
    m = api.response()
    m.error_code = r.i16()
    m.error_message = r.nstring()
    if m.error_code == 0:
        api.dec_resp(r, m)
    r.done(type(m).__name__)
    return m
