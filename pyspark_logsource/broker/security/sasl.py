"""The broker's side of SASL, sans-IO: SaslHandshake and SaslAuthenticate requests in, outcomes out.

One :class:`SaslAuthenticator` per connection on a SASL listener. Its states follow Kafka's
``SaslServerAuthenticator``: a handshake names an enabled mechanism, then SaslAuthenticate tokens run the
mechanism (PLAIN: one token; SCRAM-SHA-256/512 (RFC 5802/7677, server side by ``scramp``): client-first
-> server-first, client-final -> server-final) until the client is authenticated or has failed. Requests
out of order are ILLEGAL_SASL_STATE (34), an unknown mechanism UNSUPPORTED_SASL_MECHANISM (33), a wrong
password, an unknown user or a malformed token SASL_AUTHENTICATION_FAILED (58) with one message for all
of them (telling which would let a guesser enumerate users). After a failure the connection is closed
(by the server, after ``connection.failed.authentication.delay.ms``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from ...errors import IllegalSaslState, SaslAuthenticationFailed, UnsupportedSaslMechanism
from ...protocol.sasl_messages import SaslAuthenticateResponse, SaslHandshakeResponse
from ..session import Principal
from .credential_store import CredentialStore
from .scram_credentials import HASHES, verify_password

#: Kafka's answer to a wrong user or password (the same for both)
FAILED_MESSAGE = "Authentication failed: Invalid username or password"


class State(Enum):
    HANDSHAKE = "awaiting SaslHandshake"
    AUTHENTICATE = "awaiting SaslAuthenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


@dataclass(frozen=True)
class Outcome:
    """What the server does with one SASL request: send ``response``; then, if ``close``, close the
    connection (after the failed-authentication delay when ``failed``). ``principal`` once authenticated;
    ``user`` names who tried (for the audit line; never a secret)."""

    response: Any
    close: bool = False
    failed: bool = False
    principal: Principal | None = None
    user: str | None = None
    reason: str = ""


def _saslname(name: str) -> str:
    """RFC 5802's saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``."""
    return name.replace("=2C", ",").replace("=3D", "=")


class SaslAuthenticator:
    """The SASL state of one connection."""

    def __init__(self, mechanisms: tuple[str, ...], store: CredentialStore) -> None:
        self.mechanisms = mechanisms
        self.store = store
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self._scram: Any = None
        self._user: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is State.AUTHENTICATED

    def handshake(self, mechanism: str) -> Outcome:
        """A SaslHandshake naming ``mechanism``."""
        if self.state is not State.HANDSHAKE:
            return self._illegal(
                SaslHandshakeResponse(IllegalSaslState.code, list(self.mechanisms)), "handshake"
            )
        if mechanism not in self.mechanisms:
            self.state = State.FAILED
            return Outcome(
                SaslHandshakeResponse(UnsupportedSaslMechanism.code, list(self.mechanisms)),
                close=True,
                failed=True,
                reason=f"unsupported SASL mechanism {mechanism[:64]!r} (enabled: {', '.join(self.mechanisms)})",
            )
        self.mechanism = mechanism
        self.state = State.AUTHENTICATE
        return Outcome(SaslHandshakeResponse(0, list(self.mechanisms)))

    def _illegal(self, response: Any, what: str) -> Outcome:
        reason = f"unexpected {what} while {self.state.value}"
        if isinstance(response, SaslAuthenticateResponse):
            response.error_message = f"Illegal SASL state: {reason}"
        self.state = State.FAILED
        return Outcome(response, close=True, failed=True, reason=reason)

    def authenticate(self, token: bytes) -> Outcome:
        """A SaslAuthenticate carrying ``token``."""
        if self.state is not State.AUTHENTICATE:
            return self._illegal(SaslAuthenticateResponse(IllegalSaslState.code), "SaslAuthenticate")
        try:
            if self.mechanism == "PLAIN":
                return self._plain(token)
            return self._scram_step(token)
        except _Failed as e:
            self.state = State.FAILED
            return Outcome(
                SaslAuthenticateResponse(SaslAuthenticationFailed.code, FAILED_MESSAGE),
                close=True,
                failed=True,
                user=self._user,
                reason=str(e),
            )

    def _done(self, reply: bytes) -> Outcome:
        self.state = State.AUTHENTICATED
        principal = Principal("User", self._user or "")
        return Outcome(SaslAuthenticateResponse(0, None, reply, 0), principal=principal, user=self._user)

    def _plain(self, token: bytes) -> Outcome:
        parts = bytes(token).split(b"\x00")
        if len(parts) != 3:
            raise _Failed("malformed PLAIN message (expected authzid NUL user NUL password)")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise _Failed("PLAIN message is not UTF-8") from None
        self._user = user[:256]
        if not user or not password:
            raise _Failed("empty user name or password")
        if authzid and authzid != user:
            raise _Failed("authorization id differs from the user name")
        found = self.store.any(user)
        if found is None:
            raise _Failed("unknown user")
        mech, cred = found
        if not verify_password(mech, cred, password):
            raise _Failed("wrong password")
        return self._done(b"")

    def _scram_step(self, token: bytes) -> Outcome:
        from scramp import ScramException, ScramMechanism

        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise _Failed("SCRAM message is not UTF-8") from None
        try:
            if self._scram is None:
                self._scram = ScramMechanism(self.mechanism).make_server(self._lookup)
                self._scram.set_client_first(text)
                return Outcome(SaslAuthenticateResponse(0, None, self._scram.get_server_first().encode()))
            self._accept_librdkafka_nonce(text)
            self._scram.set_client_final(text)
            reply = self._scram.get_server_final().encode()
        except _Failed:
            raise
        except ScramException as e:
            raise _Failed(f"SCRAM exchange failed: {str(e).splitlines()[0][:200]}") from None
        except Exception as e:  # scramp's parser on garbage: whatever it raises, the client failed
            raise _Failed(f"malformed SCRAM message ({type(e).__name__})") from None
        return self._done(reply)

    def _accept_librdkafka_nonce(self, client_final: str) -> None:
        """librdkafka before 2.6.1 (confluentinc/librdkafka#4895; kcat 1.7 ships 2.0.2) puts its own
        nonce in front of the server's nonce once more in client-final. Kafka 3.8.1-3.9 accepted it (the
        nonce still ends with the fresh server nonce, so a replay still fails) and the client's proof is
        over the message as sent; accept exactly that shape, as scramp compares against its ``nonce``."""
        from scramp.core import Nonce

        server_nonce = str(self._scram.nonce)
        bare = dict(a.split("=", 1) for a in self._scram.client_first_bare.split(",") if "=" in a)
        sent = dict(a.split("=", 1) for a in client_final.split(",") if "=" in a).get("r")
        client_nonce = bare.get("r")
        if client_nonce and sent == client_nonce + server_nonce:
            self._scram.nonce = Nonce(sent)

    def _lookup(self, username: str) -> tuple[bytes, bytes, bytes, int] | None:
        """scramp's auth_fn: the user's credential for this mechanism (None: unknown user)."""
        user = _saslname(username)
        self._user = user[:256]
        assert self.mechanism in HASHES
        cred = self.store.get(user, self.mechanism)
        if cred is None:
            return None
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations


class _Failed(Exception):
    """Authentication failed; the text is for the broker's audit line only."""
