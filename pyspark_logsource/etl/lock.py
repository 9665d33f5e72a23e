"""One ETL run at a time per output directory and per streaming checkpoint, where the filesystem can lock.

Two runs on one output collide even though their commits cannot both win (the manifest put is
put-if-absent): each run's recovery deletes the staging (or ``load=``) directories of loads that have no
manifest, which include the other run's load in progress, and the streaming flavour removes temporary
files from the checkpoint that a live driver is about to rename. So a run locks ``<dir>/.lock``
(:mod:`pyspark_logsource.broker.log.dir_lock`: an ``flock`` the kernel drops when the driver dies, so a
killed run never blocks the next one); the file's leading dot hides it from Spark's and pyarrow's readers.

Only local directories (plain paths and ``file:`` URIs) are locked: HDFS, S3A and the other Hadoop stores
offer no lock a process holds for its lifetime, so there the rule stays "one writer per output
directory" (a second run's commit still fails with CommitConflict rather than doubling data). An Iceberg
table is not a directory of ours: its catalog's optimistic commit is its guard.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

from ..broker.log.dir_lock import DirLock, release_all
from .config import EtlConfig

OWNER = "logsource etl run"


def local_dir(uri: str) -> Path | None:
    """The local directory of a plain path or ``file:`` URI; None for any other scheme."""
    if uri.startswith("file:"):
        return Path(urlparse(uri).path)
    if "://" in uri:
        return None
    return Path(uri)


def dirs_to_lock(cfg: EtlConfig) -> list[tuple[str, Path]]:
    """(kind, directory) for each local directory this run writes to or recovers."""
    out: list[tuple[str, Path]] = []
    if cfg.sink == "directory":
        d = local_dir(cfg.output)
        if d is not None:
            out.append(("output directory", d))
    if cfg.streaming and cfg.checkpoint:
        d = local_dir(cfg.checkpoint)
        if d is not None:
            out.append(("checkpoint", d))
    if cfg.action != "load":
        # --status/--verify/--repair of a directory that does not exist: nothing to guard, nothing to create
        out = [(kind, d) for kind, d in out if d.exists()]
    return out


@contextlib.contextmanager
def run_lock(cfg: EtlConfig) -> Iterator[list[DirLock]]:
    """Hold the locks of :func:`dirs_to_lock` for the block; DirectoryInUse if another run holds one."""
    locks: list[DirLock] = []
    try:
        seen: set[Path] = set()
        for kind, d in dirs_to_lock(cfg):
            if d.resolve() not in seen:
                seen.add(d.resolve())
                locks.append(DirLock.acquire(d, OWNER, kind))
        yield locks
    finally:
        release_all(locks)
