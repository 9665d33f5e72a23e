"""Kafka's message schemas as data, compiled into one codec per (message, version).

A schema is a transcription of Kafka's JSON message definitions
(``clients/src/main/resources/common/message/*.json``): fields with the
versions they exist in, the versions they may be null in, and tagged fields
for flexible versions. :func:`compile_struct` turns a schema and one version
into a reader (bytes -> ``dict``) and a writer (``dict`` -> bytes) that know
nothing of other versions, so every (API key, version) has its own codec.

Decoded messages are plain dicts keyed by the fields' snake_case names;
fields absent from a version read as their default, so code above this layer
never branches on versions for a field's presence. Unknown tagged fields are
skipped on read, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .primitives import ProtocolError, Reader, Writer

Read = Callable[[Reader], Any]
Write = Callable[[Writer, Any], None]

_INF = 1 << 15

#: Kafka's default of an ``authorized_operations`` field: none requested or known.
I32_MIN = -(1 << 31)


def versions(spec: str) -> tuple[int, int]:
    """Parse Kafka's version spec: ``"3+"``, ``"0-4"``, ``"5"``, or ``"none"``."""
    if not spec or spec == "none":
        return (1, 0)  # empty range
    if spec.endswith("+"):
        return (int(spec[:-1]), _INF)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def _in(rng: tuple[int, int], v: int) -> bool:
    return rng[0] <= v <= rng[1]


@dataclass(frozen=True)
class Field:
    """One field: ``type`` is a primitive name, ``[]T`` for arrays of a primitive, or a struct (``fields``)."""

    name: str
    type: str
    versions: str = "0+"
    nullable: str = "none"
    tag: int | None = None
    tagged: str = "none"
    default: Any = None
    fields: tuple[Field, ...] = ()

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")


def F(
    name: str,
    type_: str,
    versions_: str = "0+",
    *fields: Field,
    nullable: str = "none",
    tag: int | None = None,
    tagged: str = "none",
    default: Any = None,
) -> Field:
    """Shorthand for a :class:`Field`; struct members follow the version spec."""
    return Field(name, type_, versions_, nullable, tag, tagged, default, tuple(fields))


@dataclass(frozen=True)
class Message:
    """A request or response schema: valid and flexible version ranges, and its fields."""

    name: str
    valid: str
    flexible: str
    fields: tuple[Field, ...] = field(default_factory=tuple)

    def version_range(self) -> tuple[int, int]:
        return versions(self.valid)

    def is_flexible(self, version: int) -> bool:
        return _in(versions(self.flexible), version)


def message(name: str, valid: str, flexible: str, *fields: Field) -> Message:
    """Declare a message schema."""
    return Message(name, valid, flexible, tuple(fields))


# ------------------------------------------------------------------ primitives


def _uuid_read(r: Reader) -> bytes:
    return bytes(r.take(16, "uuid"))


def _uuid_write(w: Writer, v: Any) -> None:
    b = bytes(16) if v is None else bytes(v)
    if len(b) != 16:
        raise ProtocolError(f"uuid must be 16 bytes, got {len(b)}")
    w.raw(b)


def _u16_read(r: Reader) -> int:
    return r.i16() & 0xFFFF


def _f64_read(r: Reader) -> float:
    import struct

    return struct.unpack(">d", r.take(8, "float64"))[0]


def _f64_write(w: Writer, v: float) -> None:
    import struct

    w.raw(struct.pack(">d", v))


#: name -> (fixed size or 0, reader, writer) for types independent of flexibility and nullability.
_FIXED: dict[str, tuple[int, Read, Write]] = {
    "int8": (1, Reader.i8, Writer.i8),
    "int16": (2, Reader.i16, Writer.i16),
    "uint16": (2, _u16_read, lambda w, v: w.i16(v - 0x10000 if v >= 0x8000 else v)),
    "int32": (4, Reader.i32, Writer.i32),
    "int64": (8, Reader.i64, Writer.i64),
    "bool": (1, Reader.boolean, Writer.boolean),
    "uuid": (16, _uuid_read, _uuid_write),
    "float64": (8, _f64_read, _f64_write),
}

_ZERO_DEFAULTS = {
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "int64": 0,
    "bool": False,
    "uuid": bytes(16),
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": None,
}


def _string_codec(flexible: bool, nullable: bool) -> tuple[Read, Write]:
    if flexible:
        read = Reader.compact_nstring if nullable else Reader.compact_string
        write = Writer.compact_nstring
    else:
        read = Reader.nstring if nullable else Reader.string
        write = Writer.nstring
    if nullable:
        return read, write

    def write_nonnull(w: Writer, v: Any) -> None:
        if v is None:
            raise ProtocolError("null where a string is required")
        write(w, v)

    return read, write_nonnull


def _bytes_codec(flexible: bool, nullable: bool) -> tuple[Read, Write]:
    read = Reader.compact_nbytes if flexible else Reader.nbytes
    write = Writer.compact_nbytes if flexible else Writer.nbytes

    if nullable:
        return read, write

    def read_nonnull(r: Reader) -> Any:
        v = read(r)
        if v is None:
            raise ProtocolError("null where bytes are required")
        return v

    def write_nonnull(w: Writer, v: Any) -> None:
        write(w, b"" if v is None else v)

    return read_nonnull, write_nonnull


def _scalar_codec(type_: str, flexible: bool, nullable: bool) -> tuple[int, Read, Write]:
    if type_ in _FIXED:
        return _FIXED[type_]
    if type_ == "string":
        return (1 if flexible else 2, *_string_codec(flexible, nullable))
    if type_ in ("bytes", "records"):
        return (1 if flexible else 4, *_bytes_codec(flexible, nullable or type_ == "records"))
    raise ValueError(f"unknown protocol type {type_!r}")


def _array_codec(
    item_size: int, read_item: Read, write_item: Write, flexible: bool, nullable: bool
) -> tuple[Read, Write]:
    item_size = max(1, item_size)
    if flexible:

        def read(r: Reader) -> list | None:
            n = r.compact_count(item_size)
            if n < 0:
                if nullable:
                    return None
                raise ProtocolError("null where an array is required")
            return [read_item(r) for _ in range(n)]

        def write(w: Writer, items: Any) -> None:
            if items is None:
                if not nullable:
                    raise ProtocolError("null where an array is required")
                w.uvarint(0)
                return
            items = list(items)
            w.uvarint(len(items) + 1)
            for it in items:
                write_item(w, it)

        return read, write

    def read_classic(r: Reader) -> list | None:
        out = r.narray(read_item, item_size)
        if out is None and not nullable:
            raise ProtocolError("null where an array is required")
        return out

    def write_classic(w: Writer, items: Any) -> None:
        if items is None and not nullable:
            raise ProtocolError("null where an array is required")
        w.narray(items, write_item)

    return read_classic, write_classic


def _default_of(f: Field, version: int) -> Any:
    if f.default is not None:
        return None if f.default == "null" else f.default  # Kafka's JSON spelling of a null default
    if f.is_array:
        return None if _in(versions(f.nullable), version) else []
    if f.fields:  # a struct: the struct of its members' defaults (Kafka's default for a struct)
        return (
            None
            if _in(versions(f.nullable), version)
            else {m.name: _default_of(m, version) for m in f.fields}
        )
    if f.type == "string" and f.nullable != "none":
        return None  # Kafka's nullable strings default to null where they are absent
    return _ZERO_DEFAULTS.get(f.type)


def _field_codec(f: Field, version: int, flexible: bool) -> tuple[int, Read, Write]:
    nullable = _in(versions(f.nullable), version)
    if f.fields:  # a struct, or an array of structs
        read_s, write_s = compile_struct(f.fields, version, flexible)
        if f.is_array:
            return (1, *_array_codec(1, read_s, write_s, flexible, nullable))
        if nullable:
            return (1, *_nullable_struct(read_s, write_s))
        return (1, read_s, write_s)
    if f.is_array:
        size, read_i, write_i = _scalar_codec(f.type[2:], flexible, False)
        return (1, *_array_codec(size, read_i, write_i, flexible, nullable))
    return _scalar_codec(f.type, flexible, nullable)


def _nullable_struct(read_s: Read, write_s: Write) -> tuple[Read, Write]:
    # Kafka marks a nullable struct's presence with an int8: -1 null, 1 present
    def read(r: Reader) -> Any:
        marker = r.i8()
        if marker == -1:
            return None
        if marker != 1:
            raise ProtocolError(f"invalid struct presence marker {marker}")
        return read_s(r)

    def write(w: Writer, v: Any) -> None:
        if v is None:
            w.i8(-1)
            return
        w.i8(1)
        write_s(w, v)

    return read, write


def _fresh(default: Any) -> Any:
    # every read gets its own list or dict, so a caller mutating one cannot change later reads
    if isinstance(default, list):
        return []
    if isinstance(default, dict):
        return {k: _fresh(v) for k, v in default.items()}
    return default


def compile_struct(fields: tuple[Field, ...], version: int, flexible: bool) -> tuple[Read, Write]:
    """The reader and writer of a struct's fields at ``version``."""
    plain: list[tuple[str, Read, Write, Any]] = []
    tagged: dict[int, tuple[str, Read, Write, Any]] = {}
    absent: list[tuple[str, Any]] = []
    for f in fields:
        if f.tag is not None and flexible and _in(versions(f.tagged), version):
            _, rd, wr = _field_codec(f, version, flexible)
            tagged[f.tag] = (f.name, rd, wr, _default_of(f, version))
            absent.append((f.name, _default_of(f, version)))
        elif f.tag is None and _in(versions(f.versions), version):
            _, rd, wr = _field_codec(f, version, flexible)
            plain.append((f.name, rd, wr, _default_of(f, version)))
        else:
            absent.append((f.name, _default_of(f, version)))
    tag_order = sorted(tagged)

    def read(r: Reader) -> dict[str, Any]:
        d = {name: _fresh(default) for name, default in absent}
        for name, rd, _, _ in plain:
            d[name] = rd(r)
        if flexible:
            _read_tagged(r, tagged, d)
        return d

    def write(w: Writer, d: Any) -> None:
        get = d.get if isinstance(d, dict) else (lambda k, _d=None: getattr(d, k, _d))
        for name, _, wr, default in plain:
            wr(w, get(name, default))
        if flexible:
            present = []
            for tag in tag_order:
                name, _, wr, default = tagged[tag]
                v = get(name, default)
                if v is not None and v != default:
                    present.append((tag, wr, v))
            w.uvarint(len(present))
            for tag, wr, v in present:
                sub = Writer()
                wr(sub, v)
                if sub.parts:
                    raise ProtocolError("a tagged field cannot carry a zero-copy payload")
                w.uvarint(tag)
                w.uvarint(len(sub.buf))
                w.raw(bytes(sub.buf))

    return read, write


def _read_tagged(r: Reader, tagged: dict[int, tuple[str, Read, Write, Any]], d: dict[str, Any]) -> None:
    n = r.uvarint()
    last = -1
    for _ in range(n):
        tag = r.uvarint()
        if tag <= last:
            raise ProtocolError(f"tagged fields out of order: {tag} after {last}")
        last = tag
        size = r.uvarint()
        body = r.take(size, "tagged field")
        spec = tagged.get(tag)
        if spec is None:
            continue  # an unknown tag: skipped, as Kafka does
        sub = Reader(body)
        d[spec[0]] = spec[1](sub)
        sub.done(f"tagged field {tag}")


def skip_tagged_fields(r: Reader) -> None:
    """Read and ignore a tagged-field section (request header v2, response header v1)."""
    _read_tagged(r, {}, {})


def write_empty_tagged_fields(w: Writer) -> None:
    """An empty tagged-field section."""
    w.uvarint(0)


class Codec:
    """One message at one version: ``read(reader) -> dict`` and ``write(writer, dict)``."""

    __slots__ = ("message", "version", "flexible", "read", "write")

    def __init__(self, msg: Message, version: int) -> None:
        lo, hi = msg.version_range()
        if not lo <= version <= hi:
            raise ValueError(f"{msg.name} has no version {version}")
        self.message, self.version = msg, version
        self.flexible = msg.is_flexible(version)
        self.read, self.write = compile_struct(msg.fields, version, self.flexible)

    def __repr__(self) -> str:
        return f"<Codec {self.message.name} v{self.version}{' flexible' if self.flexible else ''}>"
