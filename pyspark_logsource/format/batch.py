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

Decoding never trusts a length: the body must be exactly the sum of its
sections, offsets must start at 0 and never decrease, header keys must be
UTF-8, and a compressed body's size prefix is bounded (``max_uncompressed``)
and only caps a chunked decompression. Anything else raises CorruptRecord
(UnsupportedCompressionType for codec ids 2, 5-7).

Alignment: the body starts 61 bytes into the batch, so it is usually not
8-byte aligned; ``decode`` copies only the small array/bitmap prefix into an
aligned buffer, while key and value bytes stay zero-copy views of the input.

Runs: ``to_arrow(buf)`` over many batches (a fetch response, a segment
region) builds one Arrow table for runs of small batches with a
handful of vectorised numpy/pyarrow calls for the whole run (decompressing
compressed bodies first) instead of a few dozen pyarrow objects per batch;
the result is identical to decoding batch by batch (tests compare both).
"""

from __future__ import annotations

import functools
import itertools
import struct
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import CorruptRecord, InvalidRequest, InvalidTimestamp, MessageTooLarge
from . import compression
from .crc import crc32c

MAGIC = 2
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: what precedes batch_length's count
CRC_START = 21
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_ATTR_MAXTS = struct.Struct(">hiqq")  # attributes .. max_timestamp, at offset 21
_U32LE = struct.Struct("<I")
_LENGTH = struct.Struct(">i")
_ATTRS = struct.Struct(">h")

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
_INT64_MAX = (1 << 63) - 1

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
    if h.base_offset > _INT64_MAX - h.last_offset_delta:
        raise CorruptRecord(f"batch at offset {h.base_offset} ends past the largest int64 offset")


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


#: Up to this many records, offsets are built with plain Python (a few hundred ns)
#: instead of numpy (a few us of call overhead): batch size 1 is a common case.
_SMALL = 64


def _small_offsets(lengths: list[int], what: str) -> tuple[bytes, int]:
    offsets = list(itertools.accumulate(lengths, initial=0))
    if offsets[-1] > _INT32_MAX:
        raise MessageTooLarge(f"{what} of one batch exceed 2 GiB")
    return struct.pack(f"<{len(offsets)}i", *offsets), offsets[-1]


class _Pieces(NamedTuple):
    """Column data left as the caller's objects, so that the batch is written with one join."""

    items: Sequence
    nbytes: int


def _nbytes(part) -> int:
    if isinstance(part, _Pieces):
        return part.nbytes
    return part.nbytes if isinstance(part, (np.ndarray, memoryview)) else len(part)


def _binary_column(
    items: Sequence[bytes | None], n: int, what: str, join: bool = True
) -> tuple[np.ndarray | bytes, bytes | None, bytes | _Pieces]:
    """Offsets, validity bitmap (None when no nulls) and data of a list of bytes.

    With ``join=False`` the data stays a list of the given objects (``_Pieces``)
    and is copied only once, into the finished batch.
    """
    if isinstance(items, (bytes, bytearray, memoryview, str)):
        raise InvalidRequest(f"{what} must be a sequence of bytes objects, not one {type(items).__name__}")
    bitmap = None
    small = n <= _SMALL
    try:
        # the common case first: no None, so no separate scan for nulls
        lengths = list(map(len, items)) if small else np.fromiter(map(len, items), dtype=np.int64, count=n)
    except TypeError:
        valid = np.fromiter((x is not None for x in items), dtype=bool, count=n)
        items = [b"" if x is None else x for x in items]
        bitmap = np.packbits(valid, bitorder="little").tobytes()
        try:
            lengths = list(map(len, items)) if small else np.fromiter(map(len, items), dtype=np.int64, count=n)
        except TypeError:
            raise InvalidRequest(f"{what} must be bytes or None") from None
    if small:
        offsets, total = _small_offsets(lengths, what)
    else:
        offsets = _offsets_from_lengths(lengths, what)
        total = int(offsets[-1])
    if not join:
        return offsets, bitmap, _Pieces(items, total)
    try:
        data = b"".join(items)
    except TypeError:
        raise InvalidRequest(f"{what} must be bytes or None") from None
    if total != len(data):  # e.g. a memoryview whose len() counts items, not bytes
        raise InvalidRequest(f"{what} must be bytes or None (len() disagrees with the byte size)")
    return offsets, bitmap, data


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
    return [list_off, key_off, val_off, val_bitmap, key_data, val_data]


def _assemble(
    n: int,
    ts_deltas: np.ndarray | bytes,
    key_parts: tuple,
    value_parts: tuple,
    header_parts: list | None,
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
    # numpy arrays and bytes alike go into the join through the buffer protocol, uncopied
    deltas = ts_deltas if isinstance(ts_deltas, bytes) else np.ascontiguousarray(ts_deltas, dtype="<i8")
    arrays = [deltas, key_off, val_off]
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
    body_size = 0
    flat: list = [bytes(HEADER_SIZE)]
    for part in arrays + bitmaps + data:
        body_size += _nbytes(part)
        if isinstance(part, _Pieces):
            flat.extend(part.items)
        else:
            flat.append(part)
    if body_size > MAX_UNCOMPRESSED_BYTES:
        raise MessageTooLarge(f"batch body of {body_size} bytes exceeds {MAX_UNCOMPRESSED_BYTES}")
    try:
        if codec == compression.NONE:
            out = bytearray().join(flat)  # the one copy of keys and values
        else:
            raw = b"".join(flat[1:])
            out = bytearray().join([flat[0], _U32LE.pack(len(raw)), compression.compress(codec, raw)])
    except TypeError:
        raise InvalidRequest("keys and values must be bytes or None") from None
    written = len(out) - HEADER_SIZE if codec == compression.NONE else len(raw)
    if written != body_size:  # e.g. a memoryview whose len() counts items, not bytes
        raise InvalidRequest("keys and values must be bytes or None (len() disagrees with the byte size)")
    if len(out) - LOG_OVERHEAD > _INT32_MAX:
        raise MessageTooLarge("batch exceeds 2 GiB")
    try:
        HEADER.pack_into(
            out, 0, base_offset, len(out) - LOG_OVERHEAD, leader_epoch, MAGIC, 0, attrs, n - 1,
            base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, n,
        )  # fmt: skip
    except struct.error as e:
        raise InvalidRequest(f"batch header field out of range: {e}") from None
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
        key_parts = (bytes(4 * (n + 1)), bytes((n + 7) // 8), b"")
    else:
        if len(keys) != n:
            raise InvalidRequest("keys and values differ in length")
        key_parts = _binary_column(keys, n, "keys", join=False)
    value_parts = _binary_column(values, n, "values", join=False)
    if timestamps is None or isinstance(timestamps, (int, np.integer)):
        base_ts = int(time.time() * 1000) if timestamps is None else int(timestamps)
        if not -(2**63) <= base_ts < 2**63:
            raise InvalidTimestamp(f"timestamp {base_ts} does not fit in 64 bits")
        deltas = bytes(8 * n)
        max_ts = base_ts
    else:
        try:
            ts = np.asarray(timestamps, dtype=np.int64)
        except (OverflowError, ValueError, TypeError) as e:
            raise InvalidTimestamp(f"timestamps must be int64 milliseconds: {e}") from None
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
        elif pa.types.is_integer(col.type):
            try:
                col = col.cast(pa.int64())
            except pa.ArrowInvalid as e:
                raise InvalidRequest(f"timestamp out of range: {e}") from None
        else:
            raise InvalidRequest(f"timestamp must be a timestamp or integer (ms) column, got {col.type}")
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


#: The Arrow -> batch bridge under the name the design uses (``to_arrow`` is the other way).
from_arrow = encode_arrow


def _arrow_header_parts(col: pa.Array) -> list[bytes] | None:
    if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
        raise InvalidRequest(f"headers must be array<struct<key:string,value:binary>>, got {col.type}")
    try:
        col = col.cast(HEADER_TYPE) if col.type != HEADER_TYPE else col
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InvalidRequest(f"headers must be array<struct<key:string not null,value:binary>>: {e}") from None
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

_TS_MS = pa.timestamp("ms")
_CACHE_MAX_ROWS = 4096  # constant columns up to this size are shared between batches


@functools.lru_cache(maxsize=64)
def _null_headers(n: int) -> pa.Array:
    return pa.nulls(n, HEADER_TYPE)


@functools.lru_cache(maxsize=64)
def _const_int32(n: int, value: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.full(n, value, dtype=np.int32))])


def _null_headers_col(n: int) -> pa.Array:
    return _null_headers(n) if n <= _CACHE_MAX_ROWS else pa.nulls(n, HEADER_TYPE)


def _ts_type_col(n: int, value: int) -> pa.Array:
    if n <= _CACHE_MAX_ROWS:
        return _const_int32(n, value)
    return pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.full(n, value, dtype=np.int32))])


def _np_col(type_: pa.DataType, arr: np.ndarray) -> pa.Array:
    """Wrap a contiguous numpy array as an Arrow array without a copy or a type check."""
    return pa.Array.from_buffers(type_, len(arr), [None, pa.py_buffer(arr)])


class RecordBatch:
    """A decoded view of one batch; columns are zero-copy slices of the body.

    Offset and timestamp arrays come from ``_arrays`` (the body, or an aligned
    copy of just its array/bitmap prefix when the batch sits at an unaligned
    position); key and value bytes always come from ``_body`` without a copy.
    """

    __slots__ = ("header", "_body", "_arrays", "_layout")

    def __init__(self, header: BatchHeader, body: pa.Buffer, layout: dict, arrays: pa.Buffer | None = None) -> None:
        self.header = header
        self._body = body
        self._arrays = body if arrays is None else arrays
        self._layout = layout

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def record_count(self) -> int:
        return self.header.record_count

    def _buf(self, name: str) -> pa.Buffer | None:
        span = self._layout.get(name)
        if span is None:
            return None
        start, size = span
        src = self._arrays if start + size <= self._arrays.size else self._body
        return src.slice(start, size)

    def to_arrow(self) -> pa.RecordBatch:
        """The batch as an Arrow RecordBatch with ``ARROW_SCHEMA`` (zero-copy where possible)."""
        h = self.header
        n = h.record_count
        buf = self._buf
        key = pa.Array.from_buffers(pa.binary(), n, [buf("key_valid"), buf("key_off"), buf("key_data")])
        value = pa.Array.from_buffers(pa.binary(), n, [buf("value_valid"), buf("value_off"), buf("value_data")])
        if n == 1:  # consumers with batch size 1: plain struct beats numpy's call overhead
            offsets = pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(_I64LE.pack(h.base_offset))])
            if h.attributes & TIMESTAMP_TYPE_BIT:
                t = h.max_timestamp
            else:  # int64 wrap-around, exactly as numpy adds below
                t = (h.base_timestamp + _I64LE.unpack_from(self._arrays)[0] + 2**63) % 2**64 - 2**63
            timestamps = pa.Array.from_buffers(_TS_MS, 1, [None, pa.py_buffer(_I64LE.pack(t))])
        else:
            offsets = _np_col(pa.int64(), np.arange(h.base_offset, h.base_offset + n, dtype=np.int64))
            if h.attributes & TIMESTAMP_TYPE_BIT:
                ts = np.full(n, h.max_timestamp, dtype=np.int64)
            else:
                ts = np.frombuffer(self._arrays, dtype="<i8", count=n) + np.int64(h.base_timestamp)
            timestamps = _np_col(_TS_MS, ts)
        ts_type = _ts_type_col(n, h.timestamp_type)
        if "hdr_list" in self._layout:
            nh = self._layout["nh"]
            hkeys = pa.Array.from_buffers(pa.string(), nh, [None, buf("hdr_key_off"), buf("hdr_key_data")])
            hvals = pa.Array.from_buffers(pa.binary(), nh, [buf("hdr_val_valid"), buf("hdr_val_off"), buf("hdr_val_data")])
            entries = pa.StructArray.from_arrays([hkeys, hvals], fields=list(HEADER_TYPE.value_type))
            list_off = np.frombuffer(buf("hdr_list"), dtype="<i4", count=n + 1)
            empty = list_off[1:] == list_off[:-1]
            mask = pa.array(empty) if empty.any() else None
            headers = pa.ListArray.from_arrays(pa.array(list_off, pa.int32()), entries, type=HEADER_TYPE, mask=mask)
        else:
            headers = _null_headers_col(n)
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


def decode(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_uncompressed: int = MAX_UNCOMPRESSED_BYTES,
) -> RecordBatch:
    """Decode the batch at ``pos``; raise CorruptRecord on any inconsistency.

    Key and value columns of an uncompressed batch are views of ``buf``
    (zero-copy): do not mutate ``buf`` in place while they are in use.
    """
    h = read_header(buf, pos)
    if len(buf) - pos < h.size:
        raise CorruptRecord(f"truncated batch at offset {h.base_offset}: {len(buf) - pos} of {h.size} bytes")
    if check_crc:
        verify_crc(buf, pos, h)
    raw = memoryview(buf)[pos + HEADER_SIZE : pos + h.size]
    if h.codec != compression.NONE:
        body = pa.py_buffer(_decompress_body(h.codec, raw, max_uncompressed))
    else:
        body = pa.py_buffer(raw)
    layout, arrays = _layout(h, body)
    return RecordBatch(h, body, layout, arrays)


def _decompress_body(codec: int, raw: memoryview, max_uncompressed: int) -> bytes:
    """The body of a compressed batch: its uint32 size prefix is checked before anything is allocated."""
    if len(raw) < 4:
        raise CorruptRecord("compressed body lacks its size prefix")
    size = _U32LE.unpack_from(raw)[0]
    if size > max_uncompressed:
        raise CorruptRecord(f"batch claims a body of {size} bytes, more than {max_uncompressed}")
    return compression.decompress(codec, raw[4:], size)


_I32LE = struct.Struct("<i")
_I64LE = struct.Struct("<q")


def _check_offsets(arrays: pa.Buffer, start: int, k: int, n1: int, what: str) -> None:
    """Check ``k`` offset arrays of ``n1`` entries laid end to end: each starts at 0 and never decreases."""
    if n1 <= 4:  # tiny batches: a struct unpack is far cheaper than numpy's per-call overhead
        offs = struct.unpack_from(f"<{k * n1}i", arrays, start)
        for i in range(0, k * n1, n1):
            if offs[i]:
                raise CorruptRecord(f"batch {what} offsets do not start at 0")
            if any(offs[j] > offs[j + 1] for j in range(i, i + n1 - 1)):
                raise CorruptRecord(f"batch {what} offsets decrease")
        return
    offs = np.frombuffer(arrays, dtype="<i4", count=k * n1, offset=start).reshape(k, n1)
    if offs[:, 0].any():
        raise CorruptRecord(f"batch {what} offsets do not start at 0")
    if (offs[:, 1:] < offs[:, :-1]).any():
        raise CorruptRecord(f"batch {what} offsets decrease")


def _layout(h: BatchHeader, body: pa.Buffer) -> tuple[dict, pa.Buffer | None]:
    """Locate every section of the body; return the layout and an aligned copy of the
    array prefix when the body itself is not 8-byte aligned (None when it is).

    Every length comes from the header or from offsets inside the body and is
    checked against the body's size before it is used, so nothing here can
    allocate or read by an unchecked length.
    """
    n, attrs, total = h.record_count, h.attributes, body.size
    has_headers = attrs & HAS_HEADERS
    n1 = n + 1
    k = 3 if has_headers else 2
    pos = 8 * n + 4 * k * n1
    if pos > total:
        raise CorruptRecord(f"batch body of {total} bytes cannot hold {n} records")
    # the last entry of each offsets array is its data length: read them as scalars
    # first, so that the numpy checks below run once, on aligned memory
    key_len = _I32LE.unpack_from(body, 8 * n + 4 * n)[0]
    value_len = _I32LE.unpack_from(body, 8 * n + 8 * n + 4)[0]
    layout: dict = {"ts": (0, 8 * n), "key_off": (8 * n, 4 * n1), "value_off": (8 * n + 4 * n1, 4 * n1)}
    nh = hk_len = hv_len = 0
    if has_headers:
        nh = _I32LE.unpack_from(body, 8 * n + 8 * n1 + 4 * n)[0]
        if nh < 0 or pos + 8 * (nh + 1) > total:
            raise CorruptRecord(f"batch claims {nh} headers, more than its body can hold")
        hk_len, hv_len = _I32LE.unpack_from(body, pos + 4 * nh)[0], _I32LE.unpack_from(body, pos + 8 * nh + 4)[0]
        layout["hdr_list"] = (8 * n + 8 * n1, 4 * n1)
        layout["hdr_key_off"] = (pos, 4 * (nh + 1))
        layout["hdr_val_off"] = (pos + 4 * (nh + 1), 4 * (nh + 1))
        layout["nh"] = nh
        pos += 8 * (nh + 1)
    bitmap = (n + 7) // 8
    if attrs & HAS_KEY_NULLS:
        layout["key_valid"] = (pos, bitmap)
        pos += bitmap
    if attrs & HAS_VALUE_NULLS:
        layout["value_valid"] = (pos, bitmap)
        pos += bitmap
    if has_headers:
        layout["hdr_val_valid"] = (pos, (nh + 7) // 8)
        pos += (nh + 7) // 8
    if min(key_len, value_len, hk_len, hv_len) < 0 or pos + key_len + value_len + hk_len + hv_len != total:
        raise CorruptRecord(
            f"batch body of {total} bytes does not match its sections "
            f"({pos + key_len + value_len + hk_len + hv_len} bytes)"
        )
    arrays = None
    if body.address % 8:
        # Arrow wants aligned offset/int64 buffers. The body follows a 61-byte
        # header, so it is usually unaligned: copy just the (small) array and
        # bitmap prefix; key and value bytes stay zero-copy.
        arrays = pa.py_buffer(body.slice(0, pos).to_pybytes())  # a bytes object's data is 16-aligned
        if arrays.address % 8:  # pragma: no cover - other interpreters
            arrays = pa.py_buffer(np.frombuffer(body, dtype=np.uint8, count=pos).copy())
    aligned = body if arrays is None else arrays
    _check_offsets(aligned, 8 * n, k, n1, "record")
    if has_headers:
        _check_offsets(aligned, layout["hdr_key_off"][0], 2, nh + 1, "header")
    layout["key_data"] = (pos, key_len)
    layout["value_data"] = (pos + key_len, value_len)
    pos += key_len + value_len
    if has_headers:
        layout["hdr_key_data"] = (pos, hk_len)
        layout["hdr_val_data"] = (pos + hk_len, hv_len)
        key_data = body.slice(pos, hk_len)
        try:
            pa.Array.from_buffers(pa.string(), nh, [None, aligned.slice(*layout["hdr_key_off"]), key_data]).validate(full=True)
        except pa.ArrowInvalid:
            raise CorruptRecord("batch header keys are not valid UTF-8") from None
    return layout, arrays


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


# ---------------------------------------------------------------- runs of batches

#: Runs of uncompressed batches averaging fewer records than this take the
#: vectorised path; bigger batches are already cheap (and zero-copy) one by one.
FAST_PATH_MAX_AVG_RECORDS = 256
_H_POS, _H_BASE, _H_LEN, _H_ATTR, _H_BASE_TS, _H_MAX_TS, _H_COUNT = 0, 1, 2, 6, 8, 9, 13


def _walk(buf: bytes | bytearray | memoryview, check_crc: bool) -> np.ndarray:
    """Headers of the whole batches in ``buf`` as an int64 array (position + the 13 fields).

    One struct unpack (and one CRC call) per batch; the remaining header
    checks run vectorised over all batches at once.
    """
    unpack = HEADER.unpack_from
    mv = memoryview(buf)
    pos, end = 0, len(buf)
    rows = []
    while end - pos >= HEADER_SIZE:
        t = unpack(buf, pos)
        size = t[1] + LOG_OVERHEAD
        if t[1] < HEADER_SIZE - LOG_OVERHEAD or t[3] != MAGIC:
            read_header(buf, pos)  # raises the precise error
        if pos + size > end:
            read_header(buf, pos)  # a partial tail is skipped, as iter_headers does, if its header is sane
            break
        if check_crc and crc32c(mv[pos + CRC_START : pos + size]) != t[4]:
            raise CorruptRecord(f"CRC mismatch in batch at offset {t[0]}")
        rows.append((pos, *t))
        pos += size
    hs = np.array(rows, dtype=np.int64).reshape(len(rows), 14)
    if len(rows):
        count = hs[:, _H_COUNT]
        lod = hs[:, 7]
        bad = (count < 1) | (lod != count - 1) | ((hs[:, _H_ATTR] & ~KNOWN_ATTRIBUTES) != 0)
        bad |= hs[:, _H_BASE] > _INT64_MAX - np.maximum(lod, 0)
        if bad.any():
            read_header(buf, int(hs[int(np.argmax(bad)), _H_POS]))
    return hs


def _gather(data: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Buffer:
    """Concatenate the byte ranges ``[starts[i], starts[i] + lengths[i])`` of ``data`` in one C++ pass.

    The ranges are sorted and disjoint, so they and the gaps between them
    form one LargeBinary array over ``data``; taking every other element
    copies exactly the ranges, end to end.
    """
    m = len(starts)
    bounds = np.empty(2 * m, dtype=np.int64)
    bounds[0::2] = starts
    bounds[1::2] = starts + lengths
    spans = pa.Array.from_buffers(pa.large_binary(), 2 * m - 1, [None, pa.py_buffer(bounds), data])
    taken = spans.take(pa.array(np.arange(0, 2 * m - 1, 2, dtype=np.int64)))
    out = taken.buffers()[2]
    total = int(lengths.sum())
    return pa.py_buffer(b"") if out is None or total == 0 else out.slice(0, total)


def _ragged_index(lengths: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """For rows laid out in groups of ``lengths``: each row's group and its index within the group."""
    group = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    firsts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=firsts[1:])
    return group, np.arange(total, dtype=np.int64) - firsts[group]


def _validity(data: pa.Buffer, bm_start: np.ndarray, flagged: np.ndarray, n: np.ndarray,
              group: np.ndarray, local: np.ndarray) -> pa.Buffer | None:  # fmt: skip
    """One validity bitmap for the run from the per-batch bitmaps of the flagged batches."""
    if not flagged.any():
        return None
    bm_len = np.where(flagged, (n + 7) // 8, 0)
    bits = np.unpackbits(np.frombuffer(_gather(data, bm_start, bm_len), dtype=np.uint8), bitorder="little")
    bit_first = np.zeros(len(n), dtype=np.int64)
    np.cumsum(bm_len[:-1] * 8, out=bit_first[1:])
    valid = np.ones(len(group), dtype=bool)
    rows = flagged[group]
    valid[rows] = bits[bit_first[group[rows]] + local[rows]].astype(bool)
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _binary_run(data: pa.Buffer, rec_off: np.ndarray, data_start: np.ndarray, lens: np.ndarray,
                group: np.ndarray, validity: pa.Buffer | None) -> pa.Array:  # fmt: skip
    """One BinaryArray for the run from each record's offset within its batch and each batch's data range."""
    total = int(lens.sum())
    if total > _INT32_MAX:
        raise OverflowError("run too large for one BinaryArray")
    cum = np.zeros(len(lens), dtype=np.int64)
    np.cumsum(lens[:-1], out=cum[1:])
    offsets = np.empty(len(group) + 1, dtype=np.int32)
    offsets[:-1] = rec_off + cum[group]
    offsets[-1] = total
    return pa.Array.from_buffers(pa.binary(), len(group), [validity, pa.py_buffer(offsets), _gather(data, data_start, lens)])


def _offset_arrays(data: pa.Buffer, starts: np.ndarray, sizes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gather and check, per batch, ``k`` adjacent int32 offset arrays of ``sizes[i]`` entries each.

    Returns the gathered offsets, the index of each array's first entry in
    them (batch-major), and each array's last entry as an (m, k) int64 array.
    """
    offs = np.frombuffer(_gather(data, starts, 4 * k * sizes), dtype="<i4")
    seg = np.repeat(sizes, k)
    first = np.zeros(len(seg), dtype=np.int64)
    np.cumsum(seg[:-1], out=first[1:])
    if offs[first].any():
        raise CorruptRecord("batch offsets do not start at 0")
    # compare, never subtract: a difference of two int32 offsets can wrap around
    # and make a hostile decrease look like an increase
    down = offs[1:] < offs[:-1]
    down[first[1:] - 1] = False  # the drop from one array's end to the next one's 0
    if down.any():
        raise CorruptRecord("batch offsets decrease")
    return offs, first, offs[first + seg - 1].astype(np.int64).reshape(-1, k)


def _run_to_arrow(data: pa.Buffer, hs: np.ndarray) -> pa.Table:
    """One Arrow table for a run of uncompressed batches, with O(1) numpy/pyarrow calls.

    Raises CorruptRecord (or OverflowError past 2 GiB) when any batch is not
    exactly what the format allows; the caller then falls back to decoding
    batch by batch, which reports the precise error.
    """
    n = hs[:, _H_COUNT]
    attrs = hs[:, _H_ATTR]
    total = int(n.sum())
    body = hs[:, _H_POS] + HEADER_SIZE
    body_len = hs[:, _H_LEN] + LOG_OVERHEAD - HEADER_SIZE
    has_h = (attrs & HAS_HEADERS) != 0
    if ((8 * n + (8 + 4 * has_h) * (n + 1)) > body_len).any():
        raise CorruptRecord("batch body too short for its arrays")
    group, local = _ragged_index(n, total)
    # the key and value offsets of each batch sit side by side: gather both at once
    offs, first, last = _offset_arrays(data, body + 8 * n, n + 1, 2)
    key_len, value_len = last[:, 0], last[:, 1]
    nh = np.zeros(len(n), dtype=np.int64)
    hk_len = np.zeros(len(n), dtype=np.int64)
    hv_len = np.zeros(len(n), dtype=np.int64)
    hsel = np.flatnonzero(has_h)
    if len(hsel):
        h_n = n[hsel]
        lst_at = body[hsel] + 8 * h_n + 8 * (h_n + 1)
        lst, lst_first, lst_last = _offset_arrays(data, lst_at, h_n + 1, 1)
        nh[hsel] = lst_last[:, 0]
        h_nh = nh[hsel]
        if ((8 * h_n + 12 * (h_n + 1) + 8 * (h_nh + 1)) > body_len[hsel]).any():
            raise CorruptRecord("batch claims more headers than its body can hold")
        hoffs, hfirst, hlast = _offset_arrays(data, lst_at + 4 * (h_n + 1), h_nh + 1, 2)
        hk_len[hsel], hv_len[hsel] = hlast[:, 0], hlast[:, 1]
    bm = (n + 7) // 8
    key_flag = (attrs & HAS_KEY_NULLS) != 0
    value_flag = (attrs & HAS_VALUE_NULLS) != 0
    bitmaps = body + 8 * n + 8 * (n + 1) + has_h * (4 * (n + 1) + 8 * (nh + 1))
    key_data = bitmaps + bm * key_flag + bm * value_flag + has_h * ((nh + 7) // 8)
    if (key_data + key_len + value_len + hk_len + hv_len != body + body_len).any():
        raise CorruptRecord("batch body does not match its sections")
    key = _binary_run(data, offs[first[0::2][group] + local], key_data, key_len, group,
                      _validity(data, bitmaps, key_flag, n, group, local))  # fmt: skip
    value = _binary_run(data, offs[first[1::2][group] + local], key_data + key_len, value_len, group,
                        _validity(data, bitmaps + bm * key_flag, value_flag, n, group, local))  # fmt: skip
    offsets = hs[:, _H_BASE][group] + local
    log_append = (attrs & TIMESTAMP_TYPE_BIT) != 0
    deltas = np.frombuffer(_gather(data, body, 8 * n), dtype="<i8")
    ts = np.where(log_append[group], hs[:, _H_MAX_TS][group], deltas + hs[:, _H_BASE_TS][group])
    ts_type = log_append[group].astype(np.int32)
    if len(hsel):
        # per record header counts (0 for batches without headers), then one ListArray
        hidx = np.cumsum(has_h) - 1
        rows = has_h[group]
        at = lst_first[hidx[group[rows]]] + local[rows]
        counts = np.zeros(total, dtype=np.int64)
        counts[rows] = lst[at + 1].astype(np.int64) - lst[at]
        list_off = np.zeros(total + 1, dtype=np.int32)
        np.cumsum(counts, out=list_off[1:])
        h_total = int(h_nh.sum())
        hgroup, hlocal = _ragged_index(h_nh, h_total)
        hdata = key_data[hsel] + key_len[hsel] + value_len[hsel]
        hkeys = _binary_run(data, hoffs[hfirst[0::2][hgroup] + hlocal], hdata, hk_len[hsel], hgroup, None)
        hkeys = hkeys.view(pa.string())
        try:
            hkeys.validate(full=True)
        except pa.ArrowInvalid:
            raise CorruptRecord("batch header keys are not valid UTF-8") from None
        hvals = _binary_run(data, hoffs[hfirst[1::2][hgroup] + hlocal], hdata + hk_len[hsel], hv_len[hsel], hgroup,
                            _validity(data, bitmaps[hsel] + bm[hsel] * key_flag[hsel] + bm[hsel] * value_flag[hsel],
                                      np.ones(len(hsel), dtype=bool), h_nh, hgroup, hlocal))  # fmt: skip
        entries = pa.StructArray.from_arrays([hkeys, hvals], fields=list(HEADER_TYPE.value_type))
        empty = counts == 0
        headers = pa.ListArray.from_arrays(_np_col(pa.int32(), list_off), entries, type=HEADER_TYPE,
                                           mask=pa.array(empty) if empty.any() else None)  # fmt: skip
    else:
        headers = _null_headers_col(total)
    cols = [key, value, _np_col(pa.int64(), offsets), _np_col(_TS_MS, ts), _np_col(pa.int32(), ts_type), headers]
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(cols, schema=ARROW_SCHEMA)])


def _inflate_run(buf: bytes | bytearray | memoryview, run: np.ndarray, max_uncompressed: int) -> bytes:
    """The run rewritten as uncompressed batches: bodies decompressed, codec bits cleared.

    One decompress call per compressed batch is unavoidable; everything
    after it is the vectorised path. CRCs were checked on the original bytes.
    """
    mv = memoryview(buf)
    pieces: list = []
    for pos, _base, length, *_rest in run.tolist():
        size = length + LOG_OVERHEAD
        attrs = _rest[3]
        codec = attrs & CODEC_MASK
        if codec == compression.NONE:
            pieces.append(mv[pos : pos + size])
            continue
        body = _decompress_body(codec, mv[pos + HEADER_SIZE : pos + size], max_uncompressed)
        hdr = bytearray(mv[pos : pos + HEADER_SIZE])
        _LENGTH.pack_into(hdr, 8, HEADER_SIZE - LOG_OVERHEAD + len(body))
        _ATTRS.pack_into(hdr, CRC_START, attrs & ~CODEC_MASK)
        pieces += [hdr, body]
    return b"".join(pieces)


def to_arrow(
    buf: bytes | bytearray | memoryview,
    start_offset: int | None = None,
    end_offset: int | None = None,
    *,
    check_crc: bool = True,
    fast: bool | None = None,
    max_uncompressed: int = MAX_UNCOMPRESSED_BYTES,
) -> pa.Table:
    """Decode a run of batches into one Arrow table, trimmed to [start, end).

    A trailing partial batch is ignored. Runs of small batches (as
    producers with linger 0 write them, compressed or not) are decoded together with a handful of numpy/pyarrow calls instead of a few
    dozen per batch; ``fast`` forces (True) or disables (False) that path,
    None decides by the average batch size. The result is the same either way.
    """
    hs = _walk(buf, check_crc)
    m = len(hs)
    if m == 0:
        return ARROW_SCHEMA.empty_table()
    attrs = hs[:, _H_ATTR]
    codec = attrs & CODEC_MASK
    eligible = (codec <= compression.ZSTD) & (codec != compression.SNAPPY)
    # split into runs of equal eligibility, in log order
    cuts = np.flatnonzero(eligible[1:] != eligible[:-1]) + 1
    bounds = [0, *cuts.tolist(), m]
    tables: list[pa.Table] = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        run = hs[lo:hi]
        use_fast = bool(eligible[lo]) and (
            fast if fast is not None else (hi - lo > 1 and run[:, _H_COUNT].sum() < FAST_PATH_MAX_AVG_RECORDS * (hi - lo))
        )
        if use_fast:
            try:
                if codec[lo:hi].any():
                    flat = _inflate_run(buf, run, max_uncompressed)
                    tables.append(_run_to_arrow(pa.py_buffer(flat), _walk(flat, False)))
                else:
                    tables.append(_run_to_arrow(pa.py_buffer(buf), run))
                continue
            except (CorruptRecord, OverflowError):
                pass  # decode one by one below: that names the bad batch precisely
        batches = [decode(buf, int(p), check_crc=False, max_uncompressed=max_uncompressed).to_arrow() for p in run[:, _H_POS]]
        tables.append(pa.Table.from_batches(batches, schema=ARROW_SCHEMA))
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    return trim(table, start_offset, end_offset)


def trim(table: pa.Table, start_offset: int | None, end_offset: int | None) -> pa.Table:
    """Drop rows outside [start_offset, end_offset); offsets are sorted, so two searches do."""
    if table.num_rows == 0 or (start_offset is None and end_offset is None):
        return table
    offs = table.column("offset").to_numpy()
    lo = 0 if start_offset is None else int(np.searchsorted(offs, start_offset, side="left"))
    hi = len(offs) if end_offset is None else int(np.searchsorted(offs, end_offset, side="left"))
    return table.slice(lo, max(0, hi - lo))
