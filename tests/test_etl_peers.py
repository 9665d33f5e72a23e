"""``logsource etl`` against the real peers: Apache Kafka as the source (Parquet and Iceberg out) and
HDFS as the output (a MiniDFSCluster's ``hdfs://``), each killed -9 in the middle while a producer runs;
the output ends exactly-once. The kill schedule and its helpers are tests/test_etl_failures.py's."""

from __future__ import annotations

import time
import uuid

import pytest
from test_etl_failures import Job, create_topic, log_end, run_kill_schedule, start_producer, stop_producer

from pyspark_logsource import etl
from pyspark_logsource.errors import CommittedDataMissing
from pyspark_logsource.faults import PAUSED_MARKER

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kill9]


@pytest.mark.real_kafka
@pytest.mark.timeout(1200)
def test_kill_9_etl_reading_apache_kafka(real_kafka, tmp_path, spark):
    """The ETL's offsets live with its output, so it needs nothing from the broker beyond reads: killed -9
    at a random moment and at the commit point while reading Apache Kafka, then run clean, every offset
    of the log is in the Parquet output once (``--verify`` passes)."""
    kills = run_kill_schedule(
        real_kafka,
        tmp_path,
        spark,
        topic=f"etlak-{uuid.uuid4().hex[:8]}",
        output=str(tmp_path / "out"),
        points=["commit", "random"],
        kills_wanted=2,
        seed=7,
    )
    assert kills.get("commit", 0) == 1, kills


@pytest.mark.real_kafka
@pytest.mark.timeout(1200)
def test_kill_9_iceberg_etl_reading_apache_kafka(real_kafka, tmp_path, spark):
    """The Iceberg load keeps its offsets in the table's snapshot, so Apache Kafka as the source changes
    nothing: killed -9 after the write and before the commit (and at a random moment) while reading it,
    then run clean, a pyiceberg scan returns every offset of the log exactly once and ``--verify``
    passes."""
    kills = run_kill_schedule(
        real_kafka,
        tmp_path,
        spark,
        topic=f"etlaki-{uuid.uuid4().hex[:8]}",
        output=str(tmp_path / "out"),
        points=["after_write", "commit", "random"],
        kills_wanted=3,
        extra=("--output-format", "iceberg", "--table", "db.events"),
        iceberg=True,
        seed=11,
    )
    assert kills.get("commit", 0) == 1 and kills.get("after_write", 0) == 1, kills


def hdfs_offsets(spark, output: str) -> dict[int, list[int]]:
    """(partition -> sorted offsets) as Spark reads the published output (``_staging``/``_logsource`` are
    hidden from readers by their leading underscore)."""
    try:
        rows = spark.read.parquet(output).select("partition", "offset").collect()
    except Exception as e:  # an output with no published file yet
        if "PATH_NOT_FOUND" in str(e) or "UNABLE_TO_INFER_SCHEMA" in str(e):
            return {}
        raise
    res: dict[int, list[int]] = {}
    for r in rows:
        res.setdefault(r.partition, []).append(r.offset)
    return {p: sorted(v) for p, v in res.items()}


def check_hdfs(spark, output: str) -> dict[tuple[str, int], int]:
    """--status's recovery (in this process, through Spark's Hadoop), then: the visible rows on HDFS are
    exactly [0, committed) per partition."""
    said: list[str] = []
    assert etl.status(etl.parse_args(["--output", output, "--status"]), spark, log=said.append) == 0
    committed = etl.open_store(output, spark).committed_offsets()
    seen = hdfs_offsets(spark, output)
    for (_t, p), end in committed.items():
        assert seen.get(p, []) == list(range(end)), (
            f"partition {p}: committed {end}, {len(seen.get(p, []))} seen"
        )
    assert set(seen) <= {p for (_t, p) in committed}
    return committed


def cli(*argv: str) -> Job:
    job = Job(list(argv))
    job.finish()
    return job


@pytest.mark.hdfs
@pytest.mark.timeout(1800)
def test_kill_9_etl_into_hdfs_then_status_verify_repair(broker, hdfs, tmp_path, spark):
    """``--output hdfs://...``: killed -9 three times under a producer (at the commit point, while
    publishing, at a random moment), run clean: exactly-once; ``--status`` and ``--verify`` as the CLI on
    hdfs://; then a published file deleted on HDFS: ``--verify`` refuses (CommittedDataMissing, naming --repair), ``--repair`` withdraws the load,
    the next load loads its range again and ``--verify`` passes."""
    topic = f"etlhdfs{uuid.uuid4().hex[:6]}"
    output = f"{hdfs.url}/etl/{topic}"
    create_topic(broker.bootstrap, topic)
    argv = ["--bootstrap-servers", broker.bootstrap, "--subscribe", topic, "--output", output]
    argv += ["--master", "local[1]", "--no-progress"]
    producer = start_producer(broker.bootstrap, topic)
    kills = 0
    try:
        for where in ["commit", "publish", "random"]:
            job = Job(
                [*argv, "--max-offsets-per-load", "3000"], pause_at=None if where == "random" else where
            )
            if where == "random":
                if job.wait_for("loading ") and job.proc.poll() is None:
                    time.sleep(1.0)
            else:
                assert job.wait_for(f"{PAUSED_MARKER} {where}"), job.output
            kills += job.kill9()
            check_hdfs(spark, output)
    finally:
        stop_producer(producer)
    assert kills >= 2
    job = cli(*argv)
    assert job.proc.returncode == 0, job.output
    ends = log_end(broker.bootstrap, topic)
    assert check_hdfs(spark, output) == ends and sum(ends.values()) > 1000
    status = cli("--output", output, "--status", "--master", "local[1]")
    assert status.proc.returncode == 0, status.output
    for end in ends.values():  # the table lists each partition's committed end offset
        assert any(str(end) in line.split() for line in status.lines), status.output
    verify = cli("--output", output, "--verify", "--master", "local[1]")
    assert verify.proc.returncode == 0, verify.output
    # storage loses a published file of the newest load
    store = etl.open_store(output, spark)
    newest = store.latest()
    assert newest is not None and newest.files
    lost = next(f for f in newest.files if f.rows)
    assert store.fs.delete(store.path(lost.path))  # manifest paths are relative to the output root
    with pytest.raises(
        CommittedDataMissing, match=f"load {newest.seq} is committed but 1 of its files.*--repair"
    ):
        etl.verify(spark, output, log=lambda s: None)
    repair = cli("--output", output, "--repair", "--master", "local[1]")
    assert repair.proc.returncode == 0 and f"withdrew load {newest.seq}" in repair.output, repair.output
    assert etl.open_store(output, spark).committed_offsets() != ends  # its range is no longer committed
    res = etl.run_load(spark, etl.parse_args(argv), log=lambda s: None)  # ... and is loaded again
    assert res.seq is not None
    assert check_hdfs(spark, output) == ends
    assert etl.verify(spark, output, log=lambda s: None).ok


@pytest.fixture
def broker(tmp_path):
    from pyspark_logsource import EmbeddedBroker

    with EmbeddedBroker(tmp_path / "broker", mode="process") as b:
        yield b
