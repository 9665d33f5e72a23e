"""Parsing and validation of the `logsource` data source options.

Option names follow Spark's Kafka connector (case-insensitive), so that a
Kafka user's code works with only the format name changed. Every invalid
option raises :class:`~pyspark_logsource.errors.ConfigError` naming the
option and what is accepted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from ..client.kafka_security import KafkaSecurity
from ..errors import ConfigError

EARLIEST = -2
LATEST = -1

#: An offset spec: "earliest", "latest", or {topic: {partition: offset}} with -2/-1 allowed.
OffsetSpec = Union[str, dict[str, dict[int, int]]]


@dataclass(frozen=True)
class TimestampSpec:
    """Offsets by timestamp: one global timestamp (ms) or {topic: {partition: ts_ms}}."""

    global_ts: int | None = None
    per_partition: dict[str, dict[int, int]] | None = None


@dataclass(frozen=True)
class ReadOptions:
    """Validated read options (batch and streaming)."""

    bootstrap: str
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None
    starting: OffsetSpec | TimestampSpec = "earliest"
    ending: OffsetSpec | TimestampSpec = "latest"
    by_timestamp_strategy: str = "error"
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id: str | None = None
    #: 8 MB: a task's fetch is then about the batch it hands Spark (datasource.COALESCE_BYTES);
    #: 32 MB fetches cost the reading thread ~40% more CPU per row (0.56 against 0.40 s per 1M rows,
    #: mostly format/'s gather of the values: one Arrow take over 30 MB against a join of ~8 MB)
    max_bytes_per_fetch: int = 8 << 20
    client_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    #: the ``kafka.security.protocol``, ``kafka.sasl.*`` and ``kafka.ssl.*`` options (repr redacted)
    security: KafkaSecurity = field(default_factory=KafkaSecurity)
    #: ``localRead``: auto / true / false, a task on the leader's host reads the segment files
    #: (client/local_read.py)
    local_read: str = "auto"


@dataclass(frozen=True)
class WriteOptions:
    """Validated write options."""

    bootstrap: str
    topic: str | None = None
    compression: str | None = None
    linger_ms: int = 5
    acks: int = -1
    batch_size: int | None = None
    auto_create_topic: bool = False
    num_partitions: int = 1
    client_id: str | None = None
    #: tasks stage transactional batches and the driver commits each batch once (needs acks=all)
    exactly_once: bool = True
    #: staged data of an attempt with no append for this long is aborted by the broker
    transaction_timeout_ms: int = 600_000
    #: the ``kafka.security.protocol``, ``kafka.sasl.*`` and ``kafka.ssl.*`` options (repr redacted)
    security: KafkaSecurity = field(default_factory=KafkaSecurity)


def normalize(options: Mapping[str, Any]) -> dict[str, str]:
    """Lower-case option names (Spark options are case-insensitive) and stringify values."""
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def _bootstrap(opts: dict[str, str]) -> str:
    value = opts.get("bootstrap.servers") or opts.get("kafka.bootstrap.servers")
    if not value or not value.strip():
        raise ConfigError(
            "option 'bootstrap.servers' (or 'kafka.bootstrap.servers') is required, e.g. 'localhost:9092'"
        )
    for hp in value.split(","):
        host, sep, port = hp.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"option 'bootstrap.servers': {hp.strip()!r} is not host:port")
    return ",".join(hp.strip() for hp in value.split(","))


def parse_bool(opts: dict[str, str], name: str, default: bool) -> bool:
    """Parse a boolean option ('true'/'false', case-insensitive)."""
    raw = opts.get(name.lower())
    if raw is None:
        return default
    low = raw.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise ConfigError(f"option '{name}' must be true or false, got {raw!r}")


def parse_int(
    opts: dict[str, str], name: str, default: int | None, *, minimum: int | None = None
) -> int | None:
    """Parse an integer option with an optional lower bound."""
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"option '{name}' must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"option '{name}' must be >= {minimum}, got {value}")
    return value


def _json_obj(name: str, raw: str) -> dict:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"option '{name}' is not valid JSON ({e.msg}): {raw!r}") from None
    if not isinstance(obj, dict):
        raise ConfigError(f"option '{name}' must be a JSON object, got {raw!r}")
    return obj


def _partition_map(
    name: str, obj: dict, *, allow_specials: tuple[int, ...], kind: str
) -> dict[str, dict[int, int]]:
    """Validate {"topic": {"0": n, ...}} into {topic: {0: n}}."""
    out: dict[str, dict[int, int]] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise ConfigError(
                f"option '{name}': value for topic {topic!r} must be an object of partition -> {kind}"
            )
        m: dict[int, int] = {}
        for p, v in parts.items():
            try:
                pi = int(p)
            except (TypeError, ValueError):
                raise ConfigError(
                    f"option '{name}': partition {p!r} of topic {topic!r} is not an integer"
                ) from None
            if pi < 0:
                raise ConfigError(f"option '{name}': partition {pi} of topic {topic!r} is negative")
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"option '{name}': {kind} for {topic}-{pi} must be an integer, got {v!r}")
            if v < 0 and v not in allow_specials:
                allowed = " or ".join(str(a) for a in allow_specials) or "no negative value"
                raise ConfigError(
                    f"option '{name}': {kind} {v} for {topic}-{pi} is invalid (allowed negatives: {allowed})"
                )
            m[pi] = v
        out[str(topic)] = m
    return out


def parse_offsets(
    name: str, raw: str | None, default: str, *, allow: tuple[str, ...], specials: tuple[int, ...]
) -> OffsetSpec:
    """Parse startingOffsets / endingOffsets: a keyword or the per-partition JSON form."""
    if raw is None:
        return default
    s = raw.strip()
    if s.lower() in ("earliest", "latest"):
        if s.lower() not in allow:
            raise ConfigError(
                f"option '{name}' cannot be {s.lower()!r} here (allowed: {', '.join(allow)} or JSON)"
            )
        return s.lower()
    return _partition_map(name, _json_obj(name, s), allow_specials=specials, kind="offset")


def _timestamp_spec(opts: dict[str, str], prefix: str) -> TimestampSpec | None:
    single = f"{prefix}Timestamp"
    per = f"{prefix}OffsetsByTimestamp"
    if single.lower() in opts:
        ts = parse_int(opts, single, None, minimum=0)
        return TimestampSpec(global_ts=ts)
    if per.lower() in opts:
        obj = _json_obj(per, opts[per.lower()])
        return TimestampSpec(per_partition=_partition_map(per, obj, allow_specials=(), kind="timestamp"))
    return None


def _subscription(opts: dict[str, str]):
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(given) != 1:
        raise ConfigError(
            "exactly one of the options 'subscribe', 'subscribePattern', 'assign' must be given"
            + (f" (got {', '.join(given)})" if given else "")
        )
    kind = given[0]
    raw = opts[kind].strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise ConfigError("option 'subscribe' must list at least one topic")
        return topics, None, None
    if kind == "subscribepattern":
        if not raw:
            raise ConfigError("option 'subscribePattern' must not be empty")
        try:
            re.compile(raw)
        except re.error as e:
            raise ConfigError(f"option 'subscribePattern' is not a valid regex: {e}") from None
        return None, raw, None
    obj = _json_obj("assign", raw)
    assign: dict[str, tuple[int, ...]] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise ConfigError(
                f"option 'assign': topic {topic!r} must map to a list of partition numbers, got {parts!r}"
            )
        assign[str(topic)] = tuple(sorted(set(parts)))
    if not assign:
        raise ConfigError("option 'assign' must name at least one topic")
    return None, None, assign


def parse_read_options(options: Mapping[str, Any], *, streaming: bool) -> ReadOptions:
    """Validate the options of spark.read / spark.readStream on format("logsource")."""
    opts = normalize(options)
    bootstrap = _bootstrap(opts)
    subscribe, pattern, assign = _subscription(opts)

    start_ts = _timestamp_spec(opts, "starting")
    if start_ts is not None:
        starting: OffsetSpec | TimestampSpec = start_ts
    else:
        # Kafka: a batch query cannot start at latest (it would read nothing); streams default to latest.
        starting = parse_offsets(
            "startingOffsets",
            opts.get("startingoffsets"),
            "latest" if streaming else "earliest",
            allow=("earliest", "latest") if streaming else ("earliest",),
            specials=(EARLIEST, LATEST) if streaming else (EARLIEST, LATEST),
        )
        if (
            not streaming
            and isinstance(starting, dict)
            and any(v == LATEST for parts in starting.values() for v in parts.values())
        ):
            raise ConfigError("option 'startingOffsets': -1 (latest) is not allowed for a batch query")

    if streaming:
        for bad in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if bad in opts:
                raise ConfigError(f"option '{bad}' is only for batch queries (a stream has no end)")
        ending: OffsetSpec | TimestampSpec = "latest"
    else:
        end_ts = _timestamp_spec(opts, "ending")
        if end_ts is not None:
            ending = end_ts
        else:
            ending = parse_offsets(
                "endingOffsets", opts.get("endingoffsets"), "latest", allow=("latest",), specials=(LATEST,)
            )
        if "maxoffsetspertrigger" in opts:
            raise ConfigError("option 'maxOffsetsPerTrigger' is only for streaming queries")

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigError(
            f"option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {strategy!r}"
        )

    return ReadOptions(
        bootstrap=bootstrap,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        by_timestamp_strategy=strategy,
        min_partitions=parse_int(opts, "minPartitions", None, minimum=1),
        max_offsets_per_trigger=parse_int(opts, "maxOffsetsPerTrigger", None, minimum=1),
        fail_on_data_loss=parse_bool(opts, "failOnDataLoss", True),
        include_headers=parse_bool(opts, "includeHeaders", False),
        group_id=(opts.get("groupid") or opts.get("kafka.group.id") or None),
        max_bytes_per_fetch=(
            parse_int(opts, "fetch.max.bytes", None, minimum=1024)
            or parse_int(opts, "kafka.fetch.max.bytes", ReadOptions.max_bytes_per_fetch, minimum=1024)
            or ReadOptions.max_bytes_per_fetch
        ),
        client_id=opts.get("client.id") or opts.get("kafka.client.id"),
        security=KafkaSecurity.from_options(opts),
        local_read=_local_read(opts),
    )


def _local_read(opts: dict[str, str]) -> str:
    mode = opts.get("localread", "auto").strip().lower()
    if mode not in ("auto", "true", "false"):
        raise ConfigError(f"option 'localRead' must be auto, true or false; got {mode!r}")
    return mode


_CODECS = (None, "none", "gzip", "lz4", "zstd")


def parse_write_options(options: Mapping[str, Any]) -> WriteOptions:
    """Validate the options of df.write / writeStream on format("logsource")."""
    opts = normalize(options)
    bootstrap = _bootstrap(opts)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise ConfigError("option 'topic' must not be empty")
    codec = opts.get("compression") or opts.get("kafka.compression.type") or opts.get("compression.type")
    if codec is not None:
        codec = codec.strip().lower()
        if codec not in _CODECS:
            raise ConfigError(f"option 'compression' must be one of none, gzip, lz4, zstd; got {codec!r}")
        if codec == "none":
            codec = None
    acks_raw = (opts.get("acks") or opts.get("kafka.acks") or "all").strip().lower()
    if acks_raw == "all":
        acks = -1
    elif acks_raw in ("-1", "1", "0"):
        acks = int(acks_raw)
    else:
        raise ConfigError(f"option 'acks' must be all, -1, 0 or 1; got {acks_raw!r}")
    exactly_once = parse_bool(opts, "exactlyOnce", True)
    if exactly_once and acks != -1:
        if "exactlyonce" in opts:
            raise ConfigError(
                f"option 'exactlyOnce=true' needs acks=all (got acks={acks_raw}); "
                "acks=0/1 writes are at-least-once at best"
            )
        exactly_once = False  # acks=0/1 asked for explicitly: at-least-once, as stated in the README
    linger = parse_int(opts, "linger.ms", None, minimum=0)
    if linger is None:
        linger = parse_int(opts, "kafka.linger.ms", 5, minimum=0)
    return WriteOptions(
        bootstrap=bootstrap,
        topic=topic.strip() if topic else None,
        compression=codec,
        linger_ms=int(linger or 0),
        acks=acks,
        batch_size=parse_int(opts, "batch.size", None, minimum=1)
        or parse_int(opts, "kafka.batch.size", None, minimum=1),
        auto_create_topic=parse_bool(opts, "autoCreateTopic", False),
        num_partitions=parse_int(opts, "numPartitions", 1, minimum=1) or 1,
        client_id=opts.get("client.id") or opts.get("kafka.client.id"),
        exactly_once=exactly_once,
        transaction_timeout_ms=int(
            parse_int(opts, "transaction.timeout.ms", None, minimum=1)
            or parse_int(opts, "kafka.transaction.timeout.ms", 600_000, minimum=1)
            or 600_000
        ),
        security=KafkaSecurity.from_options(opts),
    )
