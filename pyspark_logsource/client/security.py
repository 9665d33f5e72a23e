"""The clients' security settings, with kafka-python's names, and what a connection does with them:
TLS (``ssl`` module, PEM files) and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 with ``scramp``).

``Producer``, ``Consumer`` and ``Admin`` take ``security_protocol``, ``sasl_mechanism``,
``sasl_plain_username``, ``sasl_plain_password``, ``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``,
``ssl_password`` and ``ssl_check_hostname`` as keyword arguments and hand them here
(:meth:`ClientSecurity.from_options`). The connection wraps its socket with :meth:`ClientSecurity.wrap`
and, after ApiVersions, runs :func:`sasl_exchange`.
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, SaslAuthenticationFailed

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

#: the option names (kafka-python's) a client constructor passes on
OPTION_NAMES = (
    "security_protocol",
    "sasl_mechanism",
    "sasl_plain_username",
    "sasl_plain_password",
    "ssl_cafile",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_password",
    "ssl_check_hostname",
)


@dataclass(frozen=True)
class ClientSecurity:
    """How a client connects: plain TCP or TLS, with or without SASL."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None) -> ClientSecurity:
        """Validate kafka-python-named options; TypeError on an unknown name, ConfigError on a bad value."""
        opts = dict(options or {})
        unknown = sorted(set(opts) - set(OPTION_NAMES))
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {', '.join(unknown)}")
        s = cls(**{k: v for k, v in opts.items() if v is not None})
        proto = s.security_protocol.upper()
        if proto not in PROTOCOLS:
            raise ConfigError(
                f"security_protocol must be one of {', '.join(PROTOCOLS)}, got {s.security_protocol!r}"
            )
        mech = s.sasl_mechanism.upper()
        if proto.startswith("SASL_"):
            if mech not in MECHANISMS:
                raise ConfigError(
                    f"sasl_mechanism must be one of {', '.join(MECHANISMS)}, got {s.sasl_mechanism!r}"
                )
            if not s.sasl_plain_username or s.sasl_plain_password is None:
                raise ConfigError(f"{proto} needs sasl_plain_username and sasl_plain_password")
        if bool(s.ssl_keyfile) and not s.ssl_certfile:
            raise ConfigError("ssl_keyfile needs ssl_certfile")
        return cls(
            proto,
            mech,
            s.sasl_plain_username,
            s.sasl_plain_password,
            s.ssl_cafile,
            s.ssl_certfile,
            s.ssl_keyfile,
            s.ssl_password,
            bool(s.ssl_check_hostname),
        )

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def context(self) -> ssl.SSLContext:
        """The client's TLS context: the CA file (else the system's CAs), an optional client certificate."""
        ctx = ssl.create_default_context(cafile=self.ssl_cafile)
        ctx.check_hostname = self.ssl_check_hostname
        if self.ssl_certfile:
            try:
                ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, password=self.ssl_password)
            except (OSError, ssl.SSLError) as e:
                raise ConfigError(
                    f"cannot load ssl_certfile/ssl_keyfile ({getattr(e, 'strerror', None) or e})"
                ) from None
        return ctx

    def wrap(self, sock: socket.socket, host: str) -> ssl.SSLSocket:
        """TLS over ``sock`` (the handshake runs now, within the socket's timeout)."""
        return self.context().wrap_socket(sock, server_hostname=host)


def sasl_steps(security: ClientSecurity, address: str) -> Generator[Any, Any, None]:
    """The client's SASL exchange, sans-IO: yields each request (SaslHandshake, then SaslAuthenticate
    tokens) and is sent its response back; raises a typed error when the broker refuses. Drive it with
    :func:`sasl_exchange` (blocking) or from an event loop (the brokers' replica fetchers)."""
    from ..errors import UnsupportedSaslMechanism, error_for_code
    from ..protocol.sasl_messages import SaslAuthenticateRequest, SaslHandshakeRequest

    def check(resp: Any) -> Any:
        if resp.error_code:
            raise error_for_code(resp.error_code, getattr(resp, "error_message", None) or "")
        return resp

    mech = security.sasl_mechanism
    resp = yield SaslHandshakeRequest(mech)
    if resp.error_code == UnsupportedSaslMechanism.code:
        raise UnsupportedSaslMechanism(
            f"broker {address} does not enable SASL mechanism {mech} (it enables {', '.join(resp.mechanisms)})"
        )
    check(resp)
    user, password = security.sasl_plain_username or "", security.sasl_plain_password or ""
    if mech == "PLAIN":
        check((yield SaslAuthenticateRequest(b"\x00" + user.encode() + b"\x00" + password.encode())))
        return
    from scramp import ScramClient, ScramException

    client = ScramClient([mech], user, password)
    first = check((yield SaslAuthenticateRequest(client.get_client_first().encode())))
    try:
        client.set_server_first(first.auth_bytes.decode())
        final = check((yield SaslAuthenticateRequest(client.get_client_final().encode())))
        client.set_server_final(final.auth_bytes.decode())  # checks the server's signature
    except (ScramException, UnicodeDecodeError) as e:
        raise SaslAuthenticationFailed(f"SCRAM exchange with broker {address} failed: {e}") from None


def sasl_exchange(security: ClientSecurity, request: Callable[[Any], Any], address: str) -> None:
    """Authenticate a new connection, sending each request of :func:`sasl_steps` with ``request``
    (which returns its response)."""
    steps = sasl_steps(security, address)
    req = next(steps)
    while True:
        try:
            req = steps.send(request(req))
        except StopIteration:
            return


_JAAS = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))""")


def parse_jaas_config(text: str) -> tuple[str, str]:
    """(username, password) of Kafka's ``sasl.jaas.config``: ``org.apache.kafka.common.security.scram.
    ScramLoginModule required username="..." password="...";`` (or PlainLoginModule). ConfigError names
    what is missing, never the password."""
    head = text.strip().split(None, 2)
    if (
        len(head) < 2
        or head[1] != "required"
        or not head[0].endswith(("ScramLoginModule", "PlainLoginModule"))
    ):
        raise ConfigError(
            "sasl.jaas.config must be '<...ScramLoginModule|...PlainLoginModule> required "
            'username="..." password="...";\''
        )
    opts = {
        m.group(1): (m.group(2) if m.group(2) is not None else m.group(3))
        for m in _JAAS.finditer(head[2] if len(head) > 2 else "")
    }
    if "username" not in opts or "password" not in opts:
        raise ConfigError('sasl.jaas.config needs username="..." and password="..."')
    unescape = lambda v: re.sub(r"\\(.)", r"\1", v)  # noqa: E731
    return unescape(opts["username"]), unescape(opts["password"])
