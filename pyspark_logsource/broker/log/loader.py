"""The loader's part of the cleaner's crash-safe segment swap (Kafka's suffix protocol).

The cleaner replaces a group of old segments ``B1..Bk`` by one cleaned
segment named ``B1``:

1. it writes ``B1.log.cleaned`` (and its indexes) and fsyncs them;
2. it writes ``B1.swapmeta`` (the bases it replaces), fsynced;
3. it renames the indexes, then the log, to ``.swap`` and fsyncs the
   directory: the rename of ``B1.log.swap`` is the commit point;
4. it renames the old segments to ``.deleted`` (deleted later);
5. it renames ``B1.*.swap`` to the final names and removes ``B1.swapmeta``.

On open, :func:`complete_swaps` makes the directory hold exactly one copy of
every offset: ``.cleaned`` files were never committed and are removed; a
``.log.swap`` is committed, so the old segments it lists are removed and it
takes its final name. A ``.log.swap`` that fails its CRC scan while every
segment it replaces is still there is rolled back instead (nothing is lost).
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from .config import LogConfig
from .segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIMEINDEX_SUFFIX,
    LogSegment,
    segment_name,
)

log = logging.getLogger(__name__)

SWAP_META_SUFFIX = ".swapmeta"
#: test-only fault injection: the name of a swap step after which the process kills itself with SIGKILL
FAULT_ENV = "LOGSOURCE_CLEANER_FAULT"


def fault_point(name: str) -> None:
    """Die with SIGKILL here when the environment asks for it (crash tests of the swap protocol)."""
    if os.environ.get(FAULT_ENV) == name:
        log.warning("fault injection: SIGKILL at swap step %r", name)
        os.kill(os.getpid(), signal.SIGKILL)


def fsync_dir(directory: Path) -> None:
    """Make renames in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_swap_meta(directory: Path, base: int, replaced: list[int]) -> Path:
    """Durably record which segments the swap of ``base`` replaces (before the commit rename)."""
    path = directory / (segment_name(base) + SWAP_META_SUFFIX)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(",".join(str(b) for b in replaced) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def _read_swap_meta(path: Path) -> list[int] | None:
    try:
        text = path.read_text().strip()
        out = [int(x) for x in text.split(",")] if text else []
    except (OSError, ValueError):
        return None
    return out if out and all(b >= 0 for b in out) else None


def _segment_files(directory: Path, base: int, suffix: str = "") -> list[Path]:
    stem = segment_name(base)
    return [directory / (stem + s + suffix) for s in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX)]


def complete_swaps(directory: Path, config: LogConfig, name: str = "") -> set[int]:
    """Finish or roll back the swaps a crash interrupted; return the bases whose segments need a CRC scan."""
    d = Path(directory)
    for p in list(d.iterdir()):
        if p.name.endswith(CLEANED_SUFFIX):
            p.unlink(missing_ok=True)  # never committed: the originals are intact
    recover: set[int] = set()
    swaps = sorted(p for p in d.iterdir() if p.name.endswith(LOG_SUFFIX + SWAP_SUFFIX))
    for swap_log in swaps:
        stem = swap_log.name[: -len(LOG_SUFFIX + SWAP_SUFFIX)]
        if not stem.isdigit():
            continue
        base = int(stem)
        meta_path = d / (stem + SWAP_META_SUFFIX)
        replaced = _read_swap_meta(meta_path) if meta_path.exists() else None
        seg = LogSegment(d, base, config, SWAP_SUFFIX)
        cut = seg.recover()
        present = [b for b in (replaced or [base]) if (d / (segment_name(b) + LOG_SUFFIX)).exists()]
        if cut and len(present) == len(replaced or [base]):
            log.error("%s: swap segment %s is damaged (%d bytes fail their checks) and every segment it "
                      "replaces is intact: rolling the swap back", name, swap_log.name, cut)  # fmt: skip
            seg.destroy()
            meta_path.unlink(missing_ok=True)
            continue
        if cut:
            log.error("%s: swap segment %s is damaged after its originals were removed; %d bytes lost",
                      name, swap_log.name, cut)  # fmt: skip
        if replaced is None:
            # Kafka's rule: the swap replaces the segments whose base lies within its offsets
            end = max(seg.next_offset, base + 1)
            replaced = sorted(int(p.name[:-len(LOG_SUFFIX)]) for p in d.glob("*" + LOG_SUFFIX)
                              if p.name[:-len(LOG_SUFFIX)].isdigit() and base <= int(p.name[:-len(LOG_SUFFIX)]) < end)  # fmt: skip
        seg.close()
        for b in replaced:
            for p in _segment_files(d, b):
                p.unlink(missing_ok=True)
        for old, new in zip(_segment_files(d, base, SWAP_SUFFIX), _segment_files(d, base), strict=True):
            if old.exists():
                os.replace(old, new)
        fsync_dir(d)
        meta_path.unlink(missing_ok=True)
        log.warning("%s: finished an interrupted swap: segment %d replaces %s", name, base, replaced)
        recover.add(base)
    for p in list(d.iterdir()):
        n = p.name
        if n.endswith(SWAP_SUFFIX) or n.endswith(SWAP_META_SUFFIX) or n.endswith(SWAP_META_SUFFIX + ".tmp"):
            p.unlink(missing_ok=True)  # index swaps and metadata of swaps already finished or rolled back
    return recover
