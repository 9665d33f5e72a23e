"""The client's decode of a read's frames (``produce_answers.decode_answers``, issue 25) against its twin.

``decode_answers`` checks each frame's correlation id against the oldest request in flight and
decodes the producer's common answer (a ProduceResponse v3-v8 of one partition) into a compact
``ProduceAnswer``; every other frame goes to the caller's general decode. The compiled twin
(``_canswers.decode_answers``) gives the same answers, head and typed errors on any frames: valid,
truncated, bit-flipped, random, with correlation ids that do not match or no request in flight. A
taken answer's ``response`` is the general decode's response of the same bytes. Sans-IO: no socket.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_logsource.client.answers import split_appended_py
from pyspark_logsource.protocol import ClientConnection
from pyspark_logsource.protocol import messages as m
from pyspark_logsource.protocol.codecs import APIS, CODECS, encode_response
from pyspark_logsource.protocol.connection import OnePartitionProduce, ResponseReceived
from pyspark_logsource.protocol.messages import ApiKey
from pyspark_logsource.protocol.primitives import ProtocolError, Reader
from pyspark_logsource.protocol.produce_answers import ProduceAnswer, answer_fields, decode_answers

try:  # the compiled twin, compared with the reference on either path (LOGSOURCE_NO_EXTENSIONS or not)
    from pyspark_logsource.protocol import _canswers
except ImportError:  # not built: the reference alone is checked against the general decode
    _canswers = None
try:
    from pyspark_logsource.client import _cio
except ImportError:
    _cio = None
_DECODERS = [decode_answers] + ([_canswers.decode_answers] if _canswers is not None else [])

_I16 = st.integers(-(2**15), 2**15 - 1)
_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)


def _general_response(frame: bytes, version: int) -> m.ProduceResponse:
    """The general (schema) decode of a ProduceResponse frame after its correlation id."""
    r = Reader(frame, 4)
    codec = CODECS[(ApiKey.PRODUCE, version)][1]
    resp = APIS[ApiKey.PRODUCE].resp_from(codec.read(r), version)
    r.done(f"{codec.message.name} v{version}")
    return resp


def _general(cid: int, key: int, version: int, frame) -> tuple:
    return ("general", cid, key, version, bytes(frame))


def _outcome(decode, frames, pending, head) -> tuple:
    """What ``decode`` makes of the frames: the answers as comparable tuples, or the typed error."""
    try:
        out, new_head = decode([bytearray(f) for f in frames], pending, head, _general)
    except ProtocolError as e:
        return ("error", type(e), str(e))
    rows = [a if isinstance(a, tuple) else (type(a).__name__, *answer_fields(a)) for a in out]
    return ("ok", rows, new_head)


@st.composite
def _answer(draw) -> tuple[int, bytes]:
    """(version, frame without its length prefix) of a ProduceResponse, mostly the producer's own."""
    version = draw(st.integers(3, 8))
    message = (
        draw(st.one_of(st.none(), st.text(max_size=5))) if version >= 8 and draw(st.booleans()) else None
    )
    part = m.ProducePartitionResponse(
        draw(st.sampled_from(["t", "topic-1", "é"]) | st.text(max_size=12)),
        draw(_I32),
        draw(_I16),
        draw(_I64),
        draw(_I64),
        draw(_I64) if version >= 5 else -1,
        message,
        tuple(draw(st.lists(_I32, max_size=1))) if version >= 8 and draw(st.booleans()) else (),
    )
    parts = [part] + ([part] if draw(st.integers(0, 9)) == 0 else [])
    resp = m.ProduceResponse(parts, draw(_I32))
    frame = b"".join(bytes(p) for p in encode_response(m.RequestHeader(0, version, draw(_I32), None), resp))
    return version, frame[4:]


@st.composite
def _frame(draw) -> tuple[int, int, bytes]:
    """(api key, version, frame): a produce answer, maybe damaged, or another API's bytes."""
    version, frame = draw(_answer())
    kind = draw(st.integers(0, 9))
    if kind == 0:  # cut short (down to no room for a correlation id)
        frame = frame[: draw(st.integers(0, max(0, len(frame) - 1)))]
    elif kind == 1:  # bits flipped
        b = bytearray(frame)
        for i, x in draw(st.lists(st.tuples(st.integers(0, 80), st.integers(1, 255)), max_size=3)):
            if i < len(b):
                b[i] ^= x
        frame = bytes(b)
    elif kind == 2:  # random bytes
        frame = draw(st.binary(max_size=60))
    elif kind == 3:  # bytes after the answer
        frame += draw(st.binary(min_size=1, max_size=4))
    key = 0 if draw(st.integers(0, 7)) else draw(st.sampled_from([1, 3, 18]))
    if draw(st.integers(0, 7)) == 0:
        version = draw(st.integers(-1, 12))  # a version without the fast path
    return key, version, frame


@settings(max_examples=500, deadline=None)
@given(
    frames=st.lists(_frame(), max_size=6),
    head=st.integers(0, 2),
    extra=st.integers(-2, 2),
    mismatch=st.one_of(st.none(), st.integers(0, 7)),
)
def test_both_twins_give_the_same_answers_and_errors(frames, head, extra, mismatch):
    # the requests in flight: ``head`` answered before, then one per frame (fewer or more by ``extra``)
    pending = [(900 + i, 0, 8) for i in range(head)]
    for i, (key, version, frame) in enumerate(frames):
        cid = struct.unpack_from(">i", frame)[0] if len(frame) >= 4 else i
        if mismatch == i:
            cid += 1
        pending.append((cid, key, version))
    if extra < 0:
        del pending[max(head, len(pending) + extra) :]
    else:
        pending += [(7, 0, 8)] * extra
    outcomes = [_outcome(d, [f for _, _, f in frames], pending, head) for d in _DECODERS]
    want = outcomes[0]
    for o in outcomes[1:]:
        if want[0] == "ok":
            assert o[0] == "ok" and o[2] == want[2]
            assert [r[1:] if r[0] == "ProduceAnswer" else r for r in o[1]] == [
                r[1:] if r[0] == "ProduceAnswer" else r for r in want[1]
            ]
        else:  # the same typed error, message and all
            assert o == want
    if want[0] == "ok":
        assert want[2] == head + len(frames)
        # a taken answer is the general decode's response of the same bytes
        for (key, version, frame), row in zip(frames, want[1], strict=True):
            if row[0] == "ProduceAnswer":
                assert key == 0
                a = ProduceAnswer(*row[1:])
                assert a.response == _general_response(frame, version)
                assert a.correlation_id == struct.unpack_from(">i", frame)[0]


def test_the_producers_answer_is_taken_and_others_are_left_to_the_general_decode():
    resp = m.ProduceResponse([m.ProducePartitionResponse("t", 3, 0, 41, -1, 7)], 5)
    frame = b"".join(bytes(p) for p in encode_response(m.RequestHeader(0, 8, 12, None), resp))[4:]
    for decode in _DECODERS:
        out, head = decode([bytearray(frame)], [(12, 0, 8)], 0, _general)
        (a,) = out
        assert head == 1 and not isinstance(a, tuple)
        assert answer_fields(a) == (12, "t", 3, 0, 41, -1, 7, 5)
        assert a.api_key == 0 and a.response == resp
        # a version without the fast path, and another API: the general decode
        assert decode([bytearray(frame)], [(12, 0, 2)], 0, _general)[0] == [_general(12, 0, 2, frame)]
        assert decode([bytearray(frame)], [(12, 3, 8)], 0, _general)[0] == [_general(12, 3, 8, frame)]


@pytest.mark.parametrize("decode", _DECODERS)
def test_bad_frames_are_typed_errors(decode):
    ok = struct.pack(">i", 5) + b"\x00" * 8
    with pytest.raises(ProtocolError, match="truncated int32"):
        decode([bytearray(b"\x00\x01")], [(0, 0, 8)], 0, _general)
    with pytest.raises(ProtocolError, match="correlation id 5 but no request in flight"):
        decode([bytearray(ok)], [(4, 0, 8)], 1, _general)
    with pytest.raises(ProtocolError, match="correlation id 5, expected 6"):
        decode([bytearray(ok)], [(6, 0, 8)], 0, _general)


def test_the_clients_answers_through_receive_data():
    """ClientConnection gives a ProduceAnswer for the producer's answer, a ResponseReceived otherwise;
    both with the correlation id, api key, response and throttle the general decode gives."""
    conn = ClientConnection("c")
    conn.versions[ApiKey.PRODUCE] = 8
    cids = [conn.send_request(OnePartitionProduce("t", 0, b"x", 1, 1000))[0] for _ in range(2)]
    one = m.ProduceResponse([m.ProducePartitionResponse("t", 0, 0, 9, -1, 0)], 3)
    two = m.ProduceResponse([m.ProducePartitionResponse("t", 0, 0, 9, -1, 0, "why")], 4)
    data = b"".join(
        b"".join(bytes(p) for p in encode_response(m.RequestHeader(0, 8, cid, None), r))
        for cid, r in zip(cids, (one, two), strict=True)
    )
    a, b = conn.receive_data(bytearray(data))
    assert type(a).__name__ == "ProduceAnswer" and type(b).__name__ == "ResponseReceived"
    assert (a.correlation_id, a.api_key, a.response, a.throttle_time_ms) == (cids[0], 0, one, 3)
    assert (b.correlation_id, b.api_key, b.response, b.throttle_time_ms) == (cids[1], 0, two, 4)
    assert conn.in_flight == 0


# ------------------------------------------------------------------ the I/O thread's match to batches

_SPLITS = [split_appended_py] + ([_cio.split_appended] if _cio is not None else [])
_ANSWER_CLASSES = [ProduceAnswer] + ([_canswers.ProduceAnswer] if _canswers is not None else [])


@st.composite
def _pair(draw, senders) -> tuple:
    batch = SimpleNamespace(
        topic=draw(st.sampled_from(["t", "u"])),
        partition=draw(st.integers(0, 2)),
        record_count=draw(st.integers(1, 3)),
    )
    cb = SimpleNamespace(sender=draw(st.sampled_from(senders)), batch=batch)
    topic, partition = draw(st.sampled_from(["t", "u"])), draw(st.integers(0, 2))
    error = draw(st.sampled_from([0, 0, 0, 1, 47]))
    offset = draw(st.integers(-1, 2**62))
    kind = draw(st.integers(0, 3))
    if kind <= 1:  # a compact answer of either twin
        a = draw(st.sampled_from(_ANSWER_CLASSES))(1, topic, partition, error, offset, -1, 0, 0)
    else:  # the general decode's: one partition, or two, or none
        p = m.ProducePartitionResponse(topic, partition, error, offset)
        parts = [p] if kind == 2 else draw(st.sampled_from([[], [p, p]]))
        a = ResponseReceived(1, 0, m.ProduceResponse(parts, 0))
    return cb, a


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_appended_runs_are_the_same_on_both_twins(data):
    senders = [object(), object()]
    pairs = data.draw(st.lists(_pair(senders), max_size=8))
    for i in range(len(pairs) + 1):
        for sender in senders:
            got = [split(pairs, i, sender) for split in _SPLITS]
            assert all(g == got[0] for g in got)
            ok, j = got[0]
            assert i <= j <= len(pairs) and len(ok) == j - i
            for (cb, a), (b, result) in zip(pairs[i:j], ok, strict=True):
                pr = a if not isinstance(a, ResponseReceived) else a.response.partitions[0]
                assert cb.sender is sender and b is cb.batch and not pr.error_code
                assert result == (b.partition, pr.base_offset, pr.base_offset + b.record_count - 1)
                assert (pr.topic, pr.partition) == (b.topic, b.partition)
