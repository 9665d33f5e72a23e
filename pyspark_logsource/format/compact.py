"""Keeping some records of a run of batches: what the log cleaner needs from the format.

The cleaner decides, per record, what survives; this module turns that
decision back into batches without anyone else reading a byte offset:

- :func:`decode_run` decodes whole batches (either layout, control batches
  included) into one Arrow table whose rows line up with the walked headers;
- :func:`retain` rewrites the run keeping the marked rows.

Kafka's compaction keeps a batch's base offset, last offset delta, producer
id, epoch and base sequence, and drops records: offsets are preserved and
gaps appear (inside a batch and between batches). A batch that keeps every
record is copied byte for byte (same layout, same CRC). A batch that keeps
some is rewritten in Kafka's layout, whichever layout it had: Kafka's
records carry offset deltas, our Arrow body does not (it is ``base + i``),
and compacted tails are read rarely (restoring state), so one extra layout
there costs less than a second Arrow body variant every reader must know.
It also gives Kafka clients ``sendfile`` on compacted segments. A batch that
keeps nothing is dropped.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from .header import KAFKA_ATTRIBUTES, TIMESTAMP_TYPE_BIT, BatchHeader, walk
from .kafka_encode import _kafka_batch
from .runs import to_arrow


class Run(NamedTuple):
    """Whole batches of a buffer and their records as one table (rows in batch order)."""

    walked: list[tuple[int, BatchHeader]]
    table: pa.Table
    #: per batch: index of its first row in ``table``
    first_row: np.ndarray
    #: per row: index of its batch in ``walked``
    batch_of_row: np.ndarray
    #: bytes of whole batches (a partial tail is left out)
    size: int


def decode_run(buf: bytes | bytearray | memoryview, *, check_crc: bool = True) -> Run:
    """Decode every whole batch of ``buf`` (control batches included) with vectorised decoders."""
    walked = walk(buf, check_crc=check_crc)
    counts = np.fromiter((h.record_count for _, h in walked), dtype=np.int64, count=len(walked))
    table = to_arrow(buf, check_crc=False, include_control=True) if walked else None
    first = np.zeros(len(walked), dtype=np.int64)
    if len(walked) > 1:
        np.cumsum(counts[:-1], out=first[1:])
    size = walked[-1][0] + walked[-1][1].size if walked else 0
    if table is None:
        from .arrow_body import ARROW_SCHEMA

        table = ARROW_SCHEMA.empty_table()
    return Run(walked, table, first, np.repeat(np.arange(len(walked), dtype=np.int64), counts), size)


class Kept(NamedTuple):
    """One output batch: its bytes and what a segment's ``append`` needs to index it."""

    data: bytes | bytearray | memoryview
    base_offset: int
    max_timestamp: int
    #: offsets the batch spans (last offset delta + 1): the segment's next offset after it
    span: int
    arrow: bool


def retain(buf: bytes | bytearray | memoryview, run: Run, keep: np.ndarray) -> list[Kept]:
    """The batches of ``run`` with only the rows where ``keep`` is True, offsets preserved.

    One Python step per batch, none per record: whole batches are sliced out
    of ``buf``; partly kept ones are re-encoded from their Arrow rows.
    """
    mv = memoryview(buf)
    m = len(run.walked)
    kept_n = np.bincount(run.batch_of_row[keep], minlength=m) if m else np.zeros(0, dtype=np.int64)
    out: list[Kept] = []
    for i, (pos, h) in enumerate(run.walked):
        k = int(kept_n[i])
        if k == 0:
            continue
        span = h.last_offset_delta + 1
        if k == h.record_count or h.is_control:
            out.append(Kept(mv[pos : pos + h.size], h.base_offset, h.max_timestamp, span, h.is_arrow_body))
            continue
        lo = int(run.first_row[i])
        rows = run.table.slice(lo, h.record_count).filter(pa.array(keep[lo : lo + h.record_count]))
        off_delta = _int64(rows.column("offset")) - h.base_offset
        if h.attributes & TIMESTAMP_TYPE_BIT:
            ts_delta = np.zeros(k, dtype=np.int64)  # LogAppendTime readers use the batch's max timestamp
        else:
            ts_delta = _int64(rows.column("timestamp")) - h.base_timestamp
        data = _kafka_batch(h, ts_delta, rows, h.attributes & KAFKA_ATTRIBUTES, off_delta)
        out.append(Kept(data, h.base_offset, h.max_timestamp, span, False))
    return out


def _int64(col: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(col.combine_chunks().cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)
