"""Our data source through Spark Connect: a client session (``SparkSession.builder.remote``) against the
Connect server pyspark ships (its own fixture, ``spark_connect``); the data source registered from the
client, then a batch read, a streaming query and a write, each run on the server. Columns are SQL strings:
with the classic session of the ``spark`` fixture in the same process, ``pyspark.sql.functions`` builds
classic columns, which a Connect DataFrame cannot take."""

from __future__ import annotations

import time

import pytest

from pyspark_logsource import Admin, Consumer, Producer, register

pytestmark = pytest.mark.connect


def produce(bs: str, topic: str, partitions: int, n: int, offset: int = 0) -> None:
    with Producer(bs, linger_ms=2) as p:
        futs = [
            p.send(topic, value=f"{topic}-p{part}-{i}".encode(), key=f"k{i}".encode(), partition=part)
            for part in range(partitions)
            for i in range(offset, offset + n)
        ]
        p.flush()
        for f in futs:
            f.result(30)


@pytest.fixture(scope="module")
def remote(spark_connect):
    """The Connect client session with ``logsource`` registered through it."""
    register(spark_connect)
    return spark_connect


def test_connect_batch_read(remote, broker, topic_name):
    bs = broker.bootstrap
    t = topic_name("scr")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=2)
    produce(bs, t, 2, 30)
    df = remote.read.format("logsource").option("bootstrap.servers", bs).option("subscribe", t).load()
    rows = df.selectExpr("CAST(value AS STRING) AS v", "partition", "offset").collect()
    assert sorted((r.partition, r.offset, r.v) for r in rows) == [
        (p, i, f"{t}-p{p}-{i}") for p in range(2) for i in range(30)
    ]
    part = (
        remote.read.format("logsource")
        .option("bootstrap.servers", bs)
        .option("subscribe", t)
        .option("startingOffsets", f'{{"{t}":{{"0":10,"1":-2}}}}')
        .option("endingOffsets", f'{{"{t}":{{"0":15,"1":-1}}}}')
        .load()
    )
    assert part.count() == 5 + 30


def test_connect_streaming_query(remote, broker, topic_name, tmp_path):
    """availableNow with a checkpoint, run twice with new records in between: each record once."""
    bs = broker.bootstrap
    t = topic_name("scs")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=2)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    for run in range(2):
        produce(bs, t, 2, 10, offset=run * 10)
        q = (
            remote.readStream.format("logsource")
            .option("bootstrap.servers", bs)
            .option("subscribe", t)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "8")
            .load()
            .selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()
        got = [r.v for r in remote.read.parquet(str(out)).collect()]
        assert sorted(got) == sorted(f"{t}-p{p}-{i}" for p in range(2) for i in range((run + 1) * 10)), run


def test_connect_write(remote, broker, topic_name):
    bs = broker.bootstrap
    t = topic_name("scw")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=2)
    df = remote.createDataFrame(
        [(f"k{i}", f"v{i}", i % 2) for i in range(40)], "key string, value string, partition int"
    )
    df.write.format("logsource").option("bootstrap.servers", bs).option("topic", t).mode("append").save()
    with Consumer(bs) as c:
        c.assign([(t, 0), (t, 1)])
        got: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while len(got) < 40 and time.monotonic() < deadline:
            got += [(m.partition, m.key, m.value) for m in c.poll(500)]
    assert sorted(got) == sorted((i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(40))
