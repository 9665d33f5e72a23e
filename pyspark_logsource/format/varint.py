"""Zigzag varints of Kafka's v2 records: numpy readers and writers for whole columns, and scalar ones.

Every malformed varint is a CorruptRecord.
"""

from __future__ import annotations

import numpy as np

from ..errors import CorruptRecord

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def read_varints(d: np.ndarray, pos: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints starting at ``pos`` (at most ``width`` bytes each): (values, byte lengths)."""
    b0 = d[pos]
    if not (b0 & 0x80).any():  # the common case: every varint is one byte (small deltas, counts)
        v = (b0 >> 1).astype(np.int64) ^ -(b0 & 1).astype(np.int64)
        return v, _ones(len(pos))
    b = d[pos[:, None] + np.arange(width)]
    stop = b < 0x80
    if not stop.any(axis=1).all():
        raise CorruptRecord(f"varint longer than {width} bytes")
    length = stop.argmax(axis=1) + 1
    groups = (b & 0x7F).astype(np.uint64)
    groups[np.arange(width) >= length[:, None]] = 0
    u = np.bitwise_or.reduce(groups << (np.arange(width, dtype=np.uint64) * np.uint64(7)), axis=1)
    v = (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64)
    return v, length


def _ones(n: int) -> np.ndarray:
    return np.ones(n, dtype=np.int64)


def read_varint32s(d: np.ndarray, pos: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    v, length = read_varints(d, pos, 5)
    if len(v) and (v.min() < INT32_MIN or v.max() > INT32_MAX):
        raise CorruptRecord(f"record {what} does not fit in 32 bits")
    return v, length


def encode_varints(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varint bytes of int64 values: an (n, width) uint8 matrix and each value's byte length."""
    v = v.astype(np.int64, copy=False)
    u = ((v << 1) ^ (v >> 63)).view(np.uint64)
    width = 1
    top = int(u.max()) if len(u) else 0
    while top >> (7 * width):
        width += 1
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    parts = u[:, None] >> shifts
    length = 1 + (parts[:, 1:] != 0).sum(axis=1) if width > 1 else np.ones(len(u), dtype=np.int64)
    out = (parts & np.uint64(0x7F)).astype(np.uint8)
    out[np.arange(width) < (length - 1)[:, None]] |= 0x80
    return out, length


def encode_varint(v: int) -> bytes:
    """One zigzag varint (the header slow path)."""
    u = (v << 1) ^ (v >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def read_raw_varint(data: bytes, p: int) -> tuple[int, int]:
    """A raw (not un-zigzagged) varint of up to 5 bytes at ``p``: (value, next position)."""
    raw = shift = 0
    for i in range(5):
        b = data[p + i]
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return raw, p + i + 1
        shift += 7
    raise CorruptRecord("record length varint longer than 5 bytes")
