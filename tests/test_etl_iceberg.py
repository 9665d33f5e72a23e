"""The Iceberg sink end to end: a real broker, the shared SparkSession, pyiceberg's SQLite catalog.

The kill -9 test of the Iceberg sink is in tests/test_etl_failures.py.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from pyspark_logsource import etl
from pyspark_logsource.errors import CommitConflict
from pyspark_logsource.etl.iceberg import OFFSETS_KEY, IcebergSink

pytestmark = pytest.mark.spark

PARTITIONS = 3


@pytest.fixture
def topic(tmp_path):
    from pyspark_logsource import Admin, EmbeddedBroker, Producer

    with EmbeddedBroker(tmp_path / "broker") as b:
        with Admin(b.bootstrap) as admin:
            admin.create_topic("events", partitions=PARTITIONS)
        with Producer(b.bootstrap) as p:
            for i in range(300):
                p.send(
                    "events",
                    value=json.dumps({"user": f"u{i % 7}", "n": i}).encode(),
                    partition=i % PARTITIONS,
                )
            p.flush()
        yield b


def produce(bootstrap: str, n: int, start: int = 0) -> None:
    from pyspark_logsource import Producer

    with Producer(bootstrap) as p:
        for i in range(start, start + n):
            p.send("events", value=json.dumps({"user": "late", "n": i}).encode(), partition=i % PARTITIONS)
        p.flush()


def cfg_for(tmp_path, bootstrap: str, *extra: str) -> etl.EtlConfig:
    return etl.parse_args(
        [
            "--bootstrap-servers",
            bootstrap,
            "--subscribe",
            "events",
            "--output",
            str(tmp_path / "lake"),
            "--output-format",
            "iceberg",
            "--table",
            "db.events",
            "--decode",
            "json",
            "--value-schema",
            "user STRING, n INT",
            *extra,
        ]
    )


def sql_catalog(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    lake = tmp_path / "lake"
    return SqlCatalog("default", uri=f"sqlite:///{lake}/catalog.db", warehouse=f"file://{lake}/warehouse")


def exactly_once(table) -> dict[int, int]:
    """Every (topic, partition, offset) of a pyiceberg scan exactly once, [0, n) per partition."""
    t = table.scan(selected_fields=("topic", "partition", "offset")).to_arrow()
    keys = list(zip(t["topic"].to_pylist(), t["partition"].to_pylist(), t["offset"].to_pylist(), strict=True))
    assert len(keys) == len(set(keys)), "duplicate rows"
    per: dict[int, list[int]] = {}
    for _t, p, o in keys:
        per.setdefault(p, []).append(o)
    for p, offs in per.items():
        assert sorted(offs) == list(range(len(offs))), f"gap in partition {p}"
    return {p: len(v) for p, v in per.items()}


def test_load_twice_then_more(spark, tmp_path, topic):
    cfg = cfg_for(tmp_path, topic.bootstrap)
    first = etl.run_load(spark, cfg, log=lambda s: None)
    assert first.rows == 300 and first.seq == 1
    again = etl.run_load(spark, cfg, log=lambda s: None)
    assert not again.committed and "committed nothing" in again.message
    # any SqlCatalog opened on the output reads the table
    table = sql_catalog(tmp_path).load_table("db.events")
    assert sum(exactly_once(table).values()) == 300
    snap = table.current_snapshot()
    assert json.loads(snap.summary[OFFSETS_KEY]) == {"events": {"0": 100, "1": 100, "2": 100}}
    assert snap.summary["logsource.seq"] == "1"
    # schema: the metadata columns plus the decoded value; partitioned by the hour (and so the day) of the timestamp
    names = {f.name for f in table.schema().fields}
    assert {
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "key",
        "user",
        "n",
        "_corrupt_record",
    } <= names
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("timestamp_hour", "hour")]
    row = table.scan(row_filter="offset == 5 and partition == 2").to_arrow().to_pylist()[0]
    assert row["n"] == 17 and row["user"] == "u3"
    # new data: the next load continues from the offsets in the snapshot summary
    produce(topic.bootstrap, 30, start=300)
    nxt = etl.run_load(spark, cfg, log=lambda s: None)
    assert nxt.rows == 30 and nxt.seq == 2
    table = sql_catalog(tmp_path).load_table("db.events")
    assert exactly_once(table) == {0: 110, 1: 110, 2: 110}
    assert IcebergSink(cfg).verify(spark, lambda s: None).ok
    assert etl.main(["--verify", *cfg.replace(action="verify").to_argv()]) == 0
    out = []
    assert etl.status(cfg.replace(action="status"), log=out.append) == 0
    assert "events" in out[-1] and "110" in out[-1]


def test_two_concurrent_loads_one_wins(spark, tmp_path, topic):
    cfg = cfg_for(tmp_path, topic.bootstrap)
    etl.run_load(spark, cfg, log=lambda s: None)
    produce(topic.bootstrap, 60, start=300)
    from pyspark_logsource.etl.load import read_plan, transform
    from pyspark_logsource.etl.plan import plan_from_broker

    # both loads plan from the same snapshot, then write; A commits first
    a, b = IcebergSink(cfg, spark), IcebergSink(cfg, spark)
    plans = [plan_from_broker(cfg, s.committed_offsets(), lambda m: None)[0] for s in (a, b)]
    dfs = [transform(read_plan(spark, cfg, p), cfg) for p in plans]
    res = a.write_and_commit(spark, dfs[0], plans[0], lambda s: None)
    assert res.rows == 60
    with pytest.raises(CommitConflict, match="nothing was committed"):
        b.write_and_commit(spark, dfs[1], plans[1], lambda s: None)
    table = sql_catalog(tmp_path).load_table("db.events")
    assert exactly_once(table) == {0: 120, 1: 120, 2: 120}
    # the loser deleted its files: only the two committed load directories remain
    import os

    data = table.location().replace("file://", "") + "/data"
    assert len([d for d in os.listdir(data) if d.startswith("load-")]) == 2
    assert not etl.run_load(spark, cfg, log=lambda s: None).committed


def test_orphan_files_of_a_dead_load_are_removed(spark, tmp_path, topic):
    cfg = cfg_for(tmp_path, topic.bootstrap)
    etl.run_load(spark, cfg, log=lambda s: None)
    sink = IcebergSink(cfg, spark)
    data = sink.table().location().replace("file://", "") + "/data"
    import os

    dead = os.path.join(data, "load-00000000000000000002-00000000deadbeef", "ts_hour=x")
    os.makedirs(dead)
    pa.parquet = __import__("pyarrow.parquet").parquet
    pa.parquet.write_table(pa.table({"offset": [1]}), os.path.join(dead, "part-0.parquet"))
    logs: list[str] = []
    sink.recover(logs.append)
    assert "orphan" in logs[0] and not os.path.exists(os.path.dirname(dead))
    assert len([d for d in os.listdir(data) if d.startswith("load-")]) == 1


def test_embedded_catalog_needs_a_local_output():
    from pyspark_logsource.errors import ConfigError

    cfg = etl.parse_args(
        ["--output", "hdfs://nn:8020/lake", "--output-format", "iceberg", "--table", "db.t", "--status"]
    )
    with pytest.raises(ConfigError, match="local --output"):
        IcebergSink(cfg)
