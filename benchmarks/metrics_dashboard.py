"""A dashboard drawn from a real run: a broker's ``/metrics`` scraped every second while a steady producer,
a lagging consumer group and a backfill producer run, then put under a produce quota; the PNG shows
throughput, lag and throttle time over time, as the Grafana dashboard in conf/ would.

Timeline (``--seconds``, 45 by default, in fractions of it): a producer ``app`` sends at ``--rate`` msg/s
throughout; the group ``reporting`` reads at a third of that until 45% (its lag grows), then at full
speed (it drains); a producer ``backfill`` sends at
``--backfill-rate`` (5 MB/s) from 20%; at 55% a produce quota of
``--quota`` bytes/s is set on client-id ``backfill`` through AlterClientQuotas, and the broker throttles it.

    .venv/bin/python benchmarks/metrics_dashboard.py                   # writes conf/metrics-dashboard.png
    .venv/bin/python benchmarks/metrics_dashboard.py --seconds 30 --out /tmp/d.png
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402
from pyspark_logsource.client import Admin, Consumer, Producer  # noqa: E402

TOPIC = "dashboard-events"
VALUE = b"x" * 200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(url: str) -> dict[str, dict[tuple, float]]:
    """One scrape: sample name -> label tuple -> value."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out: dict[str, dict[tuple, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name][tuple(sorted(s.labels.items()))] = s.value
    return out


def total(sample: dict[tuple, float] | None, **match: str) -> float:
    """The sum of the series whose labels include ``match``."""
    if not sample:
        return 0.0
    return sum(v for labels, v in sample.items() if all((k, m) in labels for k, m in match.items()))


def per_second(now: dict, before: dict, dt: float, counter: str) -> float:
    """A counter's increase per second between two scrapes (summed over its series)."""
    return (total(now.get(counter)) - total(before.get(counter))) / dt


def by_label(sample: dict[tuple, float] | None, label: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for labels, v in (sample or {}).items():
        d = dict(labels)
        if label in d:
            out[d[label]] += v
    return out


def paced_producer(bs: str, client_id: str, rate: float | None, stop: threading.Event) -> None:
    """Send 200-byte messages at ``rate`` msg/s (None: as fast as the broker lets it)."""
    with Producer(bs, client_id=client_id, linger_ms=5, batch_size=64 * 1024) as p:
        start, sent = time.monotonic(), 0
        while not stop.is_set():
            for _ in range(100):
                p.send(TOPIC, VALUE)
            sent += 100
            if rate is not None:
                ahead = sent / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
        p.flush()


def lagging_group(bs: str, slow_until: float, rate: float, stop: threading.Event) -> None:
    """The group ``reporting``: at most ``rate`` msg/s until ``slow_until`` (monotonic), then all it can."""
    c = Consumer(bs, group_id="reporting", client_id="reporting", auto_commit_interval_ms=500)
    c.subscribe([TOPIC])
    start, got = time.monotonic(), 0
    try:
        while not stop.is_set():
            slow = time.monotonic() < slow_until
            got += len(c.poll(timeout_ms=200, max_records=200 if slow else 5000))
            if slow:
                ahead = got / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
    finally:
        c.close()


def set_produce_quota(bs: str, client_id: str, byte_rate: float) -> None:
    """AlterClientQuotas: ``producer_byte_rate`` for client-id ``client_id``."""
    with Admin(bs) as a:
        a.alter_client_quotas({(("client-id", client_id),): {"producer_byte_rate": byte_rate}})


def draw(series: dict[str, list], events: list[tuple[float, str]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = series["t"]
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    ax = axes[0]
    for name in sorted(series["bytes_in"]):
        ax.plot(t, [v / 1e6 for v in series["bytes_in"][name]], label=f"bytes in: {name}")
    ax.plot(t, [v / 1e6 for v in series["bytes_out"]], label="bytes out (consumers)", linestyle="--")
    for group, values in sorted(series["quota_rate"].items()):
        ax.plot(t, [v / 1e6 for v in values], label=f"kafka_server_produce_byte_rate: {group}", linestyle=":")
    ax.set_ylabel("MB/s")
    ax.set_title("kafka_server_brokertopicmetrics_bytesin_total / bytesout_total, per second")
    ax.legend(loc="upper left", fontsize=8)
    for ax, key, unit, title in (
        (axes[1], "lag", "messages", "kafka_consumergroup_lag (sum over partitions)"),
        (axes[2], "throttle", "ms", "kafka_server_produce_throttle_time per quota group (client_id)"),
    ):
        for group, values in sorted(series[key].items()):
            ax.plot(t, values, label=group)
        ax.set_ylabel(unit)
        ax.set_title(title)
        if series[key]:
            ax.legend(loc="upper left", fontsize=8)
    axes[2].set_xlabel("seconds")
    for ax in axes:
        for at, label in events:
            ax.axvline(at, color="grey", linewidth=0.8)
            ax.text(at, ax.get_ylim()[1] * 0.92, " " + label, fontsize=7, color="grey")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=45.0)
    ap.add_argument("--rate", type=float, default=5000.0, help="the steady producer's msg/s")
    ap.add_argument("--backfill-rate", type=float, default=25000.0, help="the backfill's msg/s unthrottled")
    ap.add_argument("--quota", type=float, default=1_000_000.0, help="backfill's producer_byte_rate")
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent.parent / "conf/metrics-dashboard.png"
    )
    args = ap.parse_args(argv)
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    with EmbeddedBroker(mode="process", config={"metrics.listener": f"http://127.0.0.1:{port}"}) as broker:
        bs = broker.bootstrap
        with Admin(bs) as a:
            a.create_topic(TOPIC, 2)
        span = args.seconds
        t0 = time.monotonic()
        stop, backfill_stop = threading.Event(), threading.Event()
        threads = [
            threading.Thread(target=paced_producer, args=(bs, "app", args.rate, stop), daemon=True),
            threading.Thread(
                target=lagging_group, args=(bs, t0 + 0.45 * span, args.rate / 3, stop), daemon=True
            ),
        ]
        backfill = threading.Thread(
            target=paced_producer, args=(bs, "backfill", args.backfill_rate, backfill_stop), daemon=True
        )
        for th in threads:
            th.start()
        series: dict = {"t": [], "bytes_in": defaultdict(list), "bytes_out": [], "lag": defaultdict(list)}
        series["throttle"] = defaultdict(list)
        series["quota_rate"] = defaultdict(list)
        events: list[tuple[float, str]] = []
        prev: dict | None = None
        prev_t = 0.0
        quota_set = False
        while (now := time.monotonic() - t0) < span:
            if not backfill.is_alive() and now >= 0.2 * span and not backfill_stop.is_set():
                backfill.start()
                events.append((now, "backfill starts"))
            if not quota_set and now >= 0.55 * span:
                set_produce_quota(bs, "backfill", args.quota)
                quota_set = True
                events.append((now, f"quota {args.quota / 1e6:g} MB/s on backfill"))
            s = scrape(url)
            if prev is not None:
                dt = now - prev_t
                series["t"].append(now)

                series["bytes_in"]["all producers"].append(
                    per_second(s, prev, dt, "kafka_server_brokertopicmetrics_bytesin_total")
                )
                series["bytes_out"].append(
                    per_second(s, prev, dt, "kafka_server_brokertopicmetrics_bytesout_total")
                )
                for group, lag in by_label(s.get("kafka_consumergroup_lag"), "consumergroup").items():
                    series["lag"][group].append(lag)
                for group, ms in by_label(s.get("kafka_server_produce_throttle_time"), "client_id").items():
                    series["throttle"][group].append(ms)
                for group, bps in by_label(s.get("kafka_server_produce_byte_rate"), "client_id").items():
                    series["quota_rate"][group].append(bps)
            prev, prev_t = s, now
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t0 - now)))
        stop.set()
        backfill_stop.set()
        for th in [*threads, backfill]:
            if th.is_alive():
                th.join(timeout=30)
    for key in ("lag", "throttle", "quota_rate"):
        n = len(series["t"])
        series[key] = {k: ([0.0] * (n - len(v)) + v) for k, v in series[key].items()}
    draw(series, events, args.out)
    print("| series | first | peak | last |\n|---|---|---|---|")
    for name, values in [("bytes in MB/s", [v / 1e6 for v in series["bytes_in"]["all producers"]])] + [
        (f"lag {g}", v) for g, v in series["lag"].items()
    ]:
        if values:
            print(f"| {name} | {values[0]:,.1f} | {max(values):,.1f} | {values[-1]:,.1f} |")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
