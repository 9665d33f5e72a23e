"""A produced run of plain batches, checked and stamped in one call (the log append's fast path).

A *plain* batch is the common produce: not idempotent (no producer id or
sequence), not transactional, not a control batch, and either our Arrow body or
Kafka's record layout uncompressed (a Java producer's or librdkafka's
one-message produce). For a run made only of those the log needs from the
format nothing but the checks every run gets (``header.walk(..., check_crc=True,
max_size=, strict=True)``, and for Kafka's layout
``kafka_decode.validate_kafka_records``, with no null key on a compacted topic)
and the offset/epoch stamp; :func:`check_and_stamp` does both, and the compiled
core (``_cbody.check_and_stamp``) does it in one C pass when it is built.
:func:`producer_run` is the same walk for an idempotent producer's run of Arrow-body
batches, giving the fields the log's producer checks need, with nothing stamped. Any
other run (or any check that fails) gives None with nothing stamped: the caller
then takes the general path, which raises the typed error (with KIP-467's record
errors for keyless records on a compacted topic) or handles the producer state
and transactions. :func:`write_plain_batch` is the same for a run of exactly one
plain batch (the common produce) and also writes it at the end of the log
segment's file: the log append's whole byte work in one call
(``_cbody.write_plain_batch`` when built); the segment records the numbers it
returns (and whether the batch has our Arrow body: Kafka clients' fetches of a
segment holding one are converted), the log its end offset.
"""

from __future__ import annotations

import contextlib
import os

from ..errors import CorruptRecord, LogSourceError, MessageTooLarge, UnsupportedCompressionType
from ._speedups import cbody
from .crc import crc32c
from .header import (
    ARROW_BODY,
    CODEC_MASK,
    CRC_START,
    HAS_KEY_NULLS,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TXN_BITS,
    stamp_offset_epoch,
    walk,
)
from .kafka_decode import validate_kafka_records

_INT64_MAX = (1 << 63) - 1


def _writable(buf: object) -> bool:
    """A bytearray, or a writable contiguous 1-D memoryview of unsigned bytes: what is stamped in place."""
    if type(buf) is bytearray:
        return True
    if type(buf) is not memoryview:
        return False
    return not buf.readonly and buf.c_contiguous and buf.ndim == 1 and buf.format == "B"


def _not_plain(attrs: int, producer_id: int, base_sequence: int, refuse_keyless: bool) -> bool:
    """A batch with these header fields is not plain: transactional or control, idempotent, compressed
    in Kafka's layout, or (``refuse_keyless``) with our Arrow body and a null key (a Kafka-layout
    batch's keys are in its records)."""
    return bool(
        attrs & TXN_BITS
        or (producer_id >= 0 and base_sequence >= 0)
        or (attrs & ARROW_BODY and refuse_keyless and attrs & HAS_KEY_NULLS)
        or (not attrs & ARROW_BODY and attrs & CODEC_MASK)
    )


def _kafka_records_refused(buf: bytearray | memoryview, pos: int, h: object, refuse_keyless: bool) -> bool:
    """The general path's check of a Kafka-layout batch's records (validate_kafka_records) fails, or
    ``refuse_keyless`` and some key is null (the general path then names those records: KIP-467)."""
    try:
        null_key = validate_kafka_records(buf, pos, h)
    except (LogSourceError, OverflowError):  # its typed error is the general path's to raise
        return True
    return bool(refuse_keyless and null_key)


def check_and_stamp_py(
    max_size: int, refuse_keyless: bool, buf: bytearray | memoryview, base_offset: int, leader_epoch: int
) -> tuple[bool, list[tuple[int, int, int, int, int]]] | None:
    """Stamp the run ``buf`` from ``base_offset`` with ``leader_epoch`` if it is whole, valid, plain
    batches (each at most ``max_size`` bytes; ``refuse_keyless``: none with a null key, as a compacted
    topic demands), and return whether some batch has our Arrow body and ``(position, base offset,
    size, max timestamp, record count)`` per batch; None, with nothing stamped, for any other run. The
    limits come first: a log binds them once (``functools.partial``, no Python frame per append).

    The reference: :data:`check_and_stamp` is the compiled ``_cbody.check_and_stamp`` when it is built
    (it must agree with this function on every input), this function otherwise.
    """
    if type(base_offset) is not int or type(leader_epoch) is not int:
        return None
    if not 0 <= base_offset <= _INT64_MAX or not -(1 << 31) <= leader_epoch < 1 << 31:
        return None
    if not _writable(buf) or not len(buf):
        return None
    if len(buf) >= HEADER_SIZE:  # the first header alone often says "general path" (an idempotent producer)
        first = HEADER.unpack_from(buf, 0)
        if _not_plain(first[5], first[9], first[11], refuse_keyless):
            return None
    try:
        batches = walk(buf, check_crc=False, max_size=max_size, strict=True)
    except (CorruptRecord, MessageTooLarge, UnsupportedCompressionType):
        return None
    # the headers and records first: a run for the general path (an idempotent producer's) costs no CRC here
    total = 0
    arrow = False
    for pos, h in batches:
        attrs = h.attributes
        if _not_plain(attrs, h.producer_id, h.base_sequence, refuse_keyless):
            return None
        if attrs & ARROW_BODY:
            arrow = True
        elif _kafka_records_refused(buf, pos, h, refuse_keyless):
            return None
        total += h.record_count
    if base_offset > _INT64_MAX - total:
        return None
    mv = memoryview(buf)
    for pos, h in batches:
        if crc32c(mv[pos + CRC_START : pos + h.batch_length + LOG_OVERHEAD]) != h.crc:
            return None
    out = []
    offset = base_offset
    for pos, h in batches:
        stamp_offset_epoch(buf, pos, offset, h.batch_length, leader_epoch)
        out.append((pos, offset, h.batch_length + LOG_OVERHEAD, h.max_timestamp, h.record_count))
        offset += h.record_count
    return arrow, out


def producer_run_py(
    max_size: int, refuse_keyless: bool, buf: bytearray | memoryview
) -> list[tuple[int, int, int, int, int, int, int, int]] | None:
    """The batches of the run ``buf`` if it is whole, valid batches (each at most ``max_size`` bytes) with
    our Arrow body, none transactional (nor, ``refuse_keyless``, with a null key): ``(position, batch
    length, last offset delta, max timestamp, producer id, producer epoch, base sequence, record count)``
    per batch; None for any other run or a buffer that cannot be stamped in place. Nothing is stamped: an
    idempotent producer's run, whose batches the log checks against the producer state before it stamps
    them (``broker/log/append.stamp_producer_run``).

    The reference: :data:`producer_run` is the compiled ``_cbody.producer_run`` when it is built (it must
    agree with this function on every input), this function otherwise.
    """
    if not _writable(buf) or len(buf) < HEADER_SIZE:
        return None
    try:
        batches = walk(buf, check_crc=True, max_size=max_size, strict=True)
    except (CorruptRecord, MessageTooLarge, UnsupportedCompressionType):
        return None
    out = []
    for pos, h in batches:
        attrs = h.attributes
        if not attrs & ARROW_BODY or attrs & TXN_BITS or (refuse_keyless and attrs & HAS_KEY_NULLS):
            return None
        out.append(
            (
                pos,
                h.batch_length,
                h.last_offset_delta,
                h.max_timestamp,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.record_count,
            )
        )
    return out


#: the one the log calls (chosen once: no Python frame between the log and the compiled pass)
check_and_stamp = check_and_stamp_py if cbody is None else cbody.check_and_stamp
producer_run = producer_run_py if cbody is None else cbody.producer_run


def write_plain_batch_py(
    max_size: int,
    refuse_keyless: bool,
    buf: bytearray | memoryview,
    base_offset: int,
    leader_epoch: int,
    fd: int,
    position: int,
    roll_size: int,
    roll_offset: int,
) -> tuple[int, int, int, bool] | None:
    """The log append's common step in one call: ``buf`` holding exactly one plain batch is checked and
    stamped as :func:`check_and_stamp_py` does, then written at ``position`` of the file ``fd``; returns
    ``(size, next offset, max timestamp, whether it has our Arrow body)``. None, with nothing stamped or
    written, for any other run, or when the batch would break the segment's roll bounds (``position``
    non-zero and ``position + size > roll_size`` or its last offset ``> roll_offset``: the caller rolls
    first, on its general path).

    A failed write cuts the file back to ``position`` (all or nothing) and raises the OSError; short
    writes are continued. The reference: :data:`write_plain_batch` is ``_cbody.write_plain_batch`` when
    it is built (it must agree with this function on every input), this function otherwise.
    """
    if type(base_offset) is not int or not _writable(buf) or len(buf) < HEADER_SIZE:
        return None
    h = HEADER.unpack_from(buf, 0)
    size = h[1] + LOG_OVERHEAD  # batch length
    if size != len(buf):  # not exactly one batch
        return None
    if position and (position + size > roll_size or base_offset + h[12] - 1 > roll_offset):
        return None  # h[12]: record count (its checks follow; a bad one gives None there too)
    stamped = check_and_stamp_py(max_size, refuse_keyless, buf, base_offset, leader_epoch)
    if stamped is None:
        return None
    arrow, batches = stamped
    _, offset, size, max_ts, count = batches[0]
    try:
        written = os.pwrite(fd, buf, position)
        while written < size:
            written += os.pwrite(fd, memoryview(buf)[written:], position + written)
    except BaseException:
        with contextlib.suppress(OSError):  # the write's error is the one to report
            os.ftruncate(fd, position)  # all or nothing
        raise
    return size, offset + count, max_ts, arrow


#: the one the log's append calls (bound by AppendValidator), compiled when built
write_plain_batch = write_plain_batch_py if cbody is None else cbody.write_plain_batch
