# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled core of the coalesced produce append (issue 25): plain runs checked and stamped in C.

:func:`stamp_plain_runs` is the compiled twin of
:func:`pyspark_logsource.broker.log.append.stamp_plain_runs_py` (the reference: same
arguments, same results, same effects on the lists it is handed). A producer pipelining
one-message requests has dozens of runs per network read; this loop calls the format's
one-call check and stamp on each and moves its batches' positions, with no Python frame
per run.
"""

from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE


def stamp_plain_runs(
    check_and_stamp, list runs, Py_ssize_t i, offset, leader_epoch, at,
    list parts, list stamped, list appended,
):
    """``(index of the first refused run, next offset, bytes stamped)``: see ``stamp_plain_runs_py``."""
    cdef Py_ssize_t n = PyList_GET_SIZE(runs), k, m
    cdef list st
    cdef tuple t
    while i < n:
        records = <object>PyList_GET_ITEM(runs, i)
        got = check_and_stamp(records, offset, leader_epoch)
        if got is None:
            break
        st = got
        m = PyList_GET_SIZE(st)
        if m == 0:
            raise IndexError("list index out of range")  # as the reference's st[-1]
        for k in range(m):
            t = <tuple>PyList_GET_ITEM(st, k)
            pos, base, size, max_ts, count = t
            PyList_Append(stamped, (pos + at, base, size, max_ts, count))
        t = <tuple>PyList_GET_ITEM(st, m - 1)
        nxt = <object>PyTuple_GET_ITEM(t, 1) + <object>PyTuple_GET_ITEM(t, 4)
        PyList_Append(parts, records)
        PyList_Append(appended, (i, offset, nxt))
        at = at + len(records)
        offset = nxt
        i += 1
    return i, offset, at
