"""Hand-written Fetch codecs (v4-v12) for the consumer's hot path.

A consumer reading 200 KB fetches makes thousands of Fetch round trips a
second, and the schema-compiled codec (typed message -> dict -> one closure
per field) cost about 50 us per round trip on the four sides together. These
functions write and read the same bytes with one ``struct`` call per fixed
run of fields. They cover every shape our clients, followers and Kafka's
clients send: any number of topics and partitions, null (written empty) or
present records and aborted transactions (read_committed), replica fetches (``replica_id``
>= 0, ``last_fetched_epoch``), no forgotten topics and no tagged fields (a
diverging epoch, sent to a follower whose log differs, is a tagged field); session ids and epochs are
plain fields, and a fetch session's forgotten topics take the schema codec. Anything else returns None
and the caller uses the schema codec, which also reports every error: a fast
decoder accepts exactly the bytes the schema codec accepts, with the same
result (the tests compare both, byte for byte and on fuzzed input).

Sans-IO like the rest of :mod:`pyspark_logsource.protocol`: bytes in, typed
messages out.
"""

from __future__ import annotations

import struct
from dataclasses import fields
from typing import Any

from . import messages as m
from .primitives import ZERO_COPY_THRESHOLD, Reader

FIRST_VERSION, LAST_VERSION = 4, 12
FLEXIBLE_FROM = 12

#: The message fields these codecs know. A field added to a Fetch message (say for replica
#: fetches) switches the fast paths off until they learn it: the schema codec is always right.
KNOWN_FIELDS = {
    m.FetchRequest: (
        "partitions",
        "max_wait_ms",
        "min_bytes",
        "max_bytes",
        "isolation_level",
        "replica_id",
        "session_id",
        "session_epoch",
        "rack_id",
        "forgotten",
    ),
    m.FetchPartition: (
        "topic",
        "partition",
        "fetch_offset",
        "max_bytes",
        "log_start_offset",
        "current_leader_epoch",
        "last_fetched_epoch",
    ),
    m.FetchResponse: ("partitions", "throttle_time_ms", "error_code", "session_id"),
    m.FetchPartitionResponse: (
        "topic",
        "partition",
        "error_code",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "records",
        "aborted_transactions",
        "preferred_read_replica",
        "diverging_epoch",
        "diverging_end_offset",
    ),
    m.AbortedTransaction: ("producer_id", "first_offset"),
}
ENABLED = all(tuple(f.name for f in fields(cls)) == names for cls, names in KNOWN_FIELDS.items())

_SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_REQ_FRAME_HEAD = struct.Struct(">ihhi")  # size, api key, version, correlation id
_RESP_FRAME_HEAD = struct.Struct(">ii")  # size, correlation id
# replica id, max wait, min bytes, max bytes, isolation level[, session id, session epoch]
_REQ_TOP = {v: struct.Struct(">iiiib" if v < 7 else ">iiiibii") for v in range(4, 13)}
# partition, [current leader epoch,] fetch offset, [last fetched epoch,] [log start offset,] max bytes
_REQ_PART = {
    4: struct.Struct(">iqi"),
    **{v: struct.Struct(">iqqi") for v in (5, 6, 7, 8)},
    **{v: struct.Struct(">iiqqi") for v in (9, 10, 11)},
    12: struct.Struct(">iiqiqi"),
}
# throttle[, error code, session id]
_RESP_TOP = {v: struct.Struct(">i" if v < 7 else ">ihi") for v in range(4, 13)}
# partition, error code, high watermark, last stable offset[, log start offset]
_RESP_PART = {v: struct.Struct(">ihqq" if v < 5 else ">ihqqq") for v in range(4, 13)}
_ABORTED = struct.Struct(">qq")
_DECODE_ERRORS = (struct.error, ValueError, IndexError, UnicodeDecodeError, OverflowError)
_ENCODE_ERRORS = (struct.error, ValueError, OverflowError, TypeError, AttributeError)
_BYTES_TYPES = (bytes, bytearray, memoryview)


def _uvarint(v: int) -> bytes:
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _read_uvarint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    """(value, position after it); at most 5 bytes, as Reader.uvarint. IndexError when truncated."""
    result = shift = 0
    while True:
        if pos >= end:
            raise IndexError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise ValueError("varint is longer than 5 bytes")


def _group(parts: list) -> dict[str, list]:
    """Partitions by topic, in first-seen order (as the adapters group them)."""
    groups: dict[str, list] = {}
    for p in parts:
        groups.setdefault(p.topic, []).append(p)
    return groups


def _name(topic: str, flexible: bool) -> bytes | None:
    b = topic.encode("utf-8")
    if len(b) > 0x7FFF:
        return None
    return (_uvarint(len(b) + 1) if flexible else _I16.pack(len(b))) + b


def _count(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else _I32.pack(n)


# ------------------------------------------------------------------ requests


def encode_request(header: m.RequestHeader, req: m.FetchRequest) -> list[Any] | None:
    """The request frame (one part), or None for a shape the schema codec must write."""
    if not ENABLED:
        return None
    try:
        return _encode_request(header, req)
    except _ENCODE_ERRORS:
        return None  # the schema codec raises the precise error


def _encode_request(header: m.RequestHeader, req: m.FetchRequest) -> list[Any] | None:
    v = header.api_version
    flex = v >= FLEXIBLE_FROM
    if req.rack_id is None or req.forgotten:
        return None  # forgotten topics (an incremental fetch session's) are the schema codec's
    out = bytearray(_REQ_FRAME_HEAD.pack(0, header.api_key, v, header.correlation_id))
    if header.client_id is None:
        out += b"\xff\xff"
    else:
        client = header.client_id.encode("utf-8")
        if len(client) > 0x7FFF:
            return None
        out += _I16.pack(len(client))
        out += client
    if flex:
        out += b"\x00"  # request header v2: no tagged fields
    top = (req.replica_id, req.max_wait_ms, req.min_bytes, req.max_bytes, req.isolation_level)
    out += _REQ_TOP[v].pack(*top) if v < 7 else _REQ_TOP[v].pack(*top, req.session_id, req.session_epoch)
    groups = _group(req.partitions)
    out += _count(len(groups), flex)
    st = _REQ_PART[v]
    for topic, ps in groups.items():
        name = _name(topic, flex)
        if name is None:
            return None
        out += name
        out += _count(len(ps), flex)
        for p in ps:
            if v == 4:
                out += st.pack(p.partition, p.fetch_offset, p.max_bytes)
            elif v < 9:
                out += st.pack(p.partition, p.fetch_offset, p.log_start_offset, p.max_bytes)
            elif v < 12:
                out += st.pack(
                    p.partition, p.current_leader_epoch, p.fetch_offset, p.log_start_offset, p.max_bytes
                )
            else:
                out += st.pack(
                    p.partition,
                    p.current_leader_epoch,
                    p.fetch_offset,
                    p.last_fetched_epoch,
                    p.log_start_offset,
                    p.max_bytes,
                )
                out += b"\x00"
        if flex:
            out += b"\x00"
    if v >= 7:
        out += _count(0, flex)  # no forgotten topics (a request with some went to the schema codec)
    if v >= 11:
        rack = req.rack_id.encode("utf-8")
        if len(rack) > 0x7FFF:
            return None
        out += (_uvarint(len(rack) + 1) if flex else _I16.pack(len(rack))) + rack
    if flex:
        out += b"\x00"  # top level: no tagged fields (cluster_id stays null)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return [out]


def decode_request(r: Reader, version: int) -> m.FetchRequest | None:
    """The request body at ``r`` (after the header and its tagged fields), or None to use the schema codec.

    On success the whole frame is consumed; on None ``r`` is untouched.
    """
    if not ENABLED:
        return None
    try:
        return _decode_request(r, version)
    except _DECODE_ERRORS:
        return None


def _read_count(buf: memoryview, pos: int, end: int, flex: bool) -> tuple[int, int]:
    """A non-null array count; -1 (rejected by callers) for null or negative."""
    if flex:
        n, pos = _read_uvarint(buf, pos, end)
        return n - 1, pos
    if pos + 4 > end:
        raise IndexError("truncated count")
    return _I32.unpack_from(buf, pos)[0], pos + 4


def _read_name(buf: memoryview, pos: int, end: int, flex: bool) -> tuple[str, int]:
    """A non-null string; ValueError for null or negative lengths."""
    if flex:
        n, pos = _read_uvarint(buf, pos, end)
        n -= 1
    else:
        if pos + 2 > end:
            raise IndexError("truncated string")
        n = _I16.unpack_from(buf, pos)[0]
        pos += 2
    if n < 0 or pos + n > end:
        raise ValueError("null, negative or truncated string")
    return str(buf[pos : pos + n], "utf-8"), pos + n


def _decode_request(r: Reader, v: int) -> m.FetchRequest | None:
    buf, pos, end = r.buf, r.pos, r.end
    flex = v >= FLEXIBLE_FROM
    top = _REQ_TOP[v]
    if pos + top.size > end:
        return None
    vals = top.unpack_from(buf, pos)
    pos += top.size
    ntopics, pos = _read_count(buf, pos, end, flex)
    if ntopics < 0:
        return None
    st = _REQ_PART[v]
    parts = []
    for _ in range(ntopics):
        topic, pos = _read_name(buf, pos, end, flex)
        nparts, pos = _read_count(buf, pos, end, flex)
        if nparts < 0:
            return None
        for _ in range(nparts):
            if pos + st.size > end:
                return None
            f = st.unpack_from(buf, pos)
            pos += st.size
            if v == 4:
                parts.append(m.FetchPartition(topic, f[0], f[1], f[2]))
            elif v < 9:
                parts.append(m.FetchPartition(topic, f[0], f[1], f[3], f[2]))
            elif v < 12:
                parts.append(m.FetchPartition(topic, f[0], f[2], f[4], f[3], f[1]))
            else:
                parts.append(m.FetchPartition(topic, f[0], f[2], f[5], f[4], f[1], f[3]))
                if pos >= end or buf[pos] != 0:
                    return None  # tagged fields in a partition
                pos += 1
        if flex:
            if pos >= end or buf[pos] != 0:
                return None
            pos += 1
    if v >= 7:
        nforgotten, pos = _read_count(buf, pos, end, flex)
        if nforgotten != 0:
            return None
    rack = ""
    if v >= 11:
        rack, pos = _read_name(buf, pos, end, flex)
    if flex:
        if pos >= end or buf[pos] != 0:
            return None  # top-level tagged fields (cluster_id)
        pos += 1
    if pos != end:
        return None
    session_id, session_epoch = (vals[5], vals[6]) if v >= 7 else (0, -1)
    r.pos = end
    return m.FetchRequest(parts, vals[1], vals[2], vals[3], vals[4], vals[0], session_id, session_epoch, rack)


# ------------------------------------------------------------------ responses


def encode_response(correlation_id: int, version: int, resp: m.FetchResponse) -> list[Any] | None:
    """The response frame's parts (records of 64 KB and more, and file regions, stay their own parts,
    as the schema codec's Writer leaves them), or None for a shape the schema codec must write."""
    if not ENABLED:
        return None
    try:
        return _encode_response(correlation_id, version, resp)
    except _ENCODE_ERRORS:
        return None


def _encode_response(cid: int, v: int, resp: m.FetchResponse) -> list[Any] | None:
    flex = v >= FLEXIBLE_FROM
    cur = bytearray(_RESP_FRAME_HEAD.pack(0, cid))
    if flex:
        cur += b"\x00"  # response header v1
    cur += (
        _RESP_TOP[v].pack(resp.throttle_time_ms)
        if v < 7
        else _RESP_TOP[v].pack(resp.throttle_time_ms, resp.error_code, resp.session_id)
    )
    groups = _group(resp.partitions)
    cur += _count(len(groups), flex)
    parts: list[Any] = []
    size = 0
    st = _RESP_PART[v]
    for topic, ps in groups.items():
        name = _name(topic, flex)
        if name is None:
            return None
        cur += name
        cur += _count(len(ps), flex)
        for p in ps:
            if flex and (p.diverging_epoch != -1 or p.diverging_end_offset != -1):
                return (
                    None  # a tagged field for a follower whose log diverged: rare, the schema codec writes it
                )
            if v < 5:
                cur += st.pack(p.partition, p.error_code, p.high_watermark, p.last_stable_offset)
            else:
                cur += st.pack(
                    p.partition, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset
                )
            ab = p.aborted_transactions
            if ab is None:
                cur += b"\x00" if flex else b"\xff\xff\xff\xff"
            else:
                cur += _count(len(ab), flex)
                for a in ab:
                    cur += _ABORTED.pack(a.producer_id, a.first_offset)
                    if flex:
                        cur += b"\x00"
            if v >= 11:
                cur += _I32.pack(p.preferred_read_replica)
            rec = p.records
            if rec is None:
                # empty, never null (as Kafka writes MemoryRecords.EMPTY): librdkafka rejects the whole
                # response over a null record set ("invalid MessageSetSize -1") and never sees the error
                cur += b"\x01" if flex else b"\x00\x00\x00\x00"
            else:
                if isinstance(rec, _BYTES_TYPES):
                    n = rec.nbytes if isinstance(rec, memoryview) else len(rec)
                    push = n >= ZERO_COPY_THRESHOLD
                else:  # a file region, sent with sendfile
                    n = rec.length
                    push = n > 0
                cur += _uvarint(n + 1) if flex else _I32.pack(n)
                if push:
                    parts.append(cur)
                    parts.append(rec)
                    size += len(cur) + n
                    cur = bytearray()
                elif n:
                    cur += rec
            if flex:
                cur += b"\x00"
        if flex:
            cur += b"\x00"
    if flex:
        cur += b"\x00"
    if not parts:
        _SIZE.pack_into(cur, 0, len(cur) - 4)
        return [cur]
    if cur:
        parts.append(cur)
    _SIZE.pack_into(parts[0], 0, size + len(cur) - 4)
    return parts


def decode_response(r: Reader, version: int) -> m.FetchResponse | None:
    """The response body at ``r`` (after the header), or None to use the schema codec.

    Records are zero-copy memoryview slices of the frame, as the schema codec returns them.
    On success the whole frame is consumed; on None ``r`` is untouched.
    """
    if not ENABLED:
        return None
    try:
        return _decode_response(r, version)
    except _DECODE_ERRORS:
        return None


def _decode_response(r: Reader, v: int) -> m.FetchResponse | None:
    buf, pos, end = r.buf, r.pos, r.end
    flex = v >= FLEXIBLE_FROM
    top = _RESP_TOP[v]
    if pos + top.size > end:
        return None
    tv = top.unpack_from(buf, pos)
    pos += top.size
    ntopics, pos = _read_count(buf, pos, end, flex)
    if ntopics < 0:
        return None
    st = _RESP_PART[v]
    new = m.FetchPartitionResponse
    out = []
    for _ in range(ntopics):
        topic, pos = _read_name(buf, pos, end, flex)
        nparts, pos = _read_count(buf, pos, end, flex)
        if nparts < 0:
            return None
        for _ in range(nparts):
            if pos + st.size > end:
                return None
            f = st.unpack_from(buf, pos)
            pos += st.size
            nab, pos = _read_count(buf, pos, end, flex)
            if nab < -1:
                return None
            aborted = None
            if nab >= 0:
                aborted = []
                for _ in range(nab):
                    if pos + 16 > end:
                        return None
                    pid, first = _ABORTED.unpack_from(buf, pos)
                    pos += 16
                    aborted.append(m.AbortedTransaction(pid, first))
                    if flex:
                        if pos >= end or buf[pos] != 0:
                            return None
                        pos += 1
            preferred = -1
            if v >= 11:
                if pos + 4 > end:
                    return None
                preferred = _I32.unpack_from(buf, pos)[0]
                pos += 4
            n, pos = _read_count(buf, pos, end, flex)
            if n < -1 or pos + n > end:
                return None
            records = None
            if n >= 0:
                records = buf[pos : pos + n]
                pos += n
            if flex:
                if pos >= end or buf[pos] != 0:
                    return None  # tagged fields (diverging epoch, current leader, snapshot id)
                pos += 1
            lso = f[4] if v >= 5 else -1
            out.append(new(topic, f[0], f[1], f[2], f[3], lso, records, aborted, preferred))
        if flex:
            if pos >= end or buf[pos] != 0:
                return None
            pos += 1
    if flex:
        if pos >= end or buf[pos] != 0:
            return None
        pos += 1
    if pos != end:
        return None
    r.pos = end
    if v < 7:
        return m.FetchResponse(out, tv[0])
    return m.FetchResponse(out, tv[0], tv[1], tv[2])
