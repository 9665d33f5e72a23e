"""A connection's group of requests that fails to encode, on a real broker connection.

``BrokerConnection.send_many`` hands a group of requests to ``ClientConnection.send_requests``, which
encodes them all before one write. When one of them cannot be encoded, none is written: every callback
of the group gets the typed error, no answer stays expected for a request that was never sent, no
in-flight slot stays taken, and the correlation ids stay in step with what was written, so the next
request on the same connection is answered (before the fix: the answers expected for the requests before
the failed one stayed queued, and the next answer was refused as out of order, failing the connection).
"""

from __future__ import annotations

import threading

import pytest

from pyspark_logsource.client.connection import BrokerConnection
from pyspark_logsource.errors import UnsupportedVersion
from pyspark_logsource.format import batch as fmt
from pyspark_logsource.protocol import ClientConnection, CreatableTopic, CreateTopicsRequest
from pyspark_logsource.protocol.connection import OnePartitionProduce
from pyspark_logsource.protocol.messages import ApiKey, MetadataRequest
from pyspark_logsource.protocol.primitives import ProtocolError


class _Answers:
    def __init__(self) -> None:
        self.got: list[tuple[object, BaseException | None]] = []
        self.done = threading.Event()

    def __call__(self, response: object, error: BaseException | None) -> None:
        self.got.append((response, error))
        self.done.set()


@pytest.fixture(scope="module")
def topic(broker) -> str:
    c = BrokerConnection(broker.host, broker.port)
    try:
        c.request(CreateTopicsRequest([CreatableTopic("groups", 1, 1)]))
    finally:
        c.close()
    return "groups"


def _produce(topic: str, value: bytes, partition: int = 0) -> OnePartitionProduce:
    return OnePartitionProduce(topic, partition, fmt.encode([value]), 1, 5000)


def _bad_groups(topic: str) -> list[list[OnePartitionProduce]]:
    # each cannot be encoded at its place in the group: a partition out of int32, a records object
    # that is not bytes (the general path's error), after one, two and five good requests
    return [
        [_produce(topic, b"a"), _produce(topic, b"x", 2**40)],
        [_produce(topic, b"a"), _produce(topic, b"b"), OnePartitionProduce(topic, 0, "text", 1, 5000)],
        [*(_produce(topic, b"%d" % i) for i in range(5)), _produce(topic, b"x", -(2**40))],
    ]


@pytest.mark.parametrize("max_in_flight", [0, 4])
def test_a_group_that_fails_to_encode_leaves_the_connection_in_step(broker, topic, max_in_flight):
    c = BrokerConnection(broker.host, broker.port, max_in_flight=max_in_flight, request_timeout_ms=3000)
    try:
        before = c.request(_produce(topic, b"first").to_request()).partitions[0].base_offset
        stored = 0
        for group in _bad_groups(topic):
            answers = [_Answers() for _ in group]
            with pytest.raises(ProtocolError):
                c.send_many(list(zip(group, answers, strict=True)))
            # send_many writes a group per free in-flight window: the groups written before the failed
            # one are answered by the broker, the failed one's group and the rest get the typed error
            assert all(a.done.wait(10) for a in answers)
            assert [len(a.got) for a in answers] == [1] * len(group)
            ok = [err is None and resp.partitions[0].error_code == 0 for a in answers for resp, err in a.got]
            n = ok.index(False)
            assert not any(ok[n:]) and n <= len(group) - 1
            assert all(
                resp is None and isinstance(err, ProtocolError) for a in answers[n:] for resp, err in a.got
            )
            assert [a.got[0][0].partitions[0].base_offset for a in answers[:n]] == list(
                range(before + stored + 1, before + stored + 1 + n)
            )
            stored += n
            assert c.in_flight == 0 and c._proto.in_flight == 0
        # the connection still works: the next requests are answered, as a group and alone, and only
        # they were stored after the written ones (nothing of the failed groups)
        answers = [_Answers(), _Answers()]
        c.send_many([(_produce(topic, b"g1"), answers[0]), (_produce(topic, b"g2"), answers[1])])
        for a in answers:
            assert a.done.wait(10)
            ((resp, err),) = a.got
            assert err is None and resp.partitions[0].error_code == 0
        offsets = [a.got[0][0].partitions[0].base_offset for a in answers]
        assert offsets == [before + stored + 1, before + stored + 2]
        assert c.request(MetadataRequest(topics=None)).brokers
        if max_in_flight:  # every slot came back: a full window goes out at once
            full = [_Answers() for _ in range(max_in_flight)]
            c.send_many([(_produce(topic, b"w%d" % i), a) for i, a in enumerate(full)], timeout=5)
            assert all(a.done.wait(10) and a.got[0][1] is None for a in full)
    finally:
        c.close()


def test_a_request_the_broker_does_not_speak_gives_back_the_groups_slots(broker, topic):
    """UnsupportedVersion (not a ProtocolError) from the middle of a group: the same rollback, and the
    in-flight slots taken for the group come back (before, only a ProtocolError gave them back)."""
    c = BrokerConnection(broker.host, broker.port, max_in_flight=2, request_timeout_ms=3000)
    try:
        del c._proto.versions[ApiKey.METADATA]  # as if the broker had not offered Metadata
        answers = [_Answers(), _Answers()]
        with pytest.raises(UnsupportedVersion):
            c.send_many([(_produce(topic, b"a"), answers[0]), (MetadataRequest(topics=None), answers[1])])
        assert all(isinstance(a.got[0][1], UnsupportedVersion) for a in answers)
        assert c.in_flight == 0 and c._proto.in_flight == 0
        full = [_Answers(), _Answers()]
        c.send_many([(_produce(topic, b"b"), full[0]), (_produce(topic, b"c"), full[1])], timeout=5)
        assert all(a.done.wait(10) and a.got[0][1] is None for a in full)
    finally:
        c.close()


def test_the_sans_io_group_is_all_or_nothing():
    """The same at the sans-IO layer, without a socket: ids and answers expected are as before the call."""
    conn = ClientConnection("c")
    conn.send_requests([_produce("t", b"a")])
    state = (conn._next_id, list(conn._pending), conn.in_flight)
    for group in _bad_groups("t"):
        with pytest.raises(ProtocolError):
            conn.send_requests(group)
        assert (conn._next_id, list(conn._pending), conn.in_flight) == state
    cids, _ = conn.send_requests([_produce("t", b"b"), _produce("t", b"c")])
    assert cids == [1, 2]
