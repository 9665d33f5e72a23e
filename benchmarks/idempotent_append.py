"""The log's coalesced append of one-message runs, idempotent vs plain, pure-Python vs compiled, same run.

    .venv/bin/python benchmarks/idempotent_append.py [--batches 48000] [--per-read 16] [--rounds 3]

What a broker's append costs per one-message produce request with the network taken away: runs of
one Arrow-body batch each (200-byte values), ``--per-read`` runs per ``PartitionLog.append_runs``
call, as a pipelining producer's requests arrive in one read. ``idempotent``: an idempotent producer's
batches (producer id, epoch, consecutive sequences: the producer checks, stage and commit); ``plain``:
no producer id (a Kafka client without idempotence, the raw client of broker_produce.py). Each path
runs in its own process (``LOGSOURCE_NO_EXTENSIONS=1`` for the pure one), alternated over the rounds;
printed: the thread CPU per batch (best of the rounds) and the ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def measure(idempotent: bool, batches: int, per_read: int) -> float:
    """Thread CPU microseconds per batch of appending ``batches`` one-batch runs, ``per_read`` per call."""
    from pyspark_logsource.broker.log.config import LogConfig
    from pyspark_logsource.broker.log.log import PartitionLog
    from pyspark_logsource.format import encode

    value = os.urandom(200)
    kw = {}
    runs = []
    for i in range(batches):
        if idempotent:
            kw = {"producer_id": 7, "producer_epoch": 0, "base_sequence": i}
        runs.append(bytearray(encode([value], **kw)))
    groups = [runs[i : i + per_read] for i in range(0, batches, per_read)]
    with tempfile.TemporaryDirectory() as d:
        log = PartitionLog(Path(d) / "t-0", LogConfig(segment_bytes=1 << 30), "t", 0)
        try:
            t0 = time.thread_time()
            for g in groups:
                out = log.append_runs(g)
            cpu = time.thread_time() - t0
            if any(isinstance(o, Exception) for o in out):
                raise SystemExit(f"append failed: {out[:2]}")
        finally:
            log.close()
    return cpu / batches * 1e6


def child(path: str, idempotent: bool, batches: int, per_read: int) -> float:
    env = dict(os.environ)
    if path == "python":
        env["LOGSOURCE_NO_EXTENSIONS"] = "1"
    else:
        env.pop("LOGSOURCE_NO_EXTENSIONS", None)
    out = subprocess.run(
        [sys.executable, __file__, "--child", "idempotent" if idempotent else "plain"]
        + ["--batches", str(batches), "--per-read", str(per_read)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=48_000)
    ap.add_argument("--per-read", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", choices=["idempotent", "plain"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(measure(args.child == "idempotent", args.batches, args.per_read))
        return 0
    best: dict[tuple[str, str], float] = {}
    for r in range(args.rounds):
        for path in ("python", "compiled"):
            for kind in ("plain", "idempotent"):
                us = child(path, kind == "idempotent", args.batches, args.per_read)
                print(f"  round {r + 1}: {kind:10s} {path:8s} {us:6.2f} us/batch", flush=True)
                best[(kind, path)] = min(us, best.get((kind, path), us))
    print(
        f"\nappend_runs, {args.per_read} one-message runs per call, {args.batches:,} batches, best of {args.rounds}"
    )
    print(f"{'runs':10s} {'python':>10s} {'compiled':>10s} {'python/compiled':>16s}")
    for kind in ("plain", "idempotent"):
        p, c = best[(kind, "python")], best[(kind, "compiled")]
        print(f"{kind:10s} {p:8.2f}us {c:8.2f}us {p / c:15.2f}x")
    for path in ("python", "compiled"):
        ratio = best[("idempotent", path)] / best[("plain", path)]
        print(f"idempotent / plain, {path}: {ratio:.2f}x")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
