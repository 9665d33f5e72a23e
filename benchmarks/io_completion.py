"""The producer's I/O-thread work per answered one-batch request, pure-Python vs compiled, same run.

    .venv/bin/python benchmarks/io_completion.py [--batches 100000] [--repeat 3] [--base TREE]

What the client's I/O thread does per answer at batch size 1 besides reading the socket, without a
broker: ``match``, the answers of one read matched to the pending requests and their write times
summed (``BrokerConnection._dispatch``'s steps); ``complete``, ``OneBatchAnswer.answer_many`` over
runs of 60 appended answers (the batches matched, settled in the idempotent producer's sequences,
their memory released and their futures resolved). The batches are made first, all of them, as the
benchmark's producer makes them ahead of the answers; each run is numbered, and its answer callbacks
and answers made, just before it is answered, as the sender and the decode make them. Each path runs
in its own child process (``LOGSOURCE_NO_EXTENSIONS=1`` for the pure one; ``--base``: the compiled
path of another source tree), the paths alternated; best of ``--repeat``; microseconds per batch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = 60  # answers per read, as the I/O thread gets them at batch 1 with 64 in flight


def _match_inline(answers: list, pending: deque) -> tuple[list, int, int]:
    """BrokerConnection._dispatch's match loop before client/dispatch.py (for --base)."""
    pop, done, throttle, throttle_sum = pending.popleft, [], 0, 0
    for r in answers:
        cid, cb, _ = pop()
        if cid != r.correlation_id:
            raise ValueError(cid)
        t = r.throttle_time_ms
        if t:
            throttle_sum += t
            if t > throttle:
                throttle = t
        done.append((cb, r))
    return done, throttle_sum, throttle


def _pop_inline(sent_at: deque, n: int) -> tuple[float, float]:
    """BrokerConnection._answered_stats's loop before client/dispatch.py (for --base)."""
    pop = sent_at.popleft
    first = total = pop()
    for _ in range(n - 1):
        total += pop()
    return first, total


def child(n: int) -> dict[str, float]:
    """The rows on this process's path: microseconds per batch."""
    try:
        from pyspark_logsource.client.dispatch import match_answers, pop_times
    except ImportError:  # a tree from before client/dispatch.py: _dispatch's loops as it had them inline
        match_answers, pop_times = _match_inline, _pop_inline
    from pyspark_logsource.client.accumulator import CompiledAccumulator, RecordAccumulator
    from pyspark_logsource.client.answers import OneBatchAnswer
    from pyspark_logsource.client.metrics import ClientMetrics
    from pyspark_logsource.client.sender import Sender, SenderSettings
    from pyspark_logsource.protocol.connection import ANSWER_TYPES

    answer = sorted(ANSWER_TYPES, key=lambda t: t.__module__.endswith("_canswers"))[-1]
    acc = (CompiledAccumulator or RecordAccumulator)(
        batch_size=1, linger_ms=0, buffer_memory=1 << 30, max_block_ms=1000
    )
    sender = Sender(acc, None, SenderSettings(True, 1, 0, 5, 0.1, 120.0, 30000, 1 << 20, 1), print)  # type: ignore[arg-type]
    sender.stats = ClientMetrics()
    sender.sequences.set_producer(7, 0)
    with acc.lock:
        batches = [acc.add_alone("p1", 0, b"x" * 200, 0, 216) for _ in range(n)]
    for q in acc.ready.values():
        q.clear()
    match = complete = 0.0
    for k in range(0, n, RUN):
        chunk = batches[k : k + RUN]
        done, *_ = sender.sequences.number_round(chunk, 0, len(chunk), {}, lambda *a: None)
        pending = deque((k + i, OneBatchAnswer(sender, b), 1.0) for i, b in enumerate(done))
        sent_at = deque([1.0] * len(done))
        run = [answer(k + i, "p1", 0, 0, k + i, -1, 0, 0) for i in range(len(done))]
        t0 = time.perf_counter()
        matched, _, _ = match_answers(run, pending)
        pop_times(sent_at, len(matched))
        t1 = time.perf_counter()
        OneBatchAnswer.answer_many(matched)
        t2 = time.perf_counter()
        match += t1 - t0
        complete += t2 - t1
    assert all(b.outcome is not None for b in batches) and acc.used == 0
    return {"match": match / n * 1e6, "complete": complete / n * 1e6}


def run_child(n: int, pure: bool, tree: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("LOGSOURCE_NO_EXTENSIONS", None)
    if pure:
        env["LOGSOURCE_NO_EXTENSIONS"] = "1"
    code = f"import json, sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import io_completion as m; print(json.dumps(m.child({n})))"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tree, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the {'pure' if pure else 'compiled'} run of {tree} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", metavar="TREE", help="also the compiled path of another source tree (built)")
    args = ap.parse_args(argv)
    paths = [("python", True, ROOT), ("compiled", False, ROOT)]
    if args.base:
        paths.append(("base", False, Path(args.base).resolve()))
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.repeat):
        for name, pure, tree in paths:
            got = run_child(args.batches, pure, tree)
            best[name] = {k: min(v, best.get(name, {}).get(k, v)) for k, v in got.items()}
    print(
        f"I/O thread per answered one-batch request ({args.batches:,} batches, runs of {RUN}), best of {args.repeat}"
    )
    print(f"{'path':<10}{'match us':>10}{'complete us':>13}{'total us':>10}")
    for name, rows in best.items():
        print(f"{name:<10}{rows['match']:>10.3f}{rows['complete']:>13.3f}{sum(rows.values()):>10.3f}")
    py, co = sum(best["python"].values()), sum(best["compiled"].values())
    print(f"compiled / python: {py / co:.2f}x less")
    if args.base:
        print(f"compiled / base: {sum(best['base'].values()) / co:.2f}x less")
    return 0


if __name__ == "__main__":
    sys.exit(main())
