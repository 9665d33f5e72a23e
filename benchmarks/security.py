"""What security costs (issue 22): produce and consume msg/s and the broker's CPU per message over
PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512), in one run against one broker process with the three
listeners (a CA and certificates made with trustme, the user made with ``logsource users`` before the
first start, as an operator does).

Each row: N messages of 200 bytes produced to a fresh one-partition topic with client batches of B
messages (our Producer: ``batch_size`` = B records' bytes and a long ``linger_ms``, and it puts a
partition's ready batches in one request; confluent-kafka: ``batch.num.messages`` = B, one batch per
partition per request, as Kafka's protocol has it), then read back from the start in polls of B (our Consumer's
``max_records``; librdkafka's ``consume(B)``). msg/s is the client's wall clock; broker µs/msg the
broker process's CPU time (the scheduler's, Linux /proc) over that phase divided by N; client µs/msg the same
for this process (our client's threads, or librdkafka's). The machine these run on is shared, so the
wall clock varies with others' load; "CPU x PLAIN" is the ratio of (broker + client) CPU per message,
PLAINTEXT's over the row's: the throughput ratio where CPU is what bounds it.
Each row runs ``--repeat`` times, the protocols taking turns, and shows the best. "x PLAIN" is the
msg/s ratio to the PLAINTEXT row with the same client and batch size (target: SASL_SSL >= 0.6x).

    .venv/bin/python benchmarks/security.py                        # N = 100,000 per row, best of 3
    .venv/bin/python benchmarks/security.py --messages 50000 --clients ours
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

import trustme
from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import Producer as RdProducer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark_logsource import Consumer, Producer  # noqa: E402
from pyspark_logsource.broker import users  # noqa: E402
from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402
from pyspark_logsource.client.admin import Admin  # noqa: E402
from pyspark_logsource.format._speedups import IMPLEMENTATION  # noqa: E402

SIZE = 200
BATCHES = (50, 1000)
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, PASSWORD = "bench", "bench-password-1"
#: bytes a 200-byte keyless record takes in a v2 batch (length, attributes, deltas, value, no headers)
RECORD_BYTES = SIZE + 8
BATCH_OVERHEAD = 61


def cpu_seconds(pid: int) -> float:
    """CPU seconds of a process's live threads so far: the scheduler's nanoseconds (Linux
    /proc/PID/task/*/schedstat), finer than /proc/PID/stat's 10 ms ticks."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue  # a thread that just ended
    return total / 1e9


def our_options(protocol: str, ca: Path) -> dict:
    opts: dict = {"security_protocol": protocol}
    if protocol != "PLAINTEXT":
        opts["ssl_cafile"] = str(ca)
    if protocol == "SASL_SSL":
        opts.update(sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=USER, sasl_plain_password=PASSWORD)
    return opts


def rd_conf(bootstrap: str, protocol: str, ca: Path) -> dict:
    conf = {"bootstrap.servers": bootstrap, "security.protocol": protocol}
    if protocol != "PLAINTEXT":
        conf["ssl.ca.location"] = str(ca)
    if protocol == "SASL_SSL":
        conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD})
    return conf


def our_produce(bootstrap: str, opts: dict, topic: str, n: int, batch: int) -> float:
    p = Producer(bootstrap, linger_ms=50, batch_size=BATCH_OVERHEAD + batch * RECORD_BYTES, **opts)
    p.partitions_for(topic)  # connected and authenticated before the clock starts
    value = b"x" * SIZE
    t0 = time.perf_counter()
    for _ in range(n):
        p.send(topic, value, partition=0)
    p.flush()
    dt = time.perf_counter() - t0
    p.close()
    return dt


def our_consume(bootstrap: str, opts: dict, topic: str, n: int, batch: int) -> float:
    c = Consumer(bootstrap, group_id=None, **opts)
    c.assign([(topic, 0)])
    got, t0 = 0, time.perf_counter()
    while got < n:
        got += len(c.poll(1000, max_records=batch))
    dt = time.perf_counter() - t0
    c.close()
    return dt


def rd_produce(conf: dict, topic: str, n: int, batch: int) -> float:
    p = RdProducer({**conf, "linger.ms": 50, "batch.num.messages": batch, "batch.size": 1 << 20})
    p.list_topics(topic, timeout=30)
    value = b"x" * SIZE
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(60)
    dt = time.perf_counter() - t0
    del p
    return dt


def rd_consume(conf: dict, topic: str, n: int, batch: int) -> float:
    c = RdConsumer({**conf, "group.id": f"bench-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, t0 = 0, time.perf_counter()
    while got < n:
        got += sum(1 for m in c.consume(batch, 1.0) if m.error() is None)
    dt = time.perf_counter() - t0
    c.close()
    return dt


def measure(pid: int, fn, *args) -> tuple[float, float, float]:
    """(seconds, broker CPU seconds, client CPU seconds: this process, librdkafka's threads included)."""
    b0, c0 = cpu_seconds(pid), time.process_time()
    dt = fn(*args)
    return dt, cpu_seconds(pid) - b0, time.process_time() - c0


def start_broker(d: Path) -> EmbeddedBroker:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(d / "broker.pem")
    )
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.location": str(d / "broker.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    cfg = d / "server.properties"
    cfg.write_text(
        "".join(f"{k}={v}\n" for k, v in {**props, "log.dirs": str(d / "broker" / "logs")}.items())
    )
    (d / "pw").write_text(PASSWORD + "\n")
    argv = [
        "set",
        USER,
        "--mechanism",
        "SCRAM-SHA-512",
        "--password-file",
        str(d / "pw"),
        "--config",
        str(cfg),
    ]
    assert users.main(argv) == 0
    return EmbeddedBroker(d / "broker", mode="process", config=props)


def one_row(b: EmbeddedBroker, ca: Path, client: str, proto: str, n: int, batch: int) -> tuple:
    """((produce s, broker CPU s), (consume s, broker CPU s)) of n messages to a fresh topic."""
    boot, pid = b.bootstrap_on(proto), b.pid
    assert pid is not None
    topic = f"sec-{proto.lower()}-{batch}-{uuid.uuid4().hex[:6]}"
    with Admin(b.bootstrap_on("PLAINTEXT")) as admin:
        admin.create_topic(topic, 1)
    if client == "ours":
        opts = our_options(proto, ca)
        return (
            measure(pid, our_produce, boot, opts, topic, n, batch),
            measure(pid, our_consume, boot, opts, topic, n, batch),
        )
    conf = rd_conf(boot, proto, ca)
    return measure(pid, rd_produce, conf, topic, n, batch), measure(pid, rd_consume, conf, topic, n, batch)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per row; the table shows the best")
    ap.add_argument("--clients", default="ours,confluent-kafka", help="ours, confluent-kafka or both")
    args = ap.parse_args()
    n, clients, repeat = args.messages, args.clients.split(","), args.repeat
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        with start_broker(d) as b:
            rows = []
            for client in clients:
                one_row(
                    b, d / "ca.pem", client, "PLAINTEXT", 5000, 1000
                )  # warm-up: imports, first connections
                for batch in BATCHES:
                    runs: dict[str, list] = {proto: [] for proto in PROTOCOLS}
                    for _ in range(repeat):  # the protocols take turns, so load from elsewhere hits all alike
                        for proto in PROTOCOLS:
                            runs[proto].append(one_row(b, d / "ca.pem", client, proto, n, batch))
                    for proto in PROTOCOLS:
                        prod = tuple(min(r[0][i] for r in runs[proto]) for i in range(3))
                        cons = tuple(min(r[1][i] for r in runs[proto]) for i in range(3))
                        rows.append((client, batch, proto, prod, cons))
    print(
        f"{n} messages of {SIZE} bytes per row, one partition, one broker process (SASL_SSL: "
        f"SCRAM-SHA-512); best of {repeat} runs (shortest time, least CPU); format core: {IMPLEMENTATION}"
    )
    head = ("client", "batch", "protocol", "produce msg/s", "x PLAIN", "broker µs/msg", "client µs/msg",
            "CPU x PLAIN", "consume msg/s", "x PLAIN", "broker µs/msg", "client µs/msg", "CPU x PLAIN")  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    base = {(c, bt): (p, q) for c, bt, pr, p, q in rows if pr == "PLAINTEXT"}
    for client, batch, proto, prod, cons in rows:
        cells = [client, str(batch), proto]
        for (dt, broker, mine), (bdt, bbroker, bmine) in zip(
            (prod, cons), base[(client, batch)], strict=True
        ):
            cells += [f"{n / dt:,.0f}", f"{bdt / dt:.2f}", f"{broker / n * 1e6:.2f}", f"{mine / n * 1e6:.2f}"]
            cells.append(f"{(bbroker + bmine) / (broker + mine):.2f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
