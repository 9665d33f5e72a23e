"""Transactions of one partition: open transactions, the last stable offset, aborted transactions.

A transactional batch (attribute bit 4) of a producer with no open
transaction in this partition opens one at its base offset; a control batch
(a COMMIT or ABORT marker, written only by the transaction coordinator) closes
it. The **last stable offset** (LSO) is the first offset of the oldest open
transaction, or the log end when none is open: ``read_committed`` readers
never read past it, so staged data is invisible until its marker is written.

Aborted transactions are remembered as Kafka's ``.txnindex`` entries
``(producer id, first offset, last offset = the marker's offset, LSO when it
was written)``; a ``read_committed`` Fetch returns those overlapping the
fetched range, and the reader drops the producer's batches from the first
offset up to the marker.

Durability: the state is a function of the log. It is saved in
``<offset>.txnsnapshot`` (at roll and clean close, beside the producer
snapshot) and on open the batches after the snapshot are replayed, as the
producer state is. Entries of the aborted index below the log start are
pruned when a snapshot is written.
"""

from __future__ import annotations

import json
import logging
import os
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import InvalidRecord
from ...format.control import ABORT, marker_type
from ...format.header import CONTROL_BIT, TRANSACTIONAL_BIT, TXN_BITS
from .producer_state import ProducerEntry, ProducerStateManager
from .segment import LogSegment
from .snapshots import SnapshotFiles

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".txnsnapshot"


class AbortedTxn(NamedTuple):
    """One aborted transaction of the partition (Kafka's AbortedTxn of the .txnindex)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(slots=True)
class OpenTxn:
    """A transaction with staged data in this partition and no marker yet."""

    producer_id: int
    producer_epoch: int
    first_offset: int
    records: int
    #: monotonic seconds of its first append here (or of the broker start, after a restart)
    started: float
    #: monotonic seconds of its last append here
    last_append: float = 0.0

    def __post_init__(self) -> None:
        self.last_append = max(self.last_append, self.started)


class PartitionTransactions:
    """Open and aborted transactions of one partition log (used under the log's lock)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.snapshots = SnapshotFiles(self.directory, SNAPSHOT_SUFFIX)
        self.open: dict[int, OpenTxn] = {}
        self.aborted: list[AbortedTxn] = []

    # ------------------------------------------------------------ queries

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (None: everything is decided)."""
        if not self.open:
            return None
        return min(t.first_offset for t in self.open.values())

    def last_stable_offset(self, high_watermark: int) -> int:
        """What read_committed readers may read up to (exclusive)."""
        fu = self.first_unstable_offset()
        return high_watermark if fu is None else min(fu, high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with data in ``[start, end)`` (what a Fetch of that range returns)."""
        return [a for a in self.aborted if a.last_offset >= start and a.first_offset < end]

    # ------------------------------------------------------------ updates (append and replay)

    def on_data(
        self, producer_id: int, producer_epoch: int, offset: int, count: int, now: float | None = None
    ) -> None:
        """A transactional data batch at ``offset`` was appended."""
        t = self.open.get(producer_id)
        if t is None:
            self.open[producer_id] = OpenTxn(
                producer_id, producer_epoch, offset, count, time.monotonic() if now is None else now
            )
        else:
            t.records += count
            t.producer_epoch = max(t.producer_epoch, producer_epoch)
            t.last_append = time.monotonic() if now is None else now

    def on_marker(self, producer_id: int, kind: int, offset: int, lso: int) -> OpenTxn | None:
        """A marker at ``offset`` closed ``producer_id``'s transaction; return what it closed."""
        t = self.open.pop(producer_id, None)
        if t is not None and kind == ABORT:
            self.aborted.append(AbortedTxn(producer_id, t.first_offset, offset, lso))
        return t

    def truncate_to(self, offset: int) -> None:
        """Forget what is at or after ``offset`` (the caller replays the log to rebuild the rest)."""
        self.open = {p: t for p, t in self.open.items() if t.first_offset < offset}
        self.aborted = [a for a in self.aborted if a.last_offset < offset]

    def reset(self) -> None:
        self.open = {}
        self.aborted = []

    # ------------------------------------------------------------ snapshots

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending."""
        return self.snapshots.offsets()

    def take_snapshot(self, offset: int, log_start_offset: int) -> None:
        """Save the state as of ``offset`` (the log end), atomically; drop index entries below the log start."""
        self.aborted = [a for a in self.aborted if a.last_offset >= log_start_offset]
        body = json.dumps(
            {
                "open": [
                    [t.producer_id, t.producer_epoch, t.first_offset, t.records] for t in self.open.values()
                ],
                "aborted": [list(a) for a in self.aborted],
            },
            separators=(",", ":"),
        )
        self.snapshots.write(offset, body.encode())

    def load(self, log_end_offset: int) -> int | None:
        """Load the newest readable snapshot at or below the log end; return its offset (None: none)."""
        self.reset()
        now = time.monotonic()
        for off, path in self.snapshots.newest_first(log_end_offset):
            try:
                d = json.loads(path.read_text())
                opened = {int(p): OpenTxn(int(p), int(e), int(f), int(n), now) for p, e, f, n in d["open"]}
                aborted = [AbortedTxn(*map(int, a)) for a in d["aborted"]]
            except (OSError, ValueError, TypeError, KeyError) as e:
                log.warning("%s: ignoring unreadable transaction snapshot (%s)", path, e)
                path.unlink(missing_ok=True)
                continue
            self.open, self.aborted = opened, aborted
            return off
        return None

    def delete_snapshots_after(self, offset: int) -> None:
        """Remove snapshots taken past ``offset`` (after a truncation)."""
        self.snapshots.delete_after(offset)


# ---------------------------------------------------------------- the log's hooks
#
# What an append and a replay do to the partition's transactions (kept here so that the
# log only calls them). They are handed the two objects they update, not the log.


def check_append(batches: list, control_ok: bool) -> bool:
    """Validate the transactional batches of an append; True when any batch is transactional.

    Control batches come only from the coordinator (``control_ok``); a
    transactional data batch must be idempotent (producer id and sequence).
    """
    seen = False
    for pos, h in batches:
        a = h.attributes
        if not a & TXN_BITS:
            continue
        seen = True
        if a & CONTROL_BIT:
            if not control_ok:
                raise InvalidRecord(f"clients may not write control batches (batch at position {pos})")
        elif h.producer_id < 0 or h.base_sequence < 0:
            raise InvalidRecord(
                f"a transactional batch needs a producer id and sequence (batch at position {pos})"
            )
    return seen


def apply_append(
    txns: PartitionTransactions,
    producers: ProducerStateManager,
    mv: memoryview,
    batches: list,
    base_offsets: list[int],
) -> None:
    """Record what the appended batches (at ``base_offsets``) do to open transactions (under the log lock)."""
    now = time.monotonic()
    for (pos, h), base in zip(batches, base_offsets, strict=True):
        a = h.attributes
        if not a & TXN_BITS:
            continue
        if a & CONTROL_BIT:
            _on_marker(txns, producers, h.producer_id, h.producer_epoch, marker_type(mv, pos, h), base)
        else:
            txns.on_data(h.producer_id, h.producer_epoch, base, h.record_count, now)


def _on_marker(
    txns: PartitionTransactions, producers: ProducerStateManager, pid: int, epoch: int, kind: int, offset: int
) -> None:
    txns.on_marker(pid, kind, offset, txns.last_stable_offset(offset))
    # the marker's epoch fences older epochs of the producer (a zombie task attempt)
    entry = producers.producers.get(pid)
    if entry is None:
        producers.producers[pid] = ProducerEntry(pid, epoch)
    elif epoch > entry.epoch:
        entry.epoch = epoch
        entry.batches.clear()


def rebuild(
    txns: PartitionTransactions,
    producers: ProducerStateManager,
    segments: Sequence[LogSegment],
    log_end_offset: int,
) -> int:
    """Load the newest transaction snapshot and replay the batch headers of ``segments`` (the log's,
    oldest first) after it; return how many."""
    snap = txns.load(log_end_offset)
    start = max(snap if snap is not None else 0, segments[0].base_offset)
    n = 0
    if start >= log_end_offset:
        return 0
    bases = [s.base_offset for s in segments]
    for seg in segments[max(0, bisect_right(bases, start) - 1) :]:
        for h in seg.iter_headers(start):
            if h.base_offset < start or not h.attributes & TXN_BITS:
                continue
            n += 1
            if h.is_control:
                region = seg.read(h.base_offset, h.size)
                data = os.pread(region.file.fileno(), h.size, region.position) if region is not None else b""
                _on_marker(
                    txns, producers, h.producer_id, h.producer_epoch, marker_type(data, 0, h), h.base_offset
                )
            else:
                txns.on_data(h.producer_id, h.producer_epoch, h.base_offset, h.record_count)
    return n


def aborted_rows(txns: PartitionTransactions, run) -> Any:
    """Per row of a decoded run (format.compact.Run): True for records of aborted transactions.

    The cleaner drops them and keeps them out of its offset map, so a compacted
    key's latest committed value is never replaced by an aborted one.
    """
    import numpy as np

    n = len(run.walked)
    bad = np.zeros(n, dtype=bool)
    if txns.aborted:
        ranges: dict[int, list[tuple[int, int]]] = {}
        for a in txns.aborted:
            ranges.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
        for i, (_, h) in enumerate(run.walked):
            if h.attributes & TXN_BITS == TRANSACTIONAL_BIT:
                bad[i] = any(lo <= h.base_offset <= hi for lo, hi in ranges.get(h.producer_id, ()))
    return bad[run.batch_of_row] if bad.any() else np.zeros(run.table.num_rows, dtype=bool)
