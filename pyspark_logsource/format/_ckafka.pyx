# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled core of ``format/``: the batch header walk and Kafka's varint record decode.

The pure-Python modules (``header.walk``, ``kafka_decode._parse``) are the
reference. Each function here handles the well-formed case and returns None at
the first thing it does not accept; the caller then runs the Python code on the
same input, which raises the precise typed error (or, for the walk's ``errors``
list and partial tails, does what it documents). So both paths give the same
results and the same errors by construction, and the tests
(tests/test_format_compiled.py) check that this code accepts exactly what the
Python code accepts. Every read is bounded by the buffer (or the record) it
belongs to.
"""

from cpython.buffer cimport PyBUF_READ
from cpython.bytearray cimport PyByteArray_FromStringAndSize, PyByteArray_Resize
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset
from pyspark_logsource.format._cbody cimport fold_crc32c
from pyspark_logsource.format._cwire cimport be16, be32, be64, legal_high, read_int32, read_varint, unzigzag

import numpy as np

cdef enum:
    HEADER_SIZE = 61
    LOG_OVERHEAD = 12
    CRC_START = 21
    MIN_LENGTH = 49  # HEADER_SIZE - LOG_OVERHEAD
    MAGIC = 2
    ARROW_BODY = 0x1000
    KAFKA_ATTRIBUTES = 0x7F
    CODEC_MASK = 0x07
    TIMESTAMP_TYPE_BIT = 0x08
    CONTROL_BIT = 0x20
    MAX_CODEC = 4

cdef int64_t INT32_MAX = 2147483647
cdef int64_t INT64_MAX = 0x7FFFFFFFFFFFFFFF

_tuple_new = tuple.__new__

ctypedef uint32_t (*crc_fn_t)(uint32_t, const uint8_t*, size_t) noexcept nogil
#: the crc32c package's hardware CRC-32C (``_crc32c_hw_adler``), set by _speedups when it checks out;
#: NULL: the walk calls the Python-level crc32c function handed to it
cdef crc_fn_t _crc_c = NULL


def set_crc32c_function(size_t address):
    """Use the C function at ``address`` (``uint32_t f(uint32_t crc, const uint8_t*, size_t)``, the
    crc32c package's convention: pre- and post-inverted by the caller) for the walk's CRCs; 0: none."""
    global _crc_c
    _crc_c = <crc_fn_t>address


def crc32c_direct(const uint8_t[::1] data):
    """CRC-32C of ``data`` through the C function set by :func:`set_crc32c_function` (None if unset)."""
    if _crc_c == NULL:
        return None
    return _crc_c(0xFFFFFFFF, &data[0] if data.shape[0] else NULL, data.shape[0]) ^ 0xFFFFFFFF


def walk(buf, header_type, crc_fn, bint check_crc, int64_t limit, bint strict):
    """``header.walk(buf, check_crc=, max_size=limit, strict=)`` without ``errors``, or None.

    None means: something is not as a well-formed run of batches has it (a bad
    header, a size over ``limit``, a CRC mismatch, a truncated tail under
    ``strict``); the caller runs the Python walk, which raises or stops as it
    documents.
    """
    cdef const uint8_t[::1] view
    try:
        view = buf
    except (TypeError, ValueError, BufferError):  # not a contiguous byte buffer: the Python walk decides
        return None
    if view.shape[0] == 0:
        return []
    cdef const uint8_t* d = &view[0]
    cdef int64_t end = view.shape[0]
    cdef const uint8_t* p
    cdef int64_t pos = 0, size, base, lod
    cdef int32_t length, count
    cdef int attrs, magic
    cdef uint64_t crc
    cdef uint32_t got
    out = []
    while end - pos >= HEADER_SIZE:
        p = d + pos
        base = be64(p)
        length = be32(p + 8)
        magic = <signed char>p[16]
        attrs = be16(p + 21)
        lod = be32(p + 23)
        count = be32(p + 57)
        if (
            (lod != count - 1 and (strict or lod < count - 1 or attrs & ARROW_BODY))
            or count < 1
            or magic != MAGIC
            or length < MIN_LENGTH
            or not legal_high(attrs)
            or base > INT64_MAX - lod
        ):
            return None
        size = <int64_t>length + LOG_OVERHEAD
        if size > limit:
            return None
        if pos + size > end:
            if strict:
                return None
            return out
        crc = (<uint64_t>p[17] << 24) | (<uint64_t>p[18] << 16) | (<uint64_t>p[19] << 8) | <uint64_t>p[20]
        if check_crc:
            if _crc_c != NULL:
                # the log append's folding CRC where _cbody has it in use (about twice the crc32q rate:
                # a Spark task's fetch walk is ~15% of its read CPU), else the crc32c package's
                if not fold_crc32c(p + CRC_START, size - CRC_START, &got):
                    got = _crc_c(0xFFFFFFFF, p + CRC_START, size - CRC_START) ^ 0xFFFFFFFF
                if got != crc:
                    return None
            elif crc_fn(PyMemoryView_FromMemory(<char*>(p + CRC_START), size - CRC_START, PyBUF_READ)) != crc:
                return None
        if strict and (attrs & CODEC_MASK) > MAX_CODEC:
            return None
        t = (
            base,
            length,
            be32(p + 12),
            magic,
            crc,
            attrs,
            lod,
            be64(p + 27),
            be64(p + 35),
            be64(p + 43),
            be16(p + 51),
            be32(p + 53),
            count,
        )
        out.append((pos, _tuple_new(header_type, t)))
        pos += size
    if strict and pos != end:
        return None
    return out


def parse_records(
    data,
    const int64_t[::1] section_starts,
    const int64_t[::1] section_ends,
    const int64_t[::1] counts,
    const int64_t[::1] lods,
    bint consecutive,
    const int64_t[::1] base,
    const int64_t[::1] base_ts,
    const int64_t[::1] max_ts,
    const uint8_t[::1] log_append,
):
    """Every record of the records sections ``data[section_starts[s]:section_ends[s]]``, as Arrow-ready
    buffers, or None.

    Accepts exactly what ``kafka_decode._parse`` accepts (``consecutive``: offset
    deltas 0..n-1; otherwise increasing within [0, lods[b]]). Returns
    ``(n, key_offsets, key_bytes, key_valid, value_offsets, value_bytes, value_valid,
    offsets, timestamps, timestamp_types, header_counts, header_spans)``: int32
    offsets, the bytes gathered end to end, a little-endian validity bitmap or None
    when nothing is null; ``header_counts`` and ``header_spans`` ((key start, key
    length, value start, value length) per header, positions in ``data``) are None
    when no record has headers. None when anything is malformed or a column would
    pass 2 GiB.
    """
    cdef const uint8_t[::1] view
    try:
        view = data
    except (TypeError, ValueError, BufferError):
        return None
    cdef const uint8_t* d = &view[0] if view.shape[0] else NULL
    cdef Py_ssize_t nsec = counts.shape[0], s
    cdef int64_t n = 0, i, j, c
    for s in range(nsec):
        if counts[s] < 0:
            return None
        n += counts[s]
    if n > view.shape[0]:  # every record takes at least one byte
        return None
    if (
        section_starts.shape[0] != nsec
        or section_ends.shape[0] != nsec
        or lods.shape[0] != nsec
        or base.shape[0] != nsec
        or base_ts.shape[0] != nsec
        or max_ts.shape[0] != nsec
        or log_append.shape[0] != nsec
    ):
        return None
    for s in range(section_starts.shape[0]):
        if section_starts[s] < 0 or section_starts[s] > section_ends[s] or section_ends[s] > view.shape[0]:
            return None
    key_start_a = np.empty(n, dtype=np.int64)
    key_len_a = np.empty(n, dtype=np.int64)
    # the values are copied as they are parsed (the record is in cache then; a second pass over a
    # multi-MB fetch read it from memory again): into a buffer as large as the sections, which hold
    # every value, shrunk to the values' size at the end
    cdef int64_t cap = 0
    for s in range(nsec):
        cap += section_ends[s] - section_starts[s]
    val_body = PyByteArray_FromStringAndSize(NULL, cap)
    cdef uint8_t* vout = <uint8_t*>(<char*>val_body) if cap else NULL
    val_off_a = np.empty(n + 1, dtype=np.int32)
    val_valid_a = np.zeros((n + 7) // 8, dtype=np.uint8)
    cdef int32_t[::1] val_off = val_off_a
    cdef uint8_t[::1] val_valid = val_valid_a
    offsets_a = np.empty(n, dtype=np.int64)
    ts_a = np.empty(n, dtype=np.int64)
    tstype_a = np.empty(n, dtype=np.int32)
    hcount_a = np.zeros(n, dtype=np.int32)
    hpos_a = np.zeros(n, dtype=np.int64)
    hend_a = np.zeros(n, dtype=np.int64)
    cdef int64_t[::1] key_start = key_start_a, key_len = key_len_a
    cdef int64_t[::1] offsets = offsets_a, ts = ts_a, hpos = hpos_a, hend = hend_a
    cdef int32_t[::1] tstype = tstype_a, hcount = hcount_a
    cdef int64_t p = 0, e, rec_end, q, prev, kl, vl, hc, total_headers = 0
    cdef int64_t key_total = 0, val_total = 0, key_nulls = 0, val_nulls = 0, od
    cdef uint64_t u
    cdef int64_t v
    i = 0
    for s in range(nsec):
        p = section_starts[s]
        e = section_ends[s]
        c = counts[s]
        prev = -1
        for j in range(c):
            # the record length: where the next record starts
            q = p
            if read_varint(d, &q, e, 5, &u) < 0 or u & 1:
                return None
            rec_end = q + <int64_t>(u >> 1)
            if rec_end > e:
                return None
            q += 1  # the attributes byte (unused in v2)
            if q > rec_end:
                return None
            if read_varint(d, &q, rec_end, 10, &u) < 0:
                return None
            if log_append[s]:
                ts[i] = max_ts[s]
                tstype[i] = 1
            else:
                ts[i] = <int64_t>(<uint64_t>unzigzag(u) + <uint64_t>base_ts[s])
                tstype[i] = 0
            if read_int32(d, &q, rec_end, &od) < 0:
                return None
            if consecutive:
                if od != j:
                    return None
            elif od <= prev or od > lods[s]:
                return None
            prev = od
            offsets[i] = <int64_t>(<uint64_t>base[s] + <uint64_t>od)
            if read_int32(d, &q, rec_end, &kl) < 0 or kl < -1:
                return None
            key_start[i] = q
            key_len[i] = kl
            if kl >= 0:
                q += kl
                key_total += kl
            else:
                key_nulls += 1
            if read_int32(d, &q, rec_end, &vl) < 0 or vl < -1:
                return None
            if vl >= 0:
                if q + vl > rec_end or val_total + vl > cap or val_total + vl > INT32_MAX:
                    return None
                if vl:
                    memcpy(vout + val_total, d + q, vl)
                q += vl
                val_total += vl
                val_valid[i >> 3] |= 1 << (i & 7)
            else:
                val_nulls += 1
            val_off[i + 1] = <int32_t>val_total
            if read_int32(d, &q, rec_end, &hc) < 0 or hc < 0:
                return None
            if hc == 0:
                if q != rec_end:
                    return None
            else:
                if 2 * hc > rec_end - q:
                    return None
                hcount[i] = <int32_t>hc
                hpos[i] = q
                hend[i] = rec_end
                total_headers += hc
            p = rec_end
            i += 1
        if p != e:
            return None
    if key_total > INT32_MAX or val_total > INT32_MAX:
        return None
    spans = None
    if total_headers:
        spans = _header_spans(d, n, hcount, hpos, hend, total_headers)
        if spans is None:
            return None
    key_off, key_bytes, key_valid = _gather(d, n, key_start, key_len, key_total, key_nulls)
    PyByteArray_Resize(val_body, val_total)
    val_off_a[0] = 0
    return (
        n,
        key_off,
        key_bytes,
        key_valid,
        val_off_a,
        val_body,
        val_valid_a if val_nulls else None,
        offsets_a,
        ts_a,
        tstype_a,
        hcount_a if total_headers else None,
        spans,
    )


def parse_walked(data, list walked):
    """:func:`parse_records` over a walked run (``(position, BatchHeader)`` pairs of ``header.walk``) of
    uncompressed, non-control Kafka-layout batches, the header fields read here in C: what
    ``kafka_decode._parse_compiled(data, headers, positions)`` gives for such a run, without its numpy
    glue per fetch. None when a batch is not such a batch (the caller takes the general path), or when
    ``parse_records`` refuses the records."""
    cdef Py_ssize_t m = len(walked), b
    if m == 0:
        return None
    starts_a = np.empty(m, dtype=np.int64)
    ends_a = np.empty(m, dtype=np.int64)
    counts_a = np.empty(m, dtype=np.int64)
    lods_a = np.empty(m, dtype=np.int64)
    base_a = np.empty(m, dtype=np.int64)
    base_ts_a = np.empty(m, dtype=np.int64)
    max_ts_a = np.empty(m, dtype=np.int64)
    la_a = np.empty(m, dtype=np.uint8)
    cdef int64_t[::1] starts = starts_a, ends = ends_a, counts = counts_a, lods = lods_a
    cdef int64_t[::1] base = base_a, base_ts = base_ts_a, max_ts = max_ts_a
    cdef uint8_t[::1] la = la_a
    cdef bint consecutive = True
    cdef int64_t pos, attrs
    for b in range(m):
        item = walked[b]
        pos = item[0]
        h = item[1]
        attrs = h[5]
        if attrs & (ARROW_BODY | CODEC_MASK | CONTROL_BIT):
            return None
        starts[b] = pos + HEADER_SIZE
        ends[b] = pos + <int64_t>h[1] + LOG_OVERHEAD
        counts[b] = h[12]
        lods[b] = h[6]
        base[b] = h[0]
        base_ts[b] = h[7]
        max_ts[b] = h[8]
        la[b] = (attrs & TIMESTAMP_TYPE_BIT) != 0
        if lods[b] != counts[b] - 1:
            consecutive = False
    return parse_records(data, starts_a, ends_a, counts_a, lods_a, consecutive, base_a, base_ts_a, max_ts_a, la_a)


cdef object _header_spans(
    const uint8_t* d,
    int64_t n,
    int32_t[::1] hcount,
    int64_t[::1] hpos,
    int64_t[::1] hend,
    int64_t total,
):
    """(key start, key length, value start, value length) of every header, or None (``_parse_headers``)."""
    spans_a = np.empty((total, 4), dtype=np.int64)
    cdef int64_t[:, ::1] spans = spans_a
    cdef int64_t i, k, q, rec_end, klen, vlen, h = 0
    cdef uint64_t u
    for i in range(n):
        if hcount[i] == 0:
            continue
        q = hpos[i]
        rec_end = hend[i]
        for k in range(hcount[i]):
            if read_varint(d, &q, rec_end, 5, &u) < 0:
                return None
            klen = unzigzag(u)
            if klen < 0 or q + klen >= rec_end:
                return None
            spans[h, 0] = q
            spans[h, 1] = klen
            q += klen
            if read_varint(d, &q, rec_end, 5, &u) < 0:
                return None
            vlen = unzigzag(u)
            if vlen < -1:
                return None
            spans[h, 2] = q
            spans[h, 3] = vlen
            if vlen > 0:
                q += vlen
            if q > rec_end:
                return None
            h += 1
        if q != rec_end:
            return None
    return spans_a


cdef tuple _gather(
    const uint8_t* d, int64_t n, int64_t[::1] start, int64_t[::1] length, int64_t total, int64_t nulls
):
    """int32 offsets, the bytes end to end, and a validity bitmap (None without nulls)."""
    off_a = np.empty(n + 1, dtype=np.int32)
    body = PyByteArray_FromStringAndSize(NULL, total)  # not zero-filled: every byte is copied in below
    cdef int32_t[::1] off = off_a
    cdef uint8_t* out = <uint8_t*>(<char*>body) if total else NULL
    cdef uint8_t[::1] valid
    cdef int64_t i, ln, o = 0
    valid_a = None
    if nulls:
        valid_a = np.zeros((n + 7) // 8, dtype=np.uint8)
        valid = valid_a
    off[0] = 0
    for i in range(n):
        ln = length[i]
        if ln > 0:
            memcpy(out + o, d + start[i], ln)
            o += ln
        if nulls and ln >= 0:
            valid[i >> 3] |= 1 << (i & 7)
        off[i + 1] = <int32_t>o
    return off_a, body, valid_a
