"""librdkafka (confluent-kafka) against our broker, side by side with our own clients, in one run.

One broker PROCESS (``python -m pyspark_logsource.broker`` via EmbeddedBroker) and this client process;
N messages of 200 bytes (default 1,000,000), one partition per topic, no compression, acks=1:

* confluent-kafka Producer.produce() per message (librdkafka batches: linger 5 ms, up to 1 MB batches);
  the broker stores Kafka's layout as sent;
* confluent-kafka Consumer (assign + consume(10,000)) of that topic: served with sendfile, untouched;
* confluent-kafka Consumer of a topic written by OUR Producer: the broker converts our Arrow-bodied
  batches to Kafka's layout on the way out;
* our Producer.send() per message and send_arrow(), our Consumer poll() per message and poll_arrow()
  (and our Consumer on librdkafka's topic: Kafka's layout decoded to Arrow on the client);
* the row benchmarks/paper.py measures for our client (batch 50: send(), 50 msgs/request).

    .venv/bin/python benchmarks/kafka_clients.py                 # N = 1,000,000
    .venv/bin/python benchmarks/kafka_clients.py --messages 200000
    .venv/bin/python benchmarks/kafka_clients.py --producers 4    # only the two producer rows, 4 pairs

``--producers K`` runs only confluent's produce() and our send() rows, alternated K times against one broker
(a fresh topic each), and prints per pair the ratio and where our send() row's wall time went: the CPU of the
sending thread and of the client's other threads, the sending thread's time runnable but waiting for a CPU
and blocked (the GIL, a lock, flush()), its context switches, GC collections, responses, and the broker's CPU.

Targets (printed beside the results): librdkafka producer >= 400,000 msg/s, consumer >= 1,000,000 msg/s.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import paper  # noqa: E402  (benchmarks/paper.py: the paper's message set and our client's method)
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition  # noqa: E402
from confluent_kafka import Consumer as RdConsumer  # noqa: E402
from confluent_kafka import Producer as RdProducer  # noqa: E402

from pyspark_logsource import Admin, Consumer, Producer  # noqa: E402
from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402

MSG = paper.MSG
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


TARGETS = {"producer": 400_000, "consumer": 1_000_000}


def rd_produce(bootstrap: str, topic: str, msgs: list[bytes], codec: str) -> float:
    p = RdProducer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": codec,
            "acks": 1,
            "enable.idempotence": False,
        }
    )
    p.produce(topic, b"warm-up", partition=0)
    p.flush(30)
    produce, poll = p.produce, p.poll
    t0 = time.perf_counter()
    for v in msgs:
        try:
            produce(topic, v, partition=0)
        except BufferError:
            poll(0.01)
            produce(topic, v, partition=0)
    left = p.flush(120)
    dt = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"librdkafka producer: {left} messages not delivered")
    return dt


def rd_consume(bootstrap: str, topic: str, n: int) -> tuple[float, float, int]:
    """Read ``n`` messages from the beginning; returns (seconds to the first message, seconds from the first
    message to the last, messages)."""
    c = RdConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 4_194_304,
            "queued.min.messages": 1_000_000,
            "fetch.wait.max.ms": 100,
        }
    )
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    nbytes = 0
    first = None
    while got < n:
        for m in c.consume(10_000, 0.05):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(f"librdkafka consumer: {err}")
            if first is None:
                first = time.perf_counter()
            nbytes += len(m.value())
            got += 1
    end = time.perf_counter()
    c.close()
    return first - t0, end - first, got


def thread_counters() -> dict[str, tuple[float, int, int]]:
    """Per thread of this process: (CPU seconds, voluntary and involuntary context switches) (Linux /proc)."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            status = Path(f"/proc/self/task/{tid}/status").read_text().splitlines()
        except OSError:
            continue  # a thread that ended in between
        switches = [int(line.split()[1]) for line in status if "ctxt_switches" in line]
        out[tid] = ((int(stat[11]) + int(stat[12])) / _TICK, switches[0], switches[1])
    return out


def sched_seconds() -> tuple[float, float]:
    """The calling thread's seconds on a CPU and waiting in a run queue for one (Linux schedstat; 0 elsewhere)."""
    try:
        run, wait = Path("/proc/thread-self/schedstat").read_text().split()[:2]
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(run) / 1e9, int(wait) / 1e9


def our_produce(bootstrap: str, topic: str, msgs: list[bytes], codec: str, diag: dict | None = None) -> float:
    """Producer.send() per message with batches like librdkafka's (linger 5 ms, 1 MB); ``diag`` (if given)
    gets the row's diagnostics (see ``--producers``), taken outside the timed loop."""
    p = Producer(
        bootstrap,
        linger_ms=5,
        batch_size=1_000_000,
        buffer_memory=512 << 20,
        max_in_flight=64,
        compression=None if codec == "none" else codec,
    )
    p.send(topic, b"warm-up", partition=0).result(30)
    send = p.send
    if diag is not None:
        me = str(threading.get_native_id())
        gc0, th0, r0 = [s["collections"] for s in gc.get_stats()], thread_counters(), p._stats.responses
        m0 = time.thread_time()
        s0 = sched_seconds()
    t0 = time.perf_counter()
    for v in msgs:
        send(topic, v, partition=0)
    t1 = time.perf_counter()
    p.flush()
    dt = time.perf_counter() - t0
    if diag is not None:
        main_cpu = time.thread_time() - m0
        s1 = sched_seconds()
        queued = s1[1] - s0[1]
        th1 = thread_counters()
        others = sum(c - th0.get(t, (0.0, 0, 0))[0] for t, (c, _, _) in th1.items() if t != me)
        _, v0, i0 = th0.get(me, (0.0, 0, 0))
        _, v1, i1 = th1.get(me, (0.0, 0, 0))
        diag.update(
            main_cpu=main_cpu,
            other_cpu=others,
            flush=dt - (t1 - t0),
            queued=queued,  # runnable, waiting for a CPU
            asleep=dt - (s1[0] - s0[0]) - queued,  # blocked: the GIL, a lock, flush()'s wait
            voluntary=v1 - v0,
            involuntary=i1 - i0,
            gc=[s["collections"] - c for s, c in zip(gc.get_stats(), gc0, strict=True)],
            responses=p._stats.responses - r0,
        )
    p.close()
    return dt


def our_consume(bootstrap: str, topic: str, n: int, arrow: bool) -> tuple[float, float, int]:
    """Like :func:`rd_consume`, through our Consumer: poll() per message or poll_arrow()."""
    c = Consumer(
        bootstrap, max_partition_fetch_bytes=4 << 20, fetch_max_bytes=50 << 20, fetch_max_wait_ms=100
    )
    t0 = time.perf_counter()
    c.assign([(topic, 0)])
    c.seek((topic, 0), 0)
    got = 0
    first = None
    while got < n:
        if arrow:
            for t in c.poll_arrow(1000).values():
                got += t.num_rows
        else:
            for _m in c.poll(1000, max_records=10_000):
                got += 1
        if got and first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    c.close()
    return first - t0, end - first, got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages per test")
    ap.add_argument("--codec", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument(
        "--producers",
        type=int,
        default=0,
        metavar="K",
        help="only the two producer rows, K pairs, diagnostics",
    )
    args = ap.parse_args(argv)
    n = args.messages
    if args.producers:
        return producer_pairs(n, args.codec, args.producers)
    msgs = paper.values(n)
    chunks = paper.arrow_chunks(n, 1000)
    rows: list[tuple] = []
    mark = {"client": time.process_time(), "broker": 0.0}

    def row(name: str, count: int, seconds: float, target: str = "", startup: float | None = None) -> None:
        # CPU seconds each process spent since the previous row (client: this process with
        # librdkafka's threads; broker: the child process)
        client, brk = time.process_time(), cpu_seconds(broker.pid)
        rows.append((name, count, seconds, startup, client - mark["client"], brk - mark["broker"], target))
        mark.update(client=client, broker=brk)
        print(f"  {name}: {count / seconds:,.0f} msg/s", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory() as d, EmbeddedBroker(Path(d), mode="process") as broker:
        bs = broker.bootstrap
        admin = Admin(bs)
        for t in ("rd", "ours", "ours-arrow", "paper50"):
            admin.create_topic(t, 1)
        admin.close()
        mark.update(client=time.process_time(), broker=cpu_seconds(broker.pid))
        print(
            f"broker pid {broker.pid} at {bs}; {n:,} messages of {MSG} bytes, codec {args.codec}",
            file=sys.stderr,
        )

        # producers (+1: each topic starts with one warm-up message)
        row(
            "confluent-kafka Producer.produce()",
            n,
            rd_produce(bs, "rd", msgs, args.codec),
            f">= {TARGETS['producer']:,}",
        )
        row("ours: Producer.send()", n, our_produce(bs, "ours", msgs, args.codec))
        p = Producer(
            bs,
            batch_size=1000 * (MSG + paper.PER_MSG_BYTES),
            max_in_flight=64,
            buffer_memory=512 << 20,
            compression=None if args.codec == "none" else args.codec,
        )
        p.send("ours-arrow", b"warm-up").result(30)
        t0 = time.perf_counter()
        for t in chunks:
            p.send_arrow("ours-arrow", t, partition=0)
        p.flush()
        row("ours: Producer.send_arrow(), 1000 rows/batch", n, time.perf_counter() - t0)
        p.close()
        row(
            "ours (paper.py): send(), batch 50, 1 batch/request",
            n,
            paper.produce_send(bs, "paper50", msgs, 50, 64, 1),
        )

        # consumers: the rate from the first message on; "startup" is assign -> first message
        consumer_target = f">= {TARGETS['consumer']:,}"
        for name, topic, read in (
            ("confluent-kafka Consumer, Kafka-layout topic (sendfile)", "rd", rd_consume),
            ("confluent-kafka Consumer, Arrow-body topic (converted)", "ours", rd_consume),
            (
                "ours: Consumer.poll() per message, Arrow-body topic",
                "ours",
                lambda b, t, k: our_consume(b, t, k, False),
            ),
            (
                "ours: Consumer.poll_arrow(), Arrow-body topic",
                "ours",
                lambda b, t, k: our_consume(b, t, k, True),
            ),
            (
                "ours: Consumer.poll_arrow(), Kafka-layout topic",
                "rd",
                lambda b, t, k: our_consume(b, t, k, True),
            ),
        ):
            startup, dt, got = read(bs, topic, n + 1)
            row(name, got, dt, consumer_target if name.startswith("confluent") else "", startup)
        dt, got = paper.consume(bs, "paper50", n, arrow=True)
        row("ours (paper.py): poll_arrow(), 200 KB fetches", got, dt)

    print()
    print(
        f"{'client':58} {'messages':>10} {'seconds':>8} {'msg/s':>12} {'MB/s':>7} {'startup':>8} "
        f"{'cpu client':>10} {'cpu broker':>10} {'target msg/s':>13}"
    )
    for name, cnt, sec, startup, cpu_c, cpu_b, target in rows:
        rate = cnt / sec
        st = f"{startup:.2f}" if startup is not None else "-"
        print(
            f"{name:58} {cnt:>10,} {sec:>8.2f} {rate:>12,.0f} {rate * MSG / 1e6:>7.1f} {st:>8} "
            f"{cpu_c:>10.2f} {cpu_b:>10.2f} {target:>13}"
        )
    print("\nconsumer rows: msg/s from the first message to the last (startup: assign -> first message, s);")
    print(
        "cpu: CPU seconds of this process (with librdkafka's threads) and of the broker process in the row;"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


def producer_pairs(n: int, codec: str, pairs: int) -> int:
    """``--producers``: confluent's produce() row and our send() row, alternated ``pairs`` times."""
    msgs = paper.values(n)
    with tempfile.TemporaryDirectory() as d, EmbeddedBroker(Path(d), mode="process") as broker:
        bs = broker.bootstrap
        admin = Admin(bs)
        for i in range(pairs):
            admin.create_topic(f"rd{i}", 1)
            admin.create_topic(f"ours{i}", 1)
        admin.close()
        print(f"broker pid {broker.pid}; {n:,} messages of {MSG} bytes, codec {codec}", file=sys.stderr)
        print(
            f"{'pair':>4} {'confluent':>10} {'ours':>10} {'ratio':>6} | ours: {'main cpu':>8} {'other cpu':>9} "
            f"{'queued':>6} {'asleep':>6} {'flush':>5} {'vol sw':>6} {'invol sw':>8} {'gc 0/1/2':>9} {'answers':>7} {'broker cpu':>10} {'load':>5}"
        )
        for i in range(pairs):
            rd = rd_produce(bs, f"rd{i}", msgs, codec)
            b0 = cpu_seconds(broker.pid)
            diag: dict = {}
            ours = our_produce(bs, f"ours{i}", msgs, codec, diag)
            gcs = "/".join(str(c) for c in diag["gc"])
            print(
                f"{i:>4} {n / rd:>10,.0f} {n / ours:>10,.0f} {rd / ours:>6.2f} | {diag['main_cpu']:>14.2f} "
                f"{diag['other_cpu']:>9.2f} {diag['queued']:>6.2f} {diag['asleep']:>6.2f} {diag['flush']:>5.2f} {diag['voluntary']:>6} {diag['involuntary']:>8} {gcs:>9} "
                f"{diag['responses']:>7} {cpu_seconds(broker.pid) - b0:>10.2f} {os.getloadavg()[0]:>5.1f}",
                flush=True,
            )
    print(
        "\nmsg/s to the last delivery acknowledged; 'main cpu': the sending thread's CPU seconds in our row"
    )
    print(
        "and of its wall time, 'queued': runnable but waiting for a CPU (the machine's load, the broker on its"
    )
    print("core); 'asleep': blocked (the GIL, a lock, flush() waiting for the last answer); other cpu: the")
    print("client's other threads (sender, I/O); flush: seconds in flush() after the send() loop; sw: the")
    print("sending thread's context switches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
