"""Rate measurement per quota group, as Kafka's ``ClientQuotaManager`` (KIP-219 era) does it.

Three kinds are measured: produce bytes, fetch bytes and request time (the handler time of a group's
requests as a percentage of one thread, Kafka's ``ClientRequestQuotaManager``). For each connection's
(user, client-id) the quota table names, per kind, the configured entity that applies; the connections
of one group (:func:`.model.quota_group`) share one sensor: a :class:`.sensor.SampledStat` over
``quota.window.num`` samples of ``quota.window.size.seconds``, whose rate divides by the time actually
measured (not Kafka's 10-window minimum, which lets a group burst 10 s of quota every 11 s: see
:mod:`.sensor`). After recording a value, a group over its quota gets a throttle time:
(observed - quota) / quota x the rate's window, capped (request time: at
one window, Kafka's ``ClientRequestQuotaManager.maxThrottleTimeMs``; bytes: at the whole measured span,
``quota.window.num`` windows, so that a lowered quota never holds a connection for longer).

A quota change (the table's listener) drops the resolved (user, client-id) -> (group, quota) pairs at
once, so the next request of every connection is measured against the new value; the sensors keep
their samples (Kafka changes the quota of an existing sensor in place). Sensors idle for
``expire_s`` (Kafka: an hour) are dropped, so many short-lived client ids do not grow memory forever.

Everything here runs on the broker's event loop, except the listener (any thread: it swaps a dict)
and :meth:`QuotaManager.groups` (the metrics scrape: it copies before reading).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .model import Quotas, QuotaTable, quota_group
from .sensor import SampledStat, throttle_ms
from .settings import QuotaSettings

PRODUCE = "Produce"
FETCH = "Fetch"
REQUEST = "Request"
KINDS = (PRODUCE, FETCH, REQUEST)

#: Kafka's ClientQuotaManager.InactiveSensorExpirationTimeSeconds
SENSOR_EXPIRY_S = 3600.0
#: resolved (user, client-id) pairs kept before the cache starts over
_MAX_RESOLVED = 100_000


@dataclass(slots=True)
class GroupSensor:
    """One group's measured rate and the throttle times it was given (Kafka's quota and throttle-time sensors)."""

    kind: str
    user: str
    client_id: str
    rate: SampledStat
    throttle: SampledStat
    #: the quota it was last measured against (None: no quota applies; measured for the metrics only)
    quota: float | None = None
    throttled_total: int = 0


@dataclass(frozen=True, slots=True)
class _Resolved:
    """For one (user, client-id): per kind, the group tags and the quota (None: unlimited)."""

    groups: tuple[tuple[str, str], tuple[str, str], tuple[str, str]]
    quotas: tuple[float | None, float | None, float | None]


def _resolve(q: Quotas, user: str, client_id: str) -> _Resolved:
    pairs = (
        (q.producer_entity, q.producer_byte_rate),
        (q.consumer_entity, q.consumer_byte_rate),
        (q.request_entity, q.request_percentage),
    )
    groups = tuple(
        (user, client_id) if entity is None else quota_group(entity, user, client_id) for entity, _ in pairs
    )
    return _Resolved(groups, tuple(value for _, value in pairs))  # type: ignore[arg-type]


class QuotaManager:
    """The broker's measured client rates and the throttle times they call for."""

    def __init__(
        self,
        table: QuotaTable,
        settings: QuotaSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        expire_s: float = SENSOR_EXPIRY_S,
    ) -> None:
        self.table = table
        self.settings = settings or QuotaSettings()
        self.clock = clock
        self.expire_s = expire_s
        #: True while any quota is configured: until then requests are not measured at all (Kafka's
        #: ``quotasEnabled``), so a broker without quotas pays one attribute test per request
        self.enabled = bool(table.entities())
        self._resolved: dict[tuple[str, str], _Resolved] = {}
        self._sensors: dict[tuple[str, str, str], GroupSensor] = {}
        self._next_sweep = clock() + expire_s
        table.add_listener(self._changed)

    @classmethod
    def for_broker(cls, table: QuotaTable, properties: Mapping[str, str]) -> QuotaManager:
        """The manager of a broker: its table, measured as its ``quota.window.*`` settings say."""
        return cls(table, QuotaSettings.from_properties(properties))

    def _changed(self) -> None:
        """A quota changed: re-resolve every connection's groups and quotas from the next request on."""
        self._resolved = {}
        self.enabled = bool(self.table.entities())

    def _lookup(self, user: str, client_id: str) -> _Resolved:
        key = (user, client_id)
        cache = self._resolved  # taken first: a change meanwhile swaps in a new dict and this one is dropped
        resolved = cache.get(key)
        if resolved is None:
            resolved = _resolve(self.table.quotas_for(user, client_id), user, client_id)
            if len(cache) >= _MAX_RESOLVED:
                cache.clear()
            cache[key] = resolved
        return resolved

    def _sensor(self, kind_index: int, user: str, client_id: str, now: float) -> GroupSensor:
        resolved = self._lookup(user, client_id)
        g_user, g_client = resolved.groups[kind_index]
        kind = KINDS[kind_index]
        key = (kind, g_user, g_client)
        sensor = self._sensors.get(key)
        if sensor is None:
            if now >= self._next_sweep:
                self.expire(now)
            s = self.settings
            sensor = GroupSensor(
                kind,
                g_user,
                g_client,
                SampledStat(s.window_s, s.samples, now, min_windows=0),
                SampledStat(s.window_s, s.samples, now),
            )
            self._sensors[key] = sensor
        sensor.quota = resolved.quotas[kind_index]
        return sensor

    def record(self, kind: str, user: str, client_id: str, value: float, now: float | None = None) -> int:
        """Record ``value`` (bytes; for REQUEST, handler seconds) for the group; the throttle time in ms (0: within)."""
        now = self.clock() if now is None else now
        index = KINDS.index(kind)
        if index == 2:
            value *= 100.0  # seconds of one thread -> percent-seconds: the rate is a percentage of a thread
        sensor = self._sensor(index, user, client_id, now)
        stat = sensor.rate
        stat.record(value, now)
        quota = sensor.quota
        if quota is None:
            return 0
        delay = throttle_ms(stat.total(now), stat.window_size(now), quota)
        if delay <= 0:
            return 0
        s = self.settings
        cap = s.window_s * 1000.0 * (1 if index == 2 else s.samples)
        return int(round(min(delay, cap)))

    def unrecord(self, kind: str, user: str, client_id: str, value: float, now: float | None = None) -> None:
        """Take back a recorded value (a throttled fetch answers without the data it measured)."""
        now = self.clock() if now is None else now
        self._sensor(KINDS.index(kind), user, client_id, now).rate.record(-value, now)

    def throttled(
        self, kind: str, user: str, client_id: str, delay_ms: int, now: float | None = None
    ) -> None:
        """A response of the group was throttled for ``delay_ms`` (the throttle-time metric)."""
        now = self.clock() if now is None else now
        sensor = self._sensor(KINDS.index(kind), user, client_id, now)
        sensor.throttle.record(delay_ms, now)
        sensor.throttled_total += 1

    def max_fetch_bytes(self, user: str, client_id: str) -> int | None:
        """The most a fetch may return at the group's fetch quota: a tenth of one window's worth.

        Kafka allows ``quota x (samples - 1)`` windows (``getMaxValueInQuotaWindow``): one answer may
        then be ten seconds of quota, followed by ten seconds of nothing. Small answers keep a paced
        consumer's rate even (a batch larger than this still comes whole, KIP-74). None: no fetch quota.
        """
        quota = self._lookup(user, client_id).quotas[1]
        if quota is None:
            return None
        return max(1, int(quota * self.settings.window_s / 10))

    def expire(self, now: float | None = None) -> int:
        """Drop the sensors idle for ``expire_s``; how many were dropped."""
        now = self.clock() if now is None else now
        self._next_sweep = now + min(self.expire_s, 60.0)
        idle = [k for k, s in self._sensors.items() if now - s.rate.last_record >= self.expire_s]
        for k in idle:
            del self._sensors[k]
        return len(idle)

    def groups(self) -> list[GroupSensor]:
        """Every live group sensor (for the metrics)."""
        return list(self._sensors.values())

    def measured(self, sensor: GroupSensor, now: float | None = None) -> tuple[float, float]:
        """A group's (rate, average throttle ms) now: bytes/s, or percent of a thread for REQUEST."""
        now = self.clock() if now is None else now
        stat = sensor.rate
        return stat.total(now) / max(stat.window_size(now), stat.window_s), sensor.throttle.average(now)
