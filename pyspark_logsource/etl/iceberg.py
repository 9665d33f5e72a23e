"""The Iceberg sink: Spark writes Parquet, the driver commits it with pyiceberg in one catalog transaction.

- Catalog: any pyiceberg catalog by name (``--catalog prod``: REST, Hive, Glue... configured by
  pyiceberg's own ``.pyiceberg.yaml`` / ``PYICEBERG_CATALOG__*`` settings), else the embedded
  default: a SQL catalog on SQLite at ``sqlite:///<output>/catalog.db`` with warehouse
  ``<output>/warehouse`` named ``default``, so any pyiceberg ``SqlCatalog("default", ...)`` opened
  there reads the table.
- Each load: Spark writes the plan's rows under ``<table location>/data/load-<seq>-<id>/``,
  one hour of ``timestamp`` per file (``ts_hour=`` directories, so every file has a single
  partition value of the table's spec, ``hour(timestamp)``, which is also the day); the files are audited like a directory load;
  then ``add_files`` commits them in one snapshot whose summary holds the load's end offsets
  (``logsource.offsets``), its ranges, sequence number and id, as Iceberg's Kafka Connect sink
  keeps its offsets. That snapshot is the commit point, atomic for every Iceberg reader.
- Restart: the committed offsets are read back from the snapshot history (newest snapshot
  with a ``logsource.offsets`` summary). A crash between writing the files and the commit
  leaves only orphan files in a load directory newer than the last commit, which the next run
  deletes. A commit conflict (another writer moved the table) is retried on the new snapshot
  when no other load committed offsets meanwhile, else reported as CommitConflict after deleting
  this load's files: never doubled.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

from ..errors import AuditMismatch, CommitConflict, ConfigError
from ..faults import fault_point
from ..offsets import (
    FileSystem,
    LoadRange,
    LocalFileSystem,
    format_table,
    get_filesystem,
    offsets_dict,
)
from ..offsets.filesystem import to_local_path, uri_scheme
from .audit import audit_files, check_audit
from .commit import LoadResult, Log, VerifyReport
from .config import EtlConfig
from .plan import TP, LoadPlan
from .verify import compare, expected_from_ranges

OFFSETS_KEY = "logsource.offsets"
RANGES_KEY = "logsource.ranges"
SEQ_KEY = "logsource.seq"
LOAD_KEY = "logsource.load-id"
HOUR_COLUMN = "ts_hour"
_LOAD_DIR = re.compile(r"^load-(\d{20})-([0-9a-f]+)$")
#: pyiceberg rebases a failed append on the new snapshot and retries it by itself, which would commit
#: two loads of the same offsets; the sink turns that off on its table and decides itself (_commit)
NO_RETRY = "commit.retry.num-retries"
#: the embedded catalog's name (a SQL catalog keeps its tables per catalog name): pyiceberg's default
EMBEDDED_CATALOG = "default"
#: pyiceberg's scheme -> the Hadoop scheme Spark writes with
SPARK_SCHEMES = {"s3": "s3a", "s3n": "s3a"}


#: Spark settings of the Iceberg write, for its duration only
WRITE_CONF = {
    # Iceberg reads micros; Spark's default INT96 it cannot. (Concurrent writers per hour instead of
    # Spark's sort by hour, plannedWrite off + maxConcurrentOutputFileWriters, measured no faster.)
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


@contextlib.contextmanager
def session_conf(spark: Any, conf: dict[str, str]) -> Iterator[None]:
    """Set Spark SQL settings for the duration of a block, then restore them."""
    before = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            spark.conf.set(k, v) if v is not None else spark.conf.unset(k)


def open_catalog(cfg: EtlConfig) -> Any:
    """The configured pyiceberg catalog, or the embedded SQLite one inside the output directory."""
    if cfg.catalog:
        from pyiceberg.catalog import load_catalog

        return load_catalog(cfg.catalog)
    if uri_scheme(cfg.output) not in ("", "file"):
        raise ConfigError(
            "the embedded Iceberg catalog (SQLite) needs a local --output; give --catalog NAME otherwise"
        )
    from pyiceberg.catalog.sql import SqlCatalog

    root = to_local_path(cfg.output)
    os.makedirs(root, exist_ok=True)
    return SqlCatalog(
        EMBEDDED_CATALOG, uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse"
    )


def spark_uri(uri: str) -> str:
    """A pyiceberg location as Spark's Hadoop names it (s3:// -> s3a://)."""
    scheme = uri_scheme(uri)
    return SPARK_SCHEMES[scheme] + uri[len(scheme) :] if scheme in SPARK_SCHEMES else uri


def loads_of(table: Any) -> list[Any]:
    """The snapshots that committed a load, oldest first (walks the current snapshot's ancestry)."""
    out = []
    snap = table.current_snapshot() if table is not None else None
    while snap is not None:
        if snap.summary is not None and snap.summary.get(OFFSETS_KEY):
            out.append(snap)
        snap = (
            table.metadata.snapshot_by_id(snap.parent_snapshot_id)
            if snap.parent_snapshot_id is not None
            else None
        )
    return out[::-1]


def _offsets(snap: Any) -> dict[TP, int]:
    d = json.loads(snap.summary[OFFSETS_KEY])
    return {(t, int(p)): int(o) for t, ps in d.items() for p, o in ps.items()}


def _ranges(snap: Any) -> list[LoadRange]:
    return [LoadRange(*r) for r in json.loads(snap.summary.get(RANGES_KEY) or "[]")]


class IcebergSink:
    """Load into an Iceberg table; offsets in the snapshot summaries."""

    def __init__(self, cfg: EtlConfig, spark: Any = None) -> None:
        self.cfg = cfg
        self.spark = spark
        self.catalog = open_catalog(cfg)
        self._table: Any = None

    # -- reading the table's state -----------------------------------------------------------
    def table(self, refresh: bool = False) -> Any:
        """The table as loaded for this run (its snapshot is the parent of this run's commit)."""
        if self._table is None or refresh:
            from pyiceberg.exceptions import NoSuchTableError

            try:
                self._table = self.catalog.load_table(self.cfg.table)
            except NoSuchTableError:
                self._table = None
        return self._table

    def committed_offsets(self) -> dict[TP, int]:
        loads = loads_of(self.table())
        return _offsets(loads[-1]) if loads else {}

    def last_seq(self) -> int:
        loads = loads_of(self.table())
        return int(loads[-1].summary[SEQ_KEY]) if loads else 0

    def _fs(self, uri: str) -> FileSystem:
        if uri_scheme(uri) in ("", "file"):
            return LocalFileSystem()
        return get_filesystem(uri, self.spark)

    def recover(self, log: Log) -> None:
        """Delete orphan files: load directories newer than the last commit (or losers of its seq)."""
        table = self.table(refresh=True)
        if table is None:
            return
        loads = loads_of(table)
        last_seq = int(loads[-1].summary[SEQ_KEY]) if loads else 0
        last_id = loads[-1].summary.get(LOAD_KEY) if loads else None
        data = spark_uri(table.location().rstrip("/") + "/data")
        fs = self._fs(data)
        removed = []
        for st in fs.list(data):
            m = _LOAD_DIR.match(st.name)
            if m and st.is_dir:
                seq = int(m.group(1))
                if seq > last_seq or (seq == last_seq and st.name != f"load-{last_id}"):
                    fs.delete(st.path, recursive=True)
                    removed.append(st.name)
        if removed:
            log(f"recovery: deleted {len(removed)} orphan load dir(s) of uncommitted loads: {removed[:3]}")

    # -- a load ----------------------------------------------------------------------------------
    def _create_table(self, df: Any) -> Any:
        from pyiceberg.exceptions import NamespaceAlreadyExistsError, TableAlreadyExistsError
        from pyiceberg.transforms import HourTransform
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(df.drop(HOUR_COLUMN).schema, timezone="UTC")
        ns = self.cfg.table.rsplit(".", 1)[0]  # type: ignore[union-attr]
        try:
            self.catalog.create_namespace(ns)
        except NamespaceAlreadyExistsError:
            pass
        try:
            table = self.catalog.create_table(self.cfg.table, schema=schema, properties={NO_RETRY: "0"})
            # hour(timestamp) is the day and the hour: Iceberg (Java and pyiceberg) refuses a second,
            # redundant time transform of one column, and prunes a day filter with the hour partitions
            with table.update_spec() as spec:
                spec.add_field("timestamp", HourTransform(), "timestamp_hour")
        except TableAlreadyExistsError:
            pass
        return self.table(refresh=True)

    def write_and_commit(self, spark: Any, df: Any, plan: LoadPlan, log: Log) -> LoadResult:
        """Write the files into a new load directory, audit them, add them in one snapshot."""
        from pyspark.sql import functions as F

        t0 = time.time()
        self.spark = spark
        utc = F.to_utc_timestamp(F.col("timestamp"), F.current_timezone())
        df = df.withColumn(HOUR_COLUMN, F.date_format(utc, "yyyy-MM-dd-HH"))
        table = self.table() or self._create_table(df)
        if table.metadata.properties.get(NO_RETRY) != "0":
            table.transaction().set_properties({NO_RETRY: "0"}).commit_transaction()
            table = self.table(refresh=True)
        seq = self.last_seq() + 1
        load_id = f"{seq:020d}-{uuid.uuid4().hex[:16]}"
        data_dir = spark_uri(table.location().rstrip("/") + f"/data/load-{load_id}")
        fault_point("write")
        with session_conf(spark, WRITE_CONF):
            df.write.mode("errorifexists").partitionBy(HOUR_COLUMN).parquet(data_dir)
        t_write = time.time()
        fault_point("after_write")
        fs = self._fs(data_dir)
        stats = audit_files(spark, "parquet", data_dir, fs)
        try:
            ranges = check_audit(plan, stats)
        except AuditMismatch:
            fs.delete(data_dir, recursive=True)
            raise
        t_audit = time.time()
        base = data_dir.rstrip("/")
        files = [
            table.location().rstrip("/") + f"/data/load-{load_id}" + st.path[len(base) :]
            for st in fs.walk_files(data_dir)
            if not any(p.startswith(("_", ".")) for p in st.path[len(base) + 1 :].split("/"))
        ]
        props = {
            OFFSETS_KEY: json.dumps(offsets_dict(plan.new_offsets()), sort_keys=True),
            RANGES_KEY: json.dumps([[r.topic, r.partition, r.start, r.end, r.count] for r in ranges]),
            SEQ_KEY: str(seq),
            LOAD_KEY: load_id,
        }
        fault_point("commit")
        self._commit(table, files, props, plan, fs, data_dir, log)
        t_end = time.time()
        timings = {"write": t_write - t0, "audit": t_audit - t_write, "commit": t_end - t_audit}
        return LoadResult(seq, ranges, len(files), t_end - t0, timings=timings)

    def _commit(
        self,
        table: Any,
        files: list[str],
        props: dict[str, str],
        plan: LoadPlan,
        fs: FileSystem,
        data_dir: str,
        log: Log,
        attempts: int = 5,
    ) -> None:
        from pyiceberg.exceptions import CommitFailedException

        for i in range(attempts):
            try:
                # the files are new (a fresh load directory), so the duplicate check's full scan is skipped
                table.add_files(files, snapshot_properties=props, check_duplicate_files=False)
                return
            except CommitFailedException as e:
                table = self.table(refresh=True)
                now = self.committed_offsets()
                if now != plan.committed or i == attempts - 1:
                    fs.delete(data_dir, recursive=True)
                    raise CommitConflict(
                        f"another writer committed to {self.cfg.table} during this load ({e}); "
                        "this load's files were deleted and nothing was committed; run again"
                    ) from None
                log(f"commit conflict with a non-logsource writer, retrying on the new snapshot ({e})")

    # -- status / verify ---------------------------------------------------------------------------
    def status_rows(self) -> list[dict[str, Any]]:
        stats: dict[TP, dict[str, Any]] = {}
        loads = loads_of(self.table())
        for snap in loads:
            for r in _ranges(snap):
                s = stats.setdefault((r.topic, r.partition), {"rows": 0, "loads": 0, "first": r.start})
                s["rows"] += r.count
                s["loads"] += 1 if r.count else 0
                s["last_seq"] = int(snap.summary[SEQ_KEY])
                s["last_commit"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(snap.timestamp_ms / 1000))
        end = _offsets(loads[-1]) if loads else {}
        return [
            {
                "topic": t,
                "partition": p,
                "from": stats.get((t, p), {}).get("first", o),
                "committed": o,
                "rows": stats.get((t, p), {}).get("rows", 0),
                "loads": stats.get((t, p), {}).get("loads", 0),
                "last_seq": stats.get((t, p), {}).get("last_seq", -1),
                "last_commit": stats.get((t, p), {}).get("last_commit", "-"),
            }
            for (t, p), o in sorted(end.items())
        ]

    def scan_offsets(self) -> Any:
        """(topic, partition, offset) of every row, as a pyiceberg scan of the current snapshot reads them."""
        return self.table(refresh=True).scan(selected_fields=("topic", "partition", "offset")).to_arrow()

    def verify(self, spark: Any, log: Log) -> VerifyReport:
        """Scan the table with pyiceberg and compare every partition with the committed ranges."""
        problems: list[str] = []
        table = self.table(refresh=True)
        loads = loads_of(table)
        expected = expected_from_ranges([(int(s.summary[SEQ_KEY]), _ranges(s)) for s in loads], problems)
        got: dict[TP, dict[str, Any]] = {}
        if table is not None and table.current_snapshot() is not None:
            g = (
                self.scan_offsets()
                .group_by(["topic", "partition"])
                .aggregate(
                    [("offset", "count"), ("offset", "count_distinct"), ("offset", "min"), ("offset", "max")]
                )
            )
            for r in g.to_pylist():
                got[(r["topic"], int(r["partition"]))] = {
                    "rows": r["offset_count"],
                    "distinct": r["offset_count_distinct"],
                    "first": r["offset_min"],
                    "last": r["offset_max"],
                }
        table_rows = compare(expected, got, problems)
        log(format_table(table_rows))
        log("verify: OK" if not problems else "verify: FAILED\n  " + "\n  ".join(problems))
        return VerifyReport(table_rows, problems)
