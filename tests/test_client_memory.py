"""The clients' memory over millions of calls (issue 25's Must show), on whichever path is in use.

``make test`` runs this module twice: with the compiled core and with ``LOGSOURCE_NO_EXTENSIONS=1``
(the pure-Python reference), so both paths are held to the same bounds.

* ``send()`` of 10M records into a stopped broker holds at most ``buffer_memory`` of records: the
  rest are refused with BufferFull, nothing piles up (the accounting and the process's RSS show it);
* a million ``send()`` into a running broker and ``poll()`` of them leave no reference behind:
  ``tracemalloc``'s traced memory after the loop is what it was before, within a small constant.
"""

from __future__ import annotations

import gc
import importlib
import os
import signal
import tracemalloc

import pytest
from support.brokers import broker_process

from pyspark_logsource import Admin, Consumer, Producer
from pyspark_logsource.errors import BufferFull
from pyspark_logsource.format import _speedups

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def test_send_10m_into_a_stopped_broker_is_bounded_by_buffer_memory(tmp_path):
    print("path:", _speedups.IMPLEMENTATION)
    memory = 1 << 20
    with broker_process(tmp_path / "b") as b:
        with Admin(b.bootstrap) as a:
            a.create_topic("stopped", 1)
        # Timeouts far past the loop: on a loaded machine 10M sends can outlast request.timeout.ms, and a
        # timed-out request retried or a batch expired by delivery.timeout.ms would free memory early and
        # change what this counts (the bound while nothing is acknowledged); timeouts have their own tests.
        p = Producer(
            b.bootstrap,
            buffer_memory=memory,
            max_block_ms=0,
            linger_ms=0,
            batch_size=16384,
            request_timeout_ms=900_000,
            delivery_timeout_ms=1_800_000,
        )
        try:
            p.send("stopped", b"warm").result(10)
            pad = b"x" * 190
            accepted, refused = [], 0
            os.kill(b.pid, signal.SIGSTOP)  # the broker stops answering: nothing is acknowledged
            try:
                rss0 = _rss()
                for i in range(10_000_000):
                    try:
                        f = p.send("stopped", b"%010d" % i + pad)  # a new 200-byte value each time
                    except BufferFull:
                        refused += 1
                        continue
                    accepted.append(f)
                    if i % 1_000_000 == 0:
                        assert p._acc.used <= memory
                grown = _rss() - rss0
                used = p._acc.used
            finally:
                os.kill(b.pid, signal.SIGCONT)
            # what was accepted fits in buffer_memory (216 bytes accounted per record) ...
            assert used <= memory
            assert 0 < len(accepted) <= memory // 216
            assert refused == 10_000_000 - len(accepted)
            # ... and the process did not grow with the 2 GB of values refused (10M x 200 bytes)
            assert grown < 64 << 20, f"RSS grew by {grown} bytes"
            p.flush(60)
            assert all(f.exception(0) is None for f in accepted)
        finally:
            p.close()


def test_a_full_buffer_refuses_every_kind_of_send_at_once_when_max_block_ms_is_0(tmp_path):
    """max_block_ms=0: keyless, keyed, explicit-partition, header and str sends into a full buffer are
    refused with the same BufferFull (the compiled send() refuses in C, the others in the accumulator),
    nothing is accounted for them, and what was accepted is delivered once the broker answers again."""
    print("path:", _speedups.IMPLEMENTATION)
    memory = 64 << 10
    with broker_process(tmp_path / "b") as b:
        with Admin(b.bootstrap) as a:
            a.create_topic("full", 2)
        p = Producer(b.bootstrap, buffer_memory=memory, max_block_ms=0, linger_ms=0, batch_size=4096)
        try:
            p.send("full", b"warm").result(10)
            accepted = []
            os.kill(b.pid, signal.SIGSTOP)
            try:
                with pytest.raises(BufferFull):
                    for i in range(10_000):
                        accepted.append(p.send("full", b"%05d" % i + b"x" * 200))
                used = p._acc.used
                kinds = [
                    {"value": b"v" * 200},
                    {"value": b"v" * 200, "key": b"k"},
                    {"value": b"v" * 200, "partition": 1},
                    {"value": b"v" * 200, "headers": [("h", b"1")]},
                    {"value": "v" * 200},
                    {"value": b"v" * 200, "timestamp_ms": 1_700_000_000_000},
                ]
                for kw in kinds:
                    for _ in range(3):
                        with pytest.raises(
                            BufferFull, match=f"buffer_memory={memory} bytes is full .*max_block_ms=0"
                        ):
                            p.send("full", **kw)
                assert p._acc.used == used
                # a record larger than the whole buffer keeps its own reason
                with pytest.raises(BufferFull, match="larger than buffer_memory"):
                    p.send("full", b"x" * (memory + 1))
            finally:
                os.kill(b.pid, signal.SIGCONT)
            assert 100 < len(accepted) < 10_000
            p.flush(30)
            assert all(f.exception(0) is None for f in accepted)
        finally:
            p.close()


def test_a_million_send_and_poll_leave_no_reference_behind(tmp_path):
    print("path:", _speedups.IMPLEMENTATION)
    per_round = 10_000
    values = [b"%06d" % i + b"x" * 194 for i in range(per_round)]
    with broker_process(tmp_path / "b") as b:
        with Admin(b.bootstrap) as a:
            a.create_topic("loop", 1)
        p = Producer(b.bootstrap, linger_ms=5, batch_size=16384)
        c = Consumer(b.bootstrap)
        got = 0

        def rounds(k: int, backlog: bool = False) -> None:
            nonlocal got
            for _ in range(k):
                for v in values:
                    p.send("loop", v)  # the future is dropped at once, as fire-and-forget callers do
                if not backlog:
                    p.flush(30)
                    want = got + per_round
                    while got < want:
                        got += len(c.poll(1000, max_records=2000))

        try:
            # warm-up: pyarrow imports pandas (~23 MB) at the first compute call of some kinds (the
            # multi-batch decode's take() when a fetch holds many batches): once, before, not a leak
            importlib.import_module("pandas")
            # then a backlog (fetches of many batches) and the steady loop
            rounds(10, backlog=True)
            p.flush(30)
            c.assign([("loop", 0)])
            c.seek(("loop", 0), 0)
            while got < 10 * per_round:
                got += len(c.poll(1000, max_records=5000))
            rounds(10)
            tracemalloc.start()
            try:
                gc.collect()
                before = tracemalloc.get_traced_memory()[0]
                rounds(1_000_000 // per_round)
                gc.collect()
                after = tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()
        finally:
            p.close()
            c.close()
        assert got == 1_200_000
        # A leak of one object per message would be >= 28 MB here; what remains is bounded structures
        # (e.g. a connection's answered-request list, compacted past 1024 entries): ~150-350 KB measured.
        assert after - before < 1 << 20, f"traced memory grew by {after - before} bytes"
