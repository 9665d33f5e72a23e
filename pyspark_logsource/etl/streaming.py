"""The streaming flavour: readStream logsource -> decode -> Spark's file sink with a checkpoint."""

from __future__ import annotations

from typing import Any

from ..offsets import open_store
from .commit import Log
from .config import EtlConfig
from .load import register_source, transform


def run_streaming(spark: Any, cfg: EtlConfig, log: Log = print) -> Any:
    """Run the streaming query until its trigger ends it (or --timeout); exactly-once by Spark.

    Spark's file sink logs the files of every micro-batch in OUTPUT/_spark_metadata and skips a
    batch id it already committed; the checkpoint holds the offsets of each batch. A killed driver
    restarts from the checkpoint and replays at most the uncommitted batch, whose files are not in
    the metadata log, so readers of OUTPUT (which use the log) see every message exactly once.
    """
    register_source(spark)
    r = spark.readStream.format("logsource")
    opts = cfg.reader_options()
    opts.setdefault("startingOffsets", cfg.starting_offsets)
    if cfg.max_offsets_per_load:
        opts["maxOffsetsPerTrigger"] = str(cfg.max_offsets_per_load)
    for k, v in opts.items():
        r = r.option(k, v)
    df = transform(r.load(), cfg)
    checkpoint = cfg.checkpoint or open_store(cfg.output, spark).path("_checkpoint")
    removed = clean_checkpoint_leftovers(checkpoint, cfg.output, spark)
    if removed:
        log(f"recovery: removed {removed} temporary file(s) a killed driver left in the checkpoint")
    w = df.writeStream.format(cfg.format).option("checkpointLocation", checkpoint).option("path", cfg.output)
    if cfg.format == "csv":
        w = w.option("header", "true")
    if cfg.partition_by:
        w = w.partitionBy(*cfg.partition_by)
    if cfg.trigger == "availableNow":
        w = w.trigger(availableNow=True)
    elif cfg.trigger == "once":
        w = w.trigger(once=True)
    else:
        w = w.trigger(processingTime=cfg.trigger)
    q = w.start()
    log(f"streaming query {q.id} started: {cfg.output} (checkpoint {checkpoint})")
    q.awaitTermination(cfg.timeout)
    if q.isActive:
        q.stop()
    if q.exception():
        raise q.exception()
    return q


def clean_checkpoint_leftovers(checkpoint: str, output: str, spark: Any = None) -> int:
    """Delete the temporary files a killed driver leaves in Spark's metadata logs.

    Spark writes each offsets/commits/_spark_metadata entry to a hidden ``.<batch>.<uuid>.tmp`` and
    renames it; a kill -9 in between leaves the temp file, which is never a log entry. Spark 4.1
    refuses to start batch 0 when offsets/ is not empty (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY),
    so a driver killed during its first batch could not restart without this cleanup.
    """
    store = open_store(checkpoint, spark)
    out = open_store(output, spark)
    removed = 0
    for d in (store.path("offsets"), store.path("commits"), out.path("_spark_metadata")):
        for st in store.fs.list(d):
            if (
                not st.is_dir
                and st.name.startswith(".")
                and (st.name.endswith(".tmp") or st.name.endswith(".tmp.crc"))
            ):
                store.fs.delete(st.path)
                removed += 1
    return removed
