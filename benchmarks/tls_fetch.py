"""What TLS costs a consumer (issue 22): fetches on a TLS listener cannot use ``sendfile``, the log's
bytes are read into the broker and encrypted. One broker process with a PLAINTEXT and an SSL listener
(a CA and certificates made with trustme), one topic of N messages of 1,000 bytes written once; then
librdkafka (confluent-kafka) and our Consumer read it all over each listener. Prints MB/s per row.

    .venv/bin/python benchmarks/tls_fetch.py                     # N = 200,000 (about 200 MB)
    .venv/bin/python benchmarks/tls_fetch.py --messages 50000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import trustme
from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import Producer as RdProducer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark_logsource import Consumer  # noqa: E402
from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402

SIZE = 1000


def _rd_consume(conf: dict, topic: str, n: int) -> float:
    c = RdConsumer({**conf, "group.id": f"bench-{time.monotonic_ns()}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, t0 = 0, time.perf_counter()
    while got < n:
        got += sum(1 for m in c.consume(10_000, 1.0) if m.error() is None)
    dt = time.perf_counter() - t0
    c.close()
    return dt


def _our_consume(bootstrap: str, opts: dict, topic: str, n: int) -> float:
    c = Consumer(bootstrap, group_id=None, **opts)
    c.assign([(topic, 0)])
    got, t0 = 0, time.perf_counter()
    while got < n:
        got += sum(t.num_rows for t in c.poll_arrow(1000).values())
    dt = time.perf_counter() - t0
    c.close()
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    n = ap.parse_args().messages
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(d / "ca.pem"))
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(d / "broker.pem"))
        props = {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": str(d / "broker.pem"),
        }
        with EmbeddedBroker(d / "broker", mode="process", config=props) as b:
            plain, tls = b.bootstrap_on("PLAINTEXT"), b.bootstrap_on("SSL")
            p = RdProducer({"bootstrap.servers": plain, "linger.ms": 5, "batch.size": 1 << 20})
            value = b"x" * SIZE
            for _ in range(n):
                while True:
                    try:
                        p.produce("tls-bench", value, partition=0)
                        break
                    except BufferError:
                        p.poll(0.01)
            p.flush()
            del p  # no producer left reconnecting to a stopped broker
            mb = n * SIZE / 1e6
            ssl_conf = {"security.protocol": "SSL", "ssl.ca.location": str(d / "ca.pem")}
            rows = [
                (
                    "librdkafka PLAINTEXT (sendfile)",
                    _rd_consume({"bootstrap.servers": plain}, "tls-bench", n),
                ),
                (
                    "librdkafka SSL (read + encrypt)",
                    _rd_consume({"bootstrap.servers": tls, **ssl_conf}, "tls-bench", n),
                ),
                ("ours PLAINTEXT (sendfile)", _our_consume(plain, {}, "tls-bench", n)),
                (
                    "ours SSL (read + encrypt)",
                    _our_consume(
                        tls, {"security_protocol": "SSL", "ssl_cafile": str(d / "ca.pem")}, "tls-bench", n
                    ),
                ),
            ]
            print(f"{n} messages of {SIZE} bytes ({mb:.0f} MB), one partition")
            for name, dt in rows:
                print(f"  {name:34s} {mb / dt:8.1f} MB/s  ({dt:.2f} s)")


if __name__ == "__main__":
    main()
