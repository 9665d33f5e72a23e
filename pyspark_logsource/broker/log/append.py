"""What an append to a partition log is made of: its answer, the checks before it, the stamping.

This module owns :class:`AppendInfo` (the answer of an append), the flags a
check finds in a run (``TRANSACTIONAL``, ``ARROW``, ``IDEMPOTENT``; the batch
attribute bits they come from are :mod:`~pyspark_logsource.format.header`'s),
:class:`AppendValidator` (every check of a produced run that needs no log
state: header, size, CRC, codec, Kafka records, keys of a compacted topic,
transactional batches; and that a follower's fetched offsets grow past the log
end, whose batches the format's walker checked) and the stamping of offsets, epochs, append
times and producer sequences (:func:`stamp_run`, :func:`check_stamp_runs`).
:class:`~.log.PartitionLog` holds the lock and the log end and calls these.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from ...errors import (
    CorruptRecord,
    DuplicateSequence,
    InvalidRecord,
    LogSourceError,
)
from ...format import header as fmt
from ...format._speedups import load_extension
from ...format.header import ARROW_BODY, HAS_KEY_NULLS, LOG_OVERHEAD, TXN_BITS
from ...format.kafka_decode import null_key_indexes, validate_kafka_records
from ...format.plain_run import check_and_stamp, producer_run_py, write_plain_batch
from . import transactions as txn
from .config import DELETE, LogConfig
from .producer_state import ProducerAppend, ProducerStateManager

#: what :meth:`AppendValidator.check` found in a run (bits of its ``flags``)
TRANSACTIONAL, ARROW, IDEMPOTENT = 1, 2, 4
#: runs per ``pwritev`` of a coalesced append (below the kernel's IOV_MAX of 1024 buffers)
MAX_COALESCED_RUNS = 512
_INT64_MAX = (1 << 63) - 1

new_info = (
    tuple.__new__
)  # new_info(AppendInfo, (...)): AppendInfo(...) without namedtuple's Python-level __new__


class AppendInfo(NamedTuple):
    """Result of an append; ``duplicate`` means an idempotent retry: original offsets, nothing written."""

    base_offset: int
    last_offset: int
    log_append_time: int
    record_count: int
    duplicate: bool = False


class AppendValidator:
    """The checks of a run of batches before it is appended to the log ``name`` of ``topic``."""

    __slots__ = (
        "name",
        "topic",
        "_max_bytes",
        "_compact",
        "check_and_stamp",
        "write_plain",
        "stamp_producer_run",
    )

    def __init__(self, name: str, topic: str, config: LogConfig) -> None:
        self.name = name
        self.topic = topic
        self._max_bytes = config.max_message_bytes
        self._compact = config.cleanup_policy != DELETE
        #: ``check_and_stamp(records, offset, leader_epoch)``: a run of plain batches (not idempotent, not
        #: transactional; our Arrow body or Kafka's layout uncompressed) that passes every check of
        #: :meth:`check`, stamped from ``offset``: whether some batch has our Arrow body and its
        #: ``(position, base offset, size, max timestamp, record count)`` per batch (the format's one-call
        #: check and stamp); None, nothing stamped, for any other run (:meth:`check` then raises, or the
        #: general path takes it)
        self.check_and_stamp = partial(check_and_stamp, self._max_bytes, self._compact)
        #: ``write_plain(records, offset, leader_epoch, fd, position, roll_size, roll_offset)``: the same
        #: for a run of exactly one plain batch, then written at ``position`` of the segment file ``fd``
        #: (the format's one-call append step, :func:`~...format.plain_run.write_plain_batch`):
        #: ``(size, next offset, max timestamp, has our Arrow body)``, or None with nothing stamped or written
        self.write_plain = partial(write_plain_batch, self._max_bytes, self._compact)
        #: ``stamp_producer_run(records, offset, leader_epoch, producers, stamped, at)``: an idempotent
        #: producer's usual run checked, staged and stamped in one call (:func:`stamp_producer_run`)
        self.stamp_producer_run = partial(stamp_producer_run, self._max_bytes, self._compact)

    def check(self, records: bytes | bytearray | memoryview, control: bool) -> tuple[memoryview, list, int]:
        """The run as a writable view, its ``(position, header)`` pairs and flags (TRANSACTIONAL,
        ARROW, IDEMPOTENT) after every check that needs no log state (CorruptRecord, ...).

        Control batches (transaction markers) only with ``control`` (the coordinator's)."""
        # Hot path (one call per produce request): per-batch work only.
        if type(records) is bytearray:
            mv = memoryview(records)
        else:
            mv = memoryview(records)
            if mv.readonly or not mv.contiguous or mv.format != "B":
                mv = memoryview(bytearray(mv))
        if not len(mv):
            raise CorruptRecord("empty record set")
        # header checks, size bound, CRC and codec of every batch: one call, the format's walker
        batches = fmt.walk(mv, check_crc=True, max_size=self._max_bytes, strict=True)
        compact = self._compact
        flags = 0
        for pos, h in batches:
            attrs = h[5]
            if attrs & TXN_BITS:
                flags |= TRANSACTIONAL
            if h[9] >= 0 and h[11] >= 0:  # producer id, base sequence
                flags |= IDEMPOTENT
            if attrs & ARROW_BODY:
                flags |= ARROW
                keyless = compact and attrs & HAS_KEY_NULLS
            else:  # a Kafka client's batch: its varint records must parse
                keyless = validate_kafka_records(mv, pos, h) and compact
            if keyless:
                # Kafka names the keyless records (KIP-467), so librdkafka fails only those with
                # INVALID_RECORD (the rest of the batch: _INVALID_DIFFERENT_RECORD, retriable)
                bad = () if attrs & ARROW_BODY else tuple(null_key_indexes(mv, pos, h))
                raise InvalidRecord(
                    f"compacted topic {self.topic} refuses records without a key (batch at position {pos})",
                    record_errors=bad,
                )
        if flags & TRANSACTIONAL:  # checked only when there is one: most appends have no transactional batch
            txn.check_append(batches, control)
        return mv, batches, flags

    def follower_offsets(self, batches: list, log_end: int) -> tuple[list, int]:
        """``(position, base offset, size, max timestamp, offsets spanned)`` per batch and the next
        offset after them; InvalidRecord if an offset does not grow past ``log_end``."""
        expected = log_end
        stamped = []
        for pos, h in batches:
            if h.base_offset < expected:
                raise InvalidRecord(
                    f"{self.name}: follower append of a batch at offset {h.base_offset} "
                    f"below the next offset {expected}"
                )
            span = h.last_offset_delta + 1
            stamped.append((pos, h.base_offset, h.size, h.max_timestamp, span))
            expected = h.base_offset + span
        return stamped, expected


def stamp_run(
    mv: memoryview,
    batches: list,
    offset: int,
    leader_epoch: int,
    now: int,
    log_append_time: bool,
    producers: ProducerAppend | None,
    stamped: list,
    at: int = 0,
) -> int | AppendInfo:
    """Check a run's producer sequences (``producers``: None when it has no idempotent batch) and
    stamp its batches from ``offset``; add ``(position + at, base offset, size, max timestamp,
    count)`` per batch to ``stamped``. Returns the next offset, or the original AppendInfo of a
    run appended before (a retry: nothing stamped). Raises DuplicateSequence for a run mixing both."""
    duplicates = None
    stamp = fmt.stamp_offset_epoch
    first = len(stamped)
    for pos, h in batches:
        # h[9], h[11]: producer id, base sequence (tuple indexing: this loop runs per batch)
        idempotent = producers is not None and h[9] >= 0 and h[11] >= 0
        if idempotent:
            dup = producers.check(h)
            if dup is not None:
                if duplicates is None:
                    duplicates = []
                duplicates.append(dup)
                continue
        stamp(mv, pos, offset, h[1], leader_epoch)  # h[1]: batch length
        max_ts = h[8]
        if log_append_time:
            fmt.stamp_log_append_time(mv, now, pos)
            max_ts = now
        if idempotent:
            producers.record(h, offset, max_ts)
        count = h[12]
        stamped.append((pos + at, offset, h[1] + LOG_OVERHEAD, max_ts, count))
        offset += count
    if duplicates:
        if len(stamped) > first:
            raise DuplicateSequence(
                f"{len(duplicates)} of {len(batches)} batches were already appended; retry them separately"
            )
        return AppendInfo(
            duplicates[0].first_offset,
            duplicates[-1].last_offset,
            -1,
            sum(h.record_count for _, h in batches),
            True,
        )
    return offset


def stamp_usual_runs_py(
    check_and_stamp: object,
    stamp_producer_run: object,
    producers: ProducerAppend,
    runs: list,
    i: int,
    offset: int,
    leader_epoch: int,
    at: int,
    parts: list,
    stamped: list,
    appended: list,
) -> tuple[int, int, int, bool]:
    """Check and stamp ``runs[i:]`` from ``offset`` while each is a plain run
    (:attr:`AppendValidator.check_and_stamp` takes it) or an idempotent producer's next
    (:attr:`AppendValidator.stamp_producer_run` takes it, staged in ``producers``); add each run to
    ``parts``, its batches to ``stamped`` (positions moved by the bytes ``at`` before it) and
    ``(index, base offset, next offset)`` to ``appended``. Returns the index of the first run neither
    took (``len(runs)``: none), the next offset, the bytes stamped so far and whether some run taken has
    our Arrow body (a plain run may have Kafka's layout; an idempotent producer's run taken has ours).

    The reference: :data:`stamp_usual_runs` is the compiled ``_cruns.stamp_usual_runs`` when it is
    built (it must agree with this function on every input), this function otherwise.
    """
    n = len(runs)
    arrow = False
    while i < n:
        records = runs[i]
        got = check_and_stamp(records, offset, leader_epoch)
        if got is not None:
            has_arrow, st = got
            for pos, base, size, max_ts, count in st:
                stamped.append((pos + at, base, size, max_ts, count))
            nxt = st[-1][1] + st[-1][4]
            if has_arrow:
                arrow = True
        else:
            nxt = stamp_producer_run(records, offset, leader_epoch, producers, stamped, at)
            if nxt is None:
                break
            arrow = True
        parts.append(records)
        appended.append((i, offset, nxt))
        at += len(records)
        offset = nxt
        i += 1
    return i, offset, at, arrow


def stamp_producer_run_py(
    max_size: int,
    refuse_keyless: bool,
    buf: bytearray | memoryview,
    offset: int,
    leader_epoch: int,
    producers: ProducerAppend,
    stamped: list,
    at: int,
) -> int | None:
    """Check and stamp the run ``buf`` from ``offset`` if it is whole, valid batches with our Arrow
    body, none transactional (nor, ``refuse_keyless``, with a null key), whose idempotent batches are
    each their producer's next (:meth:`ProducerAppend.stage_next_py`, which stages them); add ``(position
    + at, base offset, size, max timestamp, count)`` per batch to ``stamped`` and return the next
    offset. None, with nothing stamped or staged, for any other run (the general path then checks it:
    a typed error, a duplicate, a new epoch). An idempotent producer's usual run, in one call.

    The reference: :data:`stamp_producer_run` is the compiled ``_cruns.stamp_producer_run`` when it is
    built (it must agree with this function on every input), this function otherwise.
    """
    if type(buf) is not bytearray and not (
        type(buf) is memoryview
        and not buf.readonly
        and buf.c_contiguous
        and buf.ndim == 1
        and buf.format == "B"
    ):
        return None
    if type(offset) is not int or type(leader_epoch) is not int:
        return None
    if not 0 <= offset <= _INT64_MAX or not -(1 << 31) <= leader_epoch < 1 << 31:
        return None
    if len(buf) < fmt.HEADER_SIZE:
        return None
    attrs = fmt.read_attributes(buf)  # the first header alone often says "not this path"
    if not attrs & ARROW_BODY or attrs & TXN_BITS:
        return None
    batches = producer_run_py(max_size, refuse_keyless, buf)  # the format's walk and the run's conditions
    if batches is None:
        return None
    if offset > _INT64_MAX - sum(b[7] for b in batches):
        return None
    point = producers.savepoint()
    nxt = offset
    for _, _, lod, max_ts, pid, epoch, seq, count in batches:
        if pid >= 0 and seq >= 0 and not producers.stage_next_py(pid, epoch, seq, lod, nxt, max_ts):
            producers.rollback(point)
            return None
        nxt += count
    stamp = fmt.stamp_offset_epoch
    for pos, length, _, max_ts, _, _, _, count in batches:
        stamp(buf, pos, offset, length, leader_epoch)
        stamped.append((pos + at, offset, length + LOG_OVERHEAD, max_ts, count))
        offset += count
    return offset


_cruns = load_extension(__package__ + "._cruns")
#: what :func:`check_stamp_runs` calls (chosen once)
stamp_usual_runs = stamp_usual_runs_py if _cruns is None else _cruns.stamp_usual_runs
stamp_producer_run = stamp_producer_run_py if _cruns is None else _cruns.stamp_producer_run


def check_stamp_runs(
    validator: AppendValidator,
    producer_state: ProducerStateManager,
    runs: list,
    offset: int,
    leader_epoch: int,
    now: int,
    log_append_time: bool,
    out: list,
) -> tuple[list, list, list, int, ProducerAppend | None, bool] | None:
    """Check and stamp several produce requests' runs one after the other from ``offset``, as
    :meth:`AppendValidator.check` and :func:`stamp_run` would; the plain runs and an idempotent
    producer's next runs by one call each (:func:`stamp_usual_runs`), any other run by those two.

    A run that fails gets its error in ``out[index]`` and changes nothing; a retry gets its original
    AppendInfo there. Returns the runs to write, their stamped batches, ``(index, base offset, next
    offset)`` per stamped run, the next offset, the producer checks to commit after the write (None:
    none made) and whether some batch has our Arrow body; None (nothing to write, nothing
    to commit) when a run is transactional: those are appended one by one."""
    parts: list = []
    stamped: list = []
    appended: list = []
    producers = None
    arrow = False
    at = i = 0
    n = len(runs)
    usual = not log_append_time  # the usual runs in one call (the general path stamps LogAppendTime)
    if usual:
        producers = ProducerAppend(producer_state)
    plain, next_run = validator.check_and_stamp, validator.stamp_producer_run
    while i < n:
        if usual:
            i, offset, at, has_arrow = stamp_usual_runs(
                plain, next_run, producers, runs, i, offset, leader_epoch, at, parts, stamped, appended
            )
            if has_arrow:
                arrow = True
            if i == n:
                break
        try:
            mv, batches, flags = validator.check(runs[i], False)
        except LogSourceError as e:
            out[i] = e
            i += 1
            continue
        if flags & TRANSACTIONAL:
            return None
        if not flags & ARROW:
            # a Kafka client's run the usual-run calls declined (compressed, or an idempotent producer's):
            # its connection's next runs are alike (either path gives the same result: this only saves
            # their calls)
            usual = False
        mine = None  # the producer checks of an idempotent run (only those stage anything)
        if flags & IDEMPOTENT:
            if producers is None:
                producers = ProducerAppend(producer_state)
            mine, point = producers, producers.savepoint()
        mark = len(stamped)
        try:
            nxt = stamp_run(mv, batches, offset, leader_epoch, now, log_append_time, mine, stamped, at)
        except LogSourceError as e:
            del stamped[mark:]
            if mine is not None:
                mine.rollback(point)
            out[i] = e
            i += 1
            continue
        if type(nxt) is not int:
            out[i] = nxt  # a retry: its original offsets
        else:
            parts.append(mv)
            appended.append((i, offset, nxt))
            at += len(mv)
            offset = nxt
            if flags & ARROW:
                arrow = True
        i += 1
    return parts, stamped, appended, offset, producers, arrow
