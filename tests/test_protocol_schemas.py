"""Kafka's message schemas (``protocol/schemas.py``) against an independent implementation.

kafka-python 3.0 builds its codecs from its own copy of Kafka's message JSON
with code that shares nothing with ours, so for every (API key, version) we
serve, and for request and response alike:

* our codec round-trips a hypothesis-generated message;
* our bytes are identical to kafka-python's encoding of the same message;
* our codec decodes kafka-python's bytes to the message, and kafka-python
  decodes ours (and re-encodes them to the same bytes).

A structural test also walks every field of every version against
kafka-python's JSON: names, order, types, nullability, tags, and the defaults
that surface (those of tagged fields and of fields a version lacks).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol import admin as kp_admin
from kafka.protocol import consumer as kp_consumer
from kafka.protocol import metadata as kp_metadata
from kafka.protocol import producer as kp_producer
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas import load_json
from kafka.protocol.schemas.fields.codecs import BitField

from pyspark_logsource.protocol import schemas as S
from pyspark_logsource.protocol.primitives import Reader, Writer
from pyspark_logsource.protocol.schema import Codec, Field, Message, _default_of, message, versions

# kafka-python 3.0 loads its JSON with importlib.resources' deprecated read_text
pytestmark = [
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


class OffsetForLeaderEpochRequest(ApiMessage):  # kafka-python 3.0 has Kafka's JSON for API 23 but no class
    pass


class OffsetForLeaderEpochResponse(ApiMessage):
    pass


#: api key -> kafka-python's (request, response) classes, for every key in SCHEMAS.
KP_CLASSES: dict[int, tuple[type, type]] = {
    0: (kp_producer.ProduceRequest, kp_producer.ProduceResponse),
    1: (kp_consumer.FetchRequest, kp_consumer.FetchResponse),
    2: (kp_consumer.ListOffsetsRequest, kp_consumer.ListOffsetsResponse),
    3: (kp_metadata.MetadataRequest, kp_metadata.MetadataResponse),
    8: (kp_consumer.OffsetCommitRequest, kp_consumer.OffsetCommitResponse),
    9: (kp_consumer.OffsetFetchRequest, kp_consumer.OffsetFetchResponse),
    10: (kp_metadata.FindCoordinatorRequest, kp_metadata.FindCoordinatorResponse),
    11: (kp_consumer.JoinGroupRequest, kp_consumer.JoinGroupResponse),
    12: (kp_consumer.HeartbeatRequest, kp_consumer.HeartbeatResponse),
    13: (kp_consumer.LeaveGroupRequest, kp_consumer.LeaveGroupResponse),
    14: (kp_consumer.SyncGroupRequest, kp_consumer.SyncGroupResponse),
    15: (kp_admin.DescribeGroupsRequest, kp_admin.DescribeGroupsResponse),
    16: (kp_admin.ListGroupsRequest, kp_admin.ListGroupsResponse),
    18: (kp_metadata.ApiVersionsRequest, kp_metadata.ApiVersionsResponse),
    19: (kp_admin.CreateTopicsRequest, kp_admin.CreateTopicsResponse),
    20: (kp_admin.DeleteTopicsRequest, kp_admin.DeleteTopicsResponse),
    22: (kp_producer.InitProducerIdRequest, kp_producer.InitProducerIdResponse),
    27: (kp_producer.WriteTxnMarkersRequest, kp_producer.WriteTxnMarkersResponse),
    24: (kp_producer.AddPartitionsToTxnRequest, kp_producer.AddPartitionsToTxnResponse),
    25: (kp_producer.AddOffsetsToTxnRequest, kp_producer.AddOffsetsToTxnResponse),
    26: (kp_producer.EndTxnRequest, kp_producer.EndTxnResponse),
    28: (kp_producer.TxnOffsetCommitRequest, kp_producer.TxnOffsetCommitResponse),
    23: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    32: (kp_admin.DescribeConfigsRequest, kp_admin.DescribeConfigsResponse),
    60: (kp_admin.DescribeClusterRequest, kp_admin.DescribeClusterResponse),
}

#: The group APIs: transcribed, not served yet (so not in SCHEMAS), checked all the same.
GROUP_SCHEMAS: dict[int, tuple[Message, Message]] = {
    11: (S.JOIN_GROUP_REQUEST, S.JOIN_GROUP_RESPONSE),
    12: (S.HEARTBEAT_REQUEST, S.HEARTBEAT_RESPONSE),
    13: (S.LEAVE_GROUP_REQUEST, S.LEAVE_GROUP_RESPONSE),
    14: (S.SYNC_GROUP_REQUEST, S.SYNC_GROUP_RESPONSE),
    15: (S.DESCRIBE_GROUPS_REQUEST, S.DESCRIBE_GROUPS_RESPONSE),
    16: (S.LIST_GROUPS_REQUEST, S.LIST_GROUPS_RESPONSE),
}

#: The consumer protocol's embedded formats (no API key): ours -> kafka-python's class.
EMBEDDED: list[tuple[Message, type]] = [
    (S.CONSUMER_PROTOCOL_SUBSCRIPTION, kp_consumer.ConsumerProtocolSubscription),
    (S.CONSUMER_PROTOCOL_ASSIGNMENT, kp_consumer.ConsumerProtocolAssignment),
]


def _vrange(spec: str) -> range:
    lo, hi = versions(spec)
    return range(lo, hi + 1)


def _has(spec: str, v: int) -> bool:
    lo, hi = versions(spec)
    return lo <= v <= hi


def _cases() -> list[Any]:
    cases = []
    for table in (S.SCHEMAS, GROUP_SCHEMAS):
        for key, pair in sorted(table.items()):
            for msg, kp_cls in zip(pair, KP_CLASSES[key], strict=True):
                for v in _vrange(msg.valid):
                    cases.append(pytest.param(msg, v, kp_cls, id=f"{key}-{msg.name}-v{v}"))
    for msg, kp_cls in EMBEDDED:
        for v in _vrange(msg.valid):
            cases.append(pytest.param(msg, v, kp_cls, id=f"{msg.name}-v{v}"))
    return cases


CASES = _cases()


# ------------------------------------------------------------------ messages from the schema


def _in_version(f: Field, v: int, flexible: bool) -> bool:
    if f.tag is not None:
        return flexible and _has(f.tagged, v)
    return _has(f.versions, v)


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
_SCALARS = {
    "int8": st.integers(-(1 << 7), (1 << 7) - 1),
    "int16": st.integers(-(1 << 15), (1 << 15) - 1),
    "uint16": st.integers(0, (1 << 16) - 1),
    "int32": st.integers(-(1 << 31), (1 << 31) - 1),
    "int64": st.integers(-(1 << 63), (1 << 63) - 1),
    "bool": st.booleans(),
    "uuid": st.binary(min_size=16, max_size=16),
    "float64": st.floats(allow_nan=False),
    "string": _text,
    "bytes": st.binary(max_size=16),
    "records": st.binary(max_size=16),
}


def _field_strategy(f: Field, v: int, flexible: bool) -> st.SearchStrategy:
    nullable = _has(f.nullable, v) or f.type == "records"
    if f.fields:
        item = _struct_strategy(f.fields, v, flexible)
        s = st.lists(item, max_size=2) if f.is_array else item
    elif f.is_array:
        s = st.lists(_SCALARS[f.type[2:]], max_size=3)
    else:
        s = _SCALARS[f.type]
    return st.none() | s if nullable else s


def _struct_strategy(fields: tuple[Field, ...], v: int, flexible: bool) -> st.SearchStrategy:
    plain = {f.name: _field_strategy(f, v, flexible) for f in fields if f.tag is None and _has(f.versions, v)}
    tagged = {
        f.name: _field_strategy(f, v, flexible)
        for f in fields
        if f.tag is not None and _in_version(f, v, flexible)
    }
    return st.fixed_dictionaries(plain, optional=tagged)


def _encode(codec: Codec, d: dict) -> bytes:
    w = Writer()
    codec.write(w, d)
    return b"".join(bytes(p) for p in w.parts) + bytes(w.buf)


def _decode(codec: Codec, data: bytes) -> dict:
    r = Reader(data)
    out = codec.read(r)
    r.done(codec.message.name)
    return out


def _same(expected: Any, got: Any) -> bool:
    """``got`` (a decoded value) carries every value of ``expected`` (keys missing from it read as defaults)."""
    if isinstance(expected, dict):
        return isinstance(got, dict) and all(k in got and _same(x, got[k]) for k, x in expected.items())
    if isinstance(expected, list):
        return isinstance(got, list) and len(got) == len(expected) and all(map(_same, expected, got))
    if isinstance(expected, bytes) and isinstance(got, memoryview):
        return got.tobytes() == expected
    return type(got) is type(expected) and got == expected


# ------------------------------------------------------------------ to and from kafka-python's objects


def _bits(value: int) -> set[int]:
    return {b for b in range(32) if (value >> b) & 1}


def _kp_field(kp_fields: dict, f: Field) -> Any:
    if f.name in kp_fields:
        return kp_fields[f.name]
    # kafka-python renames the authorized-operations bitfields (json_patch) of Metadata and DescribeCluster
    assert f.name.endswith("authorized_operations"), f.name
    return kp_fields["authorized_operations"]


def _to_kp_value(kf: Any, f: Field, value: Any) -> Any:
    if value is None:
        return None
    if f.fields:
        if f.is_array:
            return [_to_kp_struct(kf.fields, f.fields, x, kf.data_class) for x in value]
        return _to_kp_struct(kf.fields, f.fields, value, kf.data_class)
    if getattr(kf, "_type", None) is BitField:
        return _bits(value)
    if f.type == "uuid":
        return uuid.UUID(bytes=bytes(value))
    return value


def _to_kp_struct(kp_fields: dict, fields: tuple[Field, ...], d: dict, cls: type, **kw: Any) -> Any:
    vals = {}
    for f in fields:
        if f.name in d:
            kf = _kp_field(kp_fields, f)
            vals[kf.name] = _to_kp_value(kf, f, d[f.name])
    return cls(**kw, **vals)


def _kp_encode(kp_cls: type, msg: Message, v: int, d: dict) -> bytes:
    obj = _to_kp_struct(kp_cls.fields, msg.fields, d, kp_cls, version=v)
    if issubclass(kp_cls, ApiMessage):
        return bytes(obj.encode(version=v))
    return bytes(obj.encode(version=v, header=False))  # the consumer protocol: body without the int16 version


def _kp_decode_encode(kp_cls: type, v: int, data: bytes) -> bytes:
    if issubclass(kp_cls, ApiMessage):
        obj = ApiMessage.decode.__func__(
            kp_cls, data, version=v
        )  # not ApiVersionsResponse's v0-on-error override
        obj._header = None  # decoding leaves it unset; encode() reads it
        return bytes(obj.encode(version=v))
    obj = kp_cls.decode(data, version=v, header=False)
    return bytes(
        kp_cls(version=v, **{f.name: getattr(obj, f.name) for f in kp_cls._struct._fields}).encode(
            version=v, header=False
        )
    )


# ------------------------------------------------------------------ the cross-check


@pytest.mark.parametrize("msg,version,kp_cls", CASES)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_codec_matches_kafka_python(msg: Message, version: int, kp_cls: type, data: Any) -> None:
    codec = Codec(msg, version)
    d = data.draw(_struct_strategy(msg.fields, version, codec.flexible), label=msg.name)

    ours = _encode(codec, d)
    assert _same(d, _decode(codec, ours)), "round trip"

    theirs = _kp_encode(kp_cls, msg, version, d)
    assert ours == theirs, f"{codec!r}: our bytes differ from kafka-python's"
    assert _same(d, _decode(codec, theirs))
    assert _kp_decode_encode(kp_cls, version, ours) == ours, "kafka-python cannot read our bytes back"


def test_every_served_version_is_cross_checked() -> None:
    """Every (key, version) in SCHEMAS, both directions, is a case above, and kafka-python knows it."""
    covered = {(p.values[0].name, p.values[1]) for p in CASES}
    for key, (req, resp) in S.SCHEMAS.items():
        kp_req, kp_resp = KP_CLASSES[key]
        assert kp_req.API_KEY == kp_resp.API_KEY == key
        for msg, kp_cls in ((req, kp_req), (resp, kp_resp)):
            assert msg.name == kp_cls.name
            for v in _vrange(msg.valid):
                assert (msg.name, v) in covered
                assert v <= kp_cls.max_version, f"kafka-python has no {msg.name} v{v}"


# ------------------------------------------------------------------ field by field against the JSON


def _kafka_default(j: dict) -> Any:
    t, d = j["type"], j.get("default")
    if d is None or d == "":
        if t.startswith("[]"):
            return []
        return {
            "int8": 0,
            "int16": 0,
            "uint16": 0,
            "int32": 0,
            "int64": 0,
            "bool": False,
            "float64": 0.0,
            "uuid": bytes(16),
            "string": "",
            "bytes": b"",
            "records": None,
        }.get(t, ...)
    if d == "null":
        return None
    if t == "bool":
        return d in ("true", True)
    if t in ("int8", "int16", "uint16", "int32", "int64"):
        return int(d, 0) if isinstance(d, str) else int(d)
    return d


#: Defaults our engine gives that Kafka's JSON does not: schema.py makes every
#: absent nullable string null, where these two default to "" in Kafka.
KNOWN_DEFAULT_DEVIATIONS = {
    ("FindCoordinatorResponse", "error_message"),
    ("DescribeConfigsResponse", "documentation"),
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _check_struct(
    top: str, path: str, ours: tuple[Field, ...], kj: list[dict], v: int, flexible: bool
) -> list[str]:
    def present(tag: Any, tagged: str, vers: str) -> bool:
        return flexible and _has(tagged, v) if tag is not None else _has(vers, v)

    k_in = [j for j in kj if present(j.get("tag"), j.get("taggedVersions", "none"), j["versions"])]
    o_in = [f for f in ours if _in_version(f, v, flexible)]
    kn = [(_snake(j["name"]), j.get("tag") is not None) for j in k_in]
    on = [(f.name, f.tag is not None) for f in o_in]
    if kn != on:
        return [f"{path} v{v}: fields {on} != Kafka's {kn}"]
    errors = []
    by_name = {f.name: f for f in ours}
    for j in kj:  # the defaults that surface: fields this version lacks, and tagged fields
        f = by_name.get(_snake(j["name"]))
        if (
            f is None
            or (f in o_in and f.tag is None)
            or "fields" in j
            or (top, f.name) in KNOWN_DEFAULT_DEVIATIONS
        ):
            continue
        if _default_of(f, v) != _kafka_default(j):
            errors.append(
                f"{path}.{f.name} v{v}: default {_default_of(f, v)!r} != Kafka's {_kafka_default(j)!r}"
            )
    for j, f in zip(k_in, o_in, strict=True):
        p = f"{path}.{f.name}"
        if "fields" in j:
            if not f.fields or f.is_array != j["type"].startswith("[]"):
                errors.append(
                    f"{p} v{v}: not a struct{' array' if f.is_array else ''} like Kafka's {j['type']}"
                )
            else:
                errors += _check_struct(top, p, f.fields, j["fields"], v, flexible)
        elif f.type != j["type"]:
            errors.append(f"{p} v{v}: type {f.type} != Kafka's {j['type']}")
        if _has(f.nullable, v) != _has(j.get("nullableVersions", "none"), v):
            errors.append(f"{p} v{v}: nullable {f.nullable} != Kafka's {j.get('nullableVersions')}")
        if f.tag != j.get("tag"):
            errors.append(f"{p} v{v}: tag {f.tag} != Kafka's {j.get('tag')}")
    return errors


ALL_MESSAGES = sorted(
    {m.name: m for m in vars(S).values() if isinstance(m, Message)}.values(), key=lambda m: m.name
)


@pytest.mark.parametrize("msg", ALL_MESSAGES, ids=lambda m: m.name)
def test_fields_match_kafka_json(msg: Message) -> None:
    kj = load_json(msg.name)
    assert msg.flexible == kj["flexibleVersions"]
    lo, hi = msg.version_range()
    klo, khi = versions(kj["validVersions"])
    assert klo <= lo <= hi <= khi, f"{msg.valid} is not within Kafka's {kj['validVersions']}"
    errors = []
    for v in range(lo, hi + 1):
        errors += _check_struct(msg.name, msg.name, msg.fields, kj["fields"], v, msg.is_flexible(v))
    assert not errors, "\n".join(errors)


# ------------------------------------------------------------------ defaults that matter above the codec


def test_absent_null_defaults_read_as_none() -> None:
    """A field a version lacks reads as Kafka's default: null for group_instance_id, rack_id, user_data."""
    d = _decode(
        Codec(S.OFFSET_COMMIT_REQUEST, 6),
        _encode(
            Codec(S.OFFSET_COMMIT_REQUEST, 6),
            {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m", "topics": []},
        ),
    )
    assert d["group_instance_id"] is None
    join = Codec(S.JOIN_GROUP_REQUEST, 4)
    d = _decode(
        join,
        _encode(
            join,
            {
                "group_id": "g",
                "session_timeout_ms": 1,
                "rebalance_timeout_ms": 2,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [],
            },
        ),
    )
    assert d["group_instance_id"] is None and d["reason"] is None
    sub = Codec(S.CONSUMER_PROTOCOL_SUBSCRIPTION, 2)
    d = _decode(
        sub, _encode(sub, {"topics": ["t"], "user_data": None, "owned_partitions": [], "generation_id": 3})
    )
    assert d["rack_id"] is None and d["generation_id"] == 3


def test_null_default_tagged_field_is_written_when_empty() -> None:
    """FetchRequest v12's cluster_id (tag 0) defaults to null: "" is sent, null is not."""
    codec = Codec(S.FETCH_REQUEST, 12)
    base = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    without = _encode(codec, {**base, "cluster_id": None})
    empty = _encode(codec, {**base, "cluster_id": ""})
    assert without.endswith(b"\x00") and empty.endswith(b"\x01\x00\x01\x01")
    assert _decode(codec, without)["cluster_id"] is None and _decode(codec, empty)["cluster_id"] == ""


# ------------------------------------------------------------------ engine limitations (schema.py), pinned


def test_absent_struct_reads_as_its_default() -> None:
    """Kafka's default for a (non-nullable) struct is the struct of its members' defaults."""
    codec = Codec(S.FETCH_RESPONSE, 12)
    part = {
        "partition_index": 0,
        "error_code": 0,
        "high_watermark": 0,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": None,
    }
    d = _decode(
        codec,
        _encode(
            codec,
            {
                "throttle_time_ms": 0,
                "error_code": 0,
                "session_id": 0,
                "responses": [{"topic": "t", "partitions": [part]}],
            },
        ),
    )
    assert d["responses"][0]["partitions"][0]["current_leader"] == {"leader_id": -1, "leader_epoch": -1}


def test_absent_defaults_are_not_shared_between_reads() -> None:
    codec = Codec(S.METADATA_RESPONSE, 4)
    part = {"error_code": 0, "partition_index": 0, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1]}
    data = _encode(
        codec,
        {
            "throttle_time_ms": 0,
            "brokers": [],
            "cluster_id": None,
            "controller_id": 1,
            "topics": [{"error_code": 0, "name": "t", "is_internal": False, "partitions": [part]}],
        },
    )
    _decode(codec, data)["topics"][0]["partitions"][0]["offline_replicas"].append(7)
    assert _decode(codec, data)["topics"][0]["partitions"][0]["offline_replicas"] == []


def test_nullable_struct_has_a_presence_byte() -> None:
    """Kafka writes a nullable struct as int8 -1 (null) or 1 followed by the struct."""
    msg = message("NullableStruct", "0", "none", Field("s", "S", nullable="0+", fields=(Field("a", "int8"),)))
    codec = Codec(msg, 0)
    assert _encode(codec, {"s": None}) == b"\xff"
    assert _encode(codec, {"s": {"a": 5}}) == b"\x01\x05"
