"""Cluster mode: replication's cost on produce throughput, and failover time after kill -9 of a leader.

One run starts a real ZooKeeper and 3 broker processes on loopback, then:

* **throughput**: an idempotent producer with ``acks=all`` sends the same records to a topic with
  replication factor 3 (``min.insync.replicas=2``) and to one with replication factor 1, on the same
  cluster, alternated ``--repeats`` times; the table shows MB/s and records/s of each and RF=3/RF=1
  (target >= 0.5 on a 2-core machine: every record is written three times and acknowledged only
  once two followers fetched it);
* **failover**: ``--kills`` times, the leader of a 1-partition RF=3 topic is killed with ``kill -9``
  while a producer is idle on it; a record sent right after the kill is timed until it is
  acknowledged (by the new leader, with the ISR's copies). That is ZooKeeper noticing the dead
  session (``zookeeper.session.timeout.ms``), the controller's election, the new leader taking
  over and the producer's metadata refresh and retry. The killed broker is restarted and the ISR
  waited for before the next round. Target: p50 <= 2 x zookeeper.session.timeout.ms.

    .venv/bin/python benchmarks/cluster.py
    .venv/bin/python benchmarks/cluster.py --session-ms 2000 --kills 10 --mb 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark_logsource.broker.cluster.zookeeper import ZooKeeperServer  # noqa: E402
from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402
from pyspark_logsource.client import Admin, Producer  # noqa: E402

BROKERS = 3


def wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = cond()
            if v:
                return v
        except Exception:  # a broker restarting
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def start_cluster(base: Path, session_ms: int) -> tuple[ZooKeeperServer, dict[int, EmbeddedBroker]]:
    zk = ZooKeeperServer(base / "zk", fsync=False).start()
    conf = {
        "zookeeper.connect": zk.connect + "/bench",
        "zookeeper.session.timeout.ms": str(session_ms),
        "replica.lag.time.max.ms": "2000",
        "replica.fetch.wait.max.ms": "100",
        "offsets.topic.num.partitions": "1",
    }
    brokers = {
        bid: EmbeddedBroker(base / f"broker-{bid}", mode="process", config={**conf, "broker.id": str(bid)})
        for bid in range(1, BROKERS + 1)
    }
    with ThreadPoolExecutor(BROKERS) as ex:
        list(ex.map(lambda b: b.start(), brokers.values()))
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    with Admin(bootstrap) as admin:
        wait_for(lambda: len(admin.cluster().brokers) == BROKERS, 60, "every broker registered")
    return zk, brokers


def full_isr(admin: Admin, topic: str, rf: int) -> bool:
    d = admin.describe_topic(topic)
    return all(p.leader >= 0 and len(p.isr) == rf for p in d.partitions)


def produce_rate(bootstrap: str, topic: str, total_bytes: int, size: int) -> tuple[float, float]:
    """(MB/s, records/s) of an acks=all idempotent producer sending ``total_bytes`` of ``size``-byte records."""
    value = b"v" * size
    n = total_bytes // size
    with Producer(bootstrap, acks="all", linger_ms=5, batch_size=256 * 1024) as p:
        p.send(topic, value).result(30)  # connections and metadata warm
        t0 = time.perf_counter()
        for _ in range(n):
            p.send(topic, value)
        p.flush(300)
        dt = time.perf_counter() - t0
    return n * size / dt / 1e6, n / dt


def failover_round(bootstrap: str, brokers: dict[int, EmbeddedBroker], admin: Admin, topic: str) -> float:
    """Kill the partition's leader; seconds until a record sent right after the kill is acknowledged."""
    leader = admin.describe_topic(topic).partitions[0].leader
    with Producer(
        bootstrap,
        acks="all",
        linger_ms=0,
        retry_backoff_ms=50,
        delivery_timeout_ms=120000,
        request_timeout_ms=10000,
    ) as p:
        p.send(topic, b"warm", partition=0).result(30)  # connected to the leader, metadata known
        brokers[leader].kill()
        t0 = time.perf_counter()
        p.send(topic, b"after-kill", partition=0).result(120)
        dt = time.perf_counter() - t0
    brokers[leader].start()
    wait_for(lambda: full_isr(admin, topic, BROKERS), 90, f"{topic}'s ISR back to {BROKERS}")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--session-ms", type=int, default=3000, help="zookeeper.session.timeout.ms of the brokers"
    )
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--mb", type=float, default=20.0, help="MB produced per throughput run")
    ap.add_argument("--size", type=int, default=200, help="record value size in bytes")
    ap.add_argument(
        "--repeats", type=int, default=3, help="throughput runs per replication factor (alternated)"
    )
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        t_start = time.perf_counter()
        zk, brokers = start_cluster(Path(tmp), args.session_ms)
        bootstrap = ",".join(b.bootstrap for b in brokers.values())
        try:
            with Admin(bootstrap) as admin:
                admin.create_topic(
                    "rf3", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
                )
                admin.create_topic("rf1", partitions=3, replication_factor=1)
                admin.create_topic(
                    "fo", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
                )
                for t, rf in (("rf3", 3), ("rf1", 1), ("fo", 3)):
                    wait_for(lambda t=t, rf=rf: full_isr(admin, t, rf), 60, f"{t} ready")
                total = int(args.mb * 1e6)
                rates: dict[str, list[tuple[float, float]]] = {"rf1": [], "rf3": []}
                for _ in range(args.repeats):
                    for t in ("rf1", "rf3"):
                        rates[t].append(produce_rate(bootstrap, t, total, args.size))
                times = []
                for i in range(args.kills):
                    times.append(failover_round(bootstrap, brokers, admin, "fo"))
                    print(f"  kill {i + 1}: {times[-1]:.3f} s", file=sys.stderr, flush=True)
        finally:
            for b in brokers.values():
                b.close()
            zk.close()
        wall = time.perf_counter() - t_start

    mb1 = statistics.median(r[0] for r in rates["rf1"])
    mb3 = statistics.median(r[0] for r in rates["rf3"])
    rec1 = statistics.median(r[1] for r in rates["rf1"])
    rec3 = statistics.median(r[1] for r in rates["rf3"])
    session = args.session_ms / 1000
    p50, worst = statistics.median(times), max(times)
    print(
        f"cluster: {BROKERS} broker processes + ZooKeeper on loopback; zookeeper.session.timeout.ms="
        f"{args.session_ms}; {args.mb:g} MB of {args.size}-byte records per run, median of {args.repeats}"
    )
    print()
    print(f"{'produce, acks=all, idempotent':<34}{'MB/s':>10}{'records/s':>14}{'ratio':>10}")
    print(f"{'RF=1 (3 partitions)':<34}{mb1:>10.1f}{rec1:>14,.0f}{1.0:>10.2f}")
    print(f"{'RF=3, min.insync.replicas=2':<34}{mb3:>10.1f}{rec3:>14,.0f}{mb3 / mb1:>10.2f}")
    print(f"{'target RF=3/RF=1':<34}{'':>10}{'':>14}{'>= 0.50':>10}")
    print()
    print(f"{'failover after kill -9 of the leader':<40}{'seconds':>10}{'x session':>12}")
    print(f"{'p50 over ' + str(len(times)) + ' kills':<40}{p50:>10.3f}{p50 / session:>12.2f}")
    print(f"{'max':<40}{worst:>10.3f}{worst / session:>12.2f}")
    print(f"{'target p50':<40}{'<= ' + format(2 * session, '.3f'):>10}{'<= 2.00':>12}")
    print()
    ok = mb3 / mb1 >= 0.5 and p50 <= 2 * session
    print(f"targets {'met' if ok else 'NOT met'}; wall time {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
