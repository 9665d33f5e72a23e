"""The read side of a partition log: file regions by offset, and lookups by timestamp.

Functions of the segments of a :class:`~.segment_list.SegmentView` (taken without a lock)
and the offsets :class:`~.log.PartitionLog` hands them; the log keeps no read state of its own.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Sequence

from ...errors import OffsetOutOfRange
from ...format import header as fmt
from .segment import FileRegion, LogSegment
from .segment_list import SegmentView


def read_region(
    view: SegmentView,
    start_offset: int,
    leo: int,
    offset: int,
    max_bytes: int,
    max_offset: int | None,
    name: str,
) -> FileRegion:
    """:meth:`~.log.PartitionLog.read` over ``view``, a log starting at ``start_offset`` (or its first
    segment's base, if above) and ending at ``leo``; OffsetOutOfRange outside them."""
    bases, segs = view
    start = segs[0].base_offset
    if start_offset > start:
        start = start_offset
    if offset < start or offset > leo:
        raise OffsetOutOfRange(f"offset {offset} is outside [{start}, {leo}] of {name}")
    if offset == leo or (max_offset is not None and offset >= max_offset):
        return FileRegion(segs[-1].file, segs[-1].size, 0)
    for seg in segs[bisect_right(bases, offset) - 1 :]:
        region = seg.read(offset, max_bytes, max_offset)
        if region is not None:
            return region
    return FileRegion(segs[-1].file, segs[-1].size, 0)


def checked_bytes(region: FileRegion) -> bytes:
    """The bytes of ``region`` after CRC-checking every batch in it (CorruptRecord)."""
    data = os.pread(region.file.fileno(), region.length, region.position)
    pos = 0
    while pos < len(data):
        h = fmt.validate(data, pos)
        pos += h.size
    return data


def first_offset_at(segments: Sequence[LogSegment], timestamp: int) -> int | None:
    """The first offset of ``segments`` whose record timestamp is >= ``timestamp``; None when none is."""
    for seg in segments:
        if seg.max_timestamp >= timestamp:
            found = seg.find_timestamp(timestamp)
            if found is not None:
                return found
    return None


def max_timestamp(segments: Sequence[LogSegment]) -> tuple[int, int] | None:
    """(the largest record timestamp, the base offset of the first batch holding it); None when no
    record has a timestamp."""
    best: tuple[int, int] | None = None
    for seg in segments:
        if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best[0]):
            best = (seg.max_timestamp, seg.offset_of_max_timestamp)
    return best
