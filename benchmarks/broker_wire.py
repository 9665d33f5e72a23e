"""Broker wire throughput: raw protocol clients in a separate process against one broker process.

    .venv/bin/python benchmarks/broker_wire.py [--messages 1000000] [--size 200]

Measures what the broker itself sustains on loopback, with clients that do
no work beyond the protocol (pre-encoded batches, pipelined requests), so the
numbers bound what the real Producer / Consumer can reach:

* produce, 1 message per request (the paper's "batch size 1" on the wire)
* produce, one 50-message batch per request (the paper's "batch size 50")
* produce, 20 batches of 50 per request (what a lingering producer sends)
* fetch, ~200 KB per request, one request in flight (the paper's consumer test),
  counting messages from batch headers (as a batch consumer does)
* end-to-end latency at 10,000 msg/s: produce -> a long-polling consumer in another process

Baselines, measured in the same run on the same machine: the same bytes sent
through a plain loopback TCP socket to a process that only reads them
(produce) and a file ``os.sendfile``'d to a socket (fetch). ``ratio`` is
broker / baseline.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402
from pyspark_logsource.format import batch as fmt  # noqa: E402
from pyspark_logsource.protocol import (  # noqa: E402
    ApiVersionsRequest,
    ClientConnection,
    CreatableTopic,
    CreateTopicsRequest,
    FetchPartition,
    FetchRequest,
    FrameDecoder,
    ProducePartitionData,
    ProduceRequest,
    decode_response_body,
)
from pyspark_logsource.protocol.primitives import Reader  # noqa: E402

PAPER = {  # Kreps et al. 2011, section 5 (msg/s)
    "produce batch=1": 50_000,
    "produce batch=50": 400_000,
    "fetch 200KB": 22_000,
}


#: the non-flexible Produce version our Producer negotiates with our broker
PRODUCE_VERSION = 8


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _hello(sock: socket.socket, conn: ClientConnection) -> None:
    """ApiVersions first, as our clients do: negotiate versions and ask for Arrow-bodied fetches."""
    conn.negotiated(_request(sock, conn, ApiVersionsRequest(arrow_body=True)))


def _request(sock: socket.socket, conn: ClientConnection, req) -> object:
    sock.sendall(conn.request_bytes(req)[1])
    while True:
        got = conn.receive_data(sock.recv(1 << 20))
        if got:
            return got[0].response


def produce_worker(
    port: int, topic: str, msgs_per_batch: int, batches_per_req: int, requests: int, size: int, out: mp.Queue
) -> None:
    """Pipeline ``requests`` produce requests (window of 64) and check every response."""
    values = [os.urandom(size) for _ in range(msgs_per_batch)]
    batch = bytes(fmt.encode(values))
    records = batch * batches_per_req
    conn = ClientConnection("bench")
    _, template = conn.request_bytes(
        ProduceRequest([ProducePartitionData(topic, 0, records)]), PRODUCE_VERSION
    )
    conn = ClientConnection("bench")
    sock = _connect(port)
    dec = FrameDecoder()
    window, sent, done, errors = 64, 0, 0, 0
    frame = bytearray(template)
    t0 = time.perf_counter()
    while done < requests:
        chunk = []
        while sent < requests and sent - done < window and len(chunk) < 16:
            struct.pack_into(">i", frame, 8, sent)  # the correlation id
            chunk.append(bytes(frame))
            sent += 1
        if chunk:
            sock.sendall(b"".join(chunk))
        for f in dec.feed(sock.recv(1 << 20)):
            r = Reader(f)
            r.i32()
            resp = decode_response_body(0, PRODUCE_VERSION, r)
            errors += resp.partitions[0].error_code != 0
            done += 1
    elapsed = time.perf_counter() - t0
    sock.close()
    out.put((elapsed, errors))


def fetch_worker(port: int, topic: str, max_bytes: int, out: mp.Queue) -> None:
    """Read the partition from offset 0 to its end, one fetch in flight, counting batch headers."""
    sock = _connect(port)
    conn = ClientConnection("bench-fetch")
    _hello(sock, conn)
    offset, msgs, nbytes = 0, 0, 0
    t0 = time.perf_counter()
    while True:
        resp = _request(
            sock, conn, FetchRequest([FetchPartition(topic, 0, offset, max_bytes)], max_wait_ms=0)
        )
        p = resp.partitions[0]
        if p.error_code:
            raise SystemExit(f"fetch error {p.error_code}")
        data = p.records
        last = None
        for _, h in fmt.iter_headers(data):
            msgs += h.record_count
            last = h
        if last is None:
            break
        nbytes += len(data)
        offset = last.next_offset
        if offset >= p.high_watermark:
            break
    out.put((time.perf_counter() - t0, msgs, nbytes))


def latency_consumer(port: int, topic: str, n: int, out: mp.Queue) -> None:
    """Long-poll the partition; for each record, now - the send time stamped in its value."""
    import numpy as np

    sock = _connect(port)
    conn = ClientConnection("bench-latency")
    _hello(sock, conn)
    lat: list[float] = []
    offset = 0
    while len(lat) < n:
        resp = _request(
            sock, conn, FetchRequest([FetchPartition(topic, 0, offset, 1 << 20)], max_wait_ms=500)
        )
        now = time.time()
        for rb in fmt.decode_all(resp.partitions[0].records):
            sent = np.frombuffer(
                b"".join(v[:8] for v in rb.to_arrow().column("value").to_pylist()), dtype=">f8"
            )
            lat.extend((now - sent).tolist())
            offset = rb.header.next_offset
    out.put(lat)


def measure_latency(port: int, rate: int, seconds: float, per_request: int) -> tuple[float, float]:
    """p50/p99 ms from produce to a long-polling consumer at ``rate`` msg/s (producer and consumer in 2 processes)."""
    import numpy as np

    sock = _connect(port)
    conn = ClientConnection("bench-latency-p")
    _hello(sock, conn)
    _request(sock, conn, CreateTopicsRequest([CreatableTopic("latency", 1)]))
    n = int(rate * seconds)
    q = mp.get_context("spawn").Queue()
    p = mp.get_context("spawn").Process(target=latency_consumer, args=(port, "latency", n, q))
    p.start()
    time.sleep(1.0)
    t0 = time.time()
    for i in range(n // per_request):
        delay = t0 + i * per_request / rate - time.time()
        if delay > 0:
            time.sleep(delay)
        stamp = struct.pack(">d", time.time())
        _request(
            sock,
            conn,
            ProduceRequest(
                [ProducePartitionData("latency", 0, fmt.encode([stamp + b"x" * 192] * per_request))]
            ),
        )
    lat = np.array(q.get()) * 1000
    p.join()
    sock.close()
    return float(np.percentile(lat, 50)), float(np.percentile(lat, 99))


def sink_worker(port_q: mp.Queue, expect: int) -> None:
    """Baseline receiver: read ``expect`` bytes and discard them."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port_q.put(srv.getsockname()[1])
    c, _ = srv.accept()
    buf = bytearray(1 << 20)
    got = 0
    while got < expect:
        n = c.recv_into(buf)
        if not n:
            break
        got += n
    c.sendall(b"k")
    c.close()


def baseline_send(total: int, chunk: bytes) -> float:
    """Seconds to push ``total`` bytes through loopback TCP to a reading process."""
    q: mp.Queue = mp.Queue()
    p = mp.Process(target=sink_worker, args=(q, total))
    p.start()
    s = _connect(q.get())
    t0 = time.perf_counter()
    sent = 0
    while sent < total:
        s.sendall(chunk)
        sent += len(chunk)
    s.recv(1)
    elapsed = time.perf_counter() - t0
    s.close()
    p.join()
    return elapsed


def baseline_sendfile(path: Path, per_call: int) -> float:
    """Seconds to sendfile a whole file to a reading process in ``per_call`` pieces."""
    total = path.stat().st_size
    q: mp.Queue = mp.Queue()
    p = mp.Process(target=sink_worker, args=(q, total))
    p.start()
    s = _connect(q.get())
    with open(path, "rb") as f:
        t0 = time.perf_counter()
        pos = 0
        while pos < total:
            pos += os.sendfile(s.fileno(), f.fileno(), pos, min(per_call, total - pos))
        s.recv(1)
        elapsed = time.perf_counter() - t0
    s.close()
    p.join()
    return elapsed


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages per batched produce test")
    ap.add_argument("--single", type=int, default=100_000, help="messages in the 1-per-request test")
    ap.add_argument("--size", type=int, default=200, help="message value size in bytes")
    args = ap.parse_args(argv)
    ctx = mp.get_context("spawn")
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedBroker(tmp, mode="process", config={"log.segment.bytes": 1 << 30}) as b,
    ):
        sock = _connect(b.port)
        conn = ClientConnection("bench-admin")
        tests = [
            ("produce batch=1", 1, 1, args.single),
            ("produce batch=50", 50, 1, args.messages),
            ("produce 20x50/request", 50, 20, args.messages),
        ]
        for name, per_batch, per_req, n in tests:
            topic = name.replace(" ", "_").replace("=", "").replace("/", "_")
            _request(sock, conn, CreateTopicsRequest([CreatableTopic(topic, 1)]))
            requests = n // (per_batch * per_req)
            q = ctx.Queue()
            p = ctx.Process(
                target=produce_worker, args=(b.port, topic, per_batch, per_req, requests, args.size, q)
            )
            p.start()
            elapsed, errors = q.get()
            p.join()
            if errors:
                raise SystemExit(f"{name}: {errors} failed requests")
            msgs = requests * per_batch * per_req
            wire = len(fmt.encode([b"x" * args.size] * per_batch)) * per_req + 60  # one request frame
            base = baseline_send(wire * requests, os.urandom(wire) * max(1, 65536 // wire))
            rows.append(
                (name, msgs, elapsed, msgs * args.size, requests * wire / base, wire * requests / elapsed)
            )
        # the consumer test reads what "produce batch=50" wrote
        topic = "produce_batch50"
        q = ctx.Queue()
        p = ctx.Process(target=fetch_worker, args=(b.port, topic, 200 * 1024, q))
        p.start()
        elapsed, msgs, nbytes = q.get()
        p.join()
        seg = next((Path(tmp) / "logs" / f"{topic}-0").glob("*.log"))
        base = baseline_sendfile(seg, 200 * 1024)
        rows.append(
            ("fetch 200KB", msgs, elapsed, msgs * args.size, seg.stat().st_size / base, nbytes / elapsed)
        )
        sock.close()
        p50, p99 = measure_latency(b.port, 10_000, 5.0, 10)
    print(
        f"\nbroker wire throughput, {args.size}-byte messages, loopback, 1 broker process + 1 client process"
    )
    print(
        f"{'test':<24}{'messages':>11}{'msg/s':>12}{'MB/s':>9}{'paper msg/s':>13}{'baseline MB/s':>15}{'ratio':>7}"
    )
    for name, msgs, elapsed, payload, base_bps, bps in rows:
        paper = PAPER.get(name)
        print(
            f"{name:<24}{msgs:>11,}{msgs / elapsed:>12,.0f}{payload / elapsed / 1e6:>9.1f}"
            f"{(f'{paper:,}' if paper else '-'):>13}{base_bps / 1e6:>15.1f}{bps / base_bps:>7.2f}"
        )
    print(
        "ratio = wire bytes/s through the broker / bytes/s of the same transfer without a broker (baseline)"
    )
    print(
        f"end-to-end latency at 10,000 msg/s (batches of 10 every ms, long-polling consumer): "
        f"p50 {p50:.2f} ms, p99 {p99:.2f} ms (target p99 <= 5 ms); load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
