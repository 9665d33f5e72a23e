"""Kafka's v2 record body: varint records, with Kafka's compression framing.

A batch without the ``ARROW_BODY`` attribute has, after the shared 61-byte
header, ``record_count`` records (compressed as a whole when the codec says
so, with no size prefix)::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
    headerCount varint, headers [keyLength varint, key, valueLength varint, value]

(varints are zigzag-encoded). Kafka clients send and expect this layout.

Parsing is sequential only where it must be: one tight Python loop follows
the record length varints (one iteration per record, the chain that
decides where each record starts); every field inside the records is then
parsed for all records at once with numpy. Encoding a batch without
headers is fully vectorised. Headers, rare, take a Python loop.
Every error in a body is a CorruptRecord.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..errors import CorruptRecord, InvalidRequest
from . import compression
from .arrow_body import (
    ARROW_SCHEMA,
    HEADER_TYPE,
    MAX_UNCOMPRESSED_BYTES,
    Record,
    _arrow_binary_parts,
    _arrow_header_parts,
    _assemble,
    encode,
)
from .arrow_decode import (
    _gather,
    _np_col,
    _null_headers_col,
    decode_arrow,
)
from .header import (
    ARROW_BODY,
    CODEC_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    KAFKA_ATTRIBUTES,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    read_header,
    verify_crc,
    walk,
    write_header,
)

_PAD = 16  # zero bytes after the records, so that fixed-width gathers never leave the buffer
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_TS_MS = pa.timestamp("ms")


class KafkaRecordBatch:
    """A decoded Kafka-layout batch, with the same ``to_arrow()`` / ``records()`` as an Arrow-body one."""

    __slots__ = ("header", "_table")

    def __init__(self, header: BatchHeader, table: pa.Table) -> None:
        self.header = header
        self._table = table

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def record_count(self) -> int:
        return self.header.record_count

    @property
    def is_control(self) -> bool:
        """A transaction marker: data readers skip it."""
        return self.header.is_control

    def to_arrow(self) -> pa.RecordBatch:
        """The batch as an Arrow RecordBatch with ``ARROW_SCHEMA`` (control records included)."""
        t = self._table.combine_chunks()
        return t.to_batches()[0] if t.num_rows else pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)

    def records(self) -> list[Record]:
        """The records as Python objects (the per-message API; not a hot path)."""
        t = self._table
        hdrs = [[(d["key"], d["value"]) for d in h] if h else [] for h in t.column(5).to_pylist()]
        ts = t.column(3).cast(pa.int64()).to_pylist()
        return list(map(Record, t.column(2).to_pylist(), ts, t.column(0).to_pylist(), t.column(1).to_pylist(), hdrs))


# ---------------------------------------------------------------- varints


def _read_varints(d: np.ndarray, pos: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints starting at ``pos`` (at most ``width`` bytes each): (values, byte lengths)."""
    b0 = d[pos]
    if not (b0 & 0x80).any():  # the common case: every varint is one byte (small deltas, counts)
        v = (b0 >> 1).astype(np.int64) ^ -(b0 & 1).astype(np.int64)
        return v, _ones(len(pos))
    b = d[pos[:, None] + np.arange(width)]
    stop = b < 0x80
    if not stop.any(axis=1).all():
        raise CorruptRecord(f"varint longer than {width} bytes")
    length = stop.argmax(axis=1) + 1
    groups = (b & 0x7F).astype(np.uint64)
    groups[np.arange(width) >= length[:, None]] = 0
    u = np.bitwise_or.reduce(groups << (np.arange(width, dtype=np.uint64) * np.uint64(7)), axis=1)
    v = (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64)
    return v, length


def _ones(n: int) -> np.ndarray:
    return np.ones(n, dtype=np.int64)


def _varint32s(d: np.ndarray, pos: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    v, length = _read_varints(d, pos, 5)
    if len(v) and (v.min() < _INT32_MIN or v.max() > _INT32_MAX):
        raise CorruptRecord(f"record {what} does not fit in 32 bits")
    return v, length


def _encode_varints(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varint bytes of int64 values: an (n, width) uint8 matrix and each value's byte length."""
    v = v.astype(np.int64, copy=False)
    u = ((v << 1) ^ (v >> 63)).view(np.uint64)
    width = 1
    top = int(u.max()) if len(u) else 0
    while top >> (7 * width):
        width += 1
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    parts = u[:, None] >> shifts
    length = 1 + (parts[:, 1:] != 0).sum(axis=1) if width > 1 else np.ones(len(u), dtype=np.int64)
    out = (parts & np.uint64(0x7F)).astype(np.uint8)
    out[np.arange(width) < (length - 1)[:, None]] |= 0x80
    return out, length


def _varint(v: int) -> bytes:
    """One zigzag varint (the header slow path)."""
    u = (v << 1) ^ (v >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _slow_varint(data: bytes, p: int) -> tuple[int, int]:
    """A raw (not un-zigzagged) varint of up to 5 bytes at ``p``: (value, next position)."""
    raw = shift = 0
    for i in range(5):
        b = data[p + i]
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return raw, p + i + 1
        shift += 7
    raise CorruptRecord("record length varint longer than 5 bytes")


# ---------------------------------------------------------------- parsing


class _Parsed:
    """Field positions of every record of one or more records sections laid end to end."""

    __slots__ = ("data", "d", "n", "batch", "local", "ts_delta", "off_delta", "key_start", "key_len", "val_start",
                 "val_len", "header_counts", "headers")  # fmt: skip


def _sections(buf, headers: Sequence[BatchHeader], positions: Sequence[int], max_uncompressed: int) -> list:
    """The records sections of Kafka-layout batches, decompressed (bounded)."""
    mv = memoryview(buf)
    out = []
    for h, pos in zip(headers, positions, strict=True):
        raw = mv[pos + HEADER_SIZE : pos + h.size]
        codec = h.attributes & CODEC_MASK
        out.append(raw if codec == compression.NONE else compression.kafka_decompress(codec, raw, max_uncompressed))
    return out


def _parse(sections: list, counts: Sequence[int], lods: Sequence[int] | None = None) -> _Parsed:
    """Locate every field of every record; raise CorruptRecord unless each section is exactly ``count`` records.

    Without ``lods`` offset deltas must be 0..n-1 (the produce path); with each batch's
    last offset delta they must increase within [0, lod] (compaction leaves gaps).
    """
    data = b"".join([*sections, bytes(_PAD)])
    bounds = []
    ends: list[int] = []
    app = ends.append
    p = 0
    try:
        for sec, c in zip(sections, counts, strict=True):
            e = p + len(sec)
            bounds.append(p)
            # the one sequential step: each length varint says where the next record starts
            for _ in range(c):
                b = data[p]
                if b < 0x80:
                    raw = b
                    p += 1
                else:
                    b2 = data[p + 1]
                    if b2 < 0x80:
                        raw = (b & 0x7F) | (b2 << 7)
                        p += 2
                    else:
                        raw, p = _slow_varint(data, p)
                if raw & 1:
                    raise CorruptRecord("negative record length")
                p += raw >> 1
                app(p)
            if p != e:
                raise CorruptRecord(f"records section of {len(sec)} bytes does not hold exactly {c} records")
    except IndexError:
        raise CorruptRecord("record lengths overrun the batch") from None
    n = len(ends)
    d = np.frombuffer(data, dtype=np.uint8)
    end = np.array(ends, dtype=np.int64)
    cnt = np.asarray(counts, dtype=np.int64)
    batch = np.repeat(np.arange(len(cnt)), cnt)
    first = np.zeros(len(cnt), dtype=np.int64)
    np.cumsum(cnt[:-1], out=first[1:])
    begin = np.empty(n, dtype=np.int64)
    begin[1:] = end[:-1]
    begin[first] = np.asarray(bounds, dtype=np.int64)
    local = np.arange(n, dtype=np.int64) - first[batch]

    def check(q: np.ndarray, what: str) -> None:
        if (q > end).any():
            raise CorruptRecord(f"record {what} overruns its record")

    _, ln = _read_varints(d, begin, 5)
    q = begin + ln + 1  # skip the record attributes byte (unused in v2)
    check(q, "attributes")
    ts_delta, ln = _read_varints(d, q, 10)
    q = q + ln
    check(q, "timestamp delta")
    off_delta, ln = _varint32s(d, q, "offset delta")
    if lods is None or len(lods) != len(cnt) or all(lod == c - 1 for lod, c in zip(lods, counts, strict=False)):
        if (off_delta != local).any():
            raise CorruptRecord("record offset deltas are not 0..n-1")
    else:
        up = np.ones(n, dtype=bool)
        up[1:] = off_delta[1:] > off_delta[:-1]
        up[first] = off_delta[first] >= 0
        if not up.all() or (off_delta > np.asarray(lods, dtype=np.int64)[batch]).any():
            raise CorruptRecord("record offset deltas do not increase within the batch's offsets")
    q = q + ln
    check(q, "offset delta")
    key_len, ln = _varint32s(d, q, "key length")
    key_start = q + ln
    q = key_start + np.maximum(key_len, 0)
    if (key_len < -1).any():
        raise CorruptRecord("negative record key length")
    check(q, "key")
    val_len, ln = _varint32s(d, q, "value length")
    val_start = q + ln
    q = val_start + np.maximum(val_len, 0)
    if (val_len < -1).any():
        raise CorruptRecord("negative record value length")
    check(q, "value")
    hcount, ln = _varint32s(d, q, "header count")
    q = q + ln
    if (hcount < 0).any():
        raise CorruptRecord("negative record header count")
    check(q, "header count")
    with_headers = np.flatnonzero(hcount)
    if ((q != end) & (hcount == 0)).any():
        raise CorruptRecord("trailing bytes in a record")
    out = _Parsed()
    out.data, out.d, out.n, out.batch, out.local = data, d, n, batch, local
    out.ts_delta, out.key_start, out.key_len, out.val_start, out.val_len = ts_delta, key_start, key_len, val_start, val_len
    out.off_delta = off_delta
    out.header_counts = hcount
    out.headers = _parse_headers(data, q[with_headers].tolist(), end[with_headers].tolist(),
                                 hcount[with_headers].tolist()) if len(with_headers) else None  # fmt: skip
    return out


def _parse_headers(data: bytes, starts: list[int], ends: list[int], counts: list[int]) -> list[tuple[int, int, int, int]]:
    """(key start, key length, value start, value length or -1) of every header, in order (a Python loop)."""
    out = []
    for p, e, c in zip(starts, ends, counts, strict=True):
        if 2 * c > e - p:
            raise CorruptRecord(f"record claims {c} headers, more than its bytes can hold")
        try:
            for _ in range(c):
                raw, p = _slow_varint(data, p)
                klen = (raw >> 1) ^ -(raw & 1)
                if klen < 0:
                    raise CorruptRecord("negative header key length")
                ks = p
                raw, p = _slow_varint(data, p + klen)
                vlen = (raw >> 1) ^ -(raw & 1)
                if vlen < -1:
                    raise CorruptRecord("negative header value length")
                out.append((ks, klen, p, vlen))
                p += max(vlen, 0)
                if p > e:
                    raise CorruptRecord("record header overruns its record")
        except IndexError:
            raise CorruptRecord("record header overruns its batch") from None
        if p != e:
            raise CorruptRecord("trailing bytes in a record")
    return out


def _binary(data: pa.Buffer, starts: np.ndarray, lens: np.ndarray, type_=pa.binary()) -> pa.Array:
    """A binary array of the byte ranges (-1 length = null) of ``data``; ranges are sorted and disjoint."""
    n = len(lens)
    sizes = np.maximum(lens, 0)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] > _INT32_MAX:
        raise OverflowError("more than 2 GiB of keys or values in one run")
    valid = lens >= 0
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    body = _gather(data, starts, sizes) if n else pa.py_buffer(b"")
    return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(offsets.astype(np.int32)), body])


def _table(p: _Parsed, headers: Sequence[BatchHeader]) -> pa.Table:
    data = pa.py_buffer(p.data)
    base = np.array([h.base_offset for h in headers], dtype=np.int64)
    base_ts = np.array([h.base_timestamp for h in headers], dtype=np.int64)
    max_ts = np.array([h.max_timestamp for h in headers], dtype=np.int64)
    lat = np.array([bool(h.attributes & TIMESTAMP_TYPE_BIT) for h in headers])
    g = p.batch
    # LogAppendTime: every record carries the batch's max timestamp (int64 wrap-around as numpy adds)
    ts = np.where(lat[g], max_ts[g], p.ts_delta + base_ts[g])
    cols = [
        _binary(data, p.key_start, p.key_len),
        _binary(data, p.val_start, p.val_len),
        _np_col(pa.int64(), base[g] + p.off_delta),
        _np_col(_TS_MS, ts),
        _np_col(pa.int32(), lat[g].astype(np.int32)),
        _headers_col(data, p),
    ]
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(cols, schema=ARROW_SCHEMA)])


def _headers_col(data: pa.Buffer, p: _Parsed) -> pa.Array:
    if p.headers is None:
        return _null_headers_col(p.n)
    spans = np.array(p.headers, dtype=np.int64).reshape(-1, 4)
    keys = _binary(data, spans[:, 0], spans[:, 1], pa.string())
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid:
        raise CorruptRecord("record header keys are not valid UTF-8") from None
    entries = pa.StructArray.from_arrays([keys, _binary(data, spans[:, 2], spans[:, 3])],
                                         fields=list(HEADER_TYPE.value_type))  # fmt: skip
    list_off = np.zeros(p.n + 1, dtype=np.int32)
    np.cumsum(p.header_counts, out=list_off[1:])
    empty = p.header_counts == 0
    return pa.ListArray.from_arrays(_np_col(pa.int32(), list_off), entries, type=HEADER_TYPE,
                                    mask=pa.array(empty) if empty.any() else None)  # fmt: skip


def decode_kafka_run(
    buf: bytes | bytearray | memoryview,
    headers: Sequence[BatchHeader],
    positions: Sequence[int],
    *,
    max_uncompressed: int = MAX_UNCOMPRESSED_BYTES,
    include_control: bool = False,
) -> pa.Table:
    """Consecutive Kafka-layout batches (headers already walked and CRC-checked) into one ``ARROW_SCHEMA`` table.

    Control batches are dropped unless ``include_control``.
    """
    if not include_control:
        keep = [i for i, h in enumerate(headers) if not h.attributes & CONTROL_BIT]
        if len(keep) != len(headers):
            headers, positions = [headers[i] for i in keep], [positions[i] for i in keep]
    if not headers:
        return ARROW_SCHEMA.empty_table()
    sections = _sections(buf, headers, positions, max_uncompressed)
    return _table(_parse(sections, [h.record_count for h in headers], [h.last_offset_delta for h in headers]), headers)


def decode_kafka(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_uncompressed: int = MAX_UNCOMPRESSED_BYTES,
) -> KafkaRecordBatch:
    """Decode the Kafka-layout batch at ``pos`` (control records included; see ``is_control``)."""
    h = read_header(buf, pos)
    if h.attributes & ARROW_BODY:
        raise CorruptRecord(f"batch at offset {h.base_offset} has an Arrow body, not Kafka's record layout")
    if len(buf) - pos < h.size:
        raise CorruptRecord(f"truncated batch at offset {h.base_offset}: {len(buf) - pos} of {h.size} bytes")
    if check_crc:
        verify_crc(buf, pos, h)
    table = decode_kafka_run(buf, [h], [pos], max_uncompressed=max_uncompressed, include_control=True)
    return KafkaRecordBatch(h, table)


def validate_kafka_records(
    batch: bytes | bytearray | memoryview,
    pos: int = 0,
    header: BatchHeader | None = None,
    *,
    max_uncompressed: int = MAX_UNCOMPRESSED_BYTES,
) -> bool:
    """Structural check of a Kafka-layout batch's records (the broker's produce-path check).

    The records parse, their number is the header's record_count, offset
    deltas are 0..n-1, every length stays inside its record, no byte is left
    over; a compressed section is decompressed chunk by chunk, bounded by
    ``max_uncompressed``. Raises CorruptRecord. The header and CRC are the
    walker's job (pass its ``header`` to skip re-reading it). Returns whether
    some record has a null key (compacted topics refuse those).
    """
    h = read_header(batch, pos) if header is None else header
    if h.attributes & ARROW_BODY:
        raise CorruptRecord("validate_kafka_records needs a Kafka-layout batch")
    if len(batch) - pos < h.size:
        raise CorruptRecord(f"truncated batch at offset {h.base_offset}")
    p = _parse(_sections(batch, [h], [pos], max_uncompressed), [h.record_count])
    return bool((p.key_len < 0).any())


# ---------------------------------------------------------------- encoding


def _records_vectorised(ts_delta: np.ndarray, key: pa.Array, value: pa.Array, off_delta: np.ndarray | None = None) -> bytes:
    """The records section of a batch without headers, built with O(1) numpy/pyarrow calls.

    Each record is [len][attrs][tsDelta][offsetDelta][keyLen] key [valueLen] value [0 headers].
    The varint runs between keys and values are written into one small buffer
    ``pre`` (numpy scatters), then one pyarrow ``take`` interleaves its pieces
    with the keys and values: that copies every byte once, in C.
    """
    n = len(ts_delta)

    def lens(arr: pa.Array) -> np.ndarray:
        off = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4).astype(np.int64)
        out = off[1:] - off[:-1]
        if arr.null_count:
            out[~arr.is_valid().to_numpy(zero_copy_only=False)] = -1
        return out

    klen, vlen = lens(key), lens(value)
    od = np.arange(n, dtype=np.int64) if off_delta is None else off_delta
    fields = [_encode_varints(ts_delta), _encode_varints(od), _encode_varints(klen)]
    vl_bytes, vl_len = _encode_varints(vlen)
    body = 1 + sum(f[1] for f in fields) + np.maximum(klen, 0) + vl_len + np.maximum(vlen, 0) + 1
    ln_bytes, ln_len = _encode_varints(body)
    # piece 2i: [0x00 ending record i-1] + the varints before key i; piece 2i+1: value length of record i
    sep = (np.arange(n) > 0) + ln_len + 1 + sum(f[1] for f in fields)
    piece = np.empty(2 * n + 1, dtype=np.int64)
    piece[0:-1:2], piece[1::2], piece[-1] = sep, vl_len, 1
    poff = np.zeros(2 * n + 2, dtype=np.int64)
    np.cumsum(piece, out=poff[1:])
    pre = np.zeros(int(poff[-1]), dtype=np.uint8)  # zeros: attributes, header counts
    q = poff[0:-2:2] + (np.arange(n) > 0)

    def put(q: np.ndarray, mat: np.ndarray, length: np.ndarray) -> np.ndarray:
        for k in range(mat.shape[1]):
            m = length > k
            pre[q[m] + k] = mat[m, k]
        return q + length

    q = put(q, ln_bytes, ln_len) + 1
    for mat, length in fields:
        q = put(q, mat, length)
    put(poff[1:-1:2], vl_bytes, vl_len)
    pieces = pa.Array.from_buffers(pa.binary(), 2 * n + 1, [None, pa.py_buffer(poff.astype(np.int32)), pa.py_buffer(pre)])
    m = 2 * n + 1
    idx = np.empty(4 * n + 1, dtype=np.int64)
    idx[0:-1:4] = np.arange(0, 2 * n, 2)  # separators
    idx[1::4] = m + np.arange(n)  # keys
    idx[2::4] = np.arange(1, 2 * n, 2)  # value lengths
    idx[3::4] = m + n + np.arange(n)  # values
    idx[-1] = 2 * n
    all_ = pa.concat_arrays([pieces, key.cast(pa.binary()), value.cast(pa.binary())])
    out = all_.take(pa.array(idx)).buffers()[2]
    total = int(poff[-1] + np.maximum(klen, 0).sum() + np.maximum(vlen, 0).sum())
    return out.to_pybytes()[:total] if out is not None else b""


def _records_loop(ts_delta: np.ndarray, key: pa.Array, value: pa.Array, headers: pa.Array,
                  off_delta: np.ndarray | None = None) -> bytes:  # fmt: skip
    """The records section with headers (a Python loop: headers are rare)."""
    out = []
    ods = range(len(ts_delta)) if off_delta is None else off_delta.tolist()
    for i, t, k, v, hs in zip(ods, ts_delta.tolist(), key.to_pylist(), value.to_pylist(),
                              headers.to_pylist(), strict=True):  # fmt: skip
        parts = [b"\x00", _varint(t), _varint(i)]
        parts += [_varint(-1)] if k is None else [_varint(len(k)), k]
        parts += [_varint(-1)] if v is None else [_varint(len(v)), v]
        hs = hs or []
        parts.append(_varint(len(hs)))
        for h in hs:
            hk = h["key"].encode("utf-8")
            hv = h["value"]
            parts += [_varint(len(hk)), hk]
            parts += [_varint(-1)] if hv is None else [_varint(len(hv)), hv]
        rec = b"".join(parts)
        out += [_varint(len(rec)), rec]
    return b"".join(out)


def _kafka_batch(h: BatchHeader, ts_delta: np.ndarray, rb: pa.RecordBatch | pa.Table, attributes: int,
                 off_delta: np.ndarray | None = None) -> bytearray:  # fmt: skip
    """A Kafka-layout batch of ``rb``'s rows with ``h``'s header fields; ``off_delta``: the
    records' offset deltas (default 0..n-1), the header keeping ``h.last_offset_delta``."""
    headers = rb.column(5)
    key, value = rb.column(0), rb.column(1)
    if isinstance(rb, pa.Table):
        headers, key, value = headers.combine_chunks(), key.combine_chunks(), value.combine_chunks()
    n = len(key)
    if headers.null_count == len(headers):
        records = _records_vectorised(ts_delta, key, value, off_delta)
    else:
        records = _records_loop(ts_delta, key, value, headers, off_delta)
    codec = attributes & CODEC_MASK
    if codec != compression.NONE:
        records = compression.kafka_compress(codec, records)
    out = bytearray(HEADER_SIZE) + records
    return write_header(
        out, attributes=attributes & KAFKA_ATTRIBUTES, record_count=n,
        base_timestamp=h.base_timestamp, max_timestamp=h.max_timestamp, base_offset=h.base_offset,
        leader_epoch=h.leader_epoch, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence, last_offset_delta=h.last_offset_delta,
    )  # fmt: skip


def arrow_to_kafka(batch: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = False) -> bytearray:
    """One Arrow-body batch as a Kafka-layout batch with the same header fields (CRC recomputed).

    Base offset, leader epoch, producer id/epoch/sequence, timestamps, codec
    and timestamp type are kept; the timestamp deltas are the stored ones.
    """
    rb = decode_arrow(batch, pos, check_crc=check_crc)
    h = rb.header
    n = h.record_count
    ts_delta = np.frombuffer(rb._arrays, dtype="<i8", count=n).astype(np.int64)
    return _kafka_batch(h, ts_delta, rb.to_arrow(), h.attributes)


def to_kafka(buf: bytes | bytearray | memoryview, *, check_crc: bool = False) -> bytes:
    """A run of batches with every Arrow-body batch converted to Kafka's layout (what a Kafka client fetches).

    Kafka-layout batches are passed through untouched; a trailing partial batch is dropped.
    """
    mv = memoryview(buf)
    return b"".join(arrow_to_kafka(buf, p) if h.attributes & ARROW_BODY else mv[p : p + h.size]
                    for p, h in walk(buf, check_crc=check_crc))  # fmt: skip


def kafka_to_arrow_batch(batch: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = True) -> bytearray:
    """One Kafka-layout batch as an Arrow-body batch with the same header fields."""
    h = read_header(batch, pos)
    if h.attributes & ARROW_BODY:
        raise CorruptRecord("kafka_to_arrow_batch needs a Kafka-layout batch")
    if h.last_offset_delta != h.record_count - 1:  # our Arrow body has no offset deltas
        raise CorruptRecord(f"batch at offset {h.base_offset} has offset gaps (compacted): it stays in Kafka's layout")
    if check_crc:
        verify_crc(batch, pos, h)
    p = _parse(_sections(batch, [h], [pos], MAX_UNCOMPRESSED_BYTES), [h.record_count])
    rb = _table(p, [h]).to_batches()[0]
    header_parts = None
    if rb.column(5).null_count < h.record_count:
        header_parts = _arrow_header_parts(rb.column(5))
    out = _assemble(
        h.record_count, p.ts_delta, _arrow_binary_parts(rb.column(0)), _arrow_binary_parts(rb.column(1)),
        header_parts, base_timestamp=h.base_timestamp, max_timestamp=h.max_timestamp, codec=h.codec,
        timestamp_type=h.timestamp_type, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence, base_offset=h.base_offset, leader_epoch=h.leader_epoch,
    )  # fmt: skip
    if h.attributes & ~(CODEC_MASK | TIMESTAMP_TYPE_BIT):  # transactional, control, delete horizon
        nh = read_header(out)
        return write_header(
            out, attributes=nh.attributes | (h.attributes & ~(CODEC_MASK | TIMESTAMP_TYPE_BIT)),
            record_count=nh.record_count, base_timestamp=nh.base_timestamp, max_timestamp=nh.max_timestamp,
            base_offset=nh.base_offset, leader_epoch=nh.leader_epoch, producer_id=nh.producer_id,
            producer_epoch=nh.producer_epoch, base_sequence=nh.base_sequence,
        )  # fmt: skip
    return out


def encode_kafka(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    timestamps: Sequence[int] | np.ndarray | int | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
    *,
    codec: int | str | None = compression.NONE,
    timestamp_type: int = 0,
    base_offset: int = 0,
    leader_epoch: int = -1,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
) -> bytearray:
    """Encode records as one Kafka-layout v2 batch (same arguments as :func:`format.encode`)."""
    arrow = encode(
        values, keys, timestamps, headers, codec=compression.NONE, timestamp_type=timestamp_type,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        base_offset=base_offset, leader_epoch=leader_epoch,
    )  # fmt: skip
    rb = decode_arrow(arrow, check_crc=False)
    h = rb.header
    attrs = compression.codec_id(codec) | (h.attributes & TIMESTAMP_TYPE_BIT)
    if transactional:
        attrs |= 0x10
    if control:
        attrs |= CONTROL_BIT
    if attrs & ~KAFKA_ATTRIBUTES:
        raise InvalidRequest(f"attributes {attrs:#x} are not legal for a Kafka batch")
    ts_delta = np.frombuffer(rb._arrays, dtype="<i8", count=h.record_count).astype(np.int64)
    return _kafka_batch(h, ts_delta, rb.to_arrow(), attrs)
