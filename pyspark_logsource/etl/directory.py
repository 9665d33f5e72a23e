"""The directory sink: files on any Hadoop filesystem, offsets in manifests next to them (offsets/commit.py)."""

from __future__ import annotations

import time
from typing import Any

from ..errors import AuditMismatch
from ..faults import fault_point
from ..offsets import (
    CommittedFile,
    Committer,
    Manifest,
    offsets_dict,
    open_store,
)
from .audit import audit_files, check_audit
from .commit import LoadResult, Log, VerifyReport, file_ranges, published_name
from .config import EtlConfig
from .plan import TP, LoadPlan
from .verify import verify_directory


class DirectorySink:
    """Load into a directory: stage or write in place, audit, put the manifest (the commit), publish."""

    def __init__(self, cfg: EtlConfig, spark: Any = None) -> None:
        self.cfg = cfg
        self.store = open_store(cfg.output, spark)
        self.committer = Committer(self.store, cfg.commit_mode)

    def recover(self, log: Log) -> None:
        rep = self.committer.recover()
        if not rep.nothing:
            log(f"recovery: {rep}")

    def committed_offsets(self) -> dict[TP, int]:
        return self.store.committed_offsets()

    def last_seq(self) -> int:
        return max(self.store.manifest_seqs(), default=0)

    def status_rows(self) -> list[dict[str, Any]]:
        return self.store.status_rows()

    def write(self, df: Any, path: str) -> None:
        """Spark writes the load's rows under path."""
        w = df.write.format(self.cfg.format).mode("errorifexists")
        if self.cfg.format == "csv":
            w = w.option("header", "true")
        if self.cfg.partition_by:
            w = w.partitionBy(*self.cfg.partition_by)
        w.save(path)

    def write_and_commit(self, spark: Any, df: Any, plan: LoadPlan, log: Log) -> LoadResult:
        """Write df (the plan's rows, transformed), audit it, commit the manifest, publish."""
        t0 = time.time()
        staged = self.committer.begin()
        fault_point("write")
        self.write(df, staged.staging)
        t_write = time.time()
        fault_point("after_write")
        stats = audit_files(spark, self.cfg.format, staged.staging, self.store.fs)
        t_audit = time.time()
        try:
            ranges = check_audit(plan, stats)
        except AuditMismatch:
            self.store.fs.delete(staged.staging, recursive=True)
            raise
        taken: set[str] = set()
        files = []
        for rel, fr in file_ranges(stats, staged.staging).items():
            final = published_name(rel, fr, staged.seq, taken) if staged.mode == "rename" else rel
            files.append(
                CommittedFile(
                    f"{staged.staging_rel}/{rel}",
                    f"{staged.staging_rel}/{final}" if staged.mode == "direct" else final,
                    sum(r.count for r in fr),
                    tuple(fr),
                )
            )
        manifest = Manifest(
            staged.seq,
            staged.load_id,
            self.cfg.format,
            offsets_dict(plan.new_offsets()),
            ranges,
            files,
            mode=staged.mode,
        )
        self.committer.commit(manifest)
        t_end = time.time()
        timings = {"write": t_write - t0, "audit": t_audit - t_write, "commit": t_end - t_audit}
        return LoadResult(staged.seq, ranges, len(files), t_end - t0, timings=timings)

    def verify(self, spark: Any, log: Log) -> VerifyReport:
        return verify_directory(spark, self.store, log)

    def repair(self) -> Manifest | None:
        """Withdraw the newest load (its files storage lost), so its range is loaded again."""
        return self.committer.rollback_latest()
