"""The broker lookups that planning needs, shared by the data source and the ETL.

``BrokerOffsets`` wraps an Admin client with the three callables of
:mod:`pyspark_logsource.spark.planning` (``lookup``, ``partitions_for``,
``list_topics``); ``check_data_loss`` is the one place that decides what a start
offset below the log start (deleted by retention) means.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import Any

from ..errors import OffsetOutOfRange
from ..topics import TopicPartition as TP

log = logging.getLogger("pyspark_logsource.datasource")


class BrokerOffsets:
    """Partitions and offsets of topics, over an Admin client (opened lazily by callers, never pickled)."""

    def __init__(self, bootstrap: str, client_id: str | None = None, **security: Any) -> None:
        """``security``: our clients' TLS/SASL options (``KafkaSecurity.options()``)."""
        from ..client import Admin

        self.admin = Admin(bootstrap, client_id=client_id or "logsource-spark", **security)

    def lookup(self, tps: Sequence[TP], spec: Any) -> dict[TP, int]:
        """earliest / latest / timestamp offset of each partition."""
        if not tps:
            return {}
        # read_committed: "latest" is the last stable offset, so staged writes are never planned
        found = self.admin.list_offsets(list(tps), spec, read_committed=True)
        return {tuple(k): int(v) for k, v in found.items()}  # type: ignore[misc]

    def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of a topic."""
        return list(self.admin.partitions_for(topic))

    def list_topics(self) -> list[str]:
        """Every topic name."""
        return list(self.admin.list_topics())

    def close(self) -> None:
        """Close the admin client."""
        self.admin.close()

    def __enter__(self) -> BrokerOffsets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_data_loss(start: dict[TP, int], earliest: dict[TP, int], fail: bool, what: str) -> dict[TP, int]:
    """Offsets below the log start were deleted (retention): raise OffsetOutOfRange, or skip them with a warning."""
    lost = {tp: (o, earliest[tp]) for tp, o in start.items() if tp in earliest and o < earliest[tp]}
    if not lost:
        return start
    desc = ", ".join(f"{t}-{p} [{o}, {e})" for (t, p), (o, e) in sorted(lost.items())[:10])
    if fail:
        raise OffsetOutOfRange(
            f"offsets were deleted before they were read (retention): {desc}. {what} is below the log start. "
            "Set failOnDataLoss=false to skip them with a warning."
        )
    msg = f"logsource: skipping offsets deleted by retention (failOnDataLoss=false): {desc}"
    log.warning(msg)
    warnings.warn(msg, stacklevel=2)
    return {tp: max(o, earliest.get(tp, o)) for tp, o in start.items()}
