"""Encoding Kafka's v2 record body (layout in ``format.kafka``): Arrow columns into varint records.

A batch without headers is encoded fully vectorised; headers, rare, take a Python loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..errors import InvalidRequest
from . import compression
from ._speedups import crecords
from .arrow_body import encode
from .arrow_decode import decode_arrow
from .header import (
    CODEC_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    KAFKA_ATTRIBUTES,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    write_header,
)
from .varint import encode_varint, encode_varints


def _records_vectorised(
    ts_delta: np.ndarray, key: pa.Array, value: pa.Array, off_delta: np.ndarray | None = None
) -> bytes:
    """The records section of a batch without headers, built with O(1) numpy/pyarrow calls.

    Each record is [len][attrs][tsDelta][offsetDelta][keyLen] key [valueLen] value [0 headers].
    The varint runs between keys and values are written into one small buffer
    ``pre`` (numpy scatters), then one pyarrow ``take`` interleaves its pieces
    with the keys and values: that copies every byte once, in C.
    """
    n = len(ts_delta)

    def lens(arr: pa.Array) -> np.ndarray:
        off = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4).astype(
            np.int64
        )
        out = off[1:] - off[:-1]
        if arr.null_count:
            out[~arr.is_valid().to_numpy(zero_copy_only=False)] = -1
        return out

    klen, vlen = lens(key), lens(value)
    od = np.arange(n, dtype=np.int64) if off_delta is None else off_delta
    fields = [encode_varints(ts_delta), encode_varints(od), encode_varints(klen)]
    vl_bytes, vl_len = encode_varints(vlen)
    body = 1 + sum(f[1] for f in fields) + np.maximum(klen, 0) + vl_len + np.maximum(vlen, 0) + 1
    ln_bytes, ln_len = encode_varints(body)
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
    pieces = pa.Array.from_buffers(
        pa.binary(), 2 * n + 1, [None, pa.py_buffer(poff.astype(np.int32)), pa.py_buffer(pre)]
    )
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


def _records_loop(
    ts_delta: np.ndarray,
    key: pa.Array,
    value: pa.Array,
    headers: pa.Array,
    off_delta: np.ndarray | None = None,
) -> bytes:
    """The records section with headers (a Python loop: headers are rare)."""
    out = []
    ods = range(len(ts_delta)) if off_delta is None else off_delta.tolist()
    for i, t, k, v, hs in zip(
        ods, ts_delta.tolist(), key.to_pylist(), value.to_pylist(), headers.to_pylist(), strict=True
    ):
        parts = [b"\x00", encode_varint(t), encode_varint(i)]
        parts += [encode_varint(-1)] if k is None else [encode_varint(len(k)), k]
        parts += [encode_varint(-1)] if v is None else [encode_varint(len(v)), v]
        hs = hs or []
        parts.append(encode_varint(len(hs)))
        for h in hs:
            hk = h["key"].encode("utf-8")
            hv = h["value"]
            parts += [encode_varint(len(hk)), hk]
            parts += [encode_varint(-1)] if hv is None else [encode_varint(len(hv)), hv]
        rec = b"".join(parts)
        out += [encode_varint(len(rec)), rec]
    return b"".join(out)


def _kafka_batch(
    h: BatchHeader,
    ts_delta: np.ndarray,
    rb: pa.RecordBatch | pa.Table,
    attributes: int,
    off_delta: np.ndarray | None = None,
) -> bytearray:
    """A Kafka-layout batch of ``rb``'s rows with ``h``'s header fields; ``off_delta``: the
    records' offset deltas (default 0..n-1), the header keeping ``h.last_offset_delta``."""
    headers = rb.column(5)
    key, value = rb.column(0), rb.column(1)
    if isinstance(rb, pa.Table):
        headers, key, value = headers.combine_chunks(), key.combine_chunks(), value.combine_chunks()
    n = len(key)
    if headers.null_count == len(headers):
        records = None
        if crecords is not None:  # the compiled encode (None: a column it does not take)
            od = None if off_delta is None else np.ascontiguousarray(off_delta, dtype=np.int64)
            records = crecords.kafka_records(np.ascontiguousarray(ts_delta, dtype=np.int64), key, value, od)
        if records is None:
            records = _records_vectorised(ts_delta, key, value, off_delta)
    else:
        records = _records_loop(ts_delta, key, value, headers, off_delta)
    codec = attributes & CODEC_MASK
    if codec != compression.NONE:
        records = compression.kafka_compress(codec, records)
    out = bytearray(HEADER_SIZE) + records
    return write_header(
        out,
        attributes=attributes & KAFKA_ATTRIBUTES,
        record_count=n,
        base_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp,
        base_offset=h.base_offset,
        leader_epoch=h.leader_epoch,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        last_offset_delta=h.last_offset_delta,
    )


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
        values,
        keys,
        timestamps,
        headers,
        codec=compression.NONE,
        timestamp_type=timestamp_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_offset=base_offset,
        leader_epoch=leader_epoch,
    )
    rb = decode_arrow(arrow, check_crc=False)
    h = rb.header
    attrs = compression.codec_id(codec) | (h.attributes & TIMESTAMP_TYPE_BIT)
    if transactional:
        attrs |= TRANSACTIONAL_BIT
    if control:
        attrs |= CONTROL_BIT
    if attrs & ~KAFKA_ATTRIBUTES:
        raise InvalidRequest(f"attributes {attrs:#x} are not legal for a Kafka batch")
    ts_delta = np.frombuffer(rb._arrays, dtype="<i8", count=h.record_count).astype(np.int64)
    return _kafka_batch(h, ts_delta, rb.to_arrow(), attrs)
