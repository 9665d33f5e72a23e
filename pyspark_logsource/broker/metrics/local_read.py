"""The local short-circuit read's counts (broker/local_read.py's grants), read at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector


class LocalReadCollector(Collector):
    """``logsource_local_read_grants_total{outcome}``: grants made, redeemed on the socket, refused
    (unknown, used or expired token) and expired unredeemed."""

    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Any]:
        family = CounterMetricFamily(
            "logsource_local_read_grants",
            "Local short-circuit read grants of this broker, by outcome",
            labels=["outcome"],
        )
        for outcome, n in sorted(self.counts().items()):
            family.add_metric([outcome], n)
        yield family
