# The compact producer's answer of _canswers.pyx, for the compiled modules that read its fields.
from libc.stdint cimport int64_t


cdef class ProduceAnswer:
    cdef public int correlation_id
    cdef public object topic
    cdef public int partition
    cdef public int error_code
    cdef public int64_t base_offset
    cdef public int64_t log_append_time_ms
    cdef public int64_t log_start_offset
    cdef public int throttle_time_ms
