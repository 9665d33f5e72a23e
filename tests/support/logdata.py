"""Shared helpers for the log store tests: deterministic batches and readers."""

from __future__ import annotations

import os
from pathlib import Path

from pyspark_logsource.broker.log import LogConfig, PartitionLog
from pyspark_logsource.format import batch as fmt


def value_for(offset: int, size: int = 20) -> bytes:
    """The value the tests store at ``offset``: its number, padded."""
    head = b"%012d" % offset
    return head + b"x" * max(0, size - len(head))


def make_batch(start: int, n: int, *, size: int = 20, timestamps=None, **kw) -> bytearray:
    """A batch whose record i holds ``value_for(start + i)``."""
    return fmt.encode([value_for(start + i, size) for i in range(n)], timestamps=timestamps, **kw)


def open_log(path: Path, **config) -> PartitionLog:
    """A log ``t-0`` under ``path`` with the given LogConfig fields."""
    return PartitionLog(Path(path) / "t-0", LogConfig(**config), "t", 0)


def region_bytes(region) -> bytes:
    """The bytes of a FileRegion, as sendfile would send them."""
    return os.pread(region.file.fileno(), region.length, region.position)


def all_records(log: PartitionLog) -> list:
    """Every record of the log (CRC-checked), via read()."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = region_bytes(log.read(offset, 1 << 20))
        recs = [r for b in fmt.decode_all(data) for r in b.records() if r.offset >= offset]
        out.extend(recs)
        offset = recs[-1].offset + 1
    return out
