"""Sans-IO connection state machines: bytes in, events out (in the style of h11).

Neither class touches a socket. The caller reads bytes from wherever it
likes, hands them to ``receive_data`` and gets decoded events back; to send,
it asks for the parts of a frame and writes them (bytes-like parts with
``sendmsg``/``write``, region parts with ``os.sendfile``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ..errors import UnsupportedVersion
from ..format._speedups import crecords, load_extension
from . import messages as m
from . import produce_answers
from .codecs import (
    APIS,
    SUPPORTED_VERSIONS,
    _cproduce,
    decode_request_body,
    decode_request_header,
    decode_response_body,
    encode_api_versions_fallback,
    encode_produce_many,
    encode_produce_one,
    encode_request,
    encode_response,
    is_supported,
)
from .messages import ARROW_BODY_FEATURE, ApiKey, ApiVersionsResponse, RequestHeader
from .primitives import FrameTooLarge, ProtocolError, Reader

_I32 = struct.Struct(">i")

#: Versions our clients stop at even when the broker has newer ones: Produce v9 is flexible, v8
#: carries the same fields and has the hand-written fast path (one message per request is a hot path).
CLIENT_MAX_VERSIONS = {int(ApiKey.PRODUCE): 8}

#: Default bound on a frame (socket.request.max.bytes): 100 MiB.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024

#: Frames at least this large are received into a buffer of their final size, allocated once the
#: (checked) length prefix has arrived, as Kafka's NetworkReceive does.
_FILL_IN_PLACE = 64 * 1024
#: a frame's buffer: not zero-filled when compiled (every byte is received into it before it is handed on)
_new_frame = bytearray if crecords is None else crecords.unfilled_bytearray


class OnePartitionProduce:
    """A Produce request of one partition's records (the producer's common request), sent as
    ``ProduceRequest([ProducePartitionData(topic, partition, records)], acks, timeout_ms)`` is, without
    building those objects (``ClientConnection.send_produce``)."""

    API_KEY = ApiKey.PRODUCE
    __slots__ = ("topic", "partition", "records", "acks", "timeout_ms")

    def __init__(self, topic: str, partition: int, records: Any, acks: int, timeout_ms: int) -> None:
        self.topic = topic
        self.partition = partition
        self.records = records
        self.acks = acks
        self.timeout_ms = timeout_ms

    def to_request(self) -> m.ProduceRequest:
        """The same request as a ProduceRequest."""
        return m.ProduceRequest(
            [m.ProducePartitionData(self.topic, self.partition, self.records)], self.acks, self.timeout_ms
        )


class FrameDecoder:
    """Splits a byte stream into frames of int32-length-prefixed bytes.

    The length prefix is checked against ``max_frame_bytes`` as soon as its
    4 bytes arrive, before anything is allocated for the frame. Each frame is
    returned as its own writable bytearray (so the broker can stamp offsets
    into produced batches in place).
    """

    __slots__ = ("max_frame_bytes", "_buf", "_need", "_frame", "_filled", "error")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._need = -1  # size of the frame being assembled, -1 while reading its prefix
        # A large frame is filled in place: growing ``_buf`` by each received piece re-copies it
        # on every reallocation (a 32 MiB fetch answer in 1 MiB reads: 19 ms, filled: 4 ms).
        self._frame: bytearray | None = None
        self._filled = 0
        #: A bad length prefix found after whole frames in the same data: those frames are
        #: returned first (the peer gets their answers), the error is raised by the next feed().
        self.error: FrameTooLarge | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) + (4 + self._filled if self._frame is not None else 0)

    @property
    def in_frame(self) -> bool:
        """True while part of a frame has been received (a disconnect now cuts a request)."""
        return bool(self._buf) or self._frame is not None

    def unfilled(self) -> memoryview | None:
        """The missing part of a large frame being received, or None: receive into it, then :meth:`filled`.

        Receiving straight into the frame saves the one copy :meth:`feed` makes.
        """
        if self._frame is None:
            return None
        return memoryview(self._frame)[self._filled :]

    def filled(self, n: int) -> list[bytearray]:
        """``n`` bytes were written at the start of :meth:`unfilled`; return the frame if it is complete."""
        frame = self._frame
        if frame is None or not 0 <= n <= len(frame) - self._filled:
            raise ValueError(f"{n} bytes do not fit the frame being received")
        self._filled += n
        if self._filled < len(frame):
            return []
        self._frame = None
        self._need = -1
        return [frame]

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        """Add received bytes; return the complete frames (without length prefix)."""
        if self.error is not None:
            raise self.error
        frames: list[bytearray] = []
        frame = self._frame
        if frame is not None:
            data = memoryview(data).cast("B")
            take = min(len(data), len(frame) - self._filled)
            frame[self._filled : self._filled + take] = data[:take]
            self._filled += take
            if self._filled < len(frame):
                return frames
            frames.append(frame)
            self._frame = None
            self._need = -1
            data = data[take:]
            if not data:
                return frames
        buf = self._buf
        buf += data
        if _split_frames is not None and self._need < 0:
            # the compiled loop takes the complete small frames; the loop below the rest (or the error)
            got, used = _split_frames(buf, self.max_frame_bytes, _FILL_IN_PLACE)
            if used:
                del buf[:used]
                frames += got
        while True:
            if self._need < 0:
                if len(buf) < 4:
                    return frames
                n = _I32.unpack_from(buf, 0)[0]
                if n < 0 or n > self.max_frame_bytes:
                    self.error = FrameTooLarge(
                        f"frame of {n} bytes refused (socket.request.max.bytes={self.max_frame_bytes})"
                    )
                    del buf[:]  # nothing after a bad prefix can be framed
                    if frames:
                        return frames
                    raise self.error
                self._need = n
            if len(buf) - 4 < self._need:
                if self._need >= _FILL_IN_PLACE:
                    frame = _new_frame(self._need)
                    self._filled = len(buf) - 4
                    frame[: self._filled] = memoryview(buf)[4:]
                    self._frame = frame
                    del buf[:]
                return frames
            end = 4 + self._need
            if end == len(buf):
                # the buffer ends with this frame (a big fetch answer, or the last request of a
                # read): hand the buffer itself out instead of copying it
                del buf[:4]
                frames.append(buf)
                self._buf = bytearray()
                self._need = -1
                return frames
            frames.append(buf[4:end])
            # bytearray deletes from the front in O(1) (it moves its start pointer)
            del buf[:end]
            self._need = -1


# ------------------------------------------------------------------ server side


@dataclass(slots=True)
class RequestReceived:
    """A decoded request."""

    header: RequestHeader
    request: Any


@dataclass(slots=True)
class UnsupportedRequest:
    """A frame with an unknown api key or version.

    Kafka answers an unknown ApiVersions version with a v0 body and error 35
    (:meth:`ServerConnection.unsupported_parts`); for any other key it closes
    the connection, since the body's layout is unknown.
    """

    header: RequestHeader

    @property
    def answerable(self) -> bool:
        """True if Kafka's protocol has an answer for it (ApiVersions); else close the connection."""
        return self.header.api_key == ApiKey.API_VERSIONS


class ServerConnection:
    """Broker side of one connection: frames -> requests, responses -> frame parts."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.frames = FrameDecoder(max_frame_bytes)

    def receive_data(
        self, data: bytes | bytearray | memoryview
    ) -> list[RequestReceived | UnsupportedRequest]:
        """Decode all complete requests in ``data``; raise ProtocolError if malformed.

        A server that wants to answer the good requests before a bad one should
        use ``frames.feed`` and :meth:`decode_frame` one frame at a time, then
        check ``frames.error``.
        """
        return [self.decode_frame(f) for f in self.frames.feed(data)]

    @staticmethod
    def decode_frame(frame: bytearray | memoryview) -> RequestReceived | UnsupportedRequest:
        """Decode one request frame (without its length prefix)."""
        if _produce_decode is not None:  # the compiled Produce fast path (None: not its shape)
            ev = _produce_decode(frame)
            if ev is not None:
                return ev
        r = Reader(frame)
        header = decode_request_header(r)
        if not is_supported(header.api_key, header.api_version):
            return UnsupportedRequest(header)
        return RequestReceived(header, decode_request_body(header, r))

    @staticmethod
    def decode_frames(
        frames: list,
    ) -> tuple[list[RequestReceived | UnsupportedRequest], ProtocolError | None]:
        """Decode ``frames`` in order up to the first malformed one: (the requests, that frame's
        ProtocolError or None). A server answers the requests before a bad one, then closes."""
        if _decode_frames is not None:
            return _decode_frames(frames, ServerConnection.decode_frame, ProtocolError)
        events = []
        for f in frames:
            try:
                events.append(ServerConnection.decode_frame(f))
            except ProtocolError as e:
                return events, e
        return events, None

    @staticmethod
    def response_parts(header: RequestHeader, response: Any) -> list[Any]:
        """Parts of the response frame for ``header``'s request."""
        return encode_response(header, response)

    @staticmethod
    def append_responses(out: bytearray, events: list[Any], results: list[Any]) -> bytearray:
        """Append the response frames to ``events``' requests to ``out`` (a None result: no answer).

        Only for answers without file regions (a run of produces): their parts are all bytes."""
        if _cproduce_append is not None:
            return _cproduce_append(out, events, results, encode_response)
        if len(results) != len(events):
            raise ValueError(f"{len(events)} requests but {len(results)} results")
        for ev, result in zip(events, results, strict=True):
            if result is not None:
                out += b"".join(encode_response(ev.header, result))
        return out

    @staticmethod
    def unsupported_parts(header: RequestHeader) -> list[Any]:
        """Kafka's answer to an ApiVersions request of a version it does not know."""
        return encode_api_versions_fallback(header.correlation_id)


#: protocol/_cproduce.pyx's decode of the common Produce frame, None when not built or switched off
_produce_decode = (
    _cproduce.decode_produce_frame
    if _cproduce is not None
    and _cproduce.bind(RequestHeader, m.ProduceRequest, m.ProducePartitionData, RequestReceived)
    else None
)

_cproduce_append = _cproduce.append_responses if _produce_decode is not None else None
#: the compiled loop of ServerConnection.decode_frames (the Python loop there is its reference)
_decode_frames = getattr(_cproduce, "decode_frames", None) if _produce_decode is not None else None
#: the compiled frame splitting of FrameDecoder.feed (the Python loop there is its reference)
_split_frames = _cproduce.split_frames if _cproduce is not None else None
#: the client's decode of a read's frames: compiled (``_canswers.pyx``) or the reference
_canswers = load_extension(__name__.rpartition(".")[0] + "._canswers")
_decode_answers = _canswers.decode_answers if _canswers is not None else produce_answers.decode_answers
#: the classes of the producer's compact answers receive_data may give (of either twin)
ANSWER_TYPES = frozenset(
    [produce_answers.ProduceAnswer] + ([_canswers.ProduceAnswer] if _canswers is not None else [])
)

# ------------------------------------------------------------------ client side


@dataclass(slots=True)
class ResponseReceived:
    """A decoded response to the request with ``correlation_id``."""

    correlation_id: int
    api_key: int
    response: Any

    @property
    def throttle_time_ms(self) -> int:
        """The response's throttle_time_ms (0 for APIs without one), as a ProduceAnswer has it."""
        return getattr(self.response, "throttle_time_ms", 0) or 0


class ClientConnection:
    """Client side of one connection: requests -> bytes, bytes -> responses.

    Correlation ids are assigned here; responses must arrive in request order
    (the broker answers each connection's requests in order), which is checked.
    Produce requests with ``acks=0`` get no response and are not awaited.

    Versions: until :meth:`negotiated` sees the broker's ApiVersions answer,
    requests go at our highest version; after it, at the highest version both
    sides speak (:attr:`versions`).
    """

    def __init__(self, client_id: str | None = None, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.client_id = client_id
        self.frames = FrameDecoder(max_frame_bytes)
        self._next_id = 0
        self._pending: list[tuple[int, int, int]] = []  # (correlation_id, api_key, version), oldest first
        self._head = 0
        #: api key -> the version to send (after negotiation)
        self.versions: dict[int, int] = {
            k: min(hi, CLIENT_MAX_VERSIONS.get(k, hi)) for k, (_, hi) in SUPPORTED_VERSIONS.items()
        }
        #: the broker's features (ApiVersions v3+): name -> (min, max)
        self.features: dict[str, tuple[int, int]] = {}
        #: api key -> the broker's (min, max), for error messages
        self.broker_versions: dict[int, tuple[int, int]] = {}

    def negotiated(self, resp: ApiVersionsResponse) -> None:
        """Pick, per api key, the highest version both sides speak (keys without overlap are dropped)."""
        self.broker_versions = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
        chosen = {}
        for key, (lo, hi) in SUPPORTED_VERSIONS.items():
            hi = min(hi, CLIENT_MAX_VERSIONS.get(key, hi))
            theirs = self.broker_versions.get(key)
            if theirs is not None and max(lo, theirs[0]) <= min(hi, theirs[1]):
                chosen[key] = min(hi, theirs[1])
        self.versions = chosen
        self.features = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}

    @property
    def arrow_body(self) -> bool:
        """True if the broker stores and serves our Arrow-bodied batches."""
        return ARROW_BODY_FEATURE in self.features

    def version_for(self, api_key: int) -> int:
        """The version requests of ``api_key`` are sent at; UnsupportedVersion if the broker has none we speak."""
        v = self.versions.get(api_key)
        if v is None:
            theirs = self.broker_versions.get(api_key)
            raise UnsupportedVersion(
                f"the broker speaks api key {api_key} at versions {theirs}, we at {SUPPORTED_VERSIONS.get(api_key)}"
                if theirs
                else f"the broker does not support api key {api_key}"
            )
        return v

    @property
    def in_flight(self) -> int:
        """Requests sent whose response has not arrived yet."""
        return len(self._pending) - self._head

    def send_request(self, request: Any, api_version: int | None = None) -> tuple[int, list[Any]]:
        """Encode ``request`` (at the negotiated version unless given); return (correlation id, frame parts)."""
        if type(request) is OnePartitionProduce:
            if api_version is None:
                return self.send_produce(request)
            request = request.to_request()
        key = int(request.API_KEY)
        version = self.version_for(key) if api_version is None else api_version
        cid = self._next_id
        parts = encode_request(RequestHeader(key, version, cid, self.client_id), request)
        self._next_id = (cid + 1) & 0x7FFFFFFF
        if not (key == 0 and request.acks == 0):
            self._pending.append((cid, key, version))
        return cid, parts

    def send_produce(self, request: OnePartitionProduce) -> tuple[int, list[Any]]:
        """send_request for a Produce of one partition's records, at the negotiated version."""
        version = self.version_for(0)
        cid = self._next_id
        parts = encode_produce_one(
            self.client_id,
            version,
            cid,
            request.acks,
            request.timeout_ms,
            request.topic,
            request.partition,
            request.records,
        )
        if parts is None:  # the general path (and its precise errors)
            return self.send_request(request.to_request())
        self._next_id = (cid + 1) & 0x7FFFFFFF
        if request.acks != 0:
            self._pending.append((cid, 0, version))
        return cid, parts

    def send_requests(self, requests: list[Any]) -> tuple[list[int], list[Any]]:
        """send_request for each of ``requests`` in order, at the negotiated versions: (their correlation
        ids, all their frame parts). A run of OnePartitionProduce (the producer's requests of one batch)
        is written into one buffer, the same bytes as one by one. All or nothing: if one request cannot
        be encoded, its error is raised and no answer is expected and no correlation id taken for any."""
        if len(requests) > 1 and all(type(r) is OnePartitionProduce for r in requests):
            version = self.version_for(0)
            cid = self._next_id
            frames = encode_produce_many(self.client_id, version, cid, requests)
            if frames is not None:
                cids = [(cid + i) & 0x7FFFFFFF for i in range(len(requests))]
                self._next_id = (cid + len(requests)) & 0x7FFFFFFF
                self._pending.extend(
                    [(c, 0, version) for c, r in zip(cids, requests, strict=True) if r.acks != 0]
                )
                return cids, [frames]
        cids, parts = [], []
        next_id, pending = self._next_id, len(self._pending)
        try:
            for r in requests:
                cid, frame = self.send_request(r)
                cids.append(cid)
                parts.extend(frame)
        except BaseException:
            # none of the group is written: the answers expected and the ids taken for the requests
            # before the failed one go back, or the next answer on this connection would not match
            self._next_id = next_id
            del self._pending[pending:]
            raise
        return cids, parts

    def request_bytes(self, request: Any, api_version: int | None = None) -> tuple[int, bytes]:
        """Like send_request, but the frame as one bytes object."""
        cid, parts = self.send_request(request, api_version)
        return cid, b"".join(parts)

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Any]:
        """Decode all complete responses in ``data``; raise ProtocolError if malformed.

        Each is a ResponseReceived, or for the producer's common answer (a Produce of one partition)
        a :class:`~.produce_answers.ProduceAnswer`: the same ``correlation_id``, ``api_key`` and
        ``response`` (built on first use), and the answer's fields."""
        return self._responses(self.frames.feed(data))

    def receive_buffer(self) -> memoryview | None:
        """Where the next received bytes may go directly (the rest of a large response), or None."""
        return self.frames.unfilled()

    def received_into(self, n: int) -> list[Any]:
        """``n`` bytes were received into :meth:`receive_buffer`; decode the response if complete."""
        return self._responses(self.frames.filled(n))

    def _responses(self, frames: list[bytearray]) -> list[Any]:
        if not frames:
            return []
        out, self._head = _decode_answers(frames, self._pending, self._head, _general_answer)
        if self._head > 1024 and self._head * 2 > len(self._pending):
            del self._pending[: self._head]
            self._head = 0
        return out


def _general_answer(cid: int, key: int, version: int, frame: bytearray) -> ResponseReceived:
    """A response that is not the producer's compact answer: the general decode (decode_answers' fallback)."""
    return ResponseReceived(cid, key, decode_response_body(key, version, Reader(frame, 4)))


def frame_bytes(parts: list[Any]) -> bytes:
    """Join bytes-like frame parts (raises TypeError if a part is a file region)."""
    for p in parts:
        if not isinstance(p, (bytes, bytearray, memoryview)):
            raise TypeError("frame has a file region; send it with sendfile")
    return b"".join(parts)


__all__ = [
    "APIS",
    "ClientConnection",
    "DEFAULT_MAX_FRAME_BYTES",
    "FrameDecoder",
    "RequestReceived",
    "ResponseReceived",
    "ServerConnection",
    "UnsupportedRequest",
    "frame_bytes",
]
