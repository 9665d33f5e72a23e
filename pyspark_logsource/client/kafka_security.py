"""Kafka's client security properties, as Spark's Kafka connector (``kafka.`` + the name) and Kafka's
tools (``--command-config client.properties``) spell them, translated to our clients' options.

One translator for the Spark source and sink, ``logsource etl`` and every command's ``--command-config``:

* ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config`` (``...ScramLoginModule`` or
  ``...PlainLoginModule required username="..." password="...";``), librdkafka's ``sasl.username`` /
  ``sasl.password``;
* ``ssl.truststore.location`` / ``.type`` (PEM or PKCS12) / ``.password``, ``ssl.keystore.location`` /
  ``.type`` / ``.password``, ``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` (empty: no
  host name check), librdkafka's ``ssl.ca.location`` / ``ssl.certificate.location`` / ``ssl.key.location``.

A PKCS12 store is read with ``cryptography`` and kept as a PEM file (certificates; a private key only
encrypted) in a private temporary directory of this user, since Python's ``ssl`` loads PEM files. JKS is
Java's own format: the error says how ``keytool`` converts it.

:class:`KafkaSecurity` is what the Spark reader and writer objects carry to the executors: the properties
as plain data (each process translates them itself, so a PKCS12 store is converted where it is read),
with a ``repr`` that never shows a secret. :func:`redact` is the one rule for rendering options.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .security import ClientSecurity, parse_jaas_config

#: the client property names this module reads (Kafka's, and librdkafka's where they differ)
SECURITY_KEYS = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.jaas.config",
    "sasl.username",
    "sasl.password",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
)

#: what Spark puts in place of a redacted value (Utils.REDACTION_REPLACEMENT_TEXT)
REDACTED = "*********(redacted)"

#: Spark's default ``spark.redaction.regex`` plus what Spark's Kafka connector redacts (jaas.config)
_SECRET = re.compile(r"(?i)secret|password|token|access[.]?key|jaas|credential")

_JKS_MAGIC = b"\xfe\xed\xfe\xed"


def is_secret(key: str) -> bool:
    """True for an option whose value must never be shown (passwords, ``sasl.jaas.config``)."""
    return bool(_SECRET.search(str(key)))


def redact(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with every secret's value replaced, for logs, plans, manifests and error messages."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in options.items()}


def security_properties(options: Mapping[str, Any], prefix: str = "kafka.") -> dict[str, str]:
    """The security properties among ``options`` (names case-insensitive, ``prefix`` removed)."""
    out: dict[str, str] = {}
    for k, v in options.items():
        key = str(k).strip().lower()
        if prefix and key.startswith(prefix):
            key = key[len(prefix) :]
        elif prefix:
            continue
        if key in SECURITY_KEYS and v is not None:
            out[key] = str(v)
    return out


def client_options(props: Mapping[str, str]) -> dict[str, Any]:
    """Our clients' keyword arguments (kafka-python's names) from Kafka client properties (names without
    a prefix; other keys are ignored). ConfigError names the property at fault, never a secret's value."""
    p = {str(k).strip().lower(): str(v).strip() for k, v in props.items() if v is not None}
    out: dict[str, Any] = {}
    if p.get("security.protocol"):
        out["security_protocol"] = p["security.protocol"].upper()
    mech = p.get("sasl.mechanism") or p.get("sasl.mechanisms")
    if mech:
        out["sasl_mechanism"] = mech.upper()
    if p.get("sasl.username"):
        out["sasl_plain_username"] = p["sasl.username"]
    if p.get("sasl.password"):
        out["sasl_plain_password"] = p["sasl.password"]
    if p.get("sasl.jaas.config"):
        out["sasl_plain_username"], out["sasl_plain_password"] = parse_jaas_config(p["sasl.jaas.config"])
    if p.get("ssl.ca.location"):
        out["ssl_cafile"] = p["ssl.ca.location"]
    if p.get("ssl.truststore.location"):
        out["ssl_cafile"] = truststore_pem(
            p["ssl.truststore.location"], p.get("ssl.truststore.type"), p.get("ssl.truststore.password")
        )
    if p.get("ssl.certificate.location"):
        out["ssl_certfile"] = p["ssl.certificate.location"]
    if p.get("ssl.key.location"):
        out["ssl_keyfile"] = p["ssl.key.location"]
    if p.get("ssl.key.password"):
        out["ssl_password"] = p["ssl.key.password"]
    if p.get("ssl.keystore.location"):
        out["ssl_certfile"], out["ssl_password"] = keystore_pem(
            p["ssl.keystore.location"],
            p.get("ssl.keystore.type"),
            p.get("ssl.keystore.password"),
            p.get("ssl.key.password"),
        )
        out.pop("ssl_keyfile", None)  # the key is in the keystore's PEM file
    if "ssl.endpoint.identification.algorithm" in p:
        algo = p["ssl.endpoint.identification.algorithm"].lower()
        if algo not in ("", "https"):
            raise ConfigError(f"ssl.endpoint.identification.algorithm must be https or empty, got {algo!r}")
        out["ssl_check_hostname"] = algo == "https"
    return out


@dataclass(frozen=True)
class KafkaSecurity:
    """Kafka security properties (names without ``kafka.``) carried as plain data to Spark's executors;
    ``repr`` and ``str`` show the names and the non-secret values only."""

    properties: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_options(cls, options: Mapping[str, Any], prefix: str = "kafka.") -> KafkaSecurity:
        """The ``prefix``-ed security options of ``options``, validated now (ConfigError)."""
        s = cls(tuple(sorted(security_properties(options, prefix).items())))
        s.client_security()  # a bad value fails where the options are given, not in a task
        return s

    def options(self) -> dict[str, Any]:
        """Our clients' keyword arguments (kafka-python's names)."""
        return dict(_translated(self.properties)[0])

    def client_security(self) -> ClientSecurity:
        """The ClientSecurity of every connection (NetworkClient, read_range, StagedTxns)."""
        return _translated(self.properties)[1]

    def __repr__(self) -> str:
        return f"KafkaSecurity({redact(dict(self.properties))})"

    __str__ = __repr__


@functools.lru_cache(maxsize=16)
def _translated(props: tuple[tuple[str, str], ...]) -> tuple[tuple[tuple[str, Any], ...], ClientSecurity]:
    """Once per process and set of properties: a PKCS12 store is converted once."""
    opts = client_options(dict(props))
    return tuple(opts.items()), ClientSecurity.from_options(opts)


# ---------------------------------------------------------------------------
# Stores


def _store_type(path: str, declared: str | None, what: str) -> str:
    kind = (declared or "").strip().upper()
    if kind == "JKS":  # refused before the file is read: the conversion is the answer, not a missing file
        data = b""
    else:
        data = _read(path, what)
    if not kind:  # Kafka's default is JKS; we look at the file instead
        kind = "PEM" if b"-----BEGIN" in data[:4096] else "JKS" if data[:4] == _JKS_MAGIC else "PKCS12"
    if kind == "JKS" or data[:4] == _JKS_MAGIC:
        raise ConfigError(
            f"ssl.{what}.location {path} is a Java KeyStore (JKS), which Python cannot read; convert it to "
            f"PKCS12 with: keytool -importkeystore -srckeystore {path} -destkeystore {Path(path).stem}.p12 "
            f"-deststoretype PKCS12, then set ssl.{what}.type=PKCS12 (or export PEM files)"
        )
    if kind not in ("PEM", "PKCS12"):
        raise ConfigError(f"ssl.{what}.type must be PEM or PKCS12 (JKS: convert it), got {kind!r}")
    return kind


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read ssl.{what}.location {path}: {e.strerror or e}") from None


def _pkcs12(path: str, password: str | None, what: str) -> Any:
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:  # optional: only PKCS12 stores need it
        raise ConfigError(
            f"ssl.{what}.type=PKCS12 needs the 'cryptography' package; or export PEM files with openssl"
        ) from None
    try:
        return pkcs12.load_pkcs12(_read(path, what), password.encode() if password else None)
    except ValueError:
        raise ConfigError(
            f"cannot open the PKCS12 ssl.{what}.location {path}: wrong or missing ssl.{what}.password, "
            "or not a PKCS12 file"
        ) from None


def _private_dir() -> Path:
    d = Path(tempfile.gettempdir()) / f"logsource-tls-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    st = d.lstat()
    if st.st_uid != os.getuid() or not d.is_dir() or d.is_symlink():
        raise ConfigError(f"{d} (for the PEM copies of PKCS12 stores) is not this user's own directory")
    if st.st_mode & 0o077:
        d.chmod(0o700)
    return d


def _write_private(name: str, data: bytes) -> str:
    path = _private_dir() / name
    if not path.exists() or path.read_bytes() != data:
        tmp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return str(path)


def truststore_pem(path: str, kind: str | None, password: str | None) -> str:
    """A PEM file of the trust store's CA certificates (the store itself when it is PEM)."""
    if _store_type(path, kind, "truststore") == "PEM":
        return path
    from cryptography.hazmat.primitives.serialization import Encoding

    p12 = _pkcs12(path, password, "truststore")
    certs = [c.certificate for c in p12.additional_certs] + ([p12.cert.certificate] if p12.cert else [])
    if not certs:
        raise ConfigError(f"the PKCS12 ssl.truststore.location {path} holds no certificate")
    pem = b"".join(c.public_bytes(Encoding.PEM) for c in certs)
    return _write_private(f"trust-{hashlib.sha256(pem).hexdigest()[:24]}.pem", pem)


def keystore_pem(
    path: str, kind: str | None, store_password: str | None, key_password: str | None
) -> tuple[str, str | None]:
    """(PEM file with the private key and certificate chain, the password of its key)."""
    if _store_type(path, kind, "keystore") == "PEM":
        return path, key_password  # KIP-651: key and chain in one file, the key under ssl.key.password
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
    )

    p12 = _pkcs12(path, store_password, "keystore")
    if p12.key is None or p12.cert is None:
        raise ConfigError(f"the PKCS12 ssl.keystore.location {path} holds no private key and certificate")
    # the key never lands on disk in the clear: encrypted with the key's (or the store's) password,
    # else with one made for this process
    password = key_password or store_password or secrets.token_urlsafe(24)
    key = p12.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(password.encode()))
    chain = [p12.cert.certificate] + [c.certificate for c in p12.additional_certs]
    pem = key + b"".join(c.public_bytes(Encoding.PEM) for c in chain)
    name = f"key-{hashlib.sha256(_read(path, 'keystore')).hexdigest()[:24]}-{os.getpid()}.pem"
    return _write_private(name, pem), password
