"""Benchmark of the Spark data source against Parquet on local disk, in one run.

    .venv/bin/python benchmarks/spark.py [--rows 10000000] [--partitions 4] [--stream-seconds 60] [--rate 10000]

Rows are 200-byte values. Batch read: ``count()`` and ``sum(length(value))``
over a topic vs over a Parquet copy of the same rows. Batch write: the same
rows to a topic vs to Parquet. The ratio (logsource / parquet) is the figure;
target <= 2x. Streaming: end-to-end latency from ``send()`` to the row being
visible in a ``foreachBatch`` sink at ``--rate`` msg/s, p50 and p99 (target
p99 <= 1 s).
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


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def make_rows(n: int, size: int = 200, chunk: int = 500_000):
    """Arrow tables of ``n`` distinct ``size``-byte values, built column-wise."""
    rng = np.random.default_rng(0)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
    for s in range(0, n, chunk):
        m = min(chunk, n - s)
        data = alphabet[rng.integers(0, len(alphabet), size=m * size)]
        offsets = pa.array(np.arange(0, (m + 1) * size, size, dtype=np.int32))
        values = pa.BinaryArray.from_buffers(pa.binary(), m, [None, offsets.buffers()[1], pa.py_buffer(data.tobytes())])
        keys = pa.array(np.char.mod("k%d", np.arange(s, s + m) % 1000).astype("S"), pa.binary())
        yield pa.table({"key": keys, "value": values})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--stream-seconds", type=float, default=60.0)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--skip-stream", action="store_true")
    args = ap.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from pyspark_logsource import Admin, EmbeddedBroker, Producer
    from pyspark_logsource import register as register_logsource

    work = tempfile.mkdtemp(prefix="logsource-bench-")
    results: list[tuple[str, float, float]] = []
    try:
        with EmbeddedBroker(os.path.join(work, "broker")) as broker:
            bs = broker.bootstrap
            admin = Admin(bs)
            admin.create_topic("bench", partitions=args.partitions)
            admin.create_topic("bench_w", partitions=args.partitions)

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

            # Load: the same rows into the topic (producer) and into Parquet (pyarrow).
            import pyarrow.parquet as pq

            pq_dir = os.path.join(work, "parquet")
            os.makedirs(pq_dir)
            producer = Producer(bs, linger_ms=20, acks=1)
            t0 = time.perf_counter()
            futures = []
            for i, t in enumerate(make_rows(args.rows)):
                futures.extend(producer.send_arrow("bench", t))
                pq.write_table(t, os.path.join(pq_dir, f"part-{i:05d}.parquet"))
            producer.flush()
            for f in futures:
                f.result()
            producer.close()
            print(f"loaded {args.rows:,} rows in {time.perf_counter() - t0:.1f}s", flush=True)

            src = (
                spark.read.format("logsource")
                .option("bootstrap.servers", bs)
                .option("subscribe", "bench")
                .option("minPartitions", str(args.partitions * 2))
            )
            # Warm up both paths (JVM, Python workers) so that the first timing is not penalised.
            src.load().limit(10).collect()
            spark.read.parquet(pq_dir).limit(10).collect()

            for label, q in (
                ("read count()", lambda df: df.count()),
                ("read sum(length(value))", lambda df: df.select(F.sum(F.length("value"))).collect()[0][0]),
            ):
                t_ls, v_ls = timed(lambda q=q: q(src.load()))
                t_pq, v_pq = timed(lambda q=q: q(spark.read.parquet(pq_dir)))
                assert v_ls == v_pq, (label, v_ls, v_pq)
                results.append((label, t_ls, t_pq))

            # Write: the Parquet copy as the Spark input for both sinks.
            df = spark.read.parquet(pq_dir)
            out_pq = os.path.join(work, "out_parquet")
            t_ls, _ = timed(lambda: df.write.format("logsource").option("bootstrap.servers", bs).option("topic", "bench_w").mode("append").save())
            t_pq, _ = timed(lambda: df.write.mode("overwrite").parquet(out_pq))
            written = sum(admin.list_offsets([("bench_w", p) for p in range(args.partitions)], "latest").values())
            assert written == args.rows, written
            results.append(("write", t_ls, t_pq))

            print()
            print(f"{'rows':>12} {'operation':<26} {'logsource s':>12} {'parquet s':>10} {'ratio':>7} {'rows/s logsource':>17}")
            for label, a, b in results:
                print(f"{args.rows:>12,} {label:<26} {a:>12.2f} {b:>10.2f} {a / b:>6.2f}x {args.rows / a:>17,.0f}")
            sys.stdout.flush()

            if not args.skip_stream:
                stream_latency(spark, bs, admin, args)
            spark.stop()
            admin.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


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
    print(f"streaming: {sent:,} messages at {args.rate:,}/s for {args.stream_seconds:.0f}s, {len(lat):,} seen")
    print(f"{'latency send -> foreachBatch':<30} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    print(f"{'':<30} {np.percentile(lat, 50):>8.0f} {np.percentile(lat, 99):>8.0f} {np.max(lat):>8.0f}")


if __name__ == "__main__":
    sys.exit(main())
