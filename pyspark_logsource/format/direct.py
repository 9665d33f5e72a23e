"""A direct read of Arrow-body batches: each batch's keys and values read straight into the columns.

A reader with the segment files at hand (a Spark task's local read) reads a batch in pieces instead of
whole: its header, then its arrays (timestamp deltas, key and value offsets, the key validity bitmap)
into a buffer of heads, then its key bytes and value bytes into the run's key and value buffers, each
end to end. Those two buffers are then the Arrow columns' data as they are: the value bytes are copied
once, by the kernel, instead of into a chunk buffer first and out of it into the column.

This module names the pieces and checks them; it does no I/O. Only the common batch is taken
(uncompressed, no record headers, no value nulls, not a control batch): for any other, the reader
reads the batch whole and decodes it the general way.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa

from ..errors import CorruptRecord
from ._speedups import cbody
from .crc import crc32c
from .header import (
    ARROW_BODY,
    CODEC_MASK,
    CONTROL_BIT,
    CRC_START,
    HAS_HEADERS,
    HAS_KEY_NULLS,
    HAS_VALUE_NULLS,
    HEADER_SIZE,
    BatchHeader,
)
from .runs import _H_COUNT, _arrow_run_columns, _columns_table, _header_array, arrow_run_columns_py, trim

_REFUSED = CODEC_MASK | HAS_HEADERS | HAS_VALUE_NULLS | CONTROL_BIT
_LE32 = struct.Struct("<i")


def arrays_size(h: BatchHeader) -> int:
    """The bytes between the header and the keys of a batch a direct read takes; -1 for any other batch
    (another layout, compressed, record headers, value nulls, a control batch, or a body too short)."""
    a, n = h.attributes, h.record_count
    if not a & ARROW_BODY or a & _REFUSED or n < 1:
        return -1
    size = 16 * n + 8 + ((n + 7) // 8 if a & HAS_KEY_NULLS else 0)
    return size if HEADER_SIZE + size <= h.size else -1


def key_value_sizes(h: BatchHeader, arrays: Any) -> tuple[int, int]:
    """The key and value bytes of batch ``h``, from its ``arrays_size(h)`` bytes of arrays (the last key
    and value offsets); (-1, -1) when they do not fill the rest of the batch exactly."""
    n = h.record_count
    key_len = _LE32.unpack_from(arrays, 12 * n)[0]
    val_len = _LE32.unpack_from(arrays, 16 * n + 4)[0]
    if key_len < 0 or val_len < 0 or HEADER_SIZE + len(arrays) + key_len + val_len != h.size:
        return -1, -1
    return key_len, val_len


#: ``crc32c(data, value)``: the compiled one folds with AVX-512 where the CPU has it (``_cbody.pyx``)
_crc_update = crc32c if cbody is None else cbody.crc32c_update


def crc_matches(h: BatchHeader, head: Any, keys: Any, values: Any) -> bool:
    """Whether batch ``h``'s CRC-32C matches its bytes read in pieces: ``head`` (header and arrays),
    then its ``keys`` and ``values``."""
    crc = _crc_update(memoryview(head)[CRC_START:], 0)
    return _crc_update(values, _crc_update(keys, crc)) == h.crc


def direct_to_arrow(
    heads: Any,
    walked: list[tuple[int, BatchHeader]],
    keys: Any,
    values: Any,
    start_offset: int | None = None,
    end_offset: int | None = None,
) -> pa.Table:
    """The table ``runs.to_arrow`` gives for these batches read whole, trimmed to [start, end): ``heads``
    holds each batch's header and arrays at its position in ``walked``, ``keys`` and ``values`` the run's
    key and value bytes end to end (they become the columns' data). CorruptRecord when the pieces do not
    make batches a direct read takes (a mixed run of keyed and keyless batches among them)."""
    hs = _header_array(walked)
    build = arrow_run_columns_py if _arrow_run_columns is None else _arrow_run_columns
    cols = build(pa.py_buffer(heads), hs, keys, values)
    if cols is None:
        raise CorruptRecord("batches read in pieces do not make a run of plain Arrow-body batches")
    return trim(_columns_table(cols, int(hs[:, _H_COUNT].sum())), start_offset, end_offset)
