# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled core's ``Producer.send()`` fast path (issue 25): the keyless record in C.

:class:`FastSend` is what ``Producer.send`` is bound to on an instance when the
extension is built. It does what the Python method's first branch does (a bytes
value, no key, headers, partition, timestamp or partitioner, the topic's sticky
batch open and memory left): under the accumulator's lock, append the value and
its timestamp to the open batch, account the memory, close a full batch, and
return a ``RecordFuture``, with no Python frame. Anything else calls the
Python method, which is the reference and does the rest (a new batch, blocking
for memory, errors).
"""

from cpython.list cimport PyList_Append, PyList_GET_SIZE
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF
from libc.stdint cimport int64_t
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

cdef extern from "Python.h":
    ctypedef PyObject* (*allocfunc)(PyTypeObject*, Py_ssize_t)
    ctypedef struct TypeAlloc "PyTypeObject":
        allocfunc tp_alloc


cdef class FastSend:
    """``Producer.send`` for one producer: the keyless fast path in C, else the Python method."""

    cdef object producer, acc, acquire, release, sticky, slow, future_type, sticky_partitioner
    cdef int64_t overhead
    cdef allocfunc alloc

    def __init__(self, producer, slow, future_type, int64_t record_overhead):
        """``slow``: the Python ``send`` (unbound); ``future_type``: RecordFuture (``_batch``, ``_index``)."""
        self.producer = producer
        self.acc = producer._acc
        self.acquire = self.acc.lock.acquire
        self.release = self.acc.lock.release
        self.sticky = self.acc.sticky
        self.slow = slow
        self.future_type = future_type
        self.sticky_partitioner = producer._sticky
        self.overhead = record_overhead
        self.alloc = (<TypeAlloc*>(<PyTypeObject*>future_type)).tp_alloc

    def __call__(self, topic, value, key=None, headers=None, partition=None, timestamp_ms=None):
        """Queue one record; return a future resolving to ``(partition, offset)``."""
        cdef int64_t size, idx, bsize, ts
        cdef timespec now
        cdef PyObject* raw
        if (
            key is None
            and partition is None
            and headers is None
            and timestamp_ms is None
            and type(value) is bytes
            and self.producer._partitioner is None
        ):
            size = len(value) + self.overhead
            clock_gettime(CLOCK_REALTIME, &now)  # time.time_ns()'s clock
            ts = (<int64_t>now.tv_sec) * 1000 + now.tv_nsec // 1000000
            acc = self.acc
            self.acquire()
            try:
                b = self.sticky.get(topic)
                if b is not None and acc.used + size <= acc.buffer_memory:
                    acc.used += size
                    values = b.values
                    idx = PyList_GET_SIZE(values)
                    PyList_Append(values, value)
                    PyList_Append(b.timestamps, ts)
                    bsize = b.size + size
                    b.size = bsize
                    if bsize >= acc.batch_size:
                        acc.close_batch(b)
                        self.sticky_partitioner.on_new_batch(topic, b.partition, self.producer._nparts[topic])
                    # RecordFuture(b, idx) without the call of its __init__
                    raw = self.alloc(<PyTypeObject*>self.future_type, 0)
                    if raw == NULL:
                        raise MemoryError()
                    f = <object>raw
                    Py_DECREF(f)  # <object> took its own reference
                    f._batch = b
                    f._index = idx
                    return f
            finally:
                self.release()
        return self.slow(self.producer, topic, value, key, headers, partition, timestamp_ms)
