# cython: language_level=3, boundscheck=False, cdivision=True, initializedcheck=False
# (wraparound stays on: ``batches[-1]`` of a deque, as in the reference)
"""The compiled core of an idempotent append's producer checks (issue 25).

:func:`stage_next` and :func:`commit` are the compiled twins of
``ProducerAppend.stage_next_py`` and ``ProducerAppend.commit_py`` (with ``ProducerEntry.add``) in
:mod:`pyspark_logsource.broker.log.producer_state`, the references: same arguments, same
results, the same staged batches, tails, copies and entries afterwards. An idempotent
producer at one message per request stages and commits one batch per request; these take
the Python frames (two per batch) off that path. ``producer_state`` gives them its two types
(:func:`bind`) and binds them as ``ProducerAppend.stage_next`` and ``ProducerAppend.commit``:
they stay the class's own methods.
"""

from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM

cdef object _batch_metadata = None
cdef object _producer_entry = None
cdef object _new_meta = tuple.__new__
cdef object _INT32_MAX = (1 << 31) - 1


def bind(batch_metadata, producer_entry):
    """Take ``BatchMetadata`` and ``ProducerEntry``, which the staged batches and new entries are made of."""
    global _batch_metadata, _producer_entry
    _batch_metadata = batch_metadata
    _producer_entry = producer_entry
    return True


def stage_next(append, pid, epoch, seq, last_offset_delta, base_offset, max_timestamp):
    """``ProducerAppend.stage_next_py``, compiled: True and the batch staged if it is its
    producer's next, else False and nothing staged."""
    cdef dict tails = append._tails
    cdef PyObject* found = PyDict_GetItem(tails, pid)
    cdef tuple tail
    if found is NULL:
        entry = (<dict>append._producers).get(pid)
        if entry is None:
            if seq != 0:
                return False
        else:
            batches = entry.batches
            if epoch != entry.epoch:
                return False
            if seq != (((batches[-1][1] + 1) & _INT32_MAX) if batches else 0):
                return False
    else:
        tail = <tuple>found
        if epoch != <object>PyTuple_GET_ITEM(tail, 0):
            return False
        if seq != (<object>PyTuple_GET_ITEM(tail, 1) + 1) & _INT32_MAX:
            return False
    last_seq = (seq + last_offset_delta) & _INT32_MAX
    batch = _new_meta(_batch_metadata, (seq, last_seq, base_offset, base_offset + last_offset_delta))
    PyList_Append(append._staged, (pid, epoch, batch, max_timestamp))
    PyDict_SetItem(tails, pid, (epoch, last_seq))
    copies = append._copies
    if copies is not None and pid in copies:
        copies[pid].add(epoch, batch, max_timestamp)
    return True


def commit(append):
    """``ProducerAppend.commit_py``, compiled: each staged batch added to its producer's entry
    (made when the producer has none), as ``ProducerEntry.add`` adds it."""
    cdef dict producers = append._producers
    cdef list staged = append._staged
    cdef Py_ssize_t i, n = PyList_GET_SIZE(staged)
    cdef tuple item
    cdef PyObject* found
    for i in range(n):
        item = <tuple>PyList_GET_ITEM(staged, i)
        pid = <object>PyTuple_GET_ITEM(item, 0)
        epoch = <object>PyTuple_GET_ITEM(item, 1)
        batch = <object>PyTuple_GET_ITEM(item, 2)
        ts = <object>PyTuple_GET_ITEM(item, 3)
        found = PyDict_GetItem(producers, pid)
        if found is NULL:
            entry = _producer_entry(pid, epoch)
            PyDict_SetItem(producers, pid, entry)
        else:
            entry = <object>found
        # ProducerEntry.add
        batches = entry.batches
        if epoch != entry.epoch:
            entry.epoch = epoch
            batches.clear()
        batches.append(batch)
        if ts > entry.last_timestamp:
            entry.last_timestamp = ts
