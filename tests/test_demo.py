"""The demo: the event generator, the Java check, and `logsource demo` end to end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pyspark_logsource.demo.events import EVENT_SCHEMA, EventGenerator, generate, live_chunk
from pyspark_logsource.demo.run import Summary, parse_args
from pyspark_logsource.demo.spark import JavaMissing, check_java, read_properties

ROOT = Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# -- the event generator -------------------------------------------------------------


def test_events_schema_json_and_keys():
    t = generate(5_000, seed=1, start_ms=1_700_000_000_000, window_ms=600_000)
    assert t.schema == EVENT_SCHEMA
    assert t.num_rows == 5_000
    values = [json.loads(v) for v in t.column("value").to_pylist()]
    assert {v["event"] for v in values} == {"page_view"}
    assert set(values[0]) == {
        "event",
        "user_id",
        "page",
        "referrer",
        "user_agent",
        "country",
        "duration_ms",
        "ts",
    }
    # the key is the user id, and the JSON's ts is the record timestamp
    assert [v["user_id"].encode() for v in values] == t.column("key").to_pylist()
    assert [v["ts"] for v in values] == t.column("timestamp").cast(pa.int64()).to_pylist()


def test_events_timestamps_in_window_and_ordered_across_chunks():
    gen = EventGenerator(seed=3, start_ms=1_700_000_000_000, window_ms=3_600_000)
    ts = np.concatenate(
        [c.column("timestamp").cast(pa.int64()).to_numpy() for c in gen.chunks(200_000, 30_000)]
    )
    assert len(ts) == 200_000
    assert ts.min() >= 1_700_000_000_000 and ts.max() < 1_700_000_000_000 + 3_600_000
    assert (np.diff(ts) >= 0).all()
    # traffic has a shape: the busiest minute sees well over the quietest one
    per_minute = np.bincount((ts - ts.min()) // 60_000)
    assert per_minute[1:-1].max() > 1.5 * per_minute[1:-1].min()


def test_events_are_skewed_and_deterministic():
    a = generate(50_000, seed=7, start_ms=0)
    b = generate(50_000, seed=7, start_ms=0)
    assert a.equals(b)
    assert not a.equals(generate(50_000, seed=8, start_ms=0))
    users = np.sort(pc.value_counts(a.column("key").combine_chunks()).field("counts").to_numpy())[::-1]
    # Zipf-like: the top 1% of users make a far larger share than 1% of the views
    top = users[: max(1, len(users) // 100)].sum()
    assert top / users.sum() > 0.10
    pages = Counter(json.loads(v)["page"] for v in a.column("value").to_pylist())
    counts = np.sort(np.array(list(pages.values())))[::-1]
    assert counts[0] > 10 * np.median(counts)


def test_live_chunk_timestamps_are_now():
    gen = EventGenerator(seed=1)
    t = live_chunk(gen, 1000, now_ms=2_000_000_000_000, spread_ms=500)
    ts = t.column("timestamp").cast(pa.int64()).to_numpy()
    assert t.num_rows == 1000 and ts.max() <= 2_000_000_000_000 and ts.min() > 2_000_000_000_000 - 500
    assert (np.diff(ts) >= 0).all()


def test_generator_rejects_bad_sizes():
    with pytest.raises(ValueError):
        EventGenerator(users=0)
    with pytest.raises(ValueError):
        list(EventGenerator().chunks(10, chunk_size=0))
    with pytest.raises(ValueError):
        EventGenerator().chunk(3, timestamps=np.array([1, 2]))


# -- command line, conf, Java check -----------------------------------------------------


def test_parse_args_defaults_and_errors(capsys, tmp_path):
    a = parse_args([])
    assert a.events == 1_000_000 and a.topic == "page_views"
    with pytest.raises(SystemExit) as e:
        parse_args(["--events", "0"])
    assert e.value.code == 2
    assert "--events must be >= 1" in capsys.readouterr().err
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "x").write_text("left by an earlier run")
    with pytest.raises(SystemExit):
        parse_args(["--data-dir", str(tmp_path / "old")])
    assert "is not empty" in capsys.readouterr().err
    assert parse_args(["--data-dir", str(tmp_path / "new")]).data_dir == tmp_path / "new"


def test_summary_table_renders_every_row():
    s = Summary()
    s.add("produce", "1,000 events", 0.5)
    s.add("picture", "/tmp/x.png")
    lines = s.render().splitlines()
    assert len(lines) == 6 and all(len(ln) == len(lines[0]) for ln in lines)
    assert "produce" in lines[3] and "0.50" in lines[3] and "/tmp/x.png" in lines[4]


def test_conf_files_are_read():
    props = read_properties(ROOT / "conf" / "spark-defaults.conf")
    assert props["spark.sql.session.timeZone"] == "UTC"
    assert props["spark.ui.enabled"] == "false"
    log4j = (ROOT / "conf" / "log4j2.properties").read_text()
    assert re.search(r"^rootLogger\.level\s*=\s*error", log4j, re.M)


def test_java_check_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(JavaMissing, match="Java runtime, version 17"):
        check_java()
    old = tmp_path / "java"
    old.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    old.chmod(0o755)
    with pytest.raises(JavaMissing, match="found Java 11"):
        check_java()


def test_demo_without_java_exits_nonzero_with_help(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java anywhere
    p = subprocess.run(
        [sys.executable, "-m", "pyspark_logsource.demo", "--events", "10"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert p.returncode == 2
    assert "Java runtime, version 17 or newer" in p.stderr
    assert "apt-get install openjdk-17-jre-headless" in p.stderr


# -- end to end ------------------------------------------------------------------------


@pytest.mark.spark
def test_demo_end_to_end(tmp_path):
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "pyspark_logsource.demo",
        "--events",
        "30000",
        "--partitions",
        "3",
        "--stream-seconds",
        "3",
        "--stream-rate",
        "3000",
        "--output-dir",
        str(out),
        "--data-dir",
        str(tmp_path / "data"),
        "--no-progress",
    ]
    from support.spark_jvm import examples_conf_dir

    # conf/ plus the test drivers' JVM options (C1 only, the serial GC: tests/support/spark_jvm.py)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONF_DIR"}
    env["LOGSOURCE_CONF_DIR"] = str(examples_conf_dir(tmp_path / "conf"))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=540, cwd=tmp_path, env=env)
    assert p.returncode == 0, f"stdout:\n{p.stdout[-4000:]}\nstderr:\n{p.stderr[-4000:]}"
    o = p.stdout
    assert "demo finished OK" in o
    assert re.search(r"produced 30,000 events in [\d.]+ s", o)
    # the summary table: one row per step, the second ETL run loaded nothing
    for step in (
        "produce",
        "ETL run 1",
        "ETL run 2",
        "ETL --verify",
        "batch query",
        "pushdown",
        "streaming",
        "picture",
    ):
        assert re.search(rf"^\| {re.escape(step)}\s+\|", o, re.M), step
    assert re.search(r"^\| ETL run 1\s+\| committed load \d+: 30,000 rows", o, re.M)
    assert re.search(r"^\| ETL run 2\s+\| nothing new: 0 rows", o, re.M)
    assert "verify: OK" in o
    m = re.search(r"^picture: (.+\.png)$", o, re.M)
    assert m, o[-2000:]
    png = Path(m.group(1))
    assert png == (out / "demo.png").resolve()
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    import matplotlib.image

    img = matplotlib.image.imread(png)
    assert img.shape[0] > 500 and img.shape[1] > 800
    # Spark's console stays quiet: no INFO/WARN log lines from the JVM
    assert not re.search(r"^\S+ (INFO|WARN) ", p.stderr, re.M), p.stderr[-3000:]
