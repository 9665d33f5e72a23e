"""Benchmark: the overhead of the exactly-once ETL load over a plain Spark copy, in one run.

    .venv/bin/python benchmarks/etl.py [--rows 10000000] [--partitions 4] [--repeat 1]

Loads ``--rows`` 200-byte messages from a topic into Parquet twice per round:

- baseline: ``spark.read.format("logsource")`` over the same offset ranges
  ``.write.parquet(...)``, no offsets stored anywhere;
- etl: ``pyspark_logsource.etl``'s load (plan from the committed offsets, stage, audit by
  re-counting the written files, put the manifest, publish by rename).

Rounds alternate the order; the table reports the fastest of each. The figure is
etl / baseline (target <= 1.10), with the etl time broken into write, audit and commit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from rows import make_rows  # benchmarks/ is sys.path[0] when run as a script


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1, help="rounds of (baseline, etl); fastest reported")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from pyspark_logsource import Admin, EmbeddedBroker, Producer, etl
    from pyspark_logsource import register as register_logsource

    work = tempfile.mkdtemp(prefix="logsource-etl-bench-")
    topic = "etlbench"
    try:
        with EmbeddedBroker(os.path.join(work, "broker")) as broker:
            bs = broker.bootstrap
            with Admin(bs) as admin:
                admin.create_topic(topic, partitions=args.partitions)
            t0 = time.perf_counter()
            with Producer(bs, linger_ms=20, acks=1) as producer:
                futures = []
                # chunks round-robin over the partitions, so that the load has one Spark task per partition
                for i, t in enumerate(make_rows(args.rows)):
                    futures.extend(producer.send_arrow(topic, t, partition=i % args.partitions))
                producer.flush()
                for f in futures:
                    f.result()
            tps = [(topic, p) for p in range(args.partitions)]
            with Admin(bs) as admin:
                ends = admin.list_offsets(tps, "latest")
            assert sum(ends.values()) == args.rows, ends
            print(f"produced {args.rows:,} x 200-byte messages in {time.perf_counter() - t0:.1f}s", flush=True)

            spark = (
                SparkSession.builder.master(args.master)
                .appName("logsource-etl-bench")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.driver.memory", "4g")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            register_logsource(spark)
            ending = json.dumps({topic: {str(p): o for (_t, p), o in ends.items()}})

            def baseline(out: str) -> float:
                t = time.perf_counter()
                (
                    spark.read.format("logsource")
                    .option("bootstrap.servers", bs)
                    .option("subscribe", topic)
                    .option("startingOffsets", "earliest")
                    .option("endingOffsets", ending)
                    .load()
                    .write.parquet(out)
                )
                return time.perf_counter() - t

            def load(out: str) -> tuple[float, etl.LoadResult]:
                a = etl.parse_args(["--bootstrap-servers", bs, "--subscribe", topic, "--output", out, "--no-progress"])
                t = time.perf_counter()
                res = etl.run_load(spark, a, log=lambda s: None)
                return time.perf_counter() - t, res

            # warm up both paths (JVM, Python workers) on a small slice
            small = json.dumps({topic: {str(p): min(o, 1000) for (_t, p), o in ends.items()}})
            spark.read.format("logsource").option("bootstrap.servers", bs).option("subscribe", topic).option(
                "endingOffsets", small
            ).load().write.parquet(os.path.join(work, "warm"))
            base_times, etl_times, results = [], [], []
            for r in range(args.repeat):
                order = ("baseline", "etl") if r % 2 == 0 else ("etl", "baseline")
                for which in order:
                    out = os.path.join(work, f"{which}-{r}")
                    if which == "baseline":
                        base_times.append(baseline(out))
                        n = spark.read.parquet(out).count()
                    else:
                        secs, res = load(out)
                        etl_times.append(secs)
                        results.append(res)
                        n = res.rows
                        assert etl.verify(spark, out, log=lambda s: None).ok
                    assert n == args.rows, (which, n)
                    shutil.rmtree(out, ignore_errors=True)
            b, e = min(base_times), min(etl_times)
            best = results[etl_times.index(e)]
            mb = args.rows * 200 / 1e6
            print()
            print(f"{'rows':>12} {'path':<46} {'seconds':>8} {'MB/s':>8} {'ratio':>7}")
            print(f"{args.rows:>12,} {'baseline: read logsource -> write.parquet':<46} {b:>8.2f} {mb / b:>8.1f} {1.0:>6.2f}x")
            print(f"{args.rows:>12,} {'etl: exactly-once load (all steps)':<46} {e:>8.2f} {mb / e:>8.1f} {e / b:>6.2f}x")
            for step in ("write", "audit", "commit"):
                s = best.timings.get(step, 0.0)
                print(f"{'':>12} {'  of which ' + step:<46} {s:>8.2f}")
            print(f"{'':>12} {'  of which recovery, plan, source setup':<46} {e - best.seconds:>8.2f}")
            print()
            print(f"exactly-once overhead: {100 * (e / b - 1):+.1f}% (target <= +10%), {best.files} files committed")
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
