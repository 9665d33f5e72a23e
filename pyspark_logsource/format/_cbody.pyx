# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled core's Arrow-body encode and the log append's check-and-stamp (issue 25).

* :func:`encode_records` is ``arrow_body.encode_records`` for a plain producer
  batch (no codec, no headers, every value ``bytes``, keys all ``bytes`` or
  absent, int timestamps): the batch written in one C pass into one bytearray,
  byte-identical;
* :func:`check_and_stamp` is ``plain_run.check_and_stamp``: the header walk with
  CRC-32C of a produced run and, when every batch is a plain one (our Arrow body,
  or Kafka's layout uncompressed with records that parse; no producer id, not
  transactional; no null key on a compacted topic), the offset/epoch stamp in
  place, in one call;
* :func:`write_plain_batch` is ``plain_run.write_plain_batch``: the same for one
  plain batch, then its ``pwrite`` at the end of the log segment's file. Both
  share one batch check (``_plain_batch``);
* :func:`producer_run` is ``plain_run.producer_run``: the same header walk with CRC-32C
  of an idempotent producer's run of Arrow-body batches, and each batch's fields the
  producer checks and the stamp need, without a ``BatchHeader`` per batch. Walk strict's
  header checks are shared (``_checked_size``).

Their CRC-32C runs through ``_crc32c_fold.h`` (carry-less multiply folding, about twice the crc32c
package's rate on a 10 KB batch) from 256 bytes where the CPU has AVX-512 VPCLMULQDQ and it gives the
reference's values at import (tests/test_format_crc_fold.py); otherwise through the crc32c package's C
function, or ``crc32c()``.

As in ``_ckafka``, each returns None for any input it does not take; the caller
then runs the pure-Python reference, which produces the result or the typed
error (tests/test_format_compiled_body.py checks both ways on the same input).
Every read is bounded by the buffer it belongs to. A buffer that another thread changes while a
Python-level CRC runs (no C CRC-32C function set) is refused with CorruptRecord, nothing written.
"""

from cpython.buffer cimport PyBUF_READ, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset
from pyspark_logsource.format._cwire cimport (
    be16, be32, be64, kafka_records_ok, le32, le64, legal_high, put16, put32, put64
)

from pyspark_logsource.errors import CorruptRecord
from pyspark_logsource.format.crc import crc32c as _py_crc32c

cdef enum:
    HEADER_SIZE = 61
    LOG_OVERHEAD = 12
    CRC_START = 21
    MIN_LENGTH = 49  # HEADER_SIZE - LOG_OVERHEAD
    MAGIC = 2
    ARROW_BODY = 0x1000
    HAS_KEY_NULLS = 0x100
    TXN_BITS = 0x30  # transactional | control
    KAFKA_ATTRIBUTES = 0x7F
    CODEC_MASK = 0x07
    MAX_CODEC = 4

cdef int64_t INT32_MAX = 2147483647
cdef int64_t INT32_MIN = -2147483648
cdef int64_t INT64_MAX = 0x7FFFFFFFFFFFFFFF

ctypedef uint32_t (*crc_fn_t)(uint32_t, const uint8_t*, size_t) noexcept nogil
#: the crc32c package's hardware CRC-32C, set by _speedups when it checks out (as for _ckafka);
#: NULL: the Python-level crc32c function
cdef crc_fn_t _crc_c = NULL


def set_crc32c_function(size_t address):
    """Use the C function at ``address`` (the crc32c package's convention) for the CRCs; 0: none."""
    global _crc_c
    _crc_c = <crc_fn_t>address


def crc32c_direct(const uint8_t[::1] data):
    """CRC-32C of ``data`` through the C function set by :func:`set_crc32c_function` (None if unset)."""
    if _crc_c == NULL:
        return None
    return _crc_c(0xFFFFFFFF, &data[0] if data.shape[0] else NULL, data.shape[0]) ^ 0xFFFFFFFF


cdef extern from "_crc32c_fold.h" nogil:
    uint32_t crc32c_fold_raw(uint32_t crc, const uint8_t* p, size_t n)
    int crc32c_fold_usable()

#: the folding CRC-32C (_crc32c_fold.h) from this many bytes: below it the crc32q path is as fast
cdef enum:
    FOLD_MIN = 256
#: whether _crc uses crc32c_fold_raw: the CPU runs it and it gave the reference's values at import
cdef bint _fold = False


def _fold_checks_out():
    """The folding CRC against the reference ``crc32c`` on a few lengths (the tail and lane cases)."""
    data = bytes((i * 131 + 7) & 0xFF for i in range(4096 + 77))
    cdef const uint8_t[::1] view = data
    for n in (256, 257, 319, 320, 511, 512, 1000, 4096 + 77):
        if crc32c_fold_raw(0xFFFFFFFF, &view[0], n) ^ 0xFFFFFFFF != _py_crc32c(data[:n]):
            return False
    return True


def set_crc32c_fold(bint on):
    """Use the folding CRC-32C for buffers of 256 bytes and more (only where the CPU runs it and it
    checks out); returns whether it is now in use."""
    global _fold
    _fold = on and crc32c_fold_usable() != 0 and _fold_checks_out()
    return _fold


def crc32c_fold_supported():
    """Whether this CPU and OS run the folding CRC (AVX-512 with VPCLMULQDQ)."""
    return crc32c_fold_usable() != 0


def crc32c_fold_direct(const uint8_t[::1] data):
    """CRC-32C of ``data`` (256 bytes or more) by the folding CRC, or None where it is not in use."""
    if not _fold or data.shape[0] < FOLD_MIN:
        return None
    return crc32c_fold_raw(0xFFFFFFFF, &data[0], data.shape[0]) ^ 0xFFFFFFFF


set_crc32c_fold(True)


def crc32c_update(data, uint32_t value):
    """``crc.crc32c(data, value)``: the CRC-32C of bytes that follow ones whose CRC-32C is ``value``, by
    this module's CRC (the fold, else the crc32c package's C function, else the Python-level one)."""
    cdef const uint8_t[::1] v = memoryview(data).cast("B")
    cdef size_t n = v.shape[0]
    cdef const uint8_t* p = &v[0] if n else NULL
    cdef uint32_t crc = ~value
    if _fold and n >= FOLD_MIN:
        with nogil:
            crc = crc32c_fold_raw(crc, p, n)
        return crc ^ 0xFFFFFFFF
    if _crc_c != NULL:
        return _crc_c(crc, p, n) ^ 0xFFFFFFFF
    return _py_crc32c(data, value)


cdef inline uint32_t _crc(const uint8_t* p, int64_t n) except? 0xFFFFFFFF:
    if _fold and n >= FOLD_MIN:
        return crc32c_fold_raw(0xFFFFFFFF, p, <size_t>n) ^ 0xFFFFFFFF
    if _crc_c != NULL:
        return _crc_c(0xFFFFFFFF, p, n) ^ 0xFFFFFFFF
    return _py_crc32c(PyMemoryView_FromMemory(<char*>p, n, PyBUF_READ))


cdef bint fold_crc32c(const uint8_t* p, int64_t n, uint32_t* out) noexcept nogil:
    """The CRC-32C of ``n`` bytes at ``p`` into ``out`` by the folding CRC, when it is in use and ``n``
    is long enough for it; False (``out`` untouched) otherwise: the caller runs its own CRC."""
    if not _fold or n < FOLD_MIN:
        return False
    out[0] = ~crc32c_fold_raw(<uint32_t>0xFFFFFFFF, p, <size_t>n)
    return True


cdef uint32_t batch_crc32c(const uint8_t* p, int64_t n) except? 0xFFFFFFFF:
    """The CRC-32C of ``n`` bytes at ``p`` for other compiled modules: the same choice as this module's
    own (the fold, the crc32c package's C function, or the Python-level crc32c)."""
    return _crc(p, n)


cdef inline bint _writable_bytes(buf):
    """``plain_run._writable``: a bytearray, or a writable contiguous 1-D memoryview of unsigned bytes."""
    if type(buf) is bytearray:
        return True
    if type(buf) is not memoryview:
        return False
    return not buf.readonly and buf.c_contiguous and buf.ndim == 1 and buf.format == "B"


cdef inline int _stamp_args(buf, base_offset, leader_epoch, int64_t* offset, int64_t* epoch):
    """The argument checks of ``check_and_stamp`` and ``write_plain_batch`` (as the references'): 0 with
    the offset and epoch as C ints, or -1 (the caller returns None)."""
    if type(base_offset) is not int or type(leader_epoch) is not int:
        return -1
    cdef int overflow = 0
    offset[0] = PyLong_AsLongLongAndOverflow(base_offset, &overflow)
    if overflow or offset[0] < 0:
        return -1
    epoch[0] = PyLong_AsLongLongAndOverflow(leader_epoch, &overflow)
    if overflow or epoch[0] < INT32_MIN or epoch[0] > INT32_MAX:
        return -1
    if not _writable_bytes(buf):
        return -1
    return 0


cdef int64_t _checked_size(const uint8_t* p, int64_t room, int64_t max_size) noexcept nogil:
    """header.walk strict's checks of the batch header at ``p`` (``room`` bytes to the run's end), all
    but its CRC: the batch's size, or -1 (walk would raise)."""
    if room < HEADER_SIZE:
        return -1
    cdef int64_t base = be64(p), lod = be32(p + 23)
    cdef int32_t length = be32(p + 8), n = be32(p + 57)
    cdef int attrs = be16(p + 21)
    if (
        lod != n - 1
        or n < 1
        or <signed char>p[16] != MAGIC
        or length < MIN_LENGTH
        or not legal_high(attrs)
        or base > INT64_MAX - lod
    ):
        return -1
    cdef int64_t sz = <int64_t>length + LOG_OVERHEAD
    if sz > max_size or sz > room or (attrs & CODEC_MASK) > MAX_CODEC:
        return -1
    return sz


cdef int _plain_batch(
    const uint8_t* p, int64_t room, int64_t max_size, bint refuse_keyless, int64_t* size, int32_t* count
) noexcept nogil:
    """Every check of the batch at ``p`` (``room`` bytes to the run's end) but its CRC: header.walk
    strict's header checks, then a plain batch's conditions (not transactional, not idempotent; our
    Arrow body, or Kafka's layout uncompressed with records that parse); with ``refuse_keyless`` no null
    key. Its size and record count in ``size`` and ``count``; returns 1 (our Arrow body), 0 (Kafka's
    layout) or -1 (not taken: the general path's case)."""
    cdef int64_t sz = _checked_size(p, room, max_size)
    if sz < 0:
        return -1
    cdef int64_t pid = be64(p + 43)
    cdef int32_t n = be32(p + 57), seq = be32(p + 53)
    cdef int attrs = be16(p + 21)
    cdef bint null_key = False
    if attrs & TXN_BITS or (pid >= 0 and seq >= 0):
        return -1
    size[0] = sz
    count[0] = n
    if attrs & ARROW_BODY:
        return -1 if refuse_keyless and attrs & HAS_KEY_NULLS else 1
    # a Kafka client's batch: kafka_decode.validate_kafka_records' check of its records, and the null keys
    # a compacted topic refuses (the general path names them: KIP-467), in the same pass
    if attrs & CODEC_MASK or kafka_records_ok(p, HEADER_SIZE, sz, n, &null_key) < 0:
        return -1
    return -1 if refuse_keyless and null_key else 0


cdef inline int _crc_matches(const uint8_t* p, int64_t size) except -1:
    """1 if the batch at ``p`` of ``size`` bytes (at least a header) has the CRC-32C its header says."""
    cdef uint32_t crc = (<uint32_t>p[17] << 24) | (<uint32_t>p[18] << 16) | (<uint32_t>p[19] << 8) | <uint32_t>p[20]
    return _crc(p + CRC_START, size - CRC_START) == crc


def check_and_stamp(int64_t max_size, bint refuse_keyless, buf, base_offset, leader_epoch):
    """``plain_run.check_and_stamp``: ``(whether some batch has our Arrow body, [(position, base offset,
    size, max timestamp, record count)] per batch)`` as stamped, or None (nothing stamped)."""
    cdef int64_t offset, epoch
    if _stamp_args(buf, base_offset, leader_epoch, &offset, &epoch) < 0:
        return None
    # the buffer protocol directly, as write_plain_batch (cheaper than a typed memoryview); the export keeps
    # a bytearray from being resized meanwhile
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE)
    try:
        return _check_and_stamp(max_size, refuse_keyless, <uint8_t*>view.buf, view.len, offset, epoch)
    finally:
        PyBuffer_Release(&view)


cdef object _check_and_stamp(
    int64_t max_size, bint refuse_keyless, uint8_t* d, int64_t end, int64_t offset, int64_t epoch
):
    if end == 0:
        return None
    cdef uint8_t* p
    cdef int64_t pos = 0, size = 0, total = 0
    cdef int32_t count = 0
    cdef int layout
    cdef bint arrow = False
    # pass 1: every check but the CRCs (so that a run for the general path, an idempotent producer's,
    # costs no CRC here); nothing written
    while pos < end:
        layout = _plain_batch(d + pos, end - pos, max_size, refuse_keyless, &size, &count)
        if layout < 0:
            return None
        arrow |= layout
        total += count
        pos += size
    if offset > INT64_MAX - total:
        return None
    # pass 2: the CRC-32C of every batch (a Python-level CRC may let another thread at the buffer: every
    # read stays bounded even then)
    pos = 0
    while pos < end:
        p = d + pos
        size = <int64_t>be32(p + 8) + LOG_OVERHEAD
        if size < HEADER_SIZE or size > end - pos:
            return None
        if not _crc_matches(p, size):
            return None
        pos += size
    # pass 3: stamp and describe (bounded again, as pass 2)
    cdef list out = []
    pos = 0
    while pos < end:
        p = d + pos
        size = <int64_t>be32(p + 8) + LOG_OVERHEAD
        count = be32(p + 57)
        if size < HEADER_SIZE or size > end - pos:
            raise CorruptRecord("the produced run changed while it was checked (another thread wrote to it)")
        put64(p, offset)
        put32(p + 12, epoch)
        out.append((pos, offset, size, be64(p + 35), count))
        offset += count
        pos += size
    return (arrow, out)


def producer_run(int64_t max_size, bint refuse_keyless, buf):
    """``plain_run.producer_run``: ``(position, batch length, last offset delta, max timestamp, producer
    id, producer epoch, base sequence, record count)`` per batch, or None; nothing stamped."""
    if not _writable_bytes(buf):
        return None
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE)
    try:
        return _producer_run(max_size, refuse_keyless, <const uint8_t*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


cdef object _producer_run(int64_t max_size, bint refuse_keyless, const uint8_t* d, int64_t end):
    if end < HEADER_SIZE:
        return None
    cdef const uint8_t* p
    cdef int64_t pos = 0, size
    cdef int attrs
    # pass 1: walk strict's header checks and the run's conditions, no CRC (a run for the general path
    # costs none here)
    while pos < end:
        p = d + pos
        size = _checked_size(p, end - pos, max_size)
        if size < 0:
            return None
        attrs = be16(p + 21)
        if not attrs & ARROW_BODY or attrs & TXN_BITS or (refuse_keyless and attrs & HAS_KEY_NULLS):
            return None
        pos += size
    # pass 2: each batch's CRC-32C, and its fields (bounded again: see _check_and_stamp's pass 2)
    cdef list out = []
    pos = 0
    while pos < end:
        p = d + pos
        size = <int64_t>be32(p + 8) + LOG_OVERHEAD
        if size < HEADER_SIZE or size > end - pos or not _crc_matches(p, size):
            return None
        out.append((pos, be32(p + 8), be32(p + 23), be64(p + 35), be64(p + 43), be16(p + 51), be32(p + 53), be32(p + 57)))
        pos += size
    return out


cdef inline int _int64_at(list items, Py_ssize_t i, int64_t* out):
    """``items[i]`` as an int64 when it is exactly an int that fits: 0, else -1."""
    cdef object o = <object>PyList_GET_ITEM(items, i)
    cdef int overflow = 0
    if type(o) is not int:
        return -1
    out[0] = PyLong_AsLongLongAndOverflow(o, &overflow)
    return -1 if overflow else 0


cdef inline bint _all_bytes(list items, Py_ssize_t n, int64_t* total):
    """Every item is exactly ``bytes``; their summed length in ``total`` (stops past INT32_MAX)."""
    cdef Py_ssize_t i
    cdef object o
    cdef int64_t t = 0
    for i in range(n):
        o = <object>PyList_GET_ITEM(items, i)
        if type(o) is not bytes:
            return False
        t += PyBytes_GET_SIZE(o)
        if t > INT32_MAX:
            return False
    total[0] = t
    return True


def encode_records(
    values, keys, timestamps, headers, codec, producer_id, producer_epoch, base_sequence
):
    """``arrow_body.encode_records`` of a plain batch, byte-identical, or None (another batch: the
    reference encodes it, or raises)."""
    if headers is not None or type(codec) is not int or codec != 0 or type(values) is not list or type(timestamps) is not list:
        return None
    cdef list vals = values
    cdef list ts = timestamps
    cdef list ks
    cdef Py_ssize_t n = PyList_GET_SIZE(vals), i
    if n < 1 or PyList_GET_SIZE(ts) != n:
        return None
    cdef bint keyless = keys is None
    if not keyless:
        if type(keys) is not list or PyList_GET_SIZE(keys) != n:
            return None
        ks = keys
    cdef int64_t pid, pepoch, bseq, t = 0, base_ts, max_ts, vtotal = 0, ktotal = 0
    cdef int overflow = 0
    if type(producer_id) is not int or type(producer_epoch) is not int or type(base_sequence) is not int:
        return None
    pid = PyLong_AsLongLongAndOverflow(producer_id, &overflow)
    if overflow:
        return None
    pepoch = PyLong_AsLongLongAndOverflow(producer_epoch, &overflow)
    if overflow or pepoch < -32768 or pepoch > 32767:
        return None
    bseq = PyLong_AsLongLongAndOverflow(base_sequence, &overflow)
    if overflow or bseq < INT32_MIN or bseq > INT32_MAX:
        return None
    if _int64_at(ts, 0, &base_ts) < 0:
        return None
    max_ts = base_ts
    for i in range(1, n):
        if _int64_at(ts, i, &t) < 0:
            return None
        # t - base_ts must fit int64 (the reference packs it as one)
        if (base_ts < 0 and t > INT64_MAX + base_ts) or (base_ts > 0 and t < -INT64_MAX - 1 + base_ts):
            return None
        if t > max_ts:
            max_ts = t
    if not _all_bytes(vals, n, &vtotal):
        return None
    if not keyless and not _all_bytes(ks, n, &ktotal):
        return None
    cdef int64_t bitmap = (n + 7) // 8 if keyless else 0
    cdef int64_t size = HEADER_SIZE + 8 * n + 8 * (n + 1) + bitmap + ktotal + vtotal
    if size - LOG_OVERHEAD > INT32_MAX:
        return None
    out = PyByteArray_FromStringAndSize(NULL, size)
    # the allocation may run a collection, and a finalizer Python code: the lists are checked again as copied
    if PyList_GET_SIZE(vals) != n or PyList_GET_SIZE(ts) != n or (not keyless and PyList_GET_SIZE(ks) != n):
        raise RuntimeError("a list changed while the batch was encoded")
    cdef uint8_t* d = <uint8_t*>PyByteArray_AS_STRING(out)
    cdef uint8_t* p = d + HEADER_SIZE
    cdef uint8_t* koff = p + 8 * n
    cdef uint8_t* voff = koff + 4 * (n + 1)
    cdef uint8_t* data = voff + 4 * (n + 1)
    cdef int64_t acc = 0, kacc = 0
    cdef object o
    for i in range(n):
        if _int64_at(ts, i, &t) < 0:
            raise RuntimeError("a list changed while the batch was encoded")
        le64(p + 8 * i, t - base_ts)
    le32(koff, 0)
    le32(voff, 0)
    if keyless:
        memset(koff, 0, 4 * (n + 1))
        memset(data, 0, bitmap)
        data += bitmap
    else:
        for i in range(n):
            o = <object>PyList_GET_ITEM(ks, i)
            if type(o) is not bytes or PyBytes_GET_SIZE(o) > ktotal - kacc:
                raise RuntimeError("a list changed while the batch was encoded")
            memcpy(data + kacc, PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o))
            kacc += PyBytes_GET_SIZE(o)
            le32(koff + 4 * (i + 1), kacc)
        data += kacc
    for i in range(n):
        o = <object>PyList_GET_ITEM(vals, i)
        if type(o) is not bytes or PyBytes_GET_SIZE(o) > vtotal - acc:
            raise RuntimeError("a list changed while the batch was encoded")
        memcpy(data + acc, PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o))
        acc += PyBytes_GET_SIZE(o)
        le32(voff + 4 * (i + 1), acc)
    if acc != vtotal or kacc != ktotal:
        raise RuntimeError("a list changed while the batch was encoded")
    # the header (header.write_header's fields), then its CRC over [21, end)
    put64(d, 0)
    put32(d + 8, size - LOG_OVERHEAD)
    put32(d + 12, -1)
    d[16] = MAGIC
    put16(d + 21, ARROW_BODY | (HAS_KEY_NULLS if keyless else 0))
    put32(d + 23, n - 1)
    put64(d + 27, base_ts)
    put64(d + 35, max_ts)
    put64(d + 43, pid)
    put16(d + 51, <int>pepoch)
    put32(d + 53, bseq)
    put32(d + 57, n)
    put32(d + 17, _crc(d + CRC_START, size - CRC_START))
    return out


# ---------------------------------------------------------------- the log append's one-call step

from libc.errno cimport EINTR, errno
from posix.types cimport off_t
from posix.unistd cimport ftruncate, pwrite
from libc.string cimport strerror
from cpython.exc cimport PyErr_CheckSignals


cdef int _write_all(int fd, const uint8_t* d, int64_t n, int64_t position) except -1:
    """pwrite ``d[:n]`` at ``position`` (short writes continued, EINTR retried as os.pwrite does); on a
    failure the file is cut back to ``position`` (all or nothing; a failing cut is not reported over the
    write's error) and OSError raised."""
    cdef int64_t done = 0
    cdef ssize_t w
    cdef int err
    while done < n:
        with nogil:
            w = pwrite(fd, d + done, <size_t>(n - done), <off_t>(position + done))
        if w < 0:
            err = errno
            if err == EINTR:
                try:
                    PyErr_CheckSignals()
                except BaseException:
                    ftruncate(fd, <off_t>position)
                    raise
                continue
            ftruncate(fd, <off_t>position)
            raise OSError(err, strerror(err).decode())  # as os.pwrite raises it
        done += w
    return 0


def write_plain_batch(
    int64_t max_size, bint refuse_keyless, buf, base_offset, leader_epoch, int fd, int64_t position,
    int64_t roll_size, int64_t roll_offset
):
    """``plain_run.write_plain_batch``: one plain batch checked, stamped and written at ``position``
    of ``fd``; ``(size, next offset, max timestamp, whether it has our Arrow body)``, or None (nothing
    stamped or written)."""
    return write_plain_c(
        max_size, refuse_keyless, buf, base_offset, leader_epoch, fd, position, roll_size, roll_offset
    )


cdef object write_plain_c(
    int64_t max_size, bint refuse_keyless, object buf, object base_offset, object leader_epoch, int fd,
    int64_t position, int64_t roll_size, int64_t roll_offset
):
    # write_plain_batch for C callers (_cbody.pxd)
    cdef int64_t offset, epoch
    if _stamp_args(buf, base_offset, leader_epoch, &offset, &epoch) < 0:
        return None
    # the buffer protocol directly (a typed memoryview costs more than the rest of the checks): the
    # export keeps a bytearray from being resized while the write runs without the GIL
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE)
    try:
        return _write_plain(max_size, refuse_keyless, <uint8_t*>view.buf, view.len, offset, epoch, fd,
                            position, roll_size, roll_offset)
    finally:
        PyBuffer_Release(&view)


cdef object _write_plain(
    int64_t max_size, bint refuse_keyless, uint8_t* p, int64_t end, int64_t offset, int64_t epoch, int fd,
    int64_t position, int64_t roll_size, int64_t roll_offset
):
    # check_and_stamp's checks for a run of exactly one batch
    cdef int64_t size = 0
    cdef int32_t count = 0
    cdef int layout = _plain_batch(p, end, max_size, refuse_keyless, &size, &count)
    if layout < 0 or size != end or offset > INT64_MAX - count:
        return None
    # the segment's roll rule (LogSegment.should_roll's size and offset bounds; its age the caller's)
    if position > 0 and (position + size > roll_size or offset + count - 1 > roll_offset):
        return None
    if not _crc_matches(p, size):
        return None
    if <int64_t>be32(p + 8) + LOG_OVERHEAD != size:  # a Python-level CRC may let another thread at the buffer
        raise CorruptRecord("the produced batch changed while it was checked (another thread wrote to it)")
    put64(p, offset)
    put32(p + 12, epoch)
    cdef int64_t max_ts = be64(p + 35)
    _write_all(fd, p, size, position)
    return (size, offset + count, max_ts, layout == 1)
