"""Benchmark of the demo's event path: generating web events and producing them, in one run.

    .venv/bin/python benchmarks/demo_events.py [--events 1000000] [--baseline-events 100000]

Generation: the vectorized generator (numpy + one Arrow string kernel per chunk)
against a per-record Python loop that builds the same JSON with ``json.dumps``
(the baseline, run on fewer events and compared per event). Producing: the
generated tables sent with ``Producer.send_arrow`` against the same events sent
with ``Producer.send`` one record at a time, both to an embedded broker in a
child process, each waiting until every record is acknowledged.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from pyspark_logsource import Admin, EmbeddedBroker, Producer
from pyspark_logsource.demo.events import EventGenerator


def loop_generate(n: int, gen: EventGenerator) -> list[tuple[bytes, bytes, int]]:
    """The baseline: one Python dict and one json.dumps per event, same vocabularies and laws."""
    rng = np.random.default_rng(1)
    users = gen._user_vocab.to_pylist()
    pages = gen._page_vocab.to_pylist()
    refs = gen._ref_vocab.to_pylist()
    uas = gen._ua_vocab.to_pylist()
    countries = gen._country_vocab.to_pylist()
    out = []
    t = gen.start_ms
    for _ in range(n):
        u = users[min(int(np.searchsorted(gen._user_cdf, rng.random())), len(users) - 1)]
        t += 3
        ev = {
            "event": "page_view",
            "user_id": u,
            "page": pages[min(int(np.searchsorted(gen._page_cdf, rng.random())), len(pages) - 1)],
            "referrer": refs[min(int(np.searchsorted(gen._ref_cdf, rng.random())), len(refs) - 1)],
            "user_agent": uas[min(int(np.searchsorted(gen._ua_cdf, rng.random())), len(uas) - 1)],
            "country": countries[
                min(int(np.searchsorted(gen._country_cdf, rng.random())), len(countries) - 1)
            ],
            "duration_ms": int(rng.lognormal(8.5, 1.0)),
            "ts": t,
        }
        out.append((u.encode(), json.dumps(ev, separators=(",", ":")).encode(), t))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--baseline-events", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=4)
    a = ap.parse_args()

    gen = EventGenerator(seed=1)
    t0 = time.perf_counter()
    tables = list(gen.chunks(a.events, 50_000))
    vec_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    records = loop_generate(a.baseline_events, gen)
    loop_s = time.perf_counter() - t0

    with EmbeddedBroker(mode="process") as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("arrow", partitions=a.partitions)
            admin.create_topic("records", partitions=a.partitions)
        with Producer(broker.bootstrap) as p:
            t0 = time.perf_counter()
            futures = [f for t in tables for f in p.send_arrow("arrow", t)]
            p.flush(timeout=600)
            acked = sum(last - base + 1 for _, base, last in (f.result(60) for f in futures))
            arrow_s = time.perf_counter() - t0
        assert acked == a.events, acked
        with Producer(broker.bootstrap) as p:
            t0 = time.perf_counter()
            futures = [p.send("records", v, key=k, timestamp_ms=ts) for k, v, ts in records]
            p.flush(timeout=600)
            for f in futures:
                f.result(60)
            send_s = time.perf_counter() - t0

    rows = [
        ("generate events", a.events, vec_s, "python loop + json.dumps", a.baseline_events, loop_s),
        ("produce + ack all", a.events, arrow_s, "send() per record", a.baseline_events, send_s),
    ]
    print(
        f"demo event path - {platform.node()}, {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )
    print(
        f"{'what':<18} {'events':>9} {'ev/s':>12} | {'baseline':<26} {'events':>8} {'ev/s':>10} | {'ratio':>6}"
    )
    for what, n, s, base, bn, bs in rows:
        rate, brate = n / s, bn / bs
        print(
            f"{what:<18} {n:>9,} {rate:>12,.0f} | {base:<26} {bn:>8,} {brate:>10,.0f} | {rate / brate:>5.1f}x"
        )


if __name__ == "__main__":
    main()
