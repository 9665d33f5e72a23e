"""The codec table: one request and one response codec per (API key, version).

Frames (all integers big-endian)::

    frame     size int32, then a request or a response
    request   header v1: api_key int16, api_version int16, correlation_id int32, client_id STRING?
              header v2 (flexible versions): header v1 + tagged fields; then the body
    response  header v0: correlation_id int32; header v1 (flexible versions, except
              ApiVersions, whose response header is always v0): + tagged fields; then the body

Bodies follow :mod:`.schemas`. Produce has hand-written fast paths for the
non-flexible versions our clients use (one topic, one partition), because a
produce of one message per request is a hot path; Fetch has them for every
version (:mod:`.fetch_fast`), because a consumer makes thousands of fetch
round trips a second. They produce exactly the bytes of the general codec
(the tests compare both) and leave any other shape to it.
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import UnsupportedVersion
from ..format._speedups import load_extension
from . import adapters as a
from . import fetch_fast
from . import messages as m
from .api_table import APIS, CODECS, LOGSOURCE_ARROW_TAG, SUPPORTED_VERSIONS, Api  # noqa: F401 (re-exported)
from .primitives import ZERO_COPY_THRESHOLD, ProtocolError, Reader, Writer
from .schema import skip_tagged_fields, write_empty_tagged_fields


def is_supported(api_key: int, api_version: int) -> bool:
    """True if this implementation speaks ``api_key`` at ``api_version``."""
    return (api_key, api_version) in CODECS


def is_flexible(api_key: int, api_version: int) -> bool:
    """True if (key, version) uses compact types and tagged fields (request header v2)."""
    return CODECS[(api_key, api_version)][0].flexible


def response_header_is_flexible(api_key: int, api_version: int) -> bool:
    """Response header v1? (ApiVersions always answers with header v0, so old clients can parse it.)"""
    return api_key != m.ApiKey.API_VERSIONS and is_flexible(api_key, api_version)


#: the compiled Produce fast paths (protocol/_cproduce.pyx), None when not built or LOGSOURCE_NO_EXTENSIONS
#: is set: where they return None the Python code below runs (their reference)
_cproduce = load_extension(__name__.rpartition(".")[0] + "._cproduce")
if _cproduce is not None and not all(
    (0, v) in CODECS and not CODECS[(0, v)][0].flexible and not CODECS[(0, v)][1].flexible
    for v in range(3, 9)
):
    _cproduce = None  # the compiled code knows Produce v3-v8 as non-flexible


# ------------------------------------------------------------------ headers

_HEADER_FIXED = struct.Struct(">hhi")
_HEADER_FIXED_ID = struct.Struct(">hhih")


def encode_request_header(h: m.RequestHeader) -> bytes:
    """Request header v1, or v2 when the (key, version) is flexible."""
    w = Writer()
    w.i16(h.api_key)
    w.i16(h.api_version)
    w.i32(h.correlation_id)
    w.nstring(h.client_id)
    if is_supported(h.api_key, h.api_version) and is_flexible(h.api_key, h.api_version):
        write_empty_tagged_fields(w)
    return bytes(w.buf)


def decode_request_header(r: Reader) -> m.RequestHeader:
    """Decode the v1 part of a request header (the v2 tagged fields are read with the body)."""
    pos = r.pos
    if r.end - pos >= 10:
        key, version, cid, n = _HEADER_FIXED_ID.unpack_from(r.buf, pos)
        if n == -1:
            r.pos = pos + 10
            return m.RequestHeader(key, version, cid, None)
        if 0 <= n <= r.end - pos - 10:
            try:
                client_id = str(r.buf[pos + 10 : pos + 10 + n], "utf-8")
            except UnicodeDecodeError:
                pass  # the general path below raises the ProtocolError
            else:
                r.pos = pos + 10 + n
                return m.RequestHeader(key, version, cid, client_id)
    if r.end - r.pos < 8:
        raise ProtocolError(f"truncated request header: {r.end - r.pos} bytes")
    key, version, cid = _HEADER_FIXED.unpack_from(r.buf, r.pos)
    r.pos += 8
    return m.RequestHeader(key, version, cid, r.nstring())


# ------------------------------------------------------------------ requests

_ENCODE_ERRORS = (struct.error, ValueError, OverflowError, TypeError, AttributeError, KeyError)


def encode_request(header: m.RequestHeader, request: Any) -> list[Any]:
    """Encode a whole request frame at ``header.api_version``; returns its parts (see Writer)."""
    key, version = header.api_key, header.api_version
    pair = CODECS.get((key, version))
    if pair is None:
        raise UnsupportedVersion(f"api key {key} version {version} is not implemented")
    api = APIS[key]
    if not isinstance(request, api.request):
        raise TypeError(f"{type(request).__name__} does not match api key {key}")
    if key == 0 and not pair[0].flexible:
        try:
            fast = _encode_produce_request_fast(header, request)
        except _ENCODE_ERRORS:
            fast = None  # the general path raises the precise error
        if fast is not None:
            return fast
    elif key == 1:
        fast = fetch_fast.encode_request(header, request)
        if fast is not None:
            return fast
    w = Writer()
    try:
        pair[0].write(w, api.req_to(request, version))
    except _ENCODE_ERRORS as e:
        raise ProtocolError(f"cannot encode {type(request).__name__} v{version}: {e}") from e
    return w.frame(encode_request_header(header))


def decode_request_body(header: m.RequestHeader, r: Reader) -> Any:
    """Decode a request's body (and its header's tagged fields) for a supported (key, version)."""
    key, version = header.api_key, header.api_version
    codec = CODECS[(key, version)][0]
    if codec.flexible:
        skip_tagged_fields(r)
    elif key == 0:
        fast = _decode_produce_request_fast(r)
        if fast is not None:
            return fast
    if key == 1:
        fast = fetch_fast.decode_request(r, version)
        if fast is not None:
            return fast
    req = APIS[key].req_from(codec.read(r), version)
    if key not in _TRAILING_BYTES_IGNORED:
        r.done(f"{codec.message.name} v{version}")
    return req


#: Requests whose trailing bytes are ignored, as Kafka's broker ignores them (it never checks that a
#: request body was consumed). librdkafka 2.x sends Metadata v9+ for all topics with the topics
#: array's 4-byte placeholder left in place: a null compact array (0x00), then 3 bytes too many.
_TRAILING_BYTES_IGNORED = frozenset({m.ApiKey.METADATA})


# ------------------------------------------------------------------ responses


def encode_response(header: m.RequestHeader, response: Any) -> list[Any]:
    """Encode the response frame to ``header``'s request; returns its parts (FileRegions stay parts)."""
    key, version = header.api_key, header.api_version
    resp_codec = CODECS[(key, version)][1]
    if key == 0 and not resp_codec.flexible:
        if _cproduce is not None:
            out = _cproduce.encode_produce_response(header.correlation_id, version, response)
            if out is not None:
                return [out]
        try:
            fast = _encode_produce_response_fast(header.correlation_id, version, response)
        except _ENCODE_ERRORS:
            fast = None
        if fast is not None:
            return fast
    elif key == 1:
        fast = fetch_fast.encode_response(header.correlation_id, version, response)
        if fast is not None:
            return fast
    head = bytearray(header.correlation_id.to_bytes(4, "big", signed=True))
    if response_header_is_flexible(key, version):
        head += b"\x00"
    w = Writer()
    try:
        resp_codec.write(w, APIS[key].resp_to(response, version))
    except _ENCODE_ERRORS as e:
        raise ProtocolError(f"cannot encode {type(response).__name__} v{version}: {e}") from e
    return w.frame(bytes(head))


def encode_api_versions_fallback(correlation_id: int) -> list[Any]:
    """Kafka's answer to an ApiVersions version it does not know: a v0 body with error 35
    (UnsupportedVersion) and the supported ranges, so the client can retry at a version we speak."""
    resp = m.ApiVersionsResponse(
        UnsupportedVersion.code,
        [m.ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())],
    )
    w = Writer()
    CODECS[(m.ApiKey.API_VERSIONS, 0)][1].write(w, a.api_versions_resp_to(resp, 0))
    return w.frame(correlation_id.to_bytes(4, "big", signed=True))


def decode_response_body(api_key: int, api_version: int, r: Reader) -> Any:
    """Decode a response (after the correlation id) to a request of (key, version)."""
    if response_header_is_flexible(api_key, api_version):
        skip_tagged_fields(r)
    codec = CODECS[(api_key, api_version)][1]
    if api_key == 1:
        fast = fetch_fast.decode_response(r, api_version)
        if fast is not None:
            return fast
    elif api_key == 0 and not codec.flexible:
        fast = _decode_produce_response_fast(r, api_version)
        if fast is not None:
            return fast
    if api_key == m.ApiKey.API_VERSIONS and api_version > 0:
        # an unsupported version is answered with a v0 body carrying error 35
        if r.end - r.pos >= 2 and r.buf[r.pos : r.pos + 2] == UnsupportedVersion.code.to_bytes(2, "big"):
            save = r.pos
            try:
                d = CODECS[(api_key, 0)][1].read(r)
                r.done("ApiVersionsResponse v0")
                return a.api_versions_resp_from(d, 0)
            except ProtocolError:
                r.pos = save
    resp = APIS[api_key].resp_from(codec.read(r), api_version)
    r.done(f"{codec.message.name} v{api_version}")
    return resp


# ------------------------------------------------------------------ Produce fast paths (v3-v8)

_PRODUCE_REQ_FRAME_HEAD = struct.Struct(">ihhi")  # size, api key, version, correlation id
_I16 = struct.Struct(">h")
_PRODUCE_REQ_HEAD = struct.Struct(">hhiih")  # txn len (-1), acks, timeout, topic count, name length
_PRODUCE_REQ_PART = struct.Struct(">iii")  # partition count, partition, records length
_PRODUCE_REQ_PART_HEAD = struct.Struct(">ii")  # partition count, partition


#: (client id, acks, timeout, topic, partition) -> the request's bytes between the correlation id
#: and the records' length, which repeat in every request a producer sends to a partition
_PRODUCE_REQ_MIDDLE: dict[tuple, bytes] = {}


def _produce_request_middle(
    client_id: str | None, acks: int, timeout_ms: int, topic: str, partition: int
) -> bytes | None:
    name = topic.encode("utf-8")
    client = client_id.encode("utf-8") if client_id is not None else None
    if len(name) > 0x7FFF or (client is not None and len(client) > 0x7FFF):
        return None
    mid = (_I16.pack(len(client)) + client if client is not None else b"\xff\xff") + b"".join(
        (
            _PRODUCE_REQ_HEAD.pack(-1, acks, timeout_ms, 1, len(name)),
            name,
            _PRODUCE_REQ_PART_HEAD.pack(1, partition),
        )
    )
    if len(_PRODUCE_REQ_MIDDLE) >= 4096:  # bounded: many producers with many partitions
        _PRODUCE_REQ_MIDDLE.clear()
    _PRODUCE_REQ_MIDDLE[(client_id, acks, timeout_ms, topic, partition)] = mid
    return mid


def _encode_produce_request_fast(header: m.RequestHeader, req: m.ProduceRequest) -> list[Any] | None:
    """encode_produce_one's frame for a request of one partition without a transactional id, or None."""
    if len(req.partitions) != 1 or req.transactional_id is not None:
        return None
    p = req.partitions[0]
    return encode_produce_one(
        header.client_id,
        header.api_version,
        header.correlation_id,
        req.acks,
        req.timeout_ms,
        p.topic,
        p.partition,
        p.records,
    )


def _produce_one_frame(
    client_id: str | None,
    version: int,
    cid: int,
    acks: int,
    timeout_ms: int,
    topic: str,
    partition: int,
    rec: bytes | bytearray,
) -> list[Any] | None:
    out = bytearray()
    if not _put_produce_head(out, client_id, version, cid, acks, timeout_ms, topic, partition, len(rec)):
        return None
    if len(rec) >= ZERO_COPY_THRESHOLD:
        return [out, rec]
    out += rec
    return [out]


def _put_produce_head(
    out: bytearray,
    client_id: str | None,
    version: int,
    cid: int,
    acks: int,
    timeout_ms: int,
    topic: str,
    partition: int,
    n: int,
) -> bool:
    """Append a one-partition Produce frame's bytes up to its ``n`` bytes of records to ``out``; False
    (nothing appended) for a name it cannot write here."""
    mid = _PRODUCE_REQ_MIDDLE.get((client_id, acks, timeout_ms, topic, partition))
    if mid is None:
        mid = _produce_request_middle(client_id, acks, timeout_ms, topic, partition)
        if mid is None:
            return False
    head = _PRODUCE_REQ_FRAME_HEAD.pack(8 + len(mid) + 4 + n, 0, version, cid)
    out += head
    out += mid
    out += _I32.pack(n)
    return True


def encode_produce_many(
    client_id: str | None, version: int, first_cid: int, requests: list[Any]
) -> bytearray | None:
    """The frames of ``requests`` (OnePartitionProduce, correlation ids from ``first_cid`` on) one after
    the other in one buffer, the bytes :func:`encode_produce_one` writes for each; None where one of
    them takes another path (the general one, or a separate part for records of the zero-copy size)."""
    pair = CODECS.get((0, version))
    if pair is None or pair[0].flexible:
        return None
    return produce_frames(client_id, version, first_cid, requests)


def _produce_frames(
    client_id: str | None, version: int, first_cid: int, requests: list[Any]
) -> bytearray | None:
    """encode_produce_many after its version check (a non-flexible Produce version): the reference of
    the compiled ``_cround.produce_frames``."""
    out = bytearray()
    cid = first_cid
    try:
        for r in requests:
            rec = r.records
            if type(rec) not in (bytes, bytearray) or len(rec) >= ZERO_COPY_THRESHOLD:
                return None
            if not _put_produce_head(
                out, client_id, version, cid, r.acks, r.timeout_ms, r.topic, r.partition, len(rec)
            ):
                return None
            out += rec
            cid = (cid + 1) & 0x7FFFFFFF
    except _ENCODE_ERRORS:
        return None
    return out


#: a round's frames in one buffer: compiled (protocol/_cround.pyx, one call, no object per frame) or the
#: reference above
_cround = load_extension(__name__.rpartition(".")[0] + "._cround")
produce_frames = (
    _cround.produce_frames
    if _cround is not None
    and _cround.bind(_PRODUCE_REQ_MIDDLE, _produce_request_middle, ZERO_COPY_THRESHOLD, _ENCODE_ERRORS)
    else _produce_frames
)


def encode_produce_one(
    client_id: str | None,
    version: int,
    cid: int,
    acks: int,
    timeout_ms: int,
    topic: str,
    partition: int,
    records: bytes | bytearray,
) -> list[Any] | None:
    """The frame parts ``encode_request`` writes for ``ProduceRequest([ProducePartitionData(topic,
    partition, records)], acks, timeout_ms)`` at ``version`` with correlation id ``cid``, without
    those objects (the producer's request of one batch); None where encode_request takes its general
    path (a flexible or unknown version, a name it cannot write here, a field out of range)."""
    pair = CODECS.get((0, version))
    if pair is None or pair[0].flexible or type(records) not in (bytes, bytearray):
        return None
    try:
        return _produce_one_frame(client_id, version, cid, acks, timeout_ms, topic, partition, records)
    except _ENCODE_ERRORS:
        return None


def _decode_produce_request_fast(r: Reader) -> m.ProduceRequest | None:
    # one topic, one partition, no transactional id, records to the end of the frame
    buf, pos, end = r.buf, r.pos, r.end
    if end - pos < 26:
        return None
    txn_len, acks, timeout, ntopics, name_len = _PRODUCE_REQ_HEAD.unpack_from(buf, pos)
    head = pos + 14 + name_len
    if txn_len != -1 or ntopics != 1 or name_len < 0 or head + 12 > end:
        return None
    nparts, partition, n = _PRODUCE_REQ_PART.unpack_from(buf, head)
    if nparts != 1 or n < 0 or head + 12 + n != end:
        return None
    try:
        name = str(buf[pos + 14 : head], "utf-8")
    except UnicodeDecodeError:
        return None
    r.pos = end
    return m.ProduceRequest([m.ProducePartitionData(name, partition, buf[head + 12 : end])], acks, timeout)


def new_produce_responses(
    topic: str, partition: int, n: int
) -> tuple[list[m.ProduceResponse], list[m.ProducePartitionResponse]]:
    """``n`` ProduceResponses of one partition each, every other field at its default: (the responses,
    their partition responses), for the handler to fill in (a run of produces: one per request)."""
    if _new_responses is not None:
        made = _new_responses(topic, partition, n)
        if made is not None:
            return made
    parts = [m.ProducePartitionResponse(topic, partition) for _ in range(n)]
    return [m.ProduceResponse([p]) for p in parts], parts


_new_responses = (
    _cproduce.new_produce_responses
    if _cproduce is not None and _cproduce.bind_responses(m.ProduceResponse, m.ProducePartitionResponse)
    else None
)


# response v3-v8, one topic and one partition without messages: per version the struct of
# (partition count, index, error, base offset, log append time[, log start][, 0 record errors, null message])
_PRODUCE_RESP_HEAD = struct.Struct(">iiih")  # size, correlation id, topic count, name length
_PRODUCE_RESP_PART = {
    **{v: struct.Struct(">iihqq") for v in (3, 4)},
    **{v: struct.Struct(">iihqqq") for v in (5, 6, 7)},
    8: struct.Struct(">iihqqqih"),
}
_I32 = struct.Struct(">i")


def _encode_produce_response_fast(cid: int, version: int, resp: m.ProduceResponse) -> list[Any] | None:
    parts = resp.partitions
    # record errors (v8) go by the general encoder, with or without a message
    if len(parts) != 1 or parts[0].error_message is not None or parts[0].record_errors:
        return None
    p = parts[0]
    name = p.topic.encode("utf-8")
    if len(name) > 0x7FFF:
        return None
    st = _PRODUCE_RESP_PART[version]
    fields = [1, p.partition, p.error_code, p.base_offset, p.log_append_time_ms]
    if version >= 5:
        fields.append(p.log_start_offset)
    if version >= 8:
        fields += [0, -1]
    out = bytearray(_PRODUCE_RESP_HEAD.pack(4 + 6 + len(name) + st.size + 4, cid, 1, len(name)))
    out += name
    out += st.pack(*fields)
    out += _I32.pack(resp.throttle_time_ms)
    return [out]


def _decode_produce_response_fast(r: Reader, version: int) -> m.ProduceResponse | None:
    resp = produce_response_one(r.buf, r.pos, r.end, version)
    if resp is not None:
        r.pos = r.end
    return resp


def decode_produce_response_one(buf: Any, pos: int, end: int, version: int) -> m.ProduceResponse | None:
    """The ProduceResponse v3-v8 in ``buf[pos:end]`` (after the correlation id), or None (the general
    decode takes it): one topic and one partition, no record errors, no error message (the producer's
    answer). The reference of ``_cproduce.decode_produce_response``; :data:`produce_response_one` is
    the one in use."""
    if not 3 <= version <= 8 or pos < 0 or end > len(buf) or end - pos < 6:
        return None
    ntopics, name_len = _PRODUCE_RESP_TOPIC.unpack_from(buf, pos)
    st = _PRODUCE_RESP_PART[version]
    head = pos + 6 + name_len
    if ntopics != 1 or name_len < 0 or head + st.size + 4 != end:
        return None
    vals = st.unpack_from(buf, head)
    if vals[0] != 1 or (version >= 8 and (vals[-2] != 0 or vals[-1] != -1)):
        return None
    try:
        name = str(buf[pos + 6 : head], "utf-8")
    except UnicodeDecodeError:
        return None
    lso = vals[5] if version >= 5 else -1
    throttle = _I32.unpack_from(buf, end - 4)[0]
    return m.ProduceResponse(
        [m.ProducePartitionResponse(name, vals[1], vals[2], vals[3], vals[4], lso)], throttle
    )


_PRODUCE_RESP_TOPIC = struct.Struct(">ih")
#: the ProduceResponse decode in use: compiled (``_cproduce``, its classes bound) or the reference
produce_response_one = (
    _cproduce.decode_produce_response if _new_responses is not None else decode_produce_response_one
)
