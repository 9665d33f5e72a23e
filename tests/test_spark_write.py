"""spark/write.py without a SparkSession: split_by_topic's cuts and its typed error, and a write's
checks of its topic against a real (embedded, thread-mode) broker."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from pyspark_logsource.client import Admin
from pyspark_logsource.errors import ConfigError, UnknownTopicOrPartition
from pyspark_logsource.spark.write import split_by_topic, write_options


def _table(topics: list[str | None]) -> pa.Table:
    return pa.table(
        {"topic": pa.array(topics, pa.string()), "value": [f"v{i}".encode() for i in range(len(topics))]}
    )


def _values(t: pa.Table) -> list[bytes]:
    return t.column("value").to_pylist()


def test_split_by_topic_without_a_topic_column_sends_all_to_the_default():
    t = pa.table({"value": [b"a", b"b"]})
    out = list(split_by_topic(t, "clicks"))
    assert [(topic, _values(sub)) for topic, sub in out] == [("clicks", [b"a", b"b"])]


def test_split_by_topic_cuts_by_the_column_and_drops_it():
    out = list(split_by_topic(_table(["a", "b", "a", None]), "dflt"))
    assert [(topic, _values(sub)) for topic, sub in out] == [
        ("dflt", [b"v3"]),
        ("a", [b"v0", b"v2"]),
        ("b", [b"v1"]),
    ]
    assert all(sub.column_names == ["value"] for _, sub in out)


def test_split_by_topic_null_topic_without_default_is_a_config_error():
    with pytest.raises(ConfigError, match="null 'topic' and no 'topic' option"):
        list(split_by_topic(_table(["a", None]), None))


_SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", StringType())])


def test_write_options_refuses_a_missing_topic_unless_auto_create(broker):
    opts = {"bootstrap.servers": broker.bootstrap, "topic": "not-there-yet"}
    with pytest.raises(UnknownTopicOrPartition, match="set autoCreateTopic=true"):
        write_options(opts, _SCHEMA)
    got = write_options({**opts, "autoCreateTopic": "true", "numPartitions": "3"}, _SCHEMA)
    assert got.topic == "not-there-yet"
    with Admin(broker.bootstrap) as a:
        assert len(a.partitions_for("not-there-yet")) == 3


def test_write_options_checks_the_schema_first(broker):
    bad = StructType([StructField("key", BinaryType())])
    with pytest.raises(ConfigError, match="needs a 'value' column"):
        write_options({"bootstrap.servers": broker.bootstrap, "topic": "t"}, bad)
