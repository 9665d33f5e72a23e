"""DescribeProducers (61), DescribeTransactions (65) and ListTransactions (66): our codecs against Kafka's JSON
and kafka-python's independent encoder, and the typed messages through the adapters at every version."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol import admin as kp_admin
from kafka.protocol.schemas import load_json
from test_protocol_schemas import (
    _check_struct,
    _decode,
    _encode,
    _kp_decode_encode,
    _kp_encode,
    _same,
    _struct_strategy,
)
from test_reassignment import _response_through_the_wire, _through_the_wire

from pyspark_logsource.protocol import codecs
from pyspark_logsource.protocol import txn_admin_messages as tam
from pyspark_logsource.protocol.schema import Codec, Message, versions

pytestmark = [
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

MESSAGES: list[tuple[Message, type]] = [
    (tam.DESCRIBE_PRODUCERS_REQUEST, kp_admin.DescribeProducersRequest),
    (tam.DESCRIBE_PRODUCERS_RESPONSE, kp_admin.DescribeProducersResponse),
    (tam.DESCRIBE_TRANSACTIONS_REQUEST, kp_admin.DescribeTransactionsRequest),
    (tam.DESCRIBE_TRANSACTIONS_RESPONSE, kp_admin.DescribeTransactionsResponse),
    (tam.LIST_TRANSACTIONS_REQUEST, kp_admin.ListTransactionsRequest),
    (tam.LIST_TRANSACTIONS_RESPONSE, kp_admin.ListTransactionsResponse),
]
CASES = [(m, v, kp) for m, kp in MESSAGES for v in range(m.version_range()[0], m.version_range()[1] + 1)]


def test_the_apis_are_served_at_every_version_kafka_has():
    assert codecs.SUPPORTED_VERSIONS[61] == (0, 0)
    assert codecs.SUPPORTED_VERSIONS[65] == (0, 0)
    assert codecs.SUPPORTED_VERSIONS[66] == (0, 2)


@pytest.mark.parametrize("msg,kp", MESSAGES, ids=lambda x: getattr(x, "name", ""))
def test_fields_match_kafka_json(msg: Message, kp: type) -> None:
    kj = load_json(msg.name)
    assert msg.flexible == kj["flexibleVersions"]
    assert msg.version_range() == versions(kj["validVersions"])
    errors = []
    lo, hi = msg.version_range()
    for v in range(lo, hi + 1):
        errors += _check_struct(msg.name, msg.name, msg.fields, kj["fields"], v, msg.is_flexible(v))
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("msg,version,kp", CASES, ids=lambda x: getattr(x, "name", str(x)))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_codec_round_trips_and_matches_kafka_python(msg: Message, version: int, kp: type, data: Any) -> None:
    codec = Codec(msg, version)
    d = data.draw(_struct_strategy(msg.fields, version, codec.flexible), label=msg.name)
    ours = _encode(codec, d)
    assert _same(d, _decode(codec, ours))
    assert ours == _kp_encode(kp, msg, version, d), f"{codec!r}: our bytes differ from kafka-python's"
    assert _kp_decode_encode(kp, version, ours) == ours


@pytest.mark.parametrize("version", [0, 1, 2])
def test_list_transactions_through_the_adapters(version):
    req = tam.ListTransactionsRequest(["Ongoing", "Bogus"], [7, 9], 60000, "^app-")
    got = _through_the_wire(req, version)
    # v0 has no duration filter, v1 no pattern: the broker reads them as absent
    assert got == tam.ListTransactionsRequest(
        ["Ongoing", "Bogus"], [7, 9], 60000 if version >= 1 else -1, "^app-" if version >= 2 else None
    )
    resp = tam.ListTransactionsResponse(
        [tam.TransactionListing("a", 7, "Ongoing"), tam.TransactionListing("b", 9, "Empty")], ["Bogus"]
    )
    assert _response_through_the_wire(req, resp, version) == resp


def test_describe_transactions_through_the_adapters():
    req = tam.DescribeTransactionsRequest(["a", "missing"])
    assert _through_the_wire(req, 0) == req
    resp = tam.DescribeTransactionsResponse(
        [
            tam.TransactionDescription("a", 0, "Ongoing", 60000, 1700, 7, 3, [("t", 0), ("t", 2), ("u", 1)]),
            tam.TransactionDescription("missing", 105),
        ]
    )
    assert _response_through_the_wire(req, resp, 0) == resp


def test_describe_producers_through_the_adapters():
    req = tam.DescribeProducersRequest([("t", 0), ("t", 1), ("u", 0)])
    assert _through_the_wire(req, 0) == req
    resp = tam.DescribeProducersResponse(
        [
            tam.PartitionProducers("t", 0, 0, None, [tam.ProducerInfo(7, 3, 41, 1700, -1, 120)]),
            tam.PartitionProducers("t", 1, 6, "broker 2 leads t-1"),
        ]
    )
    assert _response_through_the_wire(req, resp, 0) == resp
