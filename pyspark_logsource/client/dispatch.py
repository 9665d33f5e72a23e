"""The per-answer steps of :meth:`~.connection.BrokerConnection._dispatch` (the client's I/O thread).

Each runs under the connection's lock over the connection's own queues, which it is handed: the
answers of one read matched to the pending requests, and the write times of the answered requests
summed for the metrics. These functions are the references of their compiled twins in ``_cio``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ..format._speedups import load_extension
from ..protocol.primitives import ProtocolError


def match_answers_py(answers: list, pending: deque) -> tuple[list[tuple[Any, Any]], int, int]:
    """Each of ``answers`` matched to the request at ``pending``'s front ``(correlation id, callback,
    deadline)``, which leaves it: ``([(callback, answer)], throttle_time_ms summed, its largest)``.
    ProtocolError for an answer to another request (the requests before it have left ``pending``)."""
    pop, done, throttle, throttle_sum = pending.popleft, [], 0, 0
    for r in answers:
        cid, cb, _ = pop()
        if cid != r.correlation_id:  # the sans-IO layer checks order too
            raise ProtocolError(f"response {r.correlation_id} does not match request {cid}")
        t = r.throttle_time_ms
        if t:
            throttle_sum += t
            if t > throttle:
                throttle = t
        done.append((cb, r))
    return done, throttle_sum, throttle


def pop_times_py(sent_at: deque, n: int) -> tuple[float, float]:
    """The first of the ``n`` write times at ``sent_at``'s front and their sum; they leave it (n >= 1)."""
    pop = sent_at.popleft
    first = total = pop()
    for _ in range(n - 1):
        total += pop()
    return first, total


#: the compiled twins (client/_cio.pyx), None when not built or LOGSOURCE_NO_EXTENSIONS is set
_cio = load_extension(__package__ + "._cio")
match_answers = _cio.match_answers if _cio is not None else match_answers_py
pop_times = _cio.pop_times if _cio is not None else pop_times_py
