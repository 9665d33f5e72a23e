"""Synthetic rows for the Spark benchmarks, built column-wise (no per-row Python)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa


def make_rows(n: int, size: int = 200, chunk: int = 500_000, *, keys: bool = False) -> Iterator[pa.Table]:
    """Arrow tables of ``n`` distinct ``size``-byte values (and keys k0..k999 when ``keys``)."""
    rng = np.random.default_rng(0)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
    for s in range(0, n, chunk):
        m = min(chunk, n - s)
        data = alphabet[rng.integers(0, len(alphabet), size=m * size)]
        offsets = pa.array(np.arange(0, (m + 1) * size, size, dtype=np.int32))
        values = pa.BinaryArray.from_buffers(
            pa.binary(), m, [None, offsets.buffers()[1], pa.py_buffer(data.tobytes())]
        )
        columns = {"value": values}
        if keys:
            columns = {
                "key": pa.array(np.char.mod("k%d", np.arange(s, s + m) % 1000).astype("S"), pa.binary()),
                **columns,
            }
        yield pa.table(columns)
