"""OffsetCommit latency: a single broker against a 3-broker cluster whose ``__consumer_offsets`` is replicated.

In a cluster a commit is answered once the ISR of the group's ``__consumer_offsets`` partition has it
(three copies, all in sync): one follower fetch round more than on a single broker, where
the append is the commit. Each run is one consumer committing 8 partitions synchronously, ``--commits``
times; the single broker and the cluster are measured alternately (``--repeats``), medians reported.

``--base DIR`` adds the single broker of another checkout (e.g. ``git archive <rev> | tar -x -C DIR``),
run in the same way: the side-by-side ratio shows the single broker kept its speed.

    .venv/bin/python benchmarks/group_commits.py
    .venv/bin/python benchmarks/group_commits.py --base /tmp/base --commits 2000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cluster import start_cluster, wait_for  # noqa: E402  (benchmarks/cluster.py)

from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402
from pyspark_logsource.client import Admin, Consumer  # noqa: E402

PARTITIONS = 8


@contextmanager
def cwd(path: Path | None):
    """Broker processes run ``python -m pyspark_logsource.broker`` from the working directory: another
    checkout's broker is started from there."""
    old = os.getcwd()
    if path is not None:
        os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def commit_rate(bootstrap: str, group: str, n: int) -> tuple[float, float]:
    """(commits/s, p50 ms) of ``n`` synchronous commits of every partition of topic ``c``."""
    parts = [("c", p) for p in range(PARTITIONS)]
    with Consumer(bootstrap, group_id=group, enable_auto_commit=False) as cons:
        cons.assign(parts)
        cons.commit({tp: 0 for tp in parts})  # coordinator found, connections warm
        lat = []
        t0 = time.perf_counter()
        for i in range(1, n + 1):
            t = time.perf_counter()
            cons.commit({tp: i for tp in parts})
            lat.append(time.perf_counter() - t)
        dt = time.perf_counter() - t0
        assert cons.committed(("c", 0)) == n
    return n / dt, statistics.median(lat) * 1000


def single(base_dir: Path, checkout: Path | None) -> EmbeddedBroker:
    b = EmbeddedBroker(base_dir, mode="process", config={"offsets.topic.num.partitions": "1"})
    with cwd(checkout):
        b.start()
    with Admin(b.bootstrap) as admin:
        admin.create_topic("c", partitions=PARTITIONS)
    return b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=1000, help="commits per run")
    ap.add_argument("--repeats", type=int, default=3, help="runs per setup (alternated)")
    ap.add_argument("--base", type=Path, default=None, help="another checkout whose single broker to compare")
    args = ap.parse_args()
    rates: dict[str, list[tuple[float, float]]] = {"single": [], "base": [], "cluster": []}
    with tempfile.TemporaryDirectory(prefix="bench-commits-") as tmp:
        zk, brokers = start_cluster(Path(tmp), 3000)
        bootstrap = ",".join(b.bootstrap for b in brokers.values())
        one = single(Path(tmp) / "single", None)
        base = single(Path(tmp) / "base", args.base.resolve()) if args.base else None
        try:
            with Admin(bootstrap) as admin:
                admin.create_topic(
                    "c", partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"}
                )
                # the offsets topic is made on the first FindCoordinator; commits wait until it is led
                wait_for(
                    lambda: admin._client.coordinator("warm", refresh=True) >= 0, 60, "a group coordinator"
                )
            for r in range(args.repeats):
                rates["single"].append(commit_rate(one.bootstrap, f"g{r}", args.commits))
                if base is not None:
                    rates["base"].append(commit_rate(base.bootstrap, f"g{r}", args.commits))
                rates["cluster"].append(commit_rate(bootstrap, f"g{r}", args.commits))
        finally:
            for b in [one, base, *brokers.values()]:
                if b is not None:
                    b.close()
            zk.close()

    def med(k: str, i: int) -> float:
        return statistics.median(x[i] for x in rates[k])

    print(
        f"\nOffsetCommit of {PARTITIONS} partitions, synchronous, {args.commits} per run, "
        f"median of {args.repeats} (this machine: 2 cores, shared)\n"
    )
    print("| setup | commits/s | p50 latency | ratio to single broker |")
    print("|---|---|---|---|")
    s = med("single", 0)
    print(f"| single broker | {s:.0f} | {med('single', 1):.2f} ms | 1.00 |")
    if rates["base"]:
        print(
            f"| single broker, --base checkout | {med('base', 0):.0f} | {med('base', 1):.2f} ms | "
            f"{med('base', 0) / s:.2f} |"
        )
    print(
        f"| 3-broker cluster, replicated `__consumer_offsets` (RF 3, answered once the 3 in-sync copies have it) | {med('cluster', 0):.0f} | "
        f"{med('cluster', 1):.2f} ms | {med('cluster', 0) / s:.2f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
