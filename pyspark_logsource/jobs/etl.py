"""The exactly-once ETL load: topics -> files, offsets committed with the output.

Run it as any of::

    spark-submit pyspark_logsource/jobs/etl.py --bootstrap-servers H:P --subscribe clicks --output /data/clicks
    python -m pyspark_logsource.jobs.etl --bootstrap-servers H:P --subscribe clicks --output /data/clicks
    logsource etl --bootstrap-servers H:P --subscribe clicks --output /data/clicks

Each run: recover (roll forward a committed load whose files were not all
published yet, delete leftovers of dead loads) -> read the committed offsets
from the output's manifests -> read [committed, log end) (bounded by
``--max-offsets-per-load``) with the ``logsource`` batch reader -> decode ->
write under ``_staging/<load>`` -> audit (rows per topic-partition counted
from the written files must equal the offset delta, else abort without
committing) -> commit (put the manifest, then publish the files). See
pyspark_logsource/offsets/commit.py for the crash analysis.

``--status`` prints the committed offsets; ``--verify`` re-counts the
committed output and exits non-zero on any difference; ``--streaming`` runs the
continuous flavour (readStream + Spark's file sink + checkpoint).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark_logsource.errors import AuditMismatch, ConfigError, LogSourceError
from pyspark_logsource.offsets import (
    CommittedFile,
    Committer,
    FileRange,
    LoadRange,
    Manifest,
    OffsetStore,
    format_table,
    offsets_dict,
    pause_point,
)

TP = tuple[str, int]
FORMATS = ("parquet", "json", "csv", "orc")
DECODES = ("raw", "utf8", "json")
PARTITION_COLUMNS = ("topic", "date", "hour")
META_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestampType")
CORRUPT_COLUMN = "_corrupt_record"

# -- configuration -------------------------------------------------------------------------------

#: properties-file key -> argparse dest (conf/etl.properties documents each one)
PROPERTY_KEYS = {
    "bootstrap.servers": "bootstrap_servers",
    "subscribe": "subscribe",
    "subscribePattern": "subscribe_pattern",
    "assign": "assign",
    "output": "output",
    "output.format": "format",
    "output.partitionBy": "partition_by",
    "startingOffsets": "starting_offsets",
    "maxOffsetsPerLoad": "max_offsets_per_load",
    "value.decode": "decode",
    "value.schema": "value_schema",
    "failOnDataLoss": "fail_on_data_loss",
    "checkpointLocation": "checkpoint",
    "trigger": "trigger",
    "spark.master": "master",
}
DEFAULTS: dict[str, Any] = {
    "format": "parquet",
    "partition_by": "",
    "starting_offsets": "earliest",
    "max_offsets_per_load": None,
    "decode": "raw",
    "value_schema": None,
    "fail_on_data_loss": "true",
    "trigger": "availableNow",
}


def build_parser() -> argparse.ArgumentParser:
    """The job's command line."""
    p = argparse.ArgumentParser(
        prog="logsource etl",
        description="Exactly-once load of topics into Parquet/JSON/CSV files, offsets committed with the output.",
    )
    p.add_argument("--config", help="a properties file (conf/etl.properties); command-line options win")
    p.add_argument("--bootstrap-servers", "-b", help="broker HOST:PORT[,HOST:PORT] (default $LOGSOURCE_BOOTSTRAP or the embedded default)")
    g = p.add_argument_group("subscription (one of)")
    g.add_argument("--subscribe", help="comma-separated topic names")
    g.add_argument("--subscribe-pattern", help="regular expression over topic names")
    g.add_argument("--assign", help='JSON {"topic":[0,1]}')
    p.add_argument("--output", help="output directory (local path or file: URI)")
    p.add_argument("--format", choices=FORMATS, help="output file format (default parquet)")
    p.add_argument("--partition-by", help="comma list of topic,date,hour: Hive-style directories (default none)")
    p.add_argument("--starting-offsets", help="first load of a partition: earliest (default) or latest")
    p.add_argument("--max-offsets-per-load", type=int, help="bound on offsets read by one load (all partitions)")
    p.add_argument("--decode", choices=DECODES, help="value decoding: raw bytes (default), utf8, json")
    p.add_argument("--value-schema", help="Spark DDL schema of JSON values, e.g. 'user STRING, n INT'")
    p.add_argument("--fail-on-data-loss", help="true (default): fail if committed offsets were deleted by retention")
    p.add_argument("--option", action="append", default=[], metavar="K=V", help="extra logsource reader option")
    p.add_argument("--master", help="Spark master when not set by spark-submit (default local[*])")
    p.add_argument("--no-progress", action="store_true", help="hide Spark's console progress bar")
    m = p.add_argument_group("modes")
    m.add_argument("--status", action="store_true", help="print the committed offsets and exit")
    m.add_argument("--verify", action="store_true", help="re-count committed output against the offsets")
    m.add_argument("--repair", action="store_true", help="withdraw a committed load whose files are missing")
    m.add_argument("--streaming", action="store_true", help="continuous flavour: readStream + file sink")
    m.add_argument("--checkpoint", help="streaming checkpoint (default OUTPUT/_checkpoint)")
    m.add_argument("--trigger", help="streaming trigger: availableNow (default), once, or an interval like '10 seconds'")
    m.add_argument("--timeout", type=float, help="streaming: stop after this many seconds")
    return p


def read_properties(path: str) -> dict[str, str]:
    """Parse a Java-style properties file (key=value, # comments)."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise ConfigError(f"{path}:{n}: expected key=value, got {line!r}")
            out[key.strip()] = value.strip()
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line, fill from --config and the defaults, validate."""
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    props = read_properties(args.config) if args.config else {}
    unknown = sorted(set(props) - set(PROPERTY_KEYS))
    if unknown:
        raise ConfigError(f"{args.config}: unknown key(s) {unknown}; known: {sorted(PROPERTY_KEYS)}")
    for key, dest in PROPERTY_KEYS.items():
        if getattr(args, dest, None) is None and props.get(key, "") != "":
            setattr(args, dest, props[key])
    for dest, value in DEFAULTS.items():
        if getattr(args, dest, None) is None:
            setattr(args, dest, value)
    if args.max_offsets_per_load is not None:
        args.max_offsets_per_load = int(args.max_offsets_per_load)
        if args.max_offsets_per_load <= 0:
            raise ConfigError("maxOffsetsPerLoad must be a positive number of offsets")
    if not args.output:
        raise ConfigError("--output is required")
    if args.format not in FORMATS:
        raise ConfigError(f"output format must be one of {FORMATS}, got {args.format!r}")
    if args.decode not in DECODES:
        raise ConfigError(f"value decode must be one of {DECODES}, got {args.decode!r}")
    if args.decode == "json" and not args.value_schema:
        raise ConfigError("--decode json needs --value-schema (Spark DDL, e.g. 'user STRING, n INT')")
    args.partition_by = [c.strip() for c in (args.partition_by or "").split(",") if c.strip()]
    bad = [c for c in args.partition_by if c not in PARTITION_COLUMNS]
    if bad:
        raise ConfigError(f"--partition-by accepts {PARTITION_COLUMNS}, got {bad}")
    if args.starting_offsets not in ("earliest", "latest"):
        raise ConfigError("--starting-offsets must be earliest or latest (later loads start from the committed offsets)")
    args.fail_on_data_loss = str(args.fail_on_data_loss).lower()
    if args.fail_on_data_loss not in ("true", "false"):
        raise ConfigError("failOnDataLoss must be true or false")
    extra = {}
    for kv in args.option:
        k, sep, v = kv.partition("=")
        if not sep:
            raise ConfigError(f"--option expects K=V, got {kv!r}")
        extra[k] = v
    args.extra_options = extra
    loading = not (args.status or args.verify or args.repair)
    if loading:
        if not args.bootstrap_servers:
            # as every logsource command: $LOGSOURCE_BOOTSTRAP, else the embedded default
            from pyspark_logsource.client.metadata import DEFAULT_BOOTSTRAP

            args.bootstrap_servers = os.environ.get("LOGSOURCE_BOOTSTRAP", DEFAULT_BOOTSTRAP)
        if sum(x is not None for x in (args.subscribe, args.subscribe_pattern, args.assign)) != 1:
            raise ConfigError("give exactly one of --subscribe, --subscribe-pattern, --assign")
    return args


def reader_options(args: argparse.Namespace) -> dict[str, str]:
    """The logsource reader options for the subscription."""
    opts = {"bootstrap.servers": args.bootstrap_servers, "failOnDataLoss": args.fail_on_data_loss}
    if args.subscribe is not None:
        opts["subscribe"] = args.subscribe
    elif args.subscribe_pattern is not None:
        opts["subscribePattern"] = args.subscribe_pattern
    else:
        opts["assign"] = args.assign
    opts.update(args.extra_options)
    return opts


# -- planning a load -----------------------------------------------------------------------------


@dataclass
class LoadPlan:
    """What one load reads: [start, end) per topic-partition (only those with new data)."""

    start: dict[TP, int]
    end: dict[TP, int]
    committed: dict[TP, int]

    @property
    def total(self) -> int:
        """Offsets to read."""
        return sum(self.end[tp] - self.start[tp] for tp in self.end)

    @property
    def empty(self) -> bool:
        """True when there is nothing new."""
        return self.total == 0


class BrokerView:
    """Partitions and offsets of the subscription, from the broker (Admin client)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from pyspark_logsource.client import Admin

        self.admin = Admin(args.bootstrap_servers)
        self.args = args

    def close(self) -> None:
        """Close the admin client."""
        close = getattr(self.admin, "close", None)
        if close:
            close()

    def partitions(self) -> list[TP]:
        """The topic-partitions the subscription covers right now."""
        from pyspark_logsource.spark.options import parse_read_options
        from pyspark_logsource.spark.planning import select_partitions

        opts = parse_read_options(reader_options(self.args), streaming=False)
        return select_partitions(opts, self.admin.partitions_for, self.admin.list_topics)

    def offsets(self, tps: Sequence[TP], spec: str) -> dict[TP, int]:
        """earliest / latest offset of each partition."""
        if not tps:
            return {}
        return {tp: int(o) for tp, o in self.admin.list_offsets(list(tps), spec).items()}


def plan_load(
    committed: dict[TP, int],
    tps: Sequence[TP],
    earliest: dict[TP, int],
    latest: dict[TP, int],
    *,
    starting: str = "earliest",
    max_offsets: int | None = None,
    fail_on_data_loss: bool = True,
) -> LoadPlan:
    """Decide [start, end) per partition from the committed offsets and the log's bounds (pure)."""
    from pyspark_logsource.errors import OffsetOutOfRange

    start: dict[TP, int] = {}
    for tp in tps:
        if tp in committed:
            s = committed[tp]
            if s < earliest[tp]:
                msg = (
                    f"{tp[0]}-{tp[1]}: committed offset {s} is below the log start {earliest[tp]} "
                    f"(retention deleted {earliest[tp] - s} message(s) before they were loaded)"
                )
                if fail_on_data_loss:
                    raise OffsetOutOfRange(msg + "; rerun with --fail-on-data-loss false to skip them")
                print(f"WARNING: {msg}; skipping them", file=sys.stderr)
                s = earliest[tp]
            if s > latest[tp]:
                raise OffsetOutOfRange(
                    f"{tp[0]}-{tp[1]}: committed offset {s} is beyond the log end {latest[tp]} "
                    "(was the topic deleted and re-created?)"
                )
        else:
            s = earliest[tp] if starting == "earliest" else latest[tp]
        start[tp] = s
    from pyspark_logsource.spark.planning import rate_limit

    end = rate_limit(start, {tp: latest[tp] for tp in tps}, max_offsets)
    # a partition that starts at "latest" with nothing new is still recorded, so the next load
    # starts there instead of at the then-current end (which would skip messages)
    return LoadPlan(start, {tp: end[tp] for tp in tps}, dict(committed))


# -- transform -----------------------------------------------------------------------------------


def transform(df: Any, args: argparse.Namespace) -> Any:
    """Decode the value and add Hive-style partition columns (date/hour in UTC)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    cols = [c for c in df.columns if c in META_COLUMNS or c in ("key", "value", "headers")]
    df = df.select(*cols)
    if args.decode == "utf8":
        df = df.withColumn("key", F.col("key").cast("string")).withColumn("value", F.col("value").cast("string"))
    elif args.decode == "json":
        schema = StructType.fromDDL(args.value_schema) if isinstance(args.value_schema, str) else args.value_schema
        clash = [f.name for f in schema.fields if f.name in df.columns and f.name != "value"]
        if clash:
            raise ConfigError(f"--value-schema fields {clash} clash with the record's own columns")
        # PERMISSIVE + corrupt-record column: a value that is not valid JSON keeps its text (nothing lost)
        full = StructType(list(schema.fields) + [StructField(CORRUPT_COLUMN, StringType())])
        parsed = F.from_json(
            F.col("value").cast("string"), full, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
        )
        df = df.withColumn("key", F.col("key").cast("string")).withColumn("value", parsed)
        df = df.select(*[c for c in df.columns if c != "value"], *[F.col("value")[f.name].alias(f.name) for f in full.fields])
    if "headers" in df.columns and args.format == "csv":
        df = df.drop("headers")
    if args.format == "csv" and args.decode == "raw":
        df = df.withColumn("key", F.base64("key")).withColumn("value", F.base64("value"))
    utc = F.to_utc_timestamp(F.col("timestamp"), F.current_timezone())
    if "date" in args.partition_by:
        df = df.withColumn("date", F.date_format(utc, "yyyy-MM-dd"))
    if "hour" in args.partition_by:
        df = df.withColumn("hour", F.date_format(utc, "HH"))
    return df


# -- write, audit, commit ------------------------------------------------------------------------


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


def _rel(path_uri: str, base: str) -> str:
    """Path of a Spark file URI relative to base (a local path or URI)."""
    p = unquote(urlparse(path_uri).path) if "://" in path_uri or path_uri.startswith("file:") else path_uri
    b = unquote(urlparse(base).path) if "://" in base or base.startswith("file:") else base
    p, b = os.path.normpath(p), os.path.normpath(os.path.abspath(b))
    if not p.startswith(b + os.sep):
        raise AuditMismatch(f"written file {path_uri} is outside the staging dir {base}")
    return p[len(b) + 1 :]


def _read_back(spark: Any, fmt: str, path: str) -> Any:
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


def audit_staged(spark: Any, fmt: str, staging: str, fs: Any = None) -> list[dict[str, Any]]:
    """Count rows per (file, topic, partition) from the files a load wrote: count/min/max/sum of offsets.

    Local Parquet is counted on the driver with pyarrow (only the partition and offset columns are
    read, grouped with Arrow's vectorised group_by: no Spark job to schedule); other formats and
    stores are counted by a Spark job over the staging directory.
    """
    from pyspark_logsource.offsets import LocalFileSystem

    if fmt == "parquet" and isinstance(fs, LocalFileSystem):
        return _audit_parquet_local(fs, staging)
    from pyspark.sql import functions as F

    rows = (
        _read_back(spark, fmt, staging)
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


def _audit_parquet_local(fs: Any, staging: str) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out: list[dict[str, Any]] = []
    base = staging.rstrip("/")
    for st in fs.walk_files(staging):
        rel = st.path[len(base) + 1 :]
        if any(part.startswith(("_", ".")) for part in rel.split("/")):
            continue  # _SUCCESS, .crc checksums
        path = _rel_local(st.path)
        names = pq.read_schema(path).names
        cols = ["partition", "offset"] + (["topic"] if "topic" in names else [])
        t = pq.read_table(path, columns=cols)
        if "topic" not in names:
            hive = dict(p.split("=", 1) for p in rel.split("/")[:-1] if "=" in p)
            if "topic" not in hive:
                raise AuditMismatch(f"staged file {rel} has no topic column and no topic= directory")
            t = t.append_column("topic", pa.repeat(pa.scalar(unquote(hive["topic"]), pa.string()), t.num_rows))
        t = t.set_column(t.schema.get_field_index("offset"), "offset", pc.cast(t.column("offset"), pa.int64()))
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


def _rel_local(path: str) -> str:
    from pyspark_logsource.offsets.filesystem import to_local_path

    return to_local_path(path)


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
        if start is None:
            problems.append(f"{tp[0]}-{tp[1]}: {got['count']} row(s) written but not in the plan")
            continue
        delta = end - start
        if got["count"] != delta:
            problems.append(f"{tp[0]}-{tp[1]}: {got['count']} row(s) written for offsets [{start}, {end}) ({delta})")
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


def _published_name(rel: str, franges: list[FileRange], seq: int, taken: set[str]) -> str:
    d, _, name = rel.rpartition("/")
    ext = name[name.index(".") :] if "." in name else ""
    ext = re.sub(r"^\.c\d{3}", "", ext)
    if len(franges) == 1:
        r = franges[0]
        base = f"{r.topic}+{r.partition}+{r.first}+{r.last}"  # Kafka Connect HDFS style
    else:
        base = f"load-{seq:08d}-{len(taken):05d}"
    out = f"{d}/{base}{ext}" if d else f"{base}{ext}"
    n = 1
    while out in taken:
        out = f"{d + '/' if d else ''}{base}-{n}{ext}"
        n += 1
    taken.add(out)
    return out


def write_and_commit(
    spark: Any,
    df: Any,
    store: OffsetStore,
    plan: LoadPlan,
    args: argparse.Namespace,
    log: Callable[[str], None] = print,
) -> LoadResult:
    """Write df (the plan's rows, transformed) to staging, audit it, commit the manifest, publish."""
    t0 = time.time()
    committer = Committer(store)
    staged = committer.begin()
    w = df.write.format(args.format).mode("errorifexists")
    if args.format == "csv":
        w = w.option("header", "true")
    if args.partition_by:
        w = w.partitionBy(*args.partition_by)
    pause_point("write")
    w.save(staged.staging)
    t_write = time.time()
    pause_point("after_write")
    stats = audit_staged(spark, args.format, staged.staging, store.fs)
    t_audit = time.time()
    try:
        ranges = check_audit(plan, stats)
    except AuditMismatch:
        store.fs.delete(staged.staging, recursive=True)
        raise
    by_file: dict[str, list[FileRange]] = {}
    for s in stats:
        by_file.setdefault(_rel(s["file"], staged.staging), []).append(
            FileRange(s["topic"], int(s["partition"]), int(s["first"]), int(s["last"]), int(s["count"]))
        )
    taken: set[str] = set()
    files = []
    for rel in sorted(by_file):
        fr = sorted(by_file[rel], key=lambda r: (r.topic, r.partition, r.first))
        files.append(
            CommittedFile(
                f"{staged.staging_rel}/{rel}", _published_name(rel, fr, staged.seq, taken), sum(r.count for r in fr), tuple(fr)
            )
        )
    new_offsets = dict(plan.committed)
    new_offsets.update(plan.end)
    manifest = Manifest(staged.seq, staged.load_id, args.format, offsets_dict(new_offsets), ranges, files)
    committer.commit(manifest)
    t_end = time.time()
    timings = {"write": t_write - t0, "audit": t_audit - t_write, "commit": t_end - t_audit}
    return LoadResult(staged.seq, ranges, len(files), t_end - t0, timings=timings)


def summary_lines(res: LoadResult) -> list[str]:
    """One line per topic-partition: from, to, count."""
    return [f"{r.topic}-{r.partition}: from {r.start} to {r.end} ({r.count} rows)" for r in res.ranges if r.count]


def read_plan(spark: Any, args: argparse.Namespace, plan: LoadPlan) -> Any:
    """The logsource batch read of exactly the plan's ranges."""
    import json

    tps = [tp for tp in plan.end if plan.end[tp] > plan.start[tp]]
    r = spark.read.format("logsource")
    opts = reader_options(args)
    # assign exactly the partitions with new data, so that a partition created after planning is not read
    assign: dict[str, list[int]] = {}
    for t, p in tps:
        assign.setdefault(t, []).append(p)
    for k in ("subscribe", "subscribePattern"):
        opts.pop(k, None)
    opts["assign"] = json.dumps(assign)
    opts["startingOffsets"] = json.dumps(offsets_dict({tp: plan.start[tp] for tp in tps}))
    opts["endingOffsets"] = json.dumps(offsets_dict({tp: plan.end[tp] for tp in tps}))
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def register_source(spark: Any) -> None:
    """Make format("logsource") available in this session."""
    import pyspark_logsource

    reg = getattr(pyspark_logsource, "register", None)
    if reg is None:
        from pyspark_logsource.datasource import LogSource

        spark.dataSource.register(LogSource)
    else:
        reg(spark)


def _retry(fn: Callable[[], Any], log: Callable[[str], None], attempts: int = 4) -> Any:
    """Call fn, retrying a retriable broker error (timeout, no leader) with a growing pause."""
    for i in range(attempts):
        try:
            return fn()
        except LogSourceError as e:
            if not e.retriable or i == attempts - 1:
                raise
            log(f"retrying after {type(e).__name__}: {e}")
            time.sleep(0.5 * 2**i)


def run_load(spark: Any, args: argparse.Namespace, log: Callable[[str], None] = print) -> LoadResult:
    """One batch load: recover, plan, read, write, audit, commit."""
    store = OffsetStore(args.output)
    committer = Committer(store)
    rep = committer.recover()
    if str(rep) != "nothing to recover":
        log(f"recovery: {rep}")
    committed = store.committed_offsets()
    view = BrokerView(args)
    try:
        tps = _retry(view.partitions, log)
        earliest = _retry(lambda: view.offsets(tps, "earliest"), log)
        latest = _retry(lambda: view.offsets(tps, "latest"), log)
    finally:
        view.close()
    plan = plan_load(
        committed,
        tps,
        earliest,
        latest,
        starting=args.starting_offsets,
        max_offsets=args.max_offsets_per_load,
        fail_on_data_loss=args.fail_on_data_loss == "true",
    )
    if plan.empty:
        msg = f"no new data in {len(tps)} partition(s) since load {max(store.manifest_seqs(), default=0)}: committed nothing"
        log(msg)
        return LoadResult(None, message=msg)
    log(f"loading {plan.total} message(s) from {sum(1 for tp in tps if plan.end[tp] > plan.start[tp])} partition(s)")
    register_source(spark)
    df = transform(read_plan(spark, args, plan), args)
    res = write_and_commit(spark, df, store, plan, args, log)
    for line in summary_lines(res):
        log(line)
    res.message = f"committed load {res.seq}: {res.rows} rows in {res.files} file(s), {res.seconds:.1f}s"
    log(res.message)
    return res


# -- status / verify / repair --------------------------------------------------------------------


def status(args: argparse.Namespace, log: Callable[[str], None] = print) -> int:
    """Print the committed offsets as a table (rolling forward an interrupted publish first)."""
    store = OffsetStore(args.output)
    if store.manifest_seqs():
        rep = Committer(store).recover()
        if str(rep) != "nothing to recover":
            log(f"recovery: {rep}")
    log(format_table(store.status_rows()))
    return 0


@dataclass
class VerifyReport:
    """Differences between the committed offsets and what the output holds."""

    rows: list[dict[str, Any]]
    problems: list[str]

    @property
    def ok(self) -> bool:
        """True when the output matches the offsets exactly."""
        return not self.problems


def verify(spark: Any, output: str, log: Callable[[str], None] = print) -> VerifyReport:
    """Re-count the published output per topic-partition and compare with the manifests.

    For every partition: rows == sum of committed deltas, distinct offsets == rows (no duplicate),
    smallest/largest offset == first load's start / committed end - 1 (no gap); every published file
    is named by a manifest and every manifest's file exists.
    """
    from pyspark.sql import functions as F

    store = OffsetStore(output)
    if store.manifest_seqs():
        Committer(store).recover()
    manifests = store.manifests()
    problems: list[str] = []
    expected: dict[TP, dict[str, int]] = {}
    fmt = manifests[-1].format if manifests else "parquet"
    for m in manifests:
        for r in m.ranges:
            e = expected.setdefault((r.topic, r.partition), {"start": r.start, "end": r.start, "rows": 0})
            if r.start != e["end"] and r.count:
                problems.append(f"{r.topic}-{r.partition}: load {m.seq} starts at {r.start}, previous ended at {e['end']}")
            e["end"] = r.end
            e["rows"] += r.count
    named = {f.path for m in manifests for f in m.files}
    on_disk = set()
    for st in store.fs.walk_files(store.root):
        rel = os.path.relpath(st.path, store.root) if not st.path.startswith("file:") else st.path[len(store.root) + 1 :]
        if any(part.startswith(("_", ".")) for part in rel.split("/")):
            continue
        on_disk.add(rel)
    for extra in sorted(on_disk - named)[:10]:
        problems.append(f"published file not named by any manifest: {extra}")
    for missing in sorted(named - on_disk)[:10]:
        problems.append(f"committed file missing: {missing}")
    got: dict[TP, dict[str, int]] = {}
    if on_disk:
        rows = (
            _read_back(spark, fmt, store.root)
            .groupBy("topic", "partition")
            .agg(
                F.count(F.lit(1)).alias("rows"),
                F.countDistinct("offset").alias("distinct"),
                F.min("offset").alias("first"),
                F.max("offset").alias("last"),
            )
            .collect()
        )
        got = {(r["topic"], int(r["partition"])): r.asDict() for r in rows}
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
            {"topic": tp[0], "partition": tp[1], "from": e["start"], "to": e["end"], "expected": e["rows"], "rows": g["rows"], "verdict": verdict}
        )
    log(format_table(table))
    log("verify: OK" if not problems else "verify: FAILED\n  " + "\n  ".join(problems))
    return VerifyReport(table, problems)


# -- streaming flavour ---------------------------------------------------------------------------


def run_streaming(spark: Any, args: argparse.Namespace, log: Callable[[str], None] = print) -> Any:
    """readStream logsource -> decode -> Spark's file sink with a checkpoint (exactly-once by Spark).

    Spark's file sink logs the files of every micro-batch in OUTPUT/_spark_metadata and skips a
    batch id it already committed; the checkpoint holds the offsets of each batch. A killed driver
    restarts from the checkpoint and replays at most the uncommitted batch, whose files are not in
    the metadata log, so readers of OUTPUT (which use the log) see every message exactly once.
    """
    register_source(spark)
    r = spark.readStream.format("logsource")
    opts = reader_options(args)
    opts.setdefault("startingOffsets", args.starting_offsets)
    if args.max_offsets_per_load:
        opts["maxOffsetsPerTrigger"] = str(args.max_offsets_per_load)
    for k, v in opts.items():
        r = r.option(k, v)
    df = transform(r.load(), args)
    checkpoint = args.checkpoint or OffsetStore(args.output).path("_checkpoint")
    removed = clean_checkpoint_leftovers(checkpoint, args.output)
    if removed:
        log(f"recovery: removed {removed} temporary file(s) a killed driver left in the checkpoint")
    w = df.writeStream.format(args.format).option("checkpointLocation", checkpoint).option("path", args.output)
    if args.format == "csv":
        w = w.option("header", "true")
    if args.partition_by:
        w = w.partitionBy(*args.partition_by)
    trig = args.trigger
    if trig == "availableNow":
        w = w.trigger(availableNow=True)
    elif trig == "once":
        w = w.trigger(once=True)
    else:
        w = w.trigger(processingTime=trig)
    q = w.start()
    log(f"streaming query {q.id} started: {args.output} (checkpoint {checkpoint})")
    q.awaitTermination(args.timeout)
    if q.isActive:
        q.stop()
    if q.exception():
        raise q.exception()
    return q


def clean_checkpoint_leftovers(checkpoint: str, output: str) -> int:
    """Delete the temporary files a killed driver leaves in Spark's metadata logs.

    Spark writes each offsets/commits/_spark_metadata entry to a hidden ``.<batch>.<uuid>.tmp`` and
    renames it; a kill -9 in between leaves the temp file, which is never a log entry. Spark 4.1
    refuses to start batch 0 when offsets/ is not empty (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY),
    so a driver killed during its first batch could not restart without this cleanup.
    """
    store = OffsetStore(checkpoint)
    removed = 0
    dirs = [store.path("offsets"), store.path("commits"), OffsetStore(output).path("_spark_metadata")]
    for d in dirs:
        for st in store.fs.list(d):
            if not st.is_dir and st.name.startswith(".") and (st.name.endswith(".tmp") or st.name.endswith(".tmp.crc")):
                store.fs.delete(st.path)
                removed += 1
    return removed


def verify_streaming(spark: Any, output: str, checkpoint: str | None = None, log: Callable[[str], None] = print) -> VerifyReport:
    """Verify a streaming output: per partition no duplicate, no gap, and it ends at the checkpoint's offsets."""
    import json

    from pyspark.sql import functions as F

    checkpoint = checkpoint or OffsetStore(output).path("_checkpoint")
    store = OffsetStore(checkpoint)
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
    rows = (
        spark.read.format(_detect_format(output))
        .load(output)
        .groupBy(F.col("topic").cast("string").alias("topic"), F.col("partition").cast("int").alias("partition"))
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.countDistinct("offset").alias("distinct"),
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
        )
        .collect()
    )
    table = []
    got = {(r["topic"], r["partition"]): r for r in rows}
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
        if obj and all(isinstance(v, dict) and all(str(k).lstrip("-").isdigit() for k in v) for v in obj.values()):
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
    for root, _dirs, files in os.walk(output):
        if os.path.basename(root).startswith(("_", ".")) and root != output:
            continue
        for f in files:
            if f.startswith(("_", ".")):
                continue
            for fmt in FORMATS:
                if f.endswith("." + fmt) or f".{fmt}." in f:
                    return fmt
    return "parquet"


# -- entry point ---------------------------------------------------------------------------------


def get_spark(args: argparse.Namespace) -> Any:
    """The job's SparkSession (spark-submit's settings win; --master otherwise, default local[*])."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName("logsource-etl")
    if args.master:
        # without it, spark-submit's --master applies, and plain `python -m` gets local[*]
        b = b.master(args.master)
    b = b.config("spark.ui.showConsoleProgress", "false" if args.no_progress else "true")
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; returns the process exit code (0 ok, 1 verify found differences, 2 error)."""
    try:
        args = parse_args(argv)
        if args.status:
            return status(args)
        if args.repair:
            man = Committer(OffsetStore(args.output)).rollback_latest()
            print(f"withdrew load {man.seq}; its range will be loaded again" if man else "nothing committed")
            return 0
        spark = get_spark(args)
        if args.verify:
            if args.streaming:
                return 0 if verify_streaming(spark, args.output, args.checkpoint).ok else 1
            return 0 if verify(spark, args.output).ok else 1
        if args.streaming:
            run_streaming(spark, args)
            return 0
        run_load(spark, args)
        return 0
    except LogSourceError as e:
        print(f"etl: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
