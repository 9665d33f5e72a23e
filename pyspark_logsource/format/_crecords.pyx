# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled core's record builders: Kafka's varint records from Arrow columns, and rows out of Arrow.

* :func:`kafka_records` is ``kafka_encode._records_vectorised`` (a batch without
  headers: ``[len][attrs][tsDelta][offsetDelta][keyLen] key [valueLen] value [0]``
  per record) in one C pass over the columns' buffers, byte-identical;
* :func:`rows` is ``client.fetched.messages_from_arrow``'s row building: one
  instance of a 7-field tuple type (``Message``) per row, built in C.

As in ``_ckafka``, each returns None for input it does not take (another column
type, headers present), and the caller runs the pure-Python reference on it.
Every read is bounded by the Arrow buffers' own lengths, which are checked first.
"""

from cpython.bytearray cimport PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_FromLongLong
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy
from pyspark_logsource.format._cwire cimport read_int32, read_varint, unzigzag

import pyarrow as pa

cdef extern from "Python.h":
    ctypedef PyObject* (*allocfunc)(PyTypeObject*, Py_ssize_t)
    ctypedef struct TypeAlloc "PyTypeObject":
        allocfunc tp_alloc
    void PyObject_GC_UnTrack(void* op)
    bint PyObject_GC_IsTracked(object op)

_BINARY = (pa.binary(), pa.string())
cdef const uint8_t[::1] _EMPTY = bytearray(1)


cdef struct Col:
    const uint8_t* valid  # NULL: no nulls
    const int32_t* offs  # n + 1 offsets, already moved by the array's offset
    const uint8_t* data
    int64_t bit0  # the array's offset into its validity bitmap


cdef inline const uint8_t[::1] _view(buf):
    """The bytes of a pyarrow Buffer (or of an empty buffer for None)."""
    if buf is None or buf.size == 0:
        return _EMPTY
    return memoryview(buf).cast("B")


cdef object _col(arr, int64_t n, Col* c, list keep):
    """Fill ``c`` from a binary/string Array of ``n`` rows; False if the array is not one of those
    (or its buffers are shorter than it says)."""
    if arr.type not in _BINARY or len(arr) != n:
        return False
    bufs = arr.buffers()
    cdef int64_t off = arr.offset
    cdef const uint8_t[::1] v = _view(bufs[0])
    cdef const uint8_t[::1] o = _view(bufs[1])
    cdef const uint8_t[::1] d = _view(bufs[2])
    keep += [v, o, d]
    if o.shape[0] < 4 * (off + n + 1):
        return False
    c.offs = (<const int32_t*>&o[0]) + off
    if c.offs[0] < 0 or c.offs[n] < c.offs[0] or c.offs[n] > d.shape[0]:
        return False
    c.data = &d[0]
    c.bit0 = off
    c.valid = NULL
    if bufs[0] is not None and arr.null_count:
        if v.shape[0] * 8 < off + n:
            return False
        c.valid = &v[0]
    return True


cdef inline int64_t _len(Col* c, int64_t i) noexcept nogil:
    """Row i's length, -1 for null (as ``kafka_encode._records_vectorised``'s ``lens``)."""
    cdef int64_t b = c.bit0 + i
    if c.valid != NULL and not (c.valid[b >> 3] >> (b & 7)) & 1:
        return -1
    return c.offs[i + 1] - c.offs[i]


cdef inline int _vsize(int64_t v) noexcept nogil:
    cdef uint64_t u = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    cdef int n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


cdef inline uint8_t* _vput(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint64_t u = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    while u >= 0x80:
        p[0] = <uint8_t>((u & 0x7F) | 0x80)
        p += 1
        u >>= 7
    p[0] = <uint8_t>u
    return p + 1


def kafka_records(const int64_t[::1] ts_delta, key, value, off_delta=None):
    """The records section of a batch without headers (``_records_vectorised``'s bytes), or None."""
    cdef int64_t n = ts_delta.shape[0], i, kl, vl, body, total = 0
    cdef Col k, v
    cdef list keep = []
    if n == 0:  # no batch has no record (the reference gives one stray byte here)
        return None
    if not _col(key, n, &k, keep) or not _col(value, n, &v, keep):
        return None
    cdef const int64_t[::1] od
    cdef bint has_od = off_delta is not None
    if has_od:
        od = off_delta
        if od.shape[0] != n:
            return None
    # pass 1: the size
    for i in range(n):
        kl = _len(&k, i)
        vl = _len(&v, i)
        body = (
            1 + _vsize(ts_delta[i]) + _vsize(od[i] if has_od else i) + _vsize(kl) + (kl if kl > 0 else 0)
            + _vsize(vl) + (vl if vl > 0 else 0) + 1
        )
        total += _vsize(body) + body
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    # pass 2: the bytes
    with nogil:
        for i in range(n):
            kl = _len(&k, i)
            vl = _len(&v, i)
            body = (
                1 + _vsize(ts_delta[i]) + _vsize(od[i] if has_od else i) + _vsize(kl) + (kl if kl > 0 else 0)
                + _vsize(vl) + (vl if vl > 0 else 0) + 1
            )
            p = _vput(p, body)
            p[0] = 0  # attributes
            p = _vput(p + 1, ts_delta[i])
            p = _vput(p, od[i] if has_od else i)
            p = _vput(p, kl)
            if kl > 0:
                memcpy(p, k.data + k.offs[i], kl)
                p += kl
            p = _vput(p, vl)
            if vl > 0:
                memcpy(p, v.data + v.offs[i], vl)
                p += vl
            p[0] = 0  # no headers
            p += 1
    return out


cdef inline object _bytes_at(Col* c, int64_t i):
    cdef int64_t n = _len(c, i)
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(<const char*>c.data + c.offs[i], n)


cdef inline bint _untrack(topic, partition, no_headers):
    """Whether rows of these shared items may leave the collector (see ``_row``)."""
    return type(topic) is str and type(partition) is int and no_headers == () and not PyObject_GC_IsTracked(no_headers)


cdef inline int _row(
    PyTypeObject* tp, allocfunc alloc, topic, partition, off, tsv, key, val, no_headers, bint untrack, list out
) except -1:
    """Append ``cls(topic, partition, off, tsv, key, val, no_headers)`` to ``out``: ``tuple.__new__(cls, row)``
    without the row, its items set in place (``tp``: the tuple type ``cls``, ``alloc`` its tp_alloc)."""
    cdef PyObject* raw = alloc(tp, 7)
    if raw == NULL:
        raise MemoryError()
    msg = <object>raw
    Py_DECREF(msg)  # <object> took a reference of its own; the allocation's is the one msg keeps
    # PyTuple_SET_ITEM steals a reference: one more each
    Py_INCREF(topic)
    PyTuple_SET_ITEM(msg, 0, topic)
    Py_INCREF(partition)
    PyTuple_SET_ITEM(msg, 1, partition)
    Py_INCREF(off)
    PyTuple_SET_ITEM(msg, 2, off)
    Py_INCREF(tsv)
    PyTuple_SET_ITEM(msg, 3, tsv)
    Py_INCREF(key)
    PyTuple_SET_ITEM(msg, 4, key)
    Py_INCREF(val)
    PyTuple_SET_ITEM(msg, 5, val)
    Py_INCREF(no_headers)
    PyTuple_SET_ITEM(msg, 6, no_headers)
    # Only atomic items (str, int, bytes, None, the shared empty tuple): the row can be in no
    # reference cycle, so the collector need not walk it. CPython untracks such plain tuples
    # itself at its first collection, but not instances of tuple subclasses like Message: the
    # consumer's rows were walked by every collection while alive (most of the cost of
    # making them, measured).
    if untrack:
        PyObject_GC_UnTrack(<void*>msg)
    out.append(msg)
    return 0


def rows(t, cls, topic, partition, no_headers):
    """One ``cls(topic, partition, offset, timestamp, key, value, no_headers)`` per row of an
    ``ARROW_SCHEMA`` table, or None when a row has headers (or the columns are not as that schema has
    them): ``client.fetched.messages_from_arrow``'s result, built in C."""
    if not (isinstance(cls, type) and issubclass(cls, tuple)):
        return None
    cdef PyTypeObject* tp = <PyTypeObject*>cls
    cdef allocfunc alloc = (<TypeAlloc*>tp).tp_alloc
    if alloc == NULL:
        return None
    cdef list out = []
    cdef list keep
    cdef Col k, v
    cdef int64_t n, i, ooff, toff
    cdef const uint8_t[::1] ob, tb
    cdef const int64_t* offs
    cdef const int64_t* ts
    cdef bint untrack = _untrack(topic, partition, no_headers)
    for rb in t.to_batches():
        n = rb.num_rows
        if n == 0:
            continue
        h = rb.column(5)
        if h.null_count != n:
            return None
        keep = []
        if not _col(rb.column(0), n, &k, keep) or not _col(rb.column(1), n, &v, keep):
            return None
        oc, tc = rb.column(2), rb.column(3)
        if oc.null_count or tc.null_count or oc.type != pa.int64() or tc.type.bit_width != 64:
            return None
        ob = _view(oc.buffers()[1])
        tb = _view(tc.buffers()[1])
        ooff, toff = oc.offset, tc.offset
        if ob.shape[0] < 8 * (ooff + n) or tb.shape[0] < 8 * (toff + n):
            return None
        offs = (<const int64_t*>&ob[0]) + ooff
        ts = (<const int64_t*>&tb[0]) + toff
        for i in range(n):
            key = _bytes_at(&k, i)
            val = _bytes_at(&v, i)
            off = PyLong_FromLongLong(offs[i])
            if i == 0 or ts[i] != ts[i - 1]:  # records of one batch mostly share a millisecond: one int
                tsv = PyLong_FromLongLong(ts[i])
            _row(tp, alloc, topic, partition, off, tsv, key, val, no_headers, untrack, out)
    return out


def unfilled_bytearray(Py_ssize_t n):
    """``bytearray(n)`` without zero-filling it: a frame buffer every byte of which is received into
    before it is read (``protocol.connection.FrameDecoder``). The zero-fill of a 4 MB fetch answer was
    most of the receiving thread's own CPU for it (memset, ~0.4 ms)."""
    if n < 0:
        raise ValueError("negative size")
    return PyByteArray_FromStringAndSize(NULL, n)


# ---------------------------------------------------------------- poll(): Messages straight from Arrow bodies

# header.py's attribute bits and size (constants here: this module imports nothing of format/)
cdef enum:
    _ARROW_BODY = 0x1000
    _HAS_HEADERS = 0x400
    _HAS_KEY_NULLS = 0x100
    _HAS_VALUE_NULLS = 0x200
    _TIMESTAMP_TYPE_BIT = 0x08
    _CODEC_MASK = 0x07
    _CONTROL_BIT = 0x20
    _HEADER_SIZE = 61


cdef inline int32_t _le32(const uint8_t* p) noexcept nogil:
    # unaligned: the body follows a 61-byte header
    cdef int32_t v
    memcpy(&v, p, 4)
    return v


cdef inline int64_t _le64(const uint8_t* p) noexcept nogil:
    cdef int64_t v
    memcpy(&v, p, 8)
    return v


cdef bint _offsets_ok(const uint8_t* p, int64_t n1) noexcept nogil:
    """An offsets array of ``n1`` entries starts at 0 and never decreases (arrow_decode._check_offsets)."""
    cdef int64_t i
    cdef int32_t prev = _le32(p), cur
    if prev != 0:
        return False
    for i in range(1, n1):
        cur = _le32(p + 4 * i)
        if cur < prev:
            return False
        prev = cur
    return True


def batch_rows(data, Py_ssize_t pos, h):
    """The row descriptor of the uncompressed, header-less Arrow-body data batch at ``pos`` (``h``: its
    header, from ``walk``), or None: another kind of batch, or a body ``decode_arrow`` refuses (its
    Python path then raises the CorruptRecord). ``client.fetched.batch_rows_py`` is the reference.

    The descriptor: (pos, base offset, records, log-append time, timestamp base, timestamp deltas'
    position (-1: none), key and value validity bitmaps' positions (-1: none), key and value offsets'
    positions, key and value data positions, the batch's end), positions absolute in ``data``."""
    cdef int64_t attrs = h.attributes
    if not attrs & _ARROW_BODY or attrs & (_CODEC_MASK | _HAS_HEADERS | _CONTROL_BIT):
        return None
    cdef const uint8_t[::1] b = data
    cdef int64_t n = h.record_count, size = h.size, blen = b.shape[0]
    if n < 1 or pos < 0 or size < _HEADER_SIZE or pos + size > blen:
        return None
    cdef const uint8_t* body = &b[0] + pos + _HEADER_SIZE
    cdef int64_t total = size - _HEADER_SIZE, n1 = n + 1
    cdef int64_t p = 8 * n + 8 * n1, bitmap = (n + 7) // 8
    if p > total:
        return None
    cdef int64_t key_len = _le32(body + 8 * n + 4 * n), value_len = _le32(body + 8 * n + 8 * n + 4)
    cdef int64_t kvalid = -1, vvalid = -1
    if attrs & _HAS_KEY_NULLS:
        kvalid = p
        p += bitmap
    if attrs & _HAS_VALUE_NULLS:
        vvalid = p
        p += bitmap
    if key_len < 0 or value_len < 0 or p + key_len + value_len != total:
        return None
    if not _offsets_ok(body + 8 * n, n1) or not _offsets_ok(body + 8 * n + 4 * n1, n1):
        return None
    cdef int64_t at = pos + _HEADER_SIZE
    cdef bint log_append = attrs & _TIMESTAMP_TYPE_BIT
    return (
        pos,
        h.base_offset,
        n,
        log_append,
        h.max_timestamp if log_append else h.base_timestamp,
        -1 if log_append else at,
        -1 if kvalid < 0 else at + kvalid,
        -1 if vvalid < 0 else at + vvalid,
        at + 8 * n,
        at + 8 * n + 4 * n1,
        at + p,
        at + p + key_len,
        pos + size,
    )


cdef inline object _field(const uint8_t* b, int64_t valid, const uint8_t* offs, int64_t data, int64_t i, int64_t end):
    """Row i's key or value: None when its validity bit is clear, else its bytes."""
    if valid >= 0 and not (b[valid + (i >> 3)] >> (i & 7)) & 1:
        return None
    cdef int32_t o0 = _le32(offs + 4 * i), o1 = _le32(offs + 4 * i + 4)
    if o0 < 0 or o1 < o0 or data + o1 > end:  # checked by batch_rows: only changed bytes get here
        raise ValueError("the batch's bytes changed after batch_rows read them")
    return PyBytes_FromStringAndSize(<const char*>b + data + o0, o1 - o0)


def arrow_messages(data, tuple d not None, Py_ssize_t lo, Py_ssize_t hi, cls, topic, partition, no_headers, list out):
    """Append ``cls(topic, partition, offset, timestamp, key, value, no_headers)`` for rows ``[lo, hi)`` of
    the batch ``d`` (a ``batch_rows`` descriptor of ``data``) to ``out``: poll()'s Messages straight from
    the fetched bytes, as ``rows`` makes them from the batch's Arrow table. ``client.fetched.
    arrow_messages_py`` is the reference."""
    if not (isinstance(cls, type) and issubclass(cls, tuple)):
        raise TypeError("cls must be a tuple type")
    if len(d) != 13:  # its fields are read without bounds checks below
        raise ValueError("not a batch_rows descriptor")
    cdef PyTypeObject* tp = <PyTypeObject*>cls
    cdef allocfunc alloc = (<TypeAlloc*>tp).tp_alloc
    cdef const uint8_t[::1] buf = data
    cdef int64_t n = d[2], end = d[12], base = d[1], tbase = d[4], tpos = d[5]
    cdef int64_t kvalid = d[6], vvalid = d[7], koff = d[8], voff = d[9], kdata = d[10], vdata = d[11]
    if alloc == NULL or not 0 <= lo <= hi <= n or end > buf.shape[0] or min(koff, voff, kdata, vdata) < 0:
        raise ValueError("rows or descriptor out of the batch's bounds")
    if tpos >= 0 and tpos + 8 * n > end or koff + 4 * (n + 1) > end or voff + 4 * (n + 1) > end:
        raise ValueError("descriptor out of the batch's bounds")
    if kvalid >= 0 and kvalid + (n + 7) // 8 > end or vvalid >= 0 and vvalid + (n + 7) // 8 > end:
        raise ValueError("descriptor out of the batch's bounds")
    cdef const uint8_t* b = &buf[0]
    cdef int64_t i, t, prev_t = 0
    cdef bint untrack = _untrack(topic, partition, no_headers)
    tsv = None
    for i in range(lo, hi):
        key = _field(b, kvalid, b + koff, kdata, i, end)
        val = _field(b, vvalid, b + voff, vdata, i, end)
        off = PyLong_FromLongLong(base + i)
        # numpy's int64 addition in arrow_decode wraps around: so does this one
        t = tbase if tpos < 0 else <int64_t>(<uint64_t>_le64(b + tpos + 8 * i) + <uint64_t>tbase)
        if tsv is None or t != prev_t:  # records of one batch mostly share a millisecond: one int
            tsv = PyLong_FromLongLong(t)
            prev_t = t
        _row(tp, alloc, topic, partition, off, tsv, key, val, no_headers, untrack, out)


# ---------------------------------------------------------------- poll(): Messages straight from Kafka's layout


cdef int _record(
    const uint8_t* d, int64_t* p, int64_t e, int64_t j, int64_t* tsd, int64_t* kq, int64_t* kl, int64_t* vq,
    int64_t* vl
) noexcept nogil:
    """Read record ``j`` of a batch at ``p[0]`` (its records section ends at ``e``) as ``_ckafka.parse_records``
    accepts it with offset deltas 0..n-1, and no headers: 0 (``p[0]`` moved past it), or -1 (anything else,
    headers included: the table path decides)."""
    cdef int64_t q = p[0], rec_end, od, hc
    cdef uint64_t u
    if read_varint(d, &q, e, 5, &u) < 0 or u & 1:
        return -1
    rec_end = q + <int64_t>(u >> 1)
    if rec_end > e:
        return -1
    q += 1  # the attributes byte (unused in v2)
    if q > rec_end or read_varint(d, &q, rec_end, 10, &u) < 0:
        return -1
    tsd[0] = unzigzag(u)
    if read_int32(d, &q, rec_end, &od) < 0 or od != j:
        return -1
    if read_int32(d, &q, rec_end, kl) < 0 or kl[0] < -1:
        return -1
    kq[0] = q
    if kl[0] > 0:
        q += kl[0]
    if read_int32(d, &q, rec_end, vl) < 0 or vl[0] < -1:
        return -1
    vq[0] = q
    if vl[0] > 0:
        q += vl[0]
        if q > rec_end:
            return -1
    if read_int32(d, &q, rec_end, &hc) < 0 or hc != 0 or q != rec_end:
        return -1
    p[0] = rec_end
    return 0


def kafka_rows(data, Py_ssize_t pos, h):
    """The row descriptor of the uncompressed, non-control Kafka-layout batch at ``pos`` whose records carry
    no headers and offset deltas 0..n-1 (``h``: its header, from ``walk``), or None: another kind of batch,
    or records the table path refuses (it then raises the CorruptRecord) or gives headers.
    ``format.rows.kafka_rows_py`` is the reference.

    The descriptor: (pos, base offset, records, log-append time, timestamp base (the max timestamp under
    log-append time), the records section's start, the batch's end), positions absolute in ``data``."""
    cdef int64_t attrs = h.attributes
    if attrs & (_ARROW_BODY | _CODEC_MASK | _CONTROL_BIT):
        return None
    cdef const uint8_t[::1] b = data
    cdef int64_t n = h.record_count, size = h.size, blen = b.shape[0]
    if n < 1 or h.last_offset_delta != n - 1 or pos < 0 or size < _HEADER_SIZE or pos + size > blen:
        return None
    cdef const uint8_t* d = &b[0]
    cdef int64_t p = pos + _HEADER_SIZE, e = pos + size, j, tsd, kq, kl, vq, vl
    for j in range(n):
        if _record(d, &p, e, j, &tsd, &kq, &kl, &vq, &vl) < 0:
            return None
    if p != e:
        return None
    cdef bint log_append = attrs & _TIMESTAMP_TYPE_BIT
    return (pos, h.base_offset, n, log_append, h.max_timestamp if log_append else h.base_timestamp, pos + _HEADER_SIZE, e)


cdef inline object _bytes_or_none(const uint8_t* d, int64_t q, int64_t n):
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(<const char*>d + q, n)


def kafka_messages(data, tuple d not None, Py_ssize_t lo, Py_ssize_t hi, cls, topic, partition, no_headers, list out):
    """``arrow_messages`` for a ``kafka_rows`` descriptor: rows ``[lo, hi)`` of that Kafka-layout batch as
    ``cls(topic, partition, offset, timestamp, key, value, no_headers)``, appended to ``out``.
    ``client.fetched.kafka_messages_py`` is the reference."""
    if not (isinstance(cls, type) and issubclass(cls, tuple)):
        raise TypeError("cls must be a tuple type")
    if len(d) != 7:  # its fields are read without bounds checks below
        raise ValueError("not a kafka_rows descriptor")
    cdef PyTypeObject* tp = <PyTypeObject*>cls
    cdef allocfunc alloc = (<TypeAlloc*>tp).tp_alloc
    cdef const uint8_t[::1] buf = data
    cdef int64_t n = d[2], base = d[1], tbase = d[4], p = d[5], e = d[6]
    cdef bint log_append = d[3]
    if alloc == NULL or not 0 <= lo <= hi <= n or not 0 <= p <= e <= buf.shape[0]:
        raise ValueError("rows or descriptor out of the batch's bounds")
    cdef const uint8_t* b = &buf[0] if buf.shape[0] else NULL
    cdef int64_t j, t, prev_t = 0, tsd, kq, kl, vq, vl
    cdef bint untrack = _untrack(topic, partition, no_headers)
    cdef uint64_t u
    tsv = None
    for j in range(lo):  # skip the rows before lo: their lengths alone
        if read_varint(b, &p, e, 5, &u) < 0 or u & 1 or <int64_t>(u >> 1) > e - p:
            raise ValueError("the batch's bytes changed after kafka_rows read them")
        p += <int64_t>(u >> 1)
    for j in range(lo, hi):
        if _record(b, &p, e, j, &tsd, &kq, &kl, &vq, &vl) < 0:  # checked by kafka_rows: only changed bytes
            raise ValueError("the batch's bytes changed after kafka_rows read them")
        key = _bytes_or_none(b, kq, kl)
        val = _bytes_or_none(b, vq, vl)
        off = PyLong_FromLongLong(base + j)
        # the table path's int64 addition wraps around: so does this one
        t = tbase if log_append else <int64_t>(<uint64_t>tsd + <uint64_t>tbase)
        if tsv is None or t != prev_t:  # records of one batch mostly share a millisecond: one int
            tsv = PyLong_FromLongLong(t)
            prev_t = t
        _row(tp, alloc, topic, partition, off, tsv, key, val, no_headers, untrack, out)


# ---------------------------------------------------------------- a Spark task's fetch: one run's columns

cdef int64_t INT32_MAX = 2147483647


def arrow_run_columns(data, const int64_t[:, ::1] hs, keys=None, values=None):
    """The columns of a run of uncompressed Arrow-body data batches without headers or value nulls, whose
    keys are all present or all null, built in two C passes; None for any other run, and for one the
    general path (``runs._run_to_arrow``) refuses. ``runs.arrow_run_columns_py`` is the reference.

    ``hs``: ``runs._header_array(walk(data))`` (position, then the 13 header fields, per batch).
    Returns ``(key offsets or None (all keys null), key bytes, value offsets, value bytes, offsets,
    timestamps, timestamp types)`` as bytearrays: int32 offsets from 0, int64 offsets and
    milliseconds, int32 types. Values are copied once, end to end, straight out of ``data``.

    A direct read (``format.direct``) gives ``keys`` and ``values``: the run's key and value bytes end to
    end, read straight into them, with ``data`` holding each batch up to its keys only. They are then the
    key and value bytes returned, not copied (None when they do not hold exactly the batches' bytes).
    """
    cdef const uint8_t[::1] b = memoryview(data).cast("B")
    cdef Py_ssize_t m = hs.shape[0], i
    if m == 0 or hs.shape[1] < 14:
        return None
    cdef bint direct = values is not None
    cdef int64_t key_given = len(memoryview(keys).cast("B")) if direct and keys is not None else 0
    cdef int64_t val_given = len(memoryview(values).cast("B")) if direct else 0
    cdef const uint8_t* d = &b[0] if b.shape[0] else NULL
    cdef int64_t size = b.shape[0], n, attrs, body, body_len, key_len, val_len, bm, j
    cdef int64_t total = 0, key_total = 0, val_total = 0
    cdef int keyless = -1, kn
    cdef const uint8_t* ko
    # pass 1: every check the general path makes (its CorruptRecord cases give None here), and the sizes
    for i in range(m):
        n, attrs = hs[i, 13], hs[i, 6]
        body, body_len = hs[i, 0] + _HEADER_SIZE, hs[i, 2] + 12 - _HEADER_SIZE
        if not attrs & _ARROW_BODY or attrs & (_CODEC_MASK | _HAS_HEADERS | _HAS_VALUE_NULLS | _CONTROL_BIT):
            return None
        if n < 1 or n > INT32_MAX or body < _HEADER_SIZE or body_len < 0:
            return None
        kn = 1 if attrs & _HAS_KEY_NULLS else 0
        if keyless < 0:
            keyless = kn
        elif kn != keyless:
            return None
        bm = (n + 7) // 8 if kn else 0
        # in ``data``: the whole batch, or (direct) the batch up to its keys
        if 16 * n + 8 + bm > body_len or body + (16 * n + 8 + bm if direct else body_len) > size:
            return None
        ko = d + body + 8 * n
        if not _offsets_ok(ko, n + 1) or not _offsets_ok(ko + 4 * (n + 1), n + 1):
            return None
        key_len, val_len = _le32(ko + 4 * n), _le32(ko + 8 * n + 4)
        if 16 * n + 8 + bm + key_len + val_len != body_len:
            return None
        if kn:
            if key_len:
                return None
            for j in range(bm):
                if ko[8 * (n + 1) + j]:
                    return None  # some key present: the general path's validity bitmap
        total += n
        key_total += key_len
        val_total += val_len
    if key_total > INT32_MAX or val_total > INT32_MAX:
        return None
    if direct and (key_total != key_given or val_total != val_given):
        return None
    key_off = None if keyless else PyByteArray_FromStringAndSize(NULL, 4 * (total + 1))
    key_data = keys if direct and keys is not None else PyByteArray_FromStringAndSize(NULL, key_total)
    val_off = PyByteArray_FromStringAndSize(NULL, 4 * (total + 1))
    val_data = values if direct else PyByteArray_FromStringAndSize(NULL, val_total)
    offsets = PyByteArray_FromStringAndSize(NULL, 8 * total)
    ts = PyByteArray_FromStringAndSize(NULL, 8 * total)
    ts_type = PyByteArray_FromStringAndSize(NULL, 4 * total)
    cdef int32_t* kout = NULL if keyless else <int32_t*>(<char*>key_off)
    cdef uint8_t* kdata = NULL if direct else <uint8_t*>(<char*>key_data)
    cdef int32_t* vout = <int32_t*>(<char*>val_off)
    cdef uint8_t* vdata = NULL if direct else <uint8_t*>(<char*>val_data)
    cdef int64_t* oout = <int64_t*>(<char*>offsets)
    cdef int64_t* tout = <int64_t*>(<char*>ts)
    cdef int32_t* yout = <int32_t*>(<char*>ts_type)
    cdef int64_t r = 0, kcum = 0, vcum = 0, base, stamp
    cdef uint64_t base_ts
    cdef const uint8_t* vo
    cdef int32_t log_append
    cdef bint changed = False
    # pass 2: the columns (the numpy path's results, exactly: int64 sums wrap around as numpy's do)
    with nogil:
        for i in range(m):
            n, attrs, base = hs[i, 13], hs[i, 6], hs[i, 1]
            body = hs[i, 0] + _HEADER_SIZE
            ko = d + body + 8 * n
            vo = ko + 4 * (n + 1)
            key_len, val_len = _le32(ko + 4 * n), _le32(vo + 4 * n)
            bm = (n + 7) // 8 if keyless else 0
            # pass 1's bounds again, cheaply (offsets only): a writable buffer another thread changed in
            # between must not steer a copy past these columns or hand Arrow offsets it never checked
            if (
                not _offsets_ok(ko, n + 1) or not _offsets_ok(vo, n + 1)
                or 16 * n + 8 + bm + key_len + val_len != hs[i, 2] + 12 - _HEADER_SIZE
                or kcum + key_len > key_total or vcum + val_len > val_total
            ):
                changed = True
                break
            log_append = 1 if attrs & _TIMESTAMP_TYPE_BIT else 0
            stamp, base_ts = hs[i, 9], <uint64_t>hs[i, 8]
            for j in range(n):
                if not keyless:
                    kout[r + j] = <int32_t>(kcum + _le32(ko + 4 * j))
                vout[r + j] = <int32_t>(vcum + _le32(vo + 4 * j))
                oout[r + j] = <int64_t>(<uint64_t>base + <uint64_t>j)
                tout[r + j] = stamp if log_append else <int64_t>(<uint64_t>_le64(d + body + 8 * j) + base_ts)
                yout[r + j] = log_append
            if not direct:
                memcpy(kdata + kcum, vo + 4 * (n + 1) + bm, key_len)
                memcpy(vdata + vcum, vo + 4 * (n + 1) + bm + key_len, val_len)
            r += n
            kcum += key_len
            vcum += val_len
        if not keyless:
            kout[total] = <int32_t>kcum
        vout[total] = <int32_t>vcum
    if changed:
        raise BufferError("the fetch changed while its columns were built")
    return key_off, key_data, val_off, val_data, offsets, ts, ts_type
