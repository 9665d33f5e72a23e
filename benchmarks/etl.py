"""Benchmark: the exactly-once loads against a plain Spark copy, same data, one run.

    .venv/bin/python benchmarks/etl.py [--rows 2000000] [--partitions 1,4] [--repeat 2] [--paths baseline,directory,...]

For each partition count, one topic holds ``--rows`` 200-byte messages spread
round-robin over its partitions, and three paths load all of it:

- baseline: ``spark.read.format("logsource")`` over the same offset ranges
  ``.write.parquet(...)``, no offsets stored anywhere;
- directory: ``logsource etl`` into a directory (plan from the committed offsets, write,
  audit by re-counting the written files, put the manifest, publish);
- iceberg: ``logsource etl --output-format iceberg`` (write per hour, audit, one
  pyiceberg ``add_files`` commit with the offsets in the snapshot summary);
- copy-store rename / copy-store direct: the directory sink on ``file://`` through the test
  double whose rename copies then deletes (tests/support/copy_rename_fs.py), standing in for an
  object store: the rename protocol (forced) against the direct protocol (what auto picks there).

Rounds rotate the order of the paths; the table reports the fastest of each, the ratio
against the baseline with the same partitions, and the steps of the exactly-once paths.
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

PATHS = ("baseline", "directory", "iceberg", "copy-rename", "copy-direct")
LABELS = {
    "baseline": "baseline: read logsource -> write.parquet",
    "directory": "directory sink (exactly-once, all steps)",
    "iceberg": "iceberg sink (exactly-once, all steps)",
    "copy-rename": "copy-store, rename mode (rename = copy+delete)",
    "copy-direct": "copy-store, direct mode (auto there)",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--partitions", default="1,4", help="comma list of topic partition counts")
    ap.add_argument("--repeat", type=int, default=2, help="rounds of every path; fastest reported")
    ap.add_argument("--paths", default=",".join(PATHS), help=f"comma list of {PATHS}")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    paths = tuple(p for p in PATHS if p in args.paths.split(","))
    assert "baseline" in paths, "the ratios need the baseline"
    counts = [int(p) for p in args.partitions.split(",")]

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from pyspark_logsource import Admin, EmbeddedBroker, Producer, etl
    from pyspark_logsource import register as register_logsource

    work = tempfile.mkdtemp(prefix="logsource-etl-bench-")
    try:
        with EmbeddedBroker(os.path.join(work, "broker")) as broker:
            bs = broker.bootstrap
            ends: dict[int, dict] = {}
            for n in counts:
                topic = f"etlbench{n}"
                with Admin(bs) as admin:
                    admin.create_topic(topic, partitions=n)
                t0 = time.perf_counter()
                with Producer(bs, linger_ms=20, acks=1) as producer:
                    futures = []
                    # chunks round-robin over the partitions: one Spark task per partition
                    for i, t in enumerate(make_rows(args.rows)):
                        futures.extend(producer.send_arrow(topic, t, partition=i % n))
                    producer.flush()
                    for f in futures:
                        f.result()
                with Admin(bs) as admin:
                    ends[n] = admin.list_offsets([(topic, p) for p in range(n)], "latest")
                assert sum(ends[n].values()) == args.rows, ends[n]
                print(
                    f"{topic}: {args.rows:,} x 200-byte messages in {n} partition(s), {time.perf_counter() - t0:.1f}s",
                    flush=True,
                )

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

            def baseline(n: int, out: str) -> tuple[float, dict]:
                topic = f"etlbench{n}"
                ending = json.dumps({topic: {str(p): o for (_t, p), o in ends[n].items()}})
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
                secs = time.perf_counter() - t
                assert spark.read.parquet(out).count() == args.rows
                return secs, {}

            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
            from support import copy_rename_fs

            from pyspark_logsource.offsets import register_filesystem

            def load(n: int, out: str, sink: str) -> tuple[float, dict]:
                extra = {
                    "iceberg": ["--output-format", "iceberg", "--table", "bench.events"],
                    "copy-rename": ["--commit-mode", "rename"],
                }.get(sink, [])
                if sink.startswith("copy"):
                    copy_rename_fs.install()
                    out = "file://" + out
                else:
                    register_filesystem("file", None)
                cfg = etl.parse_args(
                    [
                        "--bootstrap-servers",
                        bs,
                        "--subscribe",
                        f"etlbench{n}",
                        "--output",
                        out,
                        "--no-progress",
                        *extra,
                    ]
                )
                t = time.perf_counter()
                res = etl.run_load(spark, cfg, log=lambda s: None)
                secs = time.perf_counter() - t
                assert res.rows == args.rows, res
                assert etl.make_sink(cfg, spark).verify(spark, lambda s: None).ok
                steps = dict(res.timings)
                steps["recovery, plan, setup"] = secs - res.seconds
                return secs, steps

            # warm up every path (JVM, Python workers, pyiceberg imports) on a small load
            warm = os.path.join(work, "warm")
            small = f"etlbench{counts[0]}"
            spark.read.format("logsource").option("bootstrap.servers", bs).option(
                "assign", json.dumps({small: [0]})
            ).option("endingOffsets", json.dumps({small: {"0": 1000}})).load().write.parquet(warm + "-b")
            for sink in ("directory", "iceberg"):
                extra = ["--output-format", "iceberg", "--table", "bench.warm"] if sink == "iceberg" else []
                etl.run_load(
                    spark,
                    etl.parse_args(
                        [
                            "--bootstrap-servers",
                            bs,
                            "--assign",
                            json.dumps({small: [0]}),
                            "--max-offsets-per-load",
                            "1000",
                            "--output",
                            f"{warm}-{sink}",
                            *extra,
                        ]
                    ),
                    log=lambda s: None,
                )

            best: dict[tuple[int, str], tuple[float, dict]] = {}
            for r in range(args.repeat):
                for n in counts:
                    order = paths[r % len(paths) :] + paths[: r % len(paths)]
                    for which in order:
                        out = os.path.join(work, f"{which}-{n}-{r}")
                        secs, steps = baseline(n, out) if which == "baseline" else load(n, out, which)
                        print(f"  round {r}: {n} partition(s) {which:<9} {secs:7.2f}s", flush=True)
                        if (n, which) not in best or secs < best[(n, which)][0]:
                            best[(n, which)] = (secs, steps)
                        shutil.rmtree(out, ignore_errors=True)

            mb = args.rows * 200 / 1e6
            print()
            print(f"{'rows':>10} {'parts':>5} {'path':<48} {'seconds':>8} {'MB/s':>7} {'ratio':>7}")
            for n in counts:
                b = best[(n, "baseline")][0]
                for which, label in LABELS.items():
                    if which not in paths:
                        continue
                    secs, steps = best[(n, which)]
                    print(
                        f"{args.rows:>10,} {n:>5} {label:<48} {secs:>8.2f} {mb / secs:>7.1f} {secs / b:>6.2f}x"
                    )
                    for step, s in steps.items():
                        print(f"{'':>10} {'':>5} {'  of which ' + step:<48} {s:>8.2f}")
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
