"""The broker's CPU per one-message produce request: pure-Python vs compiled broker, same run.

    .venv/bin/python benchmarks/broker_produce.py [--requests 100000] [--size 200] [--rounds 2]

One broker process per path (``LOGSOURCE_NO_EXTENSIONS=1`` in the pure one's environment), the
same raw protocol client in another process (pre-encoded one-message batches, Produce v8,
acks=1, 64 requests in flight, sent 16 per write; it reads each answer's error code and
nothing else, so that it costs the broker's machine little). Both batch layouts: our
Arrow body (our Producer) and Kafka's varint records (a Java producer, librdkafka). With
``--producer``, a third client: our ``Producer.send()`` at batch 1 (paper.py's "batch 1:
send(), 1 msg/request, pipelined" row: linger 0, 64 in flight), whose own CPU is then part
of what limits msg/s.
Printed per path: msg/s and the broker process's CPU seconds (utime + stime from /proc)
per request; the ratio is pure / compiled. The rounds alternate the paths so the
machine's noise hits both.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import struct  # noqa: E402
import time  # noqa: E402

from broker_wire import _connect, _request  # noqa: E402

from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402
from pyspark_logsource.format import encode, encode_kafka  # noqa: E402
from pyspark_logsource.protocol import (  # noqa: E402
    ClientConnection,
    CreatableTopic,
    CreateTopicsRequest,
    FrameDecoder,
    ProducePartitionData,
    ProduceRequest,
)

WINDOW, PER_WRITE = 64, 16


def produce_worker(port: int, topic: str, requests: int, size: int, client: str, out: mp.Queue) -> None:
    """Pipeline ``requests`` one-message produce requests; put (seconds, failed answers)."""
    if client == "producer":
        from paper import produce_send, values

        out.put((produce_send(f"127.0.0.1:{port}", topic, values(requests), 1, WINDOW, 1), 0))
        return
    kafka = client == "kafka"
    value = os.urandom(size)
    batch = bytes(encode_kafka([value]) if kafka else encode([value]))
    _, frame = ClientConnection("bench").request_bytes(
        ProduceRequest([ProducePartitionData(topic, 0, batch)]), 8
    )
    n = len(frame)
    chunk = bytearray(bytes(frame) * PER_WRITE)
    err_at = 4 + 4 + 2 + len(topic.encode()) + 4 + 4  # the answer's error code: after cid, topic, partition
    sock = _connect(port)
    dec = FrameDecoder()
    sent = done = errors = 0
    t0 = time.perf_counter()
    while done < requests:
        if sent < requests and sent - done <= WINDOW - PER_WRITE:
            k = min(PER_WRITE, requests - sent)
            for j in range(k):
                struct.pack_into(">i", chunk, j * n + 8, sent + j)  # the correlation id
            sock.sendall(memoryview(chunk)[: k * n])
            sent += k
            continue
        for f in dec.feed(sock.recv(1 << 20)):
            errors += f[err_at] != 0 or f[err_at + 1] != 0
            done += 1
    elapsed = time.perf_counter() - t0
    sock.close()
    out.put((elapsed, errors))


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_path(
    pure: bool, requests: int, size: int, client: str, tree: str | None = None
) -> tuple[float, float]:
    """(msg/s, broker CPU µs per request) with the broker on the pure or the compiled path (of the
    source tree ``tree``: another checkout, for a before/after row; None: this one)."""
    env_before = os.environ.get("LOGSOURCE_NO_EXTENSIONS")
    path_before = os.environ.get("PYTHONPATH")
    cwd = os.getcwd()
    if tree is not None:  # `python -m` puts the working directory first on the path: the child's is the tree
        os.environ["PYTHONPATH"] = tree
        os.chdir(tree)
    if pure:
        os.environ["LOGSOURCE_NO_EXTENSIONS"] = "1"
    else:
        os.environ.pop("LOGSOURCE_NO_EXTENSIONS", None)
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            EmbeddedBroker(tmp, mode="process", config={"log.segment.bytes": 1 << 30}) as b,
        ):
            sock = _connect(b.port)
            _request(sock, ClientConnection("bench-admin"), CreateTopicsRequest([CreatableTopic("p1", 1)]))
            sock.close()
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            # a warm-up run (imports, first segment), then the measured one
            for n in (requests // 10, requests):
                c0 = cpu_seconds(b.pid)
                p = ctx.Process(target=produce_worker, args=(b.port, "p1", n, size, client, q))
                p.start()
                elapsed, errors = q.get()
                p.join()
                cpu = cpu_seconds(b.pid) - c0
            if errors:
                raise SystemExit(f"{errors} failed requests")
            return requests / elapsed, cpu / requests * 1e6
    finally:
        os.chdir(cwd)
        if path_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = path_before
        if env_before is None:
            os.environ.pop("LOGSOURCE_NO_EXTENSIONS", None)
        else:
            os.environ["LOGSOURCE_NO_EXTENSIONS"] = env_before


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=100_000, help="one-message produce requests per run")
    ap.add_argument("--size", type=int, default=200, help="message value size in bytes")
    ap.add_argument("--rounds", type=int, default=2, help="runs per path (alternating), best kept")
    ap.add_argument(
        "--layout", choices=("arrow", "kafka", "both"), default="both", help="the batches' layout"
    )
    ap.add_argument(
        "--base",
        metavar="TREE",
        help="also run the compiled path of another source tree (its extensions built), as row 'base'",
    )
    ap.add_argument(
        "--producer", action="store_true", help="also our Producer.send() at batch 1 as the client"
    )
    args = ap.parse_args(argv)
    best: dict[tuple[str, str], tuple[float, float]] = {}
    layouts = ["arrow", "kafka"] if args.layout == "both" else [args.layout]
    if args.producer:
        layouts.append("producer")
    for _ in range(args.rounds):
        for layout in layouts:
            paths = [("python", True, None), ("compiled", False, None)]
            if args.base:
                paths.append(("base", False, args.base))
            for name, pure, tree in paths:
                rate, us = run_path(pure, args.requests, args.size, layout, tree)
                print(
                    f"  {layout:<9}{name:<9} {rate:>10,.0f} msg/s  {us:6.2f} us broker CPU/request",
                    flush=True,
                )
                old = best.get((layout, name))
                best[(layout, name)] = (max(rate, old[0]), min(us, old[1])) if old else (rate, us)
    print(
        f"\nbroker, one {args.size}-byte message per produce request (v8, acks=1, {WINDOW} in flight), "
        f"best of {args.rounds}"
    )
    print(f"{'layout':<10}{'path':<10}{'msg/s':>12}{'broker CPU us/request':>24}")
    for (layout, name), (rate, us) in best.items():
        print(f"{layout:<10}{name:<10}{rate:>12,.0f}{us:>24.2f}")
    for layout in layouts:
        (pr, pu), (cr, cu) = best[(layout, "python")], best[(layout, "compiled")]
        print(
            f"{layout}: compiled / python: msg/s {cr / pr:.2f}x, broker CPU per request {pu / cu:.2f}x less"
        )
        if args.base:
            br, bu = best[(layout, "base")]
            print(
                f"{layout}: compiled / base: msg/s {cr / br:.2f}x, broker CPU per request {bu / cu:.2f}x less"
            )
    print(
        f"targets: >= 100,000 msg/s, <= 6 us; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
