"""Producer.flush(): it waits for every batch unanswered when it was called, in whatever order the answers
come, and lets go of the answered ones while it waits for the rest (oldest first, a chunk at a time)."""

from __future__ import annotations

import random
import threading
import time
import weakref

import pytest

from pyspark_logsource import Producer
from pyspark_logsource.client import producer as producer_module
from pyspark_logsource.client.accumulator import ProducerBatch
from pyspark_logsource.errors import RequestTimedOut

CHUNK = producer_module._FLUSH_CHUNK


class _Batch(ProducerBatch):
    """A batch the test can hold a weak reference to."""

    __slots__ = ("__weakref__",)


def _producer() -> Producer:
    # no broker: the batches are put in by the test and answered by its thread, never sent
    return Producer("127.0.0.1:1", enable_idempotence=False)


def _queue(p: Producer, n: int) -> list[_Batch]:
    batches = [_Batch("t", i % 3, 0.0) for i in range(n)]
    with p._acc.lock:
        for b in batches:
            p._acc.incomplete[b] = None
    return batches


@pytest.mark.parametrize("order", ["oldest first", "newest first", "shuffled"])
def test_flush_returns_once_every_batch_is_answered_whatever_the_order(order: str) -> None:
    p = _producer()
    try:
        batches = _queue(p, 2 * CHUNK + 300)
        answers = list(enumerate(batches))
        if order == "newest first":
            answers.reverse()
        elif order == "shuffled":
            random.Random(7).shuffle(answers)
        last_answered = []

        def answer() -> None:
            time.sleep(0.05)  # flush() is waiting by now, as a rule
            for k, (i, b) in enumerate(answers):
                p._acc.complete(b, (b.partition, i, i))
                if k % 97 == 0:
                    time.sleep(0.001)
            last_answered.append(time.monotonic())

        t = threading.Thread(target=answer)
        t.start()
        p.flush(timeout=30)
        returned = time.monotonic()
        t.join()
        assert last_answered and returned >= last_answered[0]
        assert [b.outcome for b in batches] == [((b.partition, i, i), None) for i, b in enumerate(batches)]
        assert not p._acc.incomplete
    finally:
        p.close(timeout=1)


def test_flush_lets_go_of_the_answered_batches_while_it_waits() -> None:
    p = _producer()
    try:
        batches = _queue(p, 2 * CHUNK + 10)
        oldest = [weakref.ref(b) for b in batches[:CHUNK]]
        rest = [weakref.ref(b) for b in batches[CHUNK:]]
        first, later = batches[:CHUNK], batches[CHUNK:]
        del batches
        checked = threading.Event()
        seen: list[tuple[int, int]] = []

        def answer() -> None:
            time.sleep(0.05)
            while first:
                b = first.pop(0)
                p._acc.complete(b, (b.partition, 0, 0))
            del b
            # flush() holds the second chunk now: the first chunk's batches are freed, the rest are not
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(r() is not None for r in oldest):
                time.sleep(0.01)
            seen.append((sum(r() is not None for r in oldest), sum(r() is not None for r in rest)))
            checked.set()
            while later:
                b = later.pop(0)
                p._acc.complete(b, (b.partition, 0, 0))

        t = threading.Thread(target=answer)
        t.start()
        p.flush(timeout=30)
        t.join()
        assert checked.is_set()
        assert seen == [(0, CHUNK + 10)]
    finally:
        p.close(timeout=1)


def test_flush_times_out_on_a_batch_never_answered_and_keeps_waiting_batches_unanswered() -> None:
    """A typed error after the timeout; the batches stay incomplete, for a later flush or close()."""
    p = _producer()
    try:
        batches = _queue(p, CHUNK + 5)
        for i, b in enumerate(batches[:-1]):
            p._acc.complete(b, (b.partition, i, i))
        t0 = time.monotonic()
        with pytest.raises(RequestTimedOut):
            p.flush(timeout=0.3)
        assert 0.25 <= time.monotonic() - t0 < 10
        assert list(p._acc.incomplete) == [batches[-1]] and batches[-1].outcome is None
        p._acc.complete(batches[-1], (0, 1, 1))
        p.flush(timeout=5)  # answered since: returns at once
    finally:
        p.close(timeout=1)
