"""Quota measurement and throttling without a server: Kafka's sampled rate, the throttle formula and its
caps, quota groups, re-resolution on a change, idle expiry, exempt requests, settings and metrics."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from pyspark_logsource.broker.config import BrokerConfig
from pyspark_logsource.broker.metrics.quotas import QuotaCollector
from pyspark_logsource.broker.quotas.manager import FETCH, PRODUCE, REQUEST, QuotaManager
from pyspark_logsource.broker.quotas.model import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    QuotaTable,
)
from pyspark_logsource.broker.quotas.sensor import SampledStat, throttle_ms
from pyspark_logsource.broker.quotas.settings import QuotaSettings
from pyspark_logsource.broker.quotas.throttle import ConnectionQuotas, with_throttle
from pyspark_logsource.broker.session import Session
from pyspark_logsource.errors import ConfigError
from pyspark_logsource.protocol import ApiKey, FetchRequest, MetadataResponse, ProduceResponse


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _manager(**entities: dict) -> tuple[QuotaManager, QuotaTable, Clock]:
    table, clock = QuotaTable(), Clock()
    m = QuotaManager(table, clock=clock)
    for client_id, values in entities.items():
        table.set_entity(QuotaEntity(None, client_id), values)
    return m, table, clock


def test_sampled_rate_is_kafkas_rate_over_the_samples_with_its_minimum_window():
    s = SampledStat(1.0, 11, 0.0)  # Kafka's: at least samples - 1 = 10 windows
    s.record(1000, 0.0)
    assert s.window_size(0.5) == pytest.approx(10.5)
    assert s.rate(0.5) == pytest.approx(1000 / 10.5)
    for t in range(1, 20):
        s.record(1000, float(t))
    # samples older than 11 windows were reset: the live ones hold 11 values
    assert s.total(19.5) == pytest.approx(11_000)
    assert s.rate(19.5) == pytest.approx(11_000 / s.window_size(19.5))
    assert s.window_size(19.5) == pytest.approx(10.5)  # since the oldest live sample began (t=9)
    paced = SampledStat(1.0, 11, 0.0, min_windows=0)  # enforcement's: over the time measured
    paced.record(500, 0.0)
    assert paced.window_size(0.25) == pytest.approx(0.25)
    assert paced.total(30.0) == 0  # idle past the whole window: forgotten


def test_throttle_time_is_the_time_to_come_back_to_the_quota():
    # observed 1.5x the quota over a 10 s window: 5 s of nothing brings it back (Kafka's formula)
    assert throttle_ms(15_000, 10.0, 1000) == pytest.approx(5000)
    assert throttle_ms(10_000, 10.0, 1000) == 0
    assert throttle_ms(500, 0.0, 1000) == pytest.approx(500)  # a first request: its own size at the quota


def test_a_producer_over_its_quota_is_throttled_and_caps_hold():
    m, _, clock = _manager(c={PRODUCER_BYTE_RATE: 1000, REQUEST_PERCENTAGE: 10})
    assert m.record(PRODUCE, "u", "c", 500) == 500  # 500 bytes at 1000 B/s: 0.5 s
    clock.t += 0.5
    assert m.record(PRODUCE, "u", "c", 400) == 400  # waited out its throttle only: 400 bytes ahead again
    clock.t += 0.4
    assert m.record(PRODUCE, "u", "c", 0) == 0  # 900 bytes in 0.9 s: within
    # a huge request: capped at the whole measured span (11 windows)
    assert m.record(PRODUCE, "u", "c", 10**9) == 11_000
    # the request quota: capped at one window (Kafka's ClientRequestQuotaManager)
    assert m.record(REQUEST, "u", "c", 5.0) == 1000
    assert m.max_fetch_bytes("u", "c") is None
    assert m.record(FETCH, "u", "c", 10**9) == 0  # no fetch quota: measured only


def test_connections_of_one_group_share_its_quota_and_defaults_give_each_their_own():
    table, clock = QuotaTable(), Clock()
    m = QuotaManager(table, clock=clock)
    table.set_entity(QuotaEntity("alice", None), {PRODUCER_BYTE_RATE: 1000})
    table.set_entity(QuotaEntity(None, DEFAULT), {CONSUMER_BYTE_RATE: 1000})
    assert m.record(PRODUCE, "alice", "a", 600) == 600
    assert m.record(PRODUCE, "alice", "b", 600) == 1200  # same group (alice, ""): 1200 bytes at 1000 B/s
    assert m.record(FETCH, "bob", "x", 600) == 600
    assert m.record(FETCH, "bob", "y", 600) == 600  # <default> client-id: each client its own quota
    produce_groups = {(s.user, s.client_id) for s in m.groups() if s.kind == PRODUCE}
    assert ("alice", "") in produce_groups
    assert m.max_fetch_bytes("bob", "x") == 100  # a tenth of a window's quota


def test_a_table_change_is_applied_at_the_next_request():
    m, table, clock = _manager()
    assert not m.enabled  # no quota anywhere: the server does not measure at all
    table.set_entity(QuotaEntity(None, "c"), {PRODUCER_BYTE_RATE: 1000})
    assert m.enabled
    assert m.record(PRODUCE, "u", "c", 2000) == 2000
    table.set_entity(QuotaEntity(None, "c"), {PRODUCER_BYTE_RATE: 1_000_000})
    clock.t += 0.01
    assert m.record(PRODUCE, "u", "c", 2000) == 0  # the samples stay, the quota is the new one
    table.set_entity(QuotaEntity(None, "c"), {})
    assert not m.enabled


def test_idle_group_sensors_expire_so_many_client_ids_do_not_grow_memory():
    table, clock = QuotaTable(), Clock()
    m = QuotaManager(table, clock=clock, expire_s=60)
    table.set_entity(QuotaEntity(None, DEFAULT), {PRODUCER_BYTE_RATE: 10**9})
    for i in range(500):
        m.record(PRODUCE, "u", f"client-{i}", 100)
    assert len(m.groups()) == 500
    clock.t += 61
    m.record(PRODUCE, "u", "fresh", 100)  # a new sensor after the sweep time sweeps the idle ones
    assert {s.client_id for s in m.groups()} == {"fresh"}


def test_exempt_requests_and_replication_are_never_throttled():
    m, _, _ = _manager(c={REQUEST_PERCENTAGE: 0.0001})
    q = ConnectionQuotas(m)
    assert q.exempt(ApiKey.API_VERSIONS, None)
    assert q.exempt(ApiKey.SASL_AUTHENTICATE, None)
    assert q.exempt(ApiKey.FETCH, FetchRequest(replica_id=2))  # a follower's fetch
    assert not q.exempt(ApiKey.FETCH, FetchRequest())
    assert not q.exempt(ApiKey.METADATA, None)


def test_a_throttled_response_is_a_copy_with_the_throttle_time():
    shared = MetadataResponse()
    out = with_throttle(shared, 250)
    assert out.throttle_time_ms == 250 and shared.throttle_time_ms == 0
    assert with_throttle(None, 250) is None  # acks=0: nothing to answer
    assert with_throttle(ProduceResponse(), 0).throttle_time_ms == 0


def test_the_request_path_throttles_and_mutes_the_connection():
    m, _, clock = _manager(c={PRODUCER_BYTE_RATE: 1000})
    q = ConnectionQuotas(m)

    class Ev:
        class header:
            api_key, client_id = ApiKey.PRODUCE, "c"

        request = None

    from pyspark_logsource.protocol import ProducePartitionData, ProduceRequest

    Ev.request = ProduceRequest([ProducePartitionData("t", 0, b"x" * 700)])

    async def one_read(awaits: bool) -> object:
        t_read = time.perf_counter()
        resp = q.call(Ev, Session("1.2.3.4:5"), lambda ev, session: ProduceResponse())
        if awaits:
            await asyncio.sleep(0)  # the connection's task gave the loop a turn (a long poll, a full socket)
        time.sleep(0.05)  # decoding and encoding, on the event loop
        q.cycle_done(t_read)
        return resp

    resp = asyncio.run(one_read(awaits=False))
    assert resp.throttle_time_ms == 700
    assert q.muted_until == pytest.approx(clock.t + 0.7)
    request_time = next(s for s in m.groups() if s.kind == REQUEST).rate.total(clock.t)
    assert request_time >= 5.0  # percent-seconds: the 50 ms around the handler counted
    asyncio.run(one_read(awaits=True))
    again = next(s for s in m.groups() if s.kind == REQUEST).rate.total(clock.t)
    assert again - request_time < 1.0  # a read that waited: only its handler's time


@pytest.mark.parametrize(
    "key, value", [("quota.window.num", "0"), ("quota.window.size.seconds", "x"), ("quota.window.num", "-3")]
)
def test_bad_quota_window_settings_are_config_errors_naming_the_key(key, value):
    with pytest.raises(ConfigError, match=key):
        BrokerConfig.from_properties({key: value})
    assert QuotaSettings.from_properties({}) == QuotaSettings(11, 1.0)


def test_quota_metrics_scrape_under_kafkas_jmx_exporter_names():
    m, _, clock = _manager(c={PRODUCER_BYTE_RATE: 1000})
    m.record(PRODUCE, "ANONYMOUS", "c", 2000)
    m.throttled(PRODUCE, "ANONYMOUS", "c", 2000)
    clock.t += 1.0
    registry = CollectorRegistry()
    registry.register(QuotaCollector(m))
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
    rate = families["kafka_server_produce_byte_rate"].samples[0]
    assert rate.labels == {"user": "", "client_id": "c"}  # a client-id quota: the group has no user
    assert rate.value == pytest.approx(2000)  # 2000 bytes over the 1 s measured
    assert families["kafka_server_produce_throttle_time"].samples[0].value == 2000
    throttled = families["logsource_quota_throttled_responses"].samples[0]
    assert throttled.value == 1 and throttled.labels["quota_type"] == "Produce"
    assert "kafka_server_request_request_time" in families
