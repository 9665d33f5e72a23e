"""Per-log configuration with Kafka's names and defaults.

Topic-level names (``segment.bytes``) and broker-level names
(``log.segment.bytes``) are both accepted by :meth:`LogConfig.from_properties`;
topic-level names are what :meth:`LogConfig.to_properties` writes back.

Defaults follow Kafka except for the flush policy. Kafka's default is
"never flush, rely on replication and the OS" (``Long.MAX`` for both). A
single embedded broker has no replicas, so we keep ``flush.messages`` at
``Long.MAX`` but flush every second by time (``flush.ms=1000``): a process
crash loses nothing (the page cache survives it), a machine crash loses at
most one second of appends. Set ``flush.ms`` to ``Long.MAX`` for Kafka's
behaviour, or ``flush.messages=1`` for fsync-per-append.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from ...errors import InvalidConfig

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
_MIN_BATCH = 61  # a record batch header; no batch can be smaller

_DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class LogConfig:
    """Settings of one partition log (and, for the manager, of its background work)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * _DAY_MS
    segment_index_bytes: int = 10 * (1 << 20)
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = 1000
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    max_message_bytes: int = (1 << 20) + 12  # Kafka's 1048588: 1 MiB plus the log overhead
    message_timestamp_type: str = CREATE_TIME
    file_delete_delay_ms: int = 60_000
    # Broker-wide (used by LogManager, ignored per topic).
    retention_check_interval_ms: int = 300_000
    flush_scheduler_interval_ms: int = 1000

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, why: str) -> None:
            if not ok:
                raise InvalidConfig(f"{name}={getattr(self, _ATTR[name])!r}: {why}")

        for name, attr in _ATTR.items():
            v = getattr(self, attr)
            if attr != "message_timestamp_type" and (isinstance(v, bool) or not isinstance(v, int)):
                raise InvalidConfig(f"{name} must be an integer, got {v!r}")
        need(_MIN_BATCH <= self.segment_bytes <= INT_MAX, "segment.bytes", f"must be in [{_MIN_BATCH}, {INT_MAX}]")
        need(self.segment_ms >= 1, "segment.ms", "must be >= 1")
        need(self.segment_index_bytes >= 12, "segment.index.bytes", "must be >= 12 (one index entry)")
        need(self.index_interval_bytes >= 0, "index.interval.bytes", "must be >= 0")
        need(self.flush_messages >= 1, "flush.messages", "must be >= 1")
        need(self.flush_ms >= 0, "flush.ms", "must be >= 0")
        need(self.retention_ms >= -1, "retention.ms", "must be >= -1 (-1: unlimited)")
        need(self.retention_bytes >= -1, "retention.bytes", "must be >= -1 (-1: unlimited)")
        need(_MIN_BATCH <= self.max_message_bytes <= INT_MAX, "max.message.bytes", f"must be in [{_MIN_BATCH}, {INT_MAX}]")
        need(
            self.message_timestamp_type in (CREATE_TIME, LOG_APPEND_TIME),
            "message.timestamp.type",
            f"must be {CREATE_TIME} or {LOG_APPEND_TIME}",
        )
        need(self.file_delete_delay_ms >= 0, "file.delete.delay.ms", "must be >= 0")
        need(self.retention_check_interval_ms >= 1, "log.retention.check.interval.ms", "must be >= 1")
        need(self.flush_scheduler_interval_ms >= 1, "log.flush.scheduler.interval.ms", "must be >= 1")

    @property
    def log_append_time(self) -> bool:
        """True when the broker stamps its own time on every batch."""
        return self.message_timestamp_type == LOG_APPEND_TIME

    @classmethod
    def from_properties(cls, props: Mapping[str, object], *, base: LogConfig | None = None, strict: bool = False) -> LogConfig:
        """Build a config from Kafka-style properties (topic or broker spelling).

        Keys this class does not know are ignored (a server.properties file has
        many), unless ``strict`` (topic overrides), where they raise InvalidConfig.
        Broker-level time settings in hours/minutes are honoured with Kafka's
        precedence (``.ms`` over ``.minutes`` over ``.hours``).
        """
        values: dict[str, object] = {}
        hours_minutes: dict[str, tuple[int, int]] = {}
        for key, raw in props.items():
            key = str(key).strip()
            if key in _HOURS_MINUTES:
                attr, unit_ms, rank = _HOURS_MINUTES[key]
                prev = hours_minutes.get(attr)
                if prev is None or rank > prev[1]:
                    n = _parse_int(key, raw)
                    hours_minutes[attr] = (-1 if n < 0 else n * unit_ms, rank)
                continue
            attr = _ALIASES.get(key)
            if attr is None:
                if strict:
                    raise InvalidConfig(f"unknown log config {key!r}")
                continue
            values[attr] = raw if attr == "message_timestamp_type" else _parse_int(key, raw)
        for attr, (ms, _) in hours_minutes.items():
            values.setdefault(attr, ms)
        if "message_timestamp_type" in values:
            values["message_timestamp_type"] = str(values["message_timestamp_type"]).strip()
        start = base if base is not None else cls()
        return dataclasses.replace(start, **values)

    def with_overrides(self, overrides: Mapping[str, object] | None) -> LogConfig:
        """A copy with topic-level overrides applied (unknown keys raise InvalidConfig)."""
        if not overrides:
            return self
        return LogConfig.from_properties(overrides, base=self, strict=True)

    def to_properties(self, only: Mapping[str, object] | None = None) -> dict[str, str]:
        """Topic-level properties; with ``only``, just the keys present in it (canonical names)."""
        out = {}
        for name, attr in _ATTR.items():
            if only is not None and not any(_ALIASES.get(k) == attr or _HOURS_MINUTES.get(k, ("",))[0] == attr for k in only):
                continue
            out[name] = str(getattr(self, attr))
        return out


def _parse_int(key: str, raw: object) -> int:
    if isinstance(raw, bool):
        raise InvalidConfig(f"{key} must be an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw).strip())
    except ValueError:
        raise InvalidConfig(f"{key} must be an integer, got {raw!r}") from None


# Canonical (topic-level) name -> attribute.
_ATTR = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "log.retention.check.interval.ms": "retention_check_interval_ms",
    "log.flush.scheduler.interval.ms": "flush_scheduler_interval_ms",
}
_ALIASES = dict(
    _ATTR,
    **{
        "log.segment.bytes": "segment_bytes",
        "log.roll.ms": "segment_ms",
        "log.index.size.max.bytes": "segment_index_bytes",
        "log.index.interval.bytes": "index_interval_bytes",
        "log.flush.interval.messages": "flush_messages",
        "log.flush.interval.ms": "flush_ms",
        "log.retention.ms": "retention_ms",
        "log.retention.bytes": "retention_bytes",
        "message.max.bytes": "max_message_bytes",
        "log.message.timestamp.type": "message_timestamp_type",
        "log.segment.delete.delay.ms": "file_delete_delay_ms",
    },
)
# Coarser broker spellings: key -> (attribute, unit in ms, precedence rank).
_HOURS_MINUTES = {
    "log.roll.hours": ("segment_ms", 3600_000, 0),
    "log.retention.hours": ("retention_ms", 3600_000, 0),
    "log.retention.minutes": ("retention_ms", 60_000, 1),
}
