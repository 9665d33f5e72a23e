# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled core of the coalesced produce append (issue 25): the usual runs checked and stamped in C.

:func:`stamp_usual_runs` and :func:`stamp_producer_run` are the compiled twins of
``stamp_usual_runs_py`` and ``stamp_producer_run_py`` in
:mod:`pyspark_logsource.broker.log.append` (the references: same arguments, same results,
same effects on the lists, buffers and producer checks they are handed). A producer
pipelining one-message requests has dozens of runs per network read; the loop takes each
plain run by the format's one-call check and stamp and each idempotent producer's next run
by :func:`stamp_producer_run` (the format's walk of the run, ``plain_run.producer_run``, the
producer state's ``stage_next``, both compiled too, and the stamp in C), with no Python frame per run.
"""

from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM
from libc.stdint cimport int64_t, uint8_t

from pyspark_logsource.format._cwire cimport batch_attributes, stamp_offset_epoch

from pyspark_logsource.format.plain_run import producer_run as _producer_run


def stamp_usual_runs(
    check_and_stamp, stamp_producer_run, producers, list runs, Py_ssize_t i, offset, leader_epoch, at,
    list parts, list stamped, list appended,
):
    """``(index of the first run not taken, next offset, bytes stamped, some run taken has our Arrow
    body)``: see ``stamp_usual_runs_py``."""
    cdef Py_ssize_t n = PyList_GET_SIZE(runs), k, m
    cdef list st
    cdef tuple t
    cdef bint arrow = False
    while i < n:
        records = <object>PyList_GET_ITEM(runs, i)
        got = check_and_stamp(records, offset, leader_epoch)
        if got is not None:
            has_arrow, st = got
            if has_arrow:
                arrow = True
            m = PyList_GET_SIZE(st)
            if m == 0:
                raise IndexError("list index out of range")  # as the reference's st[-1]
            for k in range(m):
                t = <tuple>PyList_GET_ITEM(st, k)
                pos, base, size, max_ts, count = t
                PyList_Append(stamped, (pos + at, base, size, max_ts, count))
            t = <tuple>PyList_GET_ITEM(st, m - 1)
            nxt = <object>PyTuple_GET_ITEM(t, 1) + <object>PyTuple_GET_ITEM(t, 4)
        else:
            nxt = stamp_producer_run(records, offset, leader_epoch, producers, stamped, at)
            if nxt is None:
                break
            arrow = True  # the idempotent producer's runs it takes have our Arrow body
        PyList_Append(parts, records)
        PyList_Append(appended, (i, offset, nxt))
        at = at + len(records)
        offset = nxt
        i += 1
    return i, offset, at, arrow


cdef enum:
    HEADER_SIZE = 61
    LOG_OVERHEAD = 12
    ARROW_BODY = 0x1000  # format.header's bits
    TXN_BITS = 0x30


cdef int64_t INT64_MAX = 0x7FFFFFFFFFFFFFFF


def stamp_producer_run(
    int64_t max_size, bint refuse_keyless, buf, offset, leader_epoch, producers, list stamped, at,
):
    """The next offset, or None (nothing stamped or staged): see ``stamp_producer_run_py``."""
    cdef uint8_t[::1] b
    cdef int64_t off, nxt, total = 0, epoch, count, length, pos
    cdef int attrs
    cdef Py_ssize_t k, m
    cdef list batches
    cdef tuple item
    if type(buf) is bytearray:
        b = buf
    elif type(buf) is memoryview and not buf.readonly and buf.c_contiguous and buf.ndim == 1 and buf.format == "B":
        b = buf
    else:
        return None
    if type(offset) is not int or type(leader_epoch) is not int:
        return None
    if not 0 <= offset <= INT64_MAX or not -2147483648 <= leader_epoch <= 2147483647:
        return None
    off, epoch = offset, leader_epoch
    if b.shape[0] < HEADER_SIZE:
        return None
    attrs = batch_attributes(&b[0])
    if not attrs & ARROW_BODY or attrs & TXN_BITS:
        return None
    # the format's walk of the run (walk strict, CRC-32C, Arrow bodies only, none transactional, no null key
    # where refused): the fields each batch's producer check and stamp need, no BatchHeader per batch
    batches = _producer_run(max_size, refuse_keyless, buf)
    if batches is None:
        return None
    m = PyList_GET_SIZE(batches)
    for k in range(m):
        total += <int64_t>(<object>PyTuple_GET_ITEM(<tuple>PyList_GET_ITEM(batches, k), 7))
    if off > INT64_MAX - total:
        return None
    point = producers.savepoint() if m > 1 else None  # one batch: nothing staged when it fails
    stage = producers.stage_next
    nxt = off
    for k in range(m):
        item = <tuple>PyList_GET_ITEM(batches, k)
        pid = <object>PyTuple_GET_ITEM(item, 4)
        seq = <object>PyTuple_GET_ITEM(item, 6)
        if pid >= 0 and seq >= 0:
            if not stage(
                pid, <object>PyTuple_GET_ITEM(item, 5), seq, <object>PyTuple_GET_ITEM(item, 2), nxt,
                <object>PyTuple_GET_ITEM(item, 3),
            ):
                if point is not None:
                    producers.rollback(point)
                return None
        nxt += <int64_t>(<object>PyTuple_GET_ITEM(item, 7))
    for k in range(m):
        item = <tuple>PyList_GET_ITEM(batches, k)
        pos = <object>PyTuple_GET_ITEM(item, 0)
        length = <object>PyTuple_GET_ITEM(item, 1)
        count = <object>PyTuple_GET_ITEM(item, 7)
        stamp_offset_epoch(&b[pos], off, length, epoch)
        PyList_Append(stamped, (pos + at, off, length + LOG_OVERHEAD, <object>PyTuple_GET_ITEM(item, 3), count))
        off += count
    return off
