"""The client-quota metrics, read at scrape time from the quota manager, under the names Prometheus' JMX
exporter gives Kafka's (``kafka.server:type=Produce,user=U,client-id=C`` attribute ``byte-rate`` becomes
``kafka_server_produce_byte_rate{user="U",client_id="C"}``): per quota group and kind, the measured
rate (``byte_rate``; ``request_time`` for the request quota, percent of one thread) and the average
throttle time over the quota window (``throttle_time``, ms), and the throttled responses counted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..quotas.manager import FETCH, PRODUCE, REQUEST, QuotaManager

_RATE = {
    PRODUCE: ("kafka_server_produce_byte_rate", "Produced bytes per second of the quota group"),
    FETCH: ("kafka_server_fetch_byte_rate", "Fetched bytes per second of the quota group"),
    REQUEST: (
        "kafka_server_request_request_time",
        "Request handling time of the quota group, percent of one thread",
    ),
}
_LABELS = ["user", "client_id"]


class QuotaCollector(Collector):
    """Exports the quota groups' measured rates and throttles (nothing while no quota is configured)."""

    def __init__(self, manager: QuotaManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Any]:
        m = self.manager
        rates = {kind: GaugeMetricFamily(name, doc, labels=_LABELS) for kind, (name, doc) in _RATE.items()}
        throttle = {
            kind: GaugeMetricFamily(
                f"kafka_server_{kind.lower()}_throttle_time",
                f"Average throttle time (ms) of the quota group's {kind} responses over the quota window",
                labels=_LABELS,
            )
            for kind in _RATE
        }
        throttled = CounterMetricFamily(
            "logsource_quota_throttled_responses",
            "Responses throttled by a client quota, per quota type and group",
            labels=["quota_type", *_LABELS],
        )
        now = m.clock()
        for sensor in m.groups():
            labels = [sensor.user, sensor.client_id]
            rate, avg_throttle = m.measured(sensor, now)
            rates[sensor.kind].add_metric(labels, rate)
            throttle[sensor.kind].add_metric(labels, avg_throttle)
            throttled.add_metric([sensor.kind, *labels], sensor.throttled_total)
        yield from rates.values()
        yield from throttle.values()
        yield throttled
