"""Fetch sessions (KIP-227): full against incremental fetches of 200 partitions, in one run.

    .venv/bin/python benchmarks/fetch_sessions.py [--partitions 200] [--fetches 2000]

One broker process, one topic of ``--partitions`` partitions holding a record each. A raw-protocol
client (our codecs over a socket, one request in flight, ``max_wait_ms`` 0) fetches them all, again
and again, in two ways:

* full: every fetch names every partition (session id 0, epoch -1: what librdkafka and our own
  consumer send);
* incremental: one full fetch opens a session, then each fetch names only what moved (nothing, in
  the idle case; the one partition that got a record, in the busy case).

Two cases: idle (no new data: the consumer's steady state when caught up) and busy (before each fetch
another connection appends one record to the next partition in turn, so one partition has news; the
produce costs the broker the same in both ways). Per fetch: request bytes, response bytes, and the
broker process's CPU time (user + system, from /proc) over all the fetches, divided by their number.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402
from pyspark_logsource.format import encode_kafka  # noqa: E402
from pyspark_logsource.protocol import (  # noqa: E402
    ApiVersionsRequest,
    ClientConnection,
    CreatableTopic,
    CreateTopicsRequest,
    FetchPartition,
    FetchRequest,
    ProducePartitionData,
    ProduceRequest,
)

TOPIC = "sessions-bench"
_TICK = os.sysconf("SC_CLK_TCK")


class Client:
    """One connection, one request in flight; counts the bytes each way."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection("fetch-sessions-bench")
        self.sent = self.received = 0
        self.conn.negotiated(self.request(ApiVersionsRequest(arrow_body=False)))

    def request(self, req):
        _, data = self.conn.request_bytes(req)
        self.sock.sendall(data)
        self.sent += len(data)
        while True:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            self.received += len(chunk)
            got = self.conn.receive_data(chunk)
            if got:
                return got[0].response

    def close(self) -> None:
        self.sock.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def run(b: EmbeddedBroker, n_parts: int, fetches: int, incremental: bool, busy: bool) -> dict:
    c, producer = Client(b.bootstrap), Client(b.bootstrap)
    offsets = dict.fromkeys(range(n_parts), 0)

    def full_request(session_id: int, epoch: int) -> FetchRequest:
        parts = [FetchPartition(TOPIC, p, o, 1 << 20) for p, o in offsets.items()]
        return FetchRequest(parts, 0, 1, 50 << 20, session_id=session_id, session_epoch=epoch)

    def advance(resp) -> list[int]:
        moved = []
        for p in resp.partitions:
            if p.error_code:
                raise RuntimeError(f"partition {p.partition}: error {p.error_code}")
            if p.high_watermark > offsets[p.partition]:
                offsets[p.partition] = p.high_watermark
                moved.append(p.partition)
        return moved

    session_id, epoch, moved = 0, -1, []
    if incremental:
        resp = c.request(full_request(0, 0))
        session_id, epoch = resp.session_id, 1
        assert session_id != 0, "the broker opened no fetch session"
        moved = advance(resp)
    else:
        advance(c.request(full_request(0, -1)))
    sent0, recv0, pid = c.sent, c.received, b.pid
    cpu0, t0, answered = cpu_seconds(pid), time.perf_counter(), 0
    for i in range(fetches):
        if busy:
            p = i % n_parts
            producer.request(ProduceRequest([ProducePartitionData(TOPIC, p, encode_kafka([b"x" * 100]))]))
        if incremental:
            parts = [FetchPartition(TOPIC, p, offsets[p], 1 << 20) for p in moved]
            resp = c.request(FetchRequest(parts, 0, 1, 50 << 20, session_id=session_id, session_epoch=epoch))
            assert resp.error_code == 0 and resp.session_id == session_id, resp.error_code
            epoch += 1
        else:
            resp = c.request(full_request(0, -1))
        answered += len(resp.partitions)
        moved = advance(resp)
    cpu, wall = cpu_seconds(pid) - cpu0, time.perf_counter() - t0
    out = {
        "req B/fetch": (c.sent - sent0) / fetches,
        "resp B/fetch": (c.received - recv0) / fetches,
        "partitions/answer": answered / fetches,
        "broker CPU us/fetch": cpu / fetches * 1e6,
        "wall us/fetch": wall / fetches * 1e6,
    }
    c.close()
    producer.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--fetches", type=int, default=2000)
    args = ap.parse_args(argv)
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedBroker(tmp, mode="process", config={"logsource.arrow.body.enable": "false"}) as b,
    ):
        admin = Client(b.bootstrap)
        resp = admin.request(CreateTopicsRequest([CreatableTopic(TOPIC, args.partitions, 1, {})]))
        assert resp.topics[0].error_code == 0, resp
        for p in range(args.partitions):
            admin.request(ProduceRequest([ProducePartitionData(TOPIC, p, encode_kafka([b"seed"]))]))
        admin.close()
        rows = []
        for busy in (False, True):
            for incremental in (False, True):
                r = run(b, args.partitions, args.fetches, incremental, busy)
                rows.append(("busy" if busy else "idle", "incremental" if incremental else "full", r))
    cols = list(rows[0][2])
    print(f"fetch sessions: {args.partitions} partitions, {args.fetches} fetches per row, one broker process")
    print(f"{'case':<6}{'fetch':<13}" + "".join(f"{c:>21}" for c in cols))
    for case, kind, r in rows:
        print(f"{case:<6}{kind:<13}" + "".join(f"{r[c]:>21,.1f}" for c in cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
