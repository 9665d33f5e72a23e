"""Transactional produce throughput with confluent-kafka (librdkafka) against non-transactional idempotent
produce, in one run against one broker process.

N messages of 200 bytes (default 200,000) to one partition, acks=all, linger 5 ms, for each mode:

* idempotent: ``enable.idempotence=true``, one flush at the end (the baseline);
* transactional, 100 records per transaction: begin, 100 produce() calls, commit_transaction();
* transactional, 1000 records per transaction.

A transaction's commit waits for its records, then EndTxn, whose markers the coordinator writes before it
answers: the cost per transaction is a flush plus AddPartitionsToTxn, EndTxn and the marker (fsync'd on
``__transaction_state``). Printed: msg/s, transactions/s, the ratio to the idempotent baseline and the CPU
seconds of the client and the broker::

    .venv/bin/python benchmarks/txn_produce.py
    .venv/bin/python benchmarks/txn_produce.py --messages 50000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from kafka_clients import cpu_seconds  # noqa: E402

from pyspark_logsource import Admin  # noqa: E402
from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402

MSG = 200


def _conf(bs: str, **extra: object) -> dict:
    return {"bootstrap.servers": bs, "linger.ms": 5, "acks": "all", "enable.idempotence": True, **extra}


def idempotent(bs: str, topic: str, n: int, payload: bytes) -> float:
    p = Producer(_conf(bs))
    p.produce(topic, payload, partition=0)  # warm-up: metadata, producer id
    p.flush(30)
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=0)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return time.perf_counter() - t0


def transactional(bs: str, topic: str, n: int, payload: bytes, per_txn: int) -> float:
    p = Producer(_conf(bs, **{"transactional.id": f"bench-{topic}"}))
    p.init_transactions(30)
    p.begin_transaction()  # warm-up transaction: coordinator lookup, the partition's first add
    p.produce(topic, payload, partition=0)
    p.commit_transaction(30)
    t0 = time.perf_counter()
    for start in range(0, n, per_txn):
        p.begin_transaction()
        for _ in range(min(per_txn, n - start)):
            while True:
                try:
                    p.produce(topic, payload, partition=0)
                    break
                except BufferError:
                    p.poll(0.01)
        p.commit_transaction(60)
    return time.perf_counter() - t0


def committed_count(bs: str, topic: str) -> int:
    """Records a read_committed reader counts up to the end: each mode wrote what it claims."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"count-{topic}", "isolation.level": "read_committed"})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        n, idle = 0, 0
        while idle < 10:
            ms = [m for m in c.consume(10000, 0.2) if not m.error()]
            n, idle = n + len(ms), 0 if ms else idle + 1
        return n
    finally:
        c.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000, help="messages per mode")
    args = ap.parse_args(argv)
    n, payload = args.messages, b"x" * MSG
    modes = [("idempotent", None), ("txn, 100 per transaction", 100), ("txn, 1000 per transaction", 1000)]
    rows = []
    with tempfile.TemporaryDirectory() as d, EmbeddedBroker(Path(d), mode="process") as broker:
        bs = broker.bootstrap
        with Admin(bs) as a:
            for i in range(len(modes)):
                a.create_topic(f"bench{i}", 1)
        print(f"broker pid {broker.pid} at {bs}; {n:,} messages of {MSG} bytes per mode", file=sys.stderr)
        for i, (name, per) in enumerate(modes):
            c0, b0 = time.process_time(), cpu_seconds(broker.pid)
            secs = (
                idempotent(bs, f"bench{i}", n, payload)
                if per is None
                else transactional(bs, f"bench{i}", n, payload, per)
            )
            rows.append((name, per, secs, time.process_time() - c0, cpu_seconds(broker.pid) - b0))
            print(f"  {name}: {n / secs:,.0f} msg/s", file=sys.stderr, flush=True)
            got = committed_count(bs, f"bench{i}")
            assert got == n + 1, f"{name}: {got} records read committed, expected {n + 1}"
    base = n / rows[0][2]
    print(f"\n{n:,} messages of {MSG} bytes, one partition, acks=all, linger 5 ms (confluent-kafka)\n")
    print(
        f"| {'mode':<26} | {'msg/s':>9} | {'txn/s':>7} | {'vs idempotent':>13} | {'client CPU s':>12} | {'broker CPU s':>12} |"
    )
    print(
        "|"
        + "|".join("-" * (w + 1) + ("-" if k == 0 else ":") for k, w in enumerate((26, 9, 7, 13, 12, 12)))
        + "|"
    )
    for name, per, secs, cc, bc in rows:
        rate = n / secs
        txns = "" if per is None else f"{n / per / secs:,.0f}"
        print(
            f"| {name:<26} | {rate:>9,.0f} | {txns:>7} | {rate / base:>12.2f}x | {cc:>12.1f} | {bc:>12.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
