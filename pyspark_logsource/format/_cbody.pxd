# cython: language_level=3
"""What other compiled modules call of ``_cbody.pyx`` directly, with no Python call between: the log
append's one-call step (``broker/log/_cseg.pyx``'s append end calls it when the log's write step is
``write_plain_batch`` itself), the batch CRC-32C (``client/_caccum.pyx``'s batch encode), and the folding
CRC-32C alone (``_ckafka.pyx``'s fetch walk)."""

from libc.stdint cimport int64_t, uint8_t, uint32_t


cdef object write_plain_c(
    int64_t max_size, bint refuse_keyless, object buf, object base_offset, object leader_epoch, int fd,
    int64_t position, int64_t roll_size, int64_t roll_offset
)


cdef uint32_t batch_crc32c(const uint8_t* p, int64_t n) except? 0xFFFFFFFF


cdef bint fold_crc32c(const uint8_t* p, int64_t n, uint32_t* out) noexcept nogil
