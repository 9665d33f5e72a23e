"""The job's entry point: parse the configuration, start Spark when needed, run one action."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import LogSourceError
from ..offsets import format_table, uri_scheme
from ..spark.quiet import quiet_spark
from .commit import Log
from .config import EtlConfig, parse_args
from .load import make_sink, run_load
from .lock import run_lock


def get_spark(cfg: EtlConfig) -> Any:
    """The job's SparkSession (spark-submit's settings win; --master otherwise, default local[*])."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName("logsource-etl")
    if cfg.master:
        # without it, spark-submit's --master applies, and plain `python -m` gets local[*]
        b = b.master(cfg.master)
    b = b.config("spark.ui.showConsoleProgress", "true" if cfg.progress else "false")
    spark = b.getOrCreate()
    quiet_spark(
        spark
    )  # errors only, unless spark-submit's --conf spark.log.level or a log4j2 file says otherwise
    return spark


def needs_spark(cfg: EtlConfig) -> bool:
    """--status/--repair of a local directory need no Spark; every URI goes through Spark's Hadoop."""
    if cfg.action in ("load", "verify"):
        return True
    if cfg.sink == "iceberg":
        return bool(cfg.catalog)  # a production catalog's table may live on any Hadoop store
    return uri_scheme(cfg.output) != ""


def status(cfg: EtlConfig, spark: Any = None, log: Log = print) -> int:
    """Print the committed offsets as a table (after recovery: an interrupted publish is finished)."""
    sink = make_sink(cfg, spark)
    sink.recover(log)
    log(format_table(sink.status_rows()))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; returns the process exit code (0 ok, 1 verify found differences, 2 error)."""
    try:
        cfg = parse_args(argv)
        with run_lock(cfg):  # before Spark starts: a second run on the same output is refused at once
            return _run(cfg)
    except LogSourceError as e:
        print(f"etl: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


def _run(cfg: EtlConfig) -> int:
    """The action of ``cfg``, with its directories locked."""
    spark = get_spark(cfg) if needs_spark(cfg) else None
    if cfg.action == "status":
        return status(cfg, spark)
    if cfg.action == "repair":
        from .directory import DirectorySink

        if cfg.sink != "directory":
            print("--repair applies to directory outputs; an iceberg table rolls back with its own tools")
            return 2
        man = DirectorySink(cfg, spark).repair()
        print(f"withdrew load {man.seq}; its range will be loaded again" if man else "nothing committed")
        return 0
    if cfg.action == "verify":
        if cfg.streaming:
            from .verify import verify_streaming

            return 0 if verify_streaming(spark, cfg.output, cfg.checkpoint).ok else 1
        return 0 if make_sink(cfg, spark).verify(spark, print).ok else 1
    if cfg.streaming:
        from .streaming import run_streaming

        run_streaming(spark, cfg)
        return 0
    run_load(spark, cfg)
    return 0
