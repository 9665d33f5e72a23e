"""Row descriptors: where a fetched batch's rows are, for ``poll()`` to make Messages from the bytes.

A descriptor is a tuple of positions in the fetched buffer that the compiled
core's row builders (``_crecords.arrow_messages``, ``_crecords.kafka_messages``)
read, with no Arrow table made. This module owns the layouts' part of that:
:func:`row_descriptor` is what the consumer calls per batch, and the ``*_py``
functions are the references the compiled ``batch_rows`` / ``kafka_rows`` are
tested against (same arguments, same descriptor or None).
"""

from __future__ import annotations

from types import ModuleType

from ..errors import CorruptRecord
from .arrow_body import ARROW_SCHEMA
from .arrow_decode import decode_arrow
from .header import (
    ARROW_BODY,
    CODEC_MASK,
    CONTROL_BIT,
    HAS_HEADERS,
    HAS_KEY_NULLS,
    HAS_VALUE_NULLS,
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
)
from .kafka_decode import decode_kafka

#: the lengths of the two kinds of descriptor (what the row builders dispatch on)
ARROW_DESCRIPTOR = 13
KAFKA_DESCRIPTOR = 7


def row_descriptor(
    data: bytes | bytearray | memoryview, pos: int, h: BatchHeader, compiled: ModuleType | None
) -> tuple | None:
    """The descriptor of the walked batch at ``pos`` (an Arrow body or Kafka's layout), or None where the
    table path takes it. ``compiled``: the ``_crecords`` module (None: the references)."""
    if h.attributes & ARROW_BODY:
        return batch_rows_py(data, pos, h) if compiled is None else compiled.batch_rows(data, pos, h)
    return kafka_rows_py(data, pos, h) if compiled is None else compiled.kafka_rows(data, pos, h)


def batch_rows_py(data: bytes | bytearray | memoryview, pos: int, h: BatchHeader) -> tuple | None:
    """``crecords.batch_rows``'s reference: the row descriptor of the uncompressed, header-less Arrow-body
    data batch at ``pos``, or None for another kind of batch (a control batch too) or a body
    ``decode_arrow`` refuses."""
    attrs = h.attributes
    if not attrs & ARROW_BODY or attrs & (CODEC_MASK | HAS_HEADERS | CONTROL_BIT):
        return None
    try:
        decode_arrow(data, pos, check_crc=False)
    except CorruptRecord:
        return None
    # the body (arrow_body.py): n int64 timestamp deltas, the key and the value offsets (n + 1 int32
    # each), the validity bitmaps the attributes announce, then the key and the value bytes
    n, at = h.record_count, pos + HEADER_SIZE
    log_append = bool(attrs & TIMESTAMP_TYPE_BIT)
    key_len = int.from_bytes(data[at + 12 * n : at + 12 * n + 4], "little", signed=True)
    p = 16 * n + 8
    kvalid = vvalid = -1
    if attrs & HAS_KEY_NULLS:
        kvalid, p = at + p, p + (n + 7) // 8
    if attrs & HAS_VALUE_NULLS:
        vvalid, p = at + p, p + (n + 7) // 8
    return (
        pos,
        h.base_offset,
        n,
        log_append,
        h.max_timestamp if log_append else h.base_timestamp,
        -1 if log_append else at,
        kvalid,
        vvalid,
        at + 8 * n,
        at + 12 * n + 4,
        at + p,
        at + p + key_len,
        pos + h.size,
    )


def kafka_rows_py(data: bytes | bytearray | memoryview, pos: int, h: BatchHeader) -> tuple | None:
    """``crecords.kafka_rows``'s reference: the row descriptor of the uncompressed, non-control Kafka-layout
    batch at ``pos`` whose records have offset deltas 0..n-1 and no headers, or None for another batch
    or records ``decode_kafka`` refuses."""
    attrs = h.attributes
    n = h.record_count
    if attrs & (ARROW_BODY | CODEC_MASK | CONTROL_BIT) or n < 1 or h.last_offset_delta != n - 1:
        return None
    if pos < 0 or h.size < HEADER_SIZE or pos + h.size > len(data):
        return None
    try:
        rb = decode_kafka(data, pos, check_crc=False).to_arrow()
    except CorruptRecord:
        return None
    if any(
        rb.column(ARROW_SCHEMA.get_field_index("headers")).to_pylist()
    ):  # a record with headers: the table path's
        return None
    log_append = bool(attrs & TIMESTAMP_TYPE_BIT)
    ts = h.max_timestamp if log_append else h.base_timestamp
    return (pos, h.base_offset, n, log_append, ts, pos + HEADER_SIZE, pos + h.size)
