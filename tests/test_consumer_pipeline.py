"""The consumer keeps two fetches per partition in flight (the second at a guessed offset).

Against a broker process over real sockets: batches of very different sizes make the guesses miss
(too far: a gap, dropped and fetched again; too short: an overlap, trimmed), and every offset must
still come out exactly once and in order, through ``poll()`` and ``poll_arrow()``, in both batch
layouts, and across a seek while fetches are in flight.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from support.brokers import broker_process

from pyspark_logsource import Admin, Consumer, Producer
from pyspark_logsource.client import consumer as consumer_module

pytestmark = pytest.mark.timeout(120)

SIZES = [1, 3, 50, 7, 400, 2, 120, 1, 1, 90, 300, 5, 60, 11, 250, 4]


@pytest.fixture(scope="module")
def topic(layout_broker):
    """A 1-partition topic of batches of mixed sizes on each stored layout; yields (bootstrap, topic, values)."""
    bs = layout_broker.bootstrap
    with Admin(bs) as admin:
        admin.create_topic("mixed", 1)
    rng = random.Random(7)
    values: list[bytes] = []
    with Producer(bs, batch_size=1 << 20, linger_ms=0) as p:
        for _ in range(6):
            for n in SIZES:
                vals = [b"%08d-" % (len(values) + i) + bytes(rng.randrange(0, 300)) for i in range(n)]
                values += vals
                p.send_arrow("mixed", pa.table({"value": pa.array(vals, pa.binary())}), partition=0)
        p.flush()
    return bs, "mixed", values


def consumer(bootstrap: str) -> Consumer:
    # small fetches: a few batches each, so that most fetches are pipelined and many guesses miss
    return Consumer(bootstrap, max_partition_fetch_bytes=6000, fetch_max_wait_ms=50)


def read(c: Consumer, count: int, arrow: bool) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    for _ in range(2000):
        if len(got) >= count:
            break
        if arrow:
            for t in c.poll_arrow(200).values():
                got += zip(t.column("offset").to_pylist(), t.column("value").to_pylist(), strict=True)
        else:
            got += [(m.offset, m.value) for m in c.poll(200, max_records=137)]
    return got


@pytest.mark.parametrize("arrow", [False, True], ids=["poll", "poll_arrow"])
def test_every_offset_once_and_in_order_with_two_fetches_in_flight(topic, arrow):
    assert consumer_module.FETCH_PIPELINE_DEPTH == 2
    bootstrap, name, values = topic
    with consumer(bootstrap) as c:
        c.assign([(name, 0)])
        c.seek((name, 0), 0)
        got = read(c, len(values), arrow)
        st = c._parts[(name, 0)]
        assert got == list(enumerate(values))
        assert c.poll(100) == []  # and nothing more
        # the pipeline was used, and missed guesses were dropped (not delivered twice or skipped)
        assert st.sent_ahead > 10
        assert st.dropped > 0


def test_a_seek_while_fetches_are_in_flight_restarts_the_stream(topic):
    bootstrap, name, values = topic
    with consumer(bootstrap) as c:
        c.assign([(name, 0)])
        c.seek((name, 0), 0)
        first = read(c, 700, arrow=False)
        assert first[:700] == list(enumerate(values))[:700]
        c.seek((name, 0), 123)  # fetches for later offsets are in flight: their answers must not be used
        again = read(c, len(values) - 123, arrow=False)
        assert again == list(enumerate(values))[123:]


@pytest.mark.parametrize("depth", [2, 3])
def test_guesses_restart_from_the_fetch_position_and_fetches_leave_in_order(tmp_path, monkeypatch, depth):
    """Batches of one size after a 1-record batch: the first guess lands inside a batch. The guesses
    after it go on from the fetch position (they went on from that guess, each one duplicating the
    fetch before it: about half of all answers dropped), and fetches planned by poll() and by the I/O
    thread leave in the order planned (one that overtook the fetch before it was dropped)."""
    monkeypatch.setattr(consumer_module, "FETCH_PIPELINE_DEPTH", depth)
    values = [b"%08d" % i + bytes(200) for i in range(1 + 40 * 50)]
    with broker_process(tmp_path) as b:
        with Admin(b.bootstrap) as admin:
            admin.create_topic("even", 1)
        with Producer(b.bootstrap, batch_size=1 << 20, linger_ms=0) as p:
            for lo, hi in [(0, 1)] + [(i, i + 50) for i in range(1, len(values), 50)]:
                p.send_arrow("even", pa.table({"value": pa.array(values[lo:hi], pa.binary())}), partition=0)
            p.flush()
        # one 50-record batch (~10 KB) per answer
        with Consumer(b.bootstrap, max_partition_fetch_bytes=8000, fetch_max_wait_ms=50) as c:
            c.assign([("even", 0)])
            c.seek(("even", 0), 0)
            got = read(c, len(values), arrow=True)
            st = c._parts[("even", 0)]
            assert got == list(enumerate(values))
            assert st.sent_ahead > 10
            assert st.dropped <= depth  # the guesses made before the first 50-record answer
