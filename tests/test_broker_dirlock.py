"""A broker's data directory is locked, and a broker always stops (issue 26).

Real ``logsource broker`` processes (the console script of this environment): a second broker on one
``log.dirs`` refuses to start with one line naming the directory, while the first keeps every acknowledged
message; ``kill -9`` leaves nothing to clean up; a shutdown step that raises or hangs still ends the process
(``LOGSOURCE_FAULT=shutdown.<step>``, the broker's fault-injection hook), and a second SIGTERM ends it at once.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.brokers import WireClient, broker_thread

from pyspark_logsource.broker.config import BrokerConfig
from pyspark_logsource.broker.log.dir_lock import LOCK_FILE, DirLock, lock_dirs
from pyspark_logsource.broker.shutdown import EXIT_SHUTDOWN_FAILED
from pyspark_logsource.errors import ConfigError, DirectoryInUse, StorageError
from pyspark_logsource.faults import FAULT_ENV
from pyspark_logsource.format import batch as fmt

pytestmark = pytest.mark.timeout(180)

_SCRIPT = Path(sys.executable).with_name("logsource")
LOGSOURCE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "pyspark_logsource.cli"]


class CliBroker:
    """``logsource broker`` on ``log.dirs=data`` and a free port, its stderr in a file."""

    def __init__(self, data: Path, *, fault: str | None = None, overrides: tuple[str, ...] = ()) -> None:
        self.data = data
        self.err_path = data.parent / f"broker-{time.monotonic_ns()}.err"
        env = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, "LOGSOURCE_PARENT_PID")}
        if fault is not None:
            env[FAULT_ENV] = fault
        cmd = [
            *LOGSOURCE,
            "broker",
            "--override",
            f"log.dirs={data}",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
        ]
        for o in overrides:
            cmd += ["--override", o]
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, env=env
            )
        self.bootstrap: str | None = None

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def wait_listening(self, timeout: float = 60.0) -> str:
        """The bootstrap once the broker printed ``listening on``; AssertionError if it exited first."""
        deadline = time.monotonic() + timeout
        line = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                assert left > 0 and sel.select(left), f"broker did not start:\n{self.stderr[-3000:]}"
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                assert chunk, f"broker exited with {self.proc.wait()}:\n{self.stderr[-3000:]}"
                line += chunk
        text = line.decode().splitlines()[0]
        assert text.startswith("listening on "), text
        self.bootstrap = text.rsplit(" ", 1)[1]
        return self.bootstrap

    def wait(self, timeout: float) -> int:
        """The exit status within ``timeout`` seconds (AssertionError, after a SIGKILL, if it did not exit)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"broker did not exit within {timeout}s:\n{self.stderr[-3000:]}") from None

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


@pytest.fixture
def brokers():
    started: list[CliBroker] = []

    def start(data: Path, **kw) -> CliBroker:
        b = CliBroker(data, **kw)
        started.append(b)
        return b

    yield start
    for b in started:
        b.close()


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """One produce request per value, each acknowledged (acks=1) before the next."""
    with WireClient(bootstrap) as c:
        for v in values:
            r = c.produce(topic, 0, fmt.encode([v]))
            assert r.error_code == 0, r


def _values(bootstrap: str, topic: str) -> list[bytes]:
    with WireClient(bootstrap) as c:
        return [r.value for r in c.fetch_all(topic, 0)]


def _last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


# ---------------------------------------------------------------- two brokers, one directory


def test_a_second_broker_on_the_same_log_dir_refuses_and_the_first_keeps_every_message(tmp_path, brokers):
    data = tmp_path / "data"
    first = brokers(data)
    bs = first.wait_listening()
    with WireClient(bs) as c:
        assert c.create_topic("t", 1) == 0
    before = [b"before-%d" % i for i in range(100)]
    _produce(bs, "t", before)

    t0 = time.monotonic()
    second = brokers(data)
    rc = second.wait(30)
    refused_in = time.monotonic() - t0
    assert rc != 0
    line = _last_line(second.stderr)
    assert line == (
        f"error: log dir {data} is in use by another broker "
        f"(pid {first.proc.pid}, {data / LOCK_FILE} is locked)"
    )
    assert "Traceback" not in second.stderr
    assert second.proc.stdout.read() == b""  # never listened
    assert refused_in < 20

    after = [b"after-%d" % i for i in range(100)]
    _produce(bs, "t", after)
    assert _values(bs, "t") == before + after

    t0 = time.monotonic()
    first.signal(signal.SIGTERM)
    assert first.wait(15) == 0
    assert time.monotonic() - t0 < 10
    assert "logs flushed and closed" in first.stderr

    again = brokers(data)
    assert _values(again.wait_listening(), "t") == before + after
    again.signal(signal.SIGTERM)
    assert again.wait(15) == 0


def test_every_log_dir_of_a_broker_is_locked(tmp_path, brokers):
    a, b = tmp_path / "a", tmp_path / "b"
    first = brokers(a, overrides=(f"log.dirs={a},{b}",))
    first.wait_listening()
    other = tmp_path / "other"
    second = brokers(other, overrides=(f"log.dirs={other},{b}",))  # shares only its second dir
    assert second.wait(30) != 0
    assert f"log dir {b} is in use by another broker" in _last_line(second.stderr)
    assert (other / LOCK_FILE).exists()  # taken, then released when b was refused
    with DirLock.acquire(other):
        pass
    first.signal(signal.SIGTERM)
    assert first.wait(15) == 0


def test_a_second_in_process_broker_on_the_same_dir_refuses(tmp_path):
    data = tmp_path / "embedded"
    with broker_thread(data) as b1:
        with pytest.raises(DirectoryInUse, match=f"log dir {data / 'logs'} is in use"):
            with broker_thread(data):
                pass
        assert b1.running
        with WireClient(b1.bootstrap) as c:
            assert c.create_topic("t", 1) == 0
    with broker_thread(data) as b3:  # released on stop
        with WireClient(b3.bootstrap) as c:
            assert c.metadata(["t"]).topics[0].error_code == 0


def test_kill_9_then_a_restart_on_the_same_dir_needs_no_manual_step(tmp_path, brokers):
    data = tmp_path / "data"
    first = brokers(data)
    bs = first.wait_listening()
    with WireClient(bs) as c:
        assert c.create_topic("t", 1) == 0
    values = [b"v-%d" % i for i in range(50)]
    _produce(bs, "t", values)
    first.signal(signal.SIGKILL)
    assert first.wait(10) == -signal.SIGKILL
    assert (data / LOCK_FILE).exists()  # the file stays; the kernel dropped the lock

    again = brokers(data)
    assert _values(again.wait_listening(), "t") == values
    again.signal(signal.SIGTERM)
    assert again.wait(15) == 0


# ---------------------------------------------------------------- the lock itself


def test_dir_lock_is_exclusive_per_open_file_and_released_on_close(tmp_path):
    d = tmp_path / "d"
    lk = DirLock.acquire(d)  # creates the directory
    assert lk.held and (d / LOCK_FILE).read_text().strip() == str(os.getpid())
    with pytest.raises(DirectoryInUse) as e:
        DirLock.acquire(d, owner="logsource etl run", kind="output directory")
    assert str(e.value) == (
        f"output directory {d} is in use by another logsource etl run "
        f"(pid {os.getpid()}, {d / LOCK_FILE} is locked)"
    )
    lk.release()
    lk.release()  # idempotent
    assert not lk.held
    with DirLock.acquire(d) as again:
        assert again.held


def test_lock_dirs_takes_all_or_none(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    held = DirLock.acquire(b)
    with pytest.raises(DirectoryInUse, match=str(b)):
        lock_dirs([a, b])
    with DirLock.acquire(a):  # a was released when b was refused
        pass
    held.release()
    locks = lock_dirs([a, b, a])  # one directory named twice is locked once
    assert [lk.directory for lk in locks] == [a, b]
    for lk in locks:
        lk.release()


def test_dir_lock_on_a_path_that_is_a_file_is_a_storage_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StorageError, match="cannot open lock file"):
        DirLock.acquire(f)


def test_shutdown_timeout_must_be_positive():
    assert BrokerConfig.from_properties({}).shutdown_timeout_ms == 30000
    with pytest.raises(ConfigError, match="logsource.shutdown.timeout.ms must be >= 1"):
        BrokerConfig.from_properties({"logsource.shutdown.timeout.ms": "0"})


# ---------------------------------------------------------------- a broker always stops


@pytest.mark.parametrize("step", ["listener", "connections", "cluster", "logs"])
def test_a_shutdown_step_that_raises_still_lets_the_broker_exit(tmp_path, brokers, step):
    data = tmp_path / "data"
    b = brokers(data, fault=f"shutdown.{step}")
    bs = b.wait_listening()
    with WireClient(bs) as c:
        assert c.create_topic("t", 1) == 0
        values = [b"v-%d" % i for i in range(20)]
        for v in values:
            assert c.produce("t", 0, fmt.encode([v])).error_code == 0
        t0 = time.monotonic()
        b.signal(signal.SIGTERM)  # with this connection still open
        assert b.wait(15) == EXIT_SHUTDOWN_FAILED
    assert time.monotonic() - t0 < 10
    err = b.stderr
    assert f"shutdown step {step!r} failed (RuntimeError: fault injected" in err
    assert "shut down with 1 error(s)" in err
    if step != "logs":  # the steps after the failed one ran
        assert "logs flushed and closed" in err
    again = brokers(data)
    assert _values(again.wait_listening(), "t") == values
    again.signal(signal.SIGTERM)
    assert again.wait(15) == 0


def test_a_second_sigterm_forces_the_exit_of_a_stuck_shutdown(tmp_path, brokers):
    data = tmp_path / "data"
    b = brokers(data, fault="shutdown.logs@hang")  # the default 30 s deadline: only the second signal ends it
    b.wait_listening()
    b.signal(signal.SIGTERM)
    time.sleep(1.5)
    assert b.proc.poll() is None, "the injected hang did not hold the shutdown"
    t0 = time.monotonic()
    b.signal(signal.SIGTERM)
    assert b.wait(10) == 128 + signal.SIGTERM
    assert time.monotonic() - t0 < 5
    assert "second SIGTERM during shutdown (still flushing and closing the logs)" in b.stderr
    again = brokers(data)  # the kernel released the lock of the forced exit
    again.wait_listening()
    again.signal(signal.SIGINT)
    assert again.wait(15) == 0


def test_a_shutdown_that_cannot_finish_exits_after_its_timeout(tmp_path, brokers):
    b = brokers(
        tmp_path / "data", fault="shutdown.logs@hang", overrides=("logsource.shutdown.timeout.ms=1500",)
    )
    b.wait_listening()
    t0 = time.monotonic()
    b.signal(signal.SIGTERM)
    assert b.wait(15) == EXIT_SHUTDOWN_FAILED
    took = time.monotonic() - t0
    assert 1.4 < took < 10, took
    err = b.stderr
    assert (
        "shutdown did not finish within 1.5 s (logsource.shutdown.timeout.ms); still flushing and closing the logs"
        in err
    )
    assert "in fault_point" in err  # where the event loop thread was stuck
