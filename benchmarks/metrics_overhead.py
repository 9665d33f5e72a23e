"""The cost of the broker's metrics: benchmarks/paper.py's producer, consumer and append rows against a broker
with ``metrics.listener`` set (every request counted, another process scraping it every ``--scrape-interval``
seconds, 5 by default as in conf/prometheus.yml) and one without, in one run, each row on and off back to
back, ``--rounds`` times. Each row prints both sides' median msg/s and broker CPU per message, and
on / off (the target: >= 0.95): by default the median over the rounds of each round's on/off ratio
(``--stat paired``), or the ratio of the best rates and least CPU (``--stat best``) or of the medians.

Why paired ratios: the two runs of a round run back to back, so drift on a shared machine (other
processes, writeback of the previous row's data, CPU frequency) hits both of a pair alike; the median
of the pairs then drops the rounds a burst hit. ``--control`` (an A/A run, metrics on neither broker)
shows how far apart two equal brokers land with the same settings. Both brokers are started anew each
round, in alternating order. The broker's CPU is read from the scheduler
(``/proc/<pid>/task/*/schedstat``, nanoseconds, every thread), not from the 10 ms tick of
``/proc/<pid>/stat``.

Rows: ``send()`` with one message per produce request (the worst case: the per-request cost is all there
is), ``send()`` with 50 per batch, ``send_arrow()`` batches of 50, the consumer (``poll_arrow`` and
``poll``), and "append": a synchronous client producing 50-message batches one request at a time (request
-> append -> answer, nothing overlapped). ``PartitionLog.append`` alone (paper.py's append row) does not go
through the network layer, where the counters are, so it is not repeated here.

    .venv/bin/python benchmarks/metrics_overhead.py                       # 1,000,000 messages, 9 rounds
    .venv/bin/python benchmarks/metrics_overhead.py --messages 50000 --rounds 2
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paper import (
    arrow_chunks,
    consume,
    produce_arrow,
    produce_send,
    produce_sync_baseline,
    values,
)  # noqa: E402

from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402
from pyspark_logsource.client import Admin  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """CPU seconds of every thread of a process so far, from the scheduler's nanosecond counters."""
    ns = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            ns += int(Path(f).read_text().split()[0])
        except (OSError, ValueError, IndexError):  # a thread that ended between the glob and the read
            pass
    return ns / 1e9


SCRAPE_LOOP = """
import sys, time, urllib.request
url = sys.argv[1]
while True:
    with urllib.request.urlopen(url, timeout=10) as r:
        r.read()
    time.sleep(float(sys.argv[2]))
"""


def rows(bs: str, n: int, n1: int, msgs: list, chunks: list, tag: str) -> dict:
    """The rows' runs against the broker at ``bs``: name -> (messages, a callable returning msg/s); topics
    per ``tag``."""
    with Admin(bs) as a:
        for t in ("p1", "p50", "a50", "sync50"):
            a.create_topic(f"{t}-{tag}", 1)

    def consumer(arrow: bool) -> float:
        dt, got = consume(bs, f"p50-{tag}", n, arrow)
        return got / dt

    return {
        "producer: send(), 1 msg/request": (
            n1,
            lambda: n1 / produce_send(bs, f"p1-{tag}", msgs[:n1], 1, 5, 1),
        ),
        "producer: send(), batch 50": (n, lambda: n / produce_send(bs, f"p50-{tag}", msgs, 50, 5, 8)),
        "producer: send_arrow(), batch 50": (n, lambda: n / produce_arrow(bs, f"a50-{tag}", chunks, 5, 8)),
        "consumer: poll_arrow()": (n, lambda: consumer(True)),
        "consumer: poll()": (n, lambda: consumer(False)),
        "append: sync produce, batch 50": (
            n,
            lambda: n / produce_sync_baseline(bs, f"sync50-{tag}", msgs, 50),
        ),
    }


def one_round(
    r: int, args: argparse.Namespace, n: int, n1: int, msgs: list, chunks: list, rates: dict, cpu: dict
) -> None:
    """Round ``r``: a broker with metrics and one without, every row on both, appended to ``rates`` (msg/s)
    and ``cpu`` (the broker's CPU us per message)."""
    port = free_port()
    config = {"on": {} if args.control else {"metrics.listener": f"http://127.0.0.1:{port}"}, "off": {}}
    with contextlib.ExitStack() as stack:
        d = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        brokers = {
            side: stack.enter_context(EmbeddedBroker(d / side, mode="process", config=config[side]))
            for side in (("on", "off") if r % 2 == 0 else ("off", "on"))
        }
        if not args.control:  # Prometheus' part: a scrape every --scrape-interval s, from another process
            url = f"http://127.0.0.1:{port}/metrics"
            scraper = subprocess.Popen([sys.executable, "-c", SCRAPE_LOOP, url, str(args.scrape_interval)])
            stack.callback(scraper.kill)
        runs = {side: rows(b.bootstrap, n, n1, msgs, chunks, str(r)) for side, b in brokers.items()}
        for i, row in enumerate(runs["on"]):
            # each row on and off back to back, the order alternating: drift on a shared machine (other
            # processes, page cache, CPU frequency) hits both sides alike
            for side in ("on", "off") if (r + i) % 2 == 0 else ("off", "on"):
                count, run = runs[side][row]
                c0 = cpu_seconds(brokers[side].pid)
                rates[side].setdefault(row, []).append(run())
                used = cpu_seconds(brokers[side].pid) - c0
                cpu[side].setdefault(row, []).append(used / count * 1e6)
        assert args.control or scraper.poll() is None, "the scraper failed"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--batch1-messages", type=int, default=50_000, help="messages of the 1-per-request rows")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument(
        "--stat",
        choices=("paired", "best", "median"),
        default="paired",
        help="on/off: the median of the rounds' on/off ratios (default), of the best rates and least CPU, "
        "or of the medians",
    )
    ap.add_argument(
        "--scrape-interval", type=float, default=5.0, help="seconds between scrapes (conf/prometheus.yml: 5)"
    )
    ap.add_argument(
        "--control",
        action="store_true",
        help="an A/A run: the 'on' broker without metrics too, to show how far apart two equal brokers land",
    )
    args = ap.parse_args(argv)
    n, n1 = args.messages, min(args.batch1_messages, args.messages)
    msgs, chunks = values(n), arrow_chunks(n, 50)
    rates: dict[str, dict[str, list[float]]] = {"on": {}, "off": {}}
    cpu: dict[str, dict[str, list[float]]] = {"on": {}, "off": {}}  # the broker's CPU us per message
    for r in range(args.rounds):
        # both brokers anew each round, started in alternating order: what differs between two processes
        # of the same code (start order, heap layout, hash seed, the core they land on) then falls on both
        # sides alike instead of on one side for the whole run
        one_round(r, args, n, n1, msgs, chunks, rates, cpu)
        print(f"round {r + 1} done", file=sys.stderr)
    if args.control:
        print("A/A CONTROL: neither broker has metrics; on/off shows the noise between two equal brokers")
    print(
        f"{n:,} messages of 200 bytes ({n1:,} for the 1-per-request row), {args.rounds} rounds, on/off: {args.stat}"
    )
    print(
        "msg/s: the row's median rate; us/msg: the broker process's CPU (user + system) per message, median;"
    )
    print("on/off: on's rate / off's, and off's CPU / on's")
    print(
        f"{'row':<34} {'on msg/s':>10} {'off msg/s':>10} {'on/off':>7} {'on us/msg':>10} {'off us/msg':>11} {'on/off':>7}"
    )
    med = statistics.median
    for row, on_rates in rates["on"].items():
        off_rates, on_cpu, off_cpu = rates["off"][row], cpu["on"][row], cpu["off"][row]
        if args.stat == "paired":
            rate_ratio = med(a / b for a, b in zip(on_rates, off_rates, strict=True))
            cpu_ratio = med(b / a for a, b in zip(on_cpu, off_cpu, strict=True) if a)
        elif args.stat == "best":
            rate_ratio, cpu_ratio = max(on_rates) / max(off_rates), min(off_cpu) / min(on_cpu)
        else:
            rate_ratio, cpu_ratio = med(on_rates) / med(off_rates), med(off_cpu) / med(on_cpu)
        print(
            f"{row:<34} {med(on_rates):>10,.0f} {med(off_rates):>10,.0f} {rate_ratio:>7.3f} "
            f"{med(on_cpu):>10.2f} {med(off_cpu):>11.2f} {cpu_ratio:>7.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
