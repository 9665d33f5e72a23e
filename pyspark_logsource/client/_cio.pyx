# cython: language_level=3, boundscheck=False, wraparound=False
"""The client I/O thread's compiled steps: a read's answers matched to the pending requests, the
producer's appended answers of a run matched to their batches, and those batches completed (each
function names its pure-Python reference, which it is tested against)."""

from pyspark_logsource.protocol._canswers cimport ProduceAnswer

from pyspark_logsource.protocol.connection import ANSWER_TYPES
from pyspark_logsource.protocol.primitives import ProtocolError


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


# ------------------------------------------------------------------ the completion of an appended run
# Each step below is the loop of one owner's method, compiled; the owner calls it under its own lock
# with its own tables, and its pure-Python twin beside that method is the reference.

def settle_oldest(list done, Py_ssize_t i, dict assigned, dict last_acked, dict stamped, dict unresolved):
    """``sequences.settle_oldest_py``, compiled: the same tables changed, the same index returned."""
    cdef Py_ssize_t n = len(done)
    cdef list queue
    while i < n:
        b = (<tuple>done[i])[0]
        seq = b.base_sequence
        if seq is not None:
            if unresolved:
                return i
            tp = b.tp
            q = assigned.get(tp)
            if not q:
                return i
            queue = <list?>q  # checked: a wrong type is a TypeError, not a read past an object
            if queue[0] is not b:
                return i
            del queue[0]
            stamped.pop(id(b), None)
            last_acked[tp] = (seq + b.record_count - 1) & 0x7FFFFFFF
        i += 1
    return n


def release_run(list done, dict incomplete):
    """``accumulator.release_run_py``, compiled: the batches left ``incomplete``, their sizes summed."""
    size = 0
    for item in done:
        b = (<tuple>item)[0]
        incomplete.pop(b, None)
        size += b.size
    return size


def resolve_run(list done, done_states):
    """``accumulator.resolve_run_py``, compiled: the same outcomes set, the same futures to complete."""
    cdef list waiting = []
    for item in done:
        b, result = <tuple>item
        if b.outcome is None:
            b.outcome = (result, None)
            f = b._future
            if f is not None and f._state not in done_states:
                waiting.append((f, result))
    return waiting


def run_sizes(list done):
    """``answers.run_sizes_py``, compiled: the same records and bytes."""
    records = size = 0
    for item in done:
        b = (<tuple>item)[0]
        records += b.record_count
        enc = b.encoded
        size += b.size if enc is None else len(enc)
    return records, size


# ------------------------------------------------------------------ BrokerConnection._dispatch's steps

def match_answers(list answers, pending):
    """``dispatch.match_answers_py``, compiled: the same pairs, sums and errors."""
    cdef list done = []
    cdef ProduceAnswer pa
    throttle = throttle_sum = 0
    pop = pending.popleft
    for r in answers:
        cid, cb, _ = <tuple>pop()
        if type(r) is ProduceAnswer:  # the compiled row: its fields in C
            pa = <ProduceAnswer>r
            if cid != pa.correlation_id:
                raise ProtocolError(f"response {pa.correlation_id} does not match request {cid}")
            t = pa.throttle_time_ms
        else:
            if cid != r.correlation_id:
                raise ProtocolError(f"response {r.correlation_id} does not match request {cid}")
            t = r.throttle_time_ms
        if t:
            throttle_sum += t
            if t > throttle:
                throttle = t
        done.append((cb, r))
    return done, throttle_sum, throttle


def pop_times(sent_at, Py_ssize_t n):
    """``dispatch.pop_times_py``, compiled: the same first time and sum."""
    pop = sent_at.popleft
    cdef double first = pop()
    cdef double total = first
    cdef Py_ssize_t k
    for k in range(n - 1):
        total += <double>pop()
    return first, total
