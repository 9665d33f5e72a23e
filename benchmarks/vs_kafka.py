"""Our broker side by side with Apache Kafka, driven by the same clients, in one run and one table.

Same machine, 200-byte messages, N per row, one partition per topic, each broker alone while measured
(Apache Kafka first, stopped, then ours; each first takes 100,000 messages from the perf producer, not
counted, so a JIT warms up):

* Apache Kafka 4.x (the jars ``make peers`` fetched): a single KRaft node (combined broker + controller),
  its default settings but the single-replica internal topics one node needs, 1 GB heap;
* the logsource broker: ``python -m pyspark_logsource.broker`` (EmbeddedBroker, a child process), defaults.

Clients (their own defaults, acks=all, unless the row says):

* Kafka's ``kafka-producer-perf-test`` (org.apache.kafka.tools.ProducerPerformance) with linger.ms 0 and 5;
  ``kafka-consumer-perf-test`` (ConsumerPerformance: its fetch rate, the group join excluded);
* librdkafka (confluent-kafka) from Python: produce() per message with linger 0 and 5 ms, and a consumer.

Per row: msg/s and the broker's CPU seconds per million messages (user + system of the broker process
over the row); per broker its peak RSS (VmHWM). The ratio is ours / Kafka's (> 1: ours is faster or, for
CPU and RSS, uses more).

    .venv/bin/python benchmarks/vs_kafka.py                     # N = 500,000
    .venv/bin/python benchmarks/vs_kafka.py --messages 200000

Target (printed, never asserted): our broker >= 1.0x Apache Kafka's throughput with the same batching client.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition  # noqa: E402
from confluent_kafka import Consumer as RdConsumer  # noqa: E402
from confluent_kafka import Producer as RdProducer  # noqa: E402
from support.kafka_peer import KafkaServer, kafka_tool  # noqa: E402

from pyspark_logsource import Admin  # noqa: E402
from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402

MSG = 200
#: the perf tools' JVM as kafka-run-class.sh starts them (full JIT; -Xmx512M as the perf-test scripts)
CLIENT_JVM = ("-Xmx512m", "-XX:+UseG1GC")
_TICK = 100


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def producer_perf(bs: str, topic: str, n: int, linger: int) -> float:
    """kafka-producer-perf-test: msg/s of its summary line."""
    out = kafka_tool(
        "ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        str(n),
        "--record-size",
        str(MSG),
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={bs}",
        f"linger.ms={linger}",
        timeout=600,
        jvm=CLIENT_JVM,
    ).stdout
    last = [ln for ln in out.splitlines() if "records sent" in ln][-1]
    return float(re.search(r"([\d.]+) records/sec", last).group(1))  # type: ignore[union-attr]


def consumer_perf(bs: str, topic: str, n: int) -> float:
    """kafka-consumer-perf-test: fetch.nMsg.sec (the rate once the group is joined)."""
    out = kafka_tool(
        "ConsumerPerformance",
        "--bootstrap-server",
        bs,
        "--topic",
        topic,
        "--messages",
        str(n),
        "--timeout",
        "120000",
        timeout=600,
        jvm=CLIENT_JVM,
    ).stdout
    lines = [ln for ln in out.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[-2].split(",")]
    values = [v.strip() for v in lines[-1].split(",")]
    return float(values[header.index("fetch.nMsg.sec")])


def rd_produce(bs: str, topic: str, n: int, linger: int) -> float:
    """confluent-kafka produce() per message; msg/s to the last delivery."""
    p = RdProducer(
        {
            "bootstrap.servers": bs,
            "linger.ms": linger,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    value = b"x" * MSG
    produce, poll = p.produce, p.poll
    t0 = time.perf_counter()
    for _ in range(n):
        try:
            produce(topic, value, partition=0)
        except BufferError:
            poll(0.01)
            produce(topic, value, partition=0)
    left = p.flush(300)
    dt = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"librdkafka producer: {left} messages not delivered")
    return n / dt


def rd_consume(bs: str, topic: str, n: int) -> float:
    """confluent-kafka consumer from the beginning; msg/s from the first message to the n-th."""
    c = RdConsumer(
        {
            "bootstrap.servers": bs,
            "group.id": "vs-kafka",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, first = 0, None
    while got < n:
        for m in c.consume(10_000, 0.05):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(f"librdkafka consumer: {err}")
            if first is None:
                first = time.perf_counter()
            got += 1
    dt = time.perf_counter() - (first or 0.0)
    c.close()
    return got / dt


def measure(bs: str, pid: int, n: int) -> tuple[dict[str, tuple[float, float]], float]:
    """Every row against one broker: {row: (msg/s, broker CPU s per million)}, and its peak RSS (MB)."""
    with Admin(bs) as admin:
        for t in ("warm-up", "perf0", "perf5", "rd0", "rd5"):
            admin.create_topic(t, 1)
    producer_perf(bs, "warm-up", min(n, 100_000), 5)  # not counted: the broker's JIT / first segment
    rows: dict[str, tuple[float, float]] = {}
    runs: list[tuple[str, Callable[[], float]]] = [
        ("kafka-producer-perf-test, linger 0", lambda: producer_perf(bs, "perf0", n, 0)),
        ("kafka-producer-perf-test, linger 5", lambda: producer_perf(bs, "perf5", n, 5)),
        ("kafka-consumer-perf-test", lambda: consumer_perf(bs, "perf5", n)),
        ("confluent-kafka produce, linger 0", lambda: rd_produce(bs, "rd0", n, 0)),
        ("confluent-kafka produce, linger 5", lambda: rd_produce(bs, "rd5", n, 5)),
        ("confluent-kafka consume", lambda: rd_consume(bs, "rd5", n)),
    ]
    for name, run in runs:
        cpu0 = cpu_seconds(pid)
        rate = run()
        rows[name] = (rate, (cpu_seconds(pid) - cpu0) / n * 1e6)
        print(f"  {name}: {rate:,.0f} msg/s", file=sys.stderr, flush=True)
    return rows, peak_rss_mb(pid)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=500_000, help="messages per row")
    args = ap.parse_args(argv)
    n = args.messages
    with tempfile.TemporaryDirectory(prefix="vs-kafka-") as d:
        print(f"Apache Kafka (1 GB heap), {n:,} messages of {MSG} B per row", file=sys.stderr)
        with KafkaServer(Path(d) / "kafka", heap="1g", start_timeout=120) as kafka:
            assert kafka.pid is not None
            theirs, their_rss = measure(kafka.bootstrap, kafka.pid, n)
        print("logsource broker", file=sys.stderr)
        with EmbeddedBroker(Path(d) / "logsource", mode="process") as broker:
            assert broker.pid is not None
            ours, our_rss = measure(broker.bootstrap, broker.pid, n)

    head = ("row", "Kafka msg/s", "ours msg/s", "ratio", "Kafka CPU-s/M", "ours CPU-s/M", "ratio")
    table = [head]
    for name, (k_rate, k_cpu) in theirs.items():
        o_rate, o_cpu = ours[name]
        table.append(
            (
                name,
                f"{k_rate:,.0f}",
                f"{o_rate:,.0f}",
                f"{o_rate / k_rate:.2f}x",
                f"{k_cpu:.2f}",
                f"{o_cpu:.2f}",
                f"{o_cpu / k_cpu:.2f}x" if k_cpu else "-",
            )
        )
    table.append(
        ("broker peak RSS (MB)", f"{their_rss:,.0f}", f"{our_rss:,.0f}", f"{our_rss / their_rss:.2f}x")
    )
    widths = [max(len(r[i]) for r in table if i < len(r)) for i in range(len(head))]
    print(f"\nvs_kafka: {n:,} messages of {MSG} B per row, one partition, each broker alone on the machine")
    for r in table:
        print("| " + " | ".join(c.ljust(widths[i]) for i, c in enumerate(r)) + " |")
    print("target: ours >= 1.00x Kafka's msg/s with the same batching client (linger 5 rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
