"""Where the end-to-end latency goes: paper.py's latency row, split into stages, with CPU per thread.

    .venv/bin/python benchmarks/latency_stages.py [--rate 10000] [--seconds 5] [--rounds 1]

The pipeline is paper.py's ``latency()`` (a Producer with ``linger_ms=1`` sending
200-byte messages at ``--rate`` from one thread, a Consumer thread long-polling
with ``poll_arrow()``, one broker process). Each message's latency is split at
four points, timed in this process:

* ``send -> drain``: send() until the sender thread drains its batch (linger_ms);
* ``drain -> written``: the sender stamps, encodes and writes the Produce request;
* ``written -> fetched``: the broker appends and answers the parked Fetch, and the
  consumer's I/O thread receives and decodes the answer (its callback starts);
* ``fetched -> polled``: the callback buffers it and chains the next fetch,
  poll_arrow() wakes, decodes the batch to Arrow and returns.

It also prints which stage dominates the slowest 1% and when they happened (tails
come in bursts: a stalled process, not slow messages), the CPU per message of
every thread of both processes, this process's garbage collections, and the
decoding of one small batch with warm caches against evicted ones: the per-batch
work of this row runs every couple of milliseconds, between other threads'.

The stage points are taken by wrapping two private methods
(``Sender._send_rounds`` and ``Consumer._on_fetch``): a diagnostic, not an API.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from paper import paced_send  # benchmarks/ is sys.path[0] when run as a script

from pyspark_logsource import Admin, Consumer, Producer
from pyspark_logsource.broker.embedded import EmbeddedBroker
from pyspark_logsource.client import consumer as consumer_mod
from pyspark_logsource.client import sender as sender_mod

MSG = 200
STAGES = ("send -> drain", "drain -> written", "written -> fetched", "fetched -> polled")


def thread_cpu(pid: int | str = "self") -> dict[str, float]:
    """CPU seconds of each thread of a process so far (Linux /proc), by native thread id."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[tid] = (int(fields[11]) + int(fields[12])) / tick
    return out


class StageClock:
    """Timestamps of the sender's writes and of the consumer's fetch answers (wrapped methods)."""

    def __init__(self) -> None:
        self.writes: list[tuple[int, int, int]] = []  # (drained at, written at, records written so far)
        self.fetches: list[tuple[int, int]] = []  # (answer's callback started at, fetch position after it)
        self._sent = 0
        self._orig = (sender_mod.Sender._send_rounds, consumer_mod.Consumer._on_fetch)

    def __enter__(self) -> StageClock:
        send_rounds, on_fetch = self._orig
        clock = self

        def timed_send_rounds(sender, rounds):  # noqa: ANN001, ANN202 - the wrapped method's own signature
            k = sum(b.record_count for r in rounds for run in r for b in run)
            t = time.perf_counter_ns()
            result = send_rounds(sender, rounds)
            clock._sent += k
            clock.writes.append((t, time.perf_counter_ns(), clock._sent))
            return result

        def timed_on_fetch(cons, reqs, resp, error):  # noqa: ANN001, ANN202
            t = time.perf_counter_ns()
            result = on_fetch(cons, reqs, resp, error)
            clock.fetches.append((t, reqs[0][1].fetch_position or 0))
            return result

        sender_mod.Sender._send_rounds = timed_send_rounds
        consumer_mod.Consumer._on_fetch = timed_on_fetch
        return self

    def __exit__(self, *exc: object) -> None:
        sender_mod.Sender._send_rounds, consumer_mod.Consumer._on_fetch = self._orig


def run(bootstrap: str, broker_pid: int, topic: str, rate: int, seconds: float) -> None:
    n = int(rate * seconds)
    sent_at = np.zeros(n, dtype=np.int64)
    recv_at = np.zeros(n, dtype=np.int64)
    gcs: list[tuple[int, int, int]] = []
    gc_start = [0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_start[0] = time.perf_counter_ns()
        else:
            gcs.append((gc_start[0], time.perf_counter_ns(), info["generation"]))

    with StageClock() as clock:
        p = Producer(bootstrap, linger_ms=1, batch_size=16384)
        start = p.send(topic, b"warm-up", partition=0).result(30)[1] + 1
        c = Consumer(bootstrap, fetch_max_wait_ms=500, fetch_min_bytes=1)
        c.assign([(topic, 0)])
        c.seek((topic, 0), start)

        measured = threading.Event()  # the reader stays alive until its CPU time is read

        def reader() -> None:
            seen = 0
            while seen < n:
                for t in c.poll_arrow(200).values():
                    now = time.perf_counter_ns()
                    recv_at[t.column("offset").to_numpy() - start] = now
                    seen += t.num_rows
            measured.wait(60)

        pa.chunked_array([np.zeros(1, dtype=np.int64)]).to_numpy()  # pandas' import, as in paper.py
        th = threading.Thread(target=reader, daemon=True, name="reader")
        th.start()
        time.sleep(0.5)
        w0, sent0 = len(clock.writes), clock._sent
        cpu0, bcpu0 = thread_cpu(), thread_cpu(broker_pid)
        gc.callbacks.append(on_gc)
        paced_send(p, topic, rate, sent_at)
        p.flush()
        deadline = time.monotonic() + 30
        while recv_at[-1] == 0 and th.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        gc.callbacks.remove(on_gc)
        cpu1, bcpu1 = thread_cpu(), thread_cpu(broker_pid)
        names = {str(t.native_id): t.name for t in threading.enumerate()}
        for who, client in (("producer", p), ("consumer", c)):
            for conn in client._client._conns.values():  # the I/O threads share one name per broker
                if conn._reader is not None:
                    names[str(conn._reader.native_id)] = f"{who} I/O"
        measured.set()
        th.join(timeout=30)
        p.close()
        c.close()

    writes = clock.writes[w0:]
    drained = np.array([w[0] for w in writes])
    written = np.array([w[1] for w in writes])
    upto = np.array([w[2] - sent0 for w in writes])  # message i is in the first write with upto > i
    wi = np.minimum(np.searchsorted(upto, np.arange(n), side="right"), len(writes) - 1)
    fetched_t = np.array([f[0] for f in clock.fetches])
    fetched_to = np.array([f[1] - start for f in clock.fetches])
    fi = np.minimum(np.searchsorted(fetched_to, np.arange(n), side="right"), len(fetched_t) - 1)
    points = [sent_at, drained[wi], written[wi], fetched_t[fi], recv_at]
    ok = recv_at > 0
    steady = ok & (sent_at >= sent_at[0] + 500_000_000)  # paper.py's warm-up cut
    lat = (recv_at - sent_at) / 1e6

    def row(name: str, v: np.ndarray) -> None:
        p50, p90, p99 = np.percentile(v, [50, 90, 99])
        print(f"{name:22} {p50:8.2f} {p90:8.2f} {p99:8.2f} {v.max():8.2f}")

    print(
        f"\n{n:,} messages at {rate:,} msg/s, {len(writes):,} Produce writes "
        f"({n / max(1, len(writes)):.1f} messages each), {len(clock.fetches):,} fetch answers"
    )
    print(f"{'stage (ms)':22} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8}")
    row("end to end", lat[steady])
    spans = [(points[k + 1] - points[k]) / 1e6 for k in range(4)]
    for name, span in zip(STAGES, spans, strict=True):
        row(name, span[steady])
    worst = np.where(steady & (lat > np.percentile(lat[steady], 99)))[0]
    if len(worst):
        dominant = np.bincount(np.argmax(np.stack([s[worst] for s in spans]), axis=0), minlength=4)
        print(
            "slowest 1%, stage that took longest: "
            + ", ".join(f"{s} {k}" for s, k in zip(STAGES, dominant, strict=True))
        )
        at = (sent_at[worst] - sent_at[0]) // 1_000_000
        bursts: list[list[int]] = []
        for t in at.tolist():
            if not bursts or t - bursts[-1][1] > 50:
                bursts.append([t, t, 0])
            bursts[-1][1] = t
            bursts[-1][2] += 1
        print(
            "  in bursts (ms after the first send: from-to, messages): "
            + ", ".join(f"{a}-{b} {k}" for a, b, k in bursts[:12])
        )
    print(
        "CPU per message (us), client threads: "
        + ", ".join(
            f"{names.get(tid, tid)} {1e6 * (cpu1[tid] - cpu0[tid]) / n:.1f}"
            for tid in cpu1
            if tid in cpu0 and cpu1[tid] > cpu0[tid]
        )
    )
    print(
        "CPU per message (us), broker threads: "
        + ", ".join(
            f"{tid} {1e6 * (bcpu1[tid] - bcpu0[tid]) / n:.1f}"
            for tid in bcpu1
            if tid in bcpu0 and bcpu1[tid] > bcpu0[tid]
        )
    )
    by_gen = [sum(1 for g in gcs if g[2] == k) for k in range(3)]
    longest = max(((b - a) / 1e6 for a, b, _ in gcs), default=0.0)
    print(
        f"client garbage collections: gen0 {by_gen[0]}, gen1 {by_gen[1]}, gen2 {by_gen[2]}; longest {longest:.2f} ms"
    )


def decode_warm_and_cold(records: int = 18, n: int = 300) -> tuple[float, float]:
    """CPU us to decode one batch of ``records`` 200-byte messages into Arrow, warm and after
    evicting the caches (16 MB touched between calls), best of 3."""
    from pyspark_logsource.client.encoding import encode_records
    from pyspark_logsource.client.fetched import _warm_up_decoder, records_to_arrow

    _warm_up_decoder()
    ts = [int(time.time() * 1000)] * records
    data = bytes(
        encode_records(
            [b"x" * MSG] * records,
            None,
            ts,
            None,
            codec=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
        )
    )
    junk = np.ones(2 << 20, dtype=np.int64)
    best = [float("inf"), float("inf")]
    for _ in range(3):
        for cold in (0, 1):
            total = 0.0
            for _ in range(n):
                if cold:
                    junk[::8] += 1
                t = time.thread_time()
                records_to_arrow(data, True)
                total += time.thread_time() - t
            best[cold] = min(best[cold], 1e6 * total / n)
    return best[0], best[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, EmbeddedBroker(Path(d), mode="process") as broker:
        admin = Admin(broker.bootstrap)
        for r in range(args.rounds):
            admin.create_topic(f"lat{r}", 1)
            run(broker.bootstrap, broker.pid, f"lat{r}", args.rate, args.seconds)
        admin.close()
    warm, cold = decode_warm_and_cold()
    print(f"\ndecoding one 18-message batch to Arrow: {warm:.0f} us warm, {cold:.0f} us with evicted caches")


if __name__ == "__main__":
    sys.exit(main())
