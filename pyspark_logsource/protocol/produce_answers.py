"""The client's decode of the frames of one read: correlation ids checked, the producer's answers compact.

:func:`decode_answers` takes the frames a read split off (``FrameDecoder``) and the requests in
flight, checks each frame's correlation id against the oldest one and decodes its response. The
producer's common answer (a ProduceResponse v3-v8 of one partition, no record errors, no error
message: what ``codecs.decode_produce_response_one`` takes) becomes a :class:`ProduceAnswer`, a
row of its fields, instead of a ProduceResponse, its partition object and a ResponseReceived;
any other frame goes to the general decode. A ProduceAnswer stands in for a ResponseReceived
(``correlation_id``, ``api_key``, ``response`` built on first use). This module is the reference
of ``_canswers.pyx`` (the same function and class, compiled), which ``ClientConnection`` uses
when it is built.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from . import messages as m
from .primitives import ProtocolError, Reader

_I32 = struct.Struct(">i")
_TOPIC = struct.Struct(">ih")
#: per version: partition count, index, error, base offset, log append time[, log start][, 0 record
#: errors, null message] (codecs._PRODUCE_RESP_PART)
_PART = {
    **{v: struct.Struct(">iihqq") for v in (3, 4)},
    **{v: struct.Struct(">iihqqq") for v in (5, 6, 7)},
    8: struct.Struct(">iihqqqih"),
}


class ProduceAnswer:
    """A ProduceResponse of one partition (the producer's answer to a request of one batch), as a row."""

    __slots__ = (
        "correlation_id",
        "topic",
        "partition",
        "error_code",
        "base_offset",
        "log_append_time_ms",
        "log_start_offset",
        "throttle_time_ms",
    )
    api_key = 0

    def __init__(
        self,
        correlation_id: int,
        topic: str,
        partition: int,
        error_code: int,
        base_offset: int,
        log_append_time_ms: int,
        log_start_offset: int,
        throttle_time_ms: int,
    ) -> None:
        self.correlation_id = correlation_id
        self.topic = topic
        self.partition = partition
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.throttle_time_ms = throttle_time_ms

    @property
    def response(self) -> m.ProduceResponse:
        """The same answer as a ProduceResponse (what the general decode gives for its bytes)."""
        return m.ProduceResponse(
            [
                m.ProducePartitionResponse(
                    self.topic,
                    self.partition,
                    self.error_code,
                    self.base_offset,
                    self.log_append_time_ms,
                    self.log_start_offset,
                )
            ],
            self.throttle_time_ms,
        )

    def __repr__(self) -> str:
        return f"ProduceAnswer({self.correlation_id}, {self.response!r})"


def answer_fields(a: Any) -> tuple:
    """A ProduceAnswer's fields as a tuple (of either twin; for tests and comparisons)."""
    return (
        a.correlation_id,
        a.topic,
        a.partition,
        a.error_code,
        a.base_offset,
        a.log_append_time_ms,
        a.log_start_offset,
        a.throttle_time_ms,
    )


def _produce_answer(cid: int, frame: Any, version: int) -> ProduceAnswer | None:
    """The answer in ``frame`` (after its correlation id) as a ProduceAnswer, or None (general decode)."""
    end = len(frame)
    pos = 4
    if not 3 <= version <= 8 or end - pos < 6:
        return None
    ntopics, name_len = _TOPIC.unpack_from(frame, pos)
    st = _PART[version]
    head = pos + 6 + name_len
    if ntopics != 1 or name_len < 0 or head + st.size + 4 != end:
        return None
    vals = st.unpack_from(frame, head)
    if vals[0] != 1 or (version >= 8 and (vals[-2] != 0 or vals[-1] != -1)):
        return None
    try:
        name = str(frame[pos + 6 : head], "utf-8")
    except UnicodeDecodeError:
        return None
    lso = vals[5] if version >= 5 else -1
    throttle = _I32.unpack_from(frame, end - 4)[0]
    return ProduceAnswer(cid, name, vals[1], vals[2], vals[3], vals[4], lso, throttle)


def decode_answers(
    frames: list[Any],
    pending: list[tuple[int, int, int]],
    head: int,
    general: Callable[[int, int, int, Any], Any],
) -> tuple[list[Any], int]:
    """The responses of ``frames`` (each a whole frame without its length prefix), in order.

    ``pending[head:]`` are the requests in flight, ``(correlation_id, api_key, version)``, oldest
    first; each frame must answer the next one (ProtocolError otherwise, as for a frame too short to
    hold an id). Returns the answers (a :class:`ProduceAnswer`, or what
    ``general(correlation_id, api_key, version, frame)`` makes of the frame: the caller's general
    decode) and the new head.
    """
    out: list[Any] = []
    for frame in frames:
        if len(frame) < 4:
            Reader(frame).i32()  # raises its typed error
        cid = _I32.unpack_from(frame)[0]
        if head >= len(pending):
            raise ProtocolError(f"response with correlation id {cid} but no request in flight")
        want, key, version = pending[head]
        if cid != want:
            raise ProtocolError(f"response correlation id {cid}, expected {want}")
        head += 1
        a = _produce_answer(cid, frame, version) if key == 0 else None
        out.append(general(cid, key, version, frame) if a is None else a)
    return out, head
