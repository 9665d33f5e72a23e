"""Driver script for the kill-and-restart test: logsource -> parquet file sink with a checkpoint.

Run as its own process (its own SparkSession, so that the test can kill -9
the whole driver):

    python stream_to_parquet.py BOOTSTRAP TOPIC CHECKPOINT OUTPUT [--available-now] [--max-per-trigger N]

Without --available-now it streams until killed; with it, it processes what
is in the topic now and exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("checkpoint")
    ap.add_argument("output")
    ap.add_argument("--available-now", action="store_true")
    ap.add_argument("--max-per-trigger", type=int, default=0)
    ap.add_argument("--group-id", default="")
    args = ap.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the support package
    from support.spark_jvm import driver_java_options

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("logsource-kill-restart")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", driver_java_options())  # started 4 times per session
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    reader = (
        spark.readStream.format("logsource")  # auto-registered: no register() call
        .option("bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
    )
    if args.max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_per_trigger))
    if args.group_id:
        reader = reader.option("groupId", args.group_id)
    df = reader.load().selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
    writer = df.writeStream.format("parquet").option("checkpointLocation", args.checkpoint)
    if args.available_now:
        q = writer.trigger(availableNow=True).start(args.output)
    else:
        q = writer.trigger(processingTime="200 milliseconds").start(args.output)
    print("STARTED", flush=True)
    q.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
