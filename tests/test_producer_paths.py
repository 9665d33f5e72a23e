"""The producer's send() paths (issue 14): the keyless fast path and the general one share batches.

Records of every kind go into the same open batch of one partition (a long linger keeps it
open), so each path appends after the others; a consumer then reads back every field.
"""

from __future__ import annotations

import inspect

import pytest

from pyspark_logsource import Admin, Consumer, Producer
from pyspark_logsource.errors import ClientClosed

pytestmark = pytest.mark.timeout(60)


def _read_all(bootstrap: str, topic: str, n: int) -> list:
    with Consumer(bootstrap) as c:
        c.assign([(topic, 0)])
        c.seek((topic, 0), 0)
        out: list = []
        for _ in range(50):
            out += c.poll(500)
            if len(out) >= n:
                break
    return out


def test_mixed_records_in_one_batch_keep_their_fields(broker):
    Admin(broker.bootstrap).create_topic("mixed", 1)
    with Producer(broker.bootstrap, linger_ms=60000, batch_size=1 << 20) as p:
        futs = [
            p.send("mixed", b"a"),  # opens the batch (general path), then the fast path
            p.send("mixed", b"b"),
            p.send("mixed", b"c", key=b"k1"),  # the batch's first key: earlier records keep None
            p.send("mixed", b"d"),
            p.send("mixed", b"e", headers=[("h", b"1")]),  # first headers: earlier records have none
            p.send("mixed", b"f"),
            p.send("mixed", "g", partition=0, timestamp_ms=1234),
            p.send("mixed", b"h"),
        ]
        assert len({id(f._batch) for f in futs}) == 1  # one batch: the paths shared it
        p.flush(30)
        assert [f.result(10) for f in futs] == [(0, i) for i in range(8)]
    got = _read_all(broker.bootstrap, "mixed", 8)
    assert [m.value for m in got] == [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h"]
    assert [m.key for m in got] == [None, None, b"k1", None, None, None, None, None]
    assert [list(m.headers or []) for m in got] == [[], [], [], [], [("h", b"1")], [], [], []]
    assert got[6].timestamp == 1234


def test_fast_path_closes_full_batches_and_refuses_after_close(broker):
    Admin(broker.bootstrap).create_topic("full", 1)
    p = Producer(broker.bootstrap, linger_ms=60000, batch_size=10 * 216)
    futs = [p.send("full", b"%03d" % i + b"x" * 197) for i in range(25)]
    # 10 records of 216 bytes (value + per-record overhead) fill a batch: 3 batches, two of them full
    assert len({id(f._batch) for f in futs}) == 3
    p.flush(30)
    assert [f.result(10)[1] for f in futs] == list(range(25))
    p.close()
    with pytest.raises(ClientClosed):
        p.send("full", b"late")
    assert [m.value[:3] for m in _read_all(broker.bootstrap, "full", 25)] == [b"%03d" % i for i in range(25)]


def test_fast_path_respects_buffer_memory(broker):
    Admin(broker.bootstrap).create_topic("mem", 1)
    with Producer(broker.bootstrap, linger_ms=60000, batch_size=1 << 20, buffer_memory=1000) as p:
        first = [p.send("mem", b"x" * 400), p.send("mem", b"y" * 400)]  # 2 x (400 + 16) bytes fit
        # the third does not: send() blocks, the lingering batch goes out at once, then it is queued
        third = p.send("mem", b"z" * 400)
        assert first[0].done() and first[1].done() and first[1].result(0) == (0, 1)
        p.flush(30)
        assert third.result(0) == (0, 2)
    assert [m.value[:1] for m in _read_all(broker.bootstrap, "mem", 3)] == [b"x", b"y", b"z"]


def test_send_is_the_compiled_fast_path_when_built(broker):
    """With the compiled accumulator (client/_caccum), ``send`` is its fast_send function; switched off, the method.
    make test runs this module both ways, so every test above holds on both."""
    from pyspark_logsource.client import producer as producer_module
    from pyspark_logsource.format import _speedups

    Admin(broker.bootstrap).create_topic("bound", 1)
    with Producer(broker.bootstrap, linger_ms=60000, batch_size=3 * 216) as p:
        compiled = producer_module._caccum is not None
        assert compiled == (not inspect.ismethod(p.send))
        if _speedups.DISABLED:
            assert not compiled
        futs = [p.send("bound", b"%03d" % i + b"x" * 197) for i in range(7)]  # 3 + 3 + 1: two closed
        assert [f._index for f in futs] == [0, 1, 2, 0, 1, 2, 0]
        assert futs[0]._batch.closed and futs[3]._batch.closed and not futs[6]._batch.closed
        p.flush(30)
        assert [f.result(10) for f in futs] == [(0, i) for i in range(7)]
        # the rest goes to the Python method: keys, headers, partitions, str values
        last = p.send("bound", "s", key="k", headers={"h": b"1"}, partition=0)
        p.flush(30)
        assert last.result(10) == (0, 7)
    got = _read_all(broker.bootstrap, "bound", 8)
    assert [m.value[:3] for m in got] == [b"%03d" % i for i in range(7)] + [b"s"]
    assert got[7].key == b"k" and list(got[7].headers) == [("h", b"1")]


def test_batch_size_one_queues_each_keyless_record_alone(broker):
    """batch_size 1 (a request per record, paper.py's batch-1 row): each keyless record is a closed batch
    of its own (the compiled send() queues it in C, ``_caccum.fast_send``; the pure one ``Producer._alone``),
    the sticky partition moves on per record, offsets follow per partition, memory is given back."""
    from pyspark_logsource.client import producer as producer_module

    Admin(broker.bootstrap).create_topic("alone", 2)
    with Producer(broker.bootstrap, batch_size=1, linger_ms=60000, max_in_flight=64) as p:
        futs = [p.send("alone", b"%03d" % i + b"x" * 100) for i in range(40)]
        assert len({id(f._batch) for f in futs}) == 40
        assert all(f._index == 0 and f._batch.closed and f._batch.record_count == 1 for f in futs)
        assert inspect.ismethod(p.send) == (producer_module._caccum is None)  # compiled: fast_send
        parts = [f.partition for f in futs]
        assert parts == [(parts[0] + i) % 2 for i in range(40)]  # sticky: the next partition per batch
        assert p._sticky.partition("alone", 2) == (parts[-1] + 1) % 2  # the partitioner's state moved too
        p.flush(30)
        got = [f.result(10) for f in futs]
        assert got == [(parts[i], i // 2) for i in range(40)]
        assert p.metrics()["buffer_used"] == 0 and p.metrics()["incomplete_batches"] == 0
    with pytest.raises(ClientClosed):
        p.send("alone", b"late")
