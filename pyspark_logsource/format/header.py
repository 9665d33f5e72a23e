"""The fixed 61-byte header every record batch starts with, whatever its body.

Fields are Kafka's v2 record batch header (big-endian)::

      0  base_offset        int64   stamped by the broker on append
      8  batch_length       int32   bytes after this field
     12  leader_epoch       int32   stamped by the partition leader
     16  magic              int8    MAGIC
     17  crc                uint32  CRC-32C of bytes [21, end)
     21  attributes         int16   codec | timestamp type | txn | control | layout bits
     23  last_offset_delta  int32   record_count - 1; more in a compacted Kafka-layout batch
     27  base_timestamp     int64   ms
     35  max_timestamp      int64   ms
     43  producer_id        int64   -1 when not idempotent
     51  producer_epoch     int16
     53  base_sequence      int32
     57  record_count       int32

Two bodies share this header. ``ARROW_BODY`` (attribute bit 12) marks our
Arrow-buffer body (``arrow_body.py``); without it the body is Kafka's varint
records (``kafka.py``). The log stores each batch in the layout it was
produced in, so both kinds of consumers keep ``sendfile``. The HAS_* bits
describe the Arrow body and are illegal without ARROW_BODY; a Kafka-layout
batch may only use bits 0-6 (codec, timestamp type, transactional, control,
KIP-534 delete horizon).

Offsets in a batch are consecutive when it is appended. Compaction keeps a
batch's base offset and last offset delta and drops records, so a compacted
batch has ``last_offset_delta >= record_count - 1`` and gaps between its
records. Only Kafka's layout can say that (each record carries its offset
delta); the cleaner writes every batch that loses records in Kafka's layout,
so an Arrow-body batch always holds consecutive offsets ``base_offset + i``.

This module is the only place that knows byte offsets in the header:
everything else reads :class:`BatchHeader` fields and calls the stamp
functions below.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from ..errors import CorruptRecord, InvalidRequest, MessageTooLarge, UnsupportedCompressionType
from ._speedups import ckafka
from .crc import crc32c

MAGIC = 2
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: what precedes batch_length's count
CRC_START = 21
_CRC_AT = 17
_EPOCH_AT = 12
_PRODUCER_AT = 43
_LENGTH_AT = 8

_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_OFFSET_EPOCH = struct.Struct(">qii")  # base_offset, batch_length, leader_epoch (length rewritten as read)
_CRC = struct.Struct(">I")
_ATTR_MAXTS = struct.Struct(">hiqq")  # attributes .. max_timestamp, at CRC_START
_ATTRS = struct.Struct(">h")
_LENGTH = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhi")

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
#: the bits a transaction check looks at: a transactional data batch or a control batch (a marker)
TXN_BITS = TRANSACTIONAL_BIT | CONTROL_BIT
DELETE_HORIZON_BIT = 0x40  # KIP-534: base_timestamp is the delete horizon
HAS_KEY_NULLS = 0x100
HAS_VALUE_NULLS = 0x200
HAS_HEADERS = 0x400
ARROW_BODY = 0x1000

#: Attribute bits legal in a Kafka-layout batch.
KAFKA_ATTRIBUTES = CODEC_MASK | TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT | DELETE_HORIZON_BIT
#: Attribute bits legal in an Arrow-body batch.
ARROW_ATTRIBUTES = KAFKA_ATTRIBUTES | HAS_KEY_NULLS | HAS_VALUE_NULLS | HAS_HEADERS | ARROW_BODY
KNOWN_ATTRIBUTES = ARROW_ATTRIBUTES
_ARROW_ILLEGAL = ~ARROW_ATTRIBUTES
_KAFKA_ILLEGAL = ~KAFKA_ATTRIBUTES
#: attributes & _HIGH_MASK for every legal batch: one mask and one set lookup check both layouts
#: (a negative int16 keeps bit 15 after the mask, so it is never in the set)
_HIGH_MASK = 0xFFFF & ~KAFKA_ATTRIBUTES
_LEGAL_HIGH = frozenset([0] + [ARROW_BODY | b for b in range(0, 0x800, 0x100)])

CREATE_TIME, LOG_APPEND_TIME = 0, 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
MAX_CODEC = 4  # zstd; 5-7 are unassigned

#: Kafka's ListOffsets sentinels (the one definition; protocol and broker import these).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2

_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1
_MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD


class BatchHeader(NamedTuple):
    """The decoded fixed header of a record batch."""

    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total size of the batch in bytes."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        """Offset of the last record in the batch."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """Offset just after the batch."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        """Compression codec id of the body."""
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        """CREATE_TIME or LOG_APPEND_TIME."""
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_arrow_body(self) -> bool:
        """True for our Arrow body, False for Kafka's varint records."""
        return bool(self.attributes & ARROW_BODY)

    @property
    def is_control(self) -> bool:
        """A transaction marker batch: no data records."""
        return bool(self.attributes & CONTROL_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_idempotent(self) -> bool:
        """Carries a producer id and sequence the broker deduplicates on."""
        return self.producer_id >= 0 and self.base_sequence >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record (idempotent producers)."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & _INT32_MAX


def is_arrow_body(header_or_attributes: BatchHeader | int) -> bool:
    """Whether a batch (its header or its attributes) has our Arrow body rather than Kafka's."""
    attrs = header_or_attributes if isinstance(header_or_attributes, int) else header_or_attributes.attributes
    return bool(attrs & ARROW_BODY)


_new = tuple.__new__  # BatchHeader._make without its Python-level length check


def read_attributes(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """The attributes field of the batch header at ``pos`` (no other field read or checked)."""
    return _ATTRS.unpack_from(buf, pos + CRC_START)[0]


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the fixed header at ``pos``; raise CorruptRecord if it is impossible."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecord(f"truncated batch header: {len(buf) - pos} bytes, need {HEADER_SIZE}")
    h = _new(BatchHeader, HEADER.unpack_from(buf, pos))
    check_header(h)
    return h


def check_header(h: BatchHeader, *, consecutive: bool = False) -> None:
    """Sanity checks that need no body: magic, length, counts, legal attributes.

    ``consecutive`` (the produce path) demands ``last_offset_delta == record_count - 1``;
    otherwise a Kafka-layout batch may span more offsets than it has records (compaction).
    """
    if h.magic != MAGIC:
        raise CorruptRecord(f"unknown batch magic {h.magic} at offset {h.base_offset}")
    if h.batch_length < _MIN_LENGTH:
        raise CorruptRecord(f"batch length {h.batch_length} is smaller than the header")
    gapped = h.last_offset_delta != h.record_count - 1
    if (
        h.record_count < 1
        or h.last_offset_delta < h.record_count - 1
        or (gapped and (consecutive or h.attributes & ARROW_BODY))
    ):
        raise CorruptRecord(
            f"batch record count {h.record_count} does not match last offset delta {h.last_offset_delta}"
        )
    attrs = h.attributes
    if attrs & (_ARROW_ILLEGAL if attrs & ARROW_BODY else _KAFKA_ILLEGAL):
        layout = "Arrow-body" if attrs & ARROW_BODY else "Kafka-layout"
        raise CorruptRecord(f"unknown or illegal attributes {attrs:#x} for a {layout} batch")
    if h.base_offset > _INT64_MAX - h.last_offset_delta:
        raise CorruptRecord(f"batch at offset {h.base_offset} ends past the largest int64 offset")


def verify_crc(buf: bytes | bytearray | memoryview, pos: int, h: BatchHeader) -> None:
    """Raise CorruptRecord unless the CRC of the batch at ``pos`` matches."""
    mv = memoryview(buf)[pos + CRC_START : pos + h.size]
    if len(mv) != h.size - CRC_START:
        raise CorruptRecord(
            f"truncated batch at offset {h.base_offset}: {len(mv) + CRC_START} of {h.size} bytes"
        )
    if crc32c(mv) != h.crc:
        raise CorruptRecord(f"CRC mismatch in batch at offset {h.base_offset}")


check_crc = verify_crc


def validate(buf: bytes | bytearray | memoryview, pos: int = 0, max_size: int | None = None) -> BatchHeader:
    """Check header, size bound and CRC of the batch at ``pos``; return its header."""
    h = read_header(buf, pos)
    if max_size is not None and h.size > max_size:
        raise MessageTooLarge(f"batch of {h.size} bytes exceeds the limit of {max_size} bytes")
    verify_crc(buf, pos, h)
    return h


def file_headers(fd: int, position: int, length: int) -> list[BatchHeader]:
    """The headers of the whole batches in ``length`` bytes of a file from ``position`` (one
    ``pread`` of 61 bytes per batch: the bodies are not read, so a region can still be sent
    with ``sendfile`` afterwards)."""
    out = []
    pos, end = position, position + length
    while end - pos >= HEADER_SIZE:
        h = read_header(os.pread(fd, HEADER_SIZE, pos))
        if pos + h.size > end:
            break
        out.append(h)
        pos += h.size
    return out


def walk(
    buf: bytes | bytearray | memoryview,
    *,
    check_crc: bool = False,
    max_size: int | None = None,
    strict: bool = False,
    errors: list[Exception] | None = None,
) -> list[tuple[int, BatchHeader]]:
    """``(position, header)`` of each whole batch in ``buf``: the one header walker.

    ``strict`` (the produce path): ``buf`` must be exactly whole batches, so a
    partial tail raises CorruptRecord, and a codec id we do not know raises
    UnsupportedCompressionType. Otherwise a partial batch at the end (as a
    size-bounded fetch returns) is skipped if its header is sane.
    ``max_size`` bounds each batch (MessageTooLarge). With an ``errors`` list,
    the first bad batch ends the walk instead of raising: its error is
    appended and the batches before it are returned (log recovery).

    It runs for every produce request, so it is written for speed: one struct
    unpack and one CRC call per batch, and the full checks only on failure.
    """
    limit = 1 << 62 if max_size is None else max_size
    if ckafka is not None:
        # the compiled walk handles well-formed input; on anything else it returns None and the
        # loop below (the reference) raises, or stops, as documented
        walked = ckafka.walk(buf, BatchHeader, crc32c, check_crc, limit, strict)
        if walked is not None:
            return walked
    unpack = HEADER.unpack_from
    mv = memoryview(buf)
    out = []
    pos, end = 0, len(mv)
    try:
        while end - pos >= HEADER_SIZE:
            t = unpack(mv, pos)
            _, length, _, magic, crc, attrs, lod, _, _, _, _, _, count = t
            h = _new(BatchHeader, t)
            if (
                (lod != count - 1 and (strict or lod < count - 1 or attrs & ARROW_BODY))
                or count < 1
                or magic != MAGIC
                or length < _MIN_LENGTH
                or attrs & _HIGH_MASK not in _LEGAL_HIGH
                or t[0] > _INT64_MAX - lod
            ):
                check_header(h, consecutive=strict)  # raises the precise CorruptRecord
            size = length + LOG_OVERHEAD
            if size > limit:
                raise MessageTooLarge(f"batch of {size} bytes exceeds the limit of {limit} bytes")
            if pos + size > end:
                if strict:
                    raise CorruptRecord(f"truncated batch at position {pos}: {end - pos} of {size} bytes")
                return out
            if check_crc and crc32c(mv[pos + CRC_START : pos + size]) != crc:
                raise CorruptRecord(f"CRC mismatch in batch at offset {t[0]} (position {pos})")
            if strict and attrs & CODEC_MASK > MAX_CODEC:
                raise UnsupportedCompressionType(
                    f"batch at position {pos} uses unknown codec {attrs & CODEC_MASK}"
                )
            out.append((pos, h))
            pos += size
    except (CorruptRecord, MessageTooLarge, UnsupportedCompressionType) as e:
        if errors is None:
            raise
        errors.append(e)
        return out
    if strict and pos != end:
        raise CorruptRecord(f"truncated batch header: {end - pos} bytes, need {HEADER_SIZE}")
    return out


def iter_headers(
    buf: bytes | bytearray | memoryview, check_crc: bool = False
) -> list[tuple[int, BatchHeader]]:
    """``(position, header)`` for each whole batch in ``buf`` (a partial tail is skipped)."""
    return walk(buf, check_crc=check_crc)


# ---------------------------------------------------------------- stamping and writing


def set_base_offset(buf: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Stamp the base offset (outside the CRC, so nothing else changes)."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_leader_epoch(buf: bytearray | memoryview, epoch: int, pos: int = 0) -> None:
    """Stamp the partition leader epoch (outside the CRC)."""
    _LEADER_EPOCH.pack_into(buf, pos + _EPOCH_AT, epoch)


def stamp_append(
    buf: bytearray | memoryview, pos: int, h: BatchHeader, base_offset: int, leader_epoch: int
) -> None:
    """Stamp base offset and leader epoch of the batch at ``pos`` whose header is ``h`` (one call per batch)."""
    _OFFSET_EPOCH.pack_into(buf, pos, base_offset, h.batch_length, leader_epoch)


#: ``stamp_offset_epoch(buf, pos, base_offset, batch_length, leader_epoch)``: :func:`stamp_append`
#: without a Python frame (the log's append runs it per batch); ``batch_length`` is the header's,
#: rewritten as read
stamp_offset_epoch = _OFFSET_EPOCH.pack_into


def stamp_log_append_time(buf: bytearray | memoryview, now_ms: int, pos: int = 0) -> None:
    """Switch the batch to LogAppendTime with ``now_ms`` and recompute its CRC."""
    h = read_header(buf, pos)
    _ATTR_MAXTS.pack_into(
        buf, pos + CRC_START, h.attributes | TIMESTAMP_TYPE_BIT, h.last_offset_delta, h.base_timestamp, now_ms
    )
    _CRC.pack_into(buf, pos + _CRC_AT, crc32c(memoryview(buf)[pos + CRC_START : pos + h.size]))


def set_producer(
    buf: bytearray | memoryview, producer_id: int, producer_epoch: int, base_sequence: int, pos: int = 0
) -> None:
    """Stamp producer id, epoch and base sequence (inside the CRC, so it is recomputed)."""
    size = _LENGTH.unpack_from(buf, pos + _LENGTH_AT)[0] + LOG_OVERHEAD
    _PRODUCER.pack_into(buf, pos + _PRODUCER_AT, producer_id, producer_epoch, base_sequence)
    _CRC.pack_into(buf, pos + _CRC_AT, crc32c(memoryview(buf)[pos + CRC_START : pos + size]))


def set_attributes_and_length(
    buf: bytearray | memoryview, attributes: int, batch_length: int, pos: int = 0
) -> None:
    """Rewrite attributes and batch length of a header (the CRC is left to the caller)."""
    _LENGTH.pack_into(buf, pos + _LENGTH_AT, batch_length)
    _ATTRS.pack_into(buf, pos + CRC_START, attributes)


def write_header(
    out: bytearray,
    *,
    attributes: int,
    record_count: int,
    base_timestamp: int,
    max_timestamp: int,
    base_offset: int = 0,
    leader_epoch: int = -1,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    last_offset_delta: int | None = None,
) -> bytearray:
    """Fill the header of ``out`` (a finished batch whose first HEADER_SIZE bytes are a
    placeholder): batch length from ``len(out)``, then the CRC. Returns ``out``.

    ``last_offset_delta`` defaults to ``record_count - 1``; a compacted batch keeps its original one.
    """
    lod = record_count - 1 if last_offset_delta is None else last_offset_delta
    if len(out) - LOG_OVERHEAD > _INT32_MAX:
        raise MessageTooLarge("batch exceeds 2 GiB")
    return _pack_header(
        out,
        base_offset,
        leader_epoch,
        attributes,
        lod,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )


def write_producer_header(
    out: bytearray,
    attributes: int,
    record_count: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytearray:
    """:func:`write_header` for a new producer batch (base offset 0, no leader epoch), positional.

    The producer's per-batch path (one call per request with one record per
    batch); raises InvalidRequest for fields out of range, as write_header does.
    """
    return _pack_header(
        out,
        0,
        -1,
        attributes,
        record_count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )


def _pack_header(
    out: bytearray,
    base_offset: int,
    leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
) -> bytearray:
    try:
        HEADER.pack_into(
            out,
            0,
            base_offset,
            len(out) - LOG_OVERHEAD,
            leader_epoch,
            MAGIC,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
    except struct.error as e:
        raise InvalidRequest(f"batch header field out of range: {e}") from None
    _CRC.pack_into(out, _CRC_AT, crc32c(memoryview(out)[CRC_START:]))
    return out


def fix_crc(buf: bytearray | memoryview, pos: int = 0) -> None:
    """Recompute the CRC of the batch at ``pos`` after its attributes..end changed."""
    size = _LENGTH.unpack_from(buf, pos + _LENGTH_AT)[0] + LOG_OVERHEAD
    _CRC.pack_into(buf, pos + _CRC_AT, crc32c(memoryview(buf)[pos + CRC_START : pos + size]))
