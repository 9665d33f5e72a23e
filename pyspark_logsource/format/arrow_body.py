"""Our record batch body: the records laid out as Arrow buffers (attribute ``ARROW_BODY``).

After the 61-byte header (``header.py``) the body holds the records column by column::

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
(UnsupportedCompressionType for codec ids 5-7).

Alignment: the body starts 61 bytes into the batch, so it is usually not
8-byte aligned; ``arrow_decode.decode_arrow`` copies only the small array/bitmap prefix into an
aligned buffer, while key and value bytes stay zero-copy views of the input.
"""

from __future__ import annotations

import itertools
import struct
import time
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import InvalidRequest, InvalidTimestamp, MessageTooLarge
from . import compression
from ._speedups import cbody
from .header import (
    ARROW_BODY,
    CREATE_TIME,
    HAS_HEADERS,
    HAS_KEY_NULLS,
    HAS_VALUE_NULLS,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    write_header,
    write_producer_header,
)

#: Upper bound on a decompressed body; a batch that claims more is corrupt.
MAX_UNCOMPRESSED_BYTES = 1 << 30
_INT32_MAX = (1 << 31) - 1
_U32LE = struct.Struct("<I")

#: Upper bound on a decompressed body; a batch that claims more is corrupt.
MAX_UNCOMPRESSED_BYTES = 1 << 30
_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1

HEADER_TYPE = pa.list_(
    pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
)
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


class Record(NamedTuple):
    """One record, as the per-message consumer API hands it out."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


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
            lengths = (
                list(map(len, items)) if small else np.fromiter(map(len, items), dtype=np.int64, count=n)
            )
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
    attrs = codec | ARROW_BODY
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
    return write_header(
        out,
        attributes=attrs,
        record_count=n,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        base_offset=base_offset,
        leader_epoch=leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


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
        n,
        deltas,
        key_parts,
        value_parts,
        header_parts,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        codec=codec,
        timestamp_type=timestamp_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_offset=base_offset,
        leader_epoch=leader_epoch,
    )


def _arrow_binary_parts(arr: pa.Array) -> tuple[np.ndarray, bytes | None, memoryview]:
    """Offsets (rebased to 0), validity bitmap and data of a binary/string Arrow array."""
    if pa.types.is_string(arr.type):
        arr = arr.view(pa.binary())
    elif (
        pa.types.is_large_string(arr.type)
        or pa.types.is_large_binary(arr.type)
        or pa.types.is_binary_view(arr.type)
        or pa.types.is_string_view(arr.type)
    ):
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
        n,
        deltas,
        key_parts,
        value_parts,
        header_parts,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        codec=compression.codec_id(codec),
        timestamp_type=CREATE_TIME,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_offset=0,
        leader_epoch=-1,
    )


#: The Arrow -> batch bridge under the name the design uses (``to_arrow`` is the other way).
from_arrow = encode_arrow


def _arrow_header_parts(col: pa.Array) -> list[bytes] | None:
    if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
        raise InvalidRequest(f"headers must be array<struct<key:string,value:binary>>, got {col.type}")
    try:
        col = col.cast(HEADER_TYPE) if col.type != HEADER_TYPE else col
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InvalidRequest(
            f"headers must be array<struct<key:string not null,value:binary>>: {e}"
        ) from None
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
    return [
        list_offsets.astype("<i4").tobytes(),
        key_off.tobytes(),
        val_off.tobytes(),
        bytes(val_bitmap),
        key_data,
        val_data,
    ]


#: The body of a one-record batch before key and value: timestamp delta 0, key offsets 0 and
#: len(key), value offsets 0 and len(value) (the layout ``encode`` writes for n = 1).
_ONE_RECORD = struct.Struct("<qiiii")
_ZERO_HEADER = bytes(HEADER_SIZE)

#: Batches with more records than this use the numpy encoder (faster per record).
_STRUCTS: dict[int, struct.Struct] = {}
SMALL_BATCH = 64


def _offsets_struct(n: int) -> struct.Struct:
    s = _STRUCTS.get(n)
    if s is None:
        s = _STRUCTS[n] = struct.Struct(f"<{n}q{n + 1}i{n + 1}i")
    return s


def encode_records(
    values: list,
    keys: list | None,
    timestamps: list[int],
    headers: list | None,
    *,
    codec: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytearray:
    """Encode one producer batch, byte-identical to :func:`encode`.

    ``encode`` builds the columns with numpy (~20 us per call whatever the
    record count): dominant for the tiny batches of a low-latency producer.
    Small simple batches (no headers, no null values, keys all present or all
    absent) take a few ``struct.pack`` calls instead; with the compiled core,
    every plain batch (those, uncompressed, of any size) is one C call.
    """
    if cbody is not None:  # the compiled encode; None: a batch it does not take, encoded below
        out = cbody.encode_records(
            values, keys, timestamps, headers, codec, producer_id, producer_epoch, base_sequence
        )
        if out is not None:
            return out
    n = len(values)
    if n == 1 and headers is None and codec == compression.NONE:
        # one record per batch (batch_size 1, linger 0): the hot case of a low-latency producer
        v = values[0]
        if type(v) is bytes and len(v) <= _INT32_MAX:
            ts = timestamps[0]
            if keys is None:
                out = bytearray().join((_ZERO_HEADER, _ONE_RECORD.pack(0, 0, 0, 0, len(v)), b"\x00", v))
                attrs = ARROW_BODY | HAS_KEY_NULLS
            else:
                k = keys[0]
                if type(k) is not bytes or len(k) > _INT32_MAX:
                    return encode(
                        values,
                        keys,
                        timestamps,
                        None,
                        codec=codec,
                        producer_id=producer_id,
                        producer_epoch=producer_epoch,
                        base_sequence=base_sequence,
                    )
                out = bytearray().join((_ZERO_HEADER, _ONE_RECORD.pack(0, 0, len(k), 0, len(v)), k, v))
                attrs = ARROW_BODY
            return write_producer_header(out, attrs, 1, ts, ts, producer_id, producer_epoch, base_sequence)
    if n > SMALL_BATCH or headers is not None or None in values or (keys is not None and None in keys):
        return encode(
            values,
            keys,
            timestamps,
            headers,
            codec=codec,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
    base_ts = timestamps[0]
    max_ts = max(timestamps) if n > 1 else base_ts
    deltas = [t - base_ts for t in timestamps] if n > 1 else [0]
    value_off = [0, *itertools.accumulate(map(len, values))]
    key_off = [0] * (n + 1) if keys is None else [0, *itertools.accumulate(map(len, keys))]
    if value_off[-1] > _INT32_MAX or key_off[-1] > _INT32_MAX:
        # before packing or joining anything: encode() raises the typed MessageTooLarge
        return encode(
            values,
            keys,
            timestamps,
            None,
            codec=codec,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
    head = _offsets_struct(n).pack(*deltas, *key_off, *value_off)
    attrs = codec | ARROW_BODY
    if keys is None:
        parts = [head, bytes((n + 7) // 8), b"".join(values)]
        attrs |= HAS_KEY_NULLS
    else:
        parts = [head, b"".join(keys), b"".join(values)]
    if codec != compression.NONE:
        raw = b"".join(parts)
        parts = [_U32LE.pack(len(raw)), compression.compress(codec, raw)]
    out = bytearray().join([bytes(HEADER_SIZE), *parts])
    return write_header(
        out,
        attributes=attrs,
        record_count=n,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
