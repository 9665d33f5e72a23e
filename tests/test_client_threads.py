"""The clients' background threads leave SIGINT and SIGTERM to the main thread (client/threads.py).

Read from the kernel (``/proc/self/task/<tid>/status``, the SigBlk mask): every thread a Producer and
a group Consumer start blocks both, the main thread neither. And the user-visible result: ``logsource
produce`` blocked on an open standard input ends on Ctrl-C with its count, every time.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.interactive import as_from_a_terminal

from pyspark_logsource.client import Admin, Consumer, Producer

LOGSOURCE = str(Path(sys.executable).parent / "logsource")


def _blocked(native_id: int) -> int:
    for line in Path(f"/proc/self/task/{native_id}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigBlk line")


def _bit(sig: signal.Signals) -> int:
    return 1 << (int(sig) - 1)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
def test_client_threads_block_sigint_and_sigterm_and_the_main_thread_does_not(broker, topic_name):
    bs, topic = broker.bootstrap, topic_name("sigmask")
    with Admin(bs) as a:
        a.create_topic(topic, partitions=1)
    with Producer(bs) as p, Consumer(bs, group_id=f"g-{topic}", auto_offset_reset="earliest") as c:
        p.send(topic, b"x").result(10)
        c.subscribe([topic])
        got = []
        for _ in range(100):
            got.extend(c.poll(0.1))
            if got:
                break
        assert got
        ours = [t for t in threading.enumerate() if t.name.startswith("logsource-")]
        names = {t.name.split("-1")[0] for t in ours}
        assert {"logsource-producer-sender", "logsource-consumer-fetcher", "logsource-heartbeat"} <= names
        assert any(t.name.startswith("logsource-io-") for t in ours)
        for t in ours:
            mask = _blocked(t.native_id)
            assert mask & _bit(signal.SIGINT) and mask & _bit(signal.SIGTERM), t.name
        main = _blocked(threading.main_thread().native_id)
        assert not main & _bit(signal.SIGINT) and not main & _bit(signal.SIGTERM)


def test_produce_waiting_on_an_open_stdin_ends_on_ctrl_c(broker, topic_name):
    bs, topic = broker.bootstrap, topic_name("ctrlc")
    with Admin(bs) as a:
        a.create_topic(topic, partitions=1)
    for k in range(3):
        p = subprocess.Popen(
            as_from_a_terminal([LOGSOURCE, "produce", topic, "-b", bs]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        p.stdin.write(b"a\nb\n")
        p.stdin.flush()
        with Admin(bs) as a:  # both lines are in: the command waits on its (open) standard input
            deadline = time.monotonic() + 30
            while a.list_offsets([(topic, 0)], "latest")[(topic, 0)] < 2 * (k + 1):
                assert time.monotonic() < deadline and p.poll() is None
                time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        try:
            rc = p.wait(timeout=20)  # stdin stays open: only the signal can end it
        finally:
            p.stdin.close()
        assert rc == 130, p.stderr.read().decode()
        assert "Produced 2 message(s)" in p.stderr.read().decode()
