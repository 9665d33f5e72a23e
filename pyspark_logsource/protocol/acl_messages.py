"""Kafka's ACL APIs: schemas, typed messages and their adapters.

- DescribeAcls (29, v0-3): the ACLs one filter matches, grouped by resource pattern.
- CreateAcls (30, v0-3): create ACL bindings; one result per creation.
- DeleteAcls (31, v0-3): delete the bindings each filter matches; per filter, what it deleted.

v1 added the resource pattern type (default 3, LITERAL, for v0), v2 is the first flexible version.
Enum fields carry Kafka's codes (ResourceType, PatternType, AclOperation, AclPermissionType; the
broker's ``security/acls/model.py`` names them). Field names are Kafka's JSON names in snake_case.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey
from .schema import F, message

DESCRIBE_ACLS_KEY = 29
CREATE_ACLS_KEY = 30
DELETE_ACLS_KEY = 31

#: PatternType LITERAL: what a v0 request means
LITERAL = 3

_FILTER_FIELDS = (
    F("resource_type_filter", "int8"),
    F("resource_name_filter", "string", nullable="0+"),
    F("pattern_type_filter", "int8", "1+", default=LITERAL),
    F("principal_filter", "string", nullable="0+"),
    F("host_filter", "string", nullable="0+"),
    F("operation", "int8"),
    F("permission_type", "int8"),
)

DESCRIBE_ACLS_REQUEST = message("DescribeAclsRequest", "0-3", "2+", *_FILTER_FIELDS)
DESCRIBE_ACLS_RESPONSE = message(
    "DescribeAclsResponse",
    "0-3",
    "2+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default="null"),
    F(
        "resources",
        "[]DescribeAclsResource",
        "0+",
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("pattern_type", "int8", "1+", default=LITERAL),
        F(
            "acls",
            "[]AclDescription",
            "0+",
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ),
    ),
)
CREATE_ACLS_REQUEST = message(
    "CreateAclsRequest",
    "0-3",
    "2+",
    F(
        "creations",
        "[]AclCreation",
        "0+",
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("resource_pattern_type", "int8", "1+", default=LITERAL),
        F("principal", "string"),
        F("host", "string"),
        F("operation", "int8"),
        F("permission_type", "int8"),
    ),
)
CREATE_ACLS_RESPONSE = message(
    "CreateAclsResponse",
    "0-3",
    "2+",
    F("throttle_time_ms", "int32"),
    F(
        "results",
        "[]AclCreationResult",
        "0+",
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default="null"),
    ),
)
DELETE_ACLS_REQUEST = message(
    "DeleteAclsRequest", "0-3", "2+", F("filters", "[]DeleteAclsFilter", "0+", *_FILTER_FIELDS)
)
DELETE_ACLS_RESPONSE = message(
    "DeleteAclsResponse",
    "0-3",
    "2+",
    F("throttle_time_ms", "int32"),
    F(
        "filter_results",
        "[]DeleteAclsFilterResult",
        "0+",
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default="null"),
        F(
            "matching_acls",
            "[]DeleteAclsMatchingAcl",
            "0+",
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default="null"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("pattern_type", "int8", "1+", default=LITERAL),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ),
    ),
)


@dataclass(slots=True)
class AclFilter:
    """A filter over ACL bindings: None names match any value; 1 (ANY) for an enum matches any."""

    resource_type: int = 1
    resource_name: str | None = None
    pattern_type: int = LITERAL
    principal: str | None = None
    host: str | None = None
    operation: int = 1
    permission_type: int = 1


@dataclass(slots=True)
class Acl:
    """One ACL binding on the wire: a resource pattern and an access-control entry."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(slots=True)
class DescribeAclsRequest:
    API_KEY = ApiKey.DESCRIBE_ACLS
    filter: AclFilter = field(default_factory=AclFilter)


@dataclass(slots=True)
class DescribeAclsResponse:
    """The bindings the filter matched (grouped by pattern on the wire), or an error."""

    error_code: int = 0
    error_message: str | None = None
    acls: list[Acl] = field(default_factory=list)
    throttle_time_ms: int = 0


@dataclass(slots=True)
class CreateAclsRequest:
    API_KEY = ApiKey.CREATE_ACLS
    creations: list[Acl] = field(default_factory=list)


@dataclass(slots=True)
class CreateAclsResponse:
    """(error code, message) per creation, in request order."""

    results: list[tuple[int, str | None]] = field(default_factory=list)
    throttle_time_ms: int = 0


@dataclass(slots=True)
class DeleteAclsRequest:
    API_KEY = ApiKey.DELETE_ACLS
    filters: list[AclFilter] = field(default_factory=list)


@dataclass(slots=True)
class DeleteAclsFilterResult:
    error_code: int = 0
    error_message: str | None = None
    matching: list[Acl] = field(default_factory=list)


@dataclass(slots=True)
class DeleteAclsResponse:
    results: list[DeleteAclsFilterResult] = field(default_factory=list)
    throttle_time_ms: int = 0


def _filter_to(f: AclFilter) -> dict:
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": f.operation,
        "permission_type": f.permission_type,
    }


def _filter_from(d: dict) -> AclFilter:
    return AclFilter(
        d["resource_type_filter"],
        d["resource_name_filter"],
        d.get("pattern_type_filter", LITERAL),
        d["principal_filter"],
        d["host_filter"],
        d["operation"],
        d["permission_type"],
    )


def _entry(a: Acl) -> dict:
    return {
        "principal": a.principal,
        "host": a.host,
        "operation": a.operation,
        "permission_type": a.permission_type,
    }


def describe_acls_req_to(r: DescribeAclsRequest, v: int) -> dict:
    return _filter_to(r.filter)


def describe_acls_req_from(d: dict, v: int) -> DescribeAclsRequest:
    return DescribeAclsRequest(_filter_from(d))


def describe_acls_resp_to(r: DescribeAclsResponse, v: int) -> dict:
    groups: dict[tuple[int, str, int], list[dict]] = {}
    for a in r.acls:
        groups.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(_entry(a))
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "error_message": r.error_message,
        "resources": [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": es}
            for (t, n, p), es in groups.items()
        ],
    }


def describe_acls_resp_from(d: dict, v: int) -> DescribeAclsResponse:
    acls = [
        Acl(
            res["resource_type"],
            res["resource_name"],
            res.get("pattern_type", LITERAL),
            e["principal"],
            e["host"],
            e["operation"],
            e["permission_type"],
        )
        for res in d["resources"]
        for e in res["acls"]
    ]
    return DescribeAclsResponse(d["error_code"], d["error_message"], acls, d["throttle_time_ms"])


def create_acls_req_to(r: CreateAclsRequest, v: int) -> dict:
    return {
        "creations": [
            {
                "resource_type": a.resource_type,
                "resource_name": a.resource_name,
                "resource_pattern_type": a.pattern_type,
                **_entry(a),
            }
            for a in r.creations
        ]
    }


def create_acls_req_from(d: dict, v: int) -> CreateAclsRequest:
    return CreateAclsRequest(
        [
            Acl(
                c["resource_type"],
                c["resource_name"],
                c.get("resource_pattern_type", LITERAL),
                c["principal"],
                c["host"],
                c["operation"],
                c["permission_type"],
            )
            for c in d["creations"]
        ]
    )


def create_acls_resp_to(r: CreateAclsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "results": [{"error_code": c, "error_message": m} for c, m in r.results],
    }


def create_acls_resp_from(d: dict, v: int) -> CreateAclsResponse:
    return CreateAclsResponse(
        [(x["error_code"], x["error_message"]) for x in d["results"]], d["throttle_time_ms"]
    )


def delete_acls_req_to(r: DeleteAclsRequest, v: int) -> dict:
    return {"filters": [_filter_to(f) for f in r.filters]}


def delete_acls_req_from(d: dict, v: int) -> DeleteAclsRequest:
    return DeleteAclsRequest([_filter_from(f) for f in d["filters"]])


def delete_acls_resp_to(r: DeleteAclsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "filter_results": [
            {
                "error_code": fr.error_code,
                "error_message": fr.error_message,
                "matching_acls": [
                    {
                        "error_code": 0,
                        "error_message": None,
                        "resource_type": a.resource_type,
                        "resource_name": a.resource_name,
                        "pattern_type": a.pattern_type,
                        **_entry(a),
                    }
                    for a in fr.matching
                ],
            }
            for fr in r.results
        ],
    }


def delete_acls_resp_from(d: dict, v: int) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        [
            DeleteAclsFilterResult(
                fr["error_code"],
                fr["error_message"],
                [
                    Acl(
                        m["resource_type"],
                        m["resource_name"],
                        m.get("pattern_type", LITERAL),
                        m["principal"],
                        m["host"],
                        m["operation"],
                        m["permission_type"],
                    )
                    for m in fr["matching_acls"]
                ],
            )
            for fr in d["filter_results"]
        ],
        d["throttle_time_ms"],
    )
