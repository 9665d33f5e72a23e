"""The record batch: the one format on the wire and on disk.

A batch is a 61-byte big-endian header with the fields of Kafka's v2 record
batch, followed by a body that holds the records column by column::

    header (big-endian, 61 bytes)
      0  base_offset        int64   stamped by the broker on append
      8  batch_length       int32   bytes after this field
     12  leader_epoch       int32   stamped by the partition leader
     16  magic              int8    MAGIC
     17  crc                uint32  CRC-32C of bytes [21, end)
     21  attributes         int16   codec | timestamp type | txn | control | layout bits
     23  last_offset_delta  int32   record_count - 1 (offsets are consecutive)
     27  base_timestamp     int64   ms
     35  max_timestamp      int64   ms
     43  producer_id        int64   -1 when not idempotent
     51  producer_epoch     int16
     53  base_sequence      int32
     57  record_count       int32

    body (little-endian; compressed as a whole when the codec is not none,
    then prefixed by its uncompressed size as uint32 LE)
      timestamp_deltas   int64[n]
      key_offsets        int32[n+1]       Arrow BinaryArray offsets
      value_offsets      int32[n+1]
      [HAS_HEADERS]      header_list_offsets int32[n+1], header_key_offsets int32[h+1],
                         header_value_offsets int32[h+1]
      [HAS_KEY_NULLS]    key validity bitmap    ceil(n/8) bytes (Arrow bit order)
      [HAS_VALUE_NULLS]  value validity bitmap  ceil(n/8) bytes
      [HAS_HEADERS]      header value validity  ceil(h/8) bytes
      key_data, value_data, [header_key_data, header_value_data]

The body is laid out as Arrow buffers, so that decoding a batch into Arrow
arrays is a handful of zero-copy buffer wraps: O(1) Python work per batch,
whatever the number of records. Offsets are consecutive within a batch
(``base_offset + i``), so no per-record offset is stored.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import CorruptRecord, InvalidRequest, MessageTooLarge
from . import compression
from .crc import crc32c

MAGIC = 2
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: what precedes batch_length's count
CRC_START = 21
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_LENGTH_PREFIX = struct.Struct(">qi")
_CRC = struct.Struct(">I")
_ATTR_MAXTS = struct.Struct(">hiqq")  # attributes .. max_timestamp, at offset 21
_U32LE = struct.Struct("<I")

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
HAS_KEY_NULLS = 0x100
HAS_VALUE_NULLS = 0x200
HAS_HEADERS = 0x400
KNOWN_ATTRIBUTES = CODEC_MASK | TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT | HAS_KEY_NULLS | HAS_VALUE_NULLS | HAS_HEADERS

CREATE_TIME, LOG_APPEND_TIME = 0, 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

#: Upper bound on a decompressed body; a batch that claims more is corrupt.
MAX_UNCOMPRESSED_BYTES = 1 << 30
_INT32_MAX = (1 << 31) - 1

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())]))
ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("ms"), nullable=False),
        pa.field("timestamp_type", pa.int32(), nullable=False),
        pa.field("headers", HEADER_TYPE),
    ]
)


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
    def last_sequence(self) -> int:
        """Sequence number of the last record (idempotent producers)."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & _INT32_MAX


class Record(NamedTuple):
    """One record, as the per-message consumer API hands it out."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


# ---------------------------------------------------------------- header level


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the fixed header at ``pos``; raise CorruptRecord if it is impossible."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecord(f"truncated batch header: {len(buf) - pos} bytes, need {HEADER_SIZE}")
    h = BatchHeader._make(HEADER.unpack_from(buf, pos))
    check_header(h)
    return h


def check_header(h: BatchHeader) -> None:
    """Sanity checks that need no body: magic, length, counts."""
    if h.magic != MAGIC:
        raise CorruptRecord(f"unknown batch magic {h.magic} at offset {h.base_offset}")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecord(f"batch length {h.batch_length} is smaller than the header")
    if h.record_count < 1 or h.last_offset_delta != h.record_count - 1:
        raise CorruptRecord(
            f"batch record count {h.record_count} does not match last offset delta {h.last_offset_delta}"
        )
    if h.attributes & ~KNOWN_ATTRIBUTES:
        raise CorruptRecord(f"unknown batch attributes {h.attributes:#x}")


def verify_crc(buf: bytes | bytearray | memoryview, pos: int, h: BatchHeader) -> None:
    """Raise CorruptRecord unless the CRC of the batch at ``pos`` matches."""
    mv = memoryview(buf)[pos + CRC_START : pos + h.size]
    if len(mv) != h.size - CRC_START:
        raise CorruptRecord(f"truncated batch at offset {h.base_offset}: {len(mv) + CRC_START} of {h.size} bytes")
    if crc32c(mv) != h.crc:
        raise CorruptRecord(f"CRC mismatch in batch at offset {h.base_offset}")


def validate(buf: bytes | bytearray | memoryview, pos: int = 0, max_size: int | None = None) -> BatchHeader:
    """Check header, size bound and CRC of the batch at ``pos``; return its header."""
    h = read_header(buf, pos)
    if max_size is not None and h.size > max_size:
        raise MessageTooLarge(f"batch of {h.size} bytes exceeds the limit of {max_size} bytes")
    verify_crc(buf, pos, h)
    return h


def iter_headers(buf: bytes | bytearray | memoryview, check_crc: bool = False) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each whole batch in ``buf``.

    A partial batch at the end (as a size-bounded fetch may return) is
    skipped silently; a batch whose header is impossible raises CorruptRecord.
    """
    pos, end = 0, len(buf)
    while end - pos >= HEADER_SIZE:
        h = read_header(buf, pos)
        if pos + h.size > end:
            return
        if check_crc:
            verify_crc(buf, pos, h)
        yield pos, h
        pos += h.size


def set_base_offset(buf: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Stamp the base offset (outside the CRC, so nothing else changes)."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_leader_epoch(buf: bytearray | memoryview, epoch: int, pos: int = 0) -> None:
    """Stamp the partition leader epoch (outside the CRC)."""
    _LEADER_EPOCH.pack_into(buf, pos + 12, epoch)


def stamp_log_append_time(buf: bytearray | memoryview, now_ms: int, pos: int = 0) -> None:
    """Switch the batch to LogAppendTime with ``now_ms`` and recompute its CRC."""
    h = read_header(buf, pos)
    attrs = h.attributes | TIMESTAMP_TYPE_BIT
    _ATTR_MAXTS.pack_into(buf, pos + CRC_START, attrs, h.last_offset_delta, h.base_timestamp, now_ms)
    mv = memoryview(buf)[pos + CRC_START : pos + h.size]
    _CRC.pack_into(buf, pos + 17, crc32c(mv))


# ---------------------------------------------------------------- encoding


def _offsets_from_lengths(lengths: np.ndarray, what: str) -> np.ndarray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > _INT32_MAX:
        raise MessageTooLarge(f"{what} of one batch exceed 2 GiB")
    return offsets.astype("<i4")


def _binary_column(items: Sequence[bytes | None], n: int, what: str) -> tuple[np.ndarray, bytes | None, bytes]:
    """Offsets, validity bitmap (None when no nulls) and data of a list of bytes."""
    if None in items:
        valid = np.fromiter((x is not None for x in items), dtype=bool, count=n)
        items = [b"" if x is None else x for x in items]
        bitmap = np.packbits(valid, bitorder="little").tobytes()
    else:
        bitmap = None
    try:
        lengths = np.fromiter(map(len, items), dtype=np.int64, count=n)
        data = b"".join(items)
    except TypeError:
        raise InvalidRequest(f"{what} must be bytes or None") from None
    return _offsets_from_lengths(lengths, what), bitmap, data


def _header_columns(headers: Sequence[Sequence[tuple[str, bytes | None]] | None], n: int) -> list[bytes]:
    counts = np.fromiter((len(h) if h else 0 for h in headers), dtype=np.int64, count=n)
    flat = [kv for h in headers if h for kv in h]
    try:
        keys = [k.encode("utf-8") for k, _ in flat]
    except (AttributeError, ValueError, TypeError):
        raise InvalidRequest("header keys must be str and header entries (key, value) pairs") from None
    values = [v for _, v in flat]
    h = len(flat)
    list_off = _offsets_from_lengths(counts, "headers")
    key_off, _, key_data = _binary_column(keys, h, "header keys")
    val_off, val_bitmap, val_data = _binary_column(values, h, "header values")
    if val_bitmap is None:
        val_bitmap = b"\xff" * ((h + 7) // 8)
    return [list_off.tobytes(), key_off.tobytes(), val_off.tobytes(), val_bitmap, key_data, val_data]


def _assemble(
    n: int,
    ts_deltas: np.ndarray,
    key_parts: tuple[np.ndarray, bytes | None, bytes],
    value_parts: tuple[np.ndarray, bytes | None, bytes],
    header_parts: list[bytes] | None,
    *,
    base_timestamp: int,
    max_timestamp: int,
    codec: int,
    timestamp_type: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    base_offset: int,
    leader_epoch: int,
) -> bytearray:
    key_off, key_bitmap, key_data = key_parts
    val_off, val_bitmap, val_data = value_parts
    attrs = codec
    if timestamp_type == LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_BIT
    arrays = [ts_deltas.astype("<i8", copy=False).tobytes(), key_off.tobytes(), val_off.tobytes()]
    bitmaps: list[bytes] = []
    data = [key_data, val_data]
    if header_parts is not None:
        attrs |= HAS_HEADERS
        arrays += header_parts[:3]
    if key_bitmap is not None:
        attrs |= HAS_KEY_NULLS
        bitmaps.append(key_bitmap)
    if val_bitmap is not None:
        attrs |= HAS_VALUE_NULLS
        bitmaps.append(val_bitmap)
    if header_parts is not None:
        bitmaps.append(header_parts[3])
        data += header_parts[4:]
    parts = arrays + bitmaps + data
    if codec != compression.NONE:
        raw = b"".join(parts)
        if len(raw) > MAX_UNCOMPRESSED_BYTES:
            raise MessageTooLarge(f"batch body of {len(raw)} bytes exceeds {MAX_UNCOMPRESSED_BYTES}")
        parts = [_U32LE.pack(len(raw)), compression.compress(codec, raw)]
    out = bytearray().join([bytes(HEADER_SIZE), *parts])
    if len(out) - LOG_OVERHEAD > _INT32_MAX:
        raise MessageTooLarge("batch exceeds 2 GiB")
    HEADER.pack_into(
        out, 0, base_offset, len(out) - LOG_OVERHEAD, leader_epoch, MAGIC, 0, attrs, n - 1,
        base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, n,
    )  # fmt: skip
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return out


def encode(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    timestamps: Sequence[int] | np.ndarray | int | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
    *,
    codec: int | str | None = compression.NONE,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    base_offset: int = 0,
    leader_epoch: int = -1,
) -> bytearray:
    """Encode records given as Python sequences into one batch.

    ``timestamps`` is a sequence of ms (one per record), one int for all, or
    None for now. The only per-record work is C-level (``map(len)``, join).
    """
    n = len(values)
    if n == 0:
        raise InvalidRequest("a record batch needs at least one record")
    codec = compression.codec_id(codec)
    if keys is None:
        key_parts = (np.zeros(n + 1, dtype="<i4"), np.zeros((n + 7) // 8, dtype=np.uint8).tobytes(), b"")
    else:
        if len(keys) != n:
            raise InvalidRequest("keys and values differ in length")
        key_parts = _binary_column(keys, n, "keys")
    value_parts = _binary_column(values, n, "values")
    if timestamps is None or isinstance(timestamps, int):
        base_ts = int(time.time() * 1000) if timestamps is None else timestamps
        deltas = np.zeros(n, dtype="<i8")
        max_ts = base_ts
    else:
        ts = np.asarray(timestamps, dtype=np.int64)
        if ts.shape != (n,):
            raise InvalidRequest("timestamps and values differ in length")
        base_ts = int(ts[0])
        max_ts = int(ts.max())
        deltas = ts - base_ts
    header_parts = None
    if headers is not None:
        if len(headers) != n:
            raise InvalidRequest("headers and values differ in length")
        if any(headers):
            header_parts = _header_columns(headers, n)
    return _assemble(
        n, deltas, key_parts, value_parts, header_parts,
        base_timestamp=base_ts, max_timestamp=max_ts, codec=codec, timestamp_type=timestamp_type,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        base_offset=base_offset, leader_epoch=leader_epoch,
    )  # fmt: skip


def _arrow_binary_parts(arr: pa.Array) -> tuple[np.ndarray, bytes | None, memoryview]:
    """Offsets (rebased to 0), validity bitmap and data of a binary/string Arrow array."""
    if pa.types.is_string(arr.type):
        arr = arr.view(pa.binary())
    elif pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type) or pa.types.is_binary_view(arr.type) or pa.types.is_string_view(arr.type):
        arr = arr.cast(pa.binary())
    elif not pa.types.is_binary(arr.type):
        raise InvalidRequest(f"expected a binary or string column, got {arr.type}")
    n = len(arr)
    validity, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype="<i4", count=n + 1, offset=arr.offset * 4)
    start, stop = int(offsets[0]), int(offsets[-1])
    data = memoryview(data_buf)[start:stop] if data_buf is not None else memoryview(b"")
    if start:
        offsets = offsets - start
    bitmap = None
    if arr.null_count:
        if arr.offset % 8 == 0:
            bitmap = memoryview(validity)[arr.offset // 8 : arr.offset // 8 + (n + 7) // 8]
        else:
            valid = arr.is_valid().to_numpy(zero_copy_only=False)
            bitmap = np.packbits(valid, bitorder="little").tobytes()
    return offsets, bitmap, data


def encode_arrow(
    batch: pa.RecordBatch | pa.Table,
    *,
    codec: int | str | None = compression.NONE,
    timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytearray:
    """Encode an Arrow batch with a ``value`` column (and optional ``key``,
    ``timestamp``, ``headers``) into one record batch without a per-row loop."""
    if isinstance(batch, pa.Table):
        batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else None
        if batch is None:
            raise InvalidRequest("a record batch needs at least one record")
    n = batch.num_rows
    if n == 0:
        raise InvalidRequest("a record batch needs at least one record")
    names = batch.schema.names
    if "value" not in names:
        raise InvalidRequest("an Arrow batch to encode needs a 'value' column")
    value_parts = _arrow_binary_parts(batch.column("value"))
    if "key" in names:
        key_parts = _arrow_binary_parts(batch.column("key"))
    else:
        key_parts = (np.zeros(n + 1, dtype="<i4"), np.zeros((n + 7) // 8, dtype=np.uint8).tobytes(), b"")
    if "timestamp" in names and batch.column("timestamp").null_count < n:
        col = batch.column("timestamp")
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms"), safe=False).cast(pa.int64())
        ts = col.fill_null(timestamp if timestamp is not None else int(time.time() * 1000))
        ts = ts.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        base_ts, max_ts = int(ts[0]), int(ts.max())
        deltas = ts - base_ts
    else:
        base_ts = max_ts = timestamp if timestamp is not None else int(time.time() * 1000)
        deltas = np.zeros(n, dtype="<i8")
    header_parts = None
    if "headers" in names and batch.column("headers").null_count < n:
        header_parts = _arrow_header_parts(batch.column("headers"))
    return _assemble(
        n, deltas, key_parts, value_parts, header_parts,
        base_timestamp=base_ts, max_timestamp=max_ts, codec=compression.codec_id(codec),
        timestamp_type=CREATE_TIME, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, base_offset=0, leader_epoch=-1,
    )  # fmt: skip


def _arrow_header_parts(col: pa.Array) -> list[bytes] | None:
    if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
        raise InvalidRequest(f"headers must be array<struct<key:string,value:binary>>, got {col.type}")
    col = col.cast(HEADER_TYPE) if col.type != HEADER_TYPE else col
    col = pa.concat_arrays([col]) if col.offset else col  # rebase offsets and bitmaps to 0
    n = len(col)
    list_offsets = np.frombuffer(col.buffers()[1], dtype="<i4", count=n + 1).copy()
    if col.null_count:  # a null list holds no headers, whatever its offsets say
        list_offsets = _offsets_from_lengths(
            col.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), "headers"
        )
    start, stop = int(col.offsets[0].as_py()), int(col.offsets[-1].as_py())
    flat = col.values.slice(start, stop - start) if not col.null_count else col.flatten()
    flat = pa.concat_arrays([flat]) if flat.offset else flat
    if flat.field("key").null_count:
        raise InvalidRequest("header keys must not be null")
    h = len(flat)
    key_off, _, key_data = _arrow_binary_parts(flat.field("key"))
    val_off, val_bitmap, val_data = _arrow_binary_parts(flat.field("value"))
    if val_bitmap is None:
        val_bitmap = b"\xff" * ((h + 7) // 8)
    return [list_offsets.astype("<i4").tobytes(), key_off.tobytes(), val_off.tobytes(), bytes(val_bitmap), key_data, val_data]


# ---------------------------------------------------------------- decoding


class RecordBatch:
    """A decoded view of one batch; columns are zero-copy slices of the body."""

    __slots__ = ("header", "_body", "_layout")

    def __init__(self, header: BatchHeader, body: pa.Buffer, layout: dict) -> None:
        self.header = header
        self._body = body
        self._layout = layout

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def record_count(self) -> int:
        return self.header.record_count

    def _buf(self, name: str) -> pa.Buffer | None:
        span = self._layout.get(name)
        return None if span is None else self._body.slice(span[0], span[1])

    def to_arrow(self) -> pa.RecordBatch:
        """The batch as an Arrow RecordBatch with ``ARROW_SCHEMA`` (zero-copy where possible)."""
        n = self.header.record_count
        key = pa.Array.from_buffers(pa.binary(), n, [self._buf("key_valid"), self._buf("key_off"), self._buf("key_data")])
        value = pa.Array.from_buffers(pa.binary(), n, [self._buf("value_valid"), self._buf("value_off"), self._buf("value_data")])
        offsets = pa.array(np.arange(self.header.base_offset, self.header.base_offset + n, dtype=np.int64))
        h = self.header
        if h.attributes & TIMESTAMP_TYPE_BIT:
            ts = np.full(n, h.max_timestamp, dtype=np.int64)
        else:
            ts = np.frombuffer(self._buf("ts"), dtype="<i8", count=n) + h.base_timestamp
        timestamps = pa.array(ts, type=pa.timestamp("ms"))
        ts_type = pa.array(np.full(n, self.header.timestamp_type, dtype=np.int32))
        if "hdr_list" in self._layout:
            nh = self._layout["nh"]
            hkeys = pa.Array.from_buffers(pa.string(), nh, [None, self._buf("hdr_key_off"), self._buf("hdr_key_data")])
            hvals = pa.Array.from_buffers(pa.binary(), nh, [self._buf("hdr_val_valid"), self._buf("hdr_val_off"), self._buf("hdr_val_data")])
            entries = pa.StructArray.from_arrays([hkeys, hvals], fields=list(HEADER_TYPE.value_type))
            list_off = np.frombuffer(self._buf("hdr_list"), dtype="<i4", count=n + 1)
            empty = np.diff(list_off) == 0
            mask = pa.array(empty) if empty.any() else None
            headers = pa.ListArray.from_arrays(pa.array(list_off, pa.int32()), entries, type=HEADER_TYPE, mask=mask)
        else:
            headers = pa.nulls(n, HEADER_TYPE)
        return pa.RecordBatch.from_arrays([key, value, offsets, timestamps, ts_type, headers], schema=ARROW_SCHEMA)

    def records(self) -> list[Record]:
        """The records as Python objects (the per-message API; not a hot path)."""
        rb = self.to_arrow()
        offsets = rb.column(2).to_numpy().tolist()
        ts = rb.column(3).cast(pa.int64()).to_numpy().tolist()
        keys = rb.column(0).to_pylist()
        values = rb.column(1).to_pylist()
        if "hdr_list" in self._layout:
            hdrs = [[(d["key"], d["value"]) for d in h] if h else [] for h in rb.column(5).to_pylist()]
        else:
            hdrs = [[] for _ in range(len(offsets))]
        return list(map(Record, offsets, ts, keys, values, hdrs))


def _aligned(buf: pa.Buffer) -> pa.Buffer:
    # Arrow expects naturally aligned offset and int64 buffers; a batch that
    # sits at an odd position in a file or frame is copied once (memcpy speed).
    if buf.address % 8 == 0:
        return buf
    return pa.py_buffer(buf.to_pybytes())


def decode(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_uncompressed: int = MAX_UNCOMPRESSED_BYTES,
) -> RecordBatch:
    """Decode the batch at ``pos``; raise CorruptRecord on any inconsistency."""
    h = read_header(buf, pos)
    if len(buf) - pos < h.size:
        raise CorruptRecord(f"truncated batch at offset {h.base_offset}: {len(buf) - pos} of {h.size} bytes")
    if check_crc:
        verify_crc(buf, pos, h)
    raw = memoryview(buf)[pos + HEADER_SIZE : pos + h.size]
    if h.codec != compression.NONE:
        if len(raw) < 4:
            raise CorruptRecord("compressed body lacks its size prefix")
        size = _U32LE.unpack_from(raw)[0]
        if size > max_uncompressed:
            raise CorruptRecord(f"batch claims a body of {size} bytes, more than {max_uncompressed}")
        body = pa.py_buffer(compression.decompress(h.codec, raw[4:], size))
    else:
        body = _aligned(pa.py_buffer(raw))
    return RecordBatch(h, body, _layout(h, body))


def _layout(h: BatchHeader, body: pa.Buffer) -> dict:
    n, attrs, total = h.record_count, h.attributes, body.size
    has_headers = bool(attrs & HAS_HEADERS)
    n_int32 = (n + 1) * (5 if has_headers else 2)
    fixed = 8 * n + 4 * n_int32  # before the header-count dependent parts
    if fixed > total:
        raise CorruptRecord(f"batch body of {total} bytes cannot hold {n} records")
    layout: dict = {}
    pos = 0

    def take(name: str, size: int) -> None:
        nonlocal pos
        if size < 0 or pos + size > total:
            raise CorruptRecord(f"batch body is too short for its {name} section")
        layout[name] = (pos, size)
        pos += size

    def offsets_of(name: str, count: int) -> np.ndarray:
        start, size = layout[name]
        off = np.frombuffer(body, dtype="<i4", count=count, offset=start)
        if off[0] != 0 or (count > 1 and bool((np.diff(off) < 0).any())):
            raise CorruptRecord(f"batch {name} are not monotonic from 0")
        return off

    take("ts", 8 * n)
    take("key_off", 4 * (n + 1))
    take("value_off", 4 * (n + 1))
    nh = 0
    if has_headers:
        take("hdr_list", 4 * (n + 1))
        nh = int(offsets_of("hdr_list", n + 1)[-1])
        if nh * 8 > total:
            raise CorruptRecord("batch claims more headers than its body can hold")
        take("hdr_key_off", 4 * (nh + 1))
        take("hdr_val_off", 4 * (nh + 1))
        layout["nh"] = nh
    bitmap = (n + 7) // 8
    if attrs & HAS_KEY_NULLS:
        take("key_valid", bitmap)
    if attrs & HAS_VALUE_NULLS:
        take("value_valid", bitmap)
    if has_headers:
        take("hdr_val_valid", (nh + 7) // 8)
    take("key_data", int(offsets_of("key_off", n + 1)[-1]))
    take("value_data", int(offsets_of("value_off", n + 1)[-1]))
    if has_headers:
        take("hdr_key_data", int(offsets_of("hdr_key_off", nh + 1)[-1]))
        take("hdr_val_data", int(offsets_of("hdr_val_off", nh + 1)[-1]))
    if pos != total:
        raise CorruptRecord(f"batch body has {total - pos} unexplained trailing bytes")
    if has_headers:
        key_data = body.slice(*layout["hdr_key_data"])
        try:
            pa.Array.from_buffers(pa.string(), nh, [None, body.slice(*layout["hdr_key_off"]), key_data]).validate(full=True)
        except pa.ArrowInvalid:
            raise CorruptRecord("batch header keys are not valid UTF-8") from None
    return layout


def decode_all(
    buf: bytes | bytearray | memoryview,
    *,
    check_crc: bool = True,
    max_uncompressed: int = MAX_UNCOMPRESSED_BYTES,
) -> list[RecordBatch]:
    """Decode every whole batch in ``buf`` (a trailing partial batch is ignored)."""
    return [
        decode(buf, pos, check_crc=check_crc, max_uncompressed=max_uncompressed)
        for pos, _ in iter_headers(buf)
    ]


def to_arrow(
    buf: bytes | bytearray | memoryview,
    start_offset: int | None = None,
    end_offset: int | None = None,
    *,
    check_crc: bool = True,
) -> pa.Table:
    """Decode a run of batches into one Arrow table, trimmed to [start, end)."""
    batches = [b.to_arrow() for b in decode_all(buf, check_crc=check_crc)]
    table = pa.Table.from_batches(batches, schema=ARROW_SCHEMA)
    return trim(table, start_offset, end_offset)


def trim(table: pa.Table, start_offset: int | None, end_offset: int | None) -> pa.Table:
    """Drop rows outside [start_offset, end_offset); offsets are sorted, so two searches do."""
    if table.num_rows == 0 or (start_offset is None and end_offset is None):
        return table
    offs = table.column("offset").to_numpy()
    lo = 0 if start_offset is None else int(np.searchsorted(offs, start_offset, side="left"))
    hi = len(offs) if end_offset is None else int(np.searchsorted(offs, end_offset, side="left"))
    return table.slice(lo, max(0, hi - lo))
