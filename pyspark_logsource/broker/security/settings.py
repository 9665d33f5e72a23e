"""The broker's TLS and SASL settings, in Kafka's names (PEM stores as KIP-651 spells them).

Validated when the config loads: a listener whose protocol needs TLS needs ``ssl.keystore.location``;
unknown mechanisms, protocols and client-auth modes are ConfigErrors that name the setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ConfigError
from .listeners import ListenerSettings

#: the SASL mechanisms this broker implements
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

SECURITY_DEFAULTS: dict[str, str] = {
    "listener.security.protocol.map": "",
    "inter.broker.listener.name": "",
    "ssl.keystore.type": "PEM",
    "ssl.keystore.location": "",
    "ssl.keystore.password": "",
    "ssl.key.password": "",
    "ssl.truststore.type": "PEM",
    "ssl.truststore.location": "",
    "ssl.truststore.password": "",
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.cipher.suites": "",
    # Kafka's default is GSSAPI, which this broker does not implement: ours enables what it has
    "sasl.enabled.mechanisms": ",".join(MECHANISMS),
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    "connection.failed.authentication.delay.ms": "100",
}

_CLIENT_AUTH = ("none", "requested", "required")
_STORE_TYPES = ("PEM", "PKCS12")
_TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")


def _list(value: str) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()]


@dataclass(frozen=True)
class SecuritySettings:
    """TLS (a PEM or PKCS12 key store and trust store) and SASL settings of the broker."""

    keystore_location: Path | None = None
    #: the private key's password; never logged (BrokerConfig.summary masks it)
    key_password: str | None = field(default=None, repr=False)
    truststore_location: Path | None = None
    keystore_type: str = "PEM"
    truststore_type: str = "PEM"
    #: a PKCS12 store's passwords (Kafka's ssl.keystore.password, ssl.truststore.password); never logged
    keystore_password: str | None = field(default=None, repr=False)
    truststore_password: str | None = field(default=None, repr=False)
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = _TLS_VERSIONS
    cipher_suites: tuple[str, ...] = ()
    sasl_mechanisms: tuple[str, ...] = MECHANISMS
    inter_broker_mechanism: str = "SCRAM-SHA-512"
    failed_authentication_delay_ms: int = 100

    @classmethod
    def from_properties(cls, p: Mapping[str, str], listeners: ListenerSettings) -> SecuritySettings:
        """Validate the ``ssl.*`` and ``sasl.*`` settings against what the listeners need."""
        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            kind = p[key].strip().upper()
            if kind == "JKS":
                raise ConfigError(
                    f"{key}=JKS is not supported: use PEM or PKCS12 (convert the JKS store with `keytool "
                    "-importkeystore -srckeystore store.jks -destkeystore store.p12 -deststoretype PKCS12`)"
                )
            if kind not in _STORE_TYPES:
                raise ConfigError(f"{key} must be PEM or PKCS12, got {p[key]!r}")
        client_auth = p["ssl.client.auth"].strip().lower() or "none"
        if client_auth not in _CLIENT_AUTH:
            raise ConfigError(
                f"ssl.client.auth must be one of {', '.join(_CLIENT_AUTH)}, got {client_auth!r}"
            )
        protocols = tuple(_list(p["ssl.enabled.protocols"]))
        bad = [x for x in protocols if x not in _TLS_VERSIONS]
        if bad or not protocols:
            raise ConfigError(
                f"ssl.enabled.protocols must name TLSv1.2 and/or TLSv1.3, got {p['ssl.enabled.protocols']!r}"
            )
        mechanisms = tuple(m.upper() for m in _list(p["sasl.enabled.mechanisms"]))
        unknown = [m for m in mechanisms if m not in MECHANISMS]
        if unknown:
            raise ConfigError(
                f"sasl.enabled.mechanisms names {', '.join(unknown)}; this broker implements {', '.join(MECHANISMS)}"
            )
        delay = p["connection.failed.authentication.delay.ms"].strip()
        if not delay.isdigit():
            raise ConfigError(
                f"connection.failed.authentication.delay.ms must be an integer >= 0, got {delay!r}"
            )
        keystore = p["ssl.keystore.location"].strip()
        truststore = p["ssl.truststore.location"].strip()
        s = cls(
            keystore_location=Path(keystore).expanduser() if keystore else None,
            key_password=p["ssl.key.password"] or None,
            truststore_location=Path(truststore).expanduser() if truststore else None,
            keystore_type=p["ssl.keystore.type"].strip().upper(),
            truststore_type=p["ssl.truststore.type"].strip().upper(),
            keystore_password=p["ssl.keystore.password"] or None,
            truststore_password=p["ssl.truststore.password"] or None,
            client_auth=client_auth,
            enabled_protocols=protocols,
            cipher_suites=tuple(_list(p["ssl.cipher.suites"])),
            sasl_mechanisms=mechanisms,
            inter_broker_mechanism=p["sasl.mechanism.inter.broker.protocol"].strip().upper(),
            failed_authentication_delay_ms=int(delay),
        )
        for lst in listeners.listeners:
            if lst.tls and s.keystore_location is None:
                raise ConfigError(
                    f"listener {lst.name} uses {lst.protocol}: set ssl.keystore.location "
                    "(a PEM file with the private key and the certificate chain)"
                )
            if lst.sasl and not mechanisms:
                raise ConfigError(
                    f"listener {lst.name} uses {lst.protocol}: sasl.enabled.mechanisms is empty"
                )
        if (
            client_auth != "none"
            and s.truststore_location is None
            and any(x.tls for x in listeners.listeners)
        ):
            raise ConfigError(
                f"ssl.client.auth={client_auth} needs ssl.truststore.location (the CAs to trust)"
            )
        return s


#: settings whose values never go to a log line
SECRET_KEYS = frozenset({"ssl.key.password", "ssl.keystore.password", "ssl.truststore.password"})
