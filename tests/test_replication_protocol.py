"""Fetch v12's replication fields: a follower's last fetched epoch and the leader's diverging epoch."""

from __future__ import annotations

import pytest

from pyspark_logsource.protocol import codecs as c
from pyspark_logsource.protocol import messages as m
from pyspark_logsource.protocol.primitives import Reader, Writer


def _roundtrip(codec, to, frm, obj, v):
    w = Writer()
    codec.write(w, to(obj, v))
    assert not w.parts
    return frm(codec.read(Reader(bytes(w.buf))), v)


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_replication_fields_travel_from_v12(version):
    api = c.APIS[m.ApiKey.FETCH]
    req_codec, resp_codec = api.codecs[version]
    req = m.FetchRequest([m.FetchPartition("t", 0, 5, 100, 0, 3, 2)], replica_id=2)
    got = _roundtrip(req_codec, api.req_to, api.req_from, req, version)
    assert got.replica_id == 2
    assert got.partitions[0].last_fetched_epoch == (2 if version >= 12 else -1)
    resp = m.FetchResponse(
        [
            m.FetchPartitionResponse("t", 0, records=b"", diverging_epoch=1, diverging_end_offset=5),
            m.FetchPartitionResponse("t", 1, records=b""),
        ]
    )
    parts = _roundtrip(resp_codec, api.resp_to, api.resp_from, resp, version).partitions
    expected = (1, 5) if version >= 12 else (-1, -1)
    assert (parts[0].diverging_epoch, parts[0].diverging_end_offset) == expected
    assert (parts[1].diverging_epoch, parts[1].diverging_end_offset) == (-1, -1)


def test_offset_for_leader_epoch_on_a_single_broker(tmp_path):
    """API 23 against a single broker: its one epoch (0) ends at the log end; typed errors otherwise."""
    from support.brokers import WireClient
    from support.logdata import make_batch

    from pyspark_logsource.broker.embedded import EmbeddedBroker
    from pyspark_logsource.errors import UnknownLeaderEpoch, UnknownTopicOrPartition
    from pyspark_logsource.protocol.epoch_messages import OffsetForLeaderEpochPartition as P
    from pyspark_logsource.protocol.epoch_messages import OffsetForLeaderEpochRequest

    with EmbeddedBroker(tmp_path) as b, WireClient(b.bootstrap) as c:
        assert c.create_topic("e", 1) == 0

        def ask(*parts: P, replica_id: int = -1) -> list[tuple[int, int, int]]:
            resp = c.request(OffsetForLeaderEpochRequest(list(parts), replica_id))
            return [(r.error_code, r.leader_epoch, r.end_offset) for r in resp.partitions]

        assert ask(P("e", 0, 0)) == [(0, 0, 0)]  # nothing written yet: epoch 0 ends at 0
        c.produce("e", 0, make_batch(0, 7))
        assert ask(P("e", 0, 0), P("e", 0, 0, current_leader_epoch=0)) == [(0, 0, 7), (0, 0, 7)]
        assert ask(P("e", 0, 3)) == [(0, -1, -1)]  # an epoch newer than any: undefined, as Kafka answers
        assert ask(P("e", 0, 0, current_leader_epoch=2), P("e", 9, 0), P("nope", 0, 0)) == [
            (UnknownLeaderEpoch.code, -1, -1),
            (UnknownTopicOrPartition.code, -1, -1),
            (UnknownTopicOrPartition.code, -1, -1),
        ]
