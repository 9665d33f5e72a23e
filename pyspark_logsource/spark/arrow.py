"""Arrow conversion between the record batch format and Spark's Kafka-compatible rows.

All functions work column-wise on Arrow arrays: no Python loop over records.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from .schema import spark_read_schema  # noqa: F401  (here for callers that build Arrow batches of it)

HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])


def arrow_read_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects back from read() (timestamps as UTC microseconds)."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", pa.list_(pa.field("element", HEADER_STRUCT))))
    return pa.schema(fields)


def _headers(col: pa.Array) -> pa.Array:
    """Re-type a list<struct<key not null, value>> column as Spark's list<element: struct<...>>."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    target = pa.list_(pa.field("element", HEADER_STRUCT))
    if col.type == target:
        return col
    return col.cast(target)


_NUMPY_TYPES = {pa.int32(): np.int32, pa.int64(): np.int64}


def _scalar(value: int | str, type_: pa.DataType) -> pa.Scalar:
    """A pyarrow scalar of an int32, int64 or string, built from its bytes: ``pa.scalar()`` of a
    Python object imports pandas (~0.3 s of CPU in a fresh Spark worker, on the path to a
    stream's first micro-batch)."""
    if type_ == pa.string():
        data = str(value).encode()
        bufs = [None, pa.py_buffer(np.array([0, len(data)], dtype=np.int32)), pa.py_buffer(data)]
    else:
        bufs = [None, pa.py_buffer(np.array([value], dtype=_NUMPY_TYPES[type_]))]
    return pa.Array.from_buffers(type_, 1, bufs)[0]


#: per (value, type): one built column, sliced for every batch of that length or less
_CONSTANTS: dict[tuple, pa.Array] = {}
_MAX_CONSTANTS = 64  # a streaming worker reads many partitions over its life: the cache stays small


def _constant(value: int | str, type_: pa.DataType, n: int) -> pa.Array:
    """``n`` copies of ``value`` as a zero-copy slice of a column built once (``pa.repeat`` of the topic
    and partition was ~6% of a Spark task's read CPU, redone for every batch)."""
    key = (value, type_)
    col = _CONSTANTS.get(key)
    if col is None or len(col) < n:
        if len(_CONSTANTS) >= _MAX_CONSTANTS:
            _CONSTANTS.clear()
        col = _CONSTANTS[key] = pa.repeat(_scalar(value, type_), n)
    return col if len(col) == n else col.slice(0, n)


def _millis_to_micros(ts: pa.Array) -> pa.Array:
    """A timestamp[ms] column as int64 microseconds (an exact widening; Spark reads UTC microseconds).

    numpy on the column's buffer: pyarrow's compute functions (and ``cast``) import
    ``pyarrow.compute`` (~0.05 s of CPU in a fresh Spark worker) for one multiplication.
    """
    n = len(ts)
    if ts.null_count:  # not in ARROW_SCHEMA (timestamps are not nullable); kept correct anyway
        import pyarrow.compute as pc

        return pc.multiply(ts.cast(pa.int64()), _scalar(1000, pa.int64()))
    ms = np.frombuffer(ts.buffers()[1], dtype=np.int64, count=n, offset=ts.offset * 8)
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(ms * 1000)])


def to_spark_batch(
    rb: pa.RecordBatch | pa.Table,
    topic: str,
    partition: int,
    include_headers: bool,
    *,
    ts_lo_us: int | None = None,
    ts_hi_us: int | None = None,
) -> pa.RecordBatch:
    """Turn a format.batch.ARROW_SCHEMA batch into a batch of Spark's read schema.

    ``ts_lo_us`` / ``ts_hi_us`` (inclusive / exclusive, microseconds) drop rows
    outside a pushed timestamp filter.
    """
    if isinstance(rb, pa.Table):
        rb = (
            rb.combine_chunks().to_batches()[0]
            if rb.num_rows
            else pa.RecordBatch.from_pylist([], schema=rb.schema)
        )
    n = rb.num_rows
    ts_us = _millis_to_micros(rb.column("timestamp"))
    timestamp_type = rb.column("timestamp_type")
    cols = [
        rb.column("key"),
        rb.column("value"),
        _constant(topic, pa.string(), n),
        _constant(partition, pa.int32(), n),
        rb.column("offset"),
        ts_us.view(pa.timestamp("us", tz="UTC")),
        timestamp_type if timestamp_type.type == pa.int32() else timestamp_type.cast(pa.int32()),
    ]
    if include_headers:
        cols.append(_headers(rb.column("headers")))
    out = pa.RecordBatch.from_arrays(cols, schema=arrow_read_schema(include_headers))
    if ts_lo_us is not None or ts_hi_us is not None:
        import pyarrow.compute as pc

        mask = None
        if ts_lo_us is not None:
            mask = pc.greater_equal(ts_us, _scalar(ts_lo_us, pa.int64()))
        if ts_hi_us is not None:
            m2 = pc.less(ts_us, _scalar(ts_hi_us, pa.int64()))
            mask = m2 if mask is None else pc.and_(mask, m2)
        out = out.filter(mask)
    return out


def to_spark_batches(
    fetched: list[pa.RecordBatch],
    topic: str,
    partition: int,
    include_headers: bool,
    max_bytes: int,
    *,
    ts_lo_us: int | None = None,
    ts_hi_us: int | None = None,
) -> list[pa.RecordBatch]:
    """Fetched ARROW_SCHEMA batches joined, converted by to_spark_batch and cut in equal zero-copy slices of about ``max_bytes``.

    A whole 32 MB fetch handed to Spark as one batch cost the JVM ~40% more
    CPU per row than 8 MB batches of the same rows (``sum(length(value))``).
    """
    raw: pa.RecordBatch | pa.Table = fetched[0] if len(fetched) == 1 else pa.Table.from_batches(fetched)
    out = to_spark_batch(raw, topic, partition, include_headers, ts_lo_us=ts_lo_us, ts_hi_us=ts_hi_us)
    n, size = out.num_rows, out.nbytes
    if n == 0:
        return []
    pieces = min(n, round(size / max_bytes))
    if pieces <= 1:
        return [out]
    per = -(-n // pieces)  # equal slices: an 8.9 MB batch stays whole, not 8 MB + a sliver
    return [out.slice(s, per) for s in range(0, n, per)]


# ---------------------------------------------------------------------------
# Write side


def check_write_schema(schema, has_topic_option: bool) -> None:
    """Reject a DataFrame the sink cannot write, before any task runs (Spark Kafka sink rules)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    by_name = {f.name.lower(): f for f in schema.fields}
    value = by_name.get("value")
    if value is None:
        raise ConfigError(
            f"the DataFrame to write needs a 'value' column (binary or string); it has: {', '.join(schema.fieldNames())}"
        )
    if not isinstance(value.dataType, (BinaryType, StringType)):
        raise ConfigError(f"column 'value' must be binary or string, not {value.dataType.simpleString()}")
    key = by_name.get("key")
    if key is not None and not isinstance(key.dataType, (BinaryType, StringType)):
        raise ConfigError(f"column 'key' must be binary or string, not {key.dataType.simpleString()}")
    topic = by_name.get("topic")
    if topic is not None and not isinstance(topic.dataType, StringType):
        raise ConfigError(f"column 'topic' must be a string, not {topic.dataType.simpleString()}")
    if topic is None and not has_topic_option:
        raise ConfigError("no topic to write to: give the 'topic' option or a 'topic' column")
    part = by_name.get("partition")
    if part is not None and not isinstance(part.dataType, IntegerType):
        raise ConfigError(f"column 'partition' must be an int, not {part.dataType.simpleString()}")
    stamp = by_name.get("timestamp")
    if stamp is not None and not isinstance(stamp.dataType, (TimestampType, TimestampNTZType)):
        raise ConfigError(f"column 'timestamp' must be a timestamp, not {stamp.dataType.simpleString()}")
    headers = by_name.get("headers")
    if headers is not None:
        dt = headers.dataType
        ok = (
            isinstance(dt, ArrayType)
            and isinstance(dt.elementType, StructType)
            and [f.name for f in dt.elementType.fields] == ["key", "value"]
            and isinstance(dt.elementType.fields[0].dataType, StringType)
            and isinstance(dt.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise ConfigError(
                f"column 'headers' must be array<struct<key:string,value:binary>>, not {dt.simpleString()}"
            )


def to_producer_table(rb: pa.RecordBatch) -> pa.Table:
    """Normalise a Spark Arrow batch into the columns Producer.send_arrow takes.

    Strings become binary (UTF-8 bytes are the same buffers), headers get the
    record format's header type; other columns (topic, partition) stay.
    """
    names = {n.lower(): n for n in rb.schema.names}
    cols: dict[str, pa.Array] = {}
    v = rb.column(names["value"])
    cols["value"] = (
        v.cast(pa.binary()) if pa.types.is_string(v.type) or pa.types.is_large_string(v.type) else v
    )
    if "key" in names:
        k = rb.column(names["key"])
        cols["key"] = (
            k.cast(pa.binary()) if pa.types.is_string(k.type) or pa.types.is_large_string(k.type) else k
        )
    if "headers" in names:
        from ..format.batch import HEADER_TYPE

        h = rb.column(names["headers"])
        # Null header keys are not representable; Kafka rejects them too.
        cols["headers"] = h.cast(HEADER_TYPE)
    if "partition" in names:
        cols["partition"] = rb.column(names["partition"]).cast(pa.int32())
    if "timestamp" in names:
        # Null timestamps become the send time, as with Producer.send.
        cols["timestamp"] = rb.column(names["timestamp"])
    if "topic" in names:
        cols["topic"] = rb.column(names["topic"])
    return pa.table(cols)
