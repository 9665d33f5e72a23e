"""Fuzzing the protocol layer: every (API key, version) the broker advertises, with and without a server.

Valid messages are generated from the schemas themselves (``protocol.codecs.CODECS``: each field of each
version, nullable where the version allows null, tagged fields in flexible versions), so a schema change
changes what is generated. Then:

- codec level (no server): random bytes decode to a message or raise ProtocolError, nothing else; a
  generated message survives write -> read, and typed -> bytes -> typed through the adapters;
- live broker (a real process): valid requests and their truncated, oversized and bit-flipped variants
  get a response that parses (right correlation id) or a closed connection, never a traceback; a canary
  connection keeps working throughout, and the broker logs no unexpected exception.

``LOGSOURCE_FUZZ_EXAMPLES`` raises the number of examples per (key, version) (default: a budget that keeps
the module near 30 s on 2 cores); ``LOGSOURCE_FUZZ_RANDOM=1`` drops the fixed seed for exploratory runs.
"""

from __future__ import annotations

import os
import selectors
import socket
import struct
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.brokers import WireClient, broker_process

from pyspark_logsource.format import encode, encode_kafka
from pyspark_logsource.protocol import codecs
from pyspark_logsource.protocol import messages as m
from pyspark_logsource.protocol.codecs import CODECS, SUPPORTED_VERSIONS
from pyspark_logsource.protocol.connection import RequestReceived, ServerConnection
from pyspark_logsource.protocol.primitives import ProtocolError, Reader, Writer
from pyspark_logsource.protocol.schema import Codec, Field, versions

PAIRS = sorted(CODECS)
IDS = [f"{m.ApiKey(k).name.lower()}-v{v}" for k, v in PAIRS]

_EXAMPLES = int(os.environ.get("LOGSOURCE_FUZZ_EXAMPLES", "0"))
_DERANDOMIZE = not os.environ.get("LOGSOURCE_FUZZ_RANDOM")


def fuzz_settings(default_examples: int) -> settings:
    return settings(
        max_examples=_EXAMPLES or default_examples,
        deadline=None,
        derandomize=_DERANDOMIZE,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# ------------------------------------------------------------------ strategies from the schemas

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
#: a few real record batches in both layouts, so Produce requests sometimes carry data that appends
_BATCHES = [
    bytes(encode_kafka([b"fuzz"], [b"k"])),
    bytes(encode_kafka([b"a", b"b"], codec="gzip")),
    bytes(encode([b"arrow"], [None])),
]


def _in(spec: str, v: int) -> bool:
    lo, hi = versions(spec)
    return lo <= v <= hi


def _int(bits: int) -> st.SearchStrategy[int]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    # small values (counts, partitions, -1 sentinels) far more often than extremes
    return st.one_of(
        st.integers(-2, 8),
        st.sampled_from([lo, hi, 0x7FFF, -0x8000]).filter(lambda x: lo <= x <= hi),
        st.integers(lo, hi),
    )


def _scalar(type_: str, nullable: bool) -> st.SearchStrategy[Any]:
    if type_ in _INTS:
        s: st.SearchStrategy[Any] = _int(_INTS[type_])
    elif type_ == "uint16":
        s = st.integers(0, 0xFFFF)
    elif type_ == "bool":
        s = st.booleans()
    elif type_ == "uuid":
        s = st.binary(min_size=16, max_size=16)
    elif type_ == "float64":
        s = st.floats(allow_nan=False)
    elif type_ == "string":
        s = st.one_of(
            st.sampled_from(["", "t", "fuzz-topic", "__consumer_offsets", "a" * 249]), st.text(max_size=12)
        )
    elif type_ == "bytes":
        s = st.binary(max_size=24)
    elif type_ == "records":
        s = st.one_of(st.sampled_from(_BATCHES), st.binary(max_size=80))
    else:
        raise AssertionError(f"no strategy for {type_!r}")
    return st.one_of(st.none(), s) if nullable else s


def _field(f: Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    nullable = _in(f.nullable, version) or f.type == "records"
    if f.fields:
        item = struct_strategy(f.fields, version, flexible)
        s = st.lists(item, max_size=3) if f.is_array else item
    elif f.is_array:
        s = st.lists(_scalar(f.type[2:], False), max_size=4)
    else:
        return _scalar(f.type, nullable)
    return st.one_of(st.none(), s) if nullable else s


def struct_strategy(fields: tuple[Field, ...], version: int, flexible: bool) -> st.SearchStrategy[dict]:
    """A dict for every field present at ``version`` (tagged ones in flexible versions, sometimes left out)."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields:
        if f.tag is not None and flexible and _in(f.tagged, version):
            optional[f.name] = _field(f, version, flexible)
        elif f.tag is None and _in(f.versions, version):
            required[f.name] = _field(f, version, flexible)
    return st.fixed_dictionaries(required, optional=optional)


_STRATEGIES: dict[tuple[int, int, int], st.SearchStrategy[dict]] = {}


def message_strategy(key: int, version: int, side: int = 0) -> st.SearchStrategy[dict]:
    """Dicts for the request (side 0) or response (side 1) codec of (key, version)."""
    k = (key, version, side)
    if k not in _STRATEGIES:
        codec: Codec = CODECS[(key, version)][side]
        _STRATEGIES[k] = struct_strategy(codec.message.fields, version, codec.flexible)
    return _STRATEGIES[k]


def write(codec: Codec, d: dict) -> bytes:
    w = Writer()
    codec.write(w, d)
    return b"".join(bytes(p) for p in w.frame(b""))[4:]


def plain(x: Any) -> Any:
    """Comparable form: bytes-likes as bytes, dataclasses and dicts recursively."""
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if hasattr(x, "__dataclass_fields__"):
        return (type(x).__name__, {k: plain(getattr(x, k)) for k in x.__dataclass_fields__})
    return x


def project(got: Any, like: Any) -> Any:
    """``got`` with only the dict keys ``like`` has, recursively (a read fills absent fields with defaults)."""
    if isinstance(like, dict) and isinstance(got, dict):
        return {k: project(got.get(k), v) for k, v in like.items()}
    if isinstance(like, list) and isinstance(got, list) and len(like) == len(got):
        return [project(g, v) for g, v in zip(got, like, strict=True)]
    return got


def request_frame(key: int, version: int, body: bytes, cid: int = 7, client_id: str | None = "fuzz") -> bytes:
    head = codecs.encode_request_header(m.RequestHeader(key, version, cid, client_id))
    return struct.pack(">i", len(head) + len(body)) + head + body


# ================================================================== codec level


@pytest.mark.parametrize("key,version", PAIRS, ids=IDS)
@fuzz_settings(25)
@given(data=st.binary(max_size=200))
def test_random_bytes_decode_or_raise_protocol_error(key, version, data):
    header = m.RequestHeader(key, version, 1, "fuzz")
    for decode in (
        lambda: codecs.decode_request_body(header, Reader(data)),
        lambda: codecs.decode_response_body(key, version, Reader(data)),
        lambda: ServerConnection.decode_frame(bytearray(request_frame(key, version, data)[4:])),
    ):
        try:
            decode()
        except ProtocolError:
            pass


@pytest.mark.parametrize("key,version", PAIRS, ids=IDS)
@fuzz_settings(15)
@given(data=st.data())
def test_generated_messages_round_trip_through_the_codecs(key, version, data):
    """dict -> bytes -> dict for both sides; and for requests typed -> frame -> typed through the adapters
    (what the broker decodes is exactly what a client encoded)."""
    req_codec, resp_codec = CODECS[(key, version)]
    for side, codec in ((0, req_codec), (1, resp_codec)):
        d = data.draw(message_strategy(key, version, side), label=f"side {side}")
        try:
            raw = write(codec, d)
        except ProtocolError:
            continue  # e.g. a string longer than its length field allows
        back = codec.read(Reader(raw))
        assert project(plain(back), plain(d)) == plain(d)
    # through the typed messages and the whole request frame
    d = data.draw(message_strategy(key, version, 0), label="request")
    try:
        typed = codecs.APIS[key].req_from(req_codec.read(Reader(write(req_codec, d))), version)
    except ProtocolError:
        return
    header = m.RequestHeader(key, version, 5, "fuzz")

    def through_the_wire(req: Any) -> tuple[bytes, Any]:
        frame = b"".join(bytes(p) for p in codecs.encode_request(header, req))
        ev = ServerConnection().receive_data(frame)
        assert len(ev) == 1 and isinstance(ev[0], RequestReceived)
        assert ev[0].header == header
        return frame, ev[0].request

    # the wire groups flat per-partition entries by topic, so a topic listed twice comes back together:
    # after one trip the message is in wire order, and from then on bytes and message are a fixed point
    frame1, typed1 = through_the_wire(typed)
    frame2, typed2 = through_the_wire(typed1)
    assert frame2 == frame1
    assert plain(typed2) == plain(typed1)


@pytest.mark.parametrize("key,version", PAIRS, ids=IDS)
@fuzz_settings(15)
@given(data=st.data())
def test_mutated_valid_requests_decode_or_raise_protocol_error(key, version, data):
    body = write(CODECS[(key, version)][0], data.draw(message_strategy(key, version, 0)))
    frame = bytearray(request_frame(key, version, body)[4:])
    mutated = _mutate(frame, data)
    try:
        ServerConnection.decode_frame(mutated)
    except ProtocolError:
        pass


def _mutate(frame: bytearray, data: st.DataObject) -> bytearray:
    kind = data.draw(st.sampled_from(["truncate", "extend", "flip"]), label="mutation")
    if kind == "truncate" and len(frame) > 1:
        return frame[: data.draw(st.integers(0, len(frame) - 1), label="cut")]
    if kind == "extend":
        return frame + data.draw(st.binary(min_size=1, max_size=16), label="extra")
    out = bytearray(frame)
    for pos in data.draw(st.lists(st.integers(0, len(frame) - 1), min_size=1, max_size=4), label="flips"):
        out[pos] ^= 1 << data.draw(st.integers(0, 7))
    return out


def test_librdkafka_metadata_request_with_its_three_extra_bytes_decodes():
    """librdkafka 2.x sends Metadata v12 "all topics" with 3 bytes after the body; Kafka ignores them."""
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    ev = ServerConnection.decode_frame(bytearray(frame))
    assert isinstance(ev, RequestReceived)
    assert ev.request.topics is None
    # other requests stay strict
    _, good = codecs_request(m.ApiVersionsRequest())
    with pytest.raises(ProtocolError, match="trailing"):
        ServerConnection.decode_frame(bytearray(good[4:] + b"zz"))


def codecs_request(req: Any, version: int | None = None) -> tuple[int, bytes]:
    key = req.API_KEY
    v = SUPPORTED_VERSIONS[key][1] if version is None else version
    return 1, b"".join(bytes(p) for p in codecs.encode_request(m.RequestHeader(key, v, 1, "fuzz"), req))


# ================================================================== live broker


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    # few partitions per topic: generated CreateTopics and auto-created topics stay cheap
    with broker_process(tmp_path_factory.mktemp("fuzz"), config={"max.partitions.per.topic": "4"}) as b:
        with WireClient(b.bootstrap) as canary:
            b.canary = canary
            yield b


#: sent after each fuzzed frame on the same connection: its answer (responses come in request order) says
#: the broker is done with the frame before it, so no test waits for a timeout to see silence
_PROBE_CID = 0x7E57
_PROBE = request_frame(m.ApiKey.API_VERSIONS, 0, b"", _PROBE_CID)


def _exchange(bootstrap: str, frames: list[bytes], wait: float) -> list[tuple[list[bytes], bool]]:
    """Send each frame, then the probe, on a connection of its own; return (response frames before the
    probe's, closed by the broker) per frame once each connection closed or answered the probe, or
    ``wait`` ran out (a long-polling fetch)."""
    host, port = bootstrap.rsplit(":", 1)
    sel = selectors.DefaultSelector()
    socks, got, closed, done = [], [], [], []
    for i, f in enumerate(frames):
        s = socket.create_connection((host, int(port)), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(f + _PROBE)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
        socks.append(s)
        got.append(bytearray())
        closed.append(False)
        done.append([])
    deadline = time.monotonic() + wait
    pending = set(range(len(frames)))
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
            i = key.data
            try:
                chunk = socks[i].recv(1 << 16)
            except (ConnectionResetError, BrokenPipeError):
                chunk = b""
            except BlockingIOError:
                continue
            if not chunk:
                closed[i] = True
                sel.unregister(socks[i])
                pending.discard(i)
                continue
            buf = got[i]
            buf += chunk
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                n = 4 + struct.unpack_from(">i", buf)[0]
                frame, buf[:] = bytes(buf[:n]), buf[n:]
                if len(frame) >= 8 and struct.unpack_from(">i", frame, 4)[0] == _PROBE_CID and i in pending:
                    sel.unregister(socks[i])
                    pending.discard(i)
                    break
                done[i].append(frame)
    for s in socks:
        s.close()
    sel.close()
    return list(zip(done, closed, strict=True))


def _check_answer(frame: bytes, answers: list[bytes], closed: bool) -> None:
    """The oracle for one request frame: what the broker may answer to it."""
    for a in answers:
        assert b"Traceback" not in a and b'File "' not in a, a[:400]
    assert len(answers) <= 1, f"{len(answers)} answers to one request"
    try:
        ev = ServerConnection.decode_frame(bytearray(frame[4:]))
    except ProtocolError:
        ev = None
    if ev is None or not isinstance(ev, RequestReceived):
        if ev is not None and ev.header.api_key == m.ApiKey.API_VERSIONS:
            assert answers, "an unsupported ApiVersions version gets Kafka's v0 answer with error 35"
            return
        # malformed or unknown: the connection is closed, with no answer
        assert not answers, f"broker answered a malformed frame: {answers[0][:80]!r}"
        assert closed, "broker kept a connection open after a malformed frame"
        return
    key, version, cid = ev.header.api_key, ev.header.api_version, ev.header.correlation_id
    if not answers:
        if closed:
            return  # a well-formed request the broker refused to serve: closing is allowed
        # no answer: an acks=0 produce (the probe was answered), or a fetch still long-polling
        assert key == m.ApiKey.FETCH or (key == m.ApiKey.PRODUCE and ev.request.acks == 0), (key, version)
        return
    size, rcid = struct.unpack_from(">ii", answers[0])
    assert rcid == cid
    resp = codecs.decode_response_body(key, version, Reader(memoryview(answers[0])[8:]))
    for text in _strings(resp):
        assert "Traceback" not in text, text


def _strings(x: Any) -> list[str]:
    if isinstance(x, str):
        return [x]
    if isinstance(x, (list, tuple)):
        return [s for v in x for s in _strings(v)]
    if hasattr(x, "__dataclass_fields__"):
        return [s for k in x.__dataclass_fields__ for s in _strings(getattr(x, k))]
    return []


def _new_log(b: Any) -> str:
    """What the broker logged since the last call."""
    with open(b.log_file, "rb") as f:
        f.seek(getattr(b, "log_seen", 0))
        data = f.read()
    b.log_seen = getattr(b, "log_seen", 0) + len(data)
    return data.decode(errors="replace")


@pytest.mark.parametrize("key,version", PAIRS, ids=IDS)
@fuzz_settings(3)
@given(data=st.data())
def test_live_broker_answers_or_closes_and_stays_up(fuzz_broker, key, version, data):
    d = data.draw(message_strategy(key, version, 0))
    if key == m.ApiKey.FETCH:
        d["max_wait_ms"] = min(abs(d["max_wait_ms"]), 50)  # keep long polls short (flips may lengthen them)
    body = write(CODECS[(key, version)][0], d)
    cid = data.draw(st.integers(0, 1 << 20), label="cid")
    good = request_frame(key, version, body, cid)
    frames = [good]
    inner = bytearray(good[4:])
    # a truncated body (length prefix matching: the frame is complete, its contents are not)
    cut = inner[: data.draw(st.integers(0, len(inner) - 1), label="cut")]
    frames.append(struct.pack(">i", len(cut)) + cut)
    # trailing bytes
    extra = inner + data.draw(st.binary(min_size=1, max_size=16), label="extra")
    frames.append(struct.pack(">i", len(extra)) + extra)
    # bit flips anywhere after the length prefix
    flipped = bytearray(inner)
    for pos in data.draw(st.lists(st.integers(0, len(inner) - 1), min_size=1, max_size=3), label="flips"):
        flipped[pos] ^= 1 << data.draw(st.integers(0, 7))
    frames.append(struct.pack(">i", len(flipped)) + flipped)
    results = _exchange(fuzz_broker.bootstrap, frames, wait=1.5)
    for f, (answers, closed) in zip(frames, results, strict=True):
        _check_answer(f, answers, closed)
    # the broker handled each as a typed error: nothing unexpected in its log
    logged = _new_log(fuzz_broker)
    assert "Traceback" not in logged and " ERROR " not in logged, (
        "broker error on one of these frames:\n" + "\n".join(f.hex() for f in frames) + "\n" + logged[-4000:]
    )
    # the other connection keeps working, and the broker process is alive
    assert fuzz_broker.canary.metadata(["fuzz-canary"], auto_create=False).topics is not None
    assert fuzz_broker._proc.poll() is None


def test_live_broker_closes_oversized_and_negative_frames(fuzz_broker):
    # socket.request.max.bytes defaults to 100 MiB: a length prefix beyond it is refused before reading
    frames = [
        struct.pack(">i", 0x7FFFFFFF) + b"\x00\x12\x00\x00",
        struct.pack(">i", -5) + b"\x00" * 8,
        struct.pack(">i", 104857600 + 1) + b"\x00\x03",
    ]
    for answers, closed in _exchange(fuzz_broker.bootstrap, frames, wait=5):
        assert closed and answers == []
    assert fuzz_broker.canary.request(m.ApiVersionsRequest()).error_code == 0


def test_live_broker_deletes_a_topic_with_the_longest_legal_name(tmp_path):
    name = "d" * 249
    with broker_process(tmp_path) as b, WireClient(b.bootstrap) as c:
        assert c.create_topic(name, 1) == 0
        resp = c.request(m.DeleteTopicsRequest([name]))
        assert [(t.name, t.error_code) for t in resp.topics] == [(name, 0)]
        assert name not in {t.name for t in c.metadata().topics}


def test_live_broker_logged_no_unexpected_exception(fuzz_broker):
    """Runs last in this module: every malformed input above was a typed error, not a broker bug."""
    log = fuzz_broker.log_file.read_text(errors="replace")
    bad = [line for line in log.splitlines() if "Traceback" in line or " ERROR " in line]
    assert not bad, (
        "\n".join(bad[:20]) + "\n...\n" + log[log.find("Traceback") - 2000 : log.find("Traceback") + 3000]
    )
