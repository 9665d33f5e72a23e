"""Decoding Kafka's v2 record body (layout in ``format.kafka``): varint records into Arrow.

Parsing is sequential only where it must be: one tight Python loop follows
the record length varints (one iteration per record, the chain that
decides where each record starts); every field inside the records is then
parsed for all records at once with numpy. Headers, rare, take a Python
loop. Every error in a body is a CorruptRecord.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..errors import CorruptRecord
from . import compression
from ._speedups import ckafka, cvalidate
from .arrow_body import ARROW_SCHEMA, HEADER_TYPE, MAX_UNCOMPRESSED_BYTES, Record
from .arrow_decode import _gather, _np_col, _null_headers_col
from .header import (
    ARROW_BODY,
    CODEC_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    read_header,
    verify_crc,
)
from .varint import INT32_MAX, read_raw_varint, read_varint32s, read_varints

_PAD = 16  # zero bytes after the records, so that fixed-width gathers never leave the buffer
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
        return list(
            map(Record, t.column(2).to_pylist(), ts, t.column(0).to_pylist(), t.column(1).to_pylist(), hdrs)
        )


class _Parsed:
    """Field positions of every record of one or more records sections laid end to end."""

    __slots__ = (
        "data",
        "d",
        "n",
        "batch",
        "local",
        "ts_delta",
        "off_delta",
        "key_start",
        "key_len",
        "val_start",
        "val_len",
        "header_counts",
        "headers",
    )


def _sections(buf, headers: Sequence[BatchHeader], positions: Sequence[int], max_uncompressed: int) -> list:
    """The records sections of Kafka-layout batches, decompressed (bounded)."""
    mv = memoryview(buf)
    out = []
    for h, pos in zip(headers, positions, strict=True):
        raw = mv[pos + HEADER_SIZE : pos + h.size]
        codec = h.attributes & CODEC_MASK
        out.append(
            raw if codec == compression.NONE else compression.kafka_decompress(codec, raw, max_uncompressed)
        )
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
                        raw, p = read_raw_varint(data, p)
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

    _, ln = read_varints(d, begin, 5)
    q = begin + ln + 1  # skip the record attributes byte (unused in v2)
    check(q, "attributes")
    ts_delta, ln = read_varints(d, q, 10)
    q = q + ln
    check(q, "timestamp delta")
    off_delta, ln = read_varint32s(d, q, "offset delta")
    if (
        lods is None
        or len(lods) != len(cnt)
        or all(lod == c - 1 for lod, c in zip(lods, counts, strict=False))
    ):
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
    key_len, ln = read_varint32s(d, q, "key length")
    key_start = q + ln
    q = key_start + np.maximum(key_len, 0)
    if (key_len < -1).any():
        raise CorruptRecord("negative record key length")
    check(q, "key")
    val_len, ln = read_varint32s(d, q, "value length")
    val_start = q + ln
    q = val_start + np.maximum(val_len, 0)
    if (val_len < -1).any():
        raise CorruptRecord("negative record value length")
    check(q, "value")
    hcount, ln = read_varint32s(d, q, "header count")
    q = q + ln
    if (hcount < 0).any():
        raise CorruptRecord("negative record header count")
    check(q, "header count")
    with_headers = np.flatnonzero(hcount)
    if ((q != end) & (hcount == 0)).any():
        raise CorruptRecord("trailing bytes in a record")
    out = _Parsed()
    out.data, out.d, out.n, out.batch, out.local = data, d, n, batch, local
    out.ts_delta, out.key_start, out.key_len, out.val_start, out.val_len = (
        ts_delta,
        key_start,
        key_len,
        val_start,
        val_len,
    )
    out.off_delta = off_delta
    out.header_counts = hcount
    out.headers = (
        _parse_headers(
            data, q[with_headers].tolist(), end[with_headers].tolist(), hcount[with_headers].tolist()
        )
        if len(with_headers)
        else None
    )
    return out


def _parse_headers(
    data: bytes, starts: list[int], ends: list[int], counts: list[int]
) -> list[tuple[int, int, int, int]]:
    """(key start, key length, value start, value length or -1) of every header, in order (a Python loop)."""
    out = []
    for p, e, c in zip(starts, ends, counts, strict=True):
        if 2 * c > e - p:
            raise CorruptRecord(f"record claims {c} headers, more than its bytes can hold")
        try:
            for _ in range(c):
                raw, p = read_raw_varint(data, p)
                klen = (raw >> 1) ^ -(raw & 1)
                if klen < 0:
                    raise CorruptRecord("negative header key length")
                ks = p
                raw, p = read_raw_varint(data, p + klen)
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
    if offsets[-1] > INT32_MAX:
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
    return _headers_from_spans(data, p.n, p.header_counts, np.array(p.headers, dtype=np.int64).reshape(-1, 4))


def _headers_from_spans(data: pa.Buffer, n: int, header_counts: np.ndarray, spans: np.ndarray) -> pa.Array:
    """The headers column from (key start, key length, value start, value length) rows into ``data``."""
    keys = _binary(data, spans[:, 0], spans[:, 1], pa.string())
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid:
        raise CorruptRecord("record header keys are not valid UTF-8") from None
    entries = pa.StructArray.from_arrays(
        [keys, _binary(data, spans[:, 2], spans[:, 3])], fields=list(HEADER_TYPE.value_type)
    )
    list_off = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(header_counts, out=list_off[1:])
    empty = header_counts == 0
    return pa.ListArray.from_arrays(
        _np_col(pa.int32(), list_off),
        entries,
        type=HEADER_TYPE,
        mask=pa.array(empty) if empty.any() else None,
    )


def _parse_compiled(
    buf,
    headers: Sequence[BatchHeader],
    positions: Sequence[int],
    max_uncompressed: int,
    consecutive: bool | None = None,
) -> tuple[tuple | None, object]:
    """``ckafka.parse_records`` over the batches' records sections: (its result, or None if it refuses
    the records; the buffer its positions index). ``consecutive``: offset deltas must be 0..n-1 (the
    produce path: ``_parse`` without ``lods``); None: as the headers' last offset deltas say (a fetch).

    Uncompressed sections are parsed where they are in ``buf`` (no slices, no joined copy).
    """
    # position, size, record_count, last_offset_delta, base_offset, base/max timestamp, attributes
    # (BatchHeader fields by index: this runs once per batch of a fetch)
    hs = np.array(
        [(p, h[1], h[12], h[6], h[0], h[7], h[8], h[5]) for h, p in zip(headers, positions, strict=True)],
        dtype=np.int64,
    ).reshape(-1, 8)
    if (hs[:, 7] & CODEC_MASK).any():
        sections = _sections(buf, headers, positions, max_uncompressed)
        data = b"".join(sections)
        lens = np.array([len(s) for s in sections], dtype=np.int64)
        ends = np.cumsum(lens)
        starts = ends - lens
    else:
        data = buf
        starts = hs[:, 0] + HEADER_SIZE
        ends = hs[:, 0] + hs[:, 1] + LOG_OVERHEAD
    counts, lods = hs[:, 2].copy(), hs[:, 3].copy()
    if consecutive is None:
        consecutive = bool((lods == counts - 1).all())
    r = ckafka.parse_records(
        data,
        starts,
        ends,
        counts,
        lods,
        consecutive,
        hs[:, 4].copy(),
        hs[:, 5].copy(),
        hs[:, 6].copy(),
        ((hs[:, 7] & TIMESTAMP_TYPE_BIT) != 0).astype(np.uint8),
    )
    return r, data


def _table_compiled(
    buf, headers: Sequence[BatchHeader], positions: Sequence[int], max_uncompressed: int
) -> pa.Table | None:
    """``_table(_parse(_sections(...)))`` by the compiled core (``_ckafka.parse_records``), or None if
    it refuses the records (the caller then runs the reference, which raises the precise error)."""
    r, data = _parse_compiled(buf, headers, positions, max_uncompressed)
    return None if r is None else _compiled_table(r, data)


def plain_run_table(buf, walked: list) -> pa.Table | None:
    """A walked run (``header.walk``'s pairs, CRCs checked as the caller wants) of uncompressed,
    non-control Kafka-layout batches as one ``ARROW_SCHEMA`` table, by one compiled call
    (``_ckafka.parse_walked``) and the Arrow wrapping: ``decode_kafka_run``'s table for such a run.
    None when the compiled core is off, a batch is not such a batch, or the parse refuses the records
    (the caller takes the general path, which raises the precise error)."""
    if ckafka is None:
        return None
    r = ckafka.parse_walked(buf, walked)
    return None if r is None else _compiled_table(r, buf)


def _compiled_table(r: tuple, data) -> pa.Table:
    """The table of a ``parse_records`` result (``data``: the buffer its header spans index)."""
    n, koff, kbytes, kvalid, voff, vbytes, vvalid, offsets, ts, tstype, hcounts, spans = r

    def binary(off: np.ndarray, body: bytearray, valid: np.ndarray | None) -> pa.Array:
        return pa.Array.from_buffers(
            pa.binary(),
            n,
            [None if valid is None else pa.py_buffer(valid), pa.py_buffer(off), pa.py_buffer(body)],
        )

    cols = [
        binary(koff, kbytes, kvalid),
        binary(voff, vbytes, vvalid),
        _np_col(pa.int64(), offsets),
        _np_col(_TS_MS, ts),
        _np_col(pa.int32(), tstype),
        _null_headers_col(n) if spans is None else _headers_from_spans(pa.py_buffer(data), n, hcounts, spans),
    ]
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(cols, schema=ARROW_SCHEMA)])


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
    if ckafka is not None:
        table = _table_compiled(buf, headers, positions, max_uncompressed)
        if table is not None:
            return table
    # the reference (and, when the compiled parse refused the input, the precise CorruptRecord)
    sections = _sections(buf, headers, positions, max_uncompressed)
    return _table(
        _parse(sections, [h.record_count for h in headers], [h.last_offset_delta for h in headers]), headers
    )


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
    # an uncompressed batch (a producer's one-message batch) is checked in C with no allocation; it
    # refuses a batch past the buffer's end, which the checks below then report (runs per request: the
    # header by index, 5: attributes, 1: batch length, 12: record count)
    if cvalidate is not None and header is not None and not header[5] & (ARROW_BODY | CODEC_MASK):
        null_key = cvalidate.check_records(batch, pos, header[1] + LOG_OVERHEAD, header[12])
        if null_key is not None:
            return null_key
    h = read_header(batch, pos) if header is None else header
    if h.attributes & ARROW_BODY:
        raise CorruptRecord("validate_kafka_records needs a Kafka-layout batch")
    if len(batch) - pos < h.size:
        raise CorruptRecord(f"truncated batch at offset {h.base_offset}")
    if cvalidate is not None and not h.attributes & CODEC_MASK:
        null_key = cvalidate.check_records(batch, pos, h.size, h.record_count)
        if null_key is not None:
            return null_key
    if ckafka is not None:
        # the compiled parse accepts exactly what _parse accepts, in C: the reference's Python loop over
        # the record lengths was most of the broker's produce-path CPU for large batches (vs_kafka.py)
        r, _data = _parse_compiled(batch, [h], [pos], max_uncompressed, consecutive=True)
        if r is not None:
            return r[3] is not None  # the keys' validity bitmap: None when no key is null
    # the reference (and, when the compiled parse refused the records, the precise CorruptRecord)
    p = _parse(_sections(batch, [h], [pos], max_uncompressed), [h.record_count])
    return bool((p.key_len < 0).any())


def null_key_indexes(
    batch: bytes | bytearray | memoryview,
    pos: int = 0,
    header: BatchHeader | None = None,
    *,
    max_uncompressed: int = MAX_UNCOMPRESSED_BYTES,
) -> list[int]:
    """Indexes (within the batch) of a Kafka-layout batch's records whose key is null: the
    ``batch_index`` of Kafka's per-record produce errors (KIP-467) on a compacted topic."""
    h = read_header(batch, pos) if header is None else header
    if h.attributes & ARROW_BODY:
        raise CorruptRecord("null_key_indexes needs a Kafka-layout batch")
    p = _parse(_sections(batch, [h], [pos], max_uncompressed), [h.record_count])
    return np.flatnonzero(p.key_len < 0).tolist()


# ---------------------------------------------------------------- encoding
