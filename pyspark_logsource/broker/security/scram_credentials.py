"""SCRAM credentials (RFC 5802): salt, iterations, StoredKey and ServerKey — never the password.

Spelled as Kafka stores them under ``/config/users/<user>``:
``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from ...errors import UnacceptableCredential

#: mechanism -> hashlib name
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's bounds on the iteration count
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class ScramCredential:
    """What the broker keeps of one user's password for one mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys are secrets too (a stolen StoredKey/ServerKey impersonates the server)
        return f"ScramCredential(iterations={self.iterations})"

    def to_kafka_string(self) -> str:
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_kafka_string(cls, text: str) -> ScramCredential:
        """Parse Kafka's spelling; ValueError when a part is missing or malformed."""
        parts = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(
                base64.b64decode(parts["salt"], validate=True),
                base64.b64decode(parts["stored_key"], validate=True),
                base64.b64decode(parts["server_key"], validate=True),
                int(parts["iterations"]),
            )
        except (KeyError, ValueError) as e:
            raise ValueError(f"malformed SCRAM credential ({type(e).__name__})") from None


def check_mechanism(mechanism: str) -> str:
    if mechanism not in HASHES:
        raise UnacceptableCredential(f"unknown SCRAM mechanism {mechanism!r}; use one of {', '.join(HASHES)}")
    return HASHES[mechanism]


def from_salted_password(
    mechanism: str, salted_password: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential of a salted password (what AlterUserScramCredentials carries)."""
    hf = check_mechanism(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise UnacceptableCredential(
            f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}"
        )
    if not salt or not salted_password:
        raise UnacceptableCredential("the salt and the salted password must not be empty")
    client_key = hmac.digest(salted_password, b"Client Key", hf)
    stored_key = hashlib.new(hf, client_key).digest()
    server_key = hmac.digest(salted_password, b"Server Key", hf)
    return ScramCredential(bytes(salt), stored_key, server_key, iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802 (PBKDF2-HMAC)."""
    return hashlib.pbkdf2_hmac(check_mechanism(mechanism), password.encode("utf-8"), salt, iterations)


def from_password(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A new credential for ``password`` with a random 32-byte salt."""
    if not password:
        raise UnacceptableCredential("the password must not be empty")
    salt = salt or os.urandom(32)
    check_mechanism(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise UnacceptableCredential(
            f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}"
        )
    return from_salted_password(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations
    )


def verify_password(mechanism: str, cred: ScramCredential, password: str) -> bool:
    """True if ``password`` is the one ``cred`` was made from (PLAIN against a SCRAM credential)."""
    hf = check_mechanism(mechanism)
    sp = salted_password(mechanism, password, cred.salt, cred.iterations)
    stored = hashlib.new(hf, hmac.digest(sp, b"Client Key", hf)).digest()
    return hmac.compare_digest(stored, cred.stored_key)
