"""What every sink commits: the load's result, the per-file offset ranges, and the Sink interface."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..offsets import FileRange, LoadRange
from .audit import relative
from .plan import TP, LoadPlan

Log = Callable[[str], None]


@dataclass
class LoadResult:
    """The outcome of one load."""

    seq: int | None
    ranges: list[LoadRange] = field(default_factory=list)
    files: int = 0
    seconds: float = 0.0
    message: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        """Rows committed."""
        return sum(r.count for r in self.ranges)

    @property
    def committed(self) -> bool:
        """True when this run committed a load."""
        return self.seq is not None


@dataclass
class VerifyReport:
    """Differences between the committed offsets and what the output holds."""

    rows: list[dict[str, Any]]
    problems: list[str]

    @property
    def ok(self) -> bool:
        """True when the output matches the offsets exactly."""
        return not self.problems


class Sink(Protocol):
    """Where a load goes: a directory of files or an Iceberg table. Each commits its own offsets."""

    def recover(self, log: Log) -> None:
        """Finish or clean up what a crashed run left; run before every load."""

    def committed_offsets(self) -> dict[TP, int]:
        """Where the next load starts."""

    def last_seq(self) -> int:
        """Sequence number of the newest committed load (0 before the first)."""

    def write_and_commit(self, spark: Any, df: Any, plan: LoadPlan, log: Log) -> LoadResult:
        """Write the plan's rows, audit them, commit them with the offsets."""

    def status_rows(self) -> list[dict[str, Any]]:
        """Per topic-partition: committed offsets and rows."""

    def verify(self, spark: Any, log: Log) -> VerifyReport:
        """Re-count the committed output against the offsets."""


def file_ranges(stats: list[dict[str, Any]], data_dir: str) -> dict[str, list[FileRange]]:
    """Audit rows grouped by file (path relative to data_dir), each file's ranges sorted."""
    by_file: dict[str, list[FileRange]] = {}
    for s in stats:
        by_file.setdefault(relative(s["file"], data_dir), []).append(
            FileRange(s["topic"], int(s["partition"]), int(s["first"]), int(s["last"]), int(s["count"]))
        )
    return {k: sorted(v, key=lambda r: (r.topic, r.partition, r.first)) for k, v in sorted(by_file.items())}


def published_name(rel: str, franges: list[FileRange], seq: int, taken: set[str]) -> str:
    """Kafka Connect style name T+P+first+last for a one-partition file, load-SEQ-N otherwise."""
    d, _, name = rel.rpartition("/")
    ext = name[name.index(".") :] if "." in name else ""
    ext = re.sub(r"^\.c\d{3}", "", ext)
    if len(franges) == 1:
        r = franges[0]
        base = f"{r.topic}+{r.partition}+{r.first}+{r.last}"
    else:
        base = f"load-{seq:08d}-{len(taken):05d}"
    out = f"{d}/{base}{ext}" if d else f"{base}{ext}"
    n = 1
    while out in taken:
        out = f"{d + '/' if d else ''}{base}-{n}{ext}"
        n += 1
    taken.add(out)
    return out


def summary_lines(res: LoadResult) -> list[str]:
    """One line per topic-partition: from, to, count."""
    return [
        f"{r.topic}-{r.partition}: from {r.start} to {r.end} ({r.count} rows)" for r in res.ranges if r.count
    ]
