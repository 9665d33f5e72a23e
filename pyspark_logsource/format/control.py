"""Transaction markers (control batches) and the transactional attribute, in Kafka's layout.

A control batch is a Kafka-layout batch with the transactional and control
attribute bits, the producer id and epoch of the transaction it ends, no
sequence (-1) and one record::

    key    version int16 (0), type int16 (0 = ABORT, 1 = COMMIT)
    value  version int16 (0), coordinator epoch int32

This is Kafka's ``EndTransactionMarker``, so Kafka clients reading with
``isolation.level=read_committed`` understand the markers our broker writes.
"""

from __future__ import annotations

import struct
import time

from ..errors import CorruptRecord
from .header import (
    CONTROL_BIT,
    HEADER_SIZE,
    TRANSACTIONAL_BIT,
    BatchHeader,
    fix_crc,
    read_header,
)
from .kafka_encode import encode_kafka

ABORT = 0
COMMIT = 1

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_ATTRS_AT = 21


def encode_marker(
    kind: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    timestamp_ms: int | None = None,
) -> bytearray:
    """One control batch ending ``producer_id``'s transaction with COMMIT or ABORT."""
    if kind not in (ABORT, COMMIT):
        raise ValueError(f"marker type must be ABORT (0) or COMMIT (1), got {kind}")
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return encode_kafka(
        [_VALUE.pack(0, coordinator_epoch)],
        [_KEY.pack(0, kind)],
        [ts],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def _varint(buf: bytes | bytearray | memoryview, p: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if p >= len(buf):
            raise CorruptRecord("control record truncated")
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), p
        shift += 7
        if shift > 63:
            raise CorruptRecord("control record varint too long")


def marker_type(buf: bytes | bytearray | memoryview, pos: int = 0, h: BatchHeader | None = None) -> int:
    """ABORT or COMMIT: the type in the key of the control batch at ``pos`` (uncompressed, as written)."""
    if h is None:
        h = read_header(buf, pos)
    if not h.is_control:
        raise CorruptRecord(f"batch at offset {h.base_offset} is not a control batch")
    p = pos + HEADER_SIZE
    _, p = _varint(buf, p)  # record length
    p += 1  # record attributes
    _, p = _varint(buf, p)  # timestamp delta
    _, p = _varint(buf, p)  # offset delta
    klen, p = _varint(buf, p)
    if klen < 4 or p + 4 > len(buf):
        raise CorruptRecord(f"control batch at offset {h.base_offset} has no marker key")
    version, kind = _KEY.unpack_from(buf, p)
    if kind not in (ABORT, COMMIT):
        raise CorruptRecord(f"control batch at offset {h.base_offset} has unknown type {kind}")
    return kind


def set_transactional(buf: bytearray | memoryview, pos: int = 0, *, crc: bool = True) -> None:
    """Set the transactional attribute bit of the batch at ``pos`` (the CRC is recomputed unless
    ``crc=False``: a caller restamping the producer fields right after recomputes it anyway)."""
    (attrs,) = struct.unpack_from(">h", buf, pos + _ATTRS_AT)
    if attrs & CONTROL_BIT:
        raise CorruptRecord("a control batch cannot be re-marked")
    struct.pack_into(">h", buf, pos + _ATTRS_AT, attrs | TRANSACTIONAL_BIT)
    if crc:
        fix_crc(buf, pos)


__all__ = ["ABORT", "COMMIT", "encode_marker", "marker_type", "set_transactional"]
