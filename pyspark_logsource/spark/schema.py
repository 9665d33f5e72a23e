"""Spark's Kafka source schema, without pyarrow: Spark's planner processes ask the source for its
schema (and look it up) in fresh Python processes that need nothing else."""

from __future__ import annotations


def spark_read_schema(include_headers: bool):
    """Spark's Kafka source schema (as a pyspark StructType)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(
            StructField(
                "headers",
                ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
            )
        )
    return StructType(fields)
