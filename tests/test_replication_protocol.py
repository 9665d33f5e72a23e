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
    resp = m.FetchResponse([m.FetchPartitionResponse("t", 0, records=b"", diverging_epoch=1, diverging_end_offset=5),
                            m.FetchPartitionResponse("t", 1, records=b"")])  # fmt: skip
    parts = _roundtrip(resp_codec, api.resp_to, api.resp_from, resp, version).partitions
    expected = (1, 5) if version >= 12 else (-1, -1)
    assert (parts[0].diverging_epoch, parts[0].diverging_end_offset) == expected
    assert (parts[1].diverging_epoch, parts[1].diverging_end_offset) == (-1, -1)
