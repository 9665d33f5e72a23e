# cython: language_level=3, boundscheck=False, wraparound=False
"""The client I/O thread's compiled step: the producer's appended answers of a run matched to their
batches (``answers.split_appended_py`` is the reference)."""

from pyspark_logsource.protocol._canswers cimport ProduceAnswer

from pyspark_logsource.protocol.connection import ANSWER_TYPES


cdef object _one_partition(resp):
    """The one partition's answer of a ProduceResponse, or None (``answers._one_partition``)."""
    parts = resp.partitions if resp is not None else None
    return parts[0] if parts is not None and len(parts) == 1 else None


def split_appended(list pairs, Py_ssize_t i, sender):
    """``answers.split_appended_py``, compiled: the same run and index for any pairs."""
    cdef list ok = []
    cdef Py_ssize_t n = len(pairs)
    cdef ProduceAnswer pa
    while i < n:
        cb, a = <tuple>pairs[i]
        if cb.sender is not sender:
            break
        b = cb.batch
        if type(a) is ProduceAnswer:  # the compiled row: its fields in C
            pa = <ProduceAnswer>a
            if pa.error_code != 0:
                break
            part = b.partition
            if pa.partition != part or pa.topic != b.topic:
                break
            off = pa.base_offset
        else:
            pr = a if type(a) in ANSWER_TYPES else _one_partition(a.response)
            if pr is None or pr.error_code:
                break
            part = b.partition
            if pr.partition != part or pr.topic != b.topic:
                break
            off = pr.base_offset
        ok.append((b, (part, off, off + b.record_count - 1)))
        i += 1
    return ok, i
