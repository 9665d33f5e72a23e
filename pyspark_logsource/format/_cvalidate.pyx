# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The produce path's check of an uncompressed Kafka-layout batch's records, in C, with no allocation.

``kafka_decode.validate_kafka_records`` is the reference. On the produce path it
ran ``_ckafka.parse_records``, which builds a dozen numpy arrays and gathers the
keys and values to return them: for a batch of one record that was most of the
broker's CPU per request (a Java producer's or librdkafka's one-message produce).
``_cwire.kafka_records_ok`` (also ``_cbody``'s one-call append check) walks the
same records with the same rules (the reads of ``parse_records`` with
``consecutive``: offset deltas 0..n-1, every length inside its record, headers
inside their record, no byte left over) and keeps only whether some key is
null. :func:`check_records` returns None for anything it does not accept (a
compressed batch is not its case: the caller passes only uncompressed ones),
and the caller then runs the reference, which raises the precise CorruptRecord.
Every read is bounded by the batch.
"""

from libc.stdint cimport uint8_t
from pyspark_logsource.format._cwire cimport kafka_records_ok

cdef enum:
    HEADER_SIZE = 61


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
    # one small batch: no nogil
    rc = kafka_records_ok(&view[0], pos + HEADER_SIZE, pos + size, count, &null_key)
    if rc < 0:
        return None
    return bool(null_key)
