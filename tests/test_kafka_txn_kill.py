"""Kafka's consume-transform-produce loop (confluent-kafka, ``send_offsets_to_transaction``) killed -9 again and
again while a producer feeds its input (issue 21's Must show).

The worker (tests/helpers/ctp_worker.py) reads the input in a group and writes each record, tagged with its
input partition and offset, to the output in a transaction that also commits its input positions. Each run is
killed -9 after its first commit and a new one starts: every other kill at a random moment of the loop,
the others at a random moment within a transaction (after its records are produced). Between runs the group's committed
offsets are checked against the committed output (every input below a committed offset is in the
``read_committed`` output: offsets never run ahead of the output); at the end the output holds every input
record exactly once. (A transaction left open past its timeout is aborted and stops pinning the last stable
offset: tests/test_kafka_txn.py.)
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.brokers import WireClient, broker_process

ck = pytest.importorskip("confluent_kafka")

HELPERS = Path(__file__).parent / "helpers"
PARTITIONS = 2

pytestmark = [
    pytest.mark.kafka_clients,
    pytest.mark.eos_kill,
    pytest.mark.kill9,
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]


def _committed_offsets(bs: str, group: str, topic: str) -> dict[int, int]:
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([ck.TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: max(tp.offset, 0) for tp in tps}  # -1001: nothing committed yet
    finally:
        c.close()


def _output(bs: str, topic: str, need: set[tuple[int, int]], *, wait_s: float, settle_s: float) -> Counter:
    """(input partition, input offset) of every committed output record, read until ``need`` is covered or
    ``wait_s`` passed, then ``settle_s`` more (anything beyond must not be there either)."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"check-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    got: Counter = Counter()
    try:
        c.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        end = time.monotonic() + wait_s
        settle_end = None
        while True:
            now = time.monotonic()
            if settle_end is None and (need <= set(got) or now > end):
                settle_end = now + settle_s
            if settle_end is not None and now > settle_end:
                return got
            for m in c.consume(500, 0.2):
                if not m.error():
                    p, o, _ = m.value().split(b":", 2)
                    assert int(p) == m.partition()
                    got[(int(p), int(o))] += 1
    finally:
        c.close()


def _spawn(bs: str, args: list[str]) -> Any:
    return subprocess.Popen(
        [sys.executable, str(HELPERS / "ctp_worker.py"), bs, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


# ~60-80 s on an idle 2-core machine: 10 worker starts (an interpreter, init_transactions fencing the last
# one, a static rejoin) plus the checks
def test_consume_transform_produce_killed_9_ten_times_writes_each_input_once(tmp_path):
    rng = random.Random(21)
    src, dst, group, txn_id = "ctp_in", "ctp_out", "ctp", "ctp-worker"
    with broker_process(tmp_path / "broker") as b:
        bs = b.bootstrap
        with WireClient(bs) as w:
            assert w.create_topic(src, PARTITIONS) == 0
            assert w.create_topic(dst, PARTITIONS) == 0
        stop = threading.Event()
        sent: list[tuple[int, int]] = []

        def feed() -> None:
            p = ck.Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 2})

            def ack(err: Any, m: Any) -> None:
                assert err is None, err
                sent.append((m.partition(), m.offset()))

            n = 0
            while not stop.is_set():
                for v in range(n, n + 10):
                    p.produce(src, value=str(v).encode(), partition=v % PARTITIONS, on_delivery=ack)
                n += 10
                p.flush(30)
                time.sleep(0.05)  # ~150 inputs a second
            p.flush(30)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        kills, checks, ahead = 0, 0, []
        try:
            for _ in range(10):
                proc = _spawn(bs, [src, dst, group, txn_id])
                line = proc.stdout.readline().strip()
                assert line == b"STARTED", proc.stderr.read().decode()[-2000:]
                while not line.startswith(b"COMMITTED"):  # this run committed once: its loop is under way
                    line = proc.stdout.readline().strip()
                    assert line, proc.stderr.read().decode()[-2000:]
                if kills % 2:  # at a random moment of the loop (mostly waiting for input)
                    time.sleep(rng.uniform(0.0, 1.5))
                else:  # within a transaction: producing, sending the offsets or committing
                    while line != b"IN_TXN":
                        line = proc.stdout.readline().strip()
                        assert line, proc.stderr.read().decode()[-2000:]
                    time.sleep(rng.uniform(0.0, 0.08))  # the worker works 50 ms, then commits
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                proc.stdout.close()
                proc.stderr.close()
                kills += 1
                # offsets first, output second: an input below a committed offset must be in the committed
                # output (a commit that made the offsets visible has its markers on the way)
                offsets = _committed_offsets(bs, group, src)
                need = {(p, o) for p, end in offsets.items() for o in range(end)}
                got = _output(bs, dst, need, wait_s=10, settle_s=0)
                checks += 1
                missing = need - set(got)
                if missing:
                    ahead.append((kills, offsets, sorted(missing)[:5]))
        finally:
            stop.set()
            feeder.join()
        assert kills == 10
        assert not ahead, f"committed offsets ran ahead of the committed output: {ahead}"
        # a last run drains the input, then the output must hold every input once
        proc = _spawn(bs, [src, dst, group, txn_id])
        try:
            assert proc.stdout.readline().strip() == b"STARTED"
            want = set(sent)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                offsets = _committed_offsets(bs, group, src)
                if all(offsets[p] > max(o for q, o in want if q == p) for p in range(PARTITIONS)):
                    break
                time.sleep(0.3)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        got = _output(bs, dst, want, wait_s=20, settle_s=1.0)
        dupes = {k: n for k, n in got.items() if n > 1}
        assert not dupes, f"{len(dupes)} inputs written more than once, e.g. {list(dupes.items())[:5]}"
        assert set(got) == want, (
            f"missing {sorted(want - set(got))[:5]}, unexpected {sorted(set(got) - want)[:5]}"
        )
        assert len(want) > 500  # the feed ran through every kill: not vacuous
        # the kills left aborted transactions behind (a read_uncommitted reader sees their records): not vacuous
        c = ck.Consumer({"bootstrap.servers": bs, "group.id": "raw", "isolation.level": "read_uncommitted"})
        try:
            c.assign([ck.TopicPartition(dst, p, 0) for p in range(PARTITIONS)])
            raw, idle = 0, 0
            while idle < 5:
                ms = [m for m in c.consume(500, 0.2) if not m.error()]
                raw, idle = raw + len(ms), 0 if ms else idle + 1
        finally:
            c.close()
        print(f"{len(want)} inputs, {raw} output records read uncommitted, {checks} checks", flush=True)
        assert raw > len(want)
