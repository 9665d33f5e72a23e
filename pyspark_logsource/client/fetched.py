"""What a consumer fetched: lazily decoded fetch responses, and records as messages or Arrow.

The decoding side of :mod:`.consumer`, kept apart so that the consumer's
module is about positions, fetching and groups.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from itertools import repeat
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..format import ARROW_SCHEMA, decode_arrow, to_arrow, walk
from ..format._speedups import crecords
from ..format.kafka_decode import decode_kafka
from ..format.rows import ARROW_DESCRIPTOR, row_descriptor

log = logging.getLogger(__name__)

_NO_HEADERS: tuple = ()


class Message(NamedTuple):
    """One consumed record. ``timestamp`` is ms since the epoch; ``headers`` a tuple of (key, value)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple


class _Fetched:
    """Record bytes of one fetch response for one partition, decoded lazily."""

    __slots__ = (
        "fetch_offset",
        "data",
        "size",
        "table",
        "offsets",
        "error",
        "row",
        "epoch",
        "check_crc",
        "next_offset",
        "spans",
    )

    def __init__(
        self, fetch_offset: int, data: memoryview, epoch: int, check_crc: bool = True, next_offset: int = -1
    ) -> None:
        self.check_crc = check_crc
        #: offset after the last batch: the position once consumed (compaction may leave a gap before it)
        self.next_offset = next_offset
        self.fetch_offset = fetch_offset
        self.data = data
        self.size = len(data)
        self.table: pa.Table | None = None
        #: the table's offset column as numpy (read once: poll() takes a table in several parts)
        self.offsets: np.ndarray | None = None
        self.error: Exception | None = None
        self.row = 0
        self.epoch = epoch
        #: poll()'s compiled path: a ``batch_rows`` descriptor per batch (None: not indexed, or not taken)
        self.spans: list[tuple] | None = None

    def decode(self) -> None:
        """Decode the batches, once; a decoding error is kept and raised by ``arrow``."""
        self._decode(None)

    def _decode(self, walked: list | None) -> None:
        """``decode``, given the walk (with the CRCs) when it was made already."""
        if self.table is None and self.error is None:
            try:
                self.table = records_to_arrow(self.data, self.check_crc, walked)
            except Exception as e:  # noqa: BLE001 - raised by arrow(), where the consumer handles it
                self.error = e
            else:
                self.data = None  # type: ignore[assignment]

    def index(self) -> None:
        """For poll(), once: each batch's row descriptor when the compiled core takes every batch
        (uncompressed Arrow bodies without headers, uncompressed Kafka-layout batches whose records have
        no headers), so that Messages are made from the bytes with no Arrow table; else the table
        (``decode``, from the same walk). The CRCs are checked by that one walk either way."""
        if self.spans is not None or self.table is not None or self.error is not None:
            return
        if crecords is not None:
            data = self.data
            try:
                walked = walk(data, check_crc=self.check_crc)
            except Exception as e:  # noqa: BLE001 - raised by take(), as decode() keeps it
                self.error = e
                return
            spans = []
            for pos, h in walked:
                d = row_descriptor(data, pos, h, crecords)
                if d is None:  # the table path takes it (and raises what its decoders raise)
                    break
                spans.append(d)
            else:
                self.spans = spans
                return
            self._decode(walked)
            return
        self.decode()

    def arrow(self, position: int) -> pa.Table:
        """Rows from ``position`` on (decodes the batches on first use)."""
        self.decode()
        if self.error is not None:
            raise self.error
        t = self.table
        if t.num_rows == 0:
            return t
        lo = self._first_row(position)
        return t if lo == 0 else t.slice(lo)

    def take(self, position: int, limit: int) -> tuple[pa.Table, int, bool]:
        """Up to ``limit`` rows from ``position`` on (decoded on first use): (them, the position after
        them, whether no row is left after them). The position comes from the offsets read once, not
        from an Arrow scalar per call. Indexed (compiled), the rows are a :class:`RowSpans`."""
        self.index()
        if self.spans is not None and self.table is None:  # (a poll_arrow() may have decoded it since)
            return self._take_spans(position, limit)
        if self.error is not None:
            raise self.error
        t = self.table
        n = t.num_rows
        if n == 0:
            return t, position, True
        lo = self._first_row(position)
        hi = min(n, lo + limit)
        if hi <= lo:
            return t.slice(n), position, True
        part = t if lo == 0 and hi == n else t.slice(lo, hi - lo)
        return part, int(self.offsets[hi - 1]) + 1, hi == n  # type: ignore[index]

    def _take_spans(self, position: int, limit: int) -> tuple[RowSpans, int, bool]:
        """``take`` over the batch descriptors: the same rows, position and end as over the table (an
        Arrow body's offsets are its base offset + row, and batches come in offset order)."""
        pieces: list[tuple[tuple, int, int]] = []
        count = 0
        after = position
        done = True
        if limit > 0:
            for d in self.spans:  # type: ignore[union-attr]
                base, n = d[1], d[2]
                lo = position - base
                if lo >= n:
                    continue  # every row before the position
                if count >= limit:
                    done = False
                    break
                lo = max(lo, 0)
                hi = min(n, lo + limit - count)
                pieces.append((d, lo, hi))
                count += hi - lo
                after = base + hi
                if hi < n:
                    done = False
                    break
        return RowSpans(self.data, pieces, count), after, done

    def _first_row(self, position: int) -> int:
        """The first row at or after ``position`` (the table has rows)."""
        offs = self.offsets
        if offs is None:
            # offsets are sorted: skip the rows before ``position`` (format.batch.trim does the same
            # through ChunkedArray.to_numpy, whose first call imports pandas: ~0.4 s on the first poll)
            offs = self.offsets = int64_values(self.table.column(_OFFSET))  # type: ignore[union-attr]
        if position <= offs[0]:
            return 0  # the usual case: nothing before the position
        return int(np.searchsorted(offs, position, side="left"))


class RowSpans:
    """Rows poll() took from indexed batches: (descriptor, first row, end row) pieces of ``data``."""

    __slots__ = ("data", "pieces", "num_rows")

    def __init__(self, data: memoryview, pieces: list[tuple[tuple, int, int]], num_rows: int) -> None:
        self.data = data
        self.pieces = pieces
        self.num_rows = num_rows

    def messages(self, topic: str, partition: int, out: list[Message]) -> None:
        """Append the rows' Messages to ``out`` (built in C from the fetched bytes)."""
        data = self.data
        arrow, kafka = crecords.arrow_messages, crecords.kafka_messages
        for d, lo, hi in self.pieces:
            (arrow if len(d) == ARROW_DESCRIPTOR else kafka)(
                data, d, lo, hi, Message, topic, partition, _NO_HEADERS, out
            )


_OFFSET = ARROW_SCHEMA.get_field_index("offset")
_warm = threading.Lock()
_warmed = False


def _warm_up_decoder() -> None:
    """Decode a tiny run of batches once per process, in the fetcher thread at start.

    The first call of the vectorised run decoder loads pyarrow.compute and pandas
    (0.3-0.7 s measured); done lazily, that stalled the first poll that met a run of
    16+ batches (end-to-end latency: the first ~200 ms of a stream waited 100-300 ms).
    """
    global _warmed
    with _warm:
        if _warmed:
            return
        _warmed = True
    try:
        from ..format import encode, set_base_offset

        a, b = encode([b"x"]), encode([b"y"])
        set_base_offset(b, 1)
        to_arrow(a + b, fast=True)
    except Exception:  # a warm-up must never break a consumer
        log.debug("decoder warm-up failed", exc_info=True)


def int64_values(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The values of an int64 (or timestamp) column as numpy, zero-copy for one chunk.

    Reads the data buffers directly: pyarrow's ``to_numpy`` imports pandas on its
    first call, which stalled a consumer's first poll by ~0.4 s.
    """
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    parts = []
    for c in chunks:
        if c.null_count or c.type.bit_width != 64:
            parts.append(c.to_numpy(zero_copy_only=False).astype(np.int64))
        else:
            parts.append(np.frombuffer(c.buffers()[1], dtype=np.int64, count=len(c), offset=c.offset * 8))
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


#: Runs of at least this many batches are decoded together by ``format.batch.to_arrow``; its
#: vectorised path has a fixed cost of about 150 us (measured, CPU time, CRC included: batches of
#: 50 records, 4 of them 145 us one by one vs 169 us together, 8: 368 vs 205, 16: 625 vs 340;
#: one-record batches, 8: 275 vs 184).
RUN_DECODE_MIN_BATCHES = 8


def records_to_arrow(
    data: bytes | bytearray | memoryview, check_crc: bool = True, walked: list | None = None
) -> pa.Table:
    """Decode every whole batch of a fetch response into one Arrow table (``walked``: its ``walk``, with
    ``check_crc``, if made already)."""
    # one walk, with the CRCs: it was two (one here, one in to_arrow or per batch in decode_arrow)
    if walked is None:
        walked = walk(data, check_crc=check_crc)
    if len(walked) >= RUN_DECODE_MIN_BATCHES or not all(h.is_arrow_body for _, h in walked):
        # Kafka-layout batches (and control batches among them) are the run decoder's job
        return to_arrow(data, check_crc=check_crc, walked=walked)
    batches = [decode_arrow(data, pos, check_crc=False).to_arrow() for pos, _ in walked]
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


#: ``_new_tuple(Message, row)`` makes a Message from a row tuple in C: Message(...) runs the
#: NamedTuple's Python ``__new__`` (measured per 1000 messages: 256 us against 122 us).
_new_tuple = tuple.__new__


def messages_from_arrow(topic: str, partition: int, t: pa.Table) -> list[Message]:
    """Turn an ``ARROW_SCHEMA`` table into Messages with C-level per-row work only."""
    n = t.num_rows
    if n == 0:
        return []
    if crecords is not None:  # the compiled rows (None: headers, or columns it does not take)
        out = crecords.rows(t, Message, topic, partition, _NO_HEADERS)
        if out is not None:
            return out
    return _messages_py(topic, partition, t, Message)


def _messages_py(topic: str, partition: int, t: pa.Table, cls: type) -> list:
    """``messages_from_arrow``'s Python path (``cls``: the row type)."""
    n = t.num_rows
    if n == 0:
        return []
    offs = int64_values(t.column("offset"))
    first, last = int(offs[0]), int(offs[-1])
    # consecutive offsets (all but compacted batches): a range makes the ints as the rows are built
    offsets: Iterable = range(first, last + 1) if last - first == n - 1 else offs.tolist()
    ts = int64_values(t.column("timestamp")).tolist()
    kcol = t.column("key")
    keys: Iterable = repeat(None, n) if kcol.null_count == n else kcol.to_pylist()
    values = t.column("value").to_pylist()
    hcol = t.column("headers")
    if hcol.null_count == n:
        headers: Iterable = repeat(_NO_HEADERS, n)
    else:
        headers = [tuple((d["key"], d["value"]) for d in h) if h else _NO_HEADERS for h in hcol.to_pylist()]
    rows = zip(repeat(topic, n), repeat(partition, n), offsets, ts, keys, values, headers, strict=True)
    return list(map(_new_tuple, repeat(cls, n), rows))


# ---------------------------------------------------------------- the compiled path's references


def arrow_messages_py(
    data: bytes | bytearray | memoryview,
    d: tuple,
    lo: int,
    hi: int,
    cls: type,
    topic: str,
    partition: int,
    no_headers: tuple,
    out: list,
) -> None:
    """``crecords.arrow_messages``'s reference: rows ``[lo, hi)`` of the batch ``d`` describes, through its
    Arrow table and ``messages_from_arrow``'s Python path, appended to ``out``."""
    if not 0 <= lo <= hi <= d[2]:
        raise ValueError("rows or descriptor out of the batch's bounds")
    t = pa.Table.from_batches([decode_arrow(data, d[0], check_crc=False).to_arrow()])
    out += _rows_py(t, lo, hi, cls, topic, partition, no_headers)


def kafka_messages_py(
    data: bytes | bytearray | memoryview,
    d: tuple,
    lo: int,
    hi: int,
    cls: type,
    topic: str,
    partition: int,
    no_headers: tuple,
    out: list,
) -> None:
    """``crecords.kafka_messages``'s reference: rows ``[lo, hi)`` of the Kafka-layout batch ``d`` describes,
    through its Arrow table and ``messages_from_arrow``'s Python path, appended to ``out``."""
    if not 0 <= lo <= hi <= d[2]:
        raise ValueError("rows or descriptor out of the batch's bounds")
    t = pa.Table.from_batches([decode_kafka(data, d[0], check_crc=False).to_arrow()])
    out += _rows_py(t, lo, hi, cls, topic, partition, no_headers)


def _rows_py(t: pa.Table, lo: int, hi: int, cls: type, topic: str, partition: int, no_headers: tuple) -> list:
    """Rows ``[lo, hi)`` of one batch's table as ``cls`` rows with ``no_headers`` (the references' end)."""
    t = t.slice(lo, hi - lo)
    return [_new_tuple(cls, (*m[:6], no_headers)) for m in _messages_py(topic, partition, t, cls)]
