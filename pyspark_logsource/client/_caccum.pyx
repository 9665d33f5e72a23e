# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled producer accumulator (issue 25): per-partition record buffers in C, and send() into them.

* :class:`RecordBuffer` holds one open batch's records as C arrays (value and key
  bytes back to back, their end offsets, timestamps, null flags): ``send()``
  copies the record's bytes in and keeps no Python object per record.
  :meth:`RecordBuffer.encode` writes the batch from those arrays, byte-identical
  to ``format.arrow_body.encode_records`` over the same records (the reference;
  ``tests/test_producer_compiled.py`` checks both).
* :class:`AccumulatorCore` is the C base of the compiled accumulator
  (``accumulator.CompiledAccumulator``): the memory counter (``used`` against
  ``buffer_memory``), ``batch_size`` and ``closed`` as C fields, read by
  :func:`fast_send` without an attribute lookup.
* :func:`fast_send` makes what ``Producer.send`` is bound to on an instance: a
  bytes (or None) value, no headers, no custom partitioner, and the open batch of
  its partition (the topic's sticky one, the key's hash, or the given partition)
  with memory left: under the accumulator's lock, append the record to that
  batch's buffer, account the memory, close a full batch, return a
  ``RecordFuture``. Anything else calls the Python method (a new batch, blocking
  for memory, headers, conversions, every error), which shares the buffers.
* :class:`StickyPartitioner` is ``partitioner.StickyPartitioner`` (the
  reference: same partitions for the same ``rng`` and calls) with its state in
  C reach: :func:`fast_send` asks it and moves it through C methods, and nothing
  else touches its dict.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLong, PyLong_AsLongLongAndOverflow, PyLong_FromLongLong
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset
from cpython.float cimport PyFloat_FromDouble
from cpython.tuple cimport PyTuple_GET_ITEM
from posix.time cimport CLOCK_MONOTONIC, CLOCK_REALTIME, clock_gettime, timespec

from pyspark_logsource.format._cbody cimport batch_crc32c
from pyspark_logsource.format._cwire cimport BATCH_CRC_START, le32, le64, put_batch_crc, put_producer_header

import random as _random

from pyspark_logsource.client.partitioner import sticky_spread as _sticky_spread
from pyspark_logsource.errors import InvalidRequest, MessageTooLarge
from pyspark_logsource.format.compression import compress as _compress

cdef extern from "Python.h":
    ctypedef PyObject* (*allocfunc)(PyTypeObject*, Py_ssize_t)
    ctypedef struct TypeAlloc "PyTypeObject":
        allocfunc tp_alloc

cdef extern from "Python.h":
    # a __slots__ member's descriptor: where the slot sits in the instance (descrobject.h, structmember.h)
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    int T_OBJECT_EX

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void*)
    void PyObject_GC_Track(void*)
    int PyObject_GC_IsTracked(PyObject*)
    int PyObject_IS_GC(PyObject*)

cdef extern from "pythread.h":
    ctypedef void* PyThread_type_lock
    int PyThread_acquire_lock(PyThread_type_lock, int) nogil
    void PyThread_release_lock(PyThread_type_lock) nogil

cdef extern from *:
    """
    /* _thread.lock's object (Modules/_threadmodule.c, CPython 3.8-3.12); fast_send checks the layout
       against the lock's own methods before it uses it, and calls the methods otherwise */
    typedef struct {
        PyObject_HEAD
        PyThread_type_lock lock_lock;
        PyObject *in_weakreflist;
        char locked;
    } ls_lockobject;
    """
    ctypedef struct ls_lockobject:
        PyThread_type_lock lock_lock
        char locked

# header.py's attribute bits and sizes (the record-batch layout is format/'s: these only mirror it)
cdef enum:
    HEADER_SIZE = 61
    HAS_KEY_NULLS = 0x100
    HAS_VALUE_NULLS = 0x200
    ARROW_BODY = 0x1000
    INT32_MAX = 2147483647
    MAX_UNCOMPRESSED = 1 << 30
    VALUE_NULL = 1  # RecordBuffer.flags
    KEY_NULL = 2






cdef int _grow(void** p, Py_ssize_t* cap, Py_ssize_t need, Py_ssize_t item) except -1:
    cdef Py_ssize_t c = cap[0] if cap[0] else 256
    while c < need:
        c *= 2
    cdef void* q = PyMem_Realloc(p[0], c * item)
    if q == NULL:
        raise MemoryError()
    p[0] = q
    cap[0] = c
    return 0


cdef class RecordBuffer:
    """One open batch's records in C arrays (no Python object per record)."""

    cdef char* vdata
    cdef char* kdata
    cdef int64_t* vend  # end offset of each value in vdata
    cdef int64_t* kend
    cdef int64_t* ts
    cdef uint8_t* flags  # VALUE_NULL, KEY_NULL
    cdef Py_ssize_t n, cap, vlen, vcap, klen, kcap
    cdef Py_ssize_t nkeys, nvnull  # records with a key; records with a null value
    cdef int64_t maxts

    def __cinit__(self, Py_ssize_t capacity=0):
        """``capacity``: bytes of values to make room for at once (the batch size: one allocation)."""
        if capacity > 0:
            _grow(<void**>&self.vdata, &self.vcap, capacity, 1)

    def __dealloc__(self):
        PyMem_Free(self.vdata)
        PyMem_Free(self.kdata)
        PyMem_Free(self.vend)
        PyMem_Free(self.kend)
        PyMem_Free(self.ts)
        PyMem_Free(self.flags)

    def __len__(self):
        return self.n

    def clear(self) -> None:
        """Drop the records, keep the memory (a recycled buffer: no allocation, pages already in use)."""
        self.n = self.vlen = self.klen = self.nkeys = self.nvnull = 0

    cdef int _grow_records(self) except -1:
        cdef Py_ssize_t cap = 2 * self.cap if self.cap else 16
        cdef void* q
        q = PyMem_Realloc(self.vend, cap * sizeof(int64_t))
        if q == NULL:
            raise MemoryError()
        self.vend = <int64_t*>q
        q = PyMem_Realloc(self.kend, cap * sizeof(int64_t))
        if q == NULL:
            raise MemoryError()
        self.kend = <int64_t*>q
        q = PyMem_Realloc(self.ts, cap * sizeof(int64_t))
        if q == NULL:
            raise MemoryError()
        self.ts = <int64_t*>q
        q = PyMem_Realloc(self.flags, cap)
        if q == NULL:
            raise MemoryError()
        self.flags = <uint8_t*>q
        self.cap = cap
        return 0

    cdef Py_ssize_t append(self, object value, object key, int64_t ts) except -1:
        """Copy one record in (value and key: bytes or None); return its index."""
        cdef Py_ssize_t i = self.n, vl = 0, kl = 0
        cdef uint8_t fl = 0
        if i == self.cap:
            self._grow_records()
        if value is None:
            fl = VALUE_NULL
            self.nvnull += 1
        else:
            vl = PyBytes_GET_SIZE(value)
            if self.vlen + vl > self.vcap:
                _grow(<void**>&self.vdata, &self.vcap, self.vlen + vl, 1)
            memcpy(self.vdata + self.vlen, PyBytes_AS_STRING(value), vl)
            self.vlen += vl
        if key is None:
            fl |= KEY_NULL
        else:
            kl = PyBytes_GET_SIZE(key)
            if self.klen + kl > self.kcap:
                _grow(<void**>&self.kdata, &self.kcap, self.klen + kl, 1)
            memcpy(self.kdata + self.klen, PyBytes_AS_STRING(key), kl)
            self.klen += kl
            self.nkeys += 1
        self.vend[i] = self.vlen
        self.kend[i] = self.klen
        self.ts[i] = ts
        self.flags[i] = fl
        if i == 0 or ts > self.maxts:
            self.maxts = ts
        self.n = i + 1
        return i

    def add(self, value, key, ts) -> int:
        """Append one record (value and key: bytes or None; ts: int64 ms); return its index.

        Raises OverflowError for a timestamp outside int64 (the caller keeps such a
        record in Python lists, where the encode reports it as the reference does)."""
        if value is not None and type(value) is not bytes:
            raise TypeError("value must be bytes or None")
        if key is not None and type(key) is not bytes:
            raise TypeError("key must be bytes or None")
        cdef int64_t t = ts
        return self.append(value, key, t)

    def to_lists(self) -> tuple:
        """The records as ``(values, keys or None when no record has a key, timestamps)`` lists."""
        cdef Py_ssize_t i, vs = 0, ks = 0
        values, keys, stamps = [], ([] if self.nkeys else None), []
        for i in range(self.n):
            if self.flags[i] & VALUE_NULL:
                values.append(None)
            else:
                values.append(PyBytes_FromStringAndSize(self.vdata + vs, self.vend[i] - vs))
            vs = self.vend[i]
            if keys is not None:
                if self.flags[i] & KEY_NULL:
                    keys.append(None)
                else:
                    keys.append(PyBytes_FromStringAndSize(self.kdata + ks, self.kend[i] - ks))
                ks = self.kend[i]
            stamps.append(self.ts[i])
        return values, keys, stamps

    def encode(self, int codec, int64_t producer_id, int producer_epoch, int base_sequence) -> bytearray:
        """The batch of these records, as ``encode_records(values, keys, timestamps, None, ...)`` writes it."""
        cdef Py_ssize_t n = self.n, i, bm = (self.n + 7) // 8, body, pos
        if n == 0:
            raise InvalidRequest("a record batch needs at least one record")
        cdef bint has_keys = self.nkeys > 0
        cdef bint key_nulls = self.nkeys < n  # no key at all: zero offsets, an all-null bitmap
        cdef bint value_nulls = self.nvnull > 0
        if has_keys and self.klen > INT32_MAX:
            raise MessageTooLarge("keys of one batch exceed 2 GiB")
        if self.vlen > INT32_MAX:
            raise MessageTooLarge("values of one batch exceed 2 GiB")
        body = 8 * n + 8 * (n + 1) + (bm if key_nulls else 0) + (bm if value_nulls else 0)
        body += self.klen + self.vlen
        if body > MAX_UNCOMPRESSED:
            raise MessageTooLarge(f"batch body of {body} bytes exceeds {MAX_UNCOMPRESSED}")
        cdef bint plain = codec == 0
        out = PyByteArray_FromStringAndSize(NULL, (HEADER_SIZE if plain else 0) + body)
        cdef char* p = PyByteArray_AS_STRING(out)
        pos = HEADER_SIZE if plain else 0
        if plain:
            memset(p, 0, HEADER_SIZE)
        cdef int64_t base = self.ts[0]
        for i in range(n):  # timestamp deltas (int64 arithmetic wraps, as numpy's in encode())
            le64(<uint8_t*>(p + pos), <int64_t>(<uint64_t>self.ts[i] - <uint64_t>base))
            pos += 8
        le32(<uint8_t*>(p + pos), 0)
        pos += 4
        for i in range(n):
            le32(<uint8_t*>(p + pos), self.kend[i])
            pos += 4
        le32(<uint8_t*>(p + pos), 0)
        pos += 4
        for i in range(n):
            le32(<uint8_t*>(p + pos), self.vend[i])
            pos += 4
        if key_nulls:
            memset(p + pos, 0, bm)
            for i in range(n):
                if not self.flags[i] & KEY_NULL:
                    p[pos + (i >> 3)] |= <char>(1 << (i & 7))
            pos += bm
        if value_nulls:
            memset(p + pos, 0, bm)
            for i in range(n):
                if not self.flags[i] & VALUE_NULL:
                    p[pos + (i >> 3)] |= <char>(1 << (i & 7))
            pos += bm
        if self.klen:
            memcpy(p + pos, self.kdata, self.klen)
            pos += self.klen
        if self.vlen:
            memcpy(p + pos, self.vdata, self.vlen)
            pos += self.vlen
        cdef int attrs = ARROW_BODY | codec
        if key_nulls:
            attrs |= HAS_KEY_NULLS
        if value_nulls:
            attrs |= HAS_VALUE_NULLS
        if not plain:
            packed = _compress(codec, bytes(out))
            size = bytearray(4)
            le32(<uint8_t*>(PyByteArray_AS_STRING(size)), body)
            out = bytearray().join([bytes(HEADER_SIZE), size, packed])
        if len(out) - 12 > INT32_MAX:
            raise MessageTooLarge("batch exceeds 2 GiB")
        return _put_header(out, attrs, n, base, self.maxts, producer_id, producer_epoch, base_sequence)


cdef object _put_header(
    bytearray out, int attrs, Py_ssize_t n, int64_t base_ts, int64_t max_ts, int64_t producer_id,
    int producer_epoch, int base_sequence
):
    """format.header.write_producer_header in C (base offset 0, no leader epoch): the 61 bytes of the
    batch header into ``out[:61]``, the CRC last; the same InvalidRequest for an epoch outside int16."""
    if not -32768 <= producer_epoch <= 32767:
        raise InvalidRequest(f"batch header field out of range: producer epoch {producer_epoch}")
    cdef uint8_t* p = <uint8_t*>PyByteArray_AS_STRING(out)
    put_producer_header(p, len(out) - 12, attrs, n, base_ts, max_ts, producer_id, producer_epoch, base_sequence)
    put_batch_crc(p, batch_crc32c(p + BATCH_CRC_START, len(out) - BATCH_CRC_START))  # a C call
    return out


include "_csticky.pxi"


cdef class AccumulatorCore:
    """The compiled accumulator's C fields: the memory counter and the limits fast_send reads.

    ``accumulator.CompiledAccumulator`` derives from this and the pure-Python
    RecordAccumulator, whose code reads and writes these as attributes.
    """

    cdef public long long used
    cdef public long long buffer_memory
    cdef public long long batch_size
    cdef public bint closed
    # add_alone's batches made in C (bind_alone): the batch type, its slots by offset, the slots' defaults
    cdef type _batch_type
    cdef allocfunc _balloc
    cdef Py_ssize_t _o_topic, _o_partition, _o_tp, _o_values, _o_timestamps, _o_size, _o_created
    cdef Py_ssize_t _o_count, _o_closed, _o_buf
    cdef Py_ssize_t* _def_off
    cdef tuple _def_val
    cdef int64_t _batch_overhead
    cdef list _pool
    cdef dict _incomplete
    cdef dict _ready
    cdef object _deque

    def __dealloc__(self):
        PyMem_Free(self._def_off)

    def bind_alone(self, type batch_type, int64_t batch_overhead, list pool, deque_type) -> None:
        """Make :meth:`add_alone`'s batches in C: ``batch_type`` (ProducerBatch) allocated with its slots set
        by offset, each to what ``batch_type(topic, partition, now)`` sets it to, then as
        ``RecordAccumulator.add_alone`` (the reference) sets them. Records' buffers come from ``pool``.
        Raises TypeError if a slot's default is not an immutable value (then sharing it is wrong)."""
        tmpl = batch_type("", 0, 0.0)
        per_batch = ("topic", "partition", "tp", "values", "timestamps", "size", "created", "record_count",
                     "closed", "buf")
        offsets, values = [], []
        names = [n for c in batch_type.__mro__ for n in c.__dict__.get("__slots__", ())]
        for name in names:
            if name in per_batch:
                continue
            v = getattr(tmpl, name)
            if v is not None and type(v) not in (bool, int, float, str):
                raise TypeError(f"{batch_type.__name__}.{name} defaults to a {type(v).__name__}: not shared")
            offsets.append(_slot_offset(batch_type, name))
            values.append(v)
        cdef Py_ssize_t* off = <Py_ssize_t*>PyMem_Realloc(self._def_off, max(1, len(offsets)) * sizeof(Py_ssize_t))
        if off == NULL:
            raise MemoryError()
        self._def_off = off
        for i, o in enumerate(offsets):
            off[i] = o
        self._def_val = tuple(values)
        self._o_topic, self._o_partition = _slot_offset(batch_type, "topic"), _slot_offset(batch_type, "partition")
        self._o_tp, self._o_values = _slot_offset(batch_type, "tp"), _slot_offset(batch_type, "values")
        self._o_timestamps, self._o_size = _slot_offset(batch_type, "timestamps"), _slot_offset(batch_type, "size")
        self._o_created, self._o_count = _slot_offset(batch_type, "created"), _slot_offset(batch_type, "record_count")
        self._o_closed, self._o_buf = _slot_offset(batch_type, "closed"), _slot_offset(batch_type, "buf")
        self._balloc = (<TypeAlloc*>(<PyTypeObject*>batch_type)).tp_alloc
        self._batch_overhead = batch_overhead
        self._pool = pool
        this = <object>self  # the Python accumulator's attributes
        self._incomplete = this.incomplete
        self._ready = this.ready
        self._deque = deque_type
        self._batch_type = batch_type

    def add_alone(self, topic, partition, value, int64_t timestamp, int64_t size):
        """``RecordAccumulator.add_alone`` (the reference) in C, the record in a C buffer: queue a record that
        fills a batch on its own; lock held, no open batch for the partition."""
        return self._alone(topic, partition, value, timestamp, size)

    cdef object _alone(self, topic, partition, value, int64_t ts, int64_t size):
        if self._batch_type is None:
            raise TypeError("bind_alone() was not called")
        if value is not None and type(value) is not bytes:
            raise TypeError("value must be bytes or None")
        cdef list pool = self._pool
        cdef RecordBuffer buf = pool.pop() if pool else RecordBuffer(min(self.batch_size, 1 << 16))
        buf.append(value, None, ts)
        cdef timespec now
        clock_gettime(CLOCK_MONOTONIC, &now)  # time.monotonic()'s clock
        cdef PyObject* raw = self._balloc(<PyTypeObject*>self._batch_type, 0)
        if raw == NULL:
            raise MemoryError()
        b = <object>raw
        Py_DECREF(b)  # <object> took its own reference
        cdef Py_ssize_t i
        cdef tuple defaults = self._def_val
        for i in range(len(defaults)):
            _set_slot(b, self._def_off[i], <object>PyTuple_GET_ITEM(defaults, i))
        tp = (topic, partition)
        _set_slot(b, self._o_topic, topic)
        _set_slot(b, self._o_partition, partition)
        _set_slot(b, self._o_tp, tp)
        _set_slot(b, self._o_values, None)
        _set_slot(b, self._o_timestamps, None)
        _set_slot(b, self._o_size, PyLong_FromLongLong(self._batch_overhead + size))
        _set_slot(b, self._o_created, PyFloat_FromDouble(<double>now.tv_sec + now.tv_nsec * 1e-9))
        _set_slot(b, self._o_count, 1)
        _set_slot(b, self._o_closed, True)
        _set_slot(b, self._o_buf, buf)
        # Untracked by the cyclic GC, as CPython untracks a tuple of atomic values: the batch holds strings,
        # numbers, bytes and its C buffer, none of which can refer back to it, so it is in no reference cycle,
        # and the thousands a fast send() queues are not walked by every collection. The batch type tracks it
        # again (track()) before it takes what could refer back (its future, an error).
        PyObject_GC_UnTrack(<void*>b)
        self._incomplete[b] = None
        q = self._ready.get(tp)
        if q is None:
            q = self._ready[tp] = self._deque()
        q.append(b)
        this = <object>self
        if this.sender_idle:
            this.wakeup.notify()
        return b


def track(obj) -> None:
    """Have the cyclic GC track ``obj`` again (a batch that add_alone left untracked, before it takes a value
    that may refer back to it); nothing when it is tracked already or of a type the GC does not track."""
    if PyObject_IS_GC(<PyObject*>obj) and not PyObject_GC_IsTracked(<PyObject*>obj):
        PyObject_GC_Track(<void*>obj)


cdef Py_ssize_t _slot_offset(type cls, str name) except -1:
    """Where the ``__slots__`` member ``name`` of ``cls`` sits in an instance (read and written in C below)."""
    d = getattr(cls, name)
    if type(d).__name__ != "member_descriptor" or (<PyMemberDescrObject*>d).d_member.type != T_OBJECT_EX:
        raise TypeError(f"{cls.__name__}.{name} is not a __slots__ member")
    return (<PyMemberDescrObject*>d).d_member.offset


cdef inline PyObject* _slot(object o, Py_ssize_t offset) noexcept:
    """The slot's value, borrowed (NULL when unset)."""
    return (<PyObject**>((<char*><PyObject*>o) + offset))[0]


cdef inline void _set_slot(object o, Py_ssize_t offset, object value) noexcept:
    cdef PyObject** at = <PyObject**>((<char*><PyObject*>o) + offset)
    cdef PyObject* old = at[0]
    Py_INCREF(value)
    at[0] = <PyObject*>value
    Py_XDECREF(old)


cdef bint _direct_lock_ok(lock) except -1:
    """Whether ``lock`` (a _thread.lock) has the C layout fast_send takes it by: checked with its own methods."""
    import _thread
    import sys

    if type(lock) is not _thread.LockType or not (3, 8) <= sys.version_info[:2] <= (3, 12):
        return False
    cdef ls_lockobject* lk = <ls_lockobject*>lock
    if lock.locked() or lk.locked != 0:
        return False
    if not PyThread_acquire_lock(lk.lock_lock, 0):
        return False
    lk.locked = 1
    ok = lock.locked() and not lock.acquire(False)
    lk.locked = 0
    PyThread_release_lock(lk.lock_lock)
    return ok and not lock.locked() and lock.acquire(False) and (lock.release() is None)


cdef object _new_future(
    allocfunc alloc, type future_type, Py_ssize_t f_batch, Py_ssize_t f_index, object batch, Py_ssize_t idx
):
    """``RecordFuture(batch, idx)`` without the call of its __init__."""
    cdef PyObject* raw = alloc(<PyTypeObject*>future_type, 0)
    if raw == NULL:
        raise MemoryError()
    f = <object>raw
    Py_DECREF(f)  # <object> took its own reference
    _set_slot(f, f_batch, batch)
    _set_slot(f, f_index, idx)
    return f


def fast_send(
    producer, slow, type future_type, type batch_type, int64_t record_overhead, int64_t batch_overhead, crc32c
):
    """``Producer.send`` for one producer (its accumulator an AccumulatorCore): the fast path in C,
    else ``slow(producer, topic, value, key, headers, partition, timestamp_ms)``. A function, not an
    object with ``__call__``: Cython's functions take the vectorcall protocol (no argument tuple per call)."""
    acc = producer._acc
    cdef AccumulatorCore core = acc
    lock = acc.lock
    acquire = lock.acquire
    release = lock.release
    cdef ls_lockobject* lk = <ls_lockobject*>lock if _direct_lock_ok(lock) else NULL
    cdef dict sticky = acc.sticky
    cdef dict open_batches = acc.open
    cdef dict nparts = producer._nparts
    close_batch = acc.close_batch
    new_batch = acc.new_batch
    refuse = acc.refuse
    cdef bint never_block = acc.max_block <= 0  # max_block_ms=0: a full buffer refuses here, in C
    sticky_partitioner = producer._sticky
    # the compiled partitioner's partition() and on_new_batch() in C (the record-per-batch path calls both
    # per record); another one's by its methods
    cdef StickyPartitioner sp = (
        sticky_partitioner if type(sticky_partitioner) is StickyPartitioner else None
    )
    cdef allocfunc alloc = (<TypeAlloc*>(<PyTypeObject*>future_type)).tp_alloc
    cdef int64_t overhead = record_overhead
    cdef bint has_partitioner = producer._partitioner is not None  # set once, by Producer.__init__
    # the slots read and written per record, by offset (no attribute lookup); batches of another type go
    # to the Python method
    cdef Py_ssize_t f_batch = _slot_offset(future_type, "_batch"), f_index = _slot_offset(future_type, "_index")
    cdef Py_ssize_t b_buf = _slot_offset(batch_type, "buf"), b_size = _slot_offset(batch_type, "size")
    cdef Py_ssize_t b_closed = _slot_offset(batch_type, "closed")
    # the last keyed or explicit-partition lookup: its topic (by identity), partition count, partition and
    # open batch (valid while that batch is not closed: a partition has one open batch at a time)
    last_topic = None
    last_batch = None
    cdef int64_t last_n = 0, last_p = -1

    def send(topic, value, key=None, headers=None, partition=None, timestamp_ms=None):
        """Queue one record; return a future resolving to ``(partition, offset)``."""
        cdef int64_t size, ts, bsize, n = 0, p = 0
        cdef Py_ssize_t idx
        cdef int overflow = 0
        cdef timespec now
        cdef PyObject* raw
        cdef RecordBuffer buf
        cdef bint keyless_sticky, direct
        if (
            headers is not None
            or (value is not None and type(value) is not bytes)
            or (key is not None and type(key) is not bytes)
            or has_partitioner
        ):
            return slow(producer, topic, value, key, headers, partition, timestamp_ms)
        size = overhead
        if value is not None:
            size += PyBytes_GET_SIZE(value)
        if key is not None:
            size += PyBytes_GET_SIZE(key)
        if timestamp_ms is None:
            clock_gettime(CLOCK_REALTIME, &now)  # time.time_ns()'s clock
            ts = (<int64_t>now.tv_sec) * 1000 + now.tv_nsec // 1000000
        elif type(timestamp_ms) is int:
            ts = PyLong_AsLongLongAndOverflow(timestamp_ms, &overflow)
            if overflow:
                return slow(producer, topic, value, key, headers, partition, timestamp_ms)
        else:
            return slow(producer, topic, value, key, headers, partition, timestamp_ms)
        nonlocal last_topic, last_batch, last_n, last_p
        keyless_sticky = partition is None and key is None
        if not keyless_sticky:
            if topic is last_topic:
                n = last_n
            else:
                n_obj = nparts.get(topic)
                if n_obj is None:
                    return slow(producer, topic, value, key, headers, partition, timestamp_ms)
                n = n_obj
            if partition is not None:
                if type(partition) is not int:
                    return slow(producer, topic, value, key, headers, partition, timestamp_ms)
                p = PyLong_AsLongLongAndOverflow(partition, &overflow)
                if overflow or not 0 <= p < n:  # the Python method raises the typed error
                    return slow(producer, topic, value, key, headers, partition, timestamp_ms)
            else:
                p = (<int64_t>crc32c(key) & 0x7FFFFFFF) % n
        # the accumulator's lock: taken in C when it is free, else by its method (which waits without the GIL)
        direct = lk != NULL and PyThread_acquire_lock(lk.lock_lock, 0)
        if direct:
            lk.locked = 1
        else:
            acquire()
        try:
            if not core.closed:
                if (
                    never_block
                    and core.used
                    and core.used + size > core.buffer_memory >= size
                    and (not keyless_sticky or topic in nparts)
                ):
                    refuse()  # BufferFull, as the Python method raises it after its conversions
                if keyless_sticky:
                    b = sticky.get(topic)
                    if b is None and core.used + size <= core.buffer_memory:
                        # the topic's next sticky batch, opened here as the Python method opens it (a batch
                        # with headers is the method's)
                        n_obj = nparts.get(topic)
                        if n_obj is not None:
                            if sp is not None:
                                p_obj = sp.current(topic, n_obj)
                            else:
                                p_obj = sticky_partitioner.partition(topic, n_obj)
                            b = open_batches.get((topic, p_obj))
                            if b is None and size + batch_overhead >= core.batch_size:
                                # a record that fills a batch alone (batch size 1: a request per record):
                                # queued closed, no open batch (Producer._alone)
                                core.used += size
                                b = core._alone(topic, p_obj, value, ts, size)
                                if sp is not None:
                                    sp.moved(topic, p_obj, n_obj)
                                else:
                                    sticky_partitioner.on_new_batch(topic, p_obj, n_obj)
                                return _new_future(alloc, future_type, f_batch, f_index, b, 0)
                            if b is None:
                                b = new_batch(topic, p_obj)
                            if b.buf is not None:
                                sticky[topic] = b
                elif topic is last_topic and p == last_p and last_batch is not None and _slot(
                    last_batch, b_closed
                ) == <PyObject*>False:
                    b = last_batch
                else:
                    b = open_batches.get((topic, p))
                    last_topic, last_n, last_p, last_batch = topic, n, p, b
                if b is not None and type(b) is batch_type and core.used + size <= core.buffer_memory:
                    raw = _slot(b, b_buf)
                    raw_size = _slot(b, b_size)
                    if raw != NULL and raw != <PyObject*>None and raw_size != NULL:
                        buf = <RecordBuffer>raw
                        idx = buf.append(value, key, ts)
                        core.used += size
                        bsize = PyLong_AsLongLong(<object>raw_size) + size
                        _set_slot(b, b_size, PyLong_FromLongLong(bsize))
                        if bsize >= core.batch_size:
                            close_batch(b)
                            if keyless_sticky:
                                if sp is not None:
                                    sp.moved(topic, b.partition, nparts[topic])
                                else:
                                    sticky_partitioner.on_new_batch(topic, b.partition, nparts[topic])
                        return _new_future(alloc, future_type, f_batch, f_index, b, idx)
        finally:
            if direct:
                lk.locked = 0
                PyThread_release_lock(lk.lock_lock)
            else:
                release()
        return slow(producer, topic, value, key, headers, partition, timestamp_ms)

    return send
