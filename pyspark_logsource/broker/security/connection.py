"""The security of one client connection, for the server: the TLS handshake (audited when it fails),
the principal a listener gives a new connection, and the requests of a connection that has not
authenticated yet (Kafka's rule: ApiVersions, SaslHandshake and SaslAuthenticate only).

Every failed authentication — a TLS handshake, a SASL exchange — gets one line on the
``pyspark_logsource.broker.audit`` logger: principal, client address, mechanism, listener and why;
never a password, a key or a token.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any

from ...protocol import ApiKey, RequestReceived, ServerConnection
from ..session import Session
from .credential_store import CredentialStore
from .listeners import Listener
from .sasl import SaslAuthenticator
from .tls import peer_principal

log = logging.getLogger("pyspark_logsource.broker")
audit = logging.getLogger("pyspark_logsource.broker.audit")

#: Python 3.11+ upgrades an accepted connection to TLS itself, so a failed handshake (an unknown CA, an
#: expired client certificate, plaintext bytes) gets an audit line; 3.10 hands TLS to start_server
OWN_TLS_HANDSHAKE = hasattr(asyncio.StreamWriter, "start_tls")
TLS_HANDSHAKE_S = 10.0
#: what a connection on a SASL listener may send before it authenticated
BEFORE_AUTH = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class UntilTls(asyncio.StreamReaderProtocol):
    """A TLS listener's connection reads nothing until :func:`start_tls` hands it to TLS: the client's
    hello must reach the TLS layer, not the stream's buffer."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.pause_reading()  # type: ignore[attr-defined]
        super().connection_made(transport)


async def start_tls(writer: asyncio.StreamWriter, context: ssl.SSLContext, listener: Listener) -> bool:
    """The TLS handshake of a new connection on a TLS listener; False (audited, aborted) if it failed."""
    try:
        await asyncio.wait_for(writer.start_tls(context), TLS_HANDSHAKE_S)
        return True
    except (ssl.SSLError, OSError, asyncio.TimeoutError) as e:
        peer = writer.get_extra_info("peername")
        audit.warning(
            "authentication failed: principal=User:ANONYMOUS client=%s mechanism=TLS listener=%s: "
            "TLS handshake failed (%s)",
            peer[0] if isinstance(peer, tuple) else peer,
            listener.name,
            getattr(e, "reason", None) or type(e).__name__,
        )
        writer.transport.abort()
        return False


def open_session(
    session: Session,
    listener: Listener,
    writer: asyncio.StreamWriter,
    credentials: CredentialStore,
    mechanisms: tuple[str, ...],
) -> SaslAuthenticator | None:
    """Put the listener and its principal on ``session`` (``User:<subject>`` of a verified client
    certificate); the connection's SASL state machine on a SASL listener, else None."""
    session.listener_name, session.security_protocol = listener.name, listener.protocol
    if listener.tls:
        principal = peer_principal(writer.get_extra_info("ssl_object"))
        if principal is not None:
            session.principal = principal
            log.info(
                "client %s on listener %s presented a certificate: principal %s",
                session.peer,
                listener.name,
                principal,
            )
    return SaslAuthenticator(mechanisms, credentials) if listener.sasl else None


async def authenticate(
    auth: SaslAuthenticator,
    ev: RequestReceived,
    session: Session,
    writer: asyncio.StreamWriter,
    out: bytearray,
    delay_s: float,
    call: Callable[[RequestReceived], Any],
) -> tuple[bytearray, bool]:
    """One request of a connection that has not authenticated yet (``call`` answers ApiVersions);
    returns (the bytes still to write, close the connection?). A failure waits ``delay_s`` on this
    connection only (Kafka's ``connection.failed.authentication.delay.ms``), then answers and closes."""
    key = ev.header.api_key
    if key not in BEFORE_AUTH:
        log.warning(
            "closing connection from %s on listener %s: api key %d before SASL authentication",
            session.peer,
            session.listener_name,
            key,
        )
        return out, True
    if key == ApiKey.API_VERSIONS:
        out += b"".join(ServerConnection.response_parts(ev.header, call(ev)))
        return out, False
    if key == ApiKey.SASL_HANDSHAKE:
        outcome = auth.handshake(ev.request.mechanism)
    elif auth.mechanism == "PLAIN":
        # PLAIN derives the salted password (PBKDF2, 1-50 ms): off the event loop, others go on
        outcome = await asyncio.get_running_loop().run_in_executor(
            None, auth.authenticate, ev.request.auth_bytes
        )
    else:
        outcome = auth.authenticate(ev.request.auth_bytes)
    if outcome.principal is not None:
        session.principal, session.sasl_mechanism = outcome.principal, auth.mechanism
        log.info(
            "client %s authenticated as %s with %s on listener %s",
            session.peer,
            session.principal,
            auth.mechanism,
            session.listener_name,
        )
    if outcome.failed:
        audit.warning(
            "authentication failed: principal=User:%s client=%s mechanism=%s listener=%s: %s",
            outcome.user if outcome.user is not None else "ANONYMOUS",
            session.client_address,
            auth.mechanism or "-",
            session.listener_name,
            outcome.reason,
        )
        if out:
            writer.write(out)
            out = bytearray()
        await asyncio.sleep(delay_s)
    out += b"".join(ServerConnection.response_parts(ev.header, outcome.response))
    if outcome.close:
        writer.write(out)
        await writer.drain()
        return bytearray(), True
    return out, False
