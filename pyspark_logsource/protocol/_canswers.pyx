# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of :mod:`pyspark_logsource.protocol.produce_answers` (the reference): the client's
decode of one read's frames, correlation ids checked and the producer's answers as compact rows."""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcmp
from pyspark_logsource.format._cwire cimport be16, be32, be64

from pyspark_logsource.protocol import messages as _m
from pyspark_logsource.protocol.primitives import ProtocolError, Reader


cdef class ProduceAnswer:
    """A ProduceResponse of one partition (the producer's answer to a request of one batch), as a row.

    Its fields are declared in ``_canswers.pxd`` (``client/_cio.pyx`` reads them)."""

    api_key = 0

    def __init__(self, int correlation_id, topic, int partition, int error_code, int64_t base_offset,
                 int64_t log_append_time_ms, int64_t log_start_offset, int throttle_time_ms):
        self.correlation_id = correlation_id
        self.topic = topic
        self.partition = partition
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.throttle_time_ms = throttle_time_ms

    @property
    def response(self):
        """The same answer as a ProduceResponse (what the general decode gives for its bytes)."""
        return _m.ProduceResponse(
            [_m.ProducePartitionResponse(self.topic, self.partition, self.error_code, self.base_offset,
                                         self.log_append_time_ms, self.log_start_offset)],
            self.throttle_time_ms,
        )

    def __repr__(self):
        return f"ProduceAnswer({self.correlation_id}, {self.response!r})"


# the last topic name decoded, as bytes and str: the producer's answers name one topic again and again
cdef object _topic_b = None
cdef object _topic_s = None


cdef object _produce_answer(int32_t cid, const uint8_t* d, Py_ssize_t end, int version):
    global _topic_b, _topic_s
    cdef Py_ssize_t pos = 4
    if version < 3 or version > 8 or end - pos < 6:
        return None
    cdef int32_t ntopics = be32(d + pos)
    cdef Py_ssize_t name_len = be16(d + pos + 4)
    cdef Py_ssize_t part = 4 + 4 + 2 + 8 + 8 + (8 if version >= 5 else 0) + (6 if version >= 8 else 0)
    cdef Py_ssize_t head = pos + 6 + name_len
    if ntopics != 1 or name_len < 0 or head + part + 4 != end:
        return None
    cdef const uint8_t* q = d + head
    if be32(q) != 1 or (version >= 8 and (be32(q + 34) != 0 or be16(q + 38) != -1)):
        return None
    cdef const char* name = <const char*>d + pos + 6
    if (_topic_b is not None and PyBytes_GET_SIZE(_topic_b) == name_len
            and memcmp(PyBytes_AS_STRING(_topic_b), name, name_len) == 0):
        topic = _topic_s
    else:
        try:
            topic = PyUnicode_DecodeUTF8(name, name_len, NULL)
        except UnicodeDecodeError:
            return None
        _topic_b, _topic_s = name[:name_len], topic
    cdef ProduceAnswer a = ProduceAnswer.__new__(ProduceAnswer)
    a.correlation_id = cid
    a.topic = topic
    a.partition = be32(q + 4)
    a.error_code = be16(q + 8)
    a.base_offset = be64(q + 10)
    a.log_append_time_ms = be64(q + 18)
    a.log_start_offset = be64(q + 26) if version >= 5 else -1
    a.throttle_time_ms = be32(d + end - 4)
    return a


def decode_answers(list frames, list pending, Py_ssize_t head, general):
    """``produce_answers.decode_answers``, compiled: the same answers, head and typed errors."""
    cdef list out = []
    cdef Py_buffer view
    cdef int32_t cid
    cdef tuple p
    cdef Py_ssize_t n = len(pending)
    for frame in frames:
        PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
        try:
            if view.len < 4:
                Reader(frame).i32()  # raises its typed error
            cid = be32(<const uint8_t*>view.buf)
            if head >= n:
                raise ProtocolError(f"response with correlation id {cid} but no request in flight")
            p = <tuple>pending[head]
            want, key, version = p
            if cid != want:
                raise ProtocolError(f"response correlation id {cid}, expected {want}")
            head += 1
            a = _produce_answer(cid, <const uint8_t*>view.buf, view.len, version) if key == 0 else None
        finally:
            PyBuffer_Release(&view)
        out.append(general(cid, key, version, frame) if a is None else a)
    return out, head
