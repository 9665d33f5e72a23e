"""Our broker side by side with Apache Kafka, driven by the same clients, in one run and one table.

Same machine, 200-byte messages, N per row, one partition per topic, each broker alone while measured
(Apache Kafka first, stopped, then ours; each first takes 100,000 messages from the perf producer, not
counted, so a JIT warms up):

* Apache Kafka 4.x (the jars ``make peers`` fetched): a single KRaft node (combined broker + controller),
  its default settings but the single-replica internal topics one node needs, 1 GB heap;
* the logsource broker: ``python -m pyspark_logsource.broker`` (EmbeddedBroker, a child process), defaults.

Clients (their own defaults, acks=all, unless the row says):

* Kafka's ``kafka-producer-perf-test`` (org.apache.kafka.tools.ProducerPerformance) with linger.ms 0 and 5;
  ``kafka-consumer-perf-test`` (ConsumerPerformance: its fetch rate, the group join excluded);
* librdkafka (confluent-kafka) from Python: produce() per message with linger 0 and 5 ms, and a consumer.

Per row: msg/s and the broker's CPU seconds per million messages (user + system of the broker process
over the row); per broker its peak RSS (VmHWM). The ratio is ours / Kafka's (> 1: ours is faster or, for
CPU and RSS, uses more).

Then, per broker: end-to-end latency (p50, p99) at a steady 10,000 msg/s for ``--latency-seconds``
(a confluent-kafka producer, linger 0, stamps each value; a confluent-kafka consumer in another process
reads it), ``sum(length(value))`` over ``--spark-rows`` rows of a 2-partition topic read by Spark's
Kafka connector and by our source (one local[2] SparkSession, started before the brokers; each read run
twice, the second timed), and the time from a streaming query's ``start()`` to its first committed
batch (earliest offsets, ``maxOffsetsPerTrigger`` 100,000, the ``noop`` sink, a fresh checkpoint; run
twice, the second timed) with each reader: Spark's connector and our source, each on Kafka and on ours
(the four combinations). The issue asks for 10M rows (``--spark-rows 10000000``: ~2 GB per broker); the
default is 1M: say which N a table used. The load average at each broker's start and at the end is
printed with the table: on a shared machine read the ratios against it.

    .venv/bin/python benchmarks/vs_kafka.py                     # N = 500,000
    .venv/bin/python benchmarks/vs_kafka.py --messages 200000 --spark-rows 10000000 --latency-seconds 20
    .venv/bin/python benchmarks/vs_kafka.py --ours-only --only "confluent-kafka produce, linger 5" \
        --spark-rows 0 --latency-seconds 0              # one row on our broker: a before/after

Targets (printed, never asserted): our broker >= 1.0x Apache Kafka's throughput with the same batching
client; our source on our broker >= 1.0x Spark's Kafka connector on Kafka.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, TopicPartition  # noqa: E402
from confluent_kafka import Consumer as RdConsumer  # noqa: E402
from confluent_kafka import Producer as RdProducer  # noqa: E402
from support.kafka_peer import KafkaServer, kafka_tool  # noqa: E402

from pyspark_logsource import Admin  # noqa: E402
from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402

MSG = 200
#: the perf tools' JVM as kafka-run-class.sh starts them (full JIT; -Xmx512M as the perf-test scripts)
CLIENT_JVM = ("-Xmx512m", "-XX:+UseG1GC")
_TICK = 100
#: the rate of the end-to-end latency run
LATENCY_RATE = 10_000
#: maxOffsetsPerTrigger of the streaming queries whose first committed batch is timed
FIRST_BATCH = 100_000


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def producer_perf(bs: str, topic: str, n: int, linger: int) -> float:
    """kafka-producer-perf-test: msg/s of its summary line."""
    out = kafka_tool(
        "ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        str(n),
        "--record-size",
        str(MSG),
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={bs}",
        f"linger.ms={linger}",
        timeout=600,
        jvm=CLIENT_JVM,
    ).stdout
    last = [ln for ln in out.splitlines() if "records sent" in ln][-1]
    return float(re.search(r"([\d.]+) records/sec", last).group(1))  # type: ignore[union-attr]


def consumer_perf(bs: str, topic: str, n: int) -> float:
    """kafka-consumer-perf-test: fetch.nMsg.sec (the rate once the group is joined)."""
    out = kafka_tool(
        "ConsumerPerformance",
        "--bootstrap-server",
        bs,
        "--topic",
        topic,
        "--messages",
        str(n),
        "--timeout",
        "120000",
        timeout=600,
        jvm=CLIENT_JVM,
    ).stdout
    lines = [ln for ln in out.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[-2].split(",")]
    values = [v.strip() for v in lines[-1].split(",")]
    return float(values[header.index("fetch.nMsg.sec")])


def rd_produce(bs: str, topic: str, n: int, linger: int) -> float:
    """confluent-kafka produce() per message; msg/s to the last delivery."""
    p = RdProducer(
        {
            "bootstrap.servers": bs,
            "linger.ms": linger,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    value = b"x" * MSG
    produce, poll = p.produce, p.poll
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                produce(topic, value, partition=0)
                break
            except BufferError:  # the local queue is full: wait for deliveries, as long as it takes
                poll(0.01)
    left = p.flush(300)
    dt = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"librdkafka producer: {left} messages not delivered")
    return n / dt


def rd_consume(bs: str, topic: str, n: int) -> float:
    """confluent-kafka consumer from the beginning; msg/s from the first message to the n-th."""
    c = RdConsumer(
        {
            "bootstrap.servers": bs,
            "group.id": "vs-kafka",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, first = 0, None
    while got < n:
        for m in c.consume(10_000, 0.05):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(f"librdkafka consumer: {err}")
            if first is None:
                first = time.perf_counter()
            got += 1
    dt = time.perf_counter() - (first or 0.0)
    c.close()
    return got / dt


def _latency_consumer(bs: str, topic: str, n: int, ready, out) -> None:
    """The latency run's consumer (its own process: no GIL shared with the producer): waits at the log
    end, then takes n messages and sends back each one's latency in ms (arrival - the stamp in its value)."""
    c = RdConsumer({"bootstrap.servers": bs, "group.id": "vs-kafka-lat", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_END)])
    c.consume(1, 2.0)  # the assignment's first fetch: the consumer now waits at the log end
    ready.set()
    lat: list[float] = []
    deadline = time.monotonic() + 600
    while len(lat) < n and time.monotonic() < deadline:
        for m in c.consume(100, 0.05):
            if m.error() is None:
                lat.append((time.time_ns() - int.from_bytes(m.value()[:8], "big")) / 1e6)
    c.close()
    out.send(lat)


def rd_latency(bs: str, topic: str, rate: int, seconds: float) -> tuple[float, float]:
    """End-to-end latency at a steady ``rate`` msg/s for ``seconds``: a confluent-kafka producer (linger 0,
    acks=all) stamps each value with its send time (wall clock: the consumer is another process on the same
    machine), a confluent-kafka consumer takes it on arrival; (p50, p99) in ms, the first second dropped."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    n = int(rate * seconds)
    ready, (recv, send) = ctx.Event(), ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_latency_consumer, args=(bs, topic, n, ready, send), daemon=True)
    proc.start()
    if not ready.wait(120):
        raise RuntimeError("latency: the consumer did not start")
    p = RdProducer({"bootstrap.servers": bs, "linger.ms": 0})
    pad = b"x" * (MSG - 8)
    t0 = time.perf_counter()
    for i in range(n):
        ahead = t0 + i / rate - time.perf_counter()
        if ahead > 0.001:  # sleep in steps of >= 1 ms (a shorter sleep overshoots): at most 10 messages early
            time.sleep(ahead)
        p.produce(topic, time.time_ns().to_bytes(8, "big") + pad, partition=0)
        p.poll(0)
    p.flush(60)
    lat = recv.recv() if recv.poll(120) else []
    proc.join(30)
    if len(lat) < n:
        raise RuntimeError(f"latency: {len(lat)} of {n} messages arrived")
    q = statistics.quantiles(lat[rate:] or lat, n=100)
    return q[49], q[98]


def spark_session():
    """local[2], with Spark's Kafka connector (the jars make peers fetched) and our source registered."""
    import pyspark
    from pyspark.sql import SparkSession
    from support.kafka_peer import peers

    from pyspark_logsource import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = peers().spark_kafka_jars(os.path.join(os.path.dirname(pyspark.__file__), "jars"))
    if not jars:
        raise SystemExit("Spark's Kafka connector is not fetched: run 'make peers'")
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    register(spark)
    return spark


def spark_reads(spark, bs: str, topic: str, rows: int) -> dict[str, float]:
    """``sum(length(value))`` over the topic's ``rows`` rows with Spark's Kafka connector and with our
    source: {reader: seconds} (each read twice, the second timed: the first warms up the JVM's code)."""
    from pyspark.sql import functions as F

    out: dict[str, float] = {}
    for name, fmt, opt in (
        ("Spark's Kafka connector", "kafka", "kafka.bootstrap.servers"),
        ("our source", "logsource", "bootstrap.servers"),
    ):

        def read(fmt: str = fmt, opt: str = opt) -> int:
            df = spark.read.format(fmt).option(opt, bs).option("subscribe", topic).load()
            return df.select(F.sum(F.length("value"))).collect()[0][0]

        read()
        t0 = time.perf_counter()
        total = read()
        out[name] = time.perf_counter() - t0
        if total != rows * MSG:
            raise RuntimeError(f"{name}: sum(length(value)) = {total}, want {rows * MSG}")
        print(f"  {name}: {rows:,} rows in {out[name]:.1f} s", file=sys.stderr, flush=True)
    return out


def spark_first_batches(spark, bs: str, topic: str) -> dict[str, float]:
    """A streaming query's first committed batch with Spark's Kafka connector and with our source:
    {reader: seconds} from ``start()`` to the first progress event (Spark reports a batch's progress
    once its offsets and commit log entries are written), from the earliest offsets with
    ``maxOffsetsPerTrigger`` FIRST_BATCH into the ``noop`` sink, a fresh checkpoint each; each query run
    twice, the second timed (the first loads the streaming engine's and the reader's classes)."""

    def first_batch(name: str, fmt: str, opt: str) -> float:
        with tempfile.TemporaryDirectory(prefix="vs-kafka-ckpt-") as ckpt:
            df = (
                spark.readStream.format(fmt)
                .option(opt, bs)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", FIRST_BATCH)
                .load()
            )
            t0 = time.perf_counter()
            q = df.writeStream.format("noop").option("checkpointLocation", ckpt).start()
            try:
                while not q.recentProgress:
                    if q.exception() is not None:
                        raise RuntimeError(f"{name}: the streaming query failed: {q.exception()}")
                    time.sleep(0.02)
                seconds = time.perf_counter() - t0
                rows = q.recentProgress[0]["numInputRows"]
            finally:
                q.stop()
        # Spark's connector splits the limit over the partitions in proportion, rounding down
        if not FIRST_BATCH - 10 <= rows <= FIRST_BATCH:
            raise RuntimeError(f"{name}: the first batch had {rows} rows, want {FIRST_BATCH}")
        return seconds

    out: dict[str, float] = {}
    for name, fmt, opt in (
        ("Spark's Kafka connector", "kafka", "kafka.bootstrap.servers"),
        ("our source", "logsource", "bootstrap.servers"),
    ):
        first_batch(name, fmt, opt)
        out[name] = first_batch(name, fmt, opt)
        print(f"  {name}: first committed batch in {out[name]:.2f} s", file=sys.stderr, flush=True)
    return out


def measure(
    bs: str,
    pid: int,
    n: int,
    latency_s: float = 0.0,
    spark=None,
    spark_rows: int = 0,
    only: str = "",
) -> tuple[dict[str, tuple[float, float]], float, tuple[float, float] | None, dict[str, float]]:
    """Every row (whose name contains ``only``) against one broker: {row: (msg/s, broker CPU s per
    million)}, its peak RSS (MB), the end-to-end (p50, p99) ms at LATENCY_RATE msg/s, and the Spark rows
    {"<reader>: read" or "<reader>: first batch": seconds}."""
    with Admin(bs) as admin:
        for t in ("warm-up", "perf0", "perf5", "rd0", "rd5", "latency"):
            admin.create_topic(t, 1)
        if spark_rows:
            admin.create_topic("spark", 2)
    producer_perf(bs, "warm-up", min(n, 100_000), 5)  # not counted: the broker's JIT / first segment
    rows: dict[str, tuple[float, float]] = {}
    runs: list[tuple[str, Callable[[], float]]] = [
        ("kafka-producer-perf-test, linger 0", lambda: producer_perf(bs, "perf0", n, 0)),
        ("kafka-producer-perf-test, linger 5", lambda: producer_perf(bs, "perf5", n, 5)),
        ("kafka-consumer-perf-test", lambda: consumer_perf(bs, "perf5", n)),
        ("confluent-kafka produce, linger 0", lambda: rd_produce(bs, "rd0", n, 0)),
        ("confluent-kafka produce, linger 5", lambda: rd_produce(bs, "rd5", n, 5)),
        ("confluent-kafka consume", lambda: rd_consume(bs, "rd5", n)),
    ]
    for name, run in runs:
        if only not in name:
            continue
        cpu0 = cpu_seconds(pid)
        rate = run()
        rows[name] = (rate, (cpu_seconds(pid) - cpu0) / n * 1e6)
        print(f"  {name}: {rate:,.0f} msg/s", file=sys.stderr, flush=True)
    rss = peak_rss_mb(pid)  # before the latency and Spark runs: the rows above are what it was for
    latency = None
    if latency_s:
        latency = rd_latency(bs, "latency", LATENCY_RATE, latency_s)
        print(
            f"  latency at {LATENCY_RATE:,} msg/s: p50 {latency[0]:.2f} ms, p99 {latency[1]:.2f} ms",
            file=sys.stderr,
        )
    reads: dict[str, float] = {}
    if spark is not None and spark_rows:
        rd_produce_any(bs, "spark", spark_rows)
        reads = {f"{k}: read": v for k, v in spark_reads(spark, bs, "spark", spark_rows).items()}
        if spark_rows >= FIRST_BATCH:
            reads |= {f"{k}: first batch": v for k, v in spark_first_batches(spark, bs, "spark").items()}
    return rows, rss, latency, reads


def rd_produce_any(bs: str, topic: str, n: int) -> None:
    """n messages of MSG bytes spread over the topic's partitions (librdkafka's sticky partitioner)."""
    p = RdProducer({"bootstrap.servers": bs, "linger.ms": 5, "queue.buffering.max.messages": 2_000_000})
    value = b"x" * MSG
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:  # the local queue is full: wait for deliveries, as long as it takes
                p.poll(0.01)
    if p.flush(600):
        raise RuntimeError("spark rows: not every message delivered")


def load_average() -> str:
    """The machine's 1/5/15-minute load averages, as the table's note prints them."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=500_000, help="messages per row")
    ap.add_argument("--latency-seconds", type=float, default=10.0, help="the latency run (0: skip it)")
    ap.add_argument(
        "--spark-rows",
        type=int,
        default=1_000_000,
        help="rows of the Spark reads (0: skip them; the issue's figure is 10000000)",
    )
    ap.add_argument("--only", default="", help="run only the throughput rows whose name contains this")
    ap.add_argument(
        "--ours-only", action="store_true", help="measure our broker only (a before/after of one change)"
    )
    args = ap.parse_args(argv)
    n = args.messages
    spark = spark_session() if args.spark_rows else None  # started first: idle while a broker is measured
    loads: list[str] = []
    theirs: dict[str, tuple[float, float]] = {}
    their_rss, their_lat, their_reads = float("nan"), None, {}
    with tempfile.TemporaryDirectory(prefix="vs-kafka-") as d:
        if not args.ours_only:
            loads.append(f"Kafka {load_average()}")
            print(f"Apache Kafka (1 GB heap), {n:,} messages of {MSG} B per row", file=sys.stderr)
            with KafkaServer(Path(d) / "kafka", heap="1g", start_timeout=120) as kafka:
                assert kafka.pid is not None
                theirs, their_rss, their_lat, their_reads = measure(
                    kafka.bootstrap, kafka.pid, n, args.latency_seconds, spark, args.spark_rows, args.only
                )
        loads.append(f"ours {load_average()}")
        print("logsource broker", file=sys.stderr)
        with EmbeddedBroker(Path(d) / "logsource", mode="process") as broker:
            assert broker.pid is not None
            ours, our_rss, our_lat, our_reads = measure(
                broker.bootstrap, broker.pid, n, args.latency_seconds, spark, args.spark_rows, args.only
            )
        loads.append(f"end {load_average()}")

    head = ("row", "Kafka msg/s", "ours msg/s", "ratio", "Kafka CPU-s/M", "ours CPU-s/M", "ratio")
    table = [head]
    for name, (o_rate, o_cpu) in ours.items():
        k_rate, k_cpu = theirs.get(name, (float("nan"), float("nan")))
        table.append(
            (
                name,
                f"{k_rate:,.0f}",
                f"{o_rate:,.0f}",
                f"{o_rate / k_rate:.2f}x",
                f"{k_cpu:.2f}",
                f"{o_cpu:.2f}",
                f"{o_cpu / k_cpu:.2f}x" if k_cpu else "-",
            )
        )
    table.append(
        ("broker peak RSS (MB)", f"{their_rss:,.0f}", f"{our_rss:,.0f}", f"{our_rss / their_rss:.2f}x")
    )
    if our_lat:
        for i, q in enumerate(("p50", "p99")):
            k = their_lat[i] if their_lat else float("nan")
            table.append(
                (
                    f"end-to-end {q} ms at {LATENCY_RATE:,} msg/s (confluent-kafka)",
                    f"{k:.2f}",
                    f"{our_lat[i]:.2f}",
                    f"{our_lat[i] / k:.2f}x",
                )
            )
    for row, o_s in our_reads.items():
        k_s = their_reads.get(row, float("nan"))
        reader, what = row.rsplit(": ", 1)
        if what == "read":
            label = f"{reader}: sum(length(value)) of {args.spark_rows:,} rows, rows/s"
            cells = (f"{args.spark_rows / k_s:,.0f}", f"{args.spark_rows / o_s:,.0f}")
        else:
            label = f"{reader}: streaming query's first committed batch ({FIRST_BATCH:,} rows), s"
            cells = (f"{k_s:.2f}", f"{o_s:.2f}")
        table.append((label, *cells, f"{k_s / o_s:.2f}x"))
    widths = [max(len(r[i]) for r in table if i < len(r)) for i in range(len(head))]
    print(f"\nvs_kafka: {n:,} messages of {MSG} B per row, one partition, each broker alone on the machine")
    print(f"load average (1/5/15 min) at each broker's start and at the end: {', '.join(loads)}")
    for r in table:
        print("| " + " | ".join(c.ljust(widths[i]) for i, c in enumerate(r)) + " |")
    print("ratio: ours / Kafka's (rates, CPU, RSS, latency); Kafka's / ours (seconds: > 1 is ours faster)")
    print("target: ours >= 1.00x Kafka's msg/s with the same batching client (linger 5 rows)")
    key = "Spark's Kafka connector: read"
    if key in their_reads and "our source: read" in our_reads:
        ratio = their_reads[key] / our_reads["our source: read"]
        print(f"target: our source on our broker >= 1.00x Spark's Kafka connector on Kafka: {ratio:.2f}x")
    if spark is not None:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
