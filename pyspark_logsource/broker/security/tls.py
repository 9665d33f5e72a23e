"""TLS for the broker's SSL and SASL_SSL listeners: the server's ``ssl.SSLContext`` from PEM files (or
PKCS12 stores, see pkcs12.py), and the principal of a client certificate.

The key store is one PEM file with the private key and the certificate chain (KIP-651's
``ssl.keystore.location`` with ``ssl.keystore.type=PEM``); the trust store is a PEM file of CA
certificates. The principal of a client certificate is ``User:`` + its subject as an RFC 2253 string
(Kafka's default ``ssl.principal.mapping.rules``: ``CN=alice,OU=eng,O=example``, most specific first).
"""

from __future__ import annotations

import ssl
from typing import Any

from ...errors import ConfigError
from ..session import Principal
from . import pkcs12
from .settings import SecuritySettings

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def server_context(s: SecuritySettings, client_auth: str | None = None) -> ssl.SSLContext:
    """The TLS context of the broker's TLS listeners; ConfigError names the file that does not load.
    ``client_auth`` overrides ``ssl.client.auth`` (SASL_SSL listeners: none, as Kafka since KIP-684)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[v] for v in s.enabled_protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    assert s.keystore_location is not None  # SecuritySettings checked it for TLS listeners
    if s.keystore_type == "PKCS12":
        pkcs12.load_keystore(ctx, s.keystore_location, s.keystore_password or s.key_password)
    else:
        _load_pem_keystore(ctx, s)
    if s.truststore_location is not None and s.truststore_type == "PKCS12":
        pkcs12.load_truststore(ctx, s.truststore_location, s.truststore_password)
    elif s.truststore_location is not None:
        try:
            ctx.load_verify_locations(cafile=str(s.truststore_location))
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"ssl.truststore.location {s.truststore_location}: cannot load ({e})") from None
    ctx.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[client_auth or s.client_auth]
    if s.cipher_suites:
        try:
            ctx.set_ciphers(":".join(s.cipher_suites))
        except ssl.SSLError:
            raise ConfigError(
                f"ssl.cipher.suites names no cipher this TLS library has: {s.cipher_suites}"
            ) from None
    return ctx


def _load_pem_keystore(ctx: ssl.SSLContext, s: SecuritySettings) -> None:
    assert s.keystore_location is not None
    try:
        ctx.load_cert_chain(s.keystore_location, password=s.key_password)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(
            f"ssl.keystore.location {s.keystore_location}: cannot load the key and certificate chain "
            f"({getattr(e, 'strerror', None) or e}); is ssl.key.password right?"
        ) from None


# short names of the subject attributes in RFC 2253 (what Java's X500Principal.getName() writes)
_RDN_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def subject_name(cert: dict[str, Any]) -> str:
    """The subject of a certificate (``ssl.getpeercert()``'s dict) as RFC 2253 writes it: most specific
    RDN first, ``CN=alice,OU=eng,O=example,C=US``."""
    rdns = []
    for rdn in reversed(cert.get("subject", ())):
        rdns.append("+".join(f"{_RDN_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def peer_principal(ssl_object: Any) -> Principal | None:
    """``User:<subject>`` of the client's verified certificate, or None when it sent none."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    return Principal("User", subject_name(cert))
