"""Sans-IO parts of authorization (issue 22): Kafka's ACL matching rules in the Authorizer, the filters
of DescribeAcls/DeleteAcls, the file store, and the CreateAcls/DescribeAcls/DeleteAcls codecs at every
version."""

from __future__ import annotations

import json

import pytest

from pyspark_logsource.broker.security.acls.model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    parse_enum,
)
from pyspark_logsource.broker.security.acls.store import FileAclStore, decode_entries, encode_entries
from pyspark_logsource.errors import InvalidRequest
from pyspark_logsource.protocol import acl_messages as aclm
from pyspark_logsource.protocol.api_keys import RequestHeader
from pyspark_logsource.protocol.codecs import (
    decode_request_body,
    decode_request_header,
    decode_response_body,
    encode_request,
    encode_response,
)
from pyspark_logsource.protocol.primitives import Reader

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation


def acl(rtype, name, principal, op, perm=ALLOW, pattern=LIT, host="*") -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, perm))


def authz(*bindings, super_users=(), allow_if_no_acl=False) -> Authorizer:
    a = Authorizer(super_users, allow_if_no_acl)
    a.update(bindings)
    return a


def test_literal_acl_allows_only_its_principal_operation_and_resource():
    a = authz(acl(T, "logs", "User:alice", Op.READ))
    assert a.authorize("User:alice", "10.0.0.1", Op.READ, T, "logs")
    assert not a.authorize("User:bob", "10.0.0.1", Op.READ, T, "logs")
    assert not a.authorize("User:alice", "10.0.0.1", Op.WRITE, T, "logs")
    assert not a.authorize("User:alice", "10.0.0.1", Op.READ, T, "logs2")
    assert not a.authorize("User:alice", "10.0.0.1", Op.READ, G, "logs")


@pytest.mark.parametrize("implying", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_read_write_delete_alter_imply_describe(implying):
    a = authz(acl(T, "t", "User:alice", implying))
    assert a.authorize("User:alice", "h", Op.DESCRIBE, T, "t")
    assert not a.authorize("User:alice", "h", Op.CREATE, T, "t")


def test_alter_configs_implies_describe_configs_but_not_the_reverse():
    a = authz(acl(T, "t", "User:a", Op.ALTER_CONFIGS), acl(T, "u", "User:a", Op.DESCRIBE_CONFIGS))
    assert a.authorize("User:a", "h", Op.DESCRIBE_CONFIGS, T, "t")
    assert not a.authorize("User:a", "h", Op.ALTER_CONFIGS, T, "u")
    assert not a.authorize("User:a", "h", Op.DESCRIBE, T, "u")  # DESCRIBE_CONFIGS does not imply DESCRIBE


def test_all_allows_every_operation():
    a = authz(acl(T, "t", "User:a", Op.ALL))
    assert all(a.authorize("User:a", "h", op, T, "t") for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE))


def test_wildcard_resource_and_wildcard_principal():
    a = authz(acl(T, "*", "User:*", Op.WRITE))
    assert a.authorize("User:anyone", "h", Op.WRITE, T, "whatever")
    assert not a.authorize("User:anyone", "h", Op.WRITE, G, "whatever")


def test_prefixed_pattern_matches_names_that_start_with_it():
    a = authz(acl(T, "team-a.", "User:a", Op.READ, pattern=PRE))
    assert a.authorize("User:a", "h", Op.READ, T, "team-a.logs")
    assert a.authorize("User:a", "h", Op.READ, T, "team-a.")
    assert not a.authorize("User:a", "h", Op.READ, T, "team-b.logs")
    assert not a.authorize("User:a", "h", Op.READ, T, "team-a")


def test_deny_wins_over_allow_from_any_pattern():
    a = authz(
        acl(T, "*", "User:a", Op.ALL),
        acl(T, "secret", "User:a", Op.READ, DENY),
        acl(T, "private.", "User:*", Op.ALL, DENY, pattern=PRE),
    )
    assert not a.authorize("User:a", "h", Op.READ, T, "secret")
    assert a.authorize("User:a", "h", Op.WRITE, T, "secret")  # the deny names READ only
    assert a.authorize("User:a", "h", Op.DESCRIBE, T, "secret")  # a DENY of READ does not deny DESCRIBE
    assert not a.authorize("User:a", "h", Op.WRITE, T, "private.x")


def test_host_must_match_unless_wildcard():
    a = authz(acl(T, "t", "User:a", Op.READ, host="10.0.0.1"))
    assert a.authorize("User:a", "10.0.0.1", Op.READ, T, "t")
    assert not a.authorize("User:a", "10.0.0.2", Op.READ, T, "t")


def test_super_users_bypass_and_deny():
    a = authz(acl(T, "t", "User:admin", Op.ALL, DENY), super_users={"User:admin"})
    assert a.authorize("User:admin", "h", Op.DELETE, T, "t")
    assert a.authorize("User:admin", "h", Op.CLUSTER_ACTION, C, "kafka-cluster")


def test_no_acl_found_is_denied_unless_allow_everyone():
    assert not authz().authorize("User:a", "h", Op.READ, T, "t")
    open_ = authz(acl(T, "other", "User:b", Op.READ), allow_if_no_acl=True)
    assert open_.authorize("User:a", "h", Op.READ, T, "t")  # no ACL names t
    assert not open_.authorize("User:a", "h", Op.READ, T, "other")  # other has ACLs, none for a


def test_any_allowed_by_resource_type():
    a = authz(
        acl(T, "t", "User:a", Op.WRITE),
        acl(T, "*", "User:b", Op.WRITE, DENY),
        acl(T, "u", "User:b", Op.WRITE),
    )
    assert a.any_allowed("User:a", "h", Op.WRITE, T)
    assert not a.any_allowed("User:b", "h", Op.WRITE, T)
    assert not a.any_allowed("User:c", "h", Op.WRITE, T)


def test_bad_bindings_are_invalid_requests():
    with pytest.raises(InvalidRequest, match="TYPE:NAME"):
        AccessControlEntry("alice", "*", Op.READ, ALLOW)
    with pytest.raises(InvalidRequest, match="concrete"):
        AccessControlEntry("User:a", "*", Op.ANY, ALLOW)
    with pytest.raises(InvalidRequest, match="ALLOW or DENY"):
        AccessControlEntry("User:a", "*", Op.READ, Permission.ANY)
    with pytest.raises(InvalidRequest, match="LITERAL or PREFIXED"):
        ResourcePattern(T, "t", PatternType.MATCH)
    with pytest.raises(InvalidRequest, match="kafka-cluster"):
        ResourcePattern(C, "mycluster")
    with pytest.raises(InvalidRequest, match="resource type"):
        ResourcePattern(ResourceType.ANY, "t")
    with pytest.raises(InvalidRequest, match="empty"):
        ResourcePattern(T, "")
    with pytest.raises(InvalidRequest, match="unknown Operation"):
        parse_enum(Op, "Fly")
    with pytest.raises(InvalidRequest, match="UNKNOWN"):
        AclBindingFilter(operation=Op.UNKNOWN)


def test_parse_enum_spellings():
    assert parse_enum(Op, "IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert parse_enum(Op, "idempotent-write") is Op.IDEMPOTENT_WRITE
    assert parse_enum(ResourceType, "TransactionalId") is X
    assert parse_enum(PatternType, "prefixed") is PRE


def test_filters_any_literal_prefixed_and_match():
    lit, wild, pre = (
        acl(T, "abc", "User:a", Op.READ),
        acl(T, "*", "User:a", Op.READ),
        acl(T, "ab", "User:a", Op.READ, pattern=PRE),
    )
    grp = acl(G, "abc", "User:b", Op.READ, DENY)
    every = [lit, wild, pre, grp]
    assert [b for b in every if AclBindingFilter().matches(b)] == every
    assert [b for b in every if AclBindingFilter(T, "abc", LIT).matches(b)] == [lit]
    assert [b for b in every if AclBindingFilter(T, "abc", PatternType.MATCH).matches(b)] == [lit, wild, pre]
    assert [b for b in every if AclBindingFilter(pattern_type=PRE).matches(b)] == [pre]
    assert [b for b in every if AclBindingFilter(principal="User:b").matches(b)] == [grp]
    assert [b for b in every if AclBindingFilter(permission=DENY).matches(b)] == [grp]


def test_file_store_persists_and_removes_by_filter(tmp_path):
    s = FileAclStore(tmp_path)
    seen = []
    s.on_change = seen.append
    a, b = acl(T, "t", "User:a", Op.READ), acl(G, "g.", "User:a", Op.READ, pattern=PRE)
    s.add([a, b, a])
    assert s.bindings() == sorted([a, b]) and seen[-1] == sorted([a, b])
    assert FileAclStore(tmp_path).bindings() == sorted([a, b])  # a restart reads them back
    doc = json.loads((tmp_path / "acls.json").read_text())
    assert [(r["resourceType"], r["name"], r["patternType"]) for r in doc] == [
        ("Topic", "t", "Literal"),
        ("Group", "g.", "Prefixed"),
    ]
    assert s.remove([AclBindingFilter(resource_type=G), AclBindingFilter(name="none")]) == [[b], []]
    assert FileAclStore(tmp_path).bindings() == [a]


def test_zookeeper_node_data_is_kafkas_json():
    e = AccessControlEntry("User:alice", "*", Op.IDEMPOTENT_WRITE, ALLOW)
    data = encode_entries([e])
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "IdempotentWrite",
                "host": "*",
            }
        ],
    }
    assert decode_entries(data) == {e}


def _rt_request(req, version):
    h = RequestHeader(req.API_KEY, version, 7, "c")
    frame = b"".join(bytes(p) for p in encode_request(h, req))
    r = Reader(frame[4:])
    h2 = decode_request_header(r)
    return decode_request_body(h2, r)


def _rt_response(key, resp, version):
    h = RequestHeader(key, version, 7, "c")
    frame = b"".join(bytes(p) for p in encode_response(h, resp))
    r = Reader(frame[4:])
    r.i32()  # the correlation id (decode_response_body skips the flexible header's tags)
    return decode_response_body(key, version, r)


@pytest.mark.parametrize("v", [0, 1, 2, 3])
def test_acl_api_codecs_round_trip(v):
    pt = 4 if v >= 1 else 3  # v0 has no pattern type: LITERAL
    a = aclm.Acl(2, "logs", pt, "User:alice", "*", 3, 3)
    b = aclm.Acl(3, "g", pt, "User:bob", "10.0.0.1", 8, 2)
    f = aclm.AclFilter(2, None, pt if v else 3, "User:alice", None, 1, 1)
    assert _rt_request(aclm.DescribeAclsRequest(f), v) == aclm.DescribeAclsRequest(f)
    assert _rt_request(aclm.CreateAclsRequest([a, b]), v) == aclm.CreateAclsRequest([a, b])
    assert _rt_request(aclm.DeleteAclsRequest([f, f]), v) == aclm.DeleteAclsRequest([f, f])
    d = aclm.DescribeAclsResponse(0, None, [a, b])
    assert _rt_response(29, d, v) == d
    c = aclm.CreateAclsResponse([(0, None), (31, "no")])
    assert _rt_response(30, c, v) == c
    dl = aclm.DeleteAclsResponse(
        [aclm.DeleteAclsFilterResult(0, None, [a]), aclm.DeleteAclsFilterResult(42, "bad")]
    )
    assert _rt_response(31, dl, v) == dl


def test_every_api_the_broker_speaks_has_an_authorization_rule():
    from pyspark_logsource.broker.security.acls.admin_rules import ALL_RULES as RULES
    from pyspark_logsource.protocol import SUPPORTED_VERSIONS

    # a new API must say what it needs (checks.py RULES); without a rule only super users may call it
    assert sorted(k for k in SUPPORTED_VERSIONS if k not in RULES) == []
