"""Kafka's client-quota APIs (KIP-546): schemas, typed messages and their adapters.

- DescribeClientQuotas (48, v0-1): the quotas of every entity a filter matches.
- AlterClientQuotas (49, v0-1): set or remove quota values of entities; one result per entity.

v1 is the first flexible version. An entity is a list of (entity type, name) with the type ``user``,
``client-id`` (or ``ip``); a null name is the default entity of its type. Filter match types: 0 an exact
name, 1 the default, 2 any specified name (the default included). Field names are Kafka's JSON names in
snake_case.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey
from .schema import F, message

DESCRIBE_CLIENT_QUOTAS_KEY = 48
ALTER_CLIENT_QUOTAS_KEY = 49

#: ClientQuotaFilterComponent match types
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
#: Kafka's ClientQuotaEntity types
USER, CLIENT_ID, IP = "user", "client-id", "ip"

_ENTITY = (F("entity_type", "string"), F("entity_name", "string", nullable="0+"))

DESCRIBE_CLIENT_QUOTAS_REQUEST = message(
    "DescribeClientQuotasRequest",
    "0-1",
    "1+",
    F(
        "components",
        "[]ComponentData",
        "0+",
        F("entity_type", "string"),
        F("match_type", "int8"),
        F("match", "string", nullable="0+"),
    ),
    F("strict", "bool"),
)
DESCRIBE_CLIENT_QUOTAS_RESPONSE = message(
    "DescribeClientQuotasResponse",
    "0-1",
    "1+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default="null"),
    F(
        "entries",
        "[]EntryData",
        "0+",
        F("entity", "[]EntityData", "0+", *_ENTITY),
        F("values", "[]ValueData", "0+", F("key", "string"), F("value", "float64")),
        nullable="0+",
    ),
)
ALTER_CLIENT_QUOTAS_REQUEST = message(
    "AlterClientQuotasRequest",
    "0-1",
    "1+",
    F(
        "entries",
        "[]EntryData",
        "0+",
        F("entity", "[]EntityData", "0+", *_ENTITY),
        F("ops", "[]OpData", "0+", F("key", "string"), F("value", "float64"), F("remove", "bool")),
    ),
    F("validate_only", "bool"),
)
ALTER_CLIENT_QUOTAS_RESPONSE = message(
    "AlterClientQuotasResponse",
    "0-1",
    "1+",
    F("throttle_time_ms", "int32"),
    F(
        "entries",
        "[]EntryData",
        "0+",
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default="null"),
        F("entity", "[]EntityData", "0+", *_ENTITY),
    ),
)

#: an entity on the wire: ((entity type, name or None for the default), ...)
Entity = tuple[tuple[str, str | None], ...]


@dataclass(slots=True)
class QuotaFilterComponent:
    """Match ``entity_type``: ``match`` exactly (MATCH_EXACT), its default (MATCH_DEFAULT, match None) or
    any name (MATCH_ANY, match None)."""

    entity_type: str
    match_type: int
    match: str | None = None


@dataclass(slots=True)
class DescribeClientQuotasRequest:
    """The quotas of the entities the components match; ``strict``: only entities of exactly those types."""

    API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
    components: list[QuotaFilterComponent] = field(default_factory=list)
    strict: bool = False


@dataclass(slots=True)
class QuotaEntry:
    """One entity and its quota values."""

    entity: Entity
    values: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class DescribeClientQuotasResponse:
    """The matched entities (None with an error)."""

    error_code: int = 0
    error_message: str | None = None
    entries: list[QuotaEntry] | None = field(default_factory=list)
    throttle_time_ms: int = 0


@dataclass(slots=True)
class QuotaOp:
    """Set ``key`` to ``value``, or remove it (``remove``; the value is then ignored)."""

    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(slots=True)
class QuotaAlteration:
    """The changes to one entity."""

    entity: Entity
    ops: list[QuotaOp] = field(default_factory=list)


@dataclass(slots=True)
class AlterClientQuotasRequest:
    """Alter the quotas of the entries' entities (``validate_only``: check, change nothing)."""

    API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
    entries: list[QuotaAlteration] = field(default_factory=list)
    validate_only: bool = False


@dataclass(slots=True)
class QuotaAlterResult:
    """The outcome for one entity."""

    entity: Entity
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class AlterClientQuotasResponse:
    """One result per entry of the request."""

    entries: list[QuotaAlterResult] = field(default_factory=list)
    throttle_time_ms: int = 0


# ------------------------------------------------------------------ adapters


def _entity_to(e: Entity) -> list[dict]:
    return [{"entity_type": t, "entity_name": n} for t, n in e]


def _entity_from(d: list[dict]) -> Entity:
    return tuple((x["entity_type"], x["entity_name"]) for x in d)


def describe_client_quotas_req_to(r: DescribeClientQuotasRequest, v: int) -> dict:
    return {
        "components": [
            {"entity_type": c.entity_type, "match_type": c.match_type, "match": c.match} for c in r.components
        ],
        "strict": r.strict,
    }


def describe_client_quotas_req_from(d: dict, v: int) -> DescribeClientQuotasRequest:
    return DescribeClientQuotasRequest(
        [QuotaFilterComponent(c["entity_type"], c["match_type"], c["match"]) for c in d["components"]],
        d["strict"],
    )


def describe_client_quotas_resp_to(r: DescribeClientQuotasResponse, v: int) -> dict:
    entries = None
    if r.entries is not None:
        entries = [
            {
                "entity": _entity_to(e.entity),
                "values": [{"key": k, "value": x} for k, x in e.values.items()],
            }
            for e in r.entries
        ]
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "error_message": r.error_message,
        "entries": entries,
    }


def describe_client_quotas_resp_from(d: dict, v: int) -> DescribeClientQuotasResponse:
    entries = None
    if d["entries"] is not None:
        entries = [
            QuotaEntry(_entity_from(e["entity"]), {x["key"]: x["value"] for x in e["values"]})
            for e in d["entries"]
        ]
    return DescribeClientQuotasResponse(d["error_code"], d["error_message"], entries, d["throttle_time_ms"])


def alter_client_quotas_req_to(r: AlterClientQuotasRequest, v: int) -> dict:
    return {
        "entries": [
            {
                "entity": _entity_to(e.entity),
                "ops": [{"key": o.key, "value": o.value, "remove": o.remove} for o in e.ops],
            }
            for e in r.entries
        ],
        "validate_only": r.validate_only,
    }


def alter_client_quotas_req_from(d: dict, v: int) -> AlterClientQuotasRequest:
    return AlterClientQuotasRequest(
        [
            QuotaAlteration(
                _entity_from(e["entity"]), [QuotaOp(o["key"], o["value"], o["remove"]) for o in e["ops"]]
            )
            for e in d["entries"]
        ],
        d["validate_only"],
    )


def alter_client_quotas_resp_to(r: AlterClientQuotasResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "entries": [
            {"error_code": e.error_code, "error_message": e.error_message, "entity": _entity_to(e.entity)}
            for e in r.entries
        ],
    }


def alter_client_quotas_resp_from(d: dict, v: int) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(
        [
            QuotaAlterResult(_entity_from(e["entity"]), e["error_code"], e["error_message"])
            for e in d["entries"]
        ],
        d["throttle_time_ms"],
    )
