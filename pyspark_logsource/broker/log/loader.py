"""Recovery: opening a partition log's directory and loading it (Kafka's LogLoader).

:class:`LogLoader` owns recovery. It removes what a crash interrupted
(``*.deleted``, ``*.tmp``, unfinished swaps), opens the segments, CRC-scans
those past the recovery point (all of them after an unclean shutdown, which
the missing ``.clean_shutdown`` marker tells) and cuts a torn tail, then
rebuilds the producer state, the transactions and the leader epoch cache from
their snapshots and the batches after them. It returns a :class:`LoadedLog`
value (the segments, the log end, the recovery point) from which
:class:`~.log.PartitionLog` builds its segment list; it writes no field of the log.

The cleaner's crash-safe segment swap (Kafka's suffix protocol), the loader's part:

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
import time
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ...faults import fault_point  # noqa: F401  (the swap steps' fault points import it from here)
from . import transactions as txn
from .config import LogConfig
from .epochs import LeaderEpochCache
from .flush import read_recovery_point, write_recovery_point
from .producer_state import ProducerStateManager
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIMEINDEX_SUFFIX,
    LogSegment,
    segment_name,
)

log = logging.getLogger(__name__)
#: the log's logger: a load is reported as the log's doing
_log_log = logging.getLogger(__package__ + ".log")

#: written by a clean close; its absence on open means every segment past the recovery point is scanned
CLEAN_SHUTDOWN_FILE = ".clean_shutdown"

SWAP_META_SUFFIX = ".swapmeta"


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
            log.error(
                "%s: swap segment %s is damaged (%d bytes fail their checks) and every segment it "
                "replaces is intact: rolling the swap back",
                name,
                swap_log.name,
                cut,
            )
            seg.destroy()
            meta_path.unlink(missing_ok=True)
            continue
        if cut:
            log.error(
                "%s: swap segment %s is damaged after its originals were removed; %d bytes lost",
                name,
                swap_log.name,
                cut,
            )
        if replaced is None:
            # Kafka's rule: the swap replaces the segments whose base lies within its offsets
            end = max(seg.next_offset, base + 1)
            replaced = sorted(
                int(p.name[: -len(LOG_SUFFIX)])
                for p in d.glob("*" + LOG_SUFFIX)
                if p.name[: -len(LOG_SUFFIX)].isdigit() and base <= int(p.name[: -len(LOG_SUFFIX)]) < end
            )
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


class LoadedLog(NamedTuple):
    """What loading a log directory found: its segments (oldest first), the log end, the recovery point."""

    segments: list[LogSegment]
    next_offset: int
    recovery_point: int
    #: wall-clock ms of the load (the log's "last flush" until it flushes)
    loaded_ms: int
    #: clean, recovered_segments, truncated_bytes, replayed_batches, ms
    info: dict[str, Any]


class LogLoader:
    """Recovers the log ``name`` in ``directory`` and loads the state derived from it into the
    producer state, transactions and epoch cache it is handed."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        name: str,
        producer_state: ProducerStateManager,
        txns: txn.PartitionTransactions,
        epochs: LeaderEpochCache,
    ) -> None:
        self.directory = Path(directory)
        self.config = config
        self.name = name
        self.producer_state = producer_state
        self.txns = txns
        self.epochs = epochs

    def load(self) -> LoadedLog:
        """Recover the directory (see the module docstring); OSError when it cannot."""
        t0 = time.monotonic()
        d = self.directory
        for p in list(d.iterdir()):
            if p.name.endswith(DELETED_SUFFIX) or p.name.endswith(".tmp"):
                p.unlink(missing_ok=True)  # deletions and writes that a crash interrupted
        swapped = complete_swaps(d, self.config, self.name)  # before the segments are listed
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        marker.unlink(missing_ok=True)  # from here on, a crash must not look clean
        recovery_point = read_recovery_point(d)
        bases = sorted(
            int(p.name[: -len(LOG_SUFFIX)])
            for p in d.glob("*" + LOG_SUFFIX)
            if p.name[: -len(LOG_SUFFIX)].isdigit()
        )
        self._remove_orphan_indexes(bases)
        segments: list[LogSegment] = []
        recovered, cut = 0, 0
        for i, base in enumerate(bases):
            seg = LogSegment(d, base, self.config)
            flushed = i + 1 < len(bases) and bases[i + 1] <= recovery_point
            seg_cut = 0
            if (clean or flushed) and base not in swapped:
                seg.load()
            else:
                recovered += 1
                seg_cut = seg.recover()
                cut += seg_cut
            # compaction may leave a gap between segments (its last records removed), never an overlap
            if segments and not (
                seg.base_offset == segments[-1].next_offset
                or (self.config.compact and seg.base_offset > segments[-1].next_offset)
            ):
                log.warning(
                    "%s: segment %d does not follow offset %d; dropping it and later segments",
                    self.name,
                    base,
                    segments[-1].next_offset,
                )
                seg.destroy()
                self._destroy_bases(bases[i + 1 :])
                break
            segments.append(seg)
            if seg_cut:
                # A torn segment means nothing after it was written safely.
                self._destroy_bases(bases[i + 1 :])
                break
        if not segments:
            segments.append(LogSegment(d, 0, self.config))
        for seg in segments[:-1]:
            seg.seal_time_index()  # a rebuilt index of an inactive segment lacks its roll entry
        leo = segments[-1].next_offset
        if recovered:
            for seg in segments:
                seg.flush()
        recovery_point = leo if (clean or recovered) else min(recovery_point, leo)
        write_recovery_point(d, recovery_point)
        loaded_ms = int(time.time() * 1000)
        replayed = replay_producer_state(self.producer_state, self.txns, segments, leo)
        start = segments[0].base_offset
        if not self.epochs.load() and leo > start:
            self.epochs.rebuild(
                (h.leader_epoch, h.base_offset) for s in segments for h in s.iter_headers(s.base_offset)
            )
        self.epochs.truncate_from_end(leo)  # a recovery may have cut the log below a checkpointed epoch
        info = {
            "clean": clean,
            "recovered_segments": recovered,
            "truncated_bytes": cut,
            "replayed_batches": replayed,
            "ms": round((time.monotonic() - t0) * 1000, 1),
        }
        _log_log.info(
            "loaded log %s: offsets [%d, %d), %d segments, clean=%s, recovered %d segments, "
            "truncated %d bytes, replayed %d producer batches in %.1f ms",
            self.name,
            start,
            leo,
            len(segments),
            clean,
            recovered,
            cut,
            replayed,
            info["ms"],
        )
        return LoadedLog(segments, leo, recovery_point, loaded_ms, info)

    def _destroy_bases(self, bases: list[int]) -> None:
        for base in bases:
            log.warning("%s: dropping segment %d after a damaged one", self.name, base)
            LogSegment(self.directory, base, self.config).destroy()

    def _remove_orphan_indexes(self, bases: list[int]) -> None:
        known = {segment_name(b) for b in bases}
        for p in self.directory.iterdir():
            if p.suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX) and p.stem not in known:
                p.unlink(missing_ok=True)


def replay_producer_state(
    producer_state: ProducerStateManager,
    txns: txn.PartitionTransactions,
    segments: Sequence[LogSegment],
    log_end: int,
) -> int:
    """Load the newest producer and transaction snapshots below ``log_end`` and replay the batches of
    ``segments`` (the log's, oldest first) after them; return how many batches the producer state replayed."""
    snap = producer_state.load(log_end)
    start = max(snap if snap is not None else 0, segments[0].base_offset)
    n = 0
    if start < log_end:
        bases = [s.base_offset for s in segments]
        for seg in segments[max(0, bisect_right(bases, start) - 1) :]:
            for h in seg.iter_headers(start):
                producer_state.replay(h)
                n += 1
    txn.rebuild(txns, producer_state, segments, log_end)
    return n
