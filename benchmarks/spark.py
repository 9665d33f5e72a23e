"""Benchmark of the Spark data source against Parquet on local disk, in one run.

    .venv/bin/python benchmarks/spark.py [--rows 10000000] [--partitions 4] [--stream-seconds 60] [--rate 10000]
    .venv/bin/python benchmarks/spark.py --stream-start-only [--stream-start-repeat 3]
    .venv/bin/python benchmarks/spark.py --targets-only --skip-stream-start --sum-only  (issue 25's row)

Rows are 200-byte values. Batch read: ``count()`` and ``sum(length(value))``
over a topic vs over a Parquet copy of the same rows. Batch write: the same
rows to a topic vs to Parquet. The ratio (logsource / parquet) is the figure;
target <= 2x. Streaming: end-to-end latency from ``send()`` to the row being
visible in a ``foreachBatch`` sink at ``--rate`` msg/s, p50 and p99 (target
p99 <= 1 s).

The ``floor`` column is Spark's own cost of a Python data source on this
machine: a trivial source whose tasks yield one pre-built Arrow batch of the
exact read schema over and over (same rows per task, same row size, same
batch size as logsource hands Spark), and for writes a Python Arrow writer
that drops what it gets. No Python data source can beat it, so
``logsource / floor`` is what the data source itself costs and
``floor / parquet`` is what Spark's Python path costs.

Stream start: a fresh process (a user's script) creates the SparkSession,
starts a streaming query with a Parquet sink and waits for its first
committed micro-batch of 3,000 rows: logsource (a topic holding 3,000 rows,
startingOffsets=earliest) against Spark's built-in rate source
(``rate-micro-batch`` with rowsPerBatch=3000, whose first micro-batch holds
exactly those rows; plain ``rate`` starts with an empty one) and a trivial
Python streaming source (Spark's own cost of a Python source: its planner
and worker processes). Same session config for all; runs alternate;
target: logsource <= rate + 3 s.

Every source is warmed up first (JIT, one Python worker per core with its
imports) and each timing is the best of ``--repeat`` runs, interleaved, since
the machine is shared. With psutil installed, CPU seconds of the JVM and of
the Python workers are printed too (they say more than wall time on a loaded
machine).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
from rows import make_rows  # benchmarks/ is sys.path[0] when run as a script


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def worker_package() -> str:
    """Where this process imports pyspark_logsource from (and which format core it runs)."""
    import pyspark_logsource
    from pyspark_logsource.format._speedups import IMPLEMENTATION

    return f"{os.path.dirname(pyspark_logsource.__file__)} ({IMPLEMENTATION})"


def floor_source(row_size: int = 200):
    """A trivial Python data source that yields one pre-built batch of logsource's read schema."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        InputPartition,
        WriterCommitMessage,
    )

    from pyspark_logsource.datasource import COALESCE_BYTES
    from pyspark_logsource.spark.arrow import arrow_read_schema, spark_read_schema

    class FloorReader(DataSourceReader):
        def __init__(self, rows: int, tasks: int) -> None:
            self.rows, self.tasks = rows, tasks

        def partitions(self):
            per = -(-self.rows // self.tasks)
            return [
                InputPartition((i, min(per, self.rows - i * per)))
                for i in range(self.tasks)
                if self.rows > i * per
            ]

        def read(self, partition):
            task, n = partition.value
            per_batch = max(1, COALESCE_BYTES // (row_size + 30))
            m = min(n, per_batch)
            # Built in a few ms (the floor must not pay for making data): one random value repeated,
            # keys k0..k999 as in make_rows.
            pattern = np.random.default_rng(task).integers(97, 123, size=row_size, dtype=np.uint8)
            values = pa.BinaryArray.from_buffers(
                pa.binary(),
                m,
                [
                    None,
                    pa.py_buffer(np.arange(0, (m + 1) * row_size, row_size, dtype=np.int32)),
                    pa.py_buffer(np.tile(pattern, m)),
                ],
            )
            keys = pa.array(np.char.mod("k%d", np.arange(1000)).astype("S"), pa.binary()).take(
                pa.array(np.arange(m) % 1000)
            )
            rb = pa.RecordBatch.from_arrays(
                [
                    keys,
                    values,
                    pa.array(["bench"] * m, pa.string()),
                    pa.array(np.full(m, task, np.int32)),
                    pa.array(np.arange(m, dtype=np.int64)),
                    pa.array(np.full(m, 1_700_000_000_000_000, np.int64)).cast(pa.timestamp("us", tz="UTC")),
                    pa.array(np.zeros(m, np.int32)),
                ],
                schema=arrow_read_schema(False),
            )
            for s in range(0, n, m):
                yield rb if s + m <= n else rb.slice(0, n - s)

    class FloorWriter(DataSourceArrowWriter):
        def write(self, iterator):
            for _ in iterator:
                pass
            return WriterCommitMessage()

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "logsource_floor"

        def schema(self):
            return spark_read_schema(False)

        def reader(self, schema):
            return FloorReader(int(self.options["rows"]), int(self.options["tasks"]))

        def writer(self, schema, overwrite):
            return FloorWriter()

    return FloorSource


class CpuMeter:
    """CPU seconds of the JVM and of Spark's Python workers (children of this process), if psutil is there."""

    def __init__(self) -> None:
        try:
            import psutil
        except ImportError:
            self.psutil = None
        else:
            self.psutil = psutil

    def sample(self) -> tuple[float, float, float] | None:
        if self.psutil is None:
            return None
        jvm = py = 0.0
        for c in self.psutil.Process().children(recursive=True):
            try:
                t = c.cpu_times()
                cmd = " ".join(c.cmdline()[:3])
                if "java" in c.name() or "java" in cmd:
                    jvm += t.user + t.system
                elif "pyspark.daemon" in cmd:
                    # the daemon's reaped children are the finished workers
                    py += t.user + t.system + t.children_user + t.children_system
            except self.psutil.Error:
                pass
        me = self.psutil.Process().cpu_times()
        return jvm, py, me.user + me.system  # this process: the driver's Python and the broker thread


def best_of(repeat: int, fns: dict, cpu: CpuMeter) -> dict:
    """Run each fn ``repeat`` times interleaved; per name (best wall s, cpu at that run, value)."""
    out: dict = {}
    for _ in range(repeat):
        for name, fn in fns.items():
            c0 = cpu.sample()
            t, v = timed(fn)
            c1 = cpu.sample()
            dc = tuple(b - a for a, b in zip(c0, c1, strict=True)) if c0 and c1 else None
            if name not in out or t < out[name][0]:
                out[name] = (t, dc, v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--stream-seconds", type=float, default=60.0)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--skip-stream", action="store_true")
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per measurement (best is reported)")
    ap.add_argument("--skip-stream-start", action="store_true")
    ap.add_argument(
        "--stream-start-only", action="store_true", help="only the stream start row (no 10M-row load)"
    )
    ap.add_argument("--stream-start-repeat", type=int, default=2)
    ap.add_argument(
        "--targets-only",
        action="store_true",
        help="only issue 14's rows: the reads and the stream start (no writes, no streaming latency)",
    )
    ap.add_argument(
        "--sum-only",
        action="store_true",
        help="only the read sum(length(value)) row (no count(); with --targets-only: issue 25's Spark row)",
    )
    ap.add_argument(
        "--also-fetch-bytes",
        type=int,
        help="also time logsource with kafka.fetch.max.bytes set to this (a task's local read chunk), interleaved",
    )
    ap.add_argument(
        "--results-json", help="also write the reads' seconds and the stream start's to this file"
    )
    args = ap.parse_args()
    summary: dict = {"rows": args.rows}
    if args.stream_start_only:
        summary["stream_start"] = stream_start(args)
        write_summary(args.results_json, summary)
        return 0

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from pyspark_logsource import Admin, EmbeddedBroker, Producer
    from pyspark_logsource import register as register_logsource

    work = tempfile.mkdtemp(prefix="logsource-bench-")
    results: list[tuple[str, dict]] = []
    try:
        with EmbeddedBroker(os.path.join(work, "broker")) as broker:
            bs = broker.bootstrap
            admin = Admin(bs)
            admin.create_topic("bench", partitions=args.partitions)
            admin.create_topic("bench_w", partitions=args.partitions)
            admin.create_topic("bench_eo", partitions=args.partitions)
            admin.create_topic("bench_alo", partitions=args.partitions)

            spark = (
                SparkSession.builder.master("local[2]")
                .appName("logsource-bench")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "4")
                .config("spark.driver.memory", "4g")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            register_logsource(spark)
            # the tree a PYTHONPATH run measures: the workers import the package from the environment too
            where = spark.sparkContext.parallelize([0], 1).map(lambda _: worker_package()).collect()[0]
            print(f"driver imports {worker_package()}; a Python worker imports {where}", flush=True)

            # Load: the same rows into the topic (producer) and into Parquet (pyarrow).
            import pyarrow.parquet as pq

            pq_dir = os.path.join(work, "parquet")
            os.makedirs(pq_dir)
            producer = Producer(bs, linger_ms=20, acks=1)
            t0 = time.perf_counter()
            futures = []
            for i, t in enumerate(make_rows(args.rows, keys=True)):
                futures.extend(producer.send_arrow("bench", t))
                pq.write_table(t, os.path.join(pq_dir, f"part-{i:05d}.parquet"))
            producer.flush()
            for f in futures:
                f.result()
            producer.close()
            print(f"loaded {args.rows:,} rows in {time.perf_counter() - t0:.1f}s", flush=True)

            tasks = args.partitions * 2
            src = (
                spark.read.format("logsource")
                .option("bootstrap.servers", bs)
                .option("minPartitions", str(tasks))
            )
            spark.dataSource.register(floor_source())
            floor = spark.read.format("logsource_floor").option("tasks", str(tasks))
            cpu = CpuMeter()

            # Warm up every path on a small copy with as many tasks as cores and more: the JIT,
            # and one Python worker per core with its imports (a fresh worker costs seconds here).
            warm_rows = min(args.rows, 200_000)
            admin.create_topic("warm", partitions=args.partitions)
            warm_pq = os.path.join(work, "warm_parquet")
            os.makedirs(warm_pq)
            wp = Producer(bs, linger_ms=20, acks=1)
            for i, t in enumerate(make_rows(warm_rows, chunk=50_000, keys=True)):
                wp.send_arrow("warm", t)
                pq.write_table(t, os.path.join(warm_pq, f"part-{i:05d}.parquet"))
            wp.flush()
            wp.close()
            wdf = spark.read.parquet(warm_pq)
            for df in (
                src.option("subscribe", "warm").load(),
                floor.option("rows", str(warm_rows)).load(),
                wdf,
            ):
                df.count()
                df.select(F.sum(F.length("value"))).collect()
            wdf.write.format("logsource").option("bootstrap.servers", bs).option("topic", "warm").mode(
                "append"
            ).save()
            wdf.write.format("logsource_floor").mode("append").save()
            wdf.write.mode("overwrite").parquet(os.path.join(work, "warm_out"))

            sources = {
                "logsource": lambda: src.option("subscribe", "bench").load(),
                "floor": lambda: floor.option("rows", str(args.rows)).load(),
                "parquet": lambda: spark.read.parquet(pq_dir),
            }
            if args.also_fetch_bytes:
                fetch = src.option("kafka.fetch.max.bytes", str(args.also_fetch_bytes))
                sources[f"logsource fetch {args.also_fetch_bytes}"] = lambda: fetch.option(
                    "subscribe", "bench"
                ).load()
            reads = [
                ("read count()", lambda df: df.count()),
                ("read sum(length(value))", lambda df: df.select(F.sum(F.length("value"))).collect()[0][0]),
            ]
            for label, q in reads[1:] if args.sum_only else reads:
                r = best_of(args.repeat, {k: (lambda q=q, f=f: q(f())) for k, f in sources.items()}, cpu)
                assert len({v[2] for v in r.values()}) == 1, (label, r)
                results.append((label, r))
                summary[label] = {k: v[0] for k, v in r.items()}
            if args.targets_only:
                print_reads(args, results, cpu)
            else:
                writes_and_stream(spark, bs, admin, pq_dir, work, args, results, cpu)
            spark.stop()
            admin.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not args.skip_stream_start:
        summary["stream_start"] = stream_start(args)
    write_summary(args.results_json, summary)
    return 0


def print_reads(args, results: list, cpu) -> None:
    """The table of the timed operations so far: seconds, ratios, CPU seconds per process group."""
    print()
    print(
        f"best of {args.repeat} interleaved runs; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"{'rows':>12} {'operation':<24} {'logsource s':>11} {'floor s':>8} {'parquet s':>9} "
        f"{'ls/parquet':>10} {'floor/parquet':>13} {'ls/floor':>8} {'rows/s logsource':>16}"
    )
    for label, r in results:
        a, f, b = r["logsource"][0], r["floor"][0], r["parquet"][0]
        print(
            f"{args.rows:>12,} {label:<24} {a:>11.2f} {f:>8.2f} {b:>9.2f} "
            f"{a / b:>9.2f}x {f / b:>12.2f}x {a / f:>7.2f}x {args.rows / a:>16,.0f}"
        )
    for label, r in results:
        for k in r.keys() - {"logsource", "floor", "parquet"}:
            a, f = r[k][0], r["floor"][0]
            cells = "{:.1f} / {:.1f} / {:.1f}".format(*r[k][1]) if r[k][1] else "-"
            print(f"{'':>12} {label:<24} {k}: {a:.2f} s, {a / f:.2f}x the floor; CPU {cells}")
    if cpu.psutil is not None:
        print()
        print("CPU seconds in those runs: JVM / Python workers / this process (driver + the broker thread)")
        print(f"{'operation':<24} {'logsource':>18} {'floor':>18} {'parquet':>18}")
        for label, r in results:
            cells = [
                "{:.1f} / {:.1f} / {:.1f}".format(*r[k][1]) if r[k][1] else "-"
                for k in ("logsource", "floor", "parquet")
            ]
            print(f"{label:<24} {cells[0]:>18} {cells[1]:>18} {cells[2]:>18}")
    sys.stdout.flush()


def writes_and_stream(spark, bs: str, admin, pq_dir: str, work: str, args, results: list, cpu) -> None:
    """The write rows (logsource, floor, Parquet sinks; exactly-once vs at-least-once) and the streaming latency."""
    # Write: the Parquet copy as the Spark input for all sinks.
    df = spark.read.parquet(pq_dir)
    out_pq = os.path.join(work, "out_parquet")
    runs = 0

    def write_ls() -> None:
        nonlocal runs
        runs += 1
        df.write.format("logsource").option("bootstrap.servers", bs).option("topic", "bench_w").mode(
            "append"
        ).save()

    r = best_of(
        args.repeat,
        {
            "logsource": write_ls,
            "floor": lambda: df.write.format("logsource_floor").mode("append").save(),
            "parquet": lambda: df.write.mode("overwrite").parquet(out_pq),
        },
        cpu,
    )

    def records(topic: str) -> int:  # offsets would count the commits' transaction markers too
        return (
            spark.read.format("logsource")
            .option("bootstrap.servers", bs)
            .option("subscribe", topic)
            .load()
            .count()
        )

    written = records("bench_w")
    assert written == args.rows * runs, (written, runs)
    results.append(("write", r))

    print_reads(args, results, cpu)

    # Exactly-once (the default: tasks stage, the driver commits) vs at-least-once
    # (exactlyOnce=false) on the same DataFrame, interleaved in this run.
    def write_mode(topic: str, exactly_once: str) -> None:
        (
            df.write.format("logsource")
            .option("bootstrap.servers", bs)
            .option("topic", topic)
            .option("exactlyOnce", exactly_once)
            .mode("append")
            .save()
        )

    r = best_of(
        args.repeat,
        {
            "exactly-once": lambda: write_mode("bench_eo", "true"),
            "at-least-once": lambda: write_mode("bench_alo", "false"),
        },
        cpu,
    )
    committed = records("bench_eo")
    assert committed % args.rows == 0 and committed == records("bench_alo"), committed
    eo, alo = r["exactly-once"][0], r["at-least-once"][0]
    print()
    print(
        f"{'rows':>12} {'operation':<32} {'exactly-once s':>14} {'at-least-once s':>15} {'throughput eo/alo':>17}"
    )
    print(
        f"{args.rows:>12,} {'write (same data)':<32} {eo:>14.2f} {alo:>15.2f} {alo / eo:>16.2f}x"
        f"   (target >= 0.8)"
    )
    sys.stdout.flush()

    if not args.skip_stream:
        stream_latency(spark, bs, admin, args)


def write_summary(path: str | None, summary: dict) -> None:
    """The figures benchmarks/paper.py prints in issue 14's table (seconds, best of the runs)."""
    if path:
        import json

        with open(path, "w") as f:
            json.dump(summary, f)


def stream_latency(spark, bs: str, admin, args) -> None:
    """p50/p99 of send() -> visible in foreachBatch at a steady rate."""
    from pyspark_logsource import Producer

    admin.create_topic("lat", partitions=2)
    latencies: list[np.ndarray] = []
    lock = threading.Lock()

    def sink(batch_df, batch_id):
        seen = time.time() * 1000.0
        t = batch_df.select("timestamp").toArrow()
        if t.num_rows:
            sent = t.column(0).cast(pa.int64()).to_numpy() / 1000.0  # us -> ms
            with lock:
                latencies.append(seen - sent)

    q = (
        spark.readStream.format("logsource")
        .option("bootstrap.servers", bs)
        .option("subscribe", "lat")
        .option("startingOffsets", "latest")
        .load()
        .writeStream.foreachBatch(sink)
        .trigger(processingTime="0 seconds")
        .start()
    )
    time.sleep(5)  # let the first (empty) batches run
    producer = Producer(bs, linger_ms=1, acks=1)
    stop = time.time() + args.stream_seconds
    sent = 0
    tick = 0.01
    per_tick = max(1, int(args.rate * tick))
    payload = b"x" * 200
    next_t = time.time()
    while time.time() < stop:
        for _ in range(per_tick):  # the producer, not the data source, is what loops here
            producer.send("lat", payload)
        sent += per_tick
        next_t += tick
        time.sleep(max(0.0, next_t - time.time()))
    producer.flush()
    producer.close()
    deadline = time.time() + 30
    while time.time() < deadline:
        with lock:
            got = sum(len(x) for x in latencies)
        if got >= sent:
            break
        time.sleep(0.2)
    q.stop()
    lat = np.concatenate(latencies) if latencies else np.array([np.nan])
    print()
    print(
        f"streaming: {sent:,} messages at {args.rate:,}/s for {args.stream_seconds:.0f}s, {len(lat):,} seen"
    )
    print(f"{'latency send -> foreachBatch':<30} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    print(f"{'':<30} {np.percentile(lat, 50):>8.0f} {np.percentile(lat, 99):>8.0f} {np.max(lat):>8.0f}")


START_ROWS = 3000
START_SOURCES = ("rate", "python floor", "logsource")


def stream_start(args) -> dict[str, float]:
    """Fresh process -> first committed micro-batch, per source, alternating; prints the best of each."""
    import json
    import subprocess

    import pyarrow.parquet as pq

    from pyspark_logsource import Admin, EmbeddedBroker, Producer

    work = tempfile.mkdtemp(prefix="logsource-start-")
    best: dict[str, tuple[float, float]] = {}
    try:
        with EmbeddedBroker(os.path.join(work, "broker"), mode="process") as broker:
            bs = broker.bootstrap
            with Admin(bs) as admin:
                admin.create_topic("start", partitions=2)
            with Producer(bs, linger_ms=5, acks=1) as p:
                for i in range(START_ROWS):
                    p.send("start", b"x" * 200, key=b"k%d" % (i % 1000))
            env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
            for r in range(args.stream_start_repeat):
                for source in START_SOURCES:
                    out = os.path.join(work, f"{source.replace(' ', '_')}-{r}")
                    t0 = time.time()
                    proc = subprocess.run(
                        [sys.executable, __file__, "--stream-start-child", source, bs, out],
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=900,
                    )
                    marks = [json.loads(x[6:]) for x in proc.stdout.splitlines() if x.startswith("MARKS ")]
                    if proc.returncode or not marks:
                        raise RuntimeError(f"{source}: child failed\n{proc.stderr[-3000:]}")
                    m = marks[0]
                    rows = pq.read_table(os.path.join(out, "data")).num_rows
                    assert rows == START_ROWS, (source, rows)
                    total, query = m["commit"] - t0, m["commit"] - m["start"]
                    print(
                        f"  {source:<13} run {r + 1}: process start -> commit {total:6.2f} s, "
                        f"start() -> commit {query:6.2f} s",
                        flush=True,
                    )
                    if source not in best or total < best[source][0]:
                        best[source] = (total, query)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rate = best["rate"]
    print()
    print(
        f"stream start -> first committed micro-batch ({START_ROWS:,} rows, Parquet sink), a fresh process each, "
        f"best of {args.stream_start_repeat}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"{'source':<16} {'process start -> commit s':>26} {'start() -> commit s':>20} {'- rate s':>9}")
    for source in START_SOURCES:
        total, query = best[source]
        print(f"{source:<16} {total:>26.2f} {query:>20.2f} {total - rate[0]:>+9.2f}")
    print("target: logsource <= rate + 3 s")
    return {source: best[source][0] for source in START_SOURCES}


def stream_start_child(source: str, bs: str, out: str) -> None:
    """One fresh driver: session, query, wait for commits/0; prints the wall-clock marks."""
    import json

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("logsource-bench-start")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    marks = {"session": time.time()}
    if source == "logsource":
        from pyspark_logsource import register

        register(spark)
        reader = (
            spark.readStream.format("logsource")
            .option("bootstrap.servers", bs)
            .option("subscribe", "start")
            .option("startingOffsets", "earliest")
        )
    elif source == "rate":
        reader = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", START_ROWS)
    else:
        spark.dataSource.register(floor_stream_source())
        reader = spark.readStream.format("logsource_stream_floor")
    ckpt = os.path.join(out, "checkpoint")
    marks["start"] = time.time()
    q = (
        reader.load()
        .writeStream.format("parquet")
        .option("checkpointLocation", ckpt)
        .start(os.path.join(out, "data"))
    )
    while not os.path.exists(os.path.join(ckpt, "commits", "0")):
        if q.exception() is not None:
            raise q.exception()
        time.sleep(0.01)
    marks["commit"] = time.time()
    print("MARKS " + json.dumps(marks), flush=True)
    q.stop()
    spark.stop()


def floor_stream_source():
    """A trivial Python streaming source: one micro-batch of START_ROWS rows of logsource's schema, built
    in the task with pyarrow alone (no import of this package: the floor pays only Spark's own costs)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class FloorStreamReader(DataSourceStreamReader):
        def initialOffset(self):
            return {"rows": 0}

        def latestOffset(self):
            return {"rows": START_ROWS}

        def partitions(self, start, end):
            n = end["rows"] - start["rows"]
            return [InputPartition((i, n // 2 + (i < n % 2))) for i in range(2)]

        def read(self, partition):
            import datetime

            import pyarrow as pa

            task, n = partition.value
            now = datetime.datetime.now(datetime.timezone.utc)
            yield pa.RecordBatch.from_pydict(
                {
                    "key": pa.array([b"k%d" % (i % 1000) for i in range(n)], pa.binary()),
                    "value": pa.array([b"x" * 200] * n, pa.binary()),
                    "topic": pa.array(["start"] * n, pa.string()),
                    "partition": pa.array([task] * n, pa.int32()),
                    "offset": pa.array(range(n), pa.int64()),
                    "timestamp": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
                    "timestampType": pa.array([0] * n, pa.int32()),
                }
            )

    class FloorStreamSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "logsource_stream_floor"

        def schema(self):
            return (
                "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
                "timestampType int"
            )

        def streamReader(self, schema):
            return FloorStreamReader()

    return FloorStreamSource


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--stream-start-child":
        stream_start_child(*sys.argv[2:])
        sys.exit(0)
    sys.exit(main())
