"""The plain write path (``exactlyOnce=false``, or acks 0/1): each Spark task sends its rows itself.

``write_options`` checks a write before it starts (schema, topic, auto-creation), ``write_arrow`` is
one task's work (an idempotent producer; records acknowledged stay in the log even if the job
fails, as with Spark's Kafka sink), and ``split_by_topic`` cuts rows by their ``topic`` column,
for this path and the exactly-once sink (:mod:`.sink`) alike.

Light at import: Spark's planner processes import the data source, which imports this module,
so pyarrow, the producer and :mod:`.arrow` are imported where rows are written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from ..errors import ConfigError, UnknownTopicOrPartition
from .broker import BrokerOffsets
from .options import WriteOptions, parse_write_options

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class LogSourceCommitMessage(WriterCommitMessage):
    """What one write task produced: the number of rows it sent."""

    rows: int = 0


#: Default ``batch.size`` of a write task's producer. A Spark task writes whole Arrow batches, so
#: Kafka's 16 KiB default (the producer's send_arrow then cuts 256 KiB batches) only multiplies
#: batches, futures and broker appends: 2M 200-byte rows, same run, CPU jvm+python+broker
#: 5.8 s -> 5.0 s (1 MiB). The producer caps a batch at its max request size (1 MiB).
SINK_BATCH_BYTES = 1 << 20


def write_options(options: Mapping[str, Any], schema: StructType) -> WriteOptions:
    """A write's options, once its schema and topic are checked (the topic created if asked)."""
    opts = parse_write_options(options)
    from .arrow import check_write_schema

    check_write_schema(schema, opts.topic is not None)
    if opts.topic is not None:
        b = BrokerOffsets(opts.bootstrap, opts.client_id, **opts.security.options())
        try:
            try:
                b.partitions_for(opts.topic)
            except UnknownTopicOrPartition:
                if not opts.auto_create_topic:
                    raise UnknownTopicOrPartition(
                        f"topic {opts.topic!r} does not exist; create it first or set autoCreateTopic=true"
                    ) from None
                b.admin.create_topic(opts.topic, partitions=opts.num_partitions, exist_ok=True)
        finally:
            b.close()
    return opts


def write_arrow(opts: WriteOptions, batches: Iterator[pa.RecordBatch]) -> LogSourceCommitMessage:
    """Send Spark Arrow batches with one idempotent producer (the work of one write task)."""
    from ..client import Producer
    from .arrow import to_producer_table

    kwargs: dict[str, Any] = dict(
        acks=opts.acks,
        linger_ms=opts.linger_ms,
        compression=opts.compression,
        enable_idempotence=True,
        batch_size=opts.batch_size or SINK_BATCH_BYTES,
        **opts.security.options(),
    )
    producer = Producer(opts.bootstrap, **kwargs)
    msg = LogSourceCommitMessage()
    futures: list[Any] = []
    try:
        for rb in batches:
            if rb.num_rows == 0:
                continue
            t = to_producer_table(rb)
            msg.rows += t.num_rows
            for topic, sub in split_by_topic(t, opts.topic):
                futures.extend(producer.send_arrow(topic, sub))
            # Surface a failure early and keep the futures list short.
            if len(futures) > 256:
                _collect(futures[:128])
                futures = futures[128:]
        producer.flush()
        _collect(futures)
    finally:
        producer.close()
    return msg


def _collect(futures: list[Any]) -> None:
    for f in futures:
        f.result()  # raises the send's error, failing the task


def split_by_topic(t: pa.Table, default_topic: str | None) -> Iterator[tuple[str, pa.Table]]:
    """The rows of t per topic (its ``topic`` column, dropped), null topics under default_topic.

    ConfigError when a row's topic is null and there is no default topic.
    """
    if "topic" not in t.column_names:
        yield default_topic, t  # type: ignore[misc]
        return
    import pyarrow.compute as pc

    col = t.column("topic")
    rest = t.drop_columns(["topic"])
    nulls = col.null_count
    if nulls:
        if default_topic is None:
            raise ConfigError("a row has a null 'topic' and no 'topic' option is set")
        mask = pc.is_null(col)
        yield default_topic, rest.filter(mask)
    for topic in pc.unique(col.drop_null()).to_pylist():
        yield topic, rest.filter(pc.equal(col, topic))


def rows_to_batches(rows: Iterator[Any], schema: StructType) -> Iterator[pa.RecordBatch]:
    """Fallback for PySpark 4.0's row-based stream writer (no Arrow writer there)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    pa_schema = to_arrow_schema(schema, timezone="UTC")
    names = schema.fieldNames()
    chunk: list[Any] = []
    for row in rows:
        chunk.append(tuple(row))
        if len(chunk) >= 10000:
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, f.type) for c, f in zip(zip(*chunk, strict=True), pa_schema, strict=True)],
                names=names,
            )
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_arrays(
            [pa.array(c, f.type) for c, f in zip(zip(*chunk, strict=True), pa_schema, strict=True)],
            names=names,
        )
