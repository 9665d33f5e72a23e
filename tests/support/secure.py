"""Test helpers for the security tests: a CA and certificates made in the test session (trustme; nothing
checked in that could expire), a broker with every kind of listener, users made with ``logsource users``
before its first start, and a raw SASL wire client for the bad-input cases.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trustme

from pyspark_logsource.broker import users
from pyspark_logsource.protocol import ClientConnection
from pyspark_logsource.protocol.messages import ApiVersionsRequest

ALL_LISTENERS = (
    "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
)
#: user -> password (each has SCRAM-SHA-256 and SCRAM-SHA-512 credentials)
USERS = {"alice": "alice-secret-pw-1", "admin": "admin-secret-pw-2"}


@dataclass
class Pki:
    """PEM files: the CA, the broker's key store (key + chain), client certificates."""

    ca: Path
    keystore: Path
    alice_cert: Path  # CN=alice,OU=eng,O=example, signed by the CA
    stranger_cert: Path  # CN=mallory, signed by another CA
    expired_cert: Path  # CN=old, signed by the CA, expired yesterday
    #: user -> PEM (key + chain) with subject CN=<user>,OU=eng,O=example, signed by the CA (make_pki's users)
    user_certs: dict[str, Path] = field(default_factory=dict)


def make_pki(d: Path, users: tuple[str, ...] = ()) -> Pki:
    """The CA and certificates; ``users`` each get a client certificate like alice's."""
    d.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(d / "broker.pem")
    )
    alice = ca.issue_cert(
        "alice@example.com", common_name="alice", organization_name="example", organization_unit_name="eng"
    )
    alice.private_key_and_cert_chain_pem.write_to_path(str(d / "alice.pem"))
    other = trustme.CA()
    other.issue_cert(
        "mallory@example.com", common_name="mallory"
    ).private_key_and_cert_chain_pem.write_to_path(str(d / "mallory.pem"))
    now = datetime.datetime.now(datetime.timezone.utc)
    old = ca.issue_cert(
        "old@example.com",
        common_name="old",
        not_before=now - datetime.timedelta(days=30),
        not_after=now - datetime.timedelta(days=1),
    )
    old.private_key_and_cert_chain_pem.write_to_path(str(d / "old.pem"))
    user_certs = {}
    for user in users:
        cert = ca.issue_cert(
            f"{user}@example.com", common_name=user, organization_name="example", organization_unit_name="eng"
        )
        cert.private_key_and_cert_chain_pem.write_to_path(str(d / f"user-{user}.pem"))
        user_certs[user] = d / f"user-{user}.pem"
    return Pki(d / "ca.pem", d / "broker.pem", d / "alice.pem", d / "mallory.pem", d / "old.pem", user_certs)


def broker_properties(data_dir: Path, pki: Pki, **extra: str) -> dict[str, str]:
    props = {
        "listeners": ALL_LISTENERS,
        "ssl.keystore.location": str(pki.keystore),
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "required",
        "log.dirs": str(data_dir / "logs"),
    }
    props.update(extra)
    return props


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def add_users_offline(config_file: Path, tmp: Path) -> None:
    """``logsource users set`` before the broker's first start, for every user and SCRAM mechanism."""
    for user, password in USERS.items():
        pw = tmp / f"{user}.pw"
        pw.write_text(password + "\n")
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            assert (
                users.main(
                    [
                        "set",
                        user,
                        "--mechanism",
                        mech,
                        "--password-file",
                        str(pw),
                        "--config",
                        str(config_file),
                    ]
                )
                == 0
            )


def sasl_options(
    pki: Pki, mechanism: str, user: str = "alice", password: str | None = None
) -> dict[str, Any]:
    """Our clients' options (kafka-python's names) for SASL_SSL."""
    return {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": USERS.get(user, "") if password is None else password,
        "ssl_cafile": str(pki.ca),
    }


def ck_config(
    bootstrap: str, pki: Pki, protocol: str, mechanism: str | None = None, user: str = "alice"
) -> dict:
    """confluent-kafka's settings for ``protocol``."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": protocol}
    if protocol.startswith("SASL"):
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": USERS[user]})
    if protocol.endswith("SSL"):
        conf["ssl.ca.location"] = str(pki.ca)
    return conf


class RawSasl:
    """A plain socket speaking the sans-IO client protocol one request at a time (no SASL logic)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.proto = ClientConnection("raw-sasl")

    def request(self, req: Any) -> Any:
        _, parts = self.proto.send_request(req)
        self.sock.sendall(b"".join(bytes(p) for p in parts))
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("broker closed the connection")
            got = self.proto.receive_data(data)
            if got:
                return got[0].response

    def api_versions(self) -> Any:
        resp = self.request(ApiVersionsRequest())
        self.proto.negotiated(resp)
        return resp

    def closed_by_broker(self, timeout: float = 5.0) -> bool:
        """True once the broker closed (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def kafka_pem_keystore(d: Path) -> tuple[Path, Path]:
    """(CA file, key store) for Apache Kafka's PEM key store (KIP-651): its private key must be PKCS#8."""
    from cryptography.hazmat.primitives import serialization as ser

    d.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    key = ser.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    pkcs8 = key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())
    (d / "kafka-keystore.pem").write_bytes(pkcs8 + b"".join(c.bytes() for c in leaf.cert_chain_pems))
    return d / "ca.pem", d / "kafka-keystore.pem"


@contextlib.contextmanager
def sasl_ssl_acl_broker(d: Path, pki: Pki) -> Iterator[Any]:
    """A broker process with one SASL_SSL listener (no client certificates), ACLs on, ``admin`` the super
    user and the users of :data:`USERS` made before its first start; no failed-login delay."""
    from support.brokers import broker_process

    props = broker_properties(
        d,
        pki,
        listeners="SASL_SSL://127.0.0.1:0",
        **{
            "connection.failed.authentication.delay.ms": "0",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
        },
    )
    props.pop("ssl.client.auth")
    cfg = write_properties(d / "server.properties", props)
    add_users_offline(cfg, d)
    props.pop("log.dirs")
    with broker_process(d, config=props) as b:
        yield b
