"""Kafka's SASL and SCRAM-credential APIs: schemas, typed messages and their adapters.

- SaslHandshake (17, v0-1): the client names a mechanism; the broker answers the ones it enables.
  (v0 meant raw SASL tokens after the handshake; this broker expects SaslAuthenticate after either.)
- SaslAuthenticate (36, v0-2): one SASL token each way; v1+ carries the session lifetime.
- DescribeUserScramCredentials (50, v0) and AlterUserScramCredentials (51, v0): users' SCRAM
  credentials (mechanism and iterations; salts and keys never leave the broker).

Field names are Kafka's JSON names in snake_case; version specs as in Kafka's schemas.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey
from .schema import F, message

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
DESCRIBE_USER_SCRAM_CREDENTIALS_KEY = 50
ALTER_USER_SCRAM_CREDENTIALS_KEY = 51

#: Kafka's ScramMechanism ids on the wire (0 is UNKNOWN)
SCRAM_MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
SCRAM_MECHANISM_NAMES = {v: k for k, v in SCRAM_MECHANISM_IDS.items()}

SASL_HANDSHAKE_REQUEST = message("SaslHandshakeRequest", "0-1", "none", F("mechanism", "string"))
SASL_HANDSHAKE_RESPONSE = message(
    "SaslHandshakeResponse", "0-1", "none", F("error_code", "int16"), F("mechanisms", "[]string")
)
SASL_AUTHENTICATE_REQUEST = message("SaslAuthenticateRequest", "0-2", "2+", F("auth_bytes", "bytes"))
SASL_AUTHENTICATE_RESPONSE = message(
    "SaslAuthenticateResponse",
    "0-2",
    "2+",
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+", default="null"),
    F("auth_bytes", "bytes"),
    F("session_lifetime_ms", "int64", "1+", default=0),
)
DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = message(
    "DescribeUserScramCredentialsRequest",
    "0",
    "0+",
    F("users", "[]UserName", "0+", F("name", "string"), nullable="0+"),
)
DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = message(
    "DescribeUserScramCredentialsResponse",
    "0",
    "0+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+", default="null"),
    F(
        "results",
        "[]DescribeUserScramCredentialsResult",
        "0+",
        F("user", "string"),
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+", default="null"),
        F("credential_infos", "[]CredentialInfo", "0+", F("mechanism", "int8"), F("iterations", "int32")),
    ),
)
ALTER_USER_SCRAM_CREDENTIALS_REQUEST = message(
    "AlterUserScramCredentialsRequest",
    "0",
    "0+",
    F("deletions", "[]ScramCredentialDeletion", "0+", F("name", "string"), F("mechanism", "int8")),
    F(
        "upsertions",
        "[]ScramCredentialUpsertion",
        "0+",
        F("name", "string"),
        F("mechanism", "int8"),
        F("iterations", "int32"),
        F("salt", "bytes"),
        F("salted_password", "bytes"),
    ),
)
ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = message(
    "AlterUserScramCredentialsResponse",
    "0",
    "0+",
    F("throttle_time_ms", "int32"),
    F(
        "results",
        "[]AlterUserScramCredentialsResult",
        "0+",
        F("user", "string"),
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+", default="null"),
    ),
)

# ------------------------------------------------------------------ SaslHandshake / SaslAuthenticate


@dataclass(slots=True)
class SaslHandshakeRequest:
    """The client names the mechanism it will authenticate with."""

    API_KEY = ApiKey.SASL_HANDSHAKE
    mechanism: str


@dataclass(slots=True)
class SaslHandshakeResponse:
    """NONE, or UNSUPPORTED_SASL_MECHANISM (33) / ILLEGAL_SASL_STATE (34); the enabled mechanisms."""

    error_code: int = 0
    mechanisms: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SaslAuthenticateRequest:
    """One SASL token from the client."""

    API_KEY = ApiKey.SASL_AUTHENTICATE
    auth_bytes: bytes


@dataclass(slots=True)
class SaslAuthenticateResponse:
    """One SASL token from the broker, or an error; the session's lifetime (0: no limit)."""

    error_code: int = 0
    error_message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0


def sasl_handshake_req_to(r: SaslHandshakeRequest, v: int) -> dict:
    return {"mechanism": r.mechanism}


def sasl_handshake_req_from(d: dict, v: int) -> SaslHandshakeRequest:
    return SaslHandshakeRequest(d["mechanism"])


def sasl_handshake_resp_to(r: SaslHandshakeResponse, v: int) -> dict:
    return {"error_code": r.error_code, "mechanisms": list(r.mechanisms)}


def sasl_handshake_resp_from(d: dict, v: int) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(d["error_code"], list(d["mechanisms"]))


def sasl_authenticate_req_to(r: SaslAuthenticateRequest, v: int) -> dict:
    return {"auth_bytes": r.auth_bytes}


def sasl_authenticate_req_from(d: dict, v: int) -> SaslAuthenticateRequest:
    return SaslAuthenticateRequest(bytes(d["auth_bytes"]))


def sasl_authenticate_resp_to(r: SaslAuthenticateResponse, v: int) -> dict:
    return {
        "error_code": r.error_code,
        "error_message": r.error_message,
        "auth_bytes": r.auth_bytes,
        "session_lifetime_ms": r.session_lifetime_ms,
    }


def sasl_authenticate_resp_from(d: dict, v: int) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        d["error_code"], d["error_message"], bytes(d["auth_bytes"]), d.get("session_lifetime_ms", 0)
    )


# ------------------------------------------------------------------ SCRAM credentials (50, 51)


@dataclass(slots=True)
class DescribeUserScramCredentialsRequest:
    """The users to describe; None: every user with a credential."""

    API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    users: list[str] | None = None


@dataclass(slots=True)
class UserScramCredentials:
    """One user's credentials: (mechanism name, iterations) each, or an error for the user."""

    user: str
    error_code: int = 0
    error_message: str | None = None
    credentials: list[tuple[str, int]] = field(default_factory=list)


@dataclass(slots=True)
class DescribeUserScramCredentialsResponse:
    results: list[UserScramCredentials] = field(default_factory=list)
    error_code: int = 0
    error_message: str | None = None
    throttle_time_ms: int = 0


@dataclass(slots=True)
class ScramUpsertion:
    """Set ``name``'s credential for ``mechanism``: the salt and the salted password (never the password)."""

    name: str
    mechanism: str
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(slots=True)
class AlterUserScramCredentialsRequest:
    """Delete (name, mechanism) credentials and upsert others."""

    API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    deletions: list[tuple[str, str]] = field(default_factory=list)
    upsertions: list[ScramUpsertion] = field(default_factory=list)


@dataclass(slots=True)
class AlterUserScramCredentialsResponse:
    #: (user, error code, error message) per user named in the request
    results: list[tuple[str, int, str | None]] = field(default_factory=list)
    throttle_time_ms: int = 0


def _mech_id(name: str) -> int:
    return SCRAM_MECHANISM_IDS.get(name, 0)


def _mech_name(i: int) -> str:
    return SCRAM_MECHANISM_NAMES.get(i, "UNKNOWN")


def describe_scram_req_to(r: DescribeUserScramCredentialsRequest, v: int) -> dict:
    return {"users": None if r.users is None else [{"name": u} for u in r.users]}


def describe_scram_req_from(d: dict, v: int) -> DescribeUserScramCredentialsRequest:
    users = d["users"]
    return DescribeUserScramCredentialsRequest(None if users is None else [u["name"] for u in users])


def describe_scram_resp_to(r: DescribeUserScramCredentialsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "error_message": r.error_message,
        "results": [
            {
                "user": x.user,
                "error_code": x.error_code,
                "error_message": x.error_message,
                "credential_infos": [{"mechanism": _mech_id(m), "iterations": i} for m, i in x.credentials],
            }
            for x in r.results
        ],
    }


def describe_scram_resp_from(d: dict, v: int) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(
        [
            UserScramCredentials(
                x["user"],
                x["error_code"],
                x["error_message"],
                [(_mech_name(c["mechanism"]), c["iterations"]) for c in x["credential_infos"]],
            )
            for x in d["results"]
        ],
        d["error_code"],
        d["error_message"],
        d["throttle_time_ms"],
    )


def alter_scram_req_to(r: AlterUserScramCredentialsRequest, v: int) -> dict:
    return {
        "deletions": [{"name": n, "mechanism": _mech_id(m)} for n, m in r.deletions],
        "upsertions": [
            {
                "name": u.name,
                "mechanism": _mech_id(u.mechanism),
                "iterations": u.iterations,
                "salt": u.salt,
                "salted_password": u.salted_password,
            }
            for u in r.upsertions
        ],
    }


def alter_scram_req_from(d: dict, v: int) -> AlterUserScramCredentialsRequest:
    return AlterUserScramCredentialsRequest(
        [(x["name"], _mech_name(x["mechanism"])) for x in d["deletions"]],
        [
            ScramUpsertion(
                x["name"],
                _mech_name(x["mechanism"]),
                x["iterations"],
                bytes(x["salt"]),
                bytes(x["salted_password"]),
            )
            for x in d["upsertions"]
        ],
    )


def alter_scram_resp_to(r: AlterUserScramCredentialsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "results": [{"user": u, "error_code": c, "error_message": m} for u, c, m in r.results],
    }


def alter_scram_resp_from(d: dict, v: int) -> AlterUserScramCredentialsResponse:
    return AlterUserScramCredentialsResponse(
        [(x["user"], x["error_code"], x["error_message"]) for x in d["results"]], d["throttle_time_ms"]
    )
