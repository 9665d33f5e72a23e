# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A round of the producer's one-partition Produce requests as one buffer, in one call (compiled).

``produce_frames`` is ``codecs._produce_frames`` in C (its reference, the same
signature and the same bytes): the sender's round of OnePartitionProduce
requests, each frame's head, the request's cached middle bytes (topic, partition,
acks, timeout) and its records, one after the other in one bytearray, with no
Python object per frame. None where one of them takes another path (records
that are not bytes/bytearray or of the zero-copy size, a name it cannot write, a
field out of range), as the reference.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.number cimport PyNumber_Index
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcpy

from pyspark_logsource.format._cwire cimport put16, put32

cdef int64_t INT32_MAX = 2147483647

# bound by codecs at import (bind): the middle-bytes cache, the function that fills it, the zero-copy size
cdef dict _middles = None
cdef object _middle_fn = None
cdef Py_ssize_t _zero_copy = 0
cdef tuple _errors = ()


def bind(dict middles, middle_fn, Py_ssize_t zero_copy_threshold, tuple errors):
    """Hand the module codecs' cache of middle bytes, ``_produce_request_middle``, ZERO_COPY_THRESHOLD
    and the encode errors after which the reference answers None."""
    global _middles, _middle_fn, _zero_copy, _errors
    _middles, _middle_fn, _zero_copy, _errors = middles, middle_fn, zero_copy_threshold, errors
    return True


def produce_frames(client_id, version, first_cid, list requests):
    """codecs._produce_frames in C: the frames of ``requests`` (OnePartitionProduce, correlation ids
    from ``first_cid`` on, ``version`` not flexible) in one bytearray, or None (see the module)."""
    cdef Py_ssize_t n = len(requests), i, k
    cdef int64_t total = 0, v, cid, size
    cdef const char* src
    cdef uint8_t* p
    cdef uint8_t* end
    cdef bytes mid
    if _middles is None or n == 0:
        return None if _middles is None else bytearray()
    try:  # what the reference's struct.pack(">ihhi") takes: integers (__index__, no float) in range
        v = PyNumber_Index(version)
        cid = PyNumber_Index(first_cid)
    except _errors:
        return None
    if not -32768 <= v <= 32767 or not -2147483648 <= cid <= INT32_MAX:
        return None
    mids = [None] * n
    recs = [None] * n
    last_topic = last_partition = last_acks = last_timeout = None
    last_mid = None
    try:
        for i in range(n):
            r = requests[i]
            rec = r.records
            if type(rec) is not bytes and type(rec) is not bytearray:
                return None
            if len(rec) >= _zero_copy:
                return None
            topic, partition, acks, timeout = r.topic, r.partition, r.acks, r.timeout_ms
            if (
                last_mid is not None
                and topic is last_topic
                and partition is last_partition
                and acks is last_acks
                and timeout is last_timeout
            ):
                mid = last_mid  # the same objects: the same key, the same bytes
            else:
                mid = _middles.get((client_id, acks, timeout, topic, partition))
                if mid is None:
                    mid = _middle_fn(client_id, acks, timeout, topic, partition)
                    if mid is None:
                        return None
                last_topic, last_partition, last_acks, last_timeout, last_mid = (
                    topic, partition, acks, timeout, mid
                )
            size = 8 + PyBytes_GET_SIZE(mid) + 4 + len(rec)
            if size > INT32_MAX:
                return None
            total += 4 + size
            mids[i] = mid
            recs[i] = rec
    except _errors:
        return None
    out = PyByteArray_FromStringAndSize(NULL, total)
    p = <uint8_t*>PyByteArray_AS_STRING(out)
    end = p + total
    for i in range(n):
        mid = mids[i]
        rec = recs[i]
        k = PyBytes_GET_SIZE(mid)
        size = 8 + k + 4 + len(rec)
        if p + 4 + size > end:  # a bytearray grew since the first pass (another thread): never past ``out``
            return None
        put32(p, size)
        put16(p + 4, 0)
        put16(p + 6, <int>v)
        put32(p + 8, cid)
        memcpy(p + 12, PyBytes_AS_STRING(mid), k)
        p += 12 + k
        put32(p, len(rec))
        p += 4
        if type(rec) is bytes:
            src = PyBytes_AS_STRING(rec)
        else:
            src = PyByteArray_AS_STRING(rec)
        memcpy(p, src, len(rec))
        p += len(rec)
        cid = (cid + 1) & 0x7FFFFFFF
    if p != end:  # one shrank since the first pass: the frames' sizes would not add up
        return None
    return out
