"""Gauges read at scrape time from the owners of the state: the log manager (sizes and offsets), the replica
manager's led partitions (ISR, leaders), the group offsets (committed offsets, so the lag), the server
(connections). Nothing is copied or kept between scrapes; each read is one the owner offers read-only."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ...errors import UnknownTopicOrPartition
from ..state import BrokerState


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class StateCollector(Collector):
    """The collect-time gauges of one broker; ``connections()`` gives listener -> open connections."""

    def __init__(self, state: BrokerState, connections: Callable[[], dict[str, int]]) -> None:
        self.state = state
        self.connections = connections

    def collect(self) -> Iterator[Any]:
        st = self.state
        if st.logs is None:
            return  # stopped
        yield from self._logs()
        yield from self._replication()
        yield from self._groups()
        conns = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open client connections, per listener",
            labels=["listener"],
        )
        for listener, n in self.connections().items():
            conns.add_metric([listener], n)
        yield conns

    def _logs(self) -> Iterator[Any]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=labels)
        for lg in self.state.logs.logs():
            if lg.closed:
                continue
            key = [lg.topic, str(lg.partition)]
            size.add_metric(key, lg.size_bytes)
            end.add_metric(key, lg.log_end_offset)
            start.add_metric(key, lg.log_start_offset)
        yield size
        yield end
        yield start

    def _replication(self) -> Iterator[Any]:
        st = self.state
        me = st.config.broker_id
        rep = st.replication
        if rep is None:  # a single broker leads every partition, each fully replicated
            partitions = len(st.logs.logs())
            leaders, under, under_min, offline, shrinks, expands = partitions, 0, 0, 0, 0, 0
        else:
            led = rep.led_roles()
            leaders = len(led)
            partitions = sum(1 for r in st.roles.values() if me in r.replicas)
            under = sum(1 for r in led if len(r.isr) < len(r.replicas))
            under_min = sum(1 for r in led if len(r.isr) < st.logs.topic_config(r.topic).min_insync_replicas)
            offline = sum(1 for r in st.roles.values() if r.leader < 0) if st.controller_id() == me else 0
            shrinks, expands = rep.isr_shrinks, rep.isr_expands
        prefix = "kafka_server_replicamanager_"
        yield _gauge(prefix + "partitioncount", "Partitions with a replica on this broker", partitions)
        yield _gauge(prefix + "leadercount", "Partitions this broker leads", leaders)
        yield _gauge(prefix + "underreplicatedpartitions", "Led partitions whose ISR lacks a replica", under)
        yield _gauge(
            prefix + "underminisrpartitioncount",
            "Led partitions with fewer in sync than min.insync",
            under_min,
        )
        yield CounterMetricFamily(prefix + "isrshrinks", "ISR shrinks of led partitions", value=shrinks)
        yield CounterMetricFamily(prefix + "isrexpands", "ISR expands of led partitions", value=expands)
        active = 1 if st.controller_id() == me else 0
        yield _gauge("kafka_controller_kafkacontroller_activecontrollercount", "1 on the controller", active)
        yield _gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a leader", offline
        )

    def _groups(self) -> Iterator[Any]:
        st = self.state
        store = st.groups
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset", "Committed offset of a group in a partition", labels=labels
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag", "High watermark minus the committed offset", labels=labels
        )
        groups: set[str] = set()
        if store is not None:
            for (group, topic, partition), committed in store.committed():
                groups.add(group)
                key = [group, topic, str(partition)]
                current.add_metric(key, committed.offset)
                try:
                    hw = st.logs.get_log(topic, partition).high_watermark
                except UnknownTopicOrPartition:
                    continue  # the partition's log is on other brokers
                lag.add_metric(key, max(0, hw - committed.offset))
        if st.coordinator is not None:
            groups.update(st.coordinator.groups)
        yield _gauge(
            "kafka_coordinator_group_groupmetadatamanager_numgroups",
            "Groups this broker coordinates",
            len(groups),
        )
        yield current
        yield lag
