# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The produce path's check of an uncompressed Kafka-layout batch's records, in C, with no allocation.

``kafka_decode.validate_kafka_records`` is the reference. On the produce path it
ran ``_ckafka.parse_records``, which builds a dozen numpy arrays and gathers the
keys and values to return them: for a batch of one record that was most of the
broker's CPU per request (a Java producer's or librdkafka's one-message produce).
:func:`check_records` walks the same records with the same rules (the reads of
``parse_records`` with ``consecutive``: offset deltas 0..n-1, every length inside
its record, headers inside their record, no byte left over) and keeps only
whether some key is null. It returns None for anything it does not accept (a
compressed batch is not its case: the caller passes only uncompressed ones),
and the caller then runs the reference, which raises the precise CorruptRecord.
Every read is bounded by the batch.
"""

from libc.stdint cimport int64_t, uint8_t, uint64_t
from pyspark_logsource.format._cwire cimport read_int32, read_varint, unzigzag

cdef int64_t INT32_MAX = 2147483647

cdef enum:
    HEADER_SIZE = 61


cdef int _check(const uint8_t* d, int64_t p, int64_t e, int64_t count, bint* null_key) noexcept nogil:
    """0 if the ``count`` records in ``d[p:e]`` parse (``null_key`` set if a key is null), else -1."""
    cdef int64_t j, q, rec_end, od, kl, vl, hc, k, klen, vlen
    cdef int64_t key_total = 0, val_total = 0
    cdef uint64_t u
    if count < 0 or count > e - p:  # every record takes at least one byte
        return -1
    for j in range(count):
        q = p
        if read_varint(d, &q, e, 5, &u) < 0 or u & 1:
            return -1
        rec_end = q + <int64_t>(u >> 1)
        if rec_end > e:
            return -1
        q += 1  # the attributes byte
        if q > rec_end:
            return -1
        if read_varint(d, &q, rec_end, 10, &u) < 0:  # timestamp delta
            return -1
        if read_int32(d, &q, rec_end, &od) < 0 or od != j:
            return -1
        if read_int32(d, &q, rec_end, &kl) < 0 or kl < -1:
            return -1
        if kl >= 0:
            q += kl
            key_total += kl
        else:
            null_key[0] = True
        if read_int32(d, &q, rec_end, &vl) < 0 or vl < -1:
            return -1
        if vl >= 0:
            q += vl
            val_total += vl
        if read_int32(d, &q, rec_end, &hc) < 0 or hc < 0:
            return -1
        if hc == 0:
            if q != rec_end:
                return -1
        else:
            if 2 * hc > rec_end - q:
                return -1
            for k in range(hc):  # the headers (_ckafka._header_spans' rules)
                if read_varint(d, &q, rec_end, 5, &u) < 0:
                    return -1
                klen = unzigzag(u)
                if klen < 0 or q + klen >= rec_end:
                    return -1
                q += klen
                if read_varint(d, &q, rec_end, 5, &u) < 0:
                    return -1
                vlen = unzigzag(u)
                if vlen < -1:
                    return -1
                if vlen > 0:
                    q += vlen
                if q > rec_end:
                    return -1
            if q != rec_end:
                return -1
        p = rec_end
    if p != e or key_total > INT32_MAX or val_total > INT32_MAX:
        return -1
    return 0


def check_records(buf, Py_ssize_t pos, Py_ssize_t size, Py_ssize_t count):
    """Whether some record of the uncompressed batch at ``buf[pos:pos + size]`` (``count`` records) has a
    null key, or None if the records do not parse as ``validate_kafka_records`` requires (or the
    arguments are out of the buffer)."""
    cdef const uint8_t[::1] view
    try:
        view = buf
    except (TypeError, ValueError, BufferError):
        return None
    cdef Py_ssize_t n = view.shape[0]
    if pos < 0 or size < HEADER_SIZE or pos > n - size:
        return None
    cdef bint null_key = False
    cdef int rc
    rc = _check(&view[0], pos + HEADER_SIZE, pos + size, count, &null_key)  # one small batch: no nogil
    if rc < 0:
        return None
    return bool(null_key)
