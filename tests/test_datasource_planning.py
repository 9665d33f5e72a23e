"""Unit tests of the logsource data source's option parsing, planning and Arrow conversion.

No broker and no SparkSession: planning takes the broker as lookup callables,
so a fake log with known offsets and timestamps stands in for it here. The
Spark-level tests are in test_spark_logsource.py.
"""

from __future__ import annotations

import datetime as dt
import json
import pickle

import pyarrow as pa
import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    Not,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from pyspark_logsource.errors import ConfigError, OffsetOutOfRange, UnknownTopicOrPartition
from pyspark_logsource.format import batch as fb
from pyspark_logsource.spark import arrow as sarrow
from pyspark_logsource.spark import planning as pl
from pyspark_logsource.spark.options import TimestampSpec, parse_read_options, parse_write_options


class FakeLog:
    """Topic-partitions with a log start offset and one timestamp per offset."""

    def __init__(self, parts: dict[tuple[str, int], tuple[int, list[int]]]) -> None:
        self.parts = parts
        self.calls: list[tuple[tuple, object]] = []

    def lookup(self, tps, spec):
        self.calls.append((tuple(tps), spec))
        out = {}
        for tp in tps:
            start, ts = self.parts[tp]
            end = start + len(ts)
            if spec == "earliest":
                out[tp] = start
            elif spec == "latest":
                out[tp] = end
            else:
                out[tp] = next((start + i for i, t in enumerate(ts) if t >= spec), end)
        return out

    def partitions_for(self, topic):
        ps = sorted(p for t, p in self.parts if t == topic)
        if not ps:
            raise UnknownTopicOrPartition(topic)
        return ps

    def list_topics(self):
        return sorted({t for t, _ in self.parts})


def opts(streaming=False, **kw):
    base = {"bootstrap.servers": "localhost:9092", "subscribe": "a,b"}
    base.update({k: (json.dumps(v) if isinstance(v, dict) else str(v)) for k, v in kw.items()})
    return parse_read_options(base, streaming=streaming)


@pytest.fixture
def log():
    return FakeLog(
        {
            ("a", 0): (0, [1000 + 10 * i for i in range(100)]),
            ("a", 1): (20, [1000 + 10 * i for i in range(50)]),  # offsets 20..69
            ("b", 0): (0, [5000, 5001, 4000, 6000]),  # out-of-order CreateTime
            ("c", 0): (0, [1]),
        }
    )


# --------------------------------------------------------------------------- options


def test_option_errors_are_typed_and_name_the_option():
    bad = [
        ({"subscribe": "a"}, "bootstrap.servers"),
        ({"bootstrap.servers": "nohost", "subscribe": "a"}, "host:port"),
        ({"bootstrap.servers": "h:1"}, "exactly one of"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of"),
        ({"bootstrap.servers": "h:1", "subscribePattern": "("}, "not a valid regex"),
        ({"bootstrap.servers": "h:1", "assign": '{"a":"0"}'}, "list of partition numbers"),
        ({"bootstrap.servers": "h:1", "assign": "[1]"}, "JSON object"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": "latest"}, "cannot be 'latest'"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, "-1 (latest)"),
        (
            {"bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": '{"a":{"x":1}}'},
            "not an integer",
        ),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": '{"a":{"0":-7}}'}, "invalid"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": "earliest"}, "cannot be 'earliest'"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, "invalid"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": "{bad json"}, "not valid JSON"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "minPartitions": "0"}, "minPartitions"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "minPartitions": "x"}, "minPartitions"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "maxOffsetsPerTrigger": "10"}, "only for streaming"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "startingTimestamp": "-5"}, "startingTimestamp"),
        (
            {"bootstrap.servers": "h:1", "subscribe": "a", "startingOffsetsByTimestamp": '{"a":{"0":-3}}'},
            "timestamp",
        ),
        (
            {"bootstrap.servers": "h:1", "subscribe": "a", "startingOffsetsByTimestampStrategy": "x"},
            "Strategy",
        ),
    ]
    for o, needle in bad:
        with pytest.raises(ConfigError) as ei:
            parse_read_options(o, streaming=False)
        assert needle in str(ei.value), (o, str(ei.value))
        assert ei.value.code == 1003
    with pytest.raises(ConfigError, match="only for batch"):
        parse_read_options(
            {"bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": "latest"}, streaming=True
        )


def test_options_forms_and_defaults():
    o = parse_read_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1, g:2", "subscribe": " a , b "}, streaming=False)
    assert o.bootstrap == "h:1,g:2" and o.subscribe == ("a", "b")
    assert o.starting == "earliest" and o.ending == "latest" and o.fail_on_data_loss and not o.include_headers
    s = parse_read_options({"bootstrap.servers": "h:1", "assign": '{"a":[1,0,1]}'}, streaming=True)
    assert s.assign == {"a": (0, 1)} and s.starting == "latest"
    o = opts(startingOffsets={"a": {"0": 5, "1": -2}}, endingOffsets={"a": {"0": -1}}, includeHeaders="TRUE")
    assert o.starting == {"a": {0: 5, 1: -2}} and o.ending == {"a": {0: -1}} and o.include_headers
    o = opts(startingTimestamp=1500, startingOffsets="earliest", endingOffsetsByTimestamp={"a": {"0": 2000}})
    assert o.starting == TimestampSpec(global_ts=1500)
    assert o.ending == TimestampSpec(per_partition={"a": {0: 2000}})
    w = parse_write_options(
        {"bootstrap.servers": "h:1", "topic": "t", "kafka.compression.type": "LZ4", "acks": "1"}
    )
    assert (w.topic, w.compression, w.acks) == ("t", "lz4", 1)
    assert w.batch_size is None  # the write task then uses datasource.SINK_BATCH_BYTES
    assert (
        parse_write_options(
            {"bootstrap.servers": "h:1", "topic": "t", "kafka.batch.size": "65536"}
        ).batch_size
        == 65536
    )
    assert o.max_bytes_per_fetch == 8 << 20
    assert opts(**{"kafka.fetch.max.bytes": "4096"}).max_bytes_per_fetch == 4096
    assert opts(**{"fetch.max.bytes": "8192", "kafka.fetch.max.bytes": "4096"}).max_bytes_per_fetch == 8192
    for bad in ({"compression": "snappy"}, {"acks": "2"}, {"topic": " "}, {"linger.ms": "-1"}):
        with pytest.raises(ConfigError):
            parse_write_options({"bootstrap.servers": "h:1", **bad})


# --------------------------------------------------------------------------- resolve / plan


def test_select_partitions(log):
    assert pl.select_partitions(opts(), log.partitions_for, log.list_topics) == [("a", 0), ("a", 1), ("b", 0)]
    o = parse_read_options({"bootstrap.servers": "h:1", "subscribePattern": "[ab]"}, streaming=False)
    assert pl.select_partitions(o, log.partitions_for, log.list_topics) == [("a", 0), ("a", 1), ("b", 0)]
    o = parse_read_options({"bootstrap.servers": "h:1", "assign": '{"a":[1]}'}, streaming=False)
    assert pl.select_partitions(o, log.partitions_for, log.list_topics) == [("a", 1)]
    o = parse_read_options({"bootstrap.servers": "h:1", "assign": '{"a":[7]}'}, streaming=False)
    with pytest.raises(UnknownTopicOrPartition, match=r"\[7\]"):
        pl.select_partitions(o, log.partitions_for, log.list_topics)
    with pytest.raises(UnknownTopicOrPartition, match="'nope'"):
        pl.select_partitions(opts(subscribe="nope"), log.partitions_for, log.list_topics)
    assert pl.select_partitions(
        opts(subscribe="nope,c"), log.partitions_for, log.list_topics, missing_ok=True
    ) == [("c", 0)]
    assert pl.select_partitions(opts(), log.partitions_for, log.list_topics, topics_filter={"b"}) == [
        ("b", 0)
    ]


def test_resolve_all_forms(log):
    tps = [("a", 0), ("a", 1), ("b", 0)]
    assert pl.resolve("earliest", tps, log.lookup, name="s", default="earliest") == {
        ("a", 0): 0,
        ("a", 1): 20,
        ("b", 0): 0,
    }
    assert pl.resolve("latest", tps, log.lookup, name="s", default="earliest") == {
        ("a", 0): 100,
        ("a", 1): 70,
        ("b", 0): 4,
    }
    o = opts(streaming=True, startingOffsets={"a": {"0": 7, "1": -2}, "b": {"0": -1}})
    assert pl.resolve(o.starting, tps, log.lookup, name="s", default="earliest") == {
        ("a", 0): 7,
        ("a", 1): 20,
        ("b", 0): 4,
    }
    # Partitions the JSON does not name take the default.
    o = opts(endingOffsets={"a": {"0": 9}})
    assert pl.resolve(o.ending, tps, log.lookup, name="e", default="latest") == {
        ("a", 0): 9,
        ("a", 1): 70,
        ("b", 0): 4,
    }
    with pytest.raises(ConfigError, match="a-5"):
        pl.resolve(
            opts(startingOffsets={"a": {"5": 1}}).starting, tps, log.lookup, name="s", default="earliest"
        )
    # Timestamps through the time index: first offset with ts >= T.
    o = opts(startingTimestamp=1105)
    assert pl.resolve(o.starting, tps, log.lookup, name="s", default="earliest", strategy="latest") == {
        ("a", 0): 11,
        ("a", 1): 31,
        ("b", 0): 0,
    }
    late = opts(startingTimestamp=5500).starting  # b-0 has 6000; a-* nothing that late
    assert pl.resolve(late, tps, log.lookup, name="s", default="earliest", strategy="latest") == {
        ("a", 0): 100,
        ("a", 1): 70,
        ("b", 0): 3,
    }
    with pytest.raises(OffsetOutOfRange, match="a-0"):
        pl.resolve(late, tps, log.lookup, name="s", default="earliest", strategy="error")
    o = opts(startingOffsetsByTimestamp={"a": {"1": 1200}, "b": {"0": 4500}})
    assert pl.resolve(o.starting, tps, log.lookup, name="s", default="earliest", strategy="error") == {
        ("a", 0): 0,
        ("a", 1): 40,
        ("b", 0): 0,
    }


def test_plan_and_split_ranges():
    start = {("a", 0): 0, ("a", 1): 20, ("b", 0): 4}
    end = {("a", 0): 100, ("a", 1): 70, ("b", 0): 4}
    ranges = pl.plan_ranges(start, end)
    assert ranges == [pl.OffsetRange("a", 0, 0, 100), pl.OffsetRange("a", 1, 20, 70)]
    assert pl.split_ranges(ranges, None) == ranges and pl.split_ranges(ranges, 2) == ranges
    split = pl.split_ranges(ranges, 6)
    # Proportional to size: 100 -> 4 parts, 50 -> 2 parts; contiguous, covering, no overlap.
    assert [(r.tp, r.start, r.end) for r in split] == [
        (("a", 0), 0, 25),
        (("a", 0), 25, 50),
        (("a", 0), 50, 75),
        (("a", 0), 75, 100),
        (("a", 1), 20, 45),
        (("a", 1), 45, 70),
    ]
    assert len(pl.split_ranges([pl.OffsetRange("x", 0, 0, 3)], 10)) == 3  # never an empty range
    with pytest.raises(ConfigError, match="after ending"):
        pl.plan_ranges({("a", 0): 9}, {("a", 0): 5})
    r = pickle.loads(pickle.dumps(split[1]))
    assert r == split[1] and r.size == 25


# --------------------------------------------------------------------------- pushdown


def test_push_filters_and_narrow(log):
    T = dt.datetime(1970, 1, 1, 0, 0, 1, 105000, tzinfo=dt.timezone.utc)  # 1105 ms
    filters = [
        EqualTo(("topic",), "a"),
        In(("partition",), (0, 1, 9)),
        GreaterThanOrEqual(("offset",), 5),
        LessThan(("offset",), 60),
        GreaterThan(("timestamp",), T),
        LessThanOrEqual(("timestamp",), T + dt.timedelta(milliseconds=300)),
        EqualTo(("value",), b"x"),
        Not(EqualTo(("partition",), 1)),
        EqualTo(("partition",), "zero"),
    ]
    pushed, rest = pl.push_filters(filters)
    assert rest == filters[6:]  # value, NOT and a non-int partition are left to Spark
    assert pushed.topics == {"a"} and pushed.partitions == {0, 1, 9}
    assert (pushed.offset_lo, pushed.offset_hi) == (5, 60)
    assert pushed.ts_lo_us == 1105001 and pushed.ts_lo_ms == 1106 and pushed.ts_hi_us == 1405001
    start = {("a", 0): 0, ("a", 1): 20, ("b", 0): 0}
    end = {("a", 0): 100, ("a", 1): 70, ("b", 0): 4}
    s, e = pl.narrow(start, end, pushed, log.lookup)
    # ts >= 1106 ms: a-0 first such offset is 11, a-1 is 20 + 11 = 31; then offset < 60.
    assert s == {("a", 0): 11, ("a", 1): 31} and e == {("a", 0): 60, ("a", 1): 60}
    # Naive datetimes are local time, as PySpark hands them out.
    naive = dt.datetime.fromtimestamp(1.5)
    assert pl.to_micros(naive) == 1_500_000
    # Contradictions plan nothing.
    p2, _ = pl.push_filters([EqualTo(("partition",), 1), EqualTo(("partition",), 2)])
    assert p2.empty and pl.narrow(start, end, p2, log.lookup) == ({}, {})
    p3, _ = pl.push_filters([GreaterThan(("offset",), 80)])
    s3, e3 = pl.narrow(start, end, p3, log.lookup)
    assert pl.plan_ranges(s3, e3) == [pl.OffsetRange("a", 0, 81, 100)]


# --------------------------------------------------------------------------- streaming offsets


def test_rate_limit_is_max_min_fair():
    start = {("a", 0): 0, ("a", 1): 0, ("a", 2): 100}
    latest = {("a", 0): 1000, ("a", 1): 5, ("a", 2): 100}
    assert pl.rate_limit(start, latest, None) == latest
    # Backlogs 1000, 5, 0 under 100: the small one gets all it needs, the big one the rest.
    assert pl.rate_limit(start, latest, 100) == {("a", 0): 95, ("a", 1): 5, ("a", 2): 100}
    even = pl.rate_limit(
        {("a", 0): 0, ("a", 1): 0, ("a", 2): 0}, {("a", 0): 50, ("a", 1): 50, ("a", 2): 50}, 10
    )
    assert sorted(even.values()) == [3, 3, 4] and sum(even.values()) == 10
    assert pl.rate_limit(start, latest, 10_000) == latest


def test_offsets_json_and_advance_only():
    d = {("a", 0): 5, ("a", 10): 7, ("b", 2): 0}
    j = pl.to_json(d)
    assert j == {"a": {"0": 5, "10": 7}, "b": {"2": 0}}
    assert pl.from_json(json.loads(json.dumps(j))) == d
    assert pl.advance_only({("a", 0): 9, ("z", 0): 1}, {("a", 0): 3, ("a", 1): 2}) == {
        ("a", 0): 9,
        ("a", 1): 2,
    }


# --------------------------------------------------------------------------- Arrow


def test_arrow_conversion_matches_spark_schema_without_row_loop():
    buf = fb.encode(
        [b"v0", b"v1", None],
        keys=[b"k0", None, b"k2"],
        timestamps=[1000, 2000, 3000],
        headers=[[("h", b"1")], [("x", None)], [("a", b""), ("b", b"2")]],
    )
    t = fb.to_arrow(buf, 0, 10)
    for headers in (False, True):
        rb = sarrow.to_spark_batch(t, "topic", 3, headers)
        spark_schema = to_arrow_schema(sarrow.spark_read_schema(headers), timezone="UTC")
        assert rb.schema.equals(spark_schema)
    rb = sarrow.to_spark_batch(t, "topic", 3, True, ts_lo_us=1_500_000, ts_hi_us=3_000_000)
    assert rb.to_pydict() == {
        "key": [None],
        "value": [b"v1"],
        "topic": ["topic"],
        "partition": [3],
        "offset": [1],
        "timestamp": [dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.timezone.utc)],
        "timestampType": [0],
        "headers": [[{"key": "x", "value": None}]],
    }


def test_spark_batches_are_cut_in_slices_of_about_max_bytes():
    values = [bytes([97 + i % 26]) * 200 for i in range(1000)]
    fetched = [
        fb.to_arrow(fb.encode(values[s : s + 250], base_offset=s), s, s + 250).to_batches()[0]
        for s in range(0, 1000, 250)
    ]
    whole = sarrow.to_spark_batch(pa.Table.from_batches(fetched), "t", 1, False)
    assert [b.num_rows for b in sarrow.to_spark_batches(fetched, "t", 1, False, 1)] == [1] * 1000
    for max_bytes in (1, 10_000, 60_000, whole.nbytes // 2, whole.nbytes * 2 // 3, whole.nbytes, 1 << 30):
        out = sarrow.to_spark_batches(fetched, "t", 1, False, max_bytes)
        assert pa.Table.from_batches(out).equals(pa.Table.from_batches([whole]))
        assert all(b.num_rows for b in out)
        assert len(out) == max(1, min(1000, round(whole.nbytes / max_bytes)))
        assert len({b.num_rows for b in out[:-1]}) <= 1 and out[-1].num_rows <= out[0].num_rows
    # a timestamp filter that keeps nothing leaves no batch at all
    assert sarrow.to_spark_batches(fetched, "t", 1, False, 10_000, ts_hi_us=0) == []


def test_topic_and_partition_columns_are_slices_of_one_built_column():
    sarrow._CONSTANTS.clear()
    long = sarrow._constant("topic-a", pa.string(), 1000)
    short = sarrow._constant("topic-a", pa.string(), 10)
    assert short.to_pylist() == ["topic-a"] * 10 and len(long) == 1000
    assert short.buffers()[2].address == long.buffers()[2].address  # no new column for a shorter batch
    assert short.nbytes <= 10 * (4 + len("topic-a")) + 4  # Spark's batch sizing sees the slice only
    assert sarrow._constant("topic-a", pa.string(), 2000).to_pylist() == ["topic-a"] * 2000
    assert sarrow._constant(7, pa.int32(), 3).to_pylist() == [7, 7, 7]
    assert sarrow._constant("7", pa.string(), 3).to_pylist() == ["7", "7", "7"]
    assert sarrow._constant("topic-a", pa.string(), 0).to_pylist() == []
    for p in range(3 * sarrow._MAX_CONSTANTS):  # a long-lived streaming worker: the cache stays bounded
        assert sarrow._constant(p, pa.int32(), 2).to_pylist() == [p, p]
    assert len(sarrow._CONSTANTS) <= sarrow._MAX_CONSTANTS
    rb = sarrow.to_spark_batch(fb.to_arrow(fb.encode([b"x"] * 5), 0, 5), "topic-a", 7, False)
    assert rb.column("topic").to_pylist() == ["topic-a"] * 5 and rb.column("partition").to_pylist() == [7] * 5


def test_write_schema_checks():
    def schema(*fields):
        return StructType(list(fields))

    ok = schema(
        StructField("value", StringType()),
        StructField("key", BinaryType()),
        StructField("partition", IntegerType()),
    )
    sarrow.check_write_schema(ok, True)
    cases = [
        (schema(StructField("key", BinaryType())), True, "needs a 'value' column"),
        (schema(StructField("value", LongType())), True, "binary or string"),
        (schema(StructField("value", BinaryType())), False, "no topic"),
        (
            schema(StructField("value", BinaryType()), StructField("topic", IntegerType())),
            True,
            "'topic' must be a string",
        ),
        (
            schema(StructField("value", BinaryType()), StructField("partition", LongType())),
            True,
            "'partition' must be an int",
        ),
        (
            schema(StructField("value", BinaryType()), StructField("headers", ArrayType(StringType()))),
            True,
            "'headers'",
        ),
    ]
    for s, has_topic, needle in cases:
        with pytest.raises(ConfigError, match=needle):
            sarrow.check_write_schema(s, has_topic)
    rb = pa.RecordBatch.from_pydict({"value": pa.array(["x", None]), "topic": pa.array(["t", "u"])})
    t = sarrow.to_producer_table(rb)
    assert t.column("value").type == pa.binary() and t.column("value").to_pylist() == [b"x", None]
