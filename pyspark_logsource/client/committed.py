"""The read_committed filter: Kafka's consumer-side algorithm.

Control batches and the batches of aborted transactions (the Fetch response
lists them with their first offset; the ABORT marker ends each) never reach
the user. Its own module so that a reader (a Spark task's ``read_range``)
does not import the transactional producer.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from ..format import iter_headers
from ..format.control import ABORT, marker_type
from ..format.header import CONTROL_BIT, TXN_BITS


class CommittedFilter:
    """Per fetched partition: which batches a read_committed reader drops (Kafka's consumer algorithm)."""

    __slots__ = ("_pending", "_active")

    def __init__(self, aborted: Iterable[Any] | None) -> None:
        self._pending = sorted((a.first_offset, a.producer_id) for a in (aborted or ()))
        heapq.heapify(self._pending)
        self._active: set[int] = set()

    def drop(self, data: Any, pos: int, h: Any) -> bool:
        """True when the batch ``h`` at ``pos`` of ``data`` holds nothing a committed reader may see."""
        a = h.attributes
        if not a & TXN_BITS:
            return False
        pending = self._pending
        while pending and pending[0][0] <= h.base_offset + h.last_offset_delta:
            self._active.add(heapq.heappop(pending)[1])
        if a & CONTROL_BIT:
            if h.producer_id in self._active and marker_type(data, pos, h) == ABORT:
                self._active.discard(h.producer_id)
            return True
        return h.producer_id in self._active


def committed_only(
    data: Any, aborted: Iterable[Any] | None, headers: list[tuple[int, Any]] | None = None
) -> Any:
    """``data`` without control batches and aborted transactions' batches (unchanged when it has none).

    ``headers``: ``iter_headers(data)`` when the caller has walked it already."""
    if headers is None:
        headers = iter_headers(data)
    if not any(h.attributes & TXN_BITS for _, h in headers):
        return data
    f = CommittedFilter(aborted)
    keep = bytearray()
    for pos, h in headers:
        if not f.drop(data, pos, h):
            keep += data[pos : pos + h.size]
    return memoryview(bytes(keep))
