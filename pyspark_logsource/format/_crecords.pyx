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
    cdef PyObject* raw
    cdef bint untrack = (
        type(topic) is str and type(partition) is int and no_headers == () and not PyObject_GC_IsTracked(no_headers)
    )
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
            raw = alloc(tp, 7)  # tuple.__new__(cls, row) without the row: items set below
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
    return out


def unfilled_bytearray(Py_ssize_t n):
    """``bytearray(n)`` without zero-filling it: a frame buffer every byte of which is received into
    before it is read (``protocol.connection.FrameDecoder``). The zero-fill of a 4 MB fetch answer was
    most of the receiving thread's own CPU for it (memset, ~0.4 ms)."""
    if n < 0:
        raise ValueError("negative size")
    return PyByteArray_FromStringAndSize(NULL, n)
