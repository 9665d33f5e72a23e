"""Sans-IO parts of the client-quota configuration (issue 23): the DescribeClientQuotas/AlterClientQuotas
codecs at every version, Kafka's describe filter and alter validation, name sanitizing as Kafka's
Sanitizer, the single broker's file store and the authorization rules of the two APIs."""

from __future__ import annotations

import json
import math

import pytest

from pyspark_logsource.broker.quotas import handlers as qh
from pyspark_logsource.broker.quotas.model import DEFAULT, QuotaEntity, QuotaTable
from pyspark_logsource.broker.quotas.store import (
    STORE_FILE,
    FileQuotaStore,
    desanitize,
    entity_of,
    format_value,
    sanitize,
    znode_name,
)
from pyspark_logsource.broker.security.acls.admin_rules import ALL_RULES
from pyspark_logsource.broker.security.acls.checks import Enforcer
from pyspark_logsource.broker.security.acls.model import (
    AccessControlEntry,
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from pyspark_logsource.broker.session import Principal, Session
from pyspark_logsource.errors import ClusterAuthorizationFailed, InvalidRequest, UnsupportedVersion
from pyspark_logsource.protocol import ApiKey
from pyspark_logsource.protocol import quota_messages as qm
from pyspark_logsource.protocol.api_keys import RequestHeader
from pyspark_logsource.protocol.codecs import (
    decode_request_body,
    decode_request_header,
    decode_response_body,
    encode_request,
    encode_response,
)
from pyspark_logsource.protocol.primitives import Reader

U, CID = qm.USER, qm.CLIENT_ID


def _rt_request(req, version):
    h = RequestHeader(req.API_KEY, version, 7, "c")
    frame = b"".join(bytes(p) for p in encode_request(h, req))
    r = Reader(frame[4:])
    return decode_request_body(decode_request_header(r), r)


def _rt_response(key, resp, version):
    h = RequestHeader(key, version, 7, "c")
    frame = b"".join(bytes(p) for p in encode_response(h, resp))
    r = Reader(frame[4:])
    r.i32()
    return decode_response_body(key, version, r)


@pytest.mark.parametrize("v", [0, 1])
def test_codecs_round_trip_at_every_version(v):
    d = qm.DescribeClientQuotasRequest(
        [qm.QuotaFilterComponent(U, qm.MATCH_EXACT, "alice"), qm.QuotaFilterComponent(CID, qm.MATCH_DEFAULT)],
        True,
    )
    assert _rt_request(d, v) == d
    a = qm.AlterClientQuotasRequest(
        [
            qm.QuotaAlteration(((U, "alice"), (CID, None)), [qm.QuotaOp("producer_byte_rate", 1048576.0)]),
            qm.QuotaAlteration(((CID, "c1"),), [qm.QuotaOp("request_percentage", 0.0, True)]),
        ],
        validate_only=True,
    )
    assert _rt_request(a, v) == a
    dr = qm.DescribeClientQuotasResponse(
        entries=[qm.QuotaEntry(((U, None),), {"consumer_byte_rate": 2.5e6, "request_percentage": 12.5})]
    )
    assert _rt_response(48, dr, v) == dr
    err = qm.DescribeClientQuotasResponse(42, "bad filter", None)
    assert _rt_response(48, err, v) == err
    ar = qm.AlterClientQuotasResponse(
        [qm.QuotaAlterResult(((U, "alice"),)), qm.QuotaAlterResult(((CID, None),), 42, "Invalid key x")]
    )
    assert _rt_response(49, ar, v) == ar


def test_names_are_sanitized_as_kafka_does():
    # Java's URLEncoder keeps letters, digits and "-_.", writes a space as "+" (Kafka makes it %20), "*" as %2A
    assert sanitize("alice") == "alice"
    assert sanitize("CN=a b,O=x*") == "CN%3Da%20b%2CO%3Dx%2A"
    assert sanitize("user@ex.com/x~y") == "user%40ex.com%2Fx%7Ey"
    assert sanitize("ü") == "%C3%BC"
    assert sanitize(DEFAULT) == DEFAULT
    for name in ("CN=a b,O=x*", "user@ex.com/x~y", "ü", DEFAULT, "a+b"):
        assert desanitize(sanitize(name)) == name
    assert znode_name(QuotaEntity("a/b", "c 1")) == ("users", "a%2Fb/clients/c%201")
    assert znode_name(QuotaEntity(None, DEFAULT)) == ("clients", DEFAULT)
    assert entity_of("users", "a%2Fb/clients/c%201") == QuotaEntity("a/b", "c 1")
    assert entity_of("users", DEFAULT) == QuotaEntity(DEFAULT, None)
    assert entity_of("clients", "c%2A") == QuotaEntity(None, "c*")
    assert entity_of("topics", "t") is None
    # Kafka's ZooKeeper mode writes byte rates as longs, the request percentage as a double
    assert format_value("producer_byte_rate", 1048576.0) == "1048576"
    assert format_value("request_percentage", 200) == "200.0"


def test_alter_validation_names_the_key_with_kafkas_error():
    assert qh.parse_entity(((U, "alice"), (CID, None))) == QuotaEntity("alice", DEFAULT)
    assert qh.parse_entity(((CID, "c"),)) == QuotaEntity(None, "c")
    assert qh.parse_entity(((U, None),)) == QuotaEntity(DEFAULT, None)
    bad_entities = {
        (): "Invalid empty client quota entity",
        (("group", "g"),): "Unhandled client quota entity type: group",
        ((U, "a"), (U, "b")): "duplicate entity type user",
        ((U, ""),): "Empty user not supported",
        ((U, DEFAULT),): "reserved",
        (("ip", "10.0.0.1"),): "ip quotas",
        (("ip", None), (U, "a")): "IP entity should not be used",
    }
    for entity, text in bad_entities.items():
        with pytest.raises(InvalidRequest, match=text) as e:
            qh.parse_entity(entity)
        assert e.value.code == 42
    assert qh.parse_ops(
        [qm.QuotaOp("producer_byte_rate", 1024.0), qm.QuotaOp("request_percentage", 0, True)]
    ) == {
        "producer_byte_rate": 1024.0,
        "request_percentage": None,
    }
    bad_ops = {
        ("producer_byte_rate", -5.0): "producer_byte_rate must be a positive number",
        ("consumer_byte_rate", 0.0): "consumer_byte_rate must be a positive number",
        ("request_percentage", 0.0): "request_percentage must be a positive number",
        ("request_percentage", math.nan): "request_percentage must be a positive number",
        ("consumer_byte_rate", math.inf): "consumer_byte_rate must be a positive number",
        ("producer_byte_rate", 10.5): "producer_byte_rate must be a LONG value",
        ("producer_byte_rate", 1e30): "producer_byte_rate must be a LONG value",
        ("controller_mutation_rate", 5.0): "Invalid configuration key controller_mutation_rate",
        ("bogus", 5.0): "Invalid configuration key bogus",
    }
    for (key, value), text in bad_ops.items():
        with pytest.raises(InvalidRequest, match=text):
            qh.parse_ops([qm.QuotaOp(key, value)])
    with pytest.raises(InvalidRequest, match="Duplicate quota key producer_byte_rate"):
        qh.parse_ops([qm.QuotaOp("producer_byte_rate", 1.0), qm.QuotaOp("producer_byte_rate", 2.0)])
    assert qh.check_value("request_percentage", 12.5) == 12.5


ENTITIES = {
    QuotaEntity("alice", None): {"producer_byte_rate": 1.0},
    QuotaEntity("alice", "c1"): {"producer_byte_rate": 2.0},
    QuotaEntity("alice", DEFAULT): {"producer_byte_rate": 3.0},
    QuotaEntity(DEFAULT, None): {"consumer_byte_rate": 4.0},
    QuotaEntity(DEFAULT, DEFAULT): {"consumer_byte_rate": 5.0},
    QuotaEntity(None, "c1"): {"request_percentage": 6.0},
    QuotaEntity(None, DEFAULT): {"request_percentage": 7.0},
}


def _found(components, strict=False):
    comps = [qm.QuotaFilterComponent(*c) for c in components]
    return sorted((e.entity for e in qh.describe(ENTITIES, comps, strict)), key=_key)


def _key(entity):
    return [(t, n or "") for t, n in entity]


def test_describe_filters_as_kafka():
    assert len(_found([])) == len(ENTITIES)
    assert _found([], strict=True) == []
    assert _found([(U, qm.MATCH_EXACT, "alice")]) == sorted(
        [((U, "alice"),), ((U, "alice"), (CID, "c1")), ((U, "alice"), (CID, None))], key=_key
    )
    assert _found([(U, qm.MATCH_EXACT, "alice")], strict=True) == [((U, "alice"),)]
    assert _found([(U, qm.MATCH_DEFAULT, None)], strict=True) == [((U, None),)]
    assert _found([(U, qm.MATCH_DEFAULT, None), (CID, qm.MATCH_DEFAULT, None)]) == [((U, None), (CID, None))]
    # "any specified name" includes the default, as Kafka's image matches by type
    assert _found([(CID, qm.MATCH_ANY, None)], strict=True) == sorted(
        [((CID, "c1"),), ((CID, None),)], key=_key
    )
    assert len(_found([(CID, qm.MATCH_ANY, None)])) == 5
    assert _found([(U, qm.MATCH_EXACT, "bob")]) == []
    assert _found([("ip", qm.MATCH_ANY, None)]) == []  # no ip quotas here
    entry = qh.describe(ENTITIES, [qm.QuotaFilterComponent(CID, qm.MATCH_EXACT, "c1")], True)
    assert entry == [qm.QuotaEntry(((CID, "c1"),), {"request_percentage": 6.0})]


def test_describe_bad_filters_get_kafkas_codes():
    bad = {
        ("", qm.MATCH_ANY, None): (InvalidRequest, "Invalid empty entity type"),
        ("group", qm.MATCH_ANY, None): (UnsupportedVersion, "Unsupported entity type group"),
        (U, qm.MATCH_EXACT, None): (InvalidRequest, "MATCH_TYPE_EXACT, but set match string to null"),
        (U, qm.MATCH_DEFAULT, "x"): (InvalidRequest, "MATCH_TYPE_DEFAULT, but also"),
        (U, qm.MATCH_ANY, "x"): (InvalidRequest, "MATCH_TYPE_SPECIFIED, but also"),
        (U, 7, None): (InvalidRequest, "Unknown match type 7"),
    }
    for component, (error, text) in bad.items():
        with pytest.raises(error, match=text):
            _found([component])
    with pytest.raises(InvalidRequest, match="cannot appear more than once"):
        _found([(U, qm.MATCH_ANY, None), (U, qm.MATCH_DEFAULT, None)])
    with pytest.raises(InvalidRequest, match="IP filter component should not be used"):
        _found([("ip", qm.MATCH_ANY, None), (CID, qm.MATCH_ANY, None)])
    assert UnsupportedVersion.code == 35


def test_file_store_persists_atomically_and_loads(tmp_path):
    table = QuotaTable()
    calls = []
    table.add_listener(lambda: calls.append(1))
    store = FileQuotaStore(tmp_path, table)
    store.alter(QuotaEntity("alice", None), {"producer_byte_rate": 1024.0, "request_percentage": 50.0})
    store.alter(QuotaEntity(None, DEFAULT), {"consumer_byte_rate": 2048.0})
    store.alter(QuotaEntity("alice", None), {"request_percentage": None})
    assert len(calls) == 3
    assert table.quotas_for("alice", "x").producer_byte_rate == 1024.0
    assert table.quotas_for("alice", "x").request_percentage is None
    assert table.quotas_for("bob", "x").consumer_byte_rate == 2048.0
    doc = json.loads((tmp_path / STORE_FILE).read_text())
    assert doc == [
        {"client-id": DEFAULT, "quotas": {"consumer_byte_rate": 2048.0}},
        {"user": "alice", "quotas": {"producer_byte_rate": 1024.0}},
    ]
    assert not list(tmp_path.glob("*.tmp"))
    again = QuotaTable()
    FileQuotaStore(tmp_path, again).load()
    assert again.entities() == table.entities()
    store.alter(QuotaEntity(None, DEFAULT), {"consumer_byte_rate": None})  # the last key: the entity goes
    assert QuotaEntity(None, DEFAULT) not in table.entities()


def test_a_malformed_file_is_ignored_not_fatal(tmp_path):
    (tmp_path / STORE_FILE).write_text("{not json")
    table = QuotaTable()
    FileQuotaStore(tmp_path, table).load()
    assert table.entities() == {}


def _session(user):
    s = Session("10.1.2.3:5555")
    s.principal = Principal("User", user)
    return s


def test_describe_needs_describe_configs_and_alter_needs_alter_configs_on_the_cluster():
    az = Authorizer({"User:admin"})
    pattern = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)
    az.update(
        [
            AclBinding(
                pattern, AccessControlEntry("User:reader", "*", Operation.DESCRIBE_CONFIGS, Permission.ALLOW)
            ),
            AclBinding(
                pattern, AccessControlEntry("User:writer", "*", Operation.ALTER_CONFIGS, Permission.ALLOW)
            ),
        ]
    )
    desc = Enforcer(az, dict, ALL_RULES).wrap(
        ApiKey.DESCRIBE_CLIENT_QUOTAS, lambda r, s: qm.DescribeClientQuotasResponse()
    )
    alter = Enforcer(az, dict, ALL_RULES).wrap(
        ApiKey.ALTER_CLIENT_QUOTAS,
        lambda r, s: qm.AlterClientQuotasResponse([qm.QuotaAlterResult(((U, "a"),))]),
    )
    dreq = qm.DescribeClientQuotasRequest()
    areq = qm.AlterClientQuotasRequest(
        [qm.QuotaAlteration(((U, "a"),), [qm.QuotaOp("producer_byte_rate", 1.0)])]
    )
    assert desc(dreq, _session("reader")).error_code == 0
    assert desc(dreq, _session("writer")).error_code == 0  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert desc(dreq, _session("nobody")).error_code == ClusterAuthorizationFailed.code
    assert alter(areq, _session("writer")).entries[0].error_code == 0
    denied = alter(areq, _session("reader"))
    assert [(e.entity, e.error_code) for e in denied.entries] == [
        (((U, "a"),), ClusterAuthorizationFailed.code)
    ]
