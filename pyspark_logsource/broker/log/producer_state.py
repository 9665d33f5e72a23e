"""Idempotent-producer state of one partition: the last batches of each producer id.

For every producer id the partition remembers its epoch and the sequence
ranges and offsets of its last MAX_BATCHES_PER_PRODUCER batches. Kafka keeps
5 (its ``max.in.flight.requests.per.connection`` bound); this client sends
runs of several batches per request, so it may have more unanswered (see
``client.producer.MAX_UNANSWERED_BATCHES``, which must not exceed this), and
Kafka's clients need no more than 5. An append checks each batch against
that: a retry of one of those is a duplicate (answered with the original
offsets, nothing written), a gap is OutOfOrderSequence, an older epoch is
InvalidProducerEpoch.

The state is a function of the log, so it survives a restart: it is saved in
``<offset>.snapshot`` files (at roll and clean close) and, on open, the latest
snapshot is loaded and the batch headers after it are replayed.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from ...errors import InvalidProducerEpoch, OutOfOrderSequence, UnknownProducerId
from ...format._speedups import load_extension
from ...format.batch import BatchHeader
from ...format.crc import crc32c
from .snapshots import SnapshotFiles

log = logging.getLogger(__name__)

#: 5 requests in flight x 16 batches per request, the producer's defaults
MAX_BATCHES_PER_PRODUCER = 80
SNAPSHOT_SUFFIX = ".snapshot"
_INT32_MAX = (1 << 31) - 1
_new_meta = tuple.__new__  # BatchMetadata(...) without namedtuple's Python-level __new__


class BatchMetadata(NamedTuple):
    """Sequence range and offsets of one appended producer batch."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


class ProducerEntry:
    """What the partition knows about one producer id."""

    __slots__ = ("producer_id", "epoch", "batches", "last_timestamp")

    def __init__(
        self, producer_id: int, epoch: int, batches: Iterable[BatchMetadata] = (), last_timestamp: int = -1
    ):
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=MAX_BATCHES_PER_PRODUCER)
        self.last_timestamp = last_timestamp

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch, self.batches, self.last_timestamp)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def duplicate_of(self, h: BatchHeader) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == h.base_sequence and b.last_seq == h.last_sequence:
                return b
        return None

    def record(self, h: BatchHeader) -> None:
        self.add(
            h.producer_epoch,
            BatchMetadata(h.base_sequence, h.last_sequence, h.base_offset, h.last_offset),
            h.max_timestamp,
        )

    def add(self, epoch: int, batch: BatchMetadata, max_timestamp: int) -> None:
        """Remember a batch of ``epoch`` (a newer epoch forgets the older one's batches)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()
        self.batches.append(batch)
        if max_timestamp > self.last_timestamp:
            self.last_timestamp = max_timestamp


#: the compiled twins of ProducerAppend.stage_next and .commit (``_cproducers``), None when switched off or
#: not built; they make staged batches and new entries of these two types
_cproducers = load_extension(__package__ + "._cproducers")
if _cproducers is not None:
    _cproducers.bind(BatchMetadata, ProducerEntry)


class ProducerAppend:
    """Checks for the batches of one append, staged so that a failure changes nothing.

    Staged batches are applied to the producers' entries at :meth:`commit`. The usual
    append has one batch per producer, checked against the entry as it is; only a
    producer's second batch in the same append is checked against a staged copy of its
    entry (copying up to MAX_BATCHES_PER_PRODUCER batches per append cost more than the
    rest of the check).
    """

    __slots__ = ("_producers", "_staged", "_copies", "_tails")

    def __init__(self, manager: ProducerStateManager) -> None:
        self._producers = manager.producers
        #: (producer id, epoch, batch, max timestamp) in append order
        self._staged: list[tuple[int, int, BatchMetadata, int]] = []
        #: producer id -> its entry with this append's staged batches, made on a second batch
        self._copies: dict[int, ProducerEntry] | None = None
        #: producer id -> (epoch, last sequence) of its last staged batch (what the next must follow)
        self._tails: dict[int, tuple[int, int]] = {}

    def _entry(self, pid: int) -> ProducerEntry | None:
        """The producer's entry as the staged batches leave it."""
        copies = self._copies
        if copies is not None and pid in copies:
            return copies[pid]
        entry = self._producers.get(pid)
        if not any(s[0] == pid for s in self._staged):
            return entry
        entry = entry.copy() if entry is not None else None
        for spid, epoch, batch, ts in self._staged:
            if spid == pid:
                if entry is None:
                    entry = ProducerEntry(pid, epoch)
                entry.add(epoch, batch, ts)
        if copies is None:
            copies = self._copies = {}
        copies[pid] = entry
        return entry

    def check(self, h: BatchHeader) -> BatchMetadata | None:
        """Validate an idempotent batch (header offsets not yet final); return the original if duplicate."""
        pid = h.producer_id
        entry = self._entry(pid) if self._staged else self._producers.get(pid)
        if entry is None:
            if h.base_sequence != 0:
                raise UnknownProducerId(
                    f"producer {pid} has no state in this partition and its first batch has sequence "
                    f"{h.base_sequence}, not 0"
                )
            return None
        if h.producer_epoch < entry.epoch:
            raise InvalidProducerEpoch(f"producer {pid} epoch {h.producer_epoch} is older than {entry.epoch}")
        if h.producer_epoch > entry.epoch:
            if h.base_sequence != 0:
                raise OutOfOrderSequence(
                    f"producer {pid} bumped its epoch to {h.producer_epoch} but sent sequence {h.base_sequence}, not 0"
                )
            return None
        batches = entry.batches
        expected = (batches[-1].last_seq + 1) & _INT32_MAX if batches else 0
        if h.base_sequence == expected:  # the usual case: no look through the remembered batches
            return None
        dup = entry.duplicate_of(h)
        if dup is not None:
            return dup
        raise OutOfOrderSequence(
            f"producer {pid} epoch {h.producer_epoch}: sequence {h.base_sequence}, expected {expected}"
        )

    def record(self, h: BatchHeader, base_offset: int, max_timestamp: int) -> None:
        """Stage a checked batch as appended at ``base_offset`` (its header is the one received)."""
        pid, seq, lod = h.producer_id, h.base_sequence, h.last_offset_delta
        staged = (
            pid,
            h.producer_epoch,
            _new_meta(BatchMetadata, (seq, (seq + lod) & _INT32_MAX, base_offset, base_offset + lod)),
            max_timestamp,
        )
        self._staged.append(staged)
        self._tails[pid] = (staged[1], staged[2][1])
        copies = self._copies
        if copies is not None and pid in copies:
            copies[pid].add(*staged[1:])

    def stage_next_py(
        self, pid: int, epoch: int, seq: int, last_offset_delta: int, base_offset: int, max_timestamp: int
    ) -> bool:
        """Stage the batch as :meth:`check` and :meth:`record` would if it is the producer's next:
        the sequence after its last batch in the same epoch, or 0 from a producer with no state here;
        False, nothing staged, for any other batch (then :meth:`check` decides: a duplicate, a gap,
        a fenced or a new epoch). The usual idempotent append: no duplicate search, no copy. The
        reference: :meth:`stage_next` is ``_cproducers``' compiled twin when it is built."""
        tail = self._tails.get(pid)
        if tail is None:
            entry = self._producers.get(pid)
            if entry is None:
                if seq != 0:
                    return False
            else:
                batches = entry.batches
                if epoch != entry.epoch or seq != ((batches[-1][1] + 1) & _INT32_MAX if batches else 0):
                    return False
        elif epoch != tail[0] or seq != (tail[1] + 1) & _INT32_MAX:
            return False
        last_seq = (seq + last_offset_delta) & _INT32_MAX
        batch = _new_meta(BatchMetadata, (seq, last_seq, base_offset, base_offset + last_offset_delta))
        self._staged.append((pid, epoch, batch, max_timestamp))
        self._tails[pid] = (epoch, last_seq)
        copies = self._copies
        if copies is not None and pid in copies:
            copies[pid].add(epoch, batch, max_timestamp)
        return True

    stage_next = stage_next_py if _cproducers is None else _cproducers.stage_next

    def savepoint(self) -> int:
        """A point to :meth:`rollback` to (before one run of a coalesced append)."""
        return len(self._staged)

    def rollback(self, point: int) -> None:
        """Unstage the batches staged since ``point`` (the run failed)."""
        del self._staged[point:]
        self._copies = None  # rebuilt from what is still staged
        self._tails = {pid: (epoch, batch[1]) for pid, epoch, batch, _ in self._staged}

    def commit_py(self) -> None:
        """Apply the staged batches (after they are written): each added to its producer's entry (made
        when the producer has none). The reference: :meth:`commit` is ``_cproducers``' compiled twin when
        it is built (it must agree with this method on every input), this method otherwise."""
        producers = self._producers
        for pid, epoch, batch, ts in self._staged:
            entry = producers.get(pid)
            if entry is None:
                entry = producers[pid] = ProducerEntry(pid, epoch)
            entry.add(epoch, batch, ts)

    commit = commit_py if _cproducers is None else _cproducers.commit


class ProducerStateManager:
    """Producer entries of one partition and their snapshot files."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.snapshots = SnapshotFiles(self.directory, SNAPSHOT_SUFFIX)
        self.producers: dict[int, ProducerEntry] = {}

    def begin(self) -> ProducerAppend:
        """Start the checks of one append."""
        return ProducerAppend(self)

    def replay(self, h: BatchHeader) -> None:
        """Apply a batch read back from the log (the log is the truth: no checks)."""
        if h.producer_id < 0 or h.base_sequence < 0:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerEntry(h.producer_id, h.producer_epoch)
        entry.record(h)

    # -- snapshots

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending."""
        return self.snapshots.offsets()

    def take_snapshot(self, offset: int) -> None:
        """Save the state as of ``offset`` (the log end offset), atomically."""
        body = json.dumps(
            [
                [e.producer_id, e.epoch, e.last_timestamp, [list(b) for b in e.batches]]
                for e in self.producers.values()
            ],
            separators=(",", ":"),
        ).encode()
        self.snapshots.write(offset, crc32c(body).to_bytes(4, "big") + body)

    def load(self, log_end_offset: int) -> int | None:
        """Load the newest valid snapshot at or below ``log_end_offset``; return its offset (None: none).

        Snapshots past the log end (the log was truncated) are deleted.
        """
        self.producers = {}
        for off, path in self.snapshots.newest_first(log_end_offset):
            try:
                raw = path.read_bytes()
                body = raw[4:]
                if len(raw) < 4 or int.from_bytes(raw[:4], "big") != crc32c(body):
                    raise ValueError("checksum mismatch")
                producers = {}
                for pid, epoch, last_ts, batches in json.loads(body):
                    producers[int(pid)] = ProducerEntry(
                        int(pid), int(epoch), (BatchMetadata(*map(int, b)) for b in batches), int(last_ts)
                    )
            except (OSError, ValueError, TypeError) as e:
                log.warning("%s: ignoring unreadable producer snapshot (%s)", path, e)
                path.unlink(missing_ok=True)
                continue
            self.producers = producers
            return off
        return None

    def delete_snapshots_after(self, offset: int) -> None:
        """Remove snapshots taken past ``offset`` (after a truncation)."""
        self.snapshots.delete_after(offset)
