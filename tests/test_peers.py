"""The real peers' plumbing fails clearly: a Maven download that fails names the artifact and what to do;
an Apache Kafka that does not start fails within its timeout with its last log lines (no hang)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
from support.kafka_peer import KafkaServer, KafkaStartError, free_port, peers, random_cluster_id

ROOT = peers().ROOT


def test_a_failed_download_names_the_artifact_and_what_to_do(tmp_path):
    code = (
        "import sys; sys.path.insert(0, 'scripts'); import peers\n"
        "peers.CACHE = __import__('pathlib').Path(sys.argv[1])\n"
        "p = peers.Peer('nope', '0.0.0-none', ('org.apache.kafka:no-such-artifact',), 'a test artifact')\n"
        "peers.fetch(p, peers.ensure_maven())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "peers: could not download org.apache.kafka:no-such-artifact:0.0.0-none (a test artifact)"
    )
    assert "run 'make peers' again" in last
    assert list(tmp_path.iterdir()) == []  # nothing half-fetched is left to look complete


def test_peers_are_fetched_once():
    """Once fetched (make test's make peers did), a fetch is a no-op: no Maven, nothing printed."""
    cmd = [sys.executable, "scripts/peers.py", "fetch"]
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    t0 = time.monotonic()
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert time.monotonic() - t0 < 5


@pytest.mark.real_kafka
def test_kafka_that_exits_fails_with_its_log(tmp_path):
    server = KafkaServer(tmp_path, start_timeout=90)
    with socket.socket() as taken:  # its listener's port is taken: Kafka exits at startup
        taken.bind(("127.0.0.1", server.port))
        taken.listen()
        with pytest.raises(KafkaStartError, match=r"(?s)Apache Kafka exited \d+:.*Address already in use"):
            server.start()


@pytest.mark.real_kafka
def test_kafka_that_does_not_start_in_time_fails_with_its_last_log_lines(tmp_path):
    # A second controller voter nobody runs: no quorum, so the broker never finishes starting, however
    # fast the machine (a plain 2 s deadline was met once, on a quiet machine)
    server = KafkaServer(tmp_path, start_timeout=3.0)
    server.overrides["controller.quorum.voters"] = (
        f"1@127.0.0.1:{server.controller_port},2@127.0.0.1:{free_port()}"
    )
    t0 = time.monotonic()
    with pytest.raises(KafkaStartError, match=r"did not start within 3 s; its last log lines:\n") as e:
        server.start()
    assert time.monotonic() - t0 < 30
    assert server.proc is not None and server.proc.poll() is not None  # stopped, not left running
    assert str(e.value).rstrip().splitlines()[-1] != "its last log lines:"


def test_cluster_ids_never_start_with_a_dash_as_in_kafka():
    # kafka-storage format -t -xyz... fails ("expected one argument"): a plain urlsafe base64 of a random
    # UUID starts with '-' one time in 64, so 2,000 draws would meet ~31 of them
    ids = [random_cluster_id() for _ in range(2000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)
