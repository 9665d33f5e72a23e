"""Kafka's listener settings: ``listeners``, ``advertised.listeners``, ``listener.security.protocol.map``
and ``inter.broker.listener.name``.

A listener is a name, a host and a port; its security protocol is the map's entry for the name (a name
that is itself a protocol, such as ``SASL_SSL``, maps to itself, as in Kafka). With no configuration the
broker has one PLAINTEXT listener on 127.0.0.1:9092.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import ConfigError

#: Kafka's security protocols
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

#: Kafka's default ``listener.security.protocol.map``: each protocol's name maps to itself
DEFAULT_PROTOCOL_MAP = {p: p for p in PROTOCOLS}

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True, slots=True)
class Listener:
    """One listener: its name, security protocol and address (port 0: pick a free one)."""

    name: str
    protocol: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        """True if connections on this listener speak TLS."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        """True if connections on this listener must authenticate with SASL."""
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def parse_protocol_map(value: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}; '' -> Kafka's default map."""
    if not value.strip():
        return dict(DEFAULT_PROTOCOL_MAP)
    out: dict[str, str] = {}
    for item in value.split(","):
        name, sep, proto = item.strip().partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not _NAME.match(name):
            raise ConfigError(f"listener.security.protocol.map entry {item.strip()!r} is not NAME:PROTOCOL")
        if proto not in PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map maps {name} to {proto!r}; the protocols are "
                + ", ".join(PROTOCOLS)
            )
        out[name] = proto
    return out


def parse_endpoint(item: str) -> tuple[str, str, int]:
    """``NAME://host:port`` (or ``host:port``, which is PLAINTEXT) -> (NAME, host, port)."""
    text = item.strip()
    name = "PLAINTEXT"
    if "://" in text:
        name, text = text.split("://", 1)
        name = name.strip().upper()
        if not _NAME.match(name):
            raise ConfigError(f"listener {item!r} has a bad name {name!r}")
    host, sep, port = text.rpartition(":")
    if not sep:
        raise ConfigError(f"listener {item!r} has no port")
    host = host.strip("[]") or "0.0.0.0"
    try:
        p = int(port)
    except ValueError:
        raise ConfigError(f"listener {item!r} has a bad port") from None
    if not 0 <= p <= 65535:
        raise ConfigError(f"listener port {p} is out of range")
    return name, host, p


def parse_listeners(value: str, protocol_map: dict[str, str], key: str = "listeners") -> list[Listener]:
    """The listeners of ``value`` (comma-separated endpoints) with their protocols from ``protocol_map``."""
    out: list[Listener] = []
    seen: set[str] = set()
    for item in value.split(","):
        if not item.strip():
            continue
        name, host, port = parse_endpoint(item)
        if name in seen:
            raise ConfigError(f"{key} names listener {name} twice")
        seen.add(name)
        proto = protocol_map.get(name)
        if proto is None:
            raise ConfigError(
                f"{key}: listener {name} has no entry in listener.security.protocol.map "
                f"(add {name}:<PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL>)"
            )
        out.append(Listener(name, proto, host, port))
    if not out:
        raise ConfigError(f"{key} is empty")
    return out


@dataclass(frozen=True)
class ListenerSettings:
    """The broker's listeners, what it advertises for each, and the one brokers use among themselves."""

    listeners: tuple[Listener, ...]
    #: listener name -> (host, port) advertised to clients; None: the bound address
    advertised: dict[str, tuple[str, int]]
    inter_broker: str

    def by_name(self, name: str) -> Listener:
        for lst in self.listeners:
            if lst.name == name:
                return lst
        raise KeyError(name)


def listener_settings(props: dict[str, str]) -> ListenerSettings:
    """Validate the listener settings of ``props`` (Kafka's rules: every advertised listener and the
    inter-broker listener name a configured listener)."""
    pmap = parse_protocol_map(props.get("listener.security.protocol.map", ""))
    listeners = parse_listeners(props.get("listeners", ""), pmap)
    names = {lst.name for lst in listeners}
    advertised: dict[str, tuple[str, int]] = {}
    adv = props.get("advertised.listeners", "").strip()
    if adv:
        for lst in parse_listeners(adv, pmap, "advertised.listeners"):
            if lst.name not in names:
                raise ConfigError(f"advertised.listeners names {lst.name}, which is not in listeners")
            advertised[lst.name] = (lst.host, lst.port)
    inter = props.get("inter.broker.listener.name", "").strip().upper()
    if inter:
        if inter not in names:
            raise ConfigError(
                f"inter.broker.listener.name {inter} is not one of the listeners {sorted(names)}"
            )
    else:  # Kafka's default is the PLAINTEXT listener; ours: that one if configured, else the first
        inter = "PLAINTEXT" if "PLAINTEXT" in names else listeners[0].name
    return ListenerSettings(tuple(listeners), advertised, inter)
