"""The broker's Prometheus metrics: counters kept by the network layer (:mod:`.registry`), gauges read at
scrape time from the state's owners (:mod:`.collectors`), served on ``metrics.listener`` (:mod:`.http`)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client.registry import CollectorRegistry

from ..quotas.manager import QuotaManager
from ..state import BrokerState
from .collectors import StateCollector
from .http import MetricsServer
from .local_read import LocalReadCollector
from .quotas import QuotaCollector
from .registry import BrokerMetrics, RequestCollector


def build_endpoint(
    state: BrokerState,
    metrics: BrokerMetrics,
    connections: Callable[[], dict[str, int]],
    quotas: QuotaManager | None = None,
    local_reads: Callable[[], dict[str, int]] | None = None,
) -> MetricsServer:
    """The endpoint of one broker (its own registry: several brokers may share a process), not started."""
    registry = CollectorRegistry()
    registry.register(RequestCollector(metrics))
    registry.register(StateCollector(state, connections))
    if quotas is not None:
        registry.register(QuotaCollector(quotas))
    if local_reads is not None:
        registry.register(LocalReadCollector(local_reads))
    host, port = state.config.metrics_listener
    return MetricsServer(registry, host, port)


__all__ = ["BrokerMetrics", "MetricsServer", "build_endpoint"]
