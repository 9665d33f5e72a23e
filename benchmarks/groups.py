"""Consumer-group rebalance time against a broker process, with member processes (tests/support/group_member.py).

A topic of 6 partitions and 3 members (our Consumer) in one group; then, 10 times (``--rounds``):

* **join**: a 4th member process starts; timed from its ``subscribe()`` (after the interpreter's start-up)
  until every member holds its partitions of the new generation (the last member's ``on_assign``);
* **death**: that member is killed with ``kill -9``; timed from the kill until the 3 survivors own all 6
  partitions again. This is session.timeout.ms (the coordinator's only sign of a dead member) plus the
  heartbeat that tells the survivors, plus the rebalance itself.

    .venv/bin/python benchmarks/groups.py
    .venv/bin/python benchmarks/groups.py --rounds 5 --session-ms 3000

Target (the issue's): a join rebalances in <= 1 s plus the heartbeat interval.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark_logsource import Admin  # noqa: E402
from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402

MEMBER = Path(__file__).resolve().parent.parent / "tests" / "support" / "group_member.py"
PARTITIONS = 6


class Member:
    """A member process and its output file (``A time p,p`` per assignment, ``S time`` at subscribe)."""

    def __init__(self, bootstrap: str, out: Path, session_ms: int) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [sys.executable, str(MEMBER), bootstrap, "bench", "t", str(out), str(session_ms)],
            stderr=subprocess.DEVNULL,
        )

    def lines(self, kind: str) -> list[list[str]]:
        if not self.out.exists():
            return []
        return [ln.split() for ln in self.out.read_text().splitlines() if ln.startswith(kind + " ")]

    def assignment_since(self, t: float) -> tuple[float, set[int]] | None:
        """The latest assignment made after ``t``: (when, partitions)."""
        a = [ln for ln in self.lines("A") if float(ln[1]) >= t]
        if not a:
            return None
        return float(a[-1][1]), {int(p) for p in a[-1][2].split(",")} if len(a[-1]) > 2 else set()


def settled(members: list[Member], since: float) -> float | None:
    """When every member got its assignment of one generation after ``since`` (each partition owned once)."""
    got = [m.assignment_since(since) for m in members]
    if any(x is None for x in got):
        return None
    owned = sorted(p for _, ps in got for p in ps)  # type: ignore[misc]
    return max(t for t, _ in got) if owned == list(range(PARTITIONS)) else None  # type: ignore[misc]


def wait_settled(members: list[Member], since: float, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = settled(members, since)
        if t is not None:
            return t - since
        time.sleep(0.02)
    raise SystemExit(f"the group did not settle within {timeout}s")


def wait_subscribed(m: Member, timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = m.lines("S")
        if s:
            return float(s[-1][1])
        time.sleep(0.02)
    raise SystemExit("a member process did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--session-ms", type=int, default=2000, help="session.timeout.ms of the members")
    ap.add_argument("--no-cleaner", action="store_true", help="skip the log cleaner's throughput rows")
    args = ap.parse_args()
    heartbeat_ms = max(100, args.session_ms // 6)  # as tests/support/group_member.py sets it
    joins, deaths = [], []
    with tempfile.TemporaryDirectory() as d, EmbeddedBroker(Path(d) / "broker", mode="process") as b:
        Admin(b.bootstrap).create_topic("t", partitions=PARTITIONS)
        base = [Member(b.bootstrap, Path(d) / f"m{i}", args.session_ms) for i in range(3)]
        t0 = min(wait_subscribed(m) for m in base)
        wait_settled(base, t0, 60)
        for r in range(args.rounds):
            new = Member(b.bootstrap, Path(d) / f"n{r}", args.session_ms)
            s = wait_subscribed(new)
            joins.append(wait_settled([*base, new], s, 30))
            time.sleep(0.3)
            killed = time.time()
            os.kill(new.proc.pid, signal.SIGKILL)
            new.proc.wait()
            deaths.append(wait_settled(base, killed, 30))
            print(f"round {r + 1}: join {joins[-1]:.3f} s, death {deaths[-1]:.3f} s", file=sys.stderr)
        for m in base:
            m.proc.terminate()
            m.proc.wait(10)
    broker_delay = (
        300  # group.initial.rebalance.delay.ms (conf/server.properties; applies only to an empty group)
    )
    print(
        f"\nConsumer-group rebalance, {args.rounds} rounds; topic of {PARTITIONS} partitions, 3 members + 1 "
        f"joining/dying; range assignor; session.timeout.ms={args.session_ms}, heartbeat.interval.ms="
        f"{heartbeat_ms}, group.initial.rebalance.delay.ms={broker_delay} (empty group only); "
        f"member processes of our Consumer, broker in its own process, {os.cpu_count()} CPUs\n"
    )
    rows = [
        ("event", "p50 s", "max s", "target"),
        (
            "member joins",
            f"{statistics.median(joins):.3f}",
            f"{max(joins):.3f}",
            f"<= {1 + heartbeat_ms / 1000:.3f} s (1 s + heartbeat interval)",
        ),
        (
            "member killed (-9)",
            f"{statistics.median(deaths):.3f}",
            f"{max(deaths):.3f}",
            f"~ session {args.session_ms / 1000:.1f} s + heartbeat + rebalance (no target)",
        ),
    ]
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(c.ljust(x) for c, x in zip(row, w, strict=True)).rstrip())
    ok = statistics.median(joins) <= 1 + heartbeat_ms / 1000
    print(f"\njoin target {'met' if ok else 'MISSED'} (p50)")
    if not args.no_cleaner:
        # group offsets live in a compacted topic: the cleaner's speed beside a plain read of the same segments
        import compaction

        print("\nLog cleaner (benchmarks/compaction.py, 2 repeats):")
        compaction.main(["--repeat", "2"])


if __name__ == "__main__":
    main()
