"""PKCS12 key and trust stores (``ssl.keystore.type=PKCS12``, ``ssl.truststore.type=PKCS12``), read with
the ``cryptography`` package and handed to an ``ssl.SSLContext``, which loads only PEM.

The trust store's certificates go in as ``cadata`` (nothing on disk). ``load_cert_chain`` reads only
files, so the key store's key and chain are written, the key encrypted with a random one-time password,
to a private temporary file (mode 0600) that is deleted as soon as it is loaded.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from pathlib import Path
from typing import Any

from ...errors import ConfigError


def _load(setting: str, path: Path, password: str | None) -> Any:
    """The parsed store (``cryptography``'s PKCS12KeyAndCertificates); ConfigError names the setting."""
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError(
            f"{setting} is a PKCS12 store, which needs the 'cryptography' package (pip install "
            f"cryptography), or convert it to PEM: `openssl pkcs12 -in {path} -out store.pem -nodes`"
        ) from None
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{setting} {path}: cannot read ({e.strerror or e})") from None
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except (ValueError, TypeError):
        # cryptography says "Invalid password or PKCS12 data": the two cannot be told apart
        raise ConfigError(
            f"{setting} {path}: cannot open the PKCS12 store (a wrong or missing password, or not PKCS12)"
        ) from None


def load_keystore(ctx: ssl.SSLContext, path: Path, password: str | None) -> None:
    """The private key and certificate chain of a PKCS12 key store into ``ctx``."""
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
    )

    store = _load("ssl.keystore.location", path, password)
    if store.key is None or store.cert is None:
        raise ConfigError(
            f"ssl.keystore.location {path}: the PKCS12 store holds no private key and certificate"
        )
    one_time = secrets.token_urlsafe(24)
    pem = store.key.private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(one_time.encode())
    )
    for cert in [store.cert, *store.additional_certs]:
        pem += cert.certificate.public_bytes(Encoding.PEM)
    fd, tmp = tempfile.mkstemp(prefix="logsource-keystore-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(tmp, password=one_time)
    except ssl.SSLError as e:
        raise ConfigError(f"ssl.keystore.location {path}: cannot use the key and chain ({e})") from None
    finally:
        os.unlink(tmp)


def load_truststore(ctx: ssl.SSLContext, path: Path, password: str | None) -> None:
    """The certificates of a PKCS12 trust store into ``ctx`` as trusted CAs."""
    from cryptography.hazmat.primitives.serialization import Encoding

    store = _load("ssl.truststore.location", path, password)
    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    if not certs:
        raise ConfigError(f"ssl.truststore.location {path}: the PKCS12 store holds no certificates")
    ctx.load_verify_locations(
        cadata="".join(c.certificate.public_bytes(Encoding.PEM).decode() for c in certs)
    )
