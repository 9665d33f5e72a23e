"""The security APIs of an authenticated (or non-SASL) connection: SaslHandshake and SaslAuthenticate
after authentication (ILLEGAL_SASL_STATE, as Kafka answers them without re-authentication), and
DescribeUserScramCredentials (50) / AlterUserScramCredentials (51) over the :class:`CredentialStore`.

Before authentication on a SASL listener the server hands SaslHandshake and SaslAuthenticate to the
connection's :class:`~.sasl.SaslAuthenticator` instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ...errors import IllegalSaslState, LogSourceError, ResourceNotFound, UnacceptableCredential
from ...protocol import sasl_messages as sm
from ..session import Session
from .credential_store import CredentialStore
from .scram_credentials import HASHES, from_salted_password

log = logging.getLogger("pyspark_logsource.broker.security")


class SecurityHandlers:
    """Handlers of the SASL and SCRAM-credential APIs; ``store()`` is the broker's credential store
    (None until the broker started)."""

    def __init__(self, store: Callable[[], CredentialStore | None], mechanisms: tuple[str, ...]) -> None:
        self._store = store
        self.mechanisms = mechanisms

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {
            sm.SASL_HANDSHAKE_KEY: self.sasl_handshake,
            sm.SASL_AUTHENTICATE_KEY: self.sasl_authenticate,
            sm.DESCRIBE_USER_SCRAM_CREDENTIALS_KEY: self.describe_scram,
            sm.ALTER_USER_SCRAM_CREDENTIALS_KEY: self.alter_scram,
        }

    def sasl_handshake(self, req: sm.SaslHandshakeRequest, session: Session) -> sm.SaslHandshakeResponse:
        return sm.SaslHandshakeResponse(IllegalSaslState.code, list(self.mechanisms))

    def sasl_authenticate(
        self, req: sm.SaslAuthenticateRequest, session: Session
    ) -> sm.SaslAuthenticateResponse:
        what = "after successful authentication" if session.authenticated else "on a listener without SASL"
        return sm.SaslAuthenticateResponse(IllegalSaslState.code, f"SaslAuthenticate request received {what}")

    def _need_store(self) -> CredentialStore:
        store = self._store()
        if store is None:
            raise LogSourceError("the credential store is not open")
        return store

    def describe_scram(
        self, req: sm.DescribeUserScramCredentialsRequest, session: Session
    ) -> sm.DescribeUserScramCredentialsResponse:
        """Each named user's (mechanism, iterations); every user with a credential when none is named."""
        creds = self._need_store().snapshot()
        names = sorted(creds) if req.users is None else req.users
        out = []
        if req.users is not None and len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            return sm.DescribeUserScramCredentialsResponse(
                [sm.UserScramCredentials(n, 42, "user named more than once in the request") for n in dup]
            )
        for name in names:
            mine = creds.get(name, {})
            if not mine:
                e = ResourceNotFound(f"attempt to describe a user credential that does not exist: {name}")
                out.append(sm.UserScramCredentials(name, e.code, e.message))
                continue
            out.append(
                sm.UserScramCredentials(name, 0, None, [(m, c.iterations) for m, c in sorted(mine.items())])
            )
        return sm.DescribeUserScramCredentialsResponse(out)

    def alter_scram(
        self, req: sm.AlterUserScramCredentialsRequest, session: Session
    ) -> sm.AlterUserScramCredentialsResponse:
        """Apply the deletions and upsertions per user; each user gets its own error code."""
        store = self._need_store()
        results: dict[str, tuple[int, str | None]] = {}
        for name, mech in req.deletions:
            results.setdefault(name, (0, None))
            try:
                if mech not in HASHES:
                    raise UnacceptableCredential(f"unknown SCRAM mechanism for user {name}")
                store.delete(name, mech)
                log.info(
                    "deleted the %s credential of user %s (by %s from %s)",
                    mech,
                    name,
                    session.principal,
                    session.peer,
                )
            except LogSourceError as e:
                results[name] = (e.code, e.message)
        for u in req.upsertions:
            results.setdefault(u.name, (0, None))
            try:
                if not u.name:
                    raise UnacceptableCredential("the user name must not be empty")
                cred = from_salted_password(u.mechanism, u.salted_password, u.salt, u.iterations)
                store.set(u.name, u.mechanism, cred)
                log.info(
                    "set the %s credential of user %s (%d iterations; by %s from %s)",
                    u.mechanism,
                    u.name,
                    u.iterations,
                    session.principal,
                    session.peer,
                )
            except LogSourceError as e:
                results[u.name] = (e.code, e.message)
        return sm.AlterUserScramCredentialsResponse([(n, c, m) for n, (c, m) in results.items()])
