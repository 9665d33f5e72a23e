"""pyspark_logsource.faults: one environment variable names the fault points; fault_point kills or pauses there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from pyspark_logsource.faults import (
    FAULT_ENV,
    PAUSE_SECONDS_ENV,
    PAUSED_MARKER,
    POINTS,
    RESUME_FILE_ENV,
    fault_point,
)


def _run(env_value: str | None, call: str, pause_seconds: str = "0.05") -> subprocess.CompletedProcess:
    """A process that calls ``call`` (fault_point(...)) and prints "passed" after it."""
    env = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, PAUSE_SECONDS_ENV)}
    if env_value is not None:
        env[FAULT_ENV] = env_value
    env[PAUSE_SECONDS_ENV] = pause_seconds
    code = f"from pyspark_logsource.faults import fault_point\n{call}\nprint('passed', flush=True)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_an_unknown_point_is_a_typed_error_even_with_the_variable_unset(monkeypatch):
    monkeypatch.delenv(FAULT_ENV, raising=False)
    with pytest.raises(ValueError, match="unknown fault point 'swapp'"):
        fault_point("swapp")


def test_every_point_is_a_no_op_unless_named(monkeypatch):
    monkeypatch.delenv(FAULT_ENV, raising=False)
    for name in POINTS:
        fault_point(name, "w1")
    monkeypatch.setenv(FAULT_ENV, "renamed, decided:other-write")
    fault_point("swap")  # another point
    fault_point("decided", "w1")  # the point, with another detail


def test_a_kill_point_kills_the_process_with_sigkill_when_named_with_or_without_its_detail():
    assert _run("swap", "fault_point('swap')").returncode == -signal.SIGKILL
    assert _run("cleaned,decided:w1", "fault_point('decided', 'w1')").returncode == -signal.SIGKILL
    assert _run("decided", "fault_point('decided', 'w1')").returncode == -signal.SIGKILL  # any detail
    r = _run("decided:w2", "fault_point('decided', 'w1')")
    assert r.returncode == 0 and r.stdout == "passed\n"
    r = _run(None, "fault_point('swap')")
    assert r.returncode == 0 and r.stdout == "passed\n"


def test_a_pause_point_announces_itself_on_stderr_then_sleeps_and_goes_on():
    r = _run("write,commit", "fault_point('commit')", pause_seconds="0.05")
    assert r.returncode == 0 and r.stdout == "passed\n"
    assert f"{PAUSED_MARKER} commit\n" in r.stderr


def test_a_pause_point_holds_the_process_until_killed():
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env.update({FAULT_ENV: "publish", PAUSE_SECONDS_ENV: "60"})
    code = "from pyspark_logsource.faults import fault_point\nfault_point('publish')\nprint('passed', flush=True)"
    p = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert p.stderr.readline() == f"{PAUSED_MARKER} publish\n"
        with pytest.raises(subprocess.TimeoutExpired):
            p.wait(0.5)  # paused
    finally:
        p.kill()
    assert p.wait(30) == -signal.SIGKILL and p.stdout.read() == ""


def test_a_pause_point_goes_on_once_its_resume_file_exists(tmp_path):
    resume = tmp_path / "resume"
    env = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, RESUME_FILE_ENV)}
    env.update({FAULT_ENV: "commit", PAUSE_SECONDS_ENV: "60", RESUME_FILE_ENV: str(resume)})
    code = (
        "from pyspark_logsource.faults import fault_point\nfault_point('commit')\nprint('passed', flush=True)"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert p.stderr.readline() == f"{PAUSED_MARKER} commit\n"
        with pytest.raises(subprocess.TimeoutExpired):
            p.wait(0.5)  # paused: the file is not there yet
        resume.touch()
        out, _ = p.communicate(timeout=10)  # far less than the pause's 60 s
        assert p.returncode == 0 and out == "passed\n"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_raise_point_raises_and_an_entry_may_name_another_action(monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "shutdown.logs")
    with pytest.raises(RuntimeError, match="fault injected at 'shutdown.logs'"):
        fault_point("shutdown.logs")
    fault_point("shutdown.cluster")  # not named
    monkeypatch.setenv(FAULT_ENV, "decided:w1@raise")  # a kill point, made to raise (so this process lives)
    with pytest.raises(RuntimeError, match="fault injected at 'decided:w1'"):
        fault_point("decided", "w1")
    monkeypatch.setenv(FAULT_ENV, "shutdown.logs@explode")
    with pytest.raises(ValueError, match="unknown fault action 'explode'"):
        fault_point("shutdown.logs")


def test_a_hang_blocks_the_calling_thread_until_the_process_is_killed():
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env[FAULT_ENV] = "shutdown.logs@hang"
    code = "from pyspark_logsource.faults import fault_point\nfault_point('shutdown.logs')\nprint('passed', flush=True)"
    p = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert "fault injection: 'shutdown.logs' hangs" in p.stderr.readline()
        with pytest.raises(subprocess.TimeoutExpired):
            p.wait(0.5)
    finally:
        p.kill()
    assert p.wait(30) == -signal.SIGKILL and p.stdout.read() == ""
