"""Planning a load: [start, end) per topic-partition from the committed offsets and the log's bounds."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import LogSourceError, OffsetOutOfRange
from ..spark.broker import BrokerOffsets, check_data_loss
from ..spark.options import parse_read_options
from ..spark.planning import rate_limit, select_partitions
from ..topics import TopicPartition as TP
from .config import EtlConfig


@dataclass(frozen=True)
class LoadPlan:
    """What one load reads: [start, end) per topic-partition, and the offsets committed before it."""

    start: dict[TP, int]
    end: dict[TP, int]
    committed: dict[TP, int]

    @property
    def total(self) -> int:
        """Offsets to read."""
        return sum(self.end[tp] - self.start[tp] for tp in self.end)

    @property
    def empty(self) -> bool:
        """True when there is nothing new."""
        return self.total == 0

    @property
    def with_data(self) -> list[TP]:
        """The partitions this load reads from."""
        return [tp for tp in self.end if self.end[tp] > self.start[tp]]

    def new_offsets(self) -> dict[TP, int]:
        """The cumulative committed offsets after this load."""
        out = dict(self.committed)
        out.update(self.end)
        return out


def plan_load(
    committed: dict[TP, int],
    tps: Sequence[TP],
    earliest: dict[TP, int],
    latest: dict[TP, int],
    *,
    starting: str = "earliest",
    max_offsets: int | None = None,
    fail_on_data_loss: bool = True,
) -> LoadPlan:
    """Decide [start, end) per partition from the committed offsets and the log's bounds (pure)."""
    start = {tp: committed[tp] for tp in tps if tp in committed}
    start = check_data_loss(start, earliest, fail_on_data_loss, "the committed offset")
    for tp, s in start.items():
        if s > latest[tp]:
            raise OffsetOutOfRange(
                f"{tp[0]}-{tp[1]}: committed offset {s} is beyond the log end {latest[tp]} "
                "(was the topic deleted and re-created?)"
            )
    for tp in tps:
        if tp not in start:
            start[tp] = earliest[tp] if starting == "earliest" else latest[tp]
    end = rate_limit(start, {tp: latest[tp] for tp in tps}, max_offsets)
    # a partition that starts at "latest" with nothing new is still recorded, so the next load
    # starts there instead of at the then-current end (which would skip messages)
    return LoadPlan({tp: start[tp] for tp in tps}, {tp: end[tp] for tp in tps}, dict(committed))


def retry(fn: Callable[[], Any], log: Callable[[str], None], attempts: int = 4) -> Any:
    """Call fn, retrying a retriable broker error (timeout, no leader) with a growing pause."""
    for i in range(attempts):
        try:
            return fn()
        except LogSourceError as e:
            if not e.retriable or i == attempts - 1:
                raise
            log(f"retrying after {type(e).__name__}: {e}")
            time.sleep(0.5 * 2**i)
    raise AssertionError("unreachable")


def plan_from_broker(
    cfg: EtlConfig, committed: dict[TP, int], log: Callable[[str], None] = print
) -> tuple[LoadPlan, int]:
    """Ask the broker for the subscription's partitions and bounds; returns (plan, partitions seen)."""
    opts = parse_read_options(cfg.reader_options(), streaming=False)
    broker = BrokerOffsets(cfg.bootstrap_servers, "logsource-etl", **opts.security.options())
    try:
        tps = retry(lambda: select_partitions(opts, broker.partitions_for, broker.list_topics), log)
        earliest = retry(lambda: broker.lookup(tps, "earliest"), log)
        latest = retry(lambda: broker.lookup(tps, "latest"), log)
    finally:
        broker.close()
    plan = plan_load(
        committed,
        tps,
        earliest,
        latest,
        starting=cfg.starting_offsets,
        max_offsets=cfg.max_offsets_per_load,
        fail_on_data_loss=cfg.fail_on_data_loss,
    )
    return plan, len(tps)
