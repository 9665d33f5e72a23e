"""benchmarks/paper.py at two revisions, side by side in one run (the machine's noise hits both alike).

Checks out ``--base`` into a temporary git worktree and runs paper.py with that revision's package on
``PYTHONPATH`` and with the work tree's package, alternating base and head ``--rounds`` times, and
prints the msg/s rows of both with the ratio head / base (best of the rounds for each).

Two ways to run the base:

* ``--script head`` (what ``paper.py --base`` does): the work tree's paper.py drives both packages,
  so both sides run the very same measurement code and only the package differs;
* ``--script own`` (default here): each revision runs its own paper.py, for a base whose paper.py
  measured something else, or whose package lacks what today's paper.py calls.

    .venv/bin/python benchmarks/paper_revisions.py                      # base 7027889, 200,000 messages
    .venv/bin/python benchmarks/paper_revisions.py --base HEAD~3 --messages 1000000 --rounds 3
    .venv/bin/python benchmarks/paper_revisions.py --base 1108d92 --script head -- --rows consumer
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the last commit before the broker spoke Kafka's wire protocol (milestone 1's protocol v0)
DEFAULT_BASE = "7027889"
#: the last commit before the hot-path issue (14): "today" in its table of targets
ISSUE14_BASE = "1108d92"
#: a row of paper.py's table: experiment, messages, seconds, msg/s, ...
_ROW = re.compile(r"^(?P<name>(batch|consumer|baseline)\S*.*?)\s{2,}[\d,]+\s+[\d.]+\s+(?P<value>[\d,]+)\s")


@contextlib.contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """A temporary, detached git worktree of ``rev``."""
    with tempfile.TemporaryDirectory(prefix="paper-base-") as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
            check=True,
            capture_output=True,
        )
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True
            )


def run_paper(script: Path, package: Path, argv: list[str]) -> tuple[dict[str, float], str]:
    """Run ``script`` (a paper.py) with ``package``'s pyspark_logsource; return ({row: msg/s}, its stdout)."""
    env = dict(os.environ, PYTHONPATH=str(package), PYSPARK_PYTHON=sys.executable)
    out = subprocess.run(
        [sys.executable, str(script), *argv],
        env=env,
        cwd=package,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if out.returncode != 0:
        raise SystemExit(f"{script} with the package of {package} failed:\n{out.stderr[-3000:]}")
    rows = {}
    for line in out.stdout.splitlines():
        m = _ROW.match(line.strip())
        if m:
            rows[m["name"].strip()] = float(m["value"].replace(",", ""))
    return rows, out.stdout


def compare(
    base: str,
    argv: list[str],
    rounds: int,
    head_script: bool,
    targets: dict[str, float] | None = None,
    every: dict[str, list[str]] | None = None,
) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """Best msg/s per row at ``base`` and at the work tree, alternating ``rounds`` times; and the last output of each
    (``every``: given, each round's output is appended to ``every["base"]`` / ``every["head"]``)."""
    best: dict[str, dict[str, float]] = {"base": {}, "head": {}}
    outs = {"base": "", "head": ""}
    with worktree(base) as base_tree:
        for r in range(rounds):
            for label, tree in (("base", base_tree), ("head", ROOT)):
                script = (ROOT if head_script else tree) / "benchmarks" / "paper.py"
                print(f"round {r + 1}/{rounds}: {label} ...", file=sys.stderr, flush=True)
                rows, out = run_paper(script, tree, argv)
                outs[label] = out
                if every is not None:
                    every.setdefault(label, []).append(out)
                for name, v in rows.items():
                    best[label][name] = max(v, best[label].get(name, 0.0))
    return best, outs


def print_comparison(
    best: dict[str, dict[str, float]], base: str, rounds: int, targets: dict[str, float] | None = None
) -> None:
    """The rows measured at both revisions: base msg/s, head msg/s, head/base (and the target when known)."""
    targets = targets or {}
    names = [n for n in best["head"] if n in best["base"]]
    print(f"\nbest of {rounds} rounds, alternated; base = {base}, head = the work tree")
    print(f"| {'row':<46} | {'base msg/s':>12} | {'head msg/s':>12} | {'head/base':>9} | {'target':>10} |")
    print(f"|{'-' * 48}|{'-' * 14}|{'-' * 14}|{'-' * 11}|{'-' * 12}|")
    for n in names:
        b, h = best["base"][n], best["head"][n]
        t = targets.get(n)
        t_s = f"{t:,.0f}" if t else ""
        print(f"| {n:<46} | {b:>12,.0f} | {h:>12,.0f} | {h / b:>9.2f} | {t_s:>10} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=DEFAULT_BASE, help="git revision to compare against")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--script",
        choices=["own", "head"],
        default="own",
        help="own: each revision runs its own paper.py; head: the work tree's paper.py runs both",
    )
    ap.add_argument("paper_args", nargs="*", help="more arguments for paper.py (after --)")
    args = ap.parse_args()
    argv = ["--messages", str(args.messages), "--quick", "--latency-seconds", "2"]
    if args.script == "head":
        argv += ["--base", "none"]
    best, _ = compare(args.base, argv + args.paper_args, args.rounds, args.script == "head")
    print(f"\nbenchmarks/paper.py, {args.messages:,} messages")
    print_comparison(best, args.base, args.rounds)


if __name__ == "__main__":
    main()
