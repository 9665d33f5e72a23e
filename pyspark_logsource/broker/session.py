"""What the broker knows of one client connection: who it is, where from, and what it asked for.

The server makes one :class:`Session` per connection and hands it, with each
request, to the handlers. It is the request pipeline's seam for what comes
after the connection: authentication sets :attr:`Session.principal` (Kafka's
``KafkaPrincipal``; ``User:ANONYMOUS`` until then, as on Kafka's PLAINTEXT
listener), authorization matches the principal and :attr:`Session.client_address`,
and quotas key on :attr:`Session.quota_group`. It imports nothing of the broker,
so every handler module can name it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the listener name of the broker's one plain TCP listener (Kafka's default)
PLAINTEXT_LISTENER = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated identity, Kafka's ``KafkaPrincipal``: a type (``User``) and a name."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


#: the principal of an unauthenticated connection (Kafka's ``KafkaPrincipal.ANONYMOUS``)
ANONYMOUS = Principal("User", "ANONYMOUS")


@dataclass(slots=True)
class Session:
    """One client connection: its peer, identity, listener, and what the client asked for."""

    #: ``host:port`` of the client (log lines name it)
    peer: str
    #: the client asked for Arrow-bodied batches (ApiVersions tag); Kafka clients get Kafka's layout
    arrow_body: bool = False
    #: the client id of the request being handled (group members are named after it)
    client_id: str | None = None
    #: who the client is: ANONYMOUS until a listener authenticates it
    principal: Principal = ANONYMOUS
    #: the listener the connection came in on
    listener_name: str = PLAINTEXT_LISTENER
    #: the listener's security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
    security_protocol: str = "PLAINTEXT"
    #: the SASL mechanism the client authenticated with (None: no SASL)
    sasl_mechanism: str | None = None

    @property
    def authenticated(self) -> bool:
        """True once a SASL exchange succeeded (a TLS client certificate alone does not count)."""
        return self.sasl_mechanism is not None

    @property
    def client_address(self) -> str:
        """The client's host, without the port (what ACLs and per-host quotas match)."""
        host, sep, port = self.peer.rpartition(":")
        return host if sep and port.isdigit() else self.peer

    @property
    def quota_group(self) -> tuple[Principal, str | None]:
        """The key a client quota applies to: Kafka's ``(user, client-id)`` quota entity."""
        return self.principal, self.client_id
