"""The producer's one-partition Produce request (``OnePartitionProduce``, issue 25) against the reference.

``ClientConnection.send_request`` of a OnePartitionProduce writes the frame it writes for the equal
``ProduceRequest([ProducePartitionData(topic, partition, records)], acks, timeout_ms)``, byte for
byte, with the same correlation ids and answers expected (acks 0: none), at every version of Produce
we speak (flexible ones by the general path), for any topic, partition, client id, acks, timeout and
records (below and above the zero-copy threshold); what the reference refuses it refuses with the same
typed error. Sans-IO: no socket.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_logsource.protocol import ClientConnection, ProducePartitionData, ProduceRequest
from pyspark_logsource.protocol.codecs import SUPPORTED_VERSIONS
from pyspark_logsource.protocol.connection import OnePartitionProduce
from pyspark_logsource.protocol.messages import ApiKey
from pyspark_logsource.protocol.primitives import ZERO_COPY_THRESHOLD

_LO, _HI = SUPPORTED_VERSIONS[ApiKey.PRODUCE]


def _frames(conn: ClientConnection, request, version: int | None) -> tuple[int, bytes]:
    cid, parts = conn.send_request(request, version)
    return cid, b"".join(bytes(p) for p in parts)


def _pair(client_id: str | None, version: int) -> tuple[ClientConnection, ClientConnection]:
    conns = (ClientConnection(client_id), ClientConnection(client_id))
    for c in conns:
        c.versions[ApiKey.PRODUCE] = version
    return conns


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(_LO, _HI),
    client_id=st.one_of(st.none(), st.text(max_size=20)),
    topic=st.text(min_size=1, max_size=40),
    partition=st.integers(-(2**31), 2**31 - 1),
    acks=st.sampled_from([0, 1, -1]),
    timeout_ms=st.integers(0, 2**31 - 1),
    records=st.one_of(
        st.binary(max_size=300),
        st.integers(ZERO_COPY_THRESHOLD - 2, ZERO_COPY_THRESHOLD + 2).map(lambda n: bytearray(b"r" * n)),
    ),
    negotiated=st.booleans(),
)
def test_one_partition_produce_is_the_produce_requests_frame(
    version, client_id, topic, partition, acks, timeout_ms, records, negotiated
):
    ours, ref = _pair(client_id, version)
    at = None if negotiated else version
    for _ in range(2):  # and the next correlation id
        got = _frames(ours, OnePartitionProduce(topic, partition, records, acks, timeout_ms), at)
        want = _frames(
            ref, ProduceRequest([ProducePartitionData(topic, partition, records)], acks, timeout_ms), at
        )
        assert got == want
    assert ours.in_flight == ref.in_flight == (0 if acks == 0 else 2)


@settings(max_examples=100, deadline=None)
@given(
    acks=st.integers(-(2**20), 2**20).filter(lambda a: not -(2**15) <= a < 2**15),
    partition=st.integers(2**31, 2**40),
)
def test_fields_out_of_range_give_the_reference_error(acks, partition):
    for bad_acks, bad_partition in ((acks, 0), (1, partition)):
        errors = []
        for request in (
            OnePartitionProduce("t", bad_partition, b"x", bad_acks, 1000),
            ProduceRequest([ProducePartitionData("t", bad_partition, b"x")], bad_acks, 1000),
        ):
            conn = _pair(None, _HI)[0]
            with pytest.raises(Exception) as e:  # noqa: PT011 - whatever the reference raises, the same
                conn.send_request(request)
            errors.append((type(e.value), str(e.value)))
            assert conn.in_flight == 0
        assert errors[0] == errors[1]
