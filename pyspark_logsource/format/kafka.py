"""Kafka's v2 record body: varint records, with Kafka's compression framing.

A batch without the ``ARROW_BODY`` attribute has, after the shared 61-byte
header, ``record_count`` records (compressed as a whole when the codec says
so, with no size prefix)::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
    headerCount varint, headers [keyLength varint, key, valueLength varint, value]

(varints are zigzag-encoded). Kafka clients send and expect this layout.

Decoding lives in ``kafka_decode``, encoding in ``kafka_encode`` and the
varints in ``varint``; this module converts whole batches between the
Arrow body and this layout (what the broker does for Kafka clients).
"""

from __future__ import annotations

import numpy as np

from ..errors import CorruptRecord
from .arrow_body import MAX_UNCOMPRESSED_BYTES, _arrow_binary_parts, _arrow_header_parts, _assemble
from .arrow_decode import decode_arrow
from .header import ARROW_BODY, CODEC_MASK, TIMESTAMP_TYPE_BIT, read_header, verify_crc, walk, write_header
from .kafka_decode import (  # noqa: F401  (re-exported: the public home of the Kafka layout)
    KafkaRecordBatch,
    _parse,
    _sections,
    _table,
    decode_kafka,
    decode_kafka_run,
    validate_kafka_records,
)
from .kafka_encode import _kafka_batch, encode_kafka  # noqa: F401


def arrow_to_kafka(
    batch: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = False
) -> bytearray:
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
    return b"".join(
        arrow_to_kafka(buf, p) if h.attributes & ARROW_BODY else mv[p : p + h.size]
        for p, h in walk(buf, check_crc=check_crc)
    )


def kafka_to_arrow_batch(
    batch: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = True
) -> bytearray:
    """One Kafka-layout batch as an Arrow-body batch with the same header fields."""
    h = read_header(batch, pos)
    if h.attributes & ARROW_BODY:
        raise CorruptRecord("kafka_to_arrow_batch needs a Kafka-layout batch")
    if h.last_offset_delta != h.record_count - 1:  # our Arrow body has no offset deltas
        raise CorruptRecord(
            f"batch at offset {h.base_offset} has offset gaps (compacted): it stays in Kafka's layout"
        )
    if check_crc:
        verify_crc(batch, pos, h)
    p = _parse(_sections(batch, [h], [pos], MAX_UNCOMPRESSED_BYTES), [h.record_count])
    rb = _table(p, [h]).to_batches()[0]
    header_parts = None
    if rb.column(5).null_count < h.record_count:
        header_parts = _arrow_header_parts(rb.column(5))
    out = _assemble(
        h.record_count,
        p.ts_delta,
        _arrow_binary_parts(rb.column(0)),
        _arrow_binary_parts(rb.column(1)),
        header_parts,
        base_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp,
        codec=h.codec,
        timestamp_type=h.timestamp_type,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        base_offset=h.base_offset,
        leader_epoch=h.leader_epoch,
    )
    if h.attributes & ~(CODEC_MASK | TIMESTAMP_TYPE_BIT):  # transactional, control, delete horizon
        nh = read_header(out)
        return write_header(
            out,
            attributes=nh.attributes | (h.attributes & ~(CODEC_MASK | TIMESTAMP_TYPE_BIT)),
            record_count=nh.record_count,
            base_timestamp=nh.base_timestamp,
            max_timestamp=nh.max_timestamp,
            base_offset=nh.base_offset,
            leader_epoch=nh.leader_epoch,
            producer_id=nh.producer_id,
            producer_epoch=nh.producer_epoch,
            base_sequence=nh.base_sequence,
        )
    return out
