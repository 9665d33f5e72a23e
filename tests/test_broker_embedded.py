"""EmbeddedBroker: thread and process modes, temporary dirs, restarts, failures, orphan handling."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from support.brokers import WireClient

from pyspark_logsource.broker.embedded import EmbeddedBroker
from pyspark_logsource.errors import ConfigError, NetworkError
from pyspark_logsource.format import batch as fmt


def test_temporary_data_dir_is_removed_and_bootstrap_needs_a_running_broker():
    with EmbeddedBroker() as b:
        data_dir = b.data_dir
        assert data_dir.exists() and b.bootstrap.startswith("127.0.0.1:")
        with WireClient(b.bootstrap) as c:
            assert c.create_topic("t", 2, {"retention.ms": "60000"}) == 0
        assert (data_dir / "logs" / "t-0").is_dir()
    assert not data_dir.exists()
    with pytest.raises(NetworkError, match="not running"):
        _ = b.bootstrap


def test_given_data_dir_is_kept_and_config_applies(tmp_path):
    with EmbeddedBroker(tmp_path, config={"num.partitions": 4, "auto.create.topics.enable": "true"}) as b:
        with WireClient(b.bootstrap) as c:
            assert len(c.metadata(["auto"], auto_create=True).topics[0].partitions) == 4
    assert (tmp_path / "logs" / "auto-3").is_dir()


def test_bad_mode_and_bad_config():
    with pytest.raises(ConfigError):
        EmbeddedBroker(mode="fiber")
    with pytest.raises(ConfigError, match="num.partitions"):
        EmbeddedBroker(config={"num.partitions": "zero"}).start()


def test_port_in_use_fails_start_in_both_modes(tmp_path):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    try:
        with pytest.raises(OSError):
            EmbeddedBroker(tmp_path / "a", port=port).start()
        with pytest.raises(NetworkError, match="exited with status"):
            EmbeddedBroker(tmp_path / "b", port=port, mode="process").start()
    finally:
        blocker.close()


def test_process_mode_restart_keeps_port_and_data(tmp_path):
    with EmbeddedBroker(tmp_path, mode="process") as b:
        port, pid = b.port, b.pid
        with WireClient(b.bootstrap) as c:
            c.create_topic("keep", 1)
            c.produce("keep", 0, fmt.encode([b"one", b"two"]))
        b.restart()
        assert b.port == port and b.pid != pid
        with WireClient(b.bootstrap) as c:
            assert [r.value for r in c.fetch_all("keep", 0)] == [b"one", b"two"]
        b.kill()
        assert not b.running
    assert "logs flushed and closed" in (tmp_path / "broker.log").read_text()


def test_process_broker_stops_when_its_parent_dies(tmp_path):
    script = textwrap.dedent(f"""
        import sys, time
        from pyspark_logsource.broker.embedded import EmbeddedBroker
        b = EmbeddedBroker({str(tmp_path)!r}, mode="process").start()
        print(b.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            os.kill(child, signal.SIGKILL)
            pytest.fail("orphaned broker kept running")
        assert "parent process" in (tmp_path / "broker.log").read_text()
    finally:
        parent.kill()


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_forgotten_broker_is_shut_down_cleanly_at_exit(tmp_path, mode):
    script = textwrap.dedent(f"""
        from pyspark_logsource.broker.embedded import EmbeddedBroker
        EmbeddedBroker({str(tmp_path)!r}, mode={mode!r}).start()  # never closed
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, capture_output=True)
    deadline = time.monotonic() + 20
    marker = tmp_path / "logs" / "__consumer_offsets-0" / ".clean_shutdown"
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists()
