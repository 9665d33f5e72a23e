# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The broker's compiled Produce fast path (issue 25): request frame decode and response encode.

The pure-Python code is the reference: ``ServerConnection.decode_frame`` (request
header, then ``codecs._decode_produce_request_fast``) and
``codecs._encode_produce_response_fast``. Each function here handles the common
shape only (Produce v3-v8, one topic, one partition, no transactional id, records
to the end of the frame, the frame a bytearray) and returns None for anything
else; the caller then runs the Python code on the same input, which decodes the
other shapes or raises the precise typed error. So both paths give the same
results and errors by construction, and tests/test_protocol_compiled.py checks
that what this code accepts it decodes exactly as the Python code does.

Objects are built without their dataclass ``__init__`` (a Python function call
each): ``object.__new__`` and the slots set directly, every field of the class
(:func:`bind` checks the field names, and refuses classes that changed). The
last client id and topic name are kept, so a producer's stream of requests
decodes each to the same ``str`` object without a UTF-8 decode.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.memoryview cimport PyMemoryView_FromObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, INT64_MIN, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from pyspark_logsource.format._cwire cimport be16, be32, be64, put16, put32, put64

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL

cdef object _new = object.__new__
cdef object _Header = None
cdef object _Request = None
cdef object _Partition = None
cdef object _Received = None
# (utf-8 bytes, str) of the last client id and topic name decoded
cdef bytes _client_b = None
cdef object _client_s = None
cdef bytes _topic_b = None
cdef object _topic_s = None
# the last topic name encoded: (str, utf-8 bytes)
cdef object _enc_topic_s = None
cdef bytes _enc_topic_b = None

_FIELDS = {
    "header": ("api_key", "api_version", "correlation_id", "client_id"),
    "request": ("partitions", "acks", "timeout_ms", "transactional_id"),
    "partition": ("topic", "partition", "records"),
    "received": ("header", "request"),
}


def bind(header_cls, request_cls, partition_cls, received_cls):
    """Hand over the classes the decode builds; False (the decode stays off) if their fields changed."""
    global _Header, _Request, _Partition, _Received
    import dataclasses

    for cls, key in ((header_cls, "header"), (request_cls, "request"), (partition_cls, "partition"),
                     (received_cls, "received")):
        if tuple(f.name for f in dataclasses.fields(cls)) != _FIELDS[key] or not hasattr(cls, "__slots__"):
            _Header = None
            return False
    _Header, _Request, _Partition, _Received = header_cls, request_cls, partition_cls, received_cls
    return True


cdef object _client_str(const char* p, Py_ssize_t n):
    """The client id's str (the last one when the bytes repeat), or None if not UTF-8."""
    global _client_b, _client_s
    if _client_b is not None and PyBytes_GET_SIZE(_client_b) == n and memcmp(PyBytes_AS_STRING(_client_b), p, n) == 0:
        return _client_s
    try:
        s = PyUnicode_DecodeUTF8(p, n, NULL)
    except UnicodeDecodeError:
        return None
    _client_b, _client_s = p[:n], s
    return s


cdef object _topic_str(const char* p, Py_ssize_t n):
    global _topic_b, _topic_s
    if _topic_b is not None and PyBytes_GET_SIZE(_topic_b) == n and memcmp(PyBytes_AS_STRING(_topic_b), p, n) == 0:
        return _topic_s
    try:
        s = PyUnicode_DecodeUTF8(p, n, NULL)
    except UnicodeDecodeError:
        return None
    _topic_b, _topic_s = p[:n], s
    return s


def decode_produce_frame(frame):
    """The RequestReceived of a Produce v3-v8 frame of the common shape, or None (the Python path decodes it).

    The same result as ``ServerConnection.decode_frame(frame)`` whenever it is not None."""
    if _Header is None or type(frame) is not bytearray:
        return None
    cdef Py_ssize_t end = PyByteArray_GET_SIZE(frame)
    cdef const uint8_t* d = <const uint8_t*>PyByteArray_AS_STRING(frame)
    if end < 10:
        return None
    cdef int key = be16(d), version = be16(d + 2)
    cdef int32_t cid = be32(d + 4)
    cdef Py_ssize_t n = be16(d + 8), pos
    if key != 0 or version < 3 or version > 8:
        return None
    # request header v1 (ServerConnection.decode_frame -> codecs.decode_request_header)
    if n == -1:
        client = None
        pos = 10
    elif 0 <= n <= end - 10:
        client = _client_str(<const char*>d + 10, n)
        if client is None:
            return None
        pos = 10 + n
    else:
        return None
    # ProduceRequest v3-v8 (codecs._decode_produce_request_fast): one topic, one partition, no
    # transactional id, records to the end of the frame
    if end - pos < 26:
        return None
    cdef int txn_len = be16(d + pos), acks = be16(d + pos + 2)
    cdef int32_t timeout = be32(d + pos + 4), ntopics = be32(d + pos + 8)
    cdef Py_ssize_t name_len = be16(d + pos + 12)
    cdef Py_ssize_t head = pos + 14 + name_len
    if txn_len != -1 or ntopics != 1 or name_len < 0 or head + 12 > end:
        return None
    cdef int32_t nparts = be32(d + head), partition = be32(d + head + 4), size = be32(d + head + 8)
    if nparts != 1 or size < 0 or head + 12 + size != end:
        return None
    topic = _topic_str(<const char*>d + pos + 14, name_len)
    if topic is None:
        return None
    records = PyMemoryView_FromObject(frame)[head + 12 : end]  # a writable view of the frame, no copy
    h = _new(_Header)
    h.api_key = key
    h.api_version = version
    h.correlation_id = cid
    h.client_id = client
    p = _new(_Partition)
    p.topic = topic
    p.partition = partition
    p.records = records
    req = _new(_Request)
    req.partitions = [p]
    req.acks = acks
    req.timeout_ms = timeout
    req.transactional_id = None
    ev = _new(_Received)
    ev.header = h
    ev.request = req
    return ev


cdef inline bint _int_in(object v, int64_t lo, int64_t hi, int64_t* out):
    """``v`` an int (not bool: struct packs bools too, so they are accepted as 0/1) within [lo, hi]."""
    if not isinstance(v, int):
        return False
    try:
        out[0] = v
    except OverflowError:
        return False
    return lo <= out[0] <= hi


cdef int64_t I16_MIN = -0x8000, I16_MAX = 0x7FFF
cdef int64_t I32_MIN = -0x80000000, I32_MAX = 0x7FFFFFFF
cdef int64_t I64_MIN = INT64_MIN, I64_MAX = INT64_MAX


def encode_produce_response(int64_t cid, int version, resp):
    """The response frame (with its size) of a one-partition ProduceResponse v3-v8 as a bytearray,
    or None (the Python path encodes it). The bytes of ``codecs._encode_produce_response_fast``."""
    global _enc_topic_s, _enc_topic_b
    if version < 3 or version > 8 or cid < I32_MIN or cid > I32_MAX:
        return None
    try:
        parts = resp.partitions
        if type(parts) is not list or len(parts) != 1:
            return None
        p = parts[0]
        if p.error_message is not None or p.record_errors:  # (the general encoder writes them)
            return None
        topic = p.topic
        if type(topic) is not str:
            return None
        name_v = p.partition
        err_v = p.error_code
        base_v = p.base_offset
        lat_v = p.log_append_time_ms
        lso_v = p.log_start_offset if version >= 5 else 0
        throttle_v = resp.throttle_time_ms
    except AttributeError:
        return None
    cdef int64_t partition, err, base, lat, lso, throttle
    if not (
        _int_in(name_v, I32_MIN, I32_MAX, &partition)
        and _int_in(err_v, I16_MIN, I16_MAX, &err)
        and _int_in(base_v, I64_MIN, I64_MAX, &base)
        and _int_in(lat_v, I64_MIN, I64_MAX, &lat)
        and _int_in(lso_v, I64_MIN, I64_MAX, &lso)
        and _int_in(throttle_v, I32_MIN, I32_MAX, &throttle)
    ):
        return None
    if topic is _enc_topic_s:
        name = _enc_topic_b
    else:
        try:
            name = topic.encode("utf-8")
        except UnicodeEncodeError:
            return None
        _enc_topic_s, _enc_topic_b = topic, name
    cdef Py_ssize_t name_len = PyBytes_GET_SIZE(name)
    if name_len > 0x7FFF:
        return None
    # partition count, index, error, base offset, log append time[, log start][, 0 record errors, null message]
    cdef Py_ssize_t part_size = 4 + 4 + 2 + 8 + 8 + (8 if version >= 5 else 0) + (6 if version >= 8 else 0)
    cdef Py_ssize_t total = 4 + 4 + 4 + 2 + name_len + part_size + 4
    out = PyByteArray_FromStringAndSize(NULL, total)
    cdef uint8_t* o = <uint8_t*>PyByteArray_AS_STRING(out)
    put32(o, total - 4)
    put32(o + 4, cid)
    put32(o + 8, 1)
    put16(o + 12, <int>name_len)
    memcpy(o + 14, PyBytes_AS_STRING(name), name_len)
    cdef uint8_t* q = o + 14 + name_len
    put32(q, 1)
    put32(q + 4, partition)
    put16(q + 8, <int>err)
    put64(q + 10, base)
    put64(q + 18, lat)
    q += 26
    if version >= 5:
        put64(q, lso)
        q += 8
    if version >= 8:
        put32(q, 0)
        put16(q + 4, -1)
        q += 6
    put32(q, throttle)
    return out


def append_responses(bytearray out, events, results, encode):
    """Append the response frames to ``events``' requests (``results``: None for no answer, acks=0) to
    ``out``: a Produce v3-v8 answer of the common shape here, any other by ``encode(header, result)``
    (the frame's parts). The bytes of ``ServerConnection.append_responses``' Python loop."""
    cdef Py_ssize_t i, n = len(events)
    if len(results) != n:
        raise ValueError(f"{n} requests but {len(results)} results")
    for i in range(n):
        result = results[i]
        if result is None:
            continue
        header = events[i].header
        frame = None
        if header.api_key == 0:
            frame = encode_produce_response(header.correlation_id, header.api_version, result)
        if frame is not None:
            out += frame
        else:
            out += b"".join(encode(header, result))
    return out


def split_frames(bytearray buf, Py_ssize_t max_frame_bytes, Py_ssize_t big):
    """``(frames, bytes used)``: each complete frame at the start of ``buf`` as its own bytearray
    (without its length prefix), up to the first that is incomplete, has a bad length prefix
    (negative or over ``max_frame_bytes``) or is ``big`` bytes or more: ``FrameDecoder.feed``'s
    Python loop goes on from there (and raises the typed error)."""
    cdef Py_ssize_t pos = 0, end = PyByteArray_GET_SIZE(buf), n
    cdef const uint8_t* d = <const uint8_t*>PyByteArray_AS_STRING(buf)
    frames = []
    while end - pos >= 4:
        n = be32(d + pos)
        if n < 0 or n > max_frame_bytes or n >= big or end - pos - 4 < n:
            break
        frames.append(PyByteArray_FromStringAndSize(<const char*>d + pos + 4, n))
        pos += 4 + n
    return frames, pos


cdef object _Response = None
cdef object _PartitionResponse = None
_RESPONSE_FIELDS = (("partitions", None), ("throttle_time_ms", 0))
_PARTITION_RESPONSE_FIELDS = (
    ("topic", None), ("partition", None), ("error_code", 0), ("base_offset", -1), ("log_append_time_ms", -1),
    ("log_start_offset", -1), ("error_message", None), ("record_errors", ()),
)


def bind_responses(response_cls, partition_cls):
    """Hand over ProduceResponse and ProducePartitionResponse; False (new_produce_responses stays off) if
    their fields or defaults changed."""
    global _Response, _PartitionResponse
    import dataclasses

    for cls, want in ((response_cls, _RESPONSE_FIELDS), (partition_cls, _PARTITION_RESPONSE_FIELDS)):
        got = tuple(
            (f.name, None if f.default is dataclasses.MISSING else f.default) for f in dataclasses.fields(cls)
        )
        if got != want or not hasattr(cls, "__slots__"):
            _Response = None
            return False
    _Response, _PartitionResponse = response_cls, partition_cls
    return True


def new_produce_responses(topic, partition, Py_ssize_t n):
    """``n`` ProduceResponses of one ProducePartitionResponse each, every other field at its default:
    (the responses, their partition responses). As ``codecs.new_produce_responses``, without the
    dataclass ``__init__`` calls; None when the classes are not bound."""
    if _Response is None:
        return None
    cdef Py_ssize_t i
    responses = []
    parts = []
    for i in range(n):
        p = _new(_PartitionResponse)
        p.topic = topic
        p.partition = partition
        p.error_code = 0
        p.base_offset = -1
        p.log_append_time_ms = -1
        p.log_start_offset = -1
        p.error_message = None
        p.record_errors = ()
        r = _new(_Response)
        r.partitions = [p]
        r.throttle_time_ms = 0
        parts.append(p)
        responses.append(r)
    return responses, parts


def decode_frames(list frames, decode_frame, error_type):
    """``(events, error)``: the frames decoded in order, stopping at the first whose ``decode_frame``
    raises ``error_type`` (that error; None: all decoded). As ``ServerConnection.decode_frames``: the
    common Produce frame by :func:`decode_produce_frame` (no Python call), any other by
    ``decode_frame`` (the Python path, which raises the typed error)."""
    cdef list events = []
    for frame in frames:
        ev = decode_produce_frame(frame)
        if ev is None:
            try:
                ev = decode_frame(frame)
            except error_type as e:
                return events, e
        events.append(ev)
    return events, None


# the last topic name of a decoded ProduceResponse: (utf-8 bytes, str); apart from the request decode's cache,
# which an embedded broker's thread uses in the same process
cdef bytes _resp_topic_b = None
cdef object _resp_topic_s = None


def decode_produce_response(buf, Py_ssize_t pos, Py_ssize_t end, int version):
    """The ProduceResponse v3-v8 in ``buf[pos:end]`` (after the correlation id), or None (the general
    decode takes it): one topic and one partition, no record errors, no error message.

    ``codecs.decode_produce_response_one``'s compiled twin: the same result for every input (None when
    the classes are not bound)."""
    cdef Py_buffer view
    if _Response is None or version < 3 or version > 8:
        return None
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or end > view.len or end - pos < 6:
            return None
        return _produce_response(<const uint8_t*>view.buf, pos, end, version)
    finally:
        PyBuffer_Release(&view)


cdef object _produce_response(const uint8_t* d, Py_ssize_t pos, Py_ssize_t end, int version):
    global _resp_topic_b, _resp_topic_s
    cdef int32_t ntopics = be32(d + pos)
    cdef Py_ssize_t name_len = be16(d + pos + 4)
    # per version: partition count, index, error, base offset, log append time[, log start][, 0 record
    # errors, null message] (codecs._PRODUCE_RESP_PART)
    cdef Py_ssize_t part = 4 + 4 + 2 + 8 + 8 + (8 if version >= 5 else 0) + (6 if version >= 8 else 0)
    cdef Py_ssize_t head = pos + 6 + name_len
    if ntopics != 1 or name_len < 0 or head + part + 4 != end:
        return None
    cdef const uint8_t* q = d + head
    if be32(q) != 1 or (version >= 8 and (be32(q + 34) != 0 or be16(q + 38) != -1)):
        return None
    cdef const char* name = <const char*>d + pos + 6
    if (_resp_topic_b is not None and PyBytes_GET_SIZE(_resp_topic_b) == name_len
            and memcmp(PyBytes_AS_STRING(_resp_topic_b), name, name_len) == 0):
        topic = _resp_topic_s
    else:
        try:
            topic = PyUnicode_DecodeUTF8(name, name_len, NULL)
        except UnicodeDecodeError:
            return None
        _resp_topic_b, _resp_topic_s = name[:name_len], topic
    p = _new(_PartitionResponse)
    p.topic = topic
    p.partition = be32(q + 4)
    p.error_code = be16(q + 8)
    p.base_offset = be64(q + 10)
    p.log_append_time_ms = be64(q + 18)
    p.log_start_offset = be64(q + 26) if version >= 5 else -1
    p.error_message = None
    p.record_errors = ()
    r = _new(_Response)
    r.partitions = [p]
    r.throttle_time_ms = be32(d + end - 4)
    return r
