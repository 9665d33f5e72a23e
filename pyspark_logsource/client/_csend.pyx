# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled core's ``Producer.send()`` fast path (issue 25): the keyless record in C.

:func:`fast_send` makes what ``Producer.send`` is bound to on an instance when the
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


def fast_send(producer, slow, future_type, int64_t record_overhead):
    """``Producer.send`` for one producer: the keyless fast path in C, else ``slow(producer, ...)``
    (the Python method). A function, not an object with ``__call__``: Cython's functions take the
    vectorcall protocol (no argument tuple per call)."""
    acc = producer._acc
    acquire = acc.lock.acquire
    release = acc.lock.release
    cdef dict sticky = acc.sticky
    sticky_partitioner = producer._sticky
    cdef allocfunc alloc = (<TypeAlloc*>(<PyTypeObject*>future_type)).tp_alloc
    cdef int64_t overhead = record_overhead
    cdef int64_t last_ms = -1
    last_ts = None

    def send(topic, value, key=None, headers=None, partition=None, timestamp_ms=None):
        """Queue one record; return a future resolving to ``(partition, offset)``."""
        nonlocal last_ms, last_ts
        cdef int64_t size, idx, bsize, ts
        cdef timespec now
        cdef PyObject* raw
        if (
            key is None
            and partition is None
            and headers is None
            and timestamp_ms is None
            and type(value) is bytes
            and producer._partitioner is None
        ):
            size = len(value) + overhead
            clock_gettime(CLOCK_REALTIME, &now)  # time.time_ns()'s clock
            ts = (<int64_t>now.tv_sec) * 1000 + now.tv_nsec // 1000000
            if ts != last_ms:  # records sent in one millisecond share one int
                last_ms = ts
                last_ts = ts
            ts_obj = last_ts  # this call's (another thread may move last_ts while acquire() waits)
            acquire()
            try:
                b = sticky.get(topic)
                if b is not None and acc.used + size <= acc.buffer_memory:
                    acc.used += size
                    values = b.values
                    idx = PyList_GET_SIZE(values)
                    PyList_Append(values, value)
                    PyList_Append(b.timestamps, ts_obj)
                    bsize = b.size + size
                    b.size = bsize
                    if bsize >= acc.batch_size:
                        acc.close_batch(b)
                        sticky_partitioner.on_new_batch(topic, b.partition, producer._nparts[topic])
                    # RecordFuture(b, idx) without the call of its __init__
                    raw = alloc(<PyTypeObject*>future_type, 0)
                    if raw == NULL:
                        raise MemoryError()
                    f = <object>raw
                    Py_DECREF(f)  # <object> took its own reference
                    f._batch = b
                    f._index = idx
                    return f
            finally:
                release()
        return slow(producer, topic, value, key, headers, partition, timestamp_ms)

    return send
