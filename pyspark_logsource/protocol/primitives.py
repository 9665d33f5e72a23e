"""Bounded readers and part-collecting writers for the protocol's primitive types.

Every length read from the network is checked against the bytes that are
actually left in the frame before anything is sliced or allocated, so a
hostile length field can never make the decoder allocate more than the frame
it already holds.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..errors import InvalidRequest

T = TypeVar("T")

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

#: Payloads at least this large are kept as separate parts when encoding
#: (no copy into the header buffer); the transport writes them with sendmsg.
ZERO_COPY_THRESHOLD = 64 * 1024

_BYTES_TYPES = (bytes, bytearray, memoryview)


class ProtocolError(InvalidRequest):
    """Bytes from the peer do not form a valid frame or message.

    The connection that sent them cannot be trusted to stay in sync and is
    closed; other connections are not affected.
    """


class FrameTooLarge(ProtocolError):
    """A frame's length prefix is negative or exceeds the configured bound."""


class Reader:
    """Sequential, bounds-checked reader over one frame (a memoryview)."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    @property
    def remaining(self) -> int:
        """Bytes left to read."""
        return self.end - self.pos

    def _need(self, n: int, what: str) -> None:
        if n > self.end - self.pos:
            raise ProtocolError(f"truncated {what}: need {n} bytes, {self.end - self.pos} left")

    def i8(self) -> int:
        """Read a signed byte."""
        pos = self.pos
        if pos + 1 > self.end:
            raise ProtocolError(f"truncated int8: need 1 bytes, {self.end - pos} left")
        self.pos = pos + 1
        return _I8.unpack_from(self.buf, pos)[0]

    def boolean(self) -> bool:
        """Read a boolean (int8, 0 or 1)."""
        v = self.i8()
        if v not in (0, 1):
            raise ProtocolError(f"invalid boolean {v}")
        return bool(v)

    def i16(self) -> int:
        """Read a big-endian int16."""
        pos = self.pos
        if pos + 2 > self.end:
            raise ProtocolError(f"truncated int16: need 2 bytes, {self.end - pos} left")
        self.pos = pos + 2
        return _I16.unpack_from(self.buf, pos)[0]

    def i32(self) -> int:
        """Read a big-endian int32."""
        pos = self.pos
        if pos + 4 > self.end:
            raise ProtocolError(f"truncated int32: need 4 bytes, {self.end - pos} left")
        self.pos = pos + 4
        return _I32.unpack_from(self.buf, pos)[0]

    def i64(self) -> int:
        """Read a big-endian int64."""
        pos = self.pos
        if pos + 8 > self.end:
            raise ProtocolError(f"truncated int64: need 8 bytes, {self.end - pos} left")
        self.pos = pos + 8
        return _I64.unpack_from(self.buf, pos)[0]

    def _utf8(self, n: int) -> str | None:
        # n is a decoded length: -1 is null, anything else must fit in the frame
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"negative string length {n}")
        self._need(n, "string")
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"string is not UTF-8: {e}") from None

    def _slice(self, n: int) -> memoryview | None:
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"negative bytes length {n}")
        self._need(n, "bytes")
        mv = self.buf[self.pos : self.pos + n]
        self.pos += n
        return mv

    def nstring(self) -> str | None:
        """Read a nullable string: int16 length (-1 = null) + UTF-8 bytes."""
        return self._utf8(self.i16())

    def string(self) -> str:
        """Read a non-null string."""
        s = self.nstring()
        if s is None:
            raise ProtocolError("null where a string is required")
        return s

    def nbytes(self) -> memoryview | None:
        """Read nullable bytes: int32 length (-1 = null); returns a zero-copy slice."""
        return self._slice(self.i32())

    def count(self, min_item_size: int = 1) -> int:
        """Read a non-null array count, bounded by the bytes left / ``min_item_size``."""
        n = self.i32()
        if n < 0:
            raise ProtocolError(f"invalid array length {n}")
        if n * min_item_size > self.end - self.pos:
            raise ProtocolError(f"array of {n} items cannot fit in {self.end - self.pos} bytes")
        return n

    def narray(self, item: Callable[[Reader], T], min_item_size: int = 1) -> list[T] | None:
        """Read a nullable array: int32 count (-1 = null), then ``count`` items.

        The count is bounded by the bytes left / ``min_item_size`` before any
        item is read, so a lying count fails fast.
        """
        n = self.i32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"negative array length {n}")
        if n * min_item_size > self.end - self.pos:
            raise ProtocolError(f"array of {n} items cannot fit in {self.end - self.pos} bytes")
        return [item(self) for _ in range(n)]

    def array(self, item: Callable[[Reader], T], min_item_size: int = 1) -> list[T]:
        """Read a non-null array."""
        out = self.narray(item, min_item_size)
        if out is None:
            raise ProtocolError("null where an array is required")
        return out

    def uvarint(self) -> int:
        """Read an unsigned varint (at most 5 bytes: Kafka's lengths and tags are int32)."""
        buf, pos, end = self.buf, self.pos, self.end
        result = shift = 0
        while True:
            if pos >= end:
                raise ProtocolError("truncated varint")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos
                return result
            shift += 7
            if shift > 28:
                raise ProtocolError("varint is longer than 5 bytes")

    def compact_nstring(self) -> str | None:
        """Read a compact nullable string: uvarint length+1 (0 = null) + UTF-8 bytes."""
        return self._utf8(self.uvarint() - 1)

    def compact_string(self) -> str:
        """Read a compact non-null string."""
        s = self.compact_nstring()
        if s is None:
            raise ProtocolError("null where a string is required")
        return s

    def compact_nbytes(self) -> memoryview | None:
        """Read compact nullable bytes (uvarint length+1, 0 = null); a zero-copy slice."""
        return self._slice(self.uvarint() - 1)

    def compact_count(self, min_item_size: int = 1) -> int:
        """Read a compact array count (uvarint n+1); -1 for null. Bounded by the bytes left."""
        n = self.uvarint() - 1
        if n > 0 and n * min_item_size > self.end - self.pos:
            raise ProtocolError(f"array of {n} items cannot fit in {self.end - self.pos} bytes")
        return n

    def take(self, n: int, what: str) -> memoryview:
        """Read ``n`` raw bytes (zero-copy)."""
        self._need(n, what)
        mv = self.buf[self.pos : self.pos + n]
        self.pos += n
        return mv

    def done(self, what: str) -> None:
        """Require that the whole frame was consumed."""
        if self.pos != self.end:
            raise ProtocolError(f"{self.end - self.pos} trailing bytes after {what}")


class Writer:
    """Appends encoded fields; large payloads and file regions become separate parts.

    ``parts`` is a list of bytes-like objects and *regions* (any object with an
    integer ``length`` that is not bytes-like, such as the log's FileRegion),
    in wire order. A region is sent with ``sendfile`` by the transport.
    """

    __slots__ = ("buf", "parts", "size")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[Any] = []
        self.size = 0  # bytes in self.parts (excluding self.buf)

    def i8(self, v: int) -> None:
        """Write a signed byte."""
        self.buf += _I8.pack(v)

    def boolean(self, v: bool) -> None:
        """Write a boolean as int8."""
        self.buf += b"\x01" if v else b"\x00"

    def i16(self, v: int) -> None:
        """Write a big-endian int16."""
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        """Write a big-endian int32."""
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        """Write a big-endian int64."""
        self.buf += _I64.pack(v)

    def _text(self, s: str | None, length: Any, null: bytes) -> None:
        # ``length(n)`` writes the length prefix of n bytes; ``null`` is the encoding of None
        if s is None:
            self.buf += null
            return
        b = s.encode("utf-8")
        if len(b) > 0x7FFF:
            raise ProtocolError(f"string of {len(b)} bytes is too long for the protocol")
        length(len(b))
        self.buf += b

    def _payload(self, b: Any, length: Any, null: bytes) -> None:
        # bytes-like payloads from ZERO_COPY_THRESHOLD up, and regions, become their own parts
        if b is None:
            self.buf += null
            return
        if isinstance(b, _BYTES_TYPES):
            n = b.nbytes if isinstance(b, memoryview) else len(b)
            length(n)
            if n >= ZERO_COPY_THRESHOLD:
                self._push(b, n)
            else:
                self.buf += b
            return
        n = b.length
        length(n)
        if n:
            self._push(b, n)

    def _i16_length(self, n: int) -> None:
        self.buf += _I16.pack(n)

    def _i32_length(self, n: int) -> None:
        self.buf += _I32.pack(n)

    def _compact_length(self, n: int) -> None:
        self.uvarint(n + 1)

    def nstring(self, s: str | None) -> None:
        """Write a nullable string."""
        self._text(s, self._i16_length, b"\xff\xff")

    string = nstring

    def nbytes(self, b: Any) -> None:
        """Write nullable bytes, or a region (sent zero-copy) with its length."""
        self._payload(b, self._i32_length, b"\xff\xff\xff\xff")

    def uvarint(self, v: int) -> None:
        """Write an unsigned varint."""
        if v < 0:
            raise ProtocolError(f"negative unsigned varint {v}")
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.buf += out

    def compact_nstring(self, s: str | None) -> None:
        """Write a compact nullable string."""
        self._text(s, self._compact_length, b"\x00")

    compact_string = compact_nstring

    def compact_nbytes(self, b: Any) -> None:
        """Write compact nullable bytes, or a region (sent zero-copy) with its length."""
        self._payload(b, self._compact_length, b"\x00")

    def raw(self, b: bytes) -> None:
        """Write bytes as they are."""
        self.buf += b

    def _push(self, part: Any, n: int) -> None:
        if self.buf:
            self.parts.append(self.buf)
            self.size += len(self.buf)
            self.buf = bytearray()
        self.parts.append(part)
        self.size += n

    def narray(self, items: Iterable[T] | None, fn: Callable[[Writer, T], None]) -> None:
        """Write a nullable array with ``fn(writer, item)`` per item."""
        if items is None:
            self.buf += b"\xff\xff\xff\xff"
            return
        items = list(items)
        self.buf += _I32.pack(len(items))
        for it in items:
            fn(self, it)

    array = narray

    def frame(self, head: bytes) -> list[Any]:
        """Finish: return the parts of a whole frame (int32 size + ``head`` + body)."""
        total = len(head) + self.size + len(self.buf)
        first = bytearray(_I32.pack(total))
        first += head
        if self.parts and isinstance(self.parts[0], bytearray):
            first += self.parts[0]
            rest = self.parts[1:]
        else:
            rest = self.parts
        if not rest:
            first += self.buf
            return [first]
        out = [first, *rest]
        if self.buf:
            out.append(self.buf)
        return out


def part_length(part: Any) -> int:
    """Length in bytes of one encoded part (bytes-like or region)."""
    if isinstance(part, memoryview):
        return part.nbytes
    if isinstance(part, (bytes, bytearray)):
        return len(part)
    return part.length


def is_region(part: Any) -> bool:
    """True for a part that must be sent from a file (not bytes-like)."""
    return not isinstance(part, _BYTES_TYPES)
