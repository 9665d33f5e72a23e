"""The ETL job's write/audit/commit path, planning and options, on the shared SparkSession.

The load tests run three ways: a plain path (the local filesystem), a file:// URI (Hadoop's
FileSystem through Spark's JVM, commit by rename) and a file:// URI in direct mode (the commit
protocol for object stores: written in place, the manifest is the only commit step).
The broker-backed end-to-end runs and the kill -9 tests are in tests/test_etl_failures.py.
"""

from __future__ import annotations

import datetime as dt
import os

import pyarrow.dataset as pads
import pytest

from pyspark_logsource import etl
from pyspark_logsource.errors import AuditMismatch, ConfigError, OffsetOutOfRange
from pyspark_logsource.offsets.filesystem import to_local_path

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 11, 21, 22, 30, tzinfo=dt.timezone.utc)


def records(spark, ranges: dict[tuple[str, int], tuple[int, int]], *, values=None, drop=(), dup=()):
    """A DataFrame shaped like the logsource reader's rows for the given [start, end) ranges."""
    rows = []
    for (t, p), (s, e) in sorted(ranges.items()):
        for o in range(s, e):
            if (t, p, o) in drop:
                continue
            v = values(t, p, o) if values else f"{t}-{p}-{o}".encode()
            ts = T0 + dt.timedelta(minutes=o)  # crosses an hour boundary at offset 30
            rows.append((f"k{o}".encode(), v, t, p, o, ts, 0))
            if (t, p, o) in dup:
                rows.append((f"k{o}".encode(), v, t, p, o, ts, 0))
    schema = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
    return spark.createDataFrame(rows, schema).repartition(3)


TARGETS = ["local", "hadoop", "direct"]


@pytest.fixture(params=TARGETS)
def target(request):
    """How the output is named: a plain path, a file:// URI, a file:// URI committed in direct mode."""
    return request.param


def out_for(target, path) -> str:
    return str(path) if target == "local" else "file://" + str(path)


def args_for(out, *extra, target="local"):
    mode = ["--commit-mode", "direct"] if target == "direct" else []
    return etl.parse_args(
        ["--output", str(out), "--bootstrap-servers", "localhost:1", "--subscribe", "t", *mode, *extra]
    )


def plan_for(store, ranges):
    committed = store.committed_offsets()
    return etl.LoadPlan(
        {tp: s for tp, (s, _) in ranges.items()}, {tp: e for tp, (_, e) in ranges.items()}, committed
    )


def write_and_commit(spark, df, cfg, ranges):
    sink = etl.DirectorySink(cfg, spark)
    sink.recover(lambda s: None)
    return sink.write_and_commit(spark, etl.transform(df, cfg), plan_for(sink.store, ranges), lambda s: None)


def store_of(spark, out):
    return etl.open_store(str(out), spark)


def data_dirs(store):
    """Directories of committed files below the load directory (direct mode) or the root."""
    return sorted(
        {os.path.dirname(f.split("/", 1)[1] if f.startswith("load=") else f) for f in store.committed_files()}
    )


def visible_rows(out):
    """Rows a plain pyarrow dataset reader sees (it skips _ and . names, like Spark)."""
    return pads.dataset(str(out), format="parquet", partitioning="hive").to_table()


def test_load_commits_exactly_the_rows(spark, tmp_path, target):
    out = out_for(target, tmp_path / "out")
    args = args_for(out, target=target)
    ranges = {("t", 0): (0, 50), ("t", 1): (0, 7)}
    res = write_and_commit(spark, records(spark, ranges), args, ranges)
    store = store_of(spark, out)
    assert res.seq == 1 and res.rows == 57
    assert store.committed_offsets() == {("t", 0): 50, ("t", 1): 7}
    assert etl.summary_lines(res) == ["t-0: from 0 to 50 (50 rows)", "t-1: from 0 to 7 (7 rows)"]
    df = spark.read.parquet(out)
    assert df.count() == 57
    assert {"topic", "partition", "offset", "key", "value", "timestamp"} <= set(df.columns)
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(50)] + [(1, o) for o in range(7)]
    assert visible_rows(tmp_path / "out").num_rows == 57
    names = [os.path.basename(f) for f in store.committed_files()]
    assert all(n.endswith(".snappy.parquet") for n in names)
    if target == "direct":
        # written in place, in the load's own directory: nothing renamed
        assert {f.split("/")[0] for f in store.committed_files()} == {"load=" + store.latest().load_id}
    else:
        # published names carry topic+partition+offsets where a file holds one partition
        for n in [n for n in names if n.startswith("t+")]:
            t, p, first, last = n.split(".")[0].split("+")
            assert t == "t" and int(first) <= int(last)
    # a second load continues from the committed offsets
    ranges2 = {("t", 0): (50, 60)}
    res2 = write_and_commit(spark, records(spark, ranges2), args, ranges2)
    assert res2.seq == 2
    assert store.committed_offsets() == {("t", 0): 60, ("t", 1): 7}
    assert spark.read.parquet(out).count() == 67
    assert etl.verify(spark, out, log=lambda s: None).ok


def test_hive_partitioning_by_topic_date_hour(spark, tmp_path, target):
    out = out_for(target, tmp_path / "out")
    args = args_for(out, "--partition-by", "topic,date,hour", "--decode", "utf8", target=target)
    ranges = {("t", 0): (0, 40), ("u", 0): (0, 5)}
    write_and_commit(spark, records(spark, ranges), args, ranges)
    assert data_dirs(store_of(spark, out)) == [
        "topic=t/date=2026-11-21/hour=22",
        "topic=t/date=2026-11-21/hour=23",
        "topic=u/date=2026-11-21/hour=22",
    ]
    df = spark.read.parquet(out)
    assert df.count() == 45
    row = df.where("topic = 't' and offset = 31").collect()[0]
    assert row.value == "t-0-31" and str(row.hour) == "23" and row.partition == 0
    assert etl.verify(spark, out, log=lambda s: None).ok


def test_json_decode_keeps_bad_values(spark, tmp_path):
    out = tmp_path / "out"
    args = args_for(out, "--decode", "json", "--value-schema", "user STRING, n INT")

    def values(t, p, o):
        return b"not json {" if o == 3 else f'{{"user": "u{o}", "n": {o}}}'.encode()

    ranges = {("t", 0): (0, 6)}
    write_and_commit(spark, records(spark, ranges, values=values), args, ranges)
    rows = {r.offset: r for r in spark.read.parquet(str(out)).collect()}
    assert len(rows) == 6
    assert rows[5].user == "u5" and rows[5].n == 5 and rows[5]._corrupt_record is None
    assert rows[3].user is None and rows[3]._corrupt_record == "not json {"


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_other_formats(spark, tmp_path, fmt, target):
    out = out_for(target, tmp_path / "out")
    args = args_for(out, "--format", fmt, target=target)
    ranges = {("t", 0): (0, 20)}
    write_and_commit(spark, records(spark, ranges), args, ranges)
    r = spark.read.format(fmt)
    if fmt == "csv":
        r = r.option("header", "true")
    assert r.load(out).count() == 20
    assert all(f.endswith("." + fmt) for f in store_of(spark, out).committed_files())
    assert etl.verify(spark, out, log=lambda s: None).ok


@pytest.mark.parametrize(
    "kind,match",
    [("drop", "19 row"), ("dup", "21 row"), ("dupgap", "duplicate or gap"), ("extra", "not in the plan")],
)
def test_audit_mismatch_commits_nothing(spark, tmp_path, kind, match, target):
    out = out_for(target, tmp_path / "out")
    args = args_for(out, target=target)
    ranges = {("t", 0): (0, 20)}
    if kind == "drop":
        df = records(spark, ranges, drop={("t", 0, 7)})
    elif kind == "dup":
        df = records(spark, ranges, dup={("t", 0, 7)})
    elif kind == "dupgap":
        df = records(spark, ranges, drop={("t", 0, 8)}, dup={("t", 0, 7)})
    else:
        df = records(spark, {("t", 0): (0, 20), ("t", 9): (0, 2)})
    with pytest.raises(AuditMismatch, match=match):
        write_and_commit(spark, df, args, ranges)
    store = store_of(spark, out)
    assert store.manifest_seqs() == [] and store.committed_offsets() == {}
    assert not store.fs.exists(store.staging_root) or store.fs.list(store.staging_root) == []
    assert [f for f in store.fs.walk_files(out) if "/_" not in f.path and "/." not in f.path] == []


def test_verify_detects_tampering(spark, tmp_path, target):
    out = out_for(target, tmp_path / "out")
    args = args_for(out, target=target)
    ranges = {("t", 0): (0, 30)}
    write_and_commit(spark, records(spark, ranges), args, ranges)
    assert etl.verify(spark, out, log=lambda s: None).ok
    # a stray file copied into the tree duplicates rows: verify names both problems
    store = store_of(spark, out)
    victim = to_local_path(store.path(store.committed_files()[0]))
    with open(victim, "rb") as f:
        data = f.read()
    with open(os.path.join(os.path.dirname(victim), "copy.parquet"), "wb") as f:
        f.write(data)
    rep = etl.verify(spark, out, log=lambda s: None)
    assert not rep.ok
    assert any("not named by any manifest" in p for p in rep.problems)
    assert any("rows" in p for p in rep.problems)
    assert etl.main(["--verify", "--output", out]) == 1


def test_direct_mode_recovery_deletes_a_dead_load(spark, tmp_path):
    """Direct mode: a load that died after Spark wrote its directory but before the manifest."""
    out = out_for("direct", tmp_path / "out")
    args = args_for(out, target="direct")
    ranges = {("t", 0): (0, 10)}
    write_and_commit(spark, records(spark, ranges), args, ranges)
    sink = etl.DirectorySink(args, spark)
    staged = sink.committer.begin()
    ranges2 = {("t", 0): (10, 20)}
    sink.write(etl.transform(records(spark, ranges2), args), staged.staging)  # then the job dies
    # a plain directory reader sees the dead load; a reader of the committed paths does not
    assert spark.read.parquet(out).count() == 20
    from pyspark_logsource.offsets import committed_paths

    assert spark.read.parquet(*committed_paths(sink.store)).count() == 10
    logs = []
    sink.recover(logs.append)
    assert "deleted 1 uncommitted" in logs[0]
    assert spark.read.parquet(out).count() == 10
    res = write_and_commit(spark, records(spark, ranges2), args, ranges2)
    assert res.seq == 2 and spark.read.parquet(out).count() == 20
    assert etl.verify(spark, out, log=lambda s: None).ok


def test_plan_load():
    tps = [("t", 0), ("t", 1), ("t", 2)]
    earliest = {("t", 0): 0, ("t", 1): 5, ("t", 2): 0}
    latest = {("t", 0): 100, ("t", 1): 10, ("t", 2): 7}
    p = etl.plan_load({}, tps, earliest, latest)
    assert p.start == earliest and p.end == latest and p.total == 112
    p = etl.plan_load({("t", 0): 90}, tps, earliest, latest, starting="latest")
    assert p.start == {("t", 0): 90, ("t", 1): 10, ("t", 2): 7} and p.total == 10
    p = etl.plan_load({("t", 0): 100, ("t", 1): 10, ("t", 2): 7}, tps, earliest, latest)
    assert p.empty
    # the bound spreads over partitions with a backlog and never exceeds the total
    p = etl.plan_load({}, tps, earliest, latest, max_offsets=12)
    assert p.total == 12 and all(p.end[tp] <= latest[tp] for tp in tps)
    # retention deleted committed-but-unloaded data
    with pytest.raises(OffsetOutOfRange, match="retention"):
        etl.plan_load({("t", 1): 2}, tps, earliest, latest)
    p = etl.plan_load({("t", 1): 2}, tps, earliest, latest, fail_on_data_loss=False)
    assert p.start[("t", 1)] == 5
    with pytest.raises(OffsetOutOfRange, match="beyond the log end"):
        etl.plan_load({("t", 2): 50}, tps, earliest, latest)


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--subscribe", "t", "--bootstrap-servers", "h:1"], "--output"),
        (["--output", "o", "--bootstrap-servers", "h:1"], "exactly one"),
        (
            ["--output", "o", "--bootstrap-servers", "h:1", "--subscribe", "t", "--decode", "json"],
            "value-schema",
        ),
        (
            ["--output", "o", "--bootstrap-servers", "h:1", "--subscribe", "t", "--partition-by", "day"],
            "partition-by",
        ),
        (
            [
                "--output",
                "o",
                "--bootstrap-servers",
                "h:1",
                "--subscribe",
                "t",
                "--max-offsets-per-load",
                "0",
            ],
            "positive",
        ),
        (
            ["--output", "o", "--bootstrap-servers", "h:1", "--subscribe", "t", "--starting-offsets", "5"],
            "earliest",
        ),
        (["--output", "o", "--subscribe", "t", "--output-format", "iceberg"], "--table"),
        (
            [
                "--output",
                "o",
                "--subscribe",
                "t",
                "--output-format",
                "iceberg",
                "--table",
                "db.t",
                "--format",
                "csv",
            ],
            "parquet",
        ),
        (["--output", "o", "--status", "--verify"], "at most one"),
    ],
)
def test_bad_options_are_config_errors(argv, match):
    with pytest.raises(ConfigError, match=match):
        etl.parse_args(argv)


def test_bootstrap_default(monkeypatch):
    monkeypatch.setenv("LOGSOURCE_BOOTSTRAP", "somehost:1234")
    assert etl.parse_args(["--output", "o", "--subscribe", "t"]).bootstrap_servers == "somehost:1234"


def test_config_is_frozen_and_round_trips_to_argv():
    cfg = etl.EtlConfig(
        output="/o",
        bootstrap_servers="h:1",
        subscribe="t",
        partition_by="topic,date",
        max_offsets_per_load="7",
    )
    assert cfg.partition_by == ("topic", "date") and cfg.max_offsets_per_load == 7
    with pytest.raises(AttributeError):
        cfg.output = "/elsewhere"  # type: ignore[misc]
    assert etl.parse_args(cfg.to_argv()) == cfg
    assert cfg.replace(format="json").format == "json"
    with pytest.raises(ConfigError, match="table"):
        cfg.replace(sink="iceberg")
    with pytest.raises(ConfigError, match="commit-mode"):
        cfg.replace(commit_mode="copy")


def test_properties_file(tmp_path):
    conf = tmp_path / "etl.properties"
    conf.write_text(
        "# comment\nbootstrap.servers=h:9\nsubscribe=a,b\noutput=/x\noutput.format=json\nmaxOffsetsPerLoad=5\n"
    )
    a = etl.parse_args(["--config", str(conf), "--format", "csv"])
    assert (a.bootstrap_servers, a.subscribe, a.output, a.format, a.max_offsets_per_load) == (
        "h:9",
        "a,b",
        "/x",
        "csv",
        5,
    )
    conf.write_text("bogus.key=1\n")
    with pytest.raises(ConfigError, match="bogus"):
        etl.parse_args(["--config", str(conf), "--output", "/x", "--status"])
    # the shipped defaults file parses
    shipped = os.path.join(os.path.dirname(__file__), "..", "conf", "etl.properties")
    a = etl.parse_args(["--config", shipped, "--output", "/x", "--status"])
    assert a.format == "parquet" and a.decode == "raw"


def test_status_and_main_exit_codes(tmp_path, capsys):
    out = tmp_path / "out"
    assert etl.main(["--status", "--output", str(out)]) == 0
    assert "nothing committed" in capsys.readouterr().out
    assert etl.main(["--output", str(out)]) == 2
    assert "ConfigError" in capsys.readouterr().err


@pytest.mark.slow
def test_spark_submit_and_cli_entry_points(spark, tmp_path):
    import subprocess
    import sys

    out = tmp_path / "out"
    args = args_for(out)
    ranges = {("t", 0): (0, 25)}
    write_and_commit(spark, records(spark, ranges), args, ranges)
    root = os.path.join(os.path.dirname(__file__), "..")
    from support.spark_jvm import driver_java_options

    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    r = subprocess.run(
        [
            submit,
            "--master",
            "local[1]",
            # the test drivers' JVM options (tests/support/spark_jvm.py): the session's class-data archive
            # is ready by now in a full run, which starts writing it at its start
            "--driver-java-options",
            driver_java_options(),
            "--conf",
            "spark.ui.enabled=false",
            os.path.join(root, "pyspark_logsource", "jobs", "etl.py"),
            "--verify",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verify: OK" in r.stdout
    cli = os.path.join(os.path.dirname(sys.executable), "logsource")
    r = subprocess.run(
        [cli, "etl", "--status", "--output", str(out)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    row = [line.split() for line in r.stdout.splitlines() if line.startswith("t ")]
    assert row and row[0][:5] == ["t", "0", "0", "25", "25"], r.stdout


def test_streaming_checkpoint_leftovers_are_removed(tmp_path):
    out = tmp_path / "out"
    cp = out / "_checkpoint"
    for d in ("offsets", "commits"):
        (cp / d).mkdir(parents=True)
    (out / "_spark_metadata").mkdir()
    # what a driver killed while writing batch 3's offsets leaves behind, next to real entries
    (cp / "offsets" / "2").write_text("v1\n{}\n{}\n")
    (cp / "offsets" / ".3.0b2eaf28.tmp").write_text("v1\n")
    (cp / "offsets" / "..3.0b2eaf28.tmp.crc").write_bytes(b"crc")
    (cp / "commits" / "2").write_text("v1\n{}\n")
    (out / "_spark_metadata" / ".1.abc.tmp").write_text("v1\n")
    assert etl.clean_checkpoint_leftovers(str(cp), str(out)) == 3
    assert sorted(p.name for p in (cp / "offsets").iterdir()) == ["2"]
    assert [p.name for p in (cp / "commits").iterdir()] == ["2"]
    assert list((out / "_spark_metadata").iterdir()) == []
    assert etl.clean_checkpoint_leftovers(str(cp), str(out)) == 0
