"""Broker configuration in Kafka's ``server.properties`` spelling.

``BrokerConfig.load(path, overrides)`` reads a Java-style properties file,
applies ``key=value`` overrides on top and validates the result. Log settings
(``log.segment.bytes``, ``log.retention.ms``, ``log.flush.interval.messages``,
``message.max.bytes`` ...) are handed to :meth:`LogConfig.from_properties`,
which knows their Kafka names; this module owns the network and broker-level
settings. Unknown keys are logged and ignored, as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, InvalidConfig
from ..properties import parse_properties  # noqa: F401 (importers use it from here)
from .log import LogConfig
from .log.config import _ALIASES, _HOURS_MINUTES
from .quotas.settings import QUOTA_DEFAULTS, QuotaSettings
from .security.acls.settings import ACL_DEFAULTS, AclSettings
from .security.listeners import ListenerSettings, listener_settings
from .security.settings import SECRET_KEYS, SECURITY_DEFAULTS, SecuritySettings

log = logging.getLogger(__name__)

#: Every broker-level setting with its default (the log ones are LogConfig's).
DEFAULTS: dict[str, str] = {
    "broker.id": "0",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    "log.dirs": "/tmp/logsource-logs",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "socket.request.max.bytes": str(100 * 1024 * 1024),
    "socket.send.buffer.bytes": "-1",
    "socket.receive.buffer.bytes": "-1",
    "fetch.max.bytes": str(55 * 1024 * 1024),
    # fetch sessions (KIP-227): how many the broker keeps, and how long one is safe from eviction
    "max.incremental.fetch.session.cache.slots": "1000",
    "min.incremental.fetch.session.eviction.ms": "120000",
    "offsets.topic.num.partitions": "1",
    "offsets.retention.minutes": str(7 * 24 * 60),
    "offset.metadata.max.bytes": "4096",
    "max.partitions.per.topic": "10000",
    # group coordinator; Kafka's initial delay is 3000 ms, ours is short so a group forms quickly
    "group.initial.rebalance.delay.ms": "300",
    "group.min.session.timeout.ms": "500",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": "2147483647",
    # KIP-848's consumer groups (group.protocol=consumer), Kafka's defaults
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "cluster.id": "",
    # our extension: store and serve Arrow-bodied batches; false makes the broker a plain Kafka broker
    "logsource.arrow.body.enable": "true",
    "logsource.local.read.enable": "false",
    # our extension: a shutdown (SIGTERM/SIGINT) that has not finished after this long exits non-zero
    "logsource.shutdown.timeout.ms": "30000",
    # cluster mode (unset zookeeper.connect: a single broker, no ZooKeeper)
    "zookeeper.connect": "",
    # Kafka's default is 18000; a short session makes failover quick (a dead broker is noticed within it)
    "zookeeper.session.timeout.ms": "6000",
    "zookeeper.connection.timeout.ms": "",
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.min.bytes": "1",
    "replica.fetch.max.bytes": str(1024 * 1024),
    "replica.fetch.response.max.bytes": str(10 * 1024 * 1024),
    # Kafka's default is 1000: a follower refused by a leader that has not yet learnt its role retries sooner
    "replica.fetch.backoff.ms": "200",
    "replica.high.watermark.checkpoint.interval.ms": "5000",
    "unclean.leader.election.enable": "false",
    # the controller moves leadership back to each partition's preferred replica (the first assigned)
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "300",
    "leader.imbalance.per.broker.percentage": "10",
    # exactly-once writes: the longest transaction timeout a write may ask for (Kafka's default)
    "transaction.max.timeout.ms": "900000",
    # cluster mode: the internal topics are replicated like Kafka's (a coordinator is its partition's leader)
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    # the Prometheus endpoint, http://host:port (GET /metrics); empty: none
    "metrics.listener": "",
}

DEFAULTS.update(SECURITY_DEFAULTS)  # listeners' protocols, TLS, SASL (broker/security/settings.py)
DEFAULTS.update(ACL_DEFAULTS)  # authorizer.class.name, super.users (broker/security/acls/settings.py)
DEFAULTS.update(QUOTA_DEFAULTS)  # quota.window.num, quota.window.size.seconds (broker/quotas/settings.py)

_BROKER_KEYS = set(DEFAULTS) | {"log.dir"}


def command_config_options(path: str | None) -> dict:
    """A ``--command-config`` file as our clients' keyword arguments (cli_args owns the reading)."""
    from ..cli_args import command_config_options as read

    return read(path)


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` -> dict; ConfigError on an item without ``=``."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key=value")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def parse_listener(value: str) -> tuple[str, int]:
    """The first of ``NAME://host:port,...`` (or ``host:port``) -> (host, port); port 0 = pick a free one.
    The listeners' names and protocols are :func:`.security.listeners.listener_settings`'."""
    first = value.split(",")[0].strip()
    if "://" in first:
        first = first.split("://", 1)[1]
    host, sep, port = first.rpartition(":")
    if not sep:
        raise ConfigError(f"listener {value!r} has no port")
    host = host.strip("[]") or "0.0.0.0"
    try:
        p = int(port)
    except ValueError:
        raise ConfigError(f"listener {value!r} has a bad port") from None
    if not 0 <= p <= 65535:
        raise ConfigError(f"listener port {p} is out of range")
    return host, p


def _metrics_listener(value: str) -> tuple[str, int] | None:
    """``http://host:port`` (or ``host:port``) -> (host, port); '' -> None."""
    value = value.strip()
    if not value:
        return None
    if "://" in value:
        scheme, value = value.split("://", 1)
        if scheme.lower() != "http":
            raise ConfigError(f"metrics.listener must be http://host:port, got scheme {scheme!r}")
    return parse_listener(value.rstrip("/"))


def _int(props: Mapping[str, str], key: str, lo: int | None = None) -> int:
    raw = props[key]
    try:
        v = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"{key} must be an integer, got {raw!r}") from None
    if lo is not None and v < lo:
        raise ConfigError(f"{key} must be >= {lo}, got {v}")
    return v


def _zk_connect(raw: str) -> str | None:
    """Validate ``host:port[,host:port...][/chroot]``; '' -> None (single broker)."""
    value = raw.strip()
    if not value:
        return None
    hosts, sep, chroot = value.partition("/")
    if sep and (not chroot or chroot.endswith("/") or "//" in chroot):
        raise ConfigError(f"zookeeper.connect has a bad chroot {'/' + chroot!r} in {value!r}")
    for hp in hosts.split(","):
        host, colon, port = hp.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ConfigError(f"zookeeper.connect must be host:port[,host:port...][/chroot], got {value!r}")
    return value


def _bool(props: Mapping[str, str], key: str) -> bool:
    raw = str(props[key]).strip().lower()
    if raw not in ("true", "false"):
        raise ConfigError(f"{key} must be true or false, got {props[key]!r}")
    return raw == "true"


@dataclass
class BrokerConfig:
    """Validated broker settings; ``log`` holds the default per-topic log settings."""

    broker_id: int = 0
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    log_dirs: list[Path] = field(default_factory=lambda: [Path(DEFAULTS["log.dirs"])])
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics: bool = True
    delete_topic_enable: bool = True
    socket_request_max_bytes: int = 100 * 1024 * 1024
    socket_send_buffer_bytes: int = -1
    socket_receive_buffer_bytes: int = -1
    fetch_max_bytes: int = 55 * 1024 * 1024
    fetch_session_cache_slots: int = 1000
    fetch_session_eviction_ms: int = 120_000
    offsets_topic_num_partitions: int = 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offset_metadata_max_bytes: int = 4096
    max_partitions_per_topic: int = 10000
    group_initial_rebalance_delay_ms: int = 300
    group_min_session_timeout_ms: int = 500
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_heartbeat_interval_ms: int = 5000
    cluster_id: str | None = None
    arrow_body_enable: bool = True
    #: grant Spark tasks on this host the segment files' descriptors (local short-circuit reads): off unless
    #: configured, as HDFS's dfs.client.read.shortcircuit; the embedded broker turns it on (embedded.py)
    local_read_enable: bool = False
    #: a signalled shutdown that has not finished after this long logs what it waits for and exits non-zero
    shutdown_timeout_ms: int = 30000
    #: ``host:port[,host:port...][/chroot]``; None: a single broker without ZooKeeper
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    replica_lag_time_max_ms: int = 30000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1024 * 1024
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    #: the longest timeout a staged write may register; open transactions nobody registered expire after it
    transaction_max_timeout_ms: int = 900_000
    #: cluster mode: replicas of ``__consumer_offsets`` / ``__transaction_state``; the coordinator is not available
    #: while fewer brokers are live (Kafka's rule)
    offsets_topic_replication_factor: int = 3
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    #: (host, port) of the Prometheus endpoint (``metrics.listener``); None: no endpoint
    metrics_listener: tuple[str, int] | None = None
    log: LogConfig = field(default_factory=LogConfig)
    properties: dict[str, str] = field(default_factory=dict)
    #: every listener (name, protocol, address), the advertised addresses, the inter-broker listener
    listeners: ListenerSettings | None = None
    #: TLS and SASL settings (used by the listeners whose protocol needs them)
    security: SecuritySettings = field(default_factory=SecuritySettings)

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> BrokerConfig:
        """Build from properties (defaults filled in); ConfigError / InvalidConfig on bad values."""
        p = dict(DEFAULTS)
        p.update({str(k).strip(): str(v) for k, v in props.items()})
        if "log.dirs" not in props and "log.dir" in props:
            p["log.dirs"] = p["log.dir"]
        for key in props:
            if key.startswith("listener.name.") and key.endswith(".sasl.jaas.config"):
                continue  # per-listener credentials (broker/security/inter_broker.py)
            if key not in _BROKER_KEYS and key not in _ALIASES and key not in _HOURS_MINUTES:
                log.warning("ignoring unknown broker setting %s", key)
        listeners = listener_settings(p)
        host, port = listeners.listeners[0].host, listeners.listeners[0].port
        adv_host = adv_port = None
        if listeners.listeners[0].name in listeners.advertised:
            adv_host, adv_port = listeners.advertised[listeners.listeners[0].name]
        security = SecuritySettings.from_properties(p, listeners)
        AclSettings.from_properties(p)  # a bad authorizer setting is a ConfigError at load
        QuotaSettings.from_properties(p)  # likewise a bad quota window
        dirs = [Path(d.strip()).expanduser() for d in p["log.dirs"].split(",") if d.strip()]
        if not dirs:
            raise ConfigError("log.dirs is empty")
        try:
            log_config = LogConfig.from_properties(p)
        except InvalidConfig as e:
            raise ConfigError(str(e)) from None
        cfg = cls(
            broker_id=_int(p, "broker.id", 0),
            host=host,
            port=port,
            advertised_host=adv_host,
            advertised_port=adv_port,
            log_dirs=dirs,
            num_partitions=_int(p, "num.partitions", 1),
            default_replication_factor=_int(p, "default.replication.factor", 1),
            auto_create_topics=_bool(p, "auto.create.topics.enable"),
            delete_topic_enable=_bool(p, "delete.topic.enable"),
            socket_request_max_bytes=_int(p, "socket.request.max.bytes", 1024),
            socket_send_buffer_bytes=_int(p, "socket.send.buffer.bytes", -1),
            socket_receive_buffer_bytes=_int(p, "socket.receive.buffer.bytes", -1),
            fetch_max_bytes=_int(p, "fetch.max.bytes", 1024),
            fetch_session_cache_slots=_int(p, "max.incremental.fetch.session.cache.slots", 0),
            fetch_session_eviction_ms=_int(p, "min.incremental.fetch.session.eviction.ms", 0),
            offsets_topic_num_partitions=_int(p, "offsets.topic.num.partitions", 1),
            offsets_retention_ms=_int(p, "offsets.retention.minutes", 1) * 60_000,
            offset_metadata_max_bytes=_int(p, "offset.metadata.max.bytes", 0),
            max_partitions_per_topic=_int(p, "max.partitions.per.topic", 1),
            group_initial_rebalance_delay_ms=_int(p, "group.initial.rebalance.delay.ms", 0),
            group_min_session_timeout_ms=_int(p, "group.min.session.timeout.ms", 1),
            group_max_session_timeout_ms=_int(p, "group.max.session.timeout.ms", 1),
            group_max_size=_int(p, "group.max.size", 1),
            group_consumer_session_timeout_ms=_int(p, "group.consumer.session.timeout.ms", 1),
            group_consumer_heartbeat_interval_ms=_int(p, "group.consumer.heartbeat.interval.ms", 1),
            cluster_id=p["cluster.id"].strip() or None,
            arrow_body_enable=_bool(p, "logsource.arrow.body.enable"),
            local_read_enable=_bool(p, "logsource.local.read.enable"),
            shutdown_timeout_ms=_int(p, "logsource.shutdown.timeout.ms", 1),
            zookeeper_connect=_zk_connect(p["zookeeper.connect"]),
            zookeeper_session_timeout_ms=_int(p, "zookeeper.session.timeout.ms", 1),
            replica_lag_time_max_ms=_int(p, "replica.lag.time.max.ms", 1),
            replica_fetch_wait_max_ms=_int(p, "replica.fetch.wait.max.ms", 0),
            replica_fetch_min_bytes=_int(p, "replica.fetch.min.bytes", 1),
            replica_fetch_max_bytes=_int(p, "replica.fetch.max.bytes", 1),
            unclean_leader_election_enable=_bool(p, "unclean.leader.election.enable"),
            auto_leader_rebalance_enable=_bool(p, "auto.leader.rebalance.enable"),
            leader_imbalance_check_interval_seconds=_int(p, "leader.imbalance.check.interval.seconds", 1),
            leader_imbalance_per_broker_percentage=_int(p, "leader.imbalance.per.broker.percentage", 0),
            transaction_max_timeout_ms=_int(p, "transaction.max.timeout.ms", 1),
            offsets_topic_replication_factor=_int(p, "offsets.topic.replication.factor", 1),
            transaction_state_log_replication_factor=_int(p, "transaction.state.log.replication.factor", 1),
            transaction_state_log_min_isr=_int(p, "transaction.state.log.min.isr", 1),
            metrics_listener=_metrics_listener(p["metrics.listener"]),
            log=log_config,
            properties=p,
            listeners=listeners,
            security=security,
        )
        # Kafka's default: the connection timeout is the session timeout
        cfg.zookeeper_connection_timeout_ms = (
            _int(p, "zookeeper.connection.timeout.ms", 1)
            if p["zookeeper.connection.timeout.ms"].strip()
            else cfg.zookeeper_session_timeout_ms
        )
        if cfg.zookeeper_connect is None and cfg.default_replication_factor != 1:
            raise ConfigError(
                "default.replication.factor must be 1 on a single broker (set zookeeper.connect "
                "for cluster mode)"
            )
        if cfg.zookeeper_connect is not None and cfg.zookeeper_session_timeout_ms < 100:
            raise ConfigError(
                f"zookeeper.session.timeout.ms must be >= 100, got {cfg.zookeeper_session_timeout_ms}"
            )
        if cfg.replica_fetch_wait_max_ms >= cfg.replica_lag_time_max_ms:
            # Kafka's rule: a follower's long poll must end well before it would be dropped from the ISR
            raise ConfigError(
                f"replica.fetch.wait.max.ms ({cfg.replica_fetch_wait_max_ms}) must be less than "
                f"replica.lag.time.max.ms ({cfg.replica_lag_time_max_ms})"
            )
        return cfg

    @property
    def cluster_mode(self) -> bool:
        """True when the broker is one of a cluster coordinated through ZooKeeper."""
        return self.zookeeper_connect is not None

    @classmethod
    def load(
        cls, path: str | Path | None = None, overrides: Mapping[str, object] | None = None
    ) -> BrokerConfig:
        """Read ``path`` (if given), apply ``overrides``, validate."""
        props: dict[str, object] = {}
        if path is not None:
            try:
                props.update(parse_properties(Path(path).read_text()))
            except OSError as e:
                raise ConfigError(f"cannot read config file {path}: {e}") from None
        props.update(overrides or {})
        return cls.from_properties(props)

    def summary(self) -> str:
        """One line per effective setting, for the startup log."""
        return "\n".join(
            f"\t{k} = {'[hidden]' if v and (k in SECRET_KEYS or k.endswith('sasl.jaas.config')) else v}"
            for k, v in sorted(self.properties.items())
        )
