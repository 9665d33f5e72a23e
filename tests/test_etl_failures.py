"""kill -9 the ETL driver while a producer keeps filling the topic; the output ends exactly-once.

Real processes: an embedded broker, a producer process (tests/helpers/etl_fill_topic.py) and
the job as `python -m pyspark_logsource.jobs.etl` (its own SparkSession, local[1]), killed with
SIGKILL (its whole process group: the Python driver and its JVM) at random moments and at named
points of the commit protocol (LOGSOURCE_ETL_PAUSE_AT). After a final clean run the output must
hold every message exactly once: per partition, the offsets are exactly [0, log end).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from pyspark_logsource.offsets import OffsetStore

pytestmark = [pytest.mark.slow, pytest.mark.spark]

HELPERS = Path(__file__).parent / "helpers"
ETL = [sys.executable, "-m", "pyspark_logsource.jobs.etl"]
PARTITIONS = 3


class Job:
    """The ETL job as a child process in its own process group, output collected in a thread."""

    def __init__(self, argv: list[str], pause_at: str | None = None) -> None:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONUNBUFFERED="1")
        env.pop("LOGSOURCE_ETL_PAUSE_AT", None)
        if pause_at:
            env["LOGSOURCE_ETL_PAUSE_AT"] = pause_at
            env["LOGSOURCE_ETL_PAUSE_SECONDS"] = "120"
        self.proc = subprocess.Popen(
            ETL + argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env
        )
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._pump, daemon=True)
        self._t.start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, needle: str, timeout: float = 180) -> bool:
        """True once a line contains needle; False if the process ended first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(needle in line for line in self.lines):
                return True
            if self.proc.poll() is not None:
                self._t.join(5)
                return any(needle in line for line in self.lines)
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {needle!r}; output:\n" + "\n".join(self.lines[-40:]))

    def kill9(self) -> bool:
        """SIGKILL the driver and its JVM; True if it was still running."""
        alive = self.proc.poll() is None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)
        self._t.join(5)
        return alive

    def finish(self, timeout: float = 300) -> int:
        rc = self.proc.wait(timeout)
        self._t.join(5)
        return rc

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def broker(tmp_path):
    from pyspark_logsource import EmbeddedBroker

    # its own process: the broker is a real process too, apart from pytest and the jobs
    with EmbeddedBroker(tmp_path / "broker", mode="process") as b:
        yield b


def create_topic(bootstrap: str, topic: str) -> None:
    from pyspark_logsource.client import Admin

    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=PARTITIONS)


def log_end(bootstrap: str, topic: str) -> dict[tuple[str, int], int]:
    from pyspark_logsource.client import Admin

    with Admin(bootstrap) as admin:
        return admin.list_offsets([(topic, p) for p in range(PARTITIONS)], "latest")


def start_producer(bootstrap: str, topic: str, rate: int = 400) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(HELPERS / "etl_fill_topic.py"), bootstrap, topic, "--rate", str(rate)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def stop_producer(p: subprocess.Popen) -> None:
    """Stop the producer; what it wrote is measured at the broker (log end), not from its output."""
    p.send_signal(signal.SIGTERM)
    try:
        p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate(timeout=30)


def visible_offsets(out: Path) -> dict[int, list[int]]:
    """(partition -> sorted offsets) as a plain pyarrow dataset reader sees the output."""
    if not out.exists() or not any(p for p in out.iterdir() if not p.name.startswith(("_", "."))):
        return {}
    t = pads.dataset(str(out), format="parquet", partitioning="hive").to_table(columns=["partition", "offset"])
    res: dict[int, list[int]] = {}
    for p, o in zip(t.column("partition").to_pylist(), t.column("offset").to_pylist(), strict=True):
        res.setdefault(p, []).append(o)
    return {p: sorted(v) for p, v in res.items()}


def assert_exactly_committed(out: Path) -> dict[tuple[str, int], int]:
    """The visible rows are exactly [0, committed) per partition: no duplicate, no gap, nothing extra."""
    committed = OffsetStore(str(out)).committed_offsets()
    seen = visible_offsets(out)
    for (_t, p), end in committed.items():
        assert seen.get(p, []) == list(range(end)), f"partition {p}: committed {end}, visible {len(seen.get(p, []))}"
    assert set(seen) <= {p for (_t, p) in committed}
    return committed


@pytest.mark.timeout(2400)  # 11+ cold Spark driver starts; about a minute each on a busy 2-core machine
def test_kill_9_batch_job_at_random_moments_and_commit_points(broker, tmp_path, spark):
    topic = "etlkill"
    create_topic(broker.bootstrap, topic)
    out = tmp_path / "out"
    argv = ["--bootstrap-servers", broker.bootstrap, "--subscribe", topic, "--output", str(out),
            "--master", "local[1]", "--no-progress", "--max-offsets-per-load", "3000"]  # fmt: skip
    producer = start_producer(broker.bootstrap, topic)
    rng = random.Random(4)
    # where each attempt dies: during the write (random delay after the load starts) or paused at a
    # named point: after the staging write, before the manifest put, between put and renames, mid-renames
    schedule = ["random"] * 3 + ["after_write"] * 2 + ["commit"] * 2 + ["publish"] * 2 + ["publish_mid"] * 2
    rng.shuffle(schedule)
    schedule += ["random"] * 3  # spares, used only if a random kill came after its job had finished
    kills: dict[str, int] = {}
    clean = 0
    try:
        for where in schedule:
            if sum(kills.values()) >= 11:
                break
            job = Job(argv, pause_at=None if where == "random" else where)
            if where == "random":
                if job.wait_for("loading ") and job.proc.poll() is None:
                    time.sleep(rng.uniform(0.2, 2.0))
            else:
                job.wait_for("LOGSOURCE_ETL_PAUSED_AT " + where)
            if job.kill9():
                kills[where] = kills.get(where, 0) + 1
                print(f"killed at {where}: {kills}", file=sys.stderr, flush=True)
            else:
                assert job.proc.returncode == 0, job.output
                clean += 1
            # after every kill: the published tree holds exactly the committed loads (after the
            # roll-forward that --status performs, which needs no Spark)
            st = subprocess.run(ETL + ["--status", "--output", str(out)], capture_output=True, text=True, timeout=60)
            assert st.returncode == 0, st.stderr
            assert_exactly_committed(out)
        assert sum(kills.values()) >= 10, kills
        assert kills.get("commit", 0) + kills.get("publish", 0) + kills.get("publish_mid", 0) >= 5
    finally:
        stop_producer(producer)
    # the final clean run (unbounded) loads everything up to the log end
    job = Job([a for a in argv if a not in ("--max-offsets-per-load", "3000")])
    assert job.finish() == 0, job.output
    ends = log_end(broker.bootstrap, topic)
    committed = assert_exactly_committed(out)
    assert committed == ends and sum(ends.values()) > 3000
    # a run with no new data commits nothing and says so
    job = Job(argv)
    assert job.finish() == 0 and "committed nothing" in job.output, job.output
    from pyspark_logsource import etl

    rep = etl.verify(spark, str(out), log=lambda s: None)
    assert rep.ok, rep.problems
    assert sum(r["rows"] for r in rep.rows) == sum(ends.values())
    # no staging leftovers
    assert not (out / "_staging").exists() or list((out / "_staging").iterdir()) == []


@pytest.mark.timeout(2400)
def test_kill_9_streaming_job_restarts_from_checkpoint(broker, tmp_path, spark):
    topic = "etlstream"
    create_topic(broker.bootstrap, topic)
    out = tmp_path / "out"
    base = ["--bootstrap-servers", broker.bootstrap, "--subscribe", topic, "--output", str(out),
            "--master", "local[1]", "--no-progress", "--streaming"]  # fmt: skip
    producer = start_producer(broker.bootstrap, topic)
    rng = random.Random(7)
    kills = 0
    try:
        while kills < 10:
            job = Job(base + ["--trigger", "1 second", "--max-offsets-per-load", "800"])
            job.wait_for("streaming query")
            time.sleep(rng.uniform(0.5, 4.0))
            assert job.kill9(), job.output
            kills += 1
    finally:
        stop_producer(producer)
    job = Job(base + ["--trigger", "availableNow"])
    assert job.finish() == 0, job.output
    ends = log_end(broker.bootstrap, topic)
    from pyspark_logsource import etl

    rep = etl.verify_streaming(spark, str(out), log=lambda s: None)
    assert rep.ok, rep.problems
    rows = spark.read.parquet(str(out)).select("partition", "offset").collect()
    seen: dict[int, list[int]] = {}
    for r in rows:
        seen.setdefault(r.partition, []).append(r.offset)
    for (_t, p), end in ends.items():
        assert sorted(seen.get(p, [])) == list(range(end)), f"partition {p}"
    assert sum(ends.values()) > 0
    # the job's own --verify agrees
    v = subprocess.run(ETL + ["--verify", "--streaming", "--output", str(out), "--master", "local[1]"],
                       capture_output=True, text=True, timeout=180)  # fmt: skip
    assert v.returncode == 0, v.stdout + v.stderr
