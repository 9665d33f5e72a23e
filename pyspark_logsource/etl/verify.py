"""--verify: re-count the committed output against the committed offsets (directory and streaming)."""

from __future__ import annotations

import json
import os
from typing import Any

from ..offsets import Committer, OffsetStore, format_table, open_store
from .audit import read_back
from .commit import Log, VerifyReport
from .config import FORMATS
from .plan import TP


def compare(
    expected: dict[TP, dict[str, int]], got: dict[TP, dict[str, Any]], problems: list[str]
) -> list[dict[str, Any]]:
    """Per partition: rows == expected rows, no duplicate, offsets span exactly [start, end)."""
    table = []
    for tp in sorted(set(expected) | set(got)):
        e = expected.get(tp, {"start": 0, "end": 0, "rows": 0})
        g = got.get(tp, {"rows": 0, "distinct": 0, "first": None, "last": None})
        verdict = "ok"
        if g["rows"] != e["rows"]:
            verdict = f"{g['rows'] - e['rows']:+d} rows"
        elif g["distinct"] != g["rows"]:
            verdict = f"{g['rows'] - g['distinct']} duplicate(s)"
        elif e["rows"] and (g["first"] != e["start"] or g["last"] != e["end"] - 1):
            verdict = f"offsets [{g['first']}, {g['last']}] != [{e['start']}, {e['end'] - 1}]"
        if verdict != "ok":
            problems.append(f"{tp[0]}-{tp[1]}: {verdict}")
        table.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "from": e["start"],
                "to": e["end"],
                "expected": e["rows"],
                "rows": g["rows"],
                "verdict": verdict,
            }
        )
    return table


def expected_from_ranges(loads: list[tuple[int, list[Any]]], problems: list[str]) -> dict[TP, dict[str, int]]:
    """Fold the loads' [start, end) ranges per partition; a load not starting where the last ended is a problem."""
    expected: dict[TP, dict[str, int]] = {}
    for seq, ranges in loads:
        for r in ranges:
            e = expected.setdefault((r.topic, r.partition), {"start": r.start, "end": r.start, "rows": 0})
            if r.start != e["end"] and r.count:
                problems.append(
                    f"{r.topic}-{r.partition}: load {seq} starts at {r.start}, previous ended at {e['end']}"
                )
            e["end"] = r.end
            e["rows"] += r.count
    return expected


def group_offsets(df: Any) -> dict[TP, dict[str, Any]]:
    """rows / distinct / first / last offset per (topic, partition) of a Spark DataFrame."""
    from pyspark.sql import functions as F

    rows = (
        df.groupBy(
            F.col("topic").cast("string").alias("topic"), F.col("partition").cast("int").alias("partition")
        )
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.countDistinct("offset").alias("distinct"),
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
        )
        .collect()
    )
    return {(r["topic"], int(r["partition"])): r.asDict() for r in rows}


def verify_directory(spark: Any, store: OffsetStore, log: Log = print) -> VerifyReport:
    """Re-count the published output per topic-partition and compare with the manifests.

    For every partition: rows == sum of committed deltas, distinct offsets == rows (no duplicate),
    smallest/largest offset == first load's start / committed end - 1 (no gap); every published file
    is named by a manifest and every manifest's file exists.
    """
    if store.manifest_seqs():
        Committer(store).recover()
    manifests = store.manifests()
    problems: list[str] = []
    expected = expected_from_ranges([(m.seq, m.ranges) for m in manifests], problems)
    fmt = manifests[-1].format if manifests else "parquet"
    named = {f.path for m in manifests for f in m.files}
    on_disk = set()
    base = store.root.rstrip("/")
    for st in store.fs.walk_files(store.root):
        rel = st.path[len(base) + 1 :]
        if any(part.startswith(("_", ".")) for part in rel.split("/")):
            continue
        on_disk.add(rel)
    for extra in sorted(on_disk - named)[:10]:
        problems.append(f"published file not named by any manifest: {extra}")
    for missing in sorted(named - on_disk)[:10]:
        problems.append(f"committed file missing: {missing}")
    got = group_offsets(read_back(spark, fmt, store.root)) if on_disk else {}
    table = compare(expected, got, problems)
    log(format_table(table))
    log("verify: OK" if not problems else "verify: FAILED\n  " + "\n  ".join(problems))
    return VerifyReport(table, problems)


def verify_streaming(
    spark: Any, output: str, checkpoint: str | None = None, log: Log = print
) -> VerifyReport:
    """Verify a streaming output: per partition no duplicate, no gap, and it ends at the checkpoint's offsets."""
    checkpoint = checkpoint or open_store(output, spark).path("_checkpoint")
    store = open_store(checkpoint, spark)
    ends: dict[TP, int] = {}
    commits = sorted(int(s.name) for s in store.fs.list(store.path("commits")) if s.name.isdigit())
    if commits:
        lines = store.fs.read(store.path(f"offsets/{commits[-1]}")).decode().splitlines()
        for line in lines[2:]:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            ends.update(_offsets_from_source_json(obj))
    problems = []
    got = group_offsets(spark.read.format(_detect_format(output)).load(output))
    table = []
    for tp in sorted(set(got) | {tp for tp, e in ends.items() if e > 0}):
        g = got.get(tp)
        verdict = "ok"
        if g is None:
            verdict = "no rows"
        elif g["distinct"] != g["rows"]:
            verdict = f"{g['rows'] - g['distinct']} duplicate(s)"
        elif g["last"] - g["first"] + 1 != g["rows"]:
            verdict = f"gap: {g['last'] - g['first'] + 1 - g['rows']} missing"
        elif tp in ends and g["last"] + 1 != ends[tp]:
            verdict = f"ends at {g['last'] + 1}, checkpoint says {ends[tp]}"
        if verdict != "ok":
            problems.append(f"{tp[0]}-{tp[1]}: {verdict}")
        table.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "first": g["first"] if g else "-",
                "checkpoint_end": ends.get(tp, "-"),
                "rows": g["rows"] if g else 0,
                "verdict": verdict,
            }
        )
    log(format_table(table))
    log("verify: OK" if not problems else "verify: FAILED\n  " + "\n  ".join(problems))
    return VerifyReport(table, problems)


def _offsets_from_source_json(obj: Any) -> dict[TP, int]:
    """Find {topic: {partition: offset}} in a source offset of the checkpoint."""
    out: dict[TP, int] = {}
    if isinstance(obj, dict):
        if obj and all(
            isinstance(v, dict) and all(str(k).lstrip("-").isdigit() for k in v) for v in obj.values()
        ):
            try:
                return {(str(t), int(p)): int(o) for t, ps in obj.items() for p, o in ps.items()}
            except (TypeError, ValueError):
                pass
        for v in obj.values():
            out.update(_offsets_from_source_json(v))
    elif isinstance(obj, list):
        for v in obj:
            out.update(_offsets_from_source_json(v))
    return out


def _detect_format(output: str) -> str:
    from ..offsets.filesystem import to_local_path

    root_dir = to_local_path(output) if "://" not in output or output.startswith("file:") else None
    if root_dir is None:
        return "parquet"
    for root, _dirs, files in os.walk(root_dir):
        if os.path.basename(root).startswith(("_", ".")) and root != root_dir:
            continue
        for f in files:
            if f.startswith(("_", ".")):
                continue
            for fmt in FORMATS:
                if f.endswith("." + fmt) or f".{fmt}." in f:
                    return fmt
    return "parquet"
