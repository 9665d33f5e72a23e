# cython: language_level=3
"""Big-endian, little-endian and varint reads and writes shared by the compiled modules.

Inline C only (no module state, so nothing is imported at run time): ``cimport``
these where ``format/`` and ``protocol/`` read or write Kafka's wire layouts. The
reads take a pointer the caller has bounded; ``read_varint`` and ``read_int32``
are bounded by ``stop`` themselves.
"""

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef inline int64_t be64(const uint8_t* p) noexcept nogil:
    return <int64_t>(
        (<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40) | (<uint64_t>p[3] << 32)
        | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16) | (<uint64_t>p[6] << 8) | <uint64_t>p[7]
    )


cdef inline int32_t be32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int be16(const uint8_t* p) noexcept nogil:
    """A signed INT16."""
    return <int16_t>(<uint16_t>((p[0] << 8) | p[1]))


cdef inline void put64(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    cdef int i
    for i in range(8):
        p[i] = <uint8_t>(u >> (56 - 8 * i))


cdef inline void put32(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = <uint8_t>(u >> 24)
    p[1] = <uint8_t>(u >> 16)
    p[2] = <uint8_t>(u >> 8)
    p[3] = <uint8_t>u


cdef inline void put16(uint8_t* p, int v) noexcept nogil:
    p[0] = <uint8_t>((v >> 8) & 0xFF)
    p[1] = <uint8_t>(v & 0xFF)


cdef inline void le64(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    cdef int i
    for i in range(8):
        p[i] = <uint8_t>(u >> (8 * i))


cdef inline void le32(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = <uint8_t>u
    p[1] = <uint8_t>(u >> 8)
    p[2] = <uint8_t>(u >> 16)
    p[3] = <uint8_t>(u >> 24)


cdef inline int read_varint(const uint8_t* d, int64_t* q, int64_t stop, int width, uint64_t* out) noexcept nogil:
    """Read the varint at ``q[0]`` (at most ``width`` bytes, none at or past ``stop``): 0, or -1 if not."""
    cdef uint64_t u = 0
    cdef int64_t p = q[0]
    cdef int i
    cdef uint8_t b
    for i in range(width):
        if p + i >= stop:
            return -1
        b = d[p + i]
        u |= <uint64_t>(b & 0x7F) << (7 * i)
        if b < 0x80:
            out[0] = u
            q[0] = p + i + 1
            return 0
    return -1


cdef inline int64_t unzigzag(uint64_t u) noexcept nogil:
    return <int64_t>(u >> 1) ^ -<int64_t>(u & 1)


cdef inline int read_int32(const uint8_t* d, int64_t* q, int64_t stop, int64_t* out) noexcept nogil:
    """A zigzag varint that fits an INT32 (Kafka's record lengths and deltas): 0, or -1 if not."""
    cdef uint64_t u
    if read_varint(d, q, stop, 5, &u) < 0:
        return -1
    out[0] = unzigzag(u)
    if out[0] < -2147483648 or out[0] > 2147483647:
        return -1
    return 0


cdef inline bint legal_high(int attrs) noexcept nogil:
    """header.walk's ``attrs & _HIGH_MASK in _LEGAL_HIGH``: Kafka's 7 bits, or our Arrow body (0x1000) with
    its 0x0700 flags."""
    cdef int high = attrs & (0xFFFF & ~0x7F)
    if high == 0:
        return True
    return (high & ~0x0700) == 0x1000


# The record batch header (format.header's layout): what a compiled module outside format/ may read or
# write of it goes through these, so the byte offsets stay format's.

cdef enum:
    BATCH_CRC_START = 21  # the CRC covers the batch from the attributes on

cdef inline int batch_attributes(const uint8_t* header) noexcept nogil:
    """The attributes field (INT16) of the batch header at ``header``, as its 16 bits."""
    return (header[21] << 8) | header[22]


cdef inline void stamp_offset_epoch(uint8_t* header, int64_t offset, int64_t length, int64_t epoch) noexcept nogil:
    """format.header.stamp_offset_epoch: the base offset, batch length and partition leader epoch."""
    put64(header, offset)
    put32(header + 8, length)
    put32(header + 12, epoch)


cdef inline void put_producer_header(
    uint8_t* header, int64_t batch_length, int attrs, int64_t count, int64_t base_ts, int64_t max_ts,
    int64_t producer_id, int producer_epoch, int base_sequence
) noexcept nogil:
    """format.header.write_producer_header's fields but the CRC: base offset 0, no leader epoch, magic 2.
    The caller checks the ranges (an epoch outside INT16 is its InvalidRequest)."""
    put64(header, 0)
    put32(header + 8, batch_length)
    put32(header + 12, -1)
    header[16] = 2
    put16(header + 21, attrs)
    put32(header + 23, count - 1)  # last offset delta
    put64(header + 27, base_ts)
    put64(header + 35, max_ts)
    put64(header + 43, producer_id)
    put16(header + 51, producer_epoch)
    put32(header + 53, base_sequence)
    put32(header + 57, count)


cdef inline void put_batch_crc(uint8_t* header, int64_t crc) noexcept nogil:
    """The CRC-32C field (of the bytes from BATCH_CRC_START to the batch's end)."""
    put32(header + 17, crc)


# Kafka's varint records (format.kafka_decode's layout): the produce path's check of an uncompressed batch

cdef inline int kafka_records_ok(
    const uint8_t* d, int64_t p, int64_t e, int64_t count, bint* null_key
) noexcept nogil:
    """0 if the ``count`` records of an uncompressed Kafka-layout batch in ``d[p:e]`` (its body, after
    the header) parse as ``kafka_decode.validate_kafka_records`` requires (``null_key`` set if a key is
    null), else -1. Every read is bounded by ``e``."""
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
    if p != e or key_total > 2147483647 or val_total > 2147483647:
        return -1
    return 0
