"""Runs of batches (a fetch response, a segment region) into one Arrow table.

``to_arrow(buf)`` decodes every whole batch of ``buf`` in log order, whatever
its layout. Runs of small Arrow-body batches (as producers with linger 0
write them) are decoded together with a handful of vectorised numpy/pyarrow
calls for the whole run (decompressing compressed bodies first) instead of a
few dozen pyarrow objects per batch; Kafka-layout batches go through
``kafka.py``'s run decoder. The result is identical to decoding batch by
batch (tests compare both).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import CorruptRecord
from . import compression
from ._speedups import crecords
from .arrow_body import (
    ARROW_SCHEMA,
    HEADER_TYPE,
    MAX_UNCOMPRESSED_BYTES,
)
from .arrow_decode import (
    RecordBatch,
    _decompress_body,
    _gather,
    _np_col,
    _null_headers_col,
    decode_arrow,
)
from .header import (
    ARROW_BODY,
    CODEC_MASK,
    CONTROL_BIT,
    HAS_HEADERS,
    HAS_KEY_NULLS,
    HAS_VALUE_NULLS,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    read_header,
    set_attributes_and_length,
    walk,
)
from .kafka_decode import KafkaRecordBatch, decode_kafka, decode_kafka_run, plain_run_table

_INT32_MAX = (1 << 31) - 1
_TS_MS = pa.timestamp("ms")


def decode(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_uncompressed: int = MAX_UNCOMPRESSED_BYTES,
) -> RecordBatch | KafkaRecordBatch:
    """Decode the batch at ``pos``, whatever its layout (both have ``to_arrow()`` and ``records()``)."""
    h = read_header(buf, pos)
    if h.attributes & ARROW_BODY:
        return decode_arrow(buf, pos, check_crc=check_crc, max_uncompressed=max_uncompressed)
    return decode_kafka(buf, pos, check_crc=check_crc, max_uncompressed=max_uncompressed)


def decode_all(
    buf: bytes | bytearray | memoryview,
    *,
    check_crc: bool = True,
    max_uncompressed: int = MAX_UNCOMPRESSED_BYTES,
) -> list[RecordBatch | KafkaRecordBatch]:
    """Decode every whole batch in ``buf``, in log order, whatever its layout (a trailing partial batch is ignored)."""
    return [
        decode(buf, pos, check_crc=check_crc, max_uncompressed=max_uncompressed)
        for pos, _ in walk(buf, check_crc=check_crc)
    ]


# ---------------------------------------------------------------- runs of batches

#: Runs of uncompressed batches averaging fewer records than this take the
#: vectorised path; bigger batches are already cheap (and zero-copy) one by one.
FAST_PATH_MAX_AVG_RECORDS = 256
_H_POS, _H_BASE, _H_LEN, _H_ATTR, _H_BASE_TS, _H_MAX_TS, _H_COUNT = 0, 1, 2, 6, 8, 9, 13


def _header_array(walked: list) -> np.ndarray:
    """The walker's ``(position, header)`` pairs as an int64 array (position + the 13 fields)."""
    return np.array([(p, *h) for p, h in walked], dtype=np.int64).reshape(len(walked), 14)


def _ragged_index(lengths: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """For rows laid out in groups of ``lengths``: each row's group and its index within the group."""
    group = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    firsts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=firsts[1:])
    return group, np.arange(total, dtype=np.int64) - firsts[group]


def _validity(
    data: pa.Buffer,
    bm_start: np.ndarray,
    flagged: np.ndarray,
    n: np.ndarray,
    group: np.ndarray,
    local: np.ndarray,
) -> pa.Buffer | None:
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


def _binary_run(
    data: pa.Buffer,
    rec_off: np.ndarray,
    data_start: np.ndarray,
    lens: np.ndarray,
    group: np.ndarray,
    validity: pa.Buffer | None,
) -> pa.Array:
    """One BinaryArray for the run from each record's offset within its batch and each batch's data range."""
    total = int(lens.sum())
    if total > _INT32_MAX:
        raise OverflowError("run too large for one BinaryArray")
    cum = np.zeros(len(lens), dtype=np.int64)
    np.cumsum(lens[:-1], out=cum[1:])
    offsets = np.empty(len(group) + 1, dtype=np.int32)
    offsets[:-1] = rec_off + cum[group]
    offsets[-1] = total
    return pa.Array.from_buffers(
        pa.binary(), len(group), [validity, pa.py_buffer(offsets), _gather(data, data_start, lens)]
    )


def _offset_arrays(
    data: pa.Buffer, starts: np.ndarray, sizes: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def arrow_run_columns_py(
    data: pa.Buffer, hs: np.ndarray, keys: Any = None, values: Any = None
) -> tuple | None:
    """The columns of a run of uncompressed Arrow-body data batches without headers or value nulls,
    whose keys are all present or all null; None for any other run, and for one ``_run_to_arrow``
    refuses. The reference of the compiled ``_crecords.arrow_run_columns`` (a Spark task's common
    fetch: the values copied once, in one pass, instead of numpy's per-row index arrays and a join).

    Returns ``(key offsets or None (all keys null), key bytes, value offsets, value bytes, offsets,
    timestamps, timestamp types)``: int32 offsets from 0, int64 offsets and milliseconds, int32 types.
    A direct read (``format.direct``) gives ``keys`` and ``values``, the run's key and value bytes end
    to end, with ``data`` holding each batch up to its keys: they are the key and value bytes returned.
    """
    direct = values is not None
    attrs = hs[:, _H_ATTR]
    if len(hs) == 0 or ((attrs & ARROW_BODY) == 0).any():
        return None
    if ((attrs & (CODEC_MASK | HAS_HEADERS | HAS_VALUE_NULLS | CONTROL_BIT)) != 0).any():
        return None
    key_flag = (attrs & HAS_KEY_NULLS) != 0
    keyless = bool(key_flag[0])
    n = hs[:, _H_COUNT]
    body = hs[:, _H_POS] + HEADER_SIZE
    body_len = hs[:, _H_LEN] + LOG_OVERHEAD - HEADER_SIZE
    if (key_flag != keyless).any() or (n < 1).any() or (16 * n + 8 > body_len).any():
        return None
    if direct and (body + 16 * n + 8 + (n + 7) // 8 * keyless > len(data)).any():
        return None  # ``data`` holds each batch up to its keys: not all of them here
    try:
        offs, first, last = _offset_arrays(data, body + 8 * n, n + 1, 2)
    except CorruptRecord:
        return None
    key_len, value_len = last[:, 0], last[:, 1]
    bm = (n + 7) // 8 * keyless
    key_data = body + 16 * n + 8 + bm
    if (key_data + key_len + value_len != body + body_len).any():
        return None
    if direct and (
        int(key_len.sum()) != (len(memoryview(keys)) if keys is not None else 0)
        or int(value_len.sum()) != len(memoryview(values))
    ):
        return None  # ``data`` holds each batch up to its keys; the keys and values are the given ones
    if keyless and (
        key_len.any() or np.frombuffer(_gather(data, body + 16 * n + 8, bm), dtype=np.uint8).any()
    ):
        return None  # some key present: the general path's validity bitmap
    if int(key_len.sum()) > _INT32_MAX or int(value_len.sum()) > _INT32_MAX:
        return None
    total = int(n.sum())
    group, local = _ragged_index(n, total)

    def binary(which: int, starts: np.ndarray, lens: np.ndarray, given: Any) -> tuple[bytes, Any]:
        cum = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(lens[:-1], out=cum[1:])
        out = np.empty(total + 1, dtype=np.int32)
        out[:-1] = offs[first[which::2][group] + local] + cum[group]
        out[-1] = lens.sum()
        if direct:
            return out.tobytes(), b"" if given is None else given  # None: no key bytes (the compiled b"")
        return out.tobytes(), _gather(data, starts, lens).to_pybytes()

    key_off, key_bytes = (None, b"") if keyless else binary(0, key_data, key_len, keys)
    value_off, value_bytes = binary(1, key_data + key_len, value_len, values)
    log_append = (attrs & TIMESTAMP_TYPE_BIT) != 0
    deltas = np.frombuffer(_gather(data, body, 8 * n), dtype="<i8")
    ts = np.where(log_append[group], hs[:, _H_MAX_TS][group], deltas + hs[:, _H_BASE_TS][group])
    return (
        key_off,
        key_bytes,
        value_off,
        value_bytes,
        (hs[:, _H_BASE][group] + local).tobytes(),
        ts.astype(np.int64).tobytes(),
        log_append[group].astype(np.int32).tobytes(),
    )


def _columns_table(cols: tuple, total: int) -> pa.Table:
    """The ARROW_SCHEMA table of ``arrow_run_columns``' columns (no copy)."""
    key_off, key_bytes, value_off, value_bytes, offsets, ts, ts_type = (
        None if c is None else pa.py_buffer(c) for c in cols
    )
    if key_off is None:
        key = pa.nulls(total, pa.binary())
    else:
        key = pa.Array.from_buffers(pa.binary(), total, [None, key_off, key_bytes])
    value = pa.Array.from_buffers(pa.binary(), total, [None, value_off, value_bytes])
    out = [
        key,
        value,
        pa.Array.from_buffers(pa.int64(), total, [None, offsets]),
        pa.Array.from_buffers(_TS_MS, total, [None, ts]),
        pa.Array.from_buffers(pa.int32(), total, [None, ts_type]),
        _null_headers_col(total),
    ]
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(out, schema=ARROW_SCHEMA)])


#: the compiled columns of a common run (None: the general path below does every run)
_arrow_run_columns = None if crecords is None else crecords.arrow_run_columns


def _run_to_arrow(data: pa.Buffer, hs: np.ndarray) -> pa.Table:
    """One Arrow table for a run of uncompressed batches, with O(1) numpy/pyarrow calls.

    Raises CorruptRecord (or OverflowError past 2 GiB) when any batch is not
    exactly what the format allows; the caller then falls back to decoding
    batch by batch, which reports the precise error.
    """
    if _arrow_run_columns is not None:
        cols = _arrow_run_columns(data, hs)
        if cols is not None:
            return _columns_table(cols, int(hs[:, _H_COUNT].sum()))
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
    if (
        key_flag.all()
        and not key_len.any()
        and not np.frombuffer(_gather(data, bitmaps, bm), dtype=np.uint8).any()
    ):
        key = pa.nulls(total, pa.binary())  # no batch has a key (the common case): skip the bitmap work
    else:
        key = _binary_run(
            data,
            offs[first[0::2][group] + local],
            key_data,
            key_len,
            group,
            _validity(data, bitmaps, key_flag, n, group, local),
        )
    value = _binary_run(
        data,
        offs[first[1::2][group] + local],
        key_data + key_len,
        value_len,
        group,
        _validity(data, bitmaps + bm * key_flag, value_flag, n, group, local),
    )
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
        hvals = _binary_run(
            data,
            hoffs[hfirst[1::2][hgroup] + hlocal],
            hdata + hk_len[hsel],
            hv_len[hsel],
            hgroup,
            _validity(
                data,
                bitmaps[hsel] + bm[hsel] * key_flag[hsel] + bm[hsel] * value_flag[hsel],
                np.ones(len(hsel), dtype=bool),
                h_nh,
                hgroup,
                hlocal,
            ),
        )
        entries = pa.StructArray.from_arrays([hkeys, hvals], fields=list(HEADER_TYPE.value_type))
        empty = counts == 0
        headers = pa.ListArray.from_arrays(
            _np_col(pa.int32(), list_off),
            entries,
            type=HEADER_TYPE,
            mask=pa.array(empty) if empty.any() else None,
        )
    else:
        headers = _null_headers_col(total)
    cols = [
        key,
        value,
        _np_col(pa.int64(), offsets),
        _np_col(_TS_MS, ts),
        _np_col(pa.int32(), ts_type),
        headers,
    ]
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
        set_attributes_and_length(hdr, attrs & ~CODEC_MASK, HEADER_SIZE - LOG_OVERHEAD + len(body))
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
    include_control: bool = False,
    walked: list[tuple[int, BatchHeader]] | None = None,
) -> pa.Table:
    """Decode a run of batches of either layout into one Arrow table, in log order, trimmed to [start, end).

    ``walked``: ``walk(buf, check_crc=check_crc)`` when the caller has it already (a fetch
    looks at the headers before decoding; the walk is a third of a Spark read's Python CPU).

    A trailing partial batch is ignored, and so are control batches (transaction
    markers) unless ``include_control``. Runs of small Arrow-body batches are
    decoded together with a handful of numpy/pyarrow calls instead of a few
    dozen per batch; ``fast`` forces (True) or disables (False) that path,
    None decides by the average batch size. Consecutive Kafka-layout batches
    are decoded together too. The result is the same either way.
    """
    if walked is None:
        walked = walk(buf, check_crc=check_crc)
    if not walked:
        return ARROW_SCHEMA.empty_table()
    # the common fetch of Kafka clients' data (plain Kafka-layout batches): one compiled call
    plain = plain_run_table(buf, walked)
    if plain is not None:
        return trim(plain, start_offset, end_offset)
    hs = _header_array(walked)
    m = len(hs)
    attrs = hs[:, _H_ATTR]
    arrow = (attrs & ARROW_BODY) != 0
    codec = attrs & CODEC_MASK
    # 0 = Kafka layout, 1 = Arrow body eligible for the vectorised path, 2 = other Arrow body
    kind = np.where(arrow, np.where(codec <= compression.ZSTD, 1, 2), 0)
    cuts = np.flatnonzero(kind[1:] != kind[:-1]) + 1
    bounds = [0, *cuts.tolist(), m]
    tables: list[pa.Table] = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        run = hs[lo:hi]
        if kind[lo] == 0:
            tables.append(
                decode_kafka_run(
                    buf,
                    [h for _, h in walked[lo:hi]],
                    run[:, _H_POS].tolist(),
                    max_uncompressed=max_uncompressed,
                    include_control=include_control,
                )
            )
            continue
        use_fast = bool(kind[lo] == 1) and (
            fast
            if fast is not None
            else (hi - lo > 1 and run[:, _H_COUNT].sum() < FAST_PATH_MAX_AVG_RECORDS * (hi - lo))
        )
        if use_fast:
            try:
                if codec[lo:hi].any():
                    flat = _inflate_run(buf, run, max_uncompressed)
                    tables.append(_run_to_arrow(pa.py_buffer(flat), _header_array(walk(flat))))
                else:
                    tables.append(_run_to_arrow(pa.py_buffer(buf), run))
                continue
            except (CorruptRecord, OverflowError):
                pass  # decode one by one below: that names the bad batch precisely
        batches = [
            decode_arrow(buf, int(p), check_crc=False, max_uncompressed=max_uncompressed).to_arrow()
            for p in run[:, _H_POS]
        ]
        tables.append(pa.Table.from_batches(batches, schema=ARROW_SCHEMA))
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    return trim(table, start_offset, end_offset)


def trim(table: pa.Table, start_offset: int | None, end_offset: int | None) -> pa.Table:
    """Drop rows outside [start_offset, end_offset); offsets are sorted, so two searches do."""
    if table.num_rows == 0 or (start_offset is None and end_offset is None):
        return table
    offs = _int64_values(table.column("offset"))
    lo = 0 if start_offset is None else int(np.searchsorted(offs, start_offset, side="left"))
    hi = len(offs) if end_offset is None else int(np.searchsorted(offs, end_offset, side="left"))
    return table.slice(lo, max(0, hi - lo))


def _int64_values(col: pa.ChunkedArray) -> np.ndarray:
    """A null-free int64 column as one numpy array, read from its buffers: pyarrow's
    ``to_numpy`` imports pandas (~0.3 s of CPU in a fresh Spark worker, on the path to a
    stream's first micro-batch)."""
    if col.null_count:
        return col.to_numpy()
    parts = [
        np.frombuffer(c.buffers()[1], dtype=np.int64, count=len(c), offset=c.offset * 8) for c in col.chunks
    ]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
