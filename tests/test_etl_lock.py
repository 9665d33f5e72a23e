"""Two ETL runs on one local output directory (or streaming checkpoint): the second is refused (issue 26).

``logsource etl`` locks ``<dir>/.lock`` (pyspark_logsource/etl/lock.py) before Spark starts. Local
directories only: a Hadoop URI (hdfs://, s3a://) has no lock to take, and an Iceberg table is guarded
by its catalog's commit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyspark_logsource.broker.log.dir_lock import LOCK_FILE, DirLock
from pyspark_logsource.errors import DirectoryInUse
from pyspark_logsource.etl import parse_args
from pyspark_logsource.etl.lock import OWNER, dirs_to_lock, local_dir, run_lock
from pyspark_logsource.faults import FAULT_ENV as PAUSE_ENV
from pyspark_logsource.faults import PAUSE_SECONDS_ENV, PAUSED_MARKER, RESUME_FILE_ENV

pytestmark = pytest.mark.timeout(240)

ETL = [sys.executable, "-m", "pyspark_logsource.jobs.etl"]


def test_local_dir_of_paths_and_uris(tmp_path):
    assert local_dir(str(tmp_path)) == tmp_path
    assert local_dir(f"file://{tmp_path}") == tmp_path
    assert local_dir("relative/out") == Path("relative/out")
    for uri in ("hdfs://nn:8020/out", "s3a://bucket/out", "abfs://c@a.dfs.core.windows.net/out"):
        assert local_dir(uri) is None


def test_which_directories_a_run_locks(tmp_path):
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    load = ["--bootstrap-servers", "127.0.0.1:1", "--subscribe", "t"]
    assert dirs_to_lock(parse_args(["--output", str(out), *load])) == [("output directory", out)]
    streaming = parse_args(["--output", str(out), "--streaming", "--checkpoint", f"file://{ckpt}", *load])
    assert dirs_to_lock(streaming) == [("output directory", out), ("checkpoint", ckpt)]
    assert dirs_to_lock(parse_args(["--output", "hdfs://nn:8020/out", *load])) == []  # no lock there
    # a read-only action on a directory that does not exist locks (and creates) nothing
    assert dirs_to_lock(parse_args(["--output", str(out), "--status"])) == []
    out.mkdir()
    assert dirs_to_lock(parse_args(["--output", str(out), "--status"])) == [("output directory", out)]


def test_run_lock_refuses_a_second_run_and_releases_on_exit(tmp_path):
    cfg = parse_args(
        ["--output", str(tmp_path / "out"), "--bootstrap-servers", "127.0.0.1:1", "--subscribe", "t"]
    )
    with run_lock(cfg) as locks:
        assert [lk.directory for lk in locks] == [tmp_path / "out"]
        with pytest.raises(
            DirectoryInUse, match=f"output directory {tmp_path / 'out'} is in use by another {OWNER}"
        ):
            with run_lock(cfg):
                pass
    with run_lock(cfg):  # released
        pass


def test_the_etl_command_refuses_an_output_another_run_holds(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    holder = DirLock.acquire(out, OWNER, "output directory")  # what a running load holds
    try:
        t0 = time.monotonic()
        p = subprocess.run(
            [*ETL, "--output", str(out), "--status"], capture_output=True, text=True, timeout=120
        )
        assert p.returncode == 2
        assert p.stderr.strip() == (
            f"etl: DirectoryInUse: output directory {out} is in use by another {OWNER} "
            f"(pid {os.getpid()}, {out / LOCK_FILE} is locked)"
        )
        assert time.monotonic() - t0 < 60  # refused before any Spark or recovery work
    finally:
        holder.release()
    p = subprocess.run([*ETL, "--output", str(out), "--status"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


@pytest.mark.spark
@pytest.mark.slow
def test_a_second_load_while_the_first_is_committing_is_refused(tmp_path):
    """Two real loads: the first paused at its commit point (the ETL's pause fault point), the second refused
    at once; the first then commits every message, once."""
    from support import spark_jvm

    from pyspark_logsource import EmbeddedBroker
    from pyspark_logsource.client import Admin, Producer
    from pyspark_logsource.offsets import OffsetStore

    env = {k: v for k, v in os.environ.items() if k != PAUSE_ENV}
    env.update(PYSPARK_PYTHON=sys.executable, PYTHONUNBUFFERED="1")
    env.setdefault("PYSPARK_SUBMIT_ARGS", spark_jvm.submit_args("spark.ui.enabled=false"))
    with EmbeddedBroker(tmp_path / "broker", mode="process") as b:
        with Admin(b.bootstrap) as admin:
            admin.create_topic("t", partitions=1)
        with Producer(b.bootstrap) as prod:
            for i in range(100):
                prod.send("t", b"m-%d" % i)
            prod.flush()
        out = tmp_path / "out"
        argv = [
            *ETL,
            "--bootstrap-servers",
            b.bootstrap,
            "--subscribe",
            "t",
            "--output",
            str(out),
            "--master",
            "local[1]",
            "--no-progress",
        ]
        # paused until the second load was refused (the resume file), not for a fixed time it then waited out
        resume = tmp_path / "resume"
        first_env = dict(env, **{PAUSE_ENV: "commit", PAUSE_SECONDS_ENV: "120", RESUME_FILE_ENV: str(resume)})
        first = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=first_env
        )
        try:
            lines = []
            for line in first.stdout:
                lines.append(line)
                if f"{PAUSED_MARKER} commit" in line:
                    break
            else:
                raise AssertionError("".join(lines[-40:]))
            second = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
            assert second.returncode == 2, second.stdout + second.stderr
            assert (
                f"etl: DirectoryInUse: output directory {out} is in use by another {OWNER} (pid {first.pid},"
                in second.stderr
            )
            assert first.poll() is None  # still paused at its commit point while the second was refused
            resume.touch()
            rest = first.communicate(timeout=180)[0]
            assert first.returncode == 0, "".join(lines) + rest
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        assert OffsetStore(str(out)).committed_offsets() == {("t", 0): 100}
