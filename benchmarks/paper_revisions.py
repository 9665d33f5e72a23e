"""benchmarks/paper.py at two revisions, side by side in one run (the machine's noise hits both alike).

Checks out ``--base`` (default: the commit before the Kafka-protocol change) into a temporary git
worktree, then runs each revision's own ``benchmarks/paper.py`` with that revision's package on
``PYTHONPATH``, alternating base and head ``--rounds`` times, and prints the msg/s rows of both with
the ratio head / base (best of the rounds for each).

    .venv/bin/python benchmarks/paper_revisions.py                      # base 7027889, 200,000 messages
    .venv/bin/python benchmarks/paper_revisions.py --base HEAD~3 --messages 1000000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the last commit before the broker spoke Kafka's wire protocol (milestone 1's protocol v0)
DEFAULT_BASE = "7027889"
#: a row of paper.py's table: experiment, messages, seconds, msg/s, ...
_ROW = re.compile(r"^(?P<name>(batch|consumer|baseline)\S*.*?)\s{2,}[\d,]+\s+[\d.]+\s+(?P<value>[\d,]+)\s")


def run_paper(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    """Run ``tree``'s paper.py with ``tree``'s package; return {row name: msg/s}."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYSPARK_PYTHON=sys.executable)
    cmd = [sys.executable, str(tree / "benchmarks" / "paper.py"), "--messages", str(args.messages), "--quick",
           "--latency-seconds", "2"]  # fmt: skip
    out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"paper.py at {tree} failed:\n{out.stderr[-3000:]}")
    rows = {}
    for line in out.stdout.splitlines():
        m = _ROW.match(line.strip())
        if m:
            rows[m["name"].strip()] = float(m["value"].replace(",", ""))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=DEFAULT_BASE, help="git revision to compare against")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="paper-base-") as tmp:
        base_tree = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base_tree), args.base],
                       check=True, capture_output=True)  # fmt: skip
        try:
            best: dict[str, dict[str, float]] = {"base": {}, "head": {}}
            for r in range(args.rounds):
                for label, tree in (("base", base_tree), ("head", ROOT)):
                    print(f"round {r + 1}/{args.rounds}: {label} ...", flush=True)
                    for name, v in run_paper(tree, args).items():
                        best[label][name] = max(v, best[label].get(name, 0.0))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)],
                           capture_output=True)  # fmt: skip
    names = [n for n in best["head"] if n in best["base"]]
    print(f"\nbenchmarks/paper.py, {args.messages:,} messages, best of {args.rounds}; base {args.base}, head = work tree")
    print(f"| {'row':<44} | {'base msg/s':>12} | {'head msg/s':>12} | {'head/base':>9} |")
    print(f"|{'-' * 46}|{'-' * 14}|{'-' * 14}|{'-' * 11}|")
    for n in names:
        b, h = best["base"][n], best["head"][n]
        print(f"| {n:<44} | {b:>12,.0f} | {h:>12,.0f} | {h / b:>9.2f} |")


if __name__ == "__main__":
    main()
