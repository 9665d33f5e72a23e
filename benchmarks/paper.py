"""Reproduce the Kafka paper's section 5 experiments on loopback.

One broker PROCESS (``python -m pyspark_logsource.broker`` via
EmbeddedBroker) and this client process. Like the paper, 200-byte messages,
the broker flushing to disk asynchronously (its default flush policy):

* producer test: publish N messages with batch size 1 (one message per
  produce request, requests pipelined, no waiting per message) and batch
  size 50 (50 messages per request), through ``Producer.send()`` one message
  at a time, and through ``Producer.send_arrow()`` (the batch-level API);
  ``send()`` rows with ``acks=1`` (the default) and ``acks=0`` (the paper's
  producer did not wait for the broker), and the send() caller cost: the
  send() loop alone with batch 50 and ``linger_ms=5``, as msg/s;
* consumer test: one consumer reads all of them back, each fetch up to
  ~1000 messages / 200 KB, as Arrow batches (``poll_arrow``) and message by
  message (``poll()``);
* end-to-end latency at 10,000 msg/s: send -> a long-polling consumer in this
  process receives it; p50 / p99, beside the p99 of a raw-socket ping-pong
  with an echo process paced the same way (the machine's own noise);
* log append (group ``append``): ``PartitionLog.append`` of pre-encoded
  50-message batches vs a plain ``write()`` of the same bytes (log_store.py);
* Spark (group ``spark``): issue 14's two Spark rows from benchmarks/spark.py
  in a child process: ``sum(length(value))`` over ``--spark-rows`` rows against
  a trivial Python source (the floor), and a new streaming query's start to its
  first committed micro-batch against Spark's rate source, both in the same run.

The baseline measured in the same run is a synchronous client: one produce
request at a time, waiting for each answer (what a naive RPC client does);
the ratio column is msg/s divided by that baseline with the same batch size.

"Today" (issue 14's table) is measured in the same run too: with ``--base REV``
(default: the commit before the issue) this script runs itself against that
revision's package and against the work tree's, alternately ``--rounds`` times,
and prints both with the ratio and the target (benchmarks/paper_revisions.py).
Both sides run this file's code: only the package differs.

    .venv/bin/python benchmarks/paper.py                # N = 1,000,000, beside the base
    .venv/bin/python benchmarks/paper.py --messages 200000 --quick --rows consumer
    .venv/bin/python benchmarks/paper.py --base none    # the work tree only
    .venv/bin/python benchmarks/paper.py --rows spark --spark-rows 2000000
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from pyspark_logsource import Admin, Consumer, Producer
from pyspark_logsource.broker.embedded import EmbeddedBroker
from pyspark_logsource.client.connection import BrokerConnection
from pyspark_logsource.format.batch import HEADER_SIZE, encode
from pyspark_logsource.protocol.messages import ProducePartitionData, ProduceRequest

MSG = 200
PAPER = {
    "producer batch 1": 50_000,
    "producer batch 50": 400_000,
    "consumer": 22_000,
}
# One message of a batch costs 16 bytes beside its value (timestamp delta + 2 offsets).
PER_MSG_BYTES = 16
#: issue 14's targets (msg/s) by row name
TARGETS = {
    "batch 1: send(), 1 msg/request, pipelined": 150_000,
    "batch 1: send(), 1 msg/request, acks=0": 150_000,
    "batch 50: send() caller cost, acks=1": 1_000_000,
    "batch 50: send() caller cost, acks=0": 1_000_000,
    "consumer 1000-msg batches: poll_arrow()": 3_000_000,
    "consumer 1000-msg batches: poll() per message": 1_500_000,
}
ROW_GROUPS = ("producer", "consumer", "latency", "append", "spark")
#: issue 14's "today" for the rows that are not msg/s (README, measured 2026-11-21): the documented baseline
DOCUMENTED = {
    "latency p99 (ms)": "20-37",
    "log append / write(), batches of 50": "0.40-0.53",
    "Spark read sum(length(value)) / floor": "about 2",
    "stream start, logsource - rate (s)": "+6 to +18",
}


def values(n: int) -> list[bytes]:
    """n distinct 200-byte messages (a sequence number in front of random-ish filler)."""
    filler = bytes(np.random.default_rng(1).integers(97, 123, size=MSG, dtype=np.uint8))
    return [b"%010d" % i + filler[10:] for i in range(n)]


def arrow_chunks(n: int, per: int) -> list[pa.Table]:
    """The same messages as Arrow tables of ``per`` rows (built before timing)."""
    data = np.frombuffer(b"".join(values(n)), dtype=np.uint8)
    offsets = np.arange(0, (n + 1) * MSG, MSG, dtype=np.int32)
    col = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    t = pa.table({"value": col})
    return [t.slice(i, per) for i in range(0, n, per)]


def rate_row(name: str, n: int, seconds: float, paper: int | None, baseline: float | None) -> tuple:
    rate = n / seconds
    mb = rate * MSG / 1e6
    return (name, n, seconds, rate, mb, paper, (rate / baseline) if baseline else None)


def produce_send(
    bootstrap: str,
    topic: str,
    msgs: list[bytes],
    batch: int,
    in_flight: int,
    per_request: int,
    acks: int = 1,
    caller: list | None = None,
) -> float:
    """Producer.send() per message; batch_size set so that a batch holds ``batch`` messages.

    Returns the seconds until every message is acknowledged (written, with acks=0); ``caller``
    gets the seconds of the send() loop alone: what the caller waits per send() (the sender
    and I/O threads share the GIL with it, so their work shows there too)."""
    p = Producer(
        bootstrap,
        batch_size=1 if batch == 1 else batch * (MSG + PER_MSG_BYTES),
        linger_ms=5 if batch > 1 else 0,
        max_in_flight=in_flight,
        buffer_memory=256 << 20,
        max_batches_per_request=per_request,
        acks=acks,
    )
    p.send(topic, b"warm-up").result(30)
    send = p.send
    t0 = time.perf_counter()
    for v in msgs:
        send(topic, v)
    t1 = time.perf_counter()
    p.flush()
    dt = time.perf_counter() - t0
    p.close()
    if caller is not None:
        caller.append(t1 - t0)
    return dt


def produce_arrow(
    bootstrap: str, topic: str, chunks: list[pa.Table], in_flight: int, per_request: int
) -> float:
    """Producer.send_arrow() with one record batch per chunk."""
    per = chunks[0].num_rows
    p = Producer(
        bootstrap,
        batch_size=per * (MSG + PER_MSG_BYTES),
        max_in_flight=in_flight,
        buffer_memory=256 << 20,
        max_batches_per_request=per_request,
    )
    p.send(topic, b"warm-up").result(30)
    t0 = time.perf_counter()
    for t in chunks:
        p.send_arrow(topic, t, partition=0)
    p.flush()
    dt = time.perf_counter() - t0
    p.close()
    return dt


def produce_sync_baseline(bootstrap: str, topic: str, msgs: list[bytes], batch: int) -> float:
    """One produce request at a time, waiting for its answer (same encoder, same codec)."""
    host, port = bootstrap.rsplit(":", 1)
    conn = BrokerConnection(host, int(port), threaded=False)
    t0 = time.perf_counter()
    for i in range(0, len(msgs), batch):
        data = encode(msgs[i : i + batch])
        resp = conn.request(ProduceRequest([ProducePartitionData(topic, 0, data)], acks=1))
        assert resp.partitions[0].error_code == 0
    dt = time.perf_counter() - t0
    conn.close()
    return dt


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def consume(bootstrap: str, topic: str, n: int, arrow: bool, cpu: dict | None = None) -> tuple[float, int]:
    """Read ``n`` messages from offset 0, each fetch up to 200 KB (~1000 messages).

    ``cpu``: a dict with the broker's ``pid``, given CPU seconds of this process (all its threads)
    and of the broker during the timed part, as ``client`` and ``broker``."""
    c = Consumer(
        bootstrap, max_partition_fetch_bytes=200 * 1024, fetch_max_bytes=4 << 20, fetch_max_wait_ms=100
    )
    c.assign([(topic, 0)])
    c.seek((topic, 0), 0)
    got = 0
    checksum = 0
    if cpu is not None:
        c0, b0 = time.process_time(), cpu_seconds(cpu["pid"])
    t0 = time.perf_counter()
    if arrow:
        while got < n:
            for t in c.poll_arrow(1000).values():
                got += t.num_rows
                checksum += t.column("value").chunk(0).buffers()[2].size if t.num_rows else 0
    else:
        while got < n:
            for m in c.poll(1000, max_records=1000):
                checksum += len(m.value)
                got += 1
    dt = time.perf_counter() - t0
    if cpu is not None:
        cpu["client"], cpu["broker"] = time.process_time() - c0, cpu_seconds(cpu["pid"]) - b0
    c.close()
    return dt, got


def latency(
    bootstrap: str, topic: str, rate: int, seconds: float, linger_ms: float = 1.0, cpu: dict | None = None
) -> tuple:
    """Send at ``rate`` msg/s; a consumer thread long-polls; return steady-state p50/p99/max (ms) and
    count, and the p99 and count over every message.

    ``cpu``: a dict with the broker's ``pid``, given CPU seconds during the timed part of this process
    (``client``), of the broker (``broker``), of the sending thread (``send_loop``: send() and its pacing
    sleeps) and of the consumer's polling thread (``poll``: poll_arrow() and this script's bookkeeping)."""
    n = int(rate * seconds)
    sent_at = np.zeros(n, dtype=np.int64)
    recv_at = np.zeros(n, dtype=np.int64)
    p = Producer(bootstrap, linger_ms=linger_ms, batch_size=16384)
    start = p.send(topic, b"warm-up", partition=0).result(30)[1] + 1
    c = Consumer(bootstrap, fetch_max_wait_ms=500, fetch_min_bytes=1)
    c.assign([(topic, 0)])
    c.seek((topic, 0), start)
    stop = threading.Event()

    poll_cpu = [0.0]

    def reader() -> None:
        seen = 0
        c0 = time.thread_time()
        while seen < n and not stop.is_set():
            for t in c.poll_arrow(200).values():
                now = time.perf_counter_ns()
                recv_at[t.column("offset").to_numpy() - start] = now
                seen += t.num_rows
        poll_cpu[0] = time.thread_time() - c0

    # The reader's bookkeeping (ChunkedArray.to_numpy) loads pandas on its first call: 0.5-2 s of imports
    # right after the first poll, in the timed window, holding the GIL, which stalled the consumer and the
    # sender (p99 ~270 ms from a 660 ms backlog). That is this script's cost, not the system's: pay it here.
    pa.chunked_array([np.zeros(1, dtype=np.int64)]).to_numpy()
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    time.sleep(0.5)  # the consumer is now long-polling at the end of the log
    if cpu is not None:
        c0, b0, m0 = time.process_time(), cpu_seconds(cpu["pid"]), time.thread_time()
    paced_send(p, topic, rate, sent_at)
    if cpu is not None:
        cpu["send_loop"] = time.thread_time() - m0
    p.flush()
    th.join(timeout=30)
    stop.set()
    if cpu is not None:
        cpu["client"], cpu["broker"] = time.process_time() - c0, cpu_seconds(cpu["pid"]) - b0
        cpu["poll"] = poll_cpu[0]
    p.close()
    c.close()
    ok = recv_at > 0
    lat = (recv_at - sent_at) / 1e6
    # steady state: drop the first half second of sends (connection and long-poll warm-up)
    steady = ok & (sent_at >= sent_at[0] + 500_000_000)
    all_ok = lat[ok]
    st = lat[steady]
    return (
        float(np.percentile(st, 50)),
        float(np.percentile(st, 99)),
        float(st.max()),
        int(steady.sum()),
        float(np.percentile(all_ok, 99)),
        int(ok.sum()),
    )


def paced_send(p: Producer, topic: str, rate: int, sent_at: np.ndarray) -> None:
    """send() one 200-byte message every 1/rate s to partition 0; ``sent_at[i]``: message i's send() time (ns)."""
    payload = b"x" * MSG
    t0 = time.perf_counter_ns()
    step = 1_000_000_000 // rate
    for i in range(len(sent_at)):
        target = t0 + i * step
        now = time.perf_counter_ns()
        if target > now:
            # sleep, never spin: a spinning sender would hold the GIL the I/O threads need
            time.sleep((target - now) / 1e9)
        sent_at[i] = time.perf_counter_ns()
        p.send(topic, payload, partition=0)


def ping_pong(rate: int, seconds: float) -> tuple[float, float]:
    """The machine's own noise: 200-byte round trips over a raw loopback socket to an echo process,
    paced like the latency test; return (p50, p99) in ms."""
    echo = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        port = int(echo.stdout.readline())
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = b"x" * MSG
        n = int(rate * seconds)
        rtt = np.zeros(n)
        step = 1_000_000_000 // rate
        t0 = time.perf_counter_ns()
        for i in range(n):
            now = time.perf_counter_ns()
            if t0 + i * step > now:
                time.sleep((t0 + i * step - now) / 1e9)
            a = time.perf_counter_ns()
            s.sendall(payload)
            got = 0
            while got < MSG:
                got += len(s.recv(MSG - got))
            rtt[i] = (time.perf_counter_ns() - a) / 1e6
        s.close()
    finally:
        echo.kill()
        echo.wait()
    steady = rtt[rate // 2 :]  # as the latency test: after half a second
    return float(np.percentile(steady, 50)), float(np.percentile(steady, 99))


_ECHO = """
import socket
ls = socket.create_server(("127.0.0.1", 0)); print(ls.getsockname()[1], flush=True)
c, _ = ls.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    d = c.recv(65536)
    if not d:
        break
    c.sendall(d)
"""


def log_append(n: int) -> list[tuple]:
    """PartitionLog.append of pre-encoded 50-message batches vs a plain os.write() of the same bytes
    (benchmarks/log_store.py's measurement, best of 5 interleaved runs of ~n messages each)."""
    from log_store import bench_append

    with tempfile.TemporaryDirectory() as d:
        log_mb, plain_mb, size = bench_append(Path(d), 50, n * (MSG + PER_MSG_BYTES), 5)
    per_s = 50 / size * (1 << 20)  # messages per MB
    return [
        rate_row("batch 50: log append (PartitionLog.append)", n, n / (log_mb * per_s), None, None),
        rate_row("baseline: plain write(), batches of 50", n, n / (plain_mb * per_s), None, None),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages per producer/consumer test")
    ap.add_argument(
        "--baseline-messages", type=int, default=20_000, help="messages for the synchronous baseline"
    )
    ap.add_argument("--in-flight", type=int, default=64, help="pipelined produce requests per connection")
    ap.add_argument("--runs", type=int, default=16, help="batches per request in the coalesced rows")
    ap.add_argument("--latency-seconds", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="batch-1 rows on at most 100,000 messages")
    ap.add_argument(
        "--rows", default=",".join(ROW_GROUPS), help=f"row groups to run, of {','.join(ROW_GROUPS)}"
    )
    ap.add_argument(
        "--base",
        default=None,
        help="git revision measured beside the work tree "
        "(default: the commit before issue 14); 'none': the work tree only",
    )
    ap.add_argument("--rounds", type=int, default=2, help="alternated rounds of base and head (best of each)")
    ap.add_argument(
        "--spark-rows", type=int, default=10_000_000, help="rows of the Spark read row (group spark)"
    )
    args = ap.parse_args(argv)
    groups = set(args.rows.split(","))
    if not groups <= set(ROW_GROUPS):
        ap.error(f"--rows takes some of {','.join(ROW_GROUPS)}")
    if args.base != "none":
        return compare_with_base(args)
    if groups - {"spark"}:
        messaging(args, groups)
    if "spark" in groups:
        print_spark_rows(spark_targets(args.spark_rows))
    return 0


def messaging(args: argparse.Namespace, groups: set[str]) -> None:
    """The broker rows: producer, consumer, latency, append; prints their tables."""
    n = args.messages
    msgs = values(n)
    chunks50 = arrow_chunks(n, 50)
    rows = []
    consumer_cpu: list[tuple[str, float, float]] = []  # row, client us/msg, broker us/msg
    with tempfile.TemporaryDirectory() as d, EmbeddedBroker(Path(d), mode="process") as broker:
        bs = broker.bootstrap
        admin = Admin(bs)
        for t in (
            "base1",
            "base50",
            "p1",
            "p1a0",
            "p50",
            "p50a0",
            "a50",
            "c1",
            "c50",
            "ca50",
            "b1000",
            "lat",
        ):
            admin.create_topic(t, 1)
        print(f"broker pid {broker.pid} at {bs}; {n:,} messages of {MSG} bytes", file=sys.stderr)
        if "producer" in groups:
            nb = min(args.baseline_messages, n)
            base1 = nb / produce_sync_baseline(bs, "base1", msgs[:nb], 1)
            base50 = nb / produce_sync_baseline(bs, "base50", msgs[:nb], 50)
            rows.append(rate_row("baseline: sync request/answer, batch 1", nb, nb / base1, None, base1))
            rows.append(rate_row("baseline: sync request/answer, batch 50", nb, nb / base50, None, base50))

            n1 = n if not args.quick else min(n, 100_000)
            dt = produce_send(bs, "p1", msgs[:n1], 1, args.in_flight, 1)
            rows.append(
                rate_row(
                    "batch 1: send(), 1 msg/request, pipelined", n1, dt, PAPER["producer batch 1"], base1
                )
            )
            # the paper's producer did not wait for the broker: the same with acks=0
            dt = produce_send(bs, "p1a0", msgs[:n1], 1, args.in_flight, 1, acks=0)
            rows.append(
                rate_row("batch 1: send(), 1 msg/request, acks=0", n1, dt, PAPER["producer batch 1"], base1)
            )
            caller: list[float] = []
            dt = produce_send(bs, "p50", msgs, 50, args.in_flight, 1, caller=caller)
            rows.append(
                rate_row("batch 50: send(), 50 msgs/request", n, dt, PAPER["producer batch 50"], base50)
            )
            dt = produce_send(bs, "p50a0", msgs, 50, args.in_flight, 1, acks=0, caller=caller)
            rows.append(
                rate_row(
                    "batch 50: send(), 50 msgs/request, acks=0", n, dt, PAPER["producer batch 50"], base50
                )
            )
            # send() caller cost: the send() loop alone (linger_ms=5), as msg/s; 1,000,000 = 1 us per send()
            rows.append(rate_row("batch 50: send() caller cost, acks=1", n, caller[0], None, None))
            rows.append(rate_row("batch 50: send() caller cost, acks=0", n, caller[1], None, None))
            dt = produce_arrow(bs, "a50", chunks50, args.in_flight, 1)
            rows.append(
                rate_row("batch 50: send_arrow(), 50 msgs/request", n, dt, PAPER["producer batch 50"], base50)
            )
            # Beyond the paper's definition: several ready batches of a partition share one request.
            dt = produce_send(bs, "c1", msgs[:n1], 1, args.in_flight, args.runs)
            rows.append(
                rate_row(
                    f"batch 1: send(), <= {args.runs} batches/request",
                    n1,
                    dt,
                    PAPER["producer batch 1"],
                    base1,
                )
            )
            dt = produce_send(bs, "c50", msgs, 50, args.in_flight, args.runs)
            rows.append(
                rate_row(
                    f"batch 50: send(), <= {args.runs} batches/request",
                    n,
                    dt,
                    PAPER["producer batch 50"],
                    base50,
                )
            )
            dt = produce_arrow(bs, "ca50", chunks50, args.in_flight, args.runs)
            rows.append(
                rate_row(
                    f"batch 50: send_arrow(), <= {args.runs} batches/req",
                    n,
                    dt,
                    PAPER["producer batch 50"],
                    base50,
                )
            )

            chunks1000 = arrow_chunks(n, 1000)
            dt = produce_arrow(bs, "b1000", chunks1000, args.in_flight, 1)
            rows.append(rate_row("batch 1000: send_arrow(), 1 batch/request", n, dt, None, base50))
            del chunks1000
        elif "consumer" in groups:  # the consumer rows read what the producer rows write
            produce_send(bs, "p50", msgs, 50, args.in_flight, 1)
            produce_arrow(bs, "b1000", arrow_chunks(n, 1000), args.in_flight, 1)

        if "consumer" in groups:
            # untimed: the first poll of a process imports the decoder's modules (pandas, ~0.5 s)
            consume(bs, "p50", min(n, 5000), arrow=True)
            # consumer: one fetch = up to 200 KB, i.e. ~1000 messages (the paper's setting)
            for topic, label in (("p50", "50-msg batches"), ("b1000", "1000-msg batches")):
                cpu: dict = {"pid": broker.pid}
                dt, got = consume(bs, topic, n, arrow=True, cpu=cpu)
                arrow_row = rate_row(f"consumer {label}: poll_arrow()", got, dt, PAPER["consumer"], None)
                consumer_cpu.append((arrow_row[0], 1e6 * cpu["client"] / got, 1e6 * cpu["broker"] / got))
                dt, got = consume(bs, topic, n, arrow=False, cpu=cpu)
                msg_row = rate_row(f"consumer {label}: poll() per message", got, dt, PAPER["consumer"], None)
                consumer_cpu.append((msg_row[0], 1e6 * cpu["client"] / got, 1e6 * cpu["broker"] / got))
                # consumer ratio: batches vs per-message iteration of the same data
                rows.append(arrow_row[:6] + (arrow_row[3] / msg_row[3],))
                rows.append(msg_row[:6] + (1.0,))

        if "latency" in groups:
            lat_cpu: dict = {"pid": broker.pid}
            p50, p99, mx, cnt, p99_all, cnt_all = latency(
                bs, "lat", 10_000, args.latency_seconds, cpu=lat_cpu
            )
            ping = ping_pong(10_000, args.latency_seconds)
        if "append" in groups:
            append_rows = log_append(n)
            rows += append_rows
        admin.close()

    print()
    print(
        f"{'experiment':44} {'messages':>10} {'seconds':>8} {'msg/s':>12} {'MB/s':>8} {'paper msg/s':>12} {'ratio':>7}"
    )
    for name, cnt_, sec, rate, mb, paper, ratio in rows:
        paper_s = f"{paper:,}" if paper else "-"
        ratio_s = f"{ratio:.1f}x" if ratio else "-"
        print(f"{name:44} {cnt_:>10,} {sec:>8.2f} {rate:>12,.0f} {mb:>8.1f} {paper_s:>12} {ratio_s:>7}")
    print()
    print(
        "ratio: producer rows vs the synchronous baseline with the same batch size; consumer batches vs per-message"
    )
    if "latency" in groups:
        print(
            f"end-to-end latency at 10,000 msg/s, linger_ms=1 ({cnt:,} messages after a 0.5 s warm-up): "
            f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {mx:.2f} ms (target p99 <= 5 ms); "
            f"p99 including the warm-up ({cnt_all:,} messages): {p99_all:.2f} ms"
        )
        # what the pipeline costs per message: on a shared machine, the share of CPU it can get decides the tail
        us = {k: 1e6 * lat_cpu[k] / cnt_all for k in ("client", "broker", "send_loop", "poll")}
        print(
            f"CPU per message, end-to-end latency at 10,000 msg/s: client process {us['client']:.2f} us "
            f"(send() loop with its pacing sleeps {us['send_loop']:.2f}, poll_arrow() thread {us['poll']:.2f}, "
            f"producer sender and I/O threads {us['client'] - us['send_loop'] - us['poll']:.2f}), "
            f"broker process {us['broker']:.2f} us"
        )
    print()
    print(
        f"| {'issue 14 row (not msg/s)':<40} | {'measured':>9} | {'machine noise':>22} | {'today (doc.)':>12} | "
        f"{'target':>7} |"
    )
    if "latency" in groups:
        print(
            f"| {'latency p99 (ms)':<40} | {p99:>9.2f} | {f'ping-pong p99 {ping[1]:.2f}':>22} | "
            f"{DOCUMENTED['latency p99 (ms)']:>12} | {'<= 5':>7} |"
        )
    if "append" in groups:
        ratio = append_rows[0][3] / append_rows[1][3]
        print(
            f"| {'log append / write(), batches of 50':<40} | {ratio:>9.2f} | {'':>22} | "
            f"{DOCUMENTED['log append / write(), batches of 50']:>12} | {'>= 0.8':>7} |"
        )
    if "producer" in groups:
        for r in rows:
            if "caller cost" in r[0]:
                print(
                    f"| {r[0] + ' (us)':<40} | {1e6 / r[3]:>9.2f} | {'':>22} | {'2.4-3.2':>12} | {'<= 1':>7} |"
                )
    for name, client_us, broker_us in consumer_cpu:
        print(
            f"CPU per message, {name}: client process {client_us:.2f} us, broker process {broker_us:.2f} us"
        )
    print(
        f"message overhead on disk/wire: {HEADER_SIZE} bytes per batch + {PER_MSG_BYTES} per message "
        "(paper: 9 bytes per message)"
    )


def spark_targets(rows: int) -> dict:
    """issue 14's two Spark rows, from benchmarks/spark.py in a child process (its tables pass through)."""
    import json

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "spark.json")
        script = Path(__file__).with_name("spark.py")
        subprocess.run(
            [sys.executable, str(script), "--rows", str(rows), "--targets-only", "--results-json", out],
            check=True,
            env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
        )
        with open(out) as f:
            return json.load(f)


def print_spark_rows(fig: dict) -> None:
    """The Spark rows of issue 14's table: ratios against the floor and the rate source measured in the same run."""
    read = fig["read sum(length(value))"]
    start = fig["stream_start"]
    print()
    print(
        f"| {'issue 14 Spark row':<40} | {'measured':>9} | {'same-run reference':>22} | {'today (doc.)':>12} | "
        f"{'target':>7} |"
    )
    name = "Spark read sum(length(value)) / floor"
    print(
        f"| {name:<40} | {read['logsource'] / read['floor']:>9.2f} | "
        f"{'floor ' + format(read['floor'], '.2f') + ' s':>22} | {DOCUMENTED[name]:>12} | {'<= 1.3':>7} |"
    )
    name = "stream start, logsource - rate (s)"
    print(
        f"| {name:<40} | {start['logsource'] - start['rate']:>+9.2f} | "
        f"{'rate ' + format(start['rate'], '.2f') + ' s':>22} | {DOCUMENTED[name]:>12} | {'<= +3':>7} |"
    )
    print(
        f"({fig['rows']:,} rows read; stream start: logsource {start['logsource']:.2f} s, "
        f"a trivial Python streaming source {start['python floor']:.2f} s)"
    )


def compare_with_base(args: argparse.Namespace) -> int:
    """Run this script against the base revision's package and the work tree's, alternately; print both."""
    from paper_revisions import ISSUE14_BASE, compare, print_comparison

    base = args.base or ISSUE14_BASE
    groups = [g for g in args.rows.split(",") if g != "spark"]
    if not groups:  # the Spark rows compare with a same-run floor, not with a revision
        print_spark_rows(spark_targets(args.spark_rows))
        return 0
    argv = [
        "--messages",
        str(args.messages),
        "--baseline-messages",
        str(args.baseline_messages),
        "--in-flight",
        str(args.in_flight),
        "--runs",
        str(args.runs),
        "--latency-seconds",
        str(args.latency_seconds),
        "--rows",
        ",".join(groups),
        "--base",
        "none",
        *(["--quick"] if args.quick else []),
    ]
    every: dict[str, list[str]] = {}
    best, outs = compare(base, argv, args.rounds, head_script=True, every=every)
    print(outs["head"], end="")
    for line in outs["base"].splitlines():
        if line.startswith("CPU per message"):
            print(f"base {base}: {line}")
    # latency is not a best-of figure: every round's, both revisions (the tail varies with the machine's load)
    for label in ("base", "head"):
        for r, out in enumerate(every.get(label, []), 1):
            for line in out.splitlines():
                if line.startswith("end-to-end latency"):
                    print(f"{label} {base if label == 'base' else 'work tree'}, round {r}: {line}")
    print_comparison(best, base, args.rounds, TARGETS)
    print(
        "the machine is shared: absolute msg/s vary with its load; the ratio compares rounds run alternately"
    )
    if "spark" in args.rows.split(","):
        print_spark_rows(spark_targets(args.spark_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
