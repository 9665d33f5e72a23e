"""The producer's batch encoder: our Arrow-body layout, owned by ``format.arrow_body``.

Kept as the name the producer imports; small simple batches take a
struct-only path there (byte-identical to ``format.encode``).
"""

from __future__ import annotations

from ..format.arrow_body import SMALL_BATCH, encode_records

__all__ = ["SMALL_BATCH", "encode_records"]
