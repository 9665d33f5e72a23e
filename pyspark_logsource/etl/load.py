"""One batch load: recover, plan, read exactly the plan's ranges, decode, write/audit/commit through a sink."""

from __future__ import annotations

import json
from typing import Any

from ..errors import ConfigError
from ..offsets import offsets_dict
from .commit import LoadResult, Log, Sink, summary_lines
from .config import EtlConfig
from .plan import LoadPlan, plan_from_broker

META_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestampType")
CORRUPT_COLUMN = "_corrupt_record"


def register_source(spark: Any) -> None:
    """Make format("logsource") available in this session."""
    from ..datasource import register

    register(spark)


def make_sink(cfg: EtlConfig, spark: Any = None) -> Sink:
    """The sink the configuration names."""
    if cfg.sink == "iceberg":
        from .iceberg import IcebergSink

        return IcebergSink(cfg, spark)
    from .directory import DirectorySink

    return DirectorySink(cfg, spark)


def transform(df: Any, cfg: EtlConfig) -> Any:
    """Decode the value and add Hive-style partition columns (date/hour in UTC)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    cols = [c for c in df.columns if c in META_COLUMNS or c in ("key", "value", "headers")]
    df = df.select(*cols)
    if cfg.decode == "utf8":
        df = df.withColumn("key", F.col("key").cast("string")).withColumn(
            "value", F.col("value").cast("string")
        )
    elif cfg.decode == "json":
        schema = StructType.fromDDL(cfg.value_schema)
        clash = [f.name for f in schema.fields if f.name in df.columns and f.name != "value"]
        if clash:
            raise ConfigError(f"--value-schema fields {clash} clash with the record's own columns")
        # PERMISSIVE + corrupt-record column: a value that is not valid JSON keeps its text (nothing lost)
        full = StructType(list(schema.fields) + [StructField(CORRUPT_COLUMN, StringType())])
        parsed = F.from_json(
            F.col("value").cast("string"),
            full,
            {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN},
        )
        df = df.withColumn("key", F.col("key").cast("string")).withColumn("value", parsed)
        df = df.select(
            *[c for c in df.columns if c != "value"],
            *[F.col("value")[f.name].alias(f.name) for f in full.fields],
        )
    if "headers" in df.columns and (cfg.format == "csv" or cfg.sink == "iceberg"):
        df = df.drop("headers")
    if cfg.format == "csv" and cfg.decode == "raw":
        df = df.withColumn("key", F.base64("key")).withColumn("value", F.base64("value"))
    if cfg.sink == "directory":
        utc = F.to_utc_timestamp(F.col("timestamp"), F.current_timezone())
        if "date" in cfg.partition_by:
            df = df.withColumn("date", F.date_format(utc, "yyyy-MM-dd"))
        if "hour" in cfg.partition_by:
            df = df.withColumn("hour", F.date_format(utc, "HH"))
    return df


def read_plan(spark: Any, cfg: EtlConfig, plan: LoadPlan) -> Any:
    """The logsource batch read of exactly the plan's ranges."""
    tps = plan.with_data
    r = spark.read.format("logsource")
    opts = cfg.reader_options()
    # assign exactly the partitions with new data, so that a partition created after planning is not read
    assign: dict[str, list[int]] = {}
    for t, p in tps:
        assign.setdefault(t, []).append(p)
    for k in ("subscribe", "subscribePattern"):
        opts.pop(k, None)
    opts["assign"] = json.dumps(assign)
    opts["startingOffsets"] = json.dumps(offsets_dict({tp: plan.start[tp] for tp in tps}))
    opts["endingOffsets"] = json.dumps(offsets_dict({tp: plan.end[tp] for tp in tps}))
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def run_load(spark: Any, cfg: EtlConfig, log: Log = print, sink: Sink | None = None) -> LoadResult:
    """One batch load: recover, plan, read, write, audit, commit."""
    sink = sink or make_sink(cfg, spark)
    sink.recover(log)
    plan, partitions = plan_from_broker(cfg, sink.committed_offsets(), log)
    if plan.empty:
        msg = f"no new data in {partitions} partition(s) since load {sink.last_seq()}: committed nothing"
        log(msg)
        return LoadResult(None, message=msg)
    log(f"loading {plan.total} message(s) from {len(plan.with_data)} partition(s)")
    register_source(spark)
    df = transform(read_plan(spark, cfg, plan), cfg)
    res = sink.write_and_commit(spark, df, plan, log)
    for line in summary_lines(res):
        log(line)
    res.message = f"committed load {res.seq}: {res.rows} rows in {res.files} file(s), {res.seconds:.1f}s"
    log(res.message)
    return res
