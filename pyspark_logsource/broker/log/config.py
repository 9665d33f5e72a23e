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

Every topic config Kafka defines (TopicConfig, and the replication throttles of
QuotaConfig) is accepted, so that Kafka's tools and clients can create topics
with them; unknown names are refused. The ones below "Accepted and stored" are
validated with Kafka's rules, stored and returned by DescribeConfigs, but the
broker does not act on them (see each field).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ...errors import InvalidConfig

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
_MIN_BATCH = 61  # a record batch header; no batch can be smaller

_DAY_MS = 24 * 3600 * 1000
DELETE, COMPACT, COMPACT_DELETE = "delete", "compact", "compact,delete"
_STRINGS = frozenset(
    {
        "message_timestamp_type",
        "cleanup_policy",
        "compression_type",
        "message_format_version",
        "leader_replication_throttled_replicas",
        "follower_replication_throttled_replicas",
    }
)
_FLOATS = frozenset({"min_cleanable_dirty_ratio"})
#: written back as "true"/"false", as Kafka's DescribeConfigs shows them
_BOOLS = frozenset(
    {
        "unclean_leader_election_enable",
        "message_downconversion_enable",
        "preallocate",
        "remote_storage_enable",
        "remote_log_copy_disable",
        "remote_log_delete_on_disable",
    }
)
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_VERSION = re.compile(r"\d+\.\d+(\.\d+)?(-IV\d+)?")  # a message.format.version: 0.10.0, 2.8, 3.0-IV1
_THROTTLED = re.compile(r"\*|(\d+:\d+(,\d+:\d+)*)?")  # "*", or partition:broker pairs


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
    #: "delete" (retention), "compact" (keep the last record per key) or both ("compact,delete")
    cleanup_policy: str = DELETE
    delete_retention_ms: int = _DAY_MS  # how long tombstones outlive compaction
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    #: acks=all needs this many in-sync replicas (NotEnoughReplicas otherwise); a topic setting, as in Kafka
    min_insync_replicas: int = 1
    # Accepted and stored (Kafka's topic configs), returned by DescribeConfigs, not acted on per topic.
    #: batches are stored as the producer compressed them (never re-encoded): only "producer" is honoured
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    #: the controller elects with the broker-wide unclean.leader.election.enable, not this per-topic value
    unclean_leader_election_enable: bool = False
    #: Fetch v4+ only: every consumer reads the v2 batch format, there is nothing to down-convert
    message_downconversion_enable: bool = True
    message_format_version: str = "3.0-IV1"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    segment_jitter_ms: int = 0
    preallocate: bool = False
    #: no tiered storage: only false is accepted (Kafka refuses true when the broker has none)
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    # Broker-wide (used by LogManager, ignored per topic).
    retention_check_interval_ms: int = 300_000
    flush_scheduler_interval_ms: int = 1000
    cleaner_enable: int = 1
    #: memory of the cleaner's offset map (Kafka's 128 MiB); bounds the dirty segments one pass takes
    cleaner_dedupe_buffer_size: int = 128 << 20
    cleaner_backoff_ms: int = 15_000

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, why: str) -> None:
            if not ok:
                raise InvalidConfig(f"{name}={getattr(self, _ATTR[name])!r}: {why}")

        for name, attr in _ATTR.items():
            v = getattr(self, attr)
            if attr in _STRINGS:
                if not isinstance(v, str):
                    raise InvalidConfig(f"{name} must be a string, got {v!r}")
                continue
            if attr in _BOOLS:
                if not isinstance(v, bool):
                    raise InvalidConfig(f"{name} must be true or false, got {v!r}")
                continue
            if attr in _FLOATS:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise InvalidConfig(f"{name} must be a number, got {v!r}")
            elif isinstance(v, bool) or not isinstance(v, int):
                raise InvalidConfig(f"{name} must be an integer, got {v!r}")
        need(
            _MIN_BATCH <= self.segment_bytes <= INT_MAX,
            "segment.bytes",
            f"must be in [{_MIN_BATCH}, {INT_MAX}]",
        )
        need(self.segment_ms >= 1, "segment.ms", "must be >= 1")
        need(self.segment_index_bytes >= 12, "segment.index.bytes", "must be >= 12 (one index entry)")
        need(self.index_interval_bytes >= 0, "index.interval.bytes", "must be >= 0")
        need(self.flush_messages >= 1, "flush.messages", "must be >= 1")
        need(self.flush_ms >= 0, "flush.ms", "must be >= 0")
        need(self.retention_ms >= -1, "retention.ms", "must be >= -1 (-1: unlimited)")
        need(self.retention_bytes >= -1, "retention.bytes", "must be >= -1 (-1: unlimited)")
        need(
            _MIN_BATCH <= self.max_message_bytes <= INT_MAX,
            "max.message.bytes",
            f"must be in [{_MIN_BATCH}, {INT_MAX}]",
        )
        need(
            self.message_timestamp_type in (CREATE_TIME, LOG_APPEND_TIME),
            "message.timestamp.type",
            f"must be {CREATE_TIME} or {LOG_APPEND_TIME}",
        )
        need(self.file_delete_delay_ms >= 0, "file.delete.delay.ms", "must be >= 0")
        need(
            self.cleanup_policy in (DELETE, COMPACT, COMPACT_DELETE),
            "cleanup.policy",
            f"must be {DELETE}, {COMPACT} or {COMPACT_DELETE}",
        )
        need(self.delete_retention_ms >= 0, "delete.retention.ms", "must be >= 0")
        need(self.min_compaction_lag_ms >= 0, "min.compaction.lag.ms", "must be >= 0")
        need(self.max_compaction_lag_ms >= 1, "max.compaction.lag.ms", "must be >= 1")
        need(0 <= self.min_cleanable_dirty_ratio <= 1, "min.cleanable.dirty.ratio", "must be in [0, 1]")
        need(self.min_insync_replicas >= 1, "min.insync.replicas", "must be >= 1")
        need(
            self.compression_type in COMPRESSION_TYPES,
            "compression.type",
            f"must be one of {', '.join(COMPRESSION_TYPES)}",
        )
        need(
            self.compression_gzip_level == -1 or 1 <= self.compression_gzip_level <= 9,
            "compression.gzip.level",
            "must be -1 or in [1, 9]",
        )
        need(1 <= self.compression_lz4_level <= 17, "compression.lz4.level", "must be in [1, 17]")
        need(
            -131072 <= self.compression_zstd_level <= 22, "compression.zstd.level", "must be in [-131072, 22]"
        )
        need(
            _VERSION.fullmatch(self.message_format_version) is not None,
            "message.format.version",
            "must be a Kafka version such as 2.8 or 3.0-IV1",
        )
        for name in (
            "message.timestamp.difference.max.ms",
            "message.timestamp.before.max.ms",
            "message.timestamp.after.max.ms",
            "segment.jitter.ms",
        ):
            need(getattr(self, _ATTR[name]) >= 0, name, "must be >= 0")
        need(not self.remote_storage_enable, "remote.storage.enable", "this broker has no tiered storage")
        need(self.local_retention_ms >= -2, "local.retention.ms", "must be >= -2 (-2: retention.ms)")
        need(self.local_retention_bytes >= -2, "local.retention.bytes", "must be >= -2 (-2: retention.bytes)")
        for name in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
            need(
                _THROTTLED.fullmatch(getattr(self, _ATTR[name])) is not None,
                name,
                "must be *, or a list of partition:broker pairs",
            )
        need(self.cleaner_enable in (0, 1), "log.cleaner.enable", "must be true or false")
        need(self.cleaner_dedupe_buffer_size >= 1024, "log.cleaner.dedupe.buffer.size", "must be >= 1024")
        need(self.cleaner_backoff_ms >= 1, "log.cleaner.backoff.ms", "must be >= 1")
        need(self.retention_check_interval_ms >= 1, "log.retention.check.interval.ms", "must be >= 1")
        need(self.flush_scheduler_interval_ms >= 1, "log.flush.scheduler.interval.ms", "must be >= 1")

    @property
    def compact(self) -> bool:
        """The cleaner compacts this log (keyless records are refused on append)."""
        return self.cleanup_policy != DELETE

    @property
    def delete(self) -> bool:
        """Retention (retention.ms, retention.bytes) deletes old segments of this log."""
        return self.cleanup_policy != COMPACT

    @property
    def log_append_time(self) -> bool:
        """True when the broker stamps its own time on every batch."""
        return self.message_timestamp_type == LOG_APPEND_TIME

    @classmethod
    def from_properties(
        cls, props: Mapping[str, object], *, base: LogConfig | None = None, strict: bool = False
    ) -> LogConfig:
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
            if attr in _STRINGS:
                values[attr] = _parse_str(attr, raw)
            elif attr in _FLOATS:
                values[attr] = _parse_float(key, raw)
            elif attr == "cleaner_enable":
                values[attr] = _parse_bool(key, raw)
            elif attr in _BOOLS:
                values[attr] = bool(_parse_bool(key, raw))
            else:
                values[attr] = _parse_int(key, raw)
        for attr, (ms, _) in hours_minutes.items():
            values.setdefault(attr, ms)
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
            if only is not None and not any(
                _ALIASES.get(k) == attr or _HOURS_MINUTES.get(k, ("",))[0] == attr for k in only
            ):
                continue
            v = getattr(self, attr)
            out[name] = ("true" if v else "false") if attr in _BOOLS else str(v)
        return out


def _parse_str(attr: str, raw: object) -> str:
    v = str(raw).strip()
    if attr == "cleanup_policy":  # Kafka accepts a list in any order: "delete,compact"
        parts = sorted({p.strip().lower() for p in v.split(",") if p.strip()})
        return COMPACT_DELETE if parts == [COMPACT, DELETE] else ",".join(parts)
    if attr in ("leader_replication_throttled_replicas", "follower_replication_throttled_replicas"):
        return ",".join(p.strip() for p in v.split(",")) if v else v
    return v


def _parse_float(key: str, raw: object) -> float:
    if isinstance(raw, bool):
        raise InvalidConfig(f"{key} must be a number, got {raw!r}")
    try:
        return float(str(raw).strip())
    except ValueError:
        raise InvalidConfig(f"{key} must be a number, got {raw!r}") from None


def _parse_bool(key: str, raw: object) -> int:
    v = str(raw).strip().lower()
    if v in ("true", "1"):
        return 1
    if v in ("false", "0"):
        return 0
    raise InvalidConfig(f"{key} must be true or false, got {raw!r}")


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
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.insync.replicas": "min_insync_replicas",
    "compression.type": "compression_type",
    "compression.gzip.level": "compression_gzip_level",
    "compression.lz4.level": "compression_lz4_level",
    "compression.zstd.level": "compression_zstd_level",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "message.downconversion.enable": "message_downconversion_enable",
    "message.format.version": "message_format_version",
    "message.timestamp.difference.max.ms": "message_timestamp_difference_max_ms",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "preallocate": "preallocate",
    "remote.storage.enable": "remote_storage_enable",
    "local.retention.ms": "local_retention_ms",
    "local.retention.bytes": "local_retention_bytes",
    "remote.log.copy.disable": "remote_log_copy_disable",
    "remote.log.delete.on.disable": "remote_log_delete_on_disable",
    "leader.replication.throttled.replicas": "leader_replication_throttled_replicas",
    "follower.replication.throttled.replicas": "follower_replication_throttled_replicas",
    "log.cleaner.enable": "cleaner_enable",
    "log.cleaner.dedupe.buffer.size": "cleaner_dedupe_buffer_size",
    "log.cleaner.backoff.ms": "cleaner_backoff_ms",
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
        "log.cleanup.policy": "cleanup_policy",
        "log.cleaner.delete.retention.ms": "delete_retention_ms",
        "log.cleaner.min.compaction.lag.ms": "min_compaction_lag_ms",
        "log.cleaner.max.compaction.lag.ms": "max_compaction_lag_ms",
        "log.cleaner.min.cleanable.ratio": "min_cleanable_dirty_ratio",
        "log.message.downconversion.enable": "message_downconversion_enable",
        "log.message.format.version": "message_format_version",
        "log.message.timestamp.difference.max.ms": "message_timestamp_difference_max_ms",
        "log.message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
        "log.message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
        "log.roll.jitter.ms": "segment_jitter_ms",
        "log.preallocate": "preallocate",
        "log.local.retention.ms": "local_retention_ms",
        "log.local.retention.bytes": "local_retention_bytes",
    },
)
# Coarser broker spellings: key -> (attribute, unit in ms, precedence rank).
_HOURS_MINUTES = {
    "log.roll.hours": ("segment_ms", 3600_000, 0),
    "log.retention.hours": ("retention_ms", 3600_000, 0),
    "log.retention.minutes": ("retention_ms", 60_000, 1),
}
