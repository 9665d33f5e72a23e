# Included by _caccum.pyx (its cimports and imports are the ones this uses): the compiled sticky
# partitioner, kept in its own file so that each reads in one sitting.


cdef class StickyPartitioner:
    """The partition of keyless records per topic: ``partitioner.StickyPartitioner`` (the reference, whose
    docstring says the policy) compiled, so that ``fast_send`` asks and moves it in C."""

    cdef dict _current  # topic -> its sticky partition; read and written by this class alone
    cdef object _rng

    def __init__(self, rng=None):
        self._current = {}
        self._rng = _random.Random() if rng is None else rng

    cdef int64_t current(self, object topic, int64_t n) except? -1:
        """partition(): the topic's sticky partition, a random one first (or when ``n`` shrank below it)."""
        cdef PyObject* v = PyDict_GetItem(self._current, topic)
        cdef int64_t p
        if v != NULL:
            p = PyLong_AsLongLong(<object>v)
            if p < n:
                return p
        p = self._rng.randrange(n)
        self._current[topic] = p
        return p

    cdef int64_t moved(self, object topic, int64_t prev, int64_t n) except? -1:
        """on_new_batch(): the batch of ``prev`` completed; move on unless the topic already moved."""
        cdef PyObject* v = PyDict_GetItem(self._current, topic)
        cdef int64_t p
        if v == NULL:
            return prev
        p = PyLong_AsLongLong(<object>v)
        if p != prev:
            return p
        p = (prev + 1) % n if n > 1 else 0
        self._current[topic] = p
        return p

    def partition(self, topic, int64_t num_partitions) -> int:
        """The current sticky partition of ``topic``."""
        return self.current(topic, num_partitions)

    def on_new_batch(self, topic, int64_t prev_partition, int64_t num_partitions) -> int:
        """Called when the sticky partition's batch completed: move to the next partition."""
        return self.moved(topic, prev_partition, num_partitions)

    def spread(self, topic, sizes, int64_t num_partitions, batch_size):
        """Partitions of keyless records of these byte ``sizes``, sent in this order (see the reference)."""
        parts, after = _sticky_spread(self.current(topic, num_partitions), sizes, num_partitions, batch_size)
        if after is not None:
            self._current[topic] = after
        return parts
