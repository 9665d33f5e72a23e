"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46).

- The codecs against Kafka's JSON and kafka-python's independent encoder (every version we serve),
  and the typed messages through the adapters.
- The rules without a server: preferred / unclean elections, Kafka's ``reassignTo`` and target checks.
- A single broker answers as Kafka with one broker.
- A 4-broker cluster (real ZooKeeper, broker processes): a partition of replication factor 3 moved from
  brokers [1, 2, 3] to [2, 3, 4] under an idempotent ``acks=all`` producer, its leader killed -9 in the
  middle: every acknowledged record is on the new replicas, the old one's log is gone, Metadata shows the
  target; a preferred election after a failover gives the leadership back; bad input gets Kafka's codes
  and leaves the cluster working. One cluster for all of it.
"""

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

from pyspark_logsource.broker.cluster.election import preferred, unclean
from pyspark_logsource.broker.cluster.paths import LeaderAndIsr
from pyspark_logsource.broker.cluster.reassignment import Assignment, leader_after, validate_target
from pyspark_logsource.errors import (
    ElectionNotNeeded,
    EligibleLeadersNotAvailable,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    PreferredLeaderNotAvailable,
)
from pyspark_logsource.protocol import codecs
from pyspark_logsource.protocol import reassign_messages as rm
from pyspark_logsource.protocol.connection import ClientConnection, RequestReceived, ServerConnection
from pyspark_logsource.protocol.schema import Codec, Message, versions

pytestmark = [
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

# ------------------------------------------------------------------ codecs

MESSAGES: list[tuple[Message, type]] = [
    (rm.ELECT_LEADERS_REQUEST, kp_admin.ElectLeadersRequest),
    (rm.ELECT_LEADERS_RESPONSE, kp_admin.ElectLeadersResponse),
    (rm.ALTER_PARTITION_REASSIGNMENTS_REQUEST, kp_admin.AlterPartitionReassignmentsRequest),
    (rm.ALTER_PARTITION_REASSIGNMENTS_RESPONSE, kp_admin.AlterPartitionReassignmentsResponse),
    (rm.LIST_PARTITION_REASSIGNMENTS_REQUEST, kp_admin.ListPartitionReassignmentsRequest),
    (rm.LIST_PARTITION_REASSIGNMENTS_RESPONSE, kp_admin.ListPartitionReassignmentsResponse),
]
CASES = [(m, v, kp) for m, kp in MESSAGES for v in range(m.version_range()[0], m.version_range()[1] + 1)]


def test_the_apis_are_served_at_the_versions_current_clients_send():
    assert codecs.SUPPORTED_VERSIONS[43] == (0, 2)
    assert codecs.SUPPORTED_VERSIONS[45] == (0, 1)
    assert codecs.SUPPORTED_VERSIONS[46] == (0, 0)


@pytest.mark.parametrize("msg,kp", MESSAGES, ids=lambda x: getattr(x, "name", ""))
def test_fields_match_kafka_json(msg: Message, kp: type) -> None:
    kj = load_json(msg.name)
    assert msg.flexible == kj["flexibleVersions"]
    assert msg.version_range() == versions(kj["validVersions"])  # every version Kafka 4 has
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


def _through_the_wire(req: Any, version: int) -> Any:
    client, server = ClientConnection("t"), ServerConnection()
    _, data = client.request_bytes(req, version)
    (ev,) = server.receive_data(data)
    assert isinstance(ev, RequestReceived)
    return ev.request


def _response_through_the_wire(req: Any, resp: Any, version: int) -> Any:
    from pyspark_logsource.protocol.api_keys import RequestHeader
    from pyspark_logsource.protocol.connection import frame_bytes

    client = ClientConnection()
    cid, _ = client.send_request(req, version)
    parts = ServerConnection.response_parts(RequestHeader(int(req.API_KEY), version, cid, None), resp)
    (got,) = client.receive_data(frame_bytes(parts))
    return got.response


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_messages_through_the_adapters(version):
    req = rm.ElectLeadersRequest(rm.UNCLEAN, {"a": [0, 2], "b": [1]}, 5000)
    got = _through_the_wire(req, version)
    # v0 cannot carry the election type: it is a preferred election
    assert got == rm.ElectLeadersRequest(
        rm.UNCLEAN if version else rm.PREFERRED, {"a": [0, 2], "b": [1]}, 5000
    )
    assert _through_the_wire(rm.ElectLeadersRequest(), version).topic_partitions is None  # all partitions
    resp = rm.ElectLeadersResponse(
        [
            rm.PartitionError("a", 0),
            rm.PartitionError("a", 2, 84, "not needed"),
            rm.PartitionError("b", 1, 80),
        ],
        error_code=0,
    )
    assert _response_through_the_wire(req, resp, version) == resp


@pytest.mark.parametrize("version", [0, 1])
def test_alter_and_list_reassignment_messages_through_the_adapters(version):
    req = rm.AlterPartitionReassignmentsRequest(
        {("t", 0): [2, 3, 4], ("t", 1): None, ("u", 0): [1]}, 9000, True
    )
    assert _through_the_wire(req, version) == req  # None: cancel
    resp = rm.AlterPartitionReassignmentsResponse(
        [rm.PartitionError("t", 0), rm.PartitionError("t", 1, 85, "none")], 0, None
    )
    assert _response_through_the_wire(req, resp, version) == resp
    lreq = rm.ListPartitionReassignmentsRequest({"t": [0, 1]}, 100)
    assert _through_the_wire(lreq, 0) == lreq
    assert _through_the_wire(rm.ListPartitionReassignmentsRequest(), 0).topics is None
    lresp = rm.ListPartitionReassignmentsResponse([rm.OngoingReassignment("t", 0, [2, 3, 4, 1], [4], [1])])
    assert _response_through_the_wire(lreq, lresp, 0) == lresp


# ------------------------------------------------------------------ rules


def test_preferred_election_rules():
    s = LeaderAndIsr(2, 5, [2, 3, 1], 1)
    new = preferred("t", 0, [1, 2, 3], s, {1, 2, 3})
    assert (new.leader, new.leader_epoch, new.isr) == (1, 6, [2, 3, 1])
    with pytest.raises(ElectionNotNeeded):
        preferred("t", 0, [2, 1, 3], s, {1, 2, 3})
    with pytest.raises(PreferredLeaderNotAvailable, match="not in the ISR"):
        preferred("t", 0, [1, 2, 3], LeaderAndIsr(2, 5, [2, 3], 1), {1, 2, 3})
    with pytest.raises(PreferredLeaderNotAvailable, match="not alive"):
        preferred("t", 0, [1, 2, 3], s, {2, 3})


def test_unclean_election_rules():
    with pytest.raises(ElectionNotNeeded):
        unclean("t", 0, [1, 2], LeaderAndIsr(1, 3, [1], 0), {1, 2})
    clean = unclean("t", 0, [1, 2, 3], LeaderAndIsr(1, 3, [1, 3], 0), {2, 3})
    assert (clean.leader, clean.isr) == (3, [3])  # an in-sync replica first
    dirty = unclean("t", 0, [1, 2, 3], LeaderAndIsr(-1, 3, [1], 0), {2, 3})
    assert (dirty.leader, dirty.leader_epoch, dirty.isr) == (2, 4, [2])
    with pytest.raises(EligibleLeadersNotAvailable):
        unclean("t", 0, [1, 2], LeaderAndIsr(-1, 3, [1], 0), {3})


def test_reassign_to_is_kafkas_and_a_new_target_starts_from_the_original_replicas():
    a = Assignment([1, 2, 3], [], []).reassign_to([2, 3, 4])
    assert a == Assignment([2, 3, 4, 1], [4], [1])
    assert (a.original, a.target, a.reassigning) == ([2, 3, 1], [2, 3, 4], True)
    again = a.reassign_to([3, 5, 6])  # replaces the one in progress: still from [1, 2, 3]
    assert again == Assignment([3, 5, 6, 2, 1], [5, 6], [2, 1])
    cancel = a.reassign_to(a.original)
    assert cancel == Assignment([2, 3, 1], [], []) and not cancel.reassigning
    assert leader_after([2, 3, 4], LeaderAndIsr(1, 0, [1, 2, 3, 4], 0), {1, 2, 3, 4}) == 2
    assert leader_after([2, 3, 4], LeaderAndIsr(3, 0, [1, 2, 3, 4], 0), {1, 2, 3, 4}) == 3
    assert leader_after([4], LeaderAndIsr(3, 0, [3], 0), {3, 4}) is None


@pytest.mark.parametrize(
    "target,allow,error",
    [
        ([], True, InvalidReplicaAssignment),
        ([2, 2, 3], True, InvalidReplicaAssignment),
        ([2, -1, 3], True, InvalidReplicaAssignment),
        ([2, 3, 9], True, InvalidReplicaAssignment),  # broker 9 does not exist
        ([2, 3], False, InvalidReplicationFactor),
        ([2, 3], True, None),
        ([2, 3, 4], False, None),
    ],
)
def test_target_checks(target, allow, error):
    current = Assignment([1, 2, 3], [], [])
    if error is None:
        validate_target(target, {1, 2, 3, 4}, current, allow)
    else:
        with pytest.raises(error):
            validate_target(target, {1, 2, 3, 4}, current, allow)
