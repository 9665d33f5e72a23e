"""Dynamic broker configs (AlterConfigs on a BROKER resource): their values, precedence and sources.

Kafka's precedence, highest first: the broker's own dynamic value (``/config/brokers/<id>``,
DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic default (``/config/brokers/<default>``,
DYNAMIC_DEFAULT_BROKER_CONFIG), ``server.properties`` (STATIC_BROKER_CONFIG), the built-in default
(DEFAULT_CONFIG). Only the broker-level log settings are dynamic here (Kafka's DynamicLogConfig:
``log.retention.ms``, ``log.segment.bytes``, ``message.max.bytes``, ``min.insync.replicas`` ...); they become
the default of every log without a topic override of its own, at once (:meth:`.log.LogManager.set_default_config`).
Kafka's dynamic SASL login settings (:data:`SASL_DYNAMIC`, ``sasl.kerberos.*`` ...) are accepted and
stored, not acted on (no GSSAPI here). Every other broker setting is read-only, as Kafka refuses it ("Cannot update these configs dynamically").

:class:`BrokerDynamicConfig` owns the two dynamic maps. Where they come from: a cluster's ZooKeeper
(:mod:`.cluster.config_changes` hands them in), or on a single broker :data:`LOCAL_FILE` in the first log
dir (so they survive a restart).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidConfig, StorageError
from .config import DEFAULTS
from .log.config import _ALIASES, _ATTR, _BOOLS, _HOURS_MINUTES, LogConfig

if TYPE_CHECKING:
    from .log import LogManager

log = logging.getLogger(__name__)

SOURCE_TOPIC, SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT, SOURCE_STATIC, SOURCE_DEFAULT = 1, 2, 3, 4, 5
#: a single broker's dynamic configs: ``<id>.<key>=v`` and ``default.<key>=v`` lines
LOCAL_FILE = "dynamic-broker-configs.properties"

#: broker-level spelling of each per-log setting (attribute -> key); the topic spelling where both agree
BROKER_KEY_OF: dict[str, str] = {}
for _key, _attr in _ALIASES.items():
    if _key not in _ATTR:
        BROKER_KEY_OF.setdefault(_attr, _key)
for _key in ("min.insync.replicas", "compression.type"):
    BROKER_KEY_OF.setdefault(_ATTR[_key], _key)
#: Kafka's dynamic SASL listener settings (DynamicListenerConfig) and their defaults, with the type each
#: value must parse as. Accepted, stored and described like the others, but not acted on: this broker
#: offers no GSSAPI (Kerberos) nor OAUTHBEARER login to refresh (README, "Dynamic broker configs").
SASL_DYNAMIC: dict[str, tuple[str | None, type]] = {
    "sasl.kerberos.service.name": (None, str),
    "sasl.kerberos.kinit.cmd": ("/usr/bin/kinit", str),
    "sasl.kerberos.ticket.renew.window.factor": ("0.8", float),
    "sasl.kerberos.ticket.renew.jitter": ("0.05", float),
    "sasl.kerberos.min.time.before.relogin": ("60000", int),
    "sasl.kerberos.principal.to.local.rules": ("DEFAULT", str),
    "sasl.login.refresh.window.factor": ("0.8", float),
    "sasl.login.refresh.window.jitter": ("0.05", float),
    "sasl.login.refresh.min.period.seconds": ("60", int),
    "sasl.login.refresh.buffer.seconds": ("300", int),
}
#: the broker settings AlterConfigs may change
DYNAMIC_KEYS: frozenset[str] = (
    frozenset(BROKER_KEY_OF.values()) | frozenset(_HOURS_MINUTES) | frozenset(SASL_DYNAMIC)
)


def check_broker_keys(config: Mapping[str, str]) -> None:
    """InvalidConfig naming the keys that are unknown or read-only, and for a value out of range."""
    unknown = sorted(k for k in config if k not in DYNAMIC_KEYS and k not in DEFAULTS and k not in _ALIASES)
    if unknown:
        raise InvalidConfig(f"unknown broker config {', '.join(unknown)}")
    fixed = sorted(k for k in config if k not in DYNAMIC_KEYS)
    if fixed:
        raise InvalidConfig(f"Cannot update these configs dynamically: {', '.join(fixed)}")
    for key in sorted(k for k in config if k in SASL_DYNAMIC):
        kind = SASL_DYNAMIC[key][1]
        try:
            kind(config[key])
        except (TypeError, ValueError):
            raise InvalidConfig(f"Invalid value {config[key]} for configuration {key}") from None
    LogConfig.from_properties(config)  # InvalidConfig naming the key for a bad value


def _show(attr: str, value: object) -> str:
    return ("true" if value else "false") if attr in _BOOLS else str(value)


class BrokerDynamicConfig:
    """The dynamic configs a broker applies: its own (``mine``) and the cluster default (``default``)."""

    def __init__(self, broker_id: int, static: Mapping[str, str], logs: LogManager | None) -> None:
        self.broker_id = broker_id
        self.static = dict(static)
        self.logs = logs
        self.default: dict[str, str] = {}
        self.mine: dict[str, str] = {}

    def log_config(self, default: Mapping[str, str], mine: Mapping[str, str]) -> LogConfig:
        """The logs' defaults with these dynamic maps (InvalidConfig naming the key)."""
        return LogConfig.from_properties({**self.static, **default, **mine})

    def apply(self, default: Mapping[str, str], mine: Mapping[str, str]) -> None:
        """New dynamic maps: every log without a topic override takes them at once."""
        config = self.log_config(default, mine)
        self.default, self.mine = dict(default), dict(mine)
        if self.logs is not None:
            self.logs.set_default_config(config)
        log.info("broker %d: dynamic configs %s, cluster default %s", self.broker_id, self.mine, self.default)

    # ------------------------------------------------------------ sources (DescribeConfigs)

    def synonyms(self, key: str) -> list[tuple[str, str, int]]:
        """(name, value, source) of a broker setting, highest precedence first."""
        out = []
        if key in self.mine:
            out.append((key, self.mine[key], SOURCE_DYNAMIC_BROKER))
        if key in self.default:
            out.append((key, self.default[key], SOURCE_DYNAMIC_DEFAULT))
        if key in self.static and (key not in DEFAULTS or self.static[key] != DEFAULTS[key]):
            out.append((key, self.static[key], SOURCE_STATIC))
        return out

    def describe(self) -> list[tuple[str, str, int, bool, list[tuple[str, str, int]]]]:
        """(key, value, source, read_only, synonyms) of every broker setting."""
        config = self.log_config(self.default, self.mine)
        built_in = LogConfig()
        out = []
        given = {k for k in self.static if k in _ALIASES}  # broker-wide log settings (log.cleaner.enable ...)
        for key in sorted(set(DEFAULTS) | set(BROKER_KEY_OF.values()) | given | set(SASL_DYNAMIC)):
            syn = self.synonyms(key)
            if key in SASL_DYNAMIC:
                built = SASL_DYNAMIC[key][0]
                value = syn[0][1] if syn else built
                default = (key, built, SOURCE_DEFAULT)
            elif key in DEFAULTS and key not in DYNAMIC_KEYS:
                value = self.static.get(key, DEFAULTS[key])
                default = (key, DEFAULTS[key], SOURCE_DEFAULT)
            else:
                attr = _ALIASES[key]
                value = _show(attr, getattr(config, attr))
                default = (key, _show(attr, getattr(built_in, attr)), SOURCE_DEFAULT)
            source = syn[0][2] if syn else SOURCE_DEFAULT
            out.append((key, value, source, key not in DYNAMIC_KEYS, [*syn, default]))
        return out

    def topic_synonyms(self, name: str) -> list[tuple[str, str, int]]:
        """The broker-level synonyms of a topic setting (``retention.ms`` -> ``log.retention.ms``)."""
        key = BROKER_KEY_OF.get(_ATTR.get(name, ""), None)
        return self.synonyms(key) if key is not None else []

    # ------------------------------------------------------------ a single broker's file

    def load_local(self, directory: Path) -> None:
        """Read and apply the dynamic configs a single broker saved (a bad file is logged, not fatal)."""
        path = Path(directory) / LOCAL_FILE
        if not path.exists():
            return
        default, mine = {}, {}
        for line in path.read_text().splitlines():
            if "=" not in line or line.startswith("#"):
                continue
            k, v = line.split("=", 1)
            scope, _, key = k.strip().partition(".")
            if scope == "default":
                default[key] = v.strip()
            elif scope == str(self.broker_id):
                mine[key] = v.strip()
        try:
            self.apply(default, mine)
        except InvalidConfig as e:
            log.warning("%s: ignoring invalid dynamic broker configs (%s)", path, e)

    def save_local(self, directory: Path, default: Mapping[str, str], mine: Mapping[str, str]) -> None:
        """Write the dynamic maps (aside, then renamed over the old file)."""
        path = Path(directory) / LOCAL_FILE
        lines = [f"default.{k}={v}\n" for k, v in sorted(default.items())]
        lines += [f"{self.broker_id}.{k}={v}\n" for k, v in sorted(mine.items())]
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text("".join(lines))
            tmp.replace(path)
        except OSError as e:
            raise StorageError(f"cannot write {path}: {e}") from e
