"""The audit of a written load: rows per topic-partition re-counted from the files must equal the offset delta."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlparse

from ..errors import AuditMismatch
from ..offsets import FileSystem, LoadRange
from .plan import TP, LoadPlan


def read_back(spark: Any, fmt: str, path: str) -> Any:
    """(file, topic, partition, offset) of every row under path, as a Spark DataFrame."""
    from pyspark.sql import functions as F

    r = spark.read.format(fmt)
    if fmt == "csv":
        r = r.option("header", "true")
    df = r.load(path)
    return df.select(
        F.input_file_name().alias("file"),
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"),
    )


def relative(path_uri: str, base: str) -> str:
    """Path of a Spark file URI relative to base (a local path or URI); AuditMismatch if outside."""
    p = unquote(urlparse(path_uri).path) if "://" in path_uri or path_uri.startswith("file:") else path_uri
    b = unquote(urlparse(base).path) if "://" in base or base.startswith("file:") else base
    p, b = os.path.normpath(p), os.path.normpath(os.path.abspath(b))
    if not p.startswith(b + os.sep):
        raise AuditMismatch(f"written file {path_uri} is outside the load's directory {base}")
    return p[len(b) + 1 :]


def audit_files(spark: Any, fmt: str, data_dir: str, fs: FileSystem) -> list[dict[str, Any]]:
    """Count rows per (file, topic, partition) of a load's files: count/min/max/sum of offsets.

    Parquet on the local disk is counted on the driver with pyarrow (only the partition and offset
    columns, grouped with Arrow's vectorised group_by: no Spark job to schedule); other formats and
    stores are counted by a Spark job over the load's directory.
    """
    local = fs.local_path(data_dir)
    if fmt == "parquet" and local is not None:
        return _audit_parquet_local(fs, data_dir)
    from pyspark.sql import functions as F

    rows = (
        read_back(spark, fmt, data_dir)
        .groupBy("file", "topic", "partition")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
            F.sum("offset").alias("sum"),
        )
        .collect()
    )
    return [r.asDict() for r in rows]


def _audit_parquet_local(fs: FileSystem, data_dir: str) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out: list[dict[str, Any]] = []
    base = data_dir.rstrip("/")
    for st in fs.walk_files(data_dir):
        rel = st.path[len(base) + 1 :]
        if any(part.startswith(("_", ".")) for part in rel.split("/")):
            continue  # _SUCCESS, .crc checksums
        path = fs.local_path(st.path)
        assert path is not None
        names = pq.read_schema(path).names
        cols = ["partition", "offset"] + (["topic"] if "topic" in names else [])
        t = pq.read_table(path, columns=cols)
        if "topic" not in names:
            hive = dict(p.split("=", 1) for p in rel.split("/")[:-1] if "=" in p)
            if "topic" not in hive:
                raise AuditMismatch(f"written file {rel} has no topic column and no topic= directory")
            t = t.append_column(
                "topic", pa.repeat(pa.scalar(unquote(hive["topic"]), pa.string()), t.num_rows)
            )
        t = t.set_column(
            t.schema.get_field_index("offset"), "offset", pc.cast(t.column("offset"), pa.int64())
        )
        g = t.group_by(["topic", "partition"]).aggregate(
            [("offset", "count"), ("offset", "min"), ("offset", "max"), ("offset", "sum")]
        )
        for r in g.to_pylist():
            out.append(
                {
                    "file": path,
                    "topic": str(r["topic"]),
                    "partition": int(r["partition"]),
                    "count": int(r["offset_count"]),
                    "first": int(r["offset_min"]),
                    "last": int(r["offset_max"]),
                    "sum": int(r["offset_sum"]),
                }
            )
    return out


def check_audit(plan: LoadPlan, stats: list[dict[str, Any]]) -> list[LoadRange]:
    """Rows written per partition must equal the offset delta exactly; raise AuditMismatch otherwise.

    Offsets are consecutive, so [start, end) holds end - start messages: count == delta, the
    smallest and largest offsets written are start and end - 1, and the offsets sum to the
    arithmetic series (so a duplicate cannot hide a gap). Partitions outside the plan are errors.
    """
    per: dict[TP, dict[str, int]] = {}
    for s in stats:
        tp = (s["topic"], int(s["partition"]))
        a = per.setdefault(tp, {"count": 0, "first": s["first"], "last": s["last"], "sum": 0})
        a["count"] += s["count"]
        a["first"] = min(a["first"], s["first"])
        a["last"] = max(a["last"], s["last"])
        a["sum"] += s["sum"]
    problems = []
    ranges = []
    for tp in sorted(set(per) | set(plan.end)):
        start, end = plan.start.get(tp), plan.end.get(tp)
        got = per.get(tp, {"count": 0})
        if start is None or end is None:
            problems.append(f"{tp[0]}-{tp[1]}: {got['count']} row(s) written but not in the plan")
            continue
        delta = end - start
        if got["count"] != delta:
            problems.append(
                f"{tp[0]}-{tp[1]}: {got['count']} row(s) written for offsets [{start}, {end}) ({delta})"
            )
        elif delta and (
            got["first"] != start or got["last"] != end - 1 or got["sum"] != (start + end - 1) * delta // 2
        ):
            problems.append(
                f"{tp[0]}-{tp[1]}: offsets written span [{got['first']}, {got['last']}] with a duplicate or gap, "
                f"expected [{start}, {end - 1}]"
            )
        ranges.append(LoadRange(tp[0], tp[1], start, end, got["count"]))
    if problems:
        raise AuditMismatch("audit failed, nothing committed: " + "; ".join(problems))
    return ranges
