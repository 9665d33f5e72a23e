"""The Spark data source ``logsource``: batch and streaming reads and writes.

Usage mirrors Spark's Kafka connector::

    spark.read.format("logsource").option("bootstrap.servers", bs).option("subscribe", "clicks").load()
    spark.readStream.format("logsource")...
    df.write.format("logsource").option("topic", "clicks").save()

Everything that talks to the broker opens its own client inside the method
that needs it (planner worker or Spark task); the reader and writer objects
Spark pickles hold only plain data.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from .errors import ConfigError, OffsetOutOfRange, UnknownTopicOrPartition
from .spark import planning
from .spark.broker import BrokerOffsets, check_data_loss
from .spark.options import (
    ReadOptions,
    WriteOptions,
    normalize,
    parse_bool,
    parse_read_options,
)
from .spark.planning import TP, OffsetRange, Pushed
from .spark.quiet import quiet_spark
from .spark.schema import spark_read_schema
from .spark.write import LogSourceCommitMessage, rows_to_batches, write_arrow, write_options

if TYPE_CHECKING:
    import pyarrow as pa

# pyarrow (and spark/arrow.py) are imported where rows are read or written: Spark's planner
# processes (data source lookup, schema, stream planning) start a fresh Python each and need neither
# (about 0.2 s of CPU each on the way to a stream's first micro-batch).

log = logging.getLogger(__name__)

# Version gates: admission control and Trigger.AvailableNow arrived in PySpark 4.2,
# the streaming Arrow writer in 4.1. Older versions get the fallbacks below.
try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    HAS_ADMISSION_CONTROL = True
except ImportError:  # PySpark 4.0 / 4.1
    HAS_ADMISSION_CONTROL = False
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Placeholder base on PySpark < 4.2."""


try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter

    HAS_STREAM_ARROW_WRITER = True
except ImportError:  # PySpark 4.0
    DataSourceStreamArrowWriter = DataSourceStreamWriter  # type: ignore[misc,assignment]
    HAS_STREAM_ARROW_WRITER = False


# ---------------------------------------------------------------------------
# Broker access (opened lazily, never pickled)


def _with_broker(opts: ReadOptions | WriteOptions) -> BrokerOffsets:
    return BrokerOffsets(opts.bootstrap, opts.client_id, **opts.security.options())


def _sink() -> Any:
    """The exactly-once sink, imported when a write needs it: it imports the wire protocol, which
    Spark's planner processes (data source lookup, schema, read planning) would otherwise load
    for nothing (about 0.2 s of CPU each, on the path to a stream's first micro-batch)."""
    from .spark import sink

    return sink


# ---------------------------------------------------------------------------
# Batch read


def plan_batch(opts: ReadOptions, pushed: Pushed, broker: Any) -> list[OffsetRange]:
    """Plan the offset ranges of a batch read (the work of ``partitions()``)."""
    if pushed.empty:
        return []
    tps = planning.select_partitions(
        opts, broker.partitions_for, broker.list_topics, topics_filter=pushed.topics
    )
    if pushed.partitions is not None:
        tps = [tp for tp in tps if tp[1] in pushed.partitions]
    if not tps:
        return []
    start = planning.resolve(
        opts.starting,
        tps,
        broker.lookup,
        name="startingOffsets",
        default="earliest",
        strategy=opts.by_timestamp_strategy,
    )
    end = planning.resolve(
        opts.ending, tps, broker.lookup, name="endingOffsets", default="latest", strategy="latest"
    )
    earliest = broker.lookup(tps, "earliest")
    start = check_data_loss(start, earliest, opts.fail_on_data_loss, "the planned start")
    for tp in tps:
        if start[tp] > end[tp] and _explicit(opts.starting) and _explicit(opts.ending):
            raise ConfigError(
                f"starting offset {start[tp]} is after ending offset {end[tp]} for {tp[0]}-{tp[1]}"
            )
    start = {tp: min(start[tp], end[tp]) for tp in tps}
    start, end = planning.narrow(start, end, pushed, broker.lookup)
    return planning.split_ranges(planning.plan_ranges(start, end), opts.min_partitions)


def _explicit(spec: Any) -> bool:
    return isinstance(spec, dict)


#: Spark gets batches of about this size: smaller fetches are coalesced (the producer's ~256 KiB
#: batches cost Spark's Arrow reader and our conversion a fixed overhead each; 2,000-row batches
#: measured ~1.5x slower on a trivial source) and larger ones cut (a whole 32 MB fetch cost the
#: JVM ~40% more CPU per row than 8 MB slices); the default fetch is this size too.
COALESCE_BYTES = 8 << 20


def _convert(
    pending: list[pa.RecordBatch], r: OffsetRange, opts: ReadOptions, ts_lo: int | None, ts_hi: int | None
) -> list[pa.RecordBatch]:
    """Fetched ARROW_SCHEMA batches as Spark's read schema, in slices of about COALESCE_BYTES."""
    from .spark import arrow as sarrow

    return sarrow.to_spark_batches(
        pending, r.topic, r.partition, opts.include_headers, COALESCE_BYTES, ts_lo_us=ts_lo, ts_hi_us=ts_hi
    )


def read_offset_range(
    opts: ReadOptions, r: OffsetRange, pushed: Pushed | None = None
) -> Iterator[pa.RecordBatch]:
    """Read one planned range in a Spark task, as Arrow batches of Spark's read schema."""
    from .client import read_range

    ts_lo = pushed.ts_lo_us if pushed is not None else None
    ts_hi = pushed.ts_hi_us if pushed is not None else None
    start = r.start
    attempts = 0
    # Raw fetched batches wait here until COALESCE_BYTES: conversion and Spark's per-batch costs
    # are then paid once per ~8 MB, not once per producer batch.
    pending: list[pa.RecordBatch] = []
    pending_bytes = 0
    while start < r.end:
        try:
            for rb in read_range(
                opts.bootstrap,
                r.topic,
                r.partition,
                start,
                r.end,
                max_bytes=opts.max_bytes_per_fetch,
                client_id=opts.client_id,
                whole_fetches=True,
                security=opts.security.client_security(),
                local_read=opts.local_read,
            ):
                n = rb.num_rows
                if n == 0:
                    continue
                start = rb.column("offset")[n - 1].as_py() + 1
                pending.append(rb)
                pending_bytes += rb.nbytes
                if pending_bytes >= COALESCE_BYTES // 2:  # one default fetch (8 MB) goes out alone
                    out = _convert(pending, r, opts, ts_lo, ts_hi)
                    pending, pending_bytes = [], 0
                    yield from out
            break
        except OffsetOutOfRange as e:
            attempts += 1
            if opts.fail_on_data_loss or attempts > 3:
                raise OffsetOutOfRange(
                    f"{r.topic}-{r.partition}: offsets [{start}, {r.end}) are no longer (or not) in the log: {e}. "
                    "Some data may have been lost (retention or a broker that lost its tail). "
                    "Set failOnDataLoss=false to skip such offsets with a warning."
                ) from e
            b = _with_broker(opts)
            try:
                lo = b.lookup([r.tp], "earliest")[r.tp]
                hi = b.lookup([r.tp], "latest")[r.tp]
            finally:
                b.close()
            new_start = max(start, lo)
            msg = f"logsource: {r.topic}-{r.partition}: skipping lost offsets [{start}, {new_start}) and any past {hi} (failOnDataLoss=false)"
            log.warning(msg)
            warnings.warn(msg, stacklevel=2)
            r = OffsetRange(r.topic, r.partition, new_start, min(r.end, hi))
            start = new_start
    if pending:
        yield from _convert(pending, r, opts, ts_lo, ts_hi)


class LogSourceReader(DataSourceReader):
    """Batch reader: plans offset ranges on the driver, reads them in tasks."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.pushed = Pushed()

    def partitions(self) -> list[InputPartition]:  # type: ignore[override]
        b = _with_broker(self.opts)
        try:
            return list(plan_batch(self.opts, self.pushed, b))
        finally:
            b.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if not isinstance(partition, OffsetRange):
            # Spark hands an InputPartition(None) when the plan is empty.
            return iter(())
        return read_offset_range(self.opts, partition, self.pushed)


class LogSourceFilteringReader(LogSourceReader):
    """Batch reader that also narrows its ranges with pushed filters (needs filter pushdown on)."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:  # type: ignore[override]
        self.pushed, rest = planning.push_filters(filters, self.pushed)
        yield from rest


def _pushdown_disabled_by_caller() -> bool:
    """True when Spark is planning this read with filter pushdown turned off.

    Spark refuses a reader that implements pushFilters when
    spark.sql.python.filterPushdown.enabled is false; reading must still work
    then, so we hand it the reader without pushFilters.
    """
    f = sys._getframe(1)
    while f is not None:
        if (
            f.f_code.co_filename.endswith("plan_data_source_read.py")
            and f.f_locals.get("enable_pushdown") is False
        ):
            return True
        f = f.f_back  # type: ignore[assignment]
    return False


# ---------------------------------------------------------------------------
# Streaming read


class LogSourceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader with offsets {topic: {"partition": next_offset}}."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._broker: BrokerOffsets | None = None
        self._advertised: dict[TP, int] = {}
        self._reported: dict[TP, int] | None = None
        self._last_end: dict[TP, int] | None = None
        self._target: dict[TP, int] | None = None

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_broker"] = None
        return state

    @property
    def broker(self) -> BrokerOffsets:
        if self._broker is None:
            self._broker = _with_broker(self.opts)
        return self._broker

    def _current(self) -> list[TP]:
        return planning.select_partitions(
            self.opts, self.broker.partitions_for, self.broker.list_topics, missing_ok=True
        )

    def initialOffset(self) -> dict:
        tps = self._current()
        start = planning.resolve(
            self.opts.starting,
            tps,
            self.broker.lookup,
            name="startingOffsets",
            default="latest",
            strategy=self.opts.by_timestamp_strategy,
        )
        self._last_end = dict(start)
        return planning.to_json(start)

    def _latest(self, start: dict[TP, int]) -> tuple[dict[TP, int], dict[TP, int]]:
        """(start completed with new partitions, latest offsets that never go backwards)."""
        tps = self._current()
        known = set(tps)
        gone = sorted(tp for tp in start if tp not in known)
        if gone:
            desc = ", ".join(f"{t}-{p}" for t, p in gone)
            if self.opts.fail_on_data_loss:
                raise UnknownTopicOrPartition(
                    f"partitions {desc} disappeared (topic deleted?); some data may have been missed. "
                    "Set failOnDataLoss=false to continue without them."
                )
            log.warning(
                "logsource: partitions %s disappeared; continuing without them (failOnDataLoss=false)", desc
            )
            start = {tp: o for tp, o in start.items() if tp in known}
        new = [tp for tp in tps if tp not in start]
        start = dict(start)
        if new:
            # New partitions are read from their beginning, as Spark's Kafka source does.
            start.update(self.broker.lookup(new, "earliest"))
        latest = self.broker.lookup(tps, "latest")
        behind = {tp: (start[tp], o) for tp, o in latest.items() if o < start[tp]}
        if behind:
            desc = ", ".join(f"{t}-{p} {s}->{o}" for (t, p), (s, o) in sorted(behind.items()))
            if self.opts.fail_on_data_loss:
                raise OffsetOutOfRange(
                    f"the log end went backwards ({desc}): the broker lost data that was already read. "
                    "Set failOnDataLoss=false to wait for new data instead."
                )
            log.warning(
                "logsource: log end went backwards (%s); waiting for new data (failOnDataLoss=false)", desc
            )
        # Never advertise less than what was already advertised or read.
        latest = planning.advance_only(start, latest)
        latest = planning.advance_only({tp: o for tp, o in self._advertised.items() if tp in latest}, latest)
        return start, latest

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        legacy = start is None and limit is None
        if start is not None:
            s = planning.from_json(start)
        elif self._last_end is not None:
            s = dict(self._last_end)
        else:
            # Legacy API after a restart: the checkpointed start is unknown here.
            s = {}
        s, latest = self._latest(s)
        self._reported = dict(latest)
        if self._target is not None:
            latest = {
                tp: max(s.get(tp, o), min(o, self._target.get(tp, s.get(tp, o)))) for tp, o in latest.items()
            }
        max_rows = None
        if HAS_ADMISSION_CONTROL and isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        elif legacy and start is None and self._last_end is not None:
            max_rows = self.opts.max_offsets_per_trigger
        end = planning.rate_limit(s, latest, max_rows)
        self._advertised = planning.advance_only(self._advertised, end)
        self._last_end = dict(end)
        return planning.to_json(end)

    def getDefaultReadLimit(self) -> Any:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict | None:
        return None if self._reported is None else planning.to_json(self._reported)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.broker.lookup(self._current(), "latest")

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:  # type: ignore[override]
        s = planning.from_json(start)
        e = planning.from_json(end)
        if not e:
            return []
        tps = sorted(e)
        earliest = self.broker.lookup(tps, "earliest")
        for tp in tps:
            s.setdefault(tp, earliest[tp])
        s = {tp: s[tp] for tp in tps}
        s = check_data_loss(s, earliest, self.opts.fail_on_data_loss, "the micro-batch start")
        s = {tp: min(o, e[tp]) for tp, o in s.items()}
        return list(planning.split_ranges(planning.plan_ranges(s, e), self.opts.min_partitions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if not isinstance(partition, OffsetRange):
            return iter(())
        return read_offset_range(self.opts, partition)

    def commit(self, end: dict) -> None:
        e = planning.from_json(end)
        self._last_end = planning.advance_only(self._last_end or {}, e)
        if not self.opts.group_id or not e:
            return
        try:
            self.broker.admin.commit_group_offsets(self.opts.group_id, e, metadata="spark-logsource")
        except Exception as exc:  # lag reporting must not stop the query; the checkpoint is the truth
            log.warning("logsource: could not record progress for group %s: %s", self.opts.group_id, exc)

    def stop(self) -> None:
        if self._broker is not None:
            self._broker.close()
            self._broker = None


# ---------------------------------------------------------------------------
# Writes: Spark's writer objects pick the path, exactly-once (:mod:`.spark.sink`, imported when a
# write needs it) or plain (:mod:`.spark.write`, where the plain path's code lives)


class LogSourceWriter(DataSourceArrowWriter):
    """Batch writer: tasks stage their rows, ``commit`` publishes them once (:mod:`.spark.sink`);
    with exactlyOnce=false (or acks=0/1) each task sends with an idempotent producer (:mod:`.spark.write`)."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.write_id = _sink().new_batch_write_id() if opts.exactly_once else None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        if self.write_id is not None:
            return _sink().write_staged(self.opts, iterator, self.write_id)
        return write_arrow(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.write_id is not None:
            _sink().commit(self.opts, messages, 0, self.write_id)
            return
        rows = sum(m.rows for m in messages if isinstance(m, LogSourceCommitMessage))
        log.info("logsource: wrote %d rows", rows)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.write_id is not None:
            _sink().abort(self.opts, messages, self.write_id)  # staged rows never become visible
            return
        # Records already acknowledged stay in the log (as with Spark's Kafka sink).
        rows = sum(m.rows for m in messages if isinstance(m, LogSourceCommitMessage))
        log.warning("logsource: write aborted after %d rows were already sent", rows)


class LogSourceStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc,valid-type]
    """Streaming writer: tasks stage, ``commit(messages, batchId)`` publishes each micro-batch once."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:  # type: ignore[override]
        if not HAS_STREAM_ARROW_WRITER:
            iterator = rows_to_batches(iterator, self.schema)
        if self.opts.exactly_once:
            return _sink().write_staged(self.opts, iterator, _sink().streaming_write_id())
        return write_arrow(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            _sink().commit(self.opts, messages, batchId)
            return
        rows = sum(m.rows for m in messages if isinstance(m, LogSourceCommitMessage))
        log.info("logsource: micro-batch %d wrote %d rows", batchId, rows)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            _sink().abort(self.opts, messages)
            return
        log.warning("logsource: micro-batch %d aborted; records already sent stay in the log", batchId)


# ---------------------------------------------------------------------------
# The data source


class LogSource(DataSource):
    """Spark data source ``logsource``: Kafka-connector-compatible reads and writes."""

    @classmethod
    def name(cls) -> str:
        return "logsource"

    def schema(self) -> StructType:
        return spark_read_schema(parse_bool(normalize(self.options), "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_read_options(self.options, streaming=False)
        if _pushdown_disabled_by_caller():
            return LogSourceReader(opts)
        return LogSourceFilteringReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return LogSourceStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> LogSourceWriter:
        if overwrite:
            raise ConfigError(
                "save mode overwrite is not supported by logsource (a log is append-only); use append"
            )
        opts = write_options(self.options, schema)
        if opts.exactly_once:
            _sink().require_staged_commits(opts)
        return LogSourceWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> LogSourceStreamWriter:
        opts = write_options(self.options, schema)
        if opts.exactly_once:
            _sink().require_staged_commits(opts)
        return LogSourceStreamWriter(opts, schema)


class DefaultSource(LogSource):
    """Auto-registered by Spark for any importable top-level ``pyspark_*`` module."""


def register(spark: Any, *, enable_filter_pushdown: bool = False) -> None:
    """Register ``logsource`` with a SparkSession; optionally turn on Python filter pushdown.

    Pushdown is off unless asked for because PySpark <= 4.3 caches the read
    planned with pushed filters on the DataFrame's relation and reuses it for
    later queries of the same DataFrame that push nothing (a plain
    ``df.count()`` after ``df.where(...).count()`` then sees the filtered
    rows). With pushdown on, filter a freshly loaded DataFrame each time.

    Also quiets Spark's console once per session (errors only, unless the user chose a level; see
    :mod:`pyspark_logsource.spark.quiet`).
    """
    quiet_spark(spark)  # first: registering again a data source Spark found installed logs a warning
    spark.dataSource.register(LogSource)
    if enable_filter_pushdown:
        try:
            spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        except Exception:  # PySpark 4.0 has no such conf
            pass
