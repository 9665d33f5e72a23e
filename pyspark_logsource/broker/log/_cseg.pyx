# cython: language_level=3
"""Compiled twins of ``segment_tail.SegmentTailPy`` (the reference) and ``now_ms_py``: the append end of a
log segment, so that a plain produce's bookkeeping after the format's one-call step runs with no Python
frame (see segment_tail.py for what each method does); of ``log_end.LogEndPy``: the partition log's append
end, whose ``append`` is a plain produce's whole per-call work in one call (lock, epoch, the segment's
step above, the log end offset, the flush rule, the answer); and of the two index appends the segment's
calls, ``index.OffsetIndex.append_py`` and ``index.TimeIndex.maybe_append_py`` (the indexes' own methods,
bound by index.py). tests/test_log_segment_tail.py and tests/test_log_end.py compare each with its
reference.
"""

from functools import partial
from types import MethodType
from weakref import WeakMethod

from cpython cimport array
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport Py_SIZE, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from libc.stdint cimport int64_t, uint32_t

from pyspark_logsource.errors import StorageError
from pyspark_logsource.format import _cbody

from pyspark_logsource.format._cbody cimport write_plain_c

cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t nitems)

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec* tp)
    enum: CLOCK_REALTIME

cdef enum:
    MAX_RELATIVE_OFFSET = 0xFFFFFFFF

cdef int64_t INT64_MAX = 0x7FFFFFFFFFFFFFFF
cdef int64_t INT64_MIN = -0x7FFFFFFFFFFFFFFF - 1


cdef inline int64_t _now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


def now_ms():
    """``segment_tail.now_ms_py``: wall-clock milliseconds."""
    return _now_ms()


cdef class SegmentTail:
    """``segment_tail.SegmentTailPy``, compiled."""

    cdef readonly int fd
    cdef readonly int64_t base_offset, size, next_offset, max_timestamp, offset_of_max_timestamp
    cdef readonly int64_t bytes_since_index, roll_size, roll_offset
    cdef readonly object holds_arrow, created_ms
    cdef int64_t _segment_bytes, _segment_ms, _index_interval, _time_handed
    cdef int64_t _roll_ms  # created_ms + segment.ms, INT64_MAX while empty or past int64
    cdef bint _index_full
    cdef object _offset_index_append, _time_index_append
    cdef object _offset_index  # the OffsetIndex when _offset_index_append is this module's, bound: called in C

    def __init__(self, int fd, int64_t base_offset, int64_t size, config, offset_index_append,
                 time_index_append):
        self.fd = fd
        self.base_offset = base_offset
        self.size = size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_index = 0
        self.holds_arrow = False if size == 0 else None
        self.roll_offset = base_offset + MAX_RELATIVE_OFFSET
        self.created_ms = None
        self._roll_ms = INT64_MAX
        self._index_full = False
        self._offset_index_append = offset_index_append
        self._offset_index = None
        if type(offset_index_append) is MethodType and offset_index_append.__func__ is offset_index_append_fn:
            self._offset_index = offset_index_append.__self__
        self._time_index_append = time_index_append
        self._time_handed = -1
        self.set_config(config)

    @property
    def roll_ms(self):
        created = self.created_ms
        return float("inf") if created is None else created + self._segment_ms

    cdef void _set_roll_ms(self):
        created = self.created_ms
        if created is None:
            self._roll_ms = INT64_MAX
            return
        cdef int64_t c = created
        self._roll_ms = INT64_MAX if c > INT64_MAX - self._segment_ms else c + self._segment_ms

    def set_config(self, config):
        self._segment_bytes = config.segment_bytes
        self._segment_ms = config.segment_ms
        self._index_interval = config.index_interval_bytes
        self._set_roll_ms()
        self.set_index_full(self._index_full)

    def set_index_full(self, bint full):
        self._index_full = full
        self.roll_size = -1 if full else self._segment_bytes

    def set_created(self, created_ms):
        self.created_ms = created_ms
        self._set_roll_ms()

    def restart(self, int64_t next_offset, int64_t max_timestamp, int64_t offset_of_max_timestamp):
        self.next_offset = next_offset
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp
        self.bytes_since_index = 0
        self._time_handed = -1

    def set_holds_arrow(self, holds_arrow):
        self.holds_arrow = holds_arrow

    def set_size(self, int64_t size):
        self.size = size

    def track(self, int64_t base_offset, int64_t position, int64_t size, int64_t max_timestamp,
              int64_t next_offset, bint arrow, bint index):
        if arrow:
            self.holds_arrow = True
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, base_offset
        if index and self.bytes_since_index >= self._index_interval and position:
            self._add_index_entries(base_offset, position)
            self.bytes_since_index = 0
        self.bytes_since_index += size
        self.next_offset = next_offset

    cdef bint _add_index_entries(self, int64_t base_offset, int64_t position) except -1:
        cdef bint full
        if self._offset_index is not None:
            full = _offset_index_append_c(self._offset_index, base_offset, position)
        else:
            full = self._offset_index_append(base_offset, position)
        cdef int64_t ts = self.max_timestamp
        if ts != self._time_handed:
            self._time_handed = ts
            if self._time_index_append(ts, self.offset_of_max_timestamp):
                full = True
        return full

    def record(self, int64_t start, int64_t n, list batches, bint arrow, int64_t now):
        if arrow:
            self.holds_arrow = True  # before the bytes are published to readers
        if self.created_ms is None:
            self.set_created(now)
        self.size = start + n  # publish: readers may now see these bytes
        cdef int64_t since = self.bytes_since_index, interval = self._index_interval
        cdef int64_t rel, base, size, ts, count, pos
        for item in batches:
            rel, base, size, ts, count = item
            if ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = ts, base
            pos = start + rel
            if since >= interval and pos:
                if self._add_index_entries(base, pos):
                    self.set_index_full(True)
                since = 0
            since += size
            self.next_offset = base + count
        self.bytes_since_index = since

    def append_plain(self, write, records, base_offset, leader_epoch, int64_t now):
        return self._append_plain(write, records, base_offset, leader_epoch, now)

    cdef object _append_plain(self, write, records, base_offset, leader_epoch, int64_t now):
        cdef int64_t start = self.size
        if start and now >= self._roll_ms:  # the age roll bound (size and offset: write's)
            return None
        done = write(records, base_offset, leader_epoch, self.fd, start, self.roll_size, self.roll_offset)
        return self._recorded(done, start, base_offset, now)

    cdef object _append_plain_c(self, int64_t max_size, bint refuse_keyless, records, base_offset, leader_epoch,
                                int64_t now):
        # _append_plain with write = partial(_cbody.write_plain_batch, max_size, refuse_keyless), called in C
        cdef int64_t start = self.size
        if start and now >= self._roll_ms:
            return None
        done = write_plain_c(max_size, refuse_keyless, records, base_offset, leader_epoch, self.fd, start,
                             self.roll_size, self.roll_offset)
        return self._recorded(done, start, base_offset, now)

    cdef object _recorded(self, done, int64_t start, base_offset, int64_t now):
        if done is None:
            return None
        cdef int64_t size, ts
        size, nxt, ts, arrow = <tuple>done
        if arrow:  # a Kafka-layout batch leaves it as it was (False, or None: unknown)
            self.holds_arrow = True  # before the bytes are published to readers
        if self.created_ms is None:
            self.set_created(now)
        self.size = start + size  # publish: readers may now see these bytes
        if ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = ts, base_offset
        cdef int64_t since = self.bytes_since_index
        if since >= self._index_interval and start:
            if self._add_index_entries(base_offset, start):
                self.set_index_full(True)
            since = 0
        self.bytes_since_index = since + size
        self.next_offset = nxt
        return nxt


# ------------------------------------------------------------ the partition log's append end (log_end.py)

cdef object _MINUS_ONE = -1
#: append.AppendInfo, check_stamp_runs and new_info, imported by the first LogEnd (append.py imports what
#: imports this module)
cdef object AppendInfo = None
cdef object check_stamp_runs = None
cdef object new_info = None


cdef _import_append():
    global AppendInfo, check_stamp_runs, new_info
    from pyspark_logsource.broker.log import append

    # a NamedTuple: a tuple subclass with no instance dict, allocated as tuples are
    assert issubclass(append.AppendInfo, tuple) and append.AppendInfo.__basicsize__ == tuple.__basicsize__
    AppendInfo, check_stamp_runs, new_info = append.AppendInfo, append.check_stamp_runs, append.new_info


cdef object _append_info(int64_t base, int64_t offset):
    """``AppendInfo(base, offset - 1, -1, offset - base, False)``, filled in as ``tuple.__new__`` does."""
    cdef object info = PyType_GenericAlloc(<PyTypeObject*>AppendInfo, 5)
    cdef object first = base, last = offset - 1, count = offset - base
    Py_INCREF(first)
    PyTuple_SET_ITEM(info, 0, first)
    Py_INCREF(last)
    PyTuple_SET_ITEM(info, 1, last)
    Py_INCREF(_MINUS_ONE)
    PyTuple_SET_ITEM(info, 2, _MINUS_ONE)
    Py_INCREF(count)
    PyTuple_SET_ITEM(info, 3, count)
    Py_INCREF(False)
    PyTuple_SET_ITEM(info, 4, False)
    return info


cdef inline int64_t _threshold(object value, bint* reachable) except? -1:
    """A flush threshold as int64; ``reachable`` False when it is past every int64 (never reached)."""
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(value, &overflow)
    reachable[0] = overflow <= 0
    return INT64_MIN if overflow < 0 else (INT64_MAX if overflow > 0 else x)


cdef class LogEnd:
    """``log_end.LogEndPy``, compiled."""

    cdef readonly int64_t leo, latest_epoch
    cdef readonly bint closed
    cdef object _lock, _acquire, _release, _assign_epoch, _flush, _roll, _general, _producer_state, _name
    cdef object _segment, _validator, _write
    cdef SegmentTail _tail
    cdef int64_t _due_offset, _due_ms, _segment_bytes, _max_size
    cdef bint _offset_reachable, _ms_reachable, _log_append_time, _direct, _refuse_keyless

    def __init__(self, int64_t leo, lock, assign_epoch, flush, roll, producer_state, str name):
        if AppendInfo is None:
            _import_append()
        self.leo = leo
        self.latest_epoch = -1
        self.closed = False
        self._lock = lock
        self._acquire = lock.acquire
        self._release = lock.release
        self._assign_epoch = WeakMethod(assign_epoch)  # the epoch cache tells this end its latest: no cycle
        self._flush = WeakMethod(flush)
        self._roll = WeakMethod(roll)
        self._general = None
        self._producer_state = producer_state
        self._name = name
        self._segment = None
        self._tail = None
        self._validator = None
        self._write = None
        self._log_append_time = True  # nothing is taken before set_config
        self._segment_bytes = 0
        self._due_offset = self._due_ms = INT64_MIN
        self._offset_reachable = self._ms_reachable = True

    def set_leo(self, int64_t offset):
        self.leo = offset

    def set_closed(self):
        self.closed = True

    def set_segment(self, segment):
        self._tail = segment.tail  # a TypeError unless it is this module's SegmentTail
        self._segment = segment

    def set_latest_epoch(self, int64_t epoch):
        self.latest_epoch = epoch

    def set_flush_due(self, due_offset, due_ms):
        self._due_offset = _threshold(due_offset, &self._offset_reachable)
        self._due_ms = _threshold(due_ms, &self._ms_reachable)

    def set_general(self, general):
        self._general = WeakMethod(general)

    def set_config(self, config, validator):
        self._log_append_time = config.log_append_time
        self._segment_bytes = config.segment_bytes
        self._validator = validator
        write = self._write = validator.write_plain
        # the compiled step itself (AppendValidator's partial of it): called in C, with no Python call
        self._direct = False
        if (
            type(write) is partial and write.func is _cbody.write_plain_batch and not write.keywords
            and len(write.args) == 2 and type(write.args[0]) is int and -INT64_MAX <= write.args[0] <= INT64_MAX
        ):
            self._max_size = write.args[0]
            self._refuse_keyless = write.args[1]
            self._direct = True

    def append(self, records, leader_epoch=None):
        return self._append(records, leader_epoch)

    def append_or_general(self, records, leader_epoch=None, *, control=False):
        info = self._append(records, leader_epoch)
        if info is not None:
            return info
        general = None if self._general is None else self._general()
        if general is None:
            raise StorageError(f"log {self._name} is gone")
        return general(records, leader_epoch, control)

    cdef object _append(self, records, leader_epoch):
        if self._log_append_time or self.closed or self._tail is None:
            return None
        cdef int64_t now = _now_ms()
        cdef int64_t latest, base, offset, epoch
        cdef bint due
        self._acquire()
        try:
            latest = self.latest_epoch
            if leader_epoch is None:
                leader_epoch = latest if latest > 0 else 0
            base = self.leo
            if self.closed:
                return None
            try:
                if self._direct:
                    nxt = self._tail._append_plain_c(self._max_size, self._refuse_keyless, records, base,
                                                     leader_epoch, now)
                else:
                    nxt = self._tail._append_plain(self._write, records, base, leader_epoch, now)
            except OSError as e:
                raise StorageError(f"append to {self._segment.log_path} failed: {e}") from e
            if nxt is None:
                nxt = self._append_run(records, base, leader_epoch, now)
                if nxt is None:
                    return None
            offset = nxt
            self.leo = offset  # publish: readers may now fetch up to here
            epoch = leader_epoch  # an int the write took (in int32)
            if epoch > latest:
                assign = self._assign_epoch()
                if assign is not None:  # None: the log is being dropped
                    assign(leader_epoch, base)
            due = (self._offset_reachable and offset >= self._due_offset) or (
                self._ms_reachable and now >= self._due_ms
            )
        finally:
            self._release()
        if due:
            flush = self._flush()
            if flush is not None:
                flush()  # outside the partition lock: flush takes the flush lock first
        return _append_info(base, offset)

    cdef object _append_run(self, records, int64_t base, leader_epoch, int64_t now):
        # as LogEndPy._append_run (a run of several plain batches, or one that rolls the segment first)
        got = self._validator.check_and_stamp(records, base, leader_epoch)
        if got is None:
            return None
        arrow, stamped = got
        last = stamped[-1]
        offset = last[1] + last[4]
        cdef SegmentTail tail = self._tail
        cdef int64_t size = tail.size
        if size and (size + len(records) > tail.roll_size or now >= tail._roll_ms or offset - 1 > tail.roll_offset):
            roll = self._roll()
            if roll is None:
                return None
            roll(now)  # the segment list tells this end the new active segment
        segment = self._segment
        try:
            segment.append(records, stamped, arrow=arrow)
        except OSError as e:
            raise StorageError(f"append to {segment.log_path} failed: {e}") from e
        return offset

    def append_runs(self, list runs, list out):
        cdef int64_t now = _now_ms()
        cdef int64_t latest, epoch
        cdef bint due
        with self._lock:
            if self.closed:
                raise StorageError(f"log {self._name} is closed")
            latest = self.latest_epoch
            epoch = latest if latest > 0 else 0
            lat = self._log_append_time
            # checked and stamped in place (the plain runs by one compiled call each); nothing is
            # published before the write, and a retry one by one stamps the runs again
            done = check_stamp_runs(self._validator, self._producer_state, runs, self.leo, epoch, now, lat, out)
            if done is None:
                return False  # a transactional run: one by one
            parts, stamped, appended, offset, producers, arrow = done
            if not parts:
                return True
            segment = self._segment
            size = sum(map(len, parts))
            # one by one, a run rolls the segment if it finds it too full: with all of them in, or (an
            # empty segment takes its first run whatever its size) by their bytes and offsets alone
            if (
                segment.should_roll(size, offset - 1, now)
                if segment.size
                else size > self._segment_bytes or offset - 1 - segment.base_offset > 0xFFFFFFFF
            ):
                return False  # rare (once a segment): the one-by-one path rolls where it must
            try:
                segment.append(parts, stamped, arrow=arrow)
            except OSError as e:
                raise StorageError(f"append to {segment.log_path} failed: {e}") from e
            if producers is not None:
                producers.commit()
            self.leo = offset  # publish: readers may now fetch up to here
            if epoch > latest:
                assign = self._assign_epoch()
                if assign is not None:  # None: the log is being dropped
                    assign(epoch, appended[0][1])
            ts = now if lat else -1
            for i, base, nxt in appended:
                out[i] = new_info(AppendInfo, (base, nxt - 1, ts, nxt - base, False))
            due = (self._offset_reachable and offset >= self._due_offset) or (
                self._ms_reachable and now >= self._due_ms
            )
        if due:
            flush = self._flush()
            if flush is not None:
                flush()  # outside the partition lock, as append does
        return True


# ------------------------------------------------------------ the indexes' appends (index.py's methods)

cdef inline bint _fits_u32(object v, uint32_t* out):
    """``v`` is an int in 0..2**32-1 (what an ``array('I')`` holds): set ``out``."""
    if type(v) is not int:
        return False
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow or x < 0 or x > 0xFFFFFFFF:
        return False
    out[0] = <uint32_t>x
    return True


cdef inline void _push_u32(array.array a, uint32_t v) except *:
    cdef Py_ssize_t n = Py_SIZE(a)
    array.resize_smart(a, n + 1)
    a.data.as_uints[n] = v


def offset_index_append(self, offset, position):
    """``index.OffsetIndex.append_py`` (the reference), compiled: the same entries, result and errors."""
    keys = self._keys
    values = self._values
    rel = offset - self.base_offset
    cdef uint32_t k, v
    if (
        type(keys) is array.array and type(values) is array.array
        and (<array.array>keys).ob_descr.typecode == b"I" and (<array.array>values).ob_descr.typecode == b"I"
        and _fits_u32(rel, &k) and _fits_u32(position, &v)
    ):
        if Py_SIZE(keys) and k <= (<array.array>keys).data.as_uints[Py_SIZE(keys) - 1]:
            return False
        _push_u32(values, v)  # the payload first: a reader finding the key finds its payload
        _push_u32(keys, k)
        return Py_SIZE(keys) >= self.max_entries
    # anything else as the reference does it (its errors included)
    if keys and rel <= keys[-1]:
        return False
    values.append(position)
    keys.append(rel)
    return len(keys) >= self.max_entries


cdef object _offset_index_append_c(index, int64_t offset, int64_t position):
    """``offset_index_append(index, offset, position)`` for C callers (the tail): its fast path with no
    Python call or int objects; anything else through it (the same entries, result and errors)."""
    keys = index._keys
    values = index._values
    base = index.base_offset
    cdef int overflow = 0
    cdef long long b
    cdef int64_t rel
    cdef Py_ssize_t n
    if (
        type(keys) is array.array and type(values) is array.array and type(base) is int
        and (<array.array>keys).ob_descr.typecode == b"I" and (<array.array>values).ob_descr.typecode == b"I"
    ):
        b = PyLong_AsLongLongAndOverflow(base, &overflow)
        if not overflow and b >= 0 and offset >= 0:
            rel = offset - b
            if 0 <= rel <= 0xFFFFFFFF and 0 <= position <= 0xFFFFFFFF:
                n = Py_SIZE(keys)
                if n and <uint32_t>rel <= (<array.array>keys).data.as_uints[n - 1]:
                    return False
                _push_u32(values, <uint32_t>position)  # the payload first, as in offset_index_append
                _push_u32(keys, <uint32_t>rel)
                return Py_SIZE(keys) >= index.max_entries
    return offset_index_append(index, offset, position)


#: the def function itself (the tail recognises its bound methods)
offset_index_append_fn = offset_index_append


def offset_index_append_from_c(index, int64_t offset, int64_t position):
    """The tail's C call of ``offset_index_append`` (tests/test_log_end.py compares it with the reference)."""
    return _offset_index_append_c(index, offset, position)


def time_index_maybe_append(self, timestamp, offset):
    """``index.TimeIndex.maybe_append_py`` (the reference), compiled: the same entries, result and errors."""
    keys = self._keys
    values = self._values
    cdef uint32_t v
    cdef int overflow = 0
    cdef long long ts
    cdef Py_ssize_t n
    if (
        type(timestamp) is int and type(keys) is array.array and type(values) is array.array
        and (<array.array>keys).ob_descr.typecode == b"q" and (<array.array>values).ob_descr.typecode == b"I"
    ):
        ts = PyLong_AsLongLongAndOverflow(timestamp, &overflow)
        n = Py_SIZE(keys)
        if not overflow:
            if n and ts <= (<array.array>keys).data.as_longlongs[n - 1]:
                return False
            rel = offset - self.base_offset
            if _fits_u32(rel, &v):
                _push_u32(values, v)  # the payload first, as in offset_index_append
                array.resize_smart(keys, n + 1)
                (<array.array>keys).data.as_longlongs[n] = ts
                return n + 1 >= self.max_entries
    if keys and timestamp <= keys[-1]:
        return False
    values.append(offset - self.base_offset)
    keys.append(timestamp)
    return len(keys) >= self.max_entries
