# cython: language_level=3, boundscheck=False, wraparound=False
"""The requests of a numbered round of single batches, made in C (the producer's sender at batch 1).

``round_calls`` is ``sender.round_calls`` in C (its reference: the same
signature, the same result): for each numbered batch, its deadline set where it
has none, its leader looked up, and its ``(request, answer)`` pair appended to
its node's list: a ``OnePartitionProduce`` over the batch's bytes and a
``OneBatchAnswer`` over the batch, each allocated and filled by slot offset
(no Python ``__init__`` per batch). Both types are handed in by ``bind`` (the
client and protocol modules are not imported here).
"""

from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF

cdef extern from "Python.h":
    ctypedef PyObject* (*allocfunc)(PyTypeObject*, Py_ssize_t)
    ctypedef struct TypeAlloc "PyTypeObject":
        allocfunc tp_alloc
    # a __slots__ member's descriptor: where the slot sits in the instance (descrobject.h, structmember.h)
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    int T_OBJECT_EX

cdef type _request_type = None
cdef type _answer_type = None
cdef Py_ssize_t _r_topic, _r_partition, _r_records, _r_acks, _r_timeout, _a_sender, _a_batch


cdef Py_ssize_t _slot_offset(type cls, str name) except -1:
    d = getattr(cls, name, None)
    if type(d).__name__ != "member_descriptor" or (<PyMemberDescrObject*>d).d_member.type != T_OBJECT_EX:
        raise TypeError(f"{cls.__name__}.{name} is not a __slots__ member")
    return (<PyMemberDescrObject*>d).d_member.offset


cdef inline void _set_slot(object o, Py_ssize_t offset, object value) noexcept:
    cdef PyObject** at = <PyObject**>((<char*><PyObject*>o) + offset)
    cdef PyObject* old = at[0]
    Py_INCREF(value)
    at[0] = <PyObject*>value
    Py_XDECREF(old)


cdef object _new(type cls):
    cdef PyObject* raw = (<TypeAlloc*>(<PyTypeObject*>cls)).tp_alloc(<PyTypeObject*>cls, 0)
    if raw == NULL:
        raise MemoryError()
    o = <object>raw
    Py_DECREF(o)  # <object> took its own reference
    return o


def bind(type request_type, type answer_type):
    """Make ``round_calls``' pairs as ``request_type(topic, partition, records, acks, timeout_ms)`` and
    ``answer_type(sender, batch)`` (OnePartitionProduce, OneBatchAnswer), whose ``__init__`` only sets
    those ``__slots__``. Raises TypeError if one is not such a slot."""
    global _request_type, _answer_type, _r_topic, _r_partition, _r_records, _r_acks, _r_timeout
    global _a_sender, _a_batch
    # all looked up before any is set: a refused type leaves the binding as it was
    r = [_slot_offset(request_type, n) for n in ("topic", "partition", "records", "acks", "timeout_ms")]
    a = [_slot_offset(answer_type, n) for n in ("sender", "batch")]
    _r_topic, _r_partition, _r_records, _r_acks, _r_timeout = r
    _a_sender, _a_batch = a
    _request_type, _answer_type = request_type, answer_type
    return True


def round_calls(done, leaders, by_node, deadline, acks, timeout_ms, sender, no_leader):
    """``sender.round_calls`` in C: None, or ``(the index in done of the first batch whose leader is an
    instance of no_leader, that error)`` (the batches before it have their pairs)."""
    if _request_type is None:
        raise TypeError("bind() was not called")
    for i, b in enumerate(done):
        if b.deadline == 0.0:
            b.deadline = deadline
        node = leaders[b.tp]
        if isinstance(node, no_leader):
            return i, node
        calls = by_node.get(node)
        if calls is None:
            calls = by_node[node] = []
        req = _new(_request_type)
        _set_slot(req, _r_topic, b.topic)
        _set_slot(req, _r_partition, b.partition)
        _set_slot(req, _r_records, b.encoded)
        _set_slot(req, _r_acks, acks)
        _set_slot(req, _r_timeout, timeout_ms)
        answer = _new(_answer_type)
        _set_slot(answer, _a_sender, sender)
        _set_slot(answer, _a_batch, b)
        calls.append((req, answer))
    return None
