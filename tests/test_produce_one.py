"""The producer's one-partition Produce request (``OnePartitionProduce``, issue 25) against the reference.

``ClientConnection.send_request`` of a OnePartitionProduce writes the frame it writes for the equal
``ProduceRequest([ProducePartitionData(topic, partition, records)], acks, timeout_ms)``, byte for
byte, with the same correlation ids and answers expected (acks 0: none), at every version of Produce
we speak (flexible ones by the general path), for any topic, partition, client id, acks, timeout and
records (below and above the zero-copy threshold); what the reference refuses it refuses with the same
typed error. Sans-IO: no socket.

The producer's answer, a ProduceResponse of one partition, is decoded by ``codecs.produce_response_one``
(``_cproduce.decode_produce_response``, or its pure-Python reference ``decode_produce_response_one``):
both give the general decode's response wherever they take the answer, the same result as each other on
any bytes (malformed, truncated, bit-flipped, random, any bounds), and the client's ``_responses`` gives
the general decode's responses and typed errors.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_logsource.protocol import ClientConnection, ProducePartitionData, ProduceRequest, codecs
from pyspark_logsource.protocol import messages as m
from pyspark_logsource.protocol.codecs import (
    APIS,
    CODECS,
    SUPPORTED_VERSIONS,
    decode_produce_response_one,
    encode_response,
)
from pyspark_logsource.protocol.connection import OnePartitionProduce
from pyspark_logsource.protocol.messages import ApiKey
from pyspark_logsource.protocol.primitives import ZERO_COPY_THRESHOLD, ProtocolError, Reader, Writer

try:  # the compiled twin, compared with the reference on either path (LOGSOURCE_NO_EXTENSIONS or not)
    from pyspark_logsource.protocol import _cproduce
except ImportError:  # not built: the reference alone is checked against the general decode
    _cproduce = None
_DECODERS = [decode_produce_response_one]
if _cproduce is not None:
    assert _cproduce.bind_responses(m.ProduceResponse, m.ProducePartitionResponse)
    _DECODERS.append(_cproduce.decode_produce_response)

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


_I16, _I32, _I64 = (
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
)


def _general(frame: bytes, version: int) -> m.ProduceResponse:
    """The general (schema) decode of a ProduceResponse frame after its correlation id."""
    r = Reader(frame, 4)
    codec = CODECS[(ApiKey.PRODUCE, version)][1]
    resp = APIS[ApiKey.PRODUCE].resp_from(codec.read(r), version)
    r.done(f"{codec.message.name} v{version}")  # decode_response_body's message
    return resp


def _decoded(frame, pos: int, end: int, version: int) -> list:
    return [decode(frame, pos, end, version) for decode in _DECODERS]


@st.composite
def _answers(draw) -> tuple[int, bytes, m.ProduceResponse]:
    version = draw(st.integers(3, 8))
    message = draw(st.one_of(st.none(), st.text(max_size=10))) if version >= 8 else None
    part = m.ProducePartitionResponse(
        draw(st.text(max_size=30)),
        draw(_I32),
        draw(_I16),
        draw(_I64),
        draw(_I64),
        draw(_I64) if version >= 5 else -1,
        message,
        tuple(draw(st.lists(_I32, max_size=2))) if version >= 8 else (),  # with or without a message
    )
    parts = [part] + ([part] if draw(st.integers(0, 9)) == 0 else [])
    resp = m.ProduceResponse(parts, draw(_I32))
    frame = b"".join(bytes(p) for p in encode_response(m.RequestHeader(0, version, draw(_I32), None), resp))
    return version, frame[4:], resp


@settings(max_examples=400, deadline=None)
@given(answer=_answers(), kind=st.sampled_from([bytes, bytearray, memoryview]))
def test_the_producers_answer_decode_is_the_general_decode(answer, kind):
    version, frame, resp = answer
    got = _decoded(kind(frame), 4, len(frame), version)
    assert all(g == got[0] for g in got)
    general = _general(frame, version)
    assert general == resp
    p = resp.partitions[0]
    if len(resp.partitions) == 1 and p.error_message is None and not p.record_errors:
        assert got[0] == general  # the common answer is taken, not left to the general decode
    else:
        assert got[0] is None
    # the client's decode of the frame: the general decode's response
    conn = ClientConnection("c")
    conn.versions[ApiKey.PRODUCE] = version
    cid, _ = conn.send_request(OnePartitionProduce("t", 0, b"x", 1, 1000))
    framed = bytearray(len(frame).to_bytes(4, "big") + cid.to_bytes(4, "big", signed=True) + frame[4:])
    (received,) = conn.receive_data(framed)
    assert received.response == general and received.correlation_id == cid


@settings(max_examples=600, deadline=None)
@given(
    answer=_answers(),
    cut=st.integers(0, 80),
    flips=st.lists(st.tuples(st.integers(0, 200), st.integers(1, 255)), max_size=3),
    extra=st.binary(max_size=4),
    bounds=st.tuples(st.integers(-3, 90), st.integers(-3, 90)),
    noise=st.binary(max_size=60),
    kind=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_malformed_answers_give_the_same_result_on_both_paths(answer, cut, flips, extra, bounds, noise, kind):
    version, frame, _ = answer
    bad = bytearray(frame[: max(4, len(frame) - cut)] + extra)
    for i, x in flips:
        if i < len(bad):
            bad[i] ^= x
    for data, pos, end in ((bad, 4, len(bad)), (bad, *bounds), (noise, 4, len(noise)), (noise, *bounds)):
        got = _decoded(kind(bytes(data)), pos, end, version)
        assert all(g == got[0] for g in got)
        if got[0] is not None:  # taken: it is what the general decode reads from the same bytes
            assert got[0] == _general(bytes(data[:end]), version) and pos == 4
    # and the client: the general decode's response, or its typed error
    conn = ClientConnection("c")
    conn.versions[ApiKey.PRODUCE] = version
    cid, _ = conn.send_request(OnePartitionProduce("t", 0, b"x", 1, 1000))
    body = cid.to_bytes(4, "big", signed=True) + bytes(bad[4:])
    try:
        want = ("ok", _general(body, version))
    except ProtocolError as e:
        want = ("error", str(e))
    try:
        (received,) = conn.receive_data(bytearray(len(body).to_bytes(4, "big") + body))
        got_client = ("ok", received.response)
    except ProtocolError as e:
        got_client = ("error", str(e))
    assert got_client == want


def test_a_short_or_foreign_answer_is_left_to_the_general_decode():
    for decode in _DECODERS:
        assert decode(b"", 0, 0, 8) is None
        assert decode(b"\x00" * 40, 4, 40, 2) is None  # a version without the fast path
        assert decode(b"\x00" * 40, 4, 41, 8) is None  # bounds past the buffer


@settings(max_examples=200, deadline=None)
@given(
    version=st.integers(_LO, _HI),
    client_id=st.one_of(st.none(), st.text(max_size=10)),
    requests=st.lists(
        st.tuples(
            st.text(min_size=1, max_size=10),
            st.integers(-(2**31), 2**31 - 1),
            st.sampled_from([0, 1, -1]),
            st.one_of(
                st.binary(max_size=50),
                st.integers(ZERO_COPY_THRESHOLD - 1, ZERO_COPY_THRESHOLD).map(lambda n: b"r" * n),
            ),
        ),
        min_size=1,
        max_size=6,
    ),
    start=st.sampled_from([0, 2**31 - 3]),  # and the correlation id wrapping round
)
def test_several_requests_in_one_buffer_are_the_frames_one_by_one(version, client_id, requests, start):
    ours, ref = _pair(client_id, version)
    ours._next_id = ref._next_id = start
    reqs = [OnePartitionProduce(t, p, rec, acks, 1000) for t, p, acks, rec in requests]
    cids, parts = ours.send_requests(reqs)
    want = [_frames(ref, r, None) for r in reqs]
    assert cids == [cid for cid, _ in want]
    assert b"".join(bytes(p) for p in parts) == b"".join(frame for _, frame in want)
    assert ours.in_flight == ref.in_flight and ours._next_id == ref._next_id
    assert ours._pending[ours._head :] == ref._pending[ref._head :]  # the answers expected, in order


def _general_encode(version: int, cid: int, resp: m.ProduceResponse) -> bytes:
    """The schema codec's frame of ``resp`` (encode_response's general path, no fast encoder)."""
    w = Writer()
    CODECS[(0, version)][1].write(w, APIS[0].resp_to(resp, version))
    return b"".join(bytes(p) for p in w.frame(cid.to_bytes(4, "big", signed=True)))


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(3, 8),
    cid=_I32,
    message=st.one_of(st.none(), st.text(max_size=10)),
    record_errors=st.lists(_I32, max_size=3).map(tuple),
    partition=_I32,
    code=_I16,
)
def test_the_brokers_answer_encode_is_the_general_encode(
    version, cid, message, record_errors, partition, code
):
    """encode_response of a one-partition answer (the compiled or the Python fast encoder, or the general
    one) writes the schema codec's bytes, record errors with or without a message included (before, the
    fast encoders wrote no record errors when there was no message)."""
    resp = m.ProduceResponse(
        [
            m.ProducePartitionResponse(
                "tópic", partition, code, 10, -1, 0, message if version >= 8 else None, record_errors
            )
        ],
        7,
    )
    got = b"".join(bytes(p) for p in encode_response(m.RequestHeader(0, version, cid, None), resp))
    assert got == _general_encode(version, cid, resp)
    fast = codecs._encode_produce_response_fast(cid, version, resp)
    if fast is not None:
        assert b"".join(bytes(p) for p in fast) == got
    if _cproduce is not None:
        out = _cproduce.encode_produce_response(cid, version, resp)
        if out is not None:
            assert bytes(out) == got
    if version >= 8 and record_errors:
        assert _general(got[4:], version).partitions[0].record_errors == record_errors


try:  # the compiled round of frames, compared with its reference on either path
    from pyspark_logsource.protocol import _cround
except ImportError:
    _cround = None
if _cround is not None:
    assert _cround.bind(
        codecs._PRODUCE_REQ_MIDDLE, codecs._produce_request_middle, ZERO_COPY_THRESHOLD, codecs._ENCODE_ERRORS
    )


class _Odd:
    """A request-like object with any attributes (missing ones raise AttributeError, as a wrong type)."""

    def __init__(self, **fields) -> None:
        self.__dict__.update(fields)


_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.binary(max_size=5),
)
_REQUEST = st.one_of(
    st.builds(
        OnePartitionProduce,
        st.sampled_from(
            ["t", "topic-1", "\u00e9t\u00e9"]
        ),  # the same objects often (the middle-bytes shortcut)
        st.one_of(st.sampled_from([0, 1]), st.integers(-(2**31), 2**31 - 1)),
        st.one_of(
            st.binary(max_size=40),
            st.binary(max_size=40).map(bytearray),
            st.integers(ZERO_COPY_THRESHOLD - 1, ZERO_COPY_THRESHOLD).map(lambda n: b"r" * n),
        ),
        st.sampled_from([0, 1, -1]),
        st.sampled_from([1000, 30000]),
    ),
    # malformed: fields out of range or of the wrong type, records of another type, a lone surrogate
    st.builds(
        OnePartitionProduce,
        st.one_of(st.text(max_size=8), st.just("\ud800"), _ANY),
        _ANY,
        st.one_of(_ANY, st.binary(max_size=8).map(memoryview)),
        st.one_of(st.sampled_from([0, 1, -1]), _ANY),
        st.one_of(st.integers(-(2**33), 2**33), _ANY),
    ),
    st.builds(_Odd, records=st.binary(max_size=8)),  # no topic at all
)


@pytest.mark.skipif(_cround is None, reason="protocol._cround not built")
@settings(max_examples=500, deadline=None)
@given(
    client_id=st.one_of(st.none(), st.text(max_size=6), st.just("\udfff")),
    version=st.one_of(st.integers(_LO, _HI), st.integers(-(2**20), 2**20), st.just(2.0), st.none()),
    first_cid=st.one_of(st.sampled_from([0, 2**31 - 2, -1]), st.integers(-(2**40), 2**40), st.just("1")),
    requests=st.lists(_REQUEST, max_size=6),
)
def test_the_compiled_round_of_frames_is_the_reference(client_id, version, first_cid, requests):
    """protocol._cround.produce_frames against codecs._produce_frames: the same bytes, or None for both (a
    request the round cannot write, a field out of range or of the wrong type)."""
    want = codecs._produce_frames(client_id, version, first_cid, requests)
    got = _cround.produce_frames(client_id, version, first_cid, requests)
    assert (None if got is None else bytes(got)) == (None if want is None else bytes(want))
    assert got is None or type(got) is bytearray


@pytest.mark.skipif(_cround is None, reason="protocol._cround not built")
def test_the_compiled_round_leaves_a_bytes_subclass_and_the_zero_copy_size_to_the_general_path():
    """Records of a bytes subclass (its len() may be anything) or of the zero-copy size: None from both, the
    requests then go one by one; an empty round is an empty buffer from both."""

    class Sub(bytes):
        def __len__(self) -> int:
            return 1

    for rec in (Sub(b"xyz"), b"r" * ZERO_COPY_THRESHOLD):
        reqs = [OnePartitionProduce("t", 0, b"ok", 1, 1000), OnePartitionProduce("t", 0, rec, 1, 1000)]
        assert codecs._produce_frames("c", 8, 0, reqs) is None
        assert _cround.produce_frames("c", 8, 0, reqs) is None
    assert codecs._produce_frames("c", 8, 0, []) == _cround.produce_frames("c", 8, 0, []) == bytearray()
