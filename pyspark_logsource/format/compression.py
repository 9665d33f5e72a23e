"""Whole-body compression codecs of a record batch.

Codec ids are Kafka's (attributes bits 0-2). Decompression is always bounded
by the uncompressed size that the batch declares, which is itself bounded by
the caller, and output is produced in chunks, so a hostile batch cannot make
us allocate more than it really expands to, nor more than we allow.

snappy (Arrow body and Kafka) is a raw snappy block via cramjam (python-snappy
0.7 is itself a wrapper of cramjam); its length preamble is checked before
decompressing. Kafka's own framing (no size prefix, gzip container, xerial
snappy) is ``kafka_compress``/``kafka_decompress`` below.

lz4 uses the frame format, decided by measurement (``benchmarks/format.py``,
table 3, access-log lines, two runs on a loaded 2-core VM): frame and block
compress to the same ratio (2.16 vs 2.13 for 50 lines, 2.40 vs 2.40 for
1000). Block was up to 1.2x faster to compress and 1.4x faster to
decompress 50 lines (~8 KB: frame's per-call context setup), equal within
noise at 1000 lines (compress ~1.3 GB/s, decompress ~4 GB/s both). Frame is
self-describing (magic, end mark; what Kafka uses) and can be decompressed
incrementally with a bounded output, whereas ``lz4.block.decompress`` must be
handed the output size and allocates it up front, which is exactly what a
hostile size field must not be able to cause. At equal ratio, that settles it.
"""

from __future__ import annotations

import io
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from ..errors import CorruptRecord, UnsupportedCompressionType

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
NAMES = {v: k for k, v in CODECS.items()}

_zstd_c = zstandard.ZstdCompressor(level=1)
_zstd_d = zstandard.ZstdDecompressor()


def codec_id(name: str | int | None) -> int:
    """Return the codec id for a name such as ``"lz4"`` (None means no compression)."""
    if name is None:
        return NONE
    if isinstance(name, int):
        if name in NAMES:
            return name
        raise UnsupportedCompressionType(f"compression codec id {name} is not supported")
    try:
        return CODECS[name.lower()]
    except KeyError:
        raise UnsupportedCompressionType(
            f"compression {name!r} is not supported; use one of {sorted(CODECS)}"
        ) from None


def compress(codec: int, data: bytes | memoryview) -> bytes:
    """Compress ``data`` with ``codec``."""
    if codec == LZ4:
        return lz4.frame.compress(data, store_size=False)
    if codec == ZSTD:
        return _zstd_c.compress(data)
    if codec == GZIP:
        return zlib.compress(data, 1)
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    raise UnsupportedCompressionType(f"compression codec id {codec} is not supported")


#: Output is produced at most this much at a time, so the memory a body takes
#: grows with what it really expands to, never with what its size field claims.
DECOMPRESS_CHUNK = 4 << 20


def _chunks(codec: int, data: bytes | memoryview, limit: int):
    """Yield decompressed pieces of ``data``, each at most DECOMPRESS_CHUNK, until ``limit`` bytes."""
    if codec == LZ4:
        d = lz4.frame.LZ4FrameDecompressor()
        piece = d.decompress(data, max_length=min(limit, DECOMPRESS_CHUNK))
        while True:
            yield piece
            limit -= len(piece)
            if d.eof or limit <= 0 or not piece:
                return
            piece = d.decompress(b"", max_length=min(limit, DECOMPRESS_CHUNK))
    elif codec == ZSTD:
        # stream_reader bounds each read; a frame's declared content size is not trusted
        with _zstd_d.stream_reader(io.BytesIO(data)) as reader:
            while limit > 0:
                piece = reader.read(min(limit, DECOMPRESS_CHUNK))
                if not piece:
                    return
                yield piece
                limit -= len(piece)
    elif codec == GZIP:
        d = zlib.decompressobj()
        piece = d.decompress(data, min(limit, DECOMPRESS_CHUNK))
        while True:
            yield piece
            limit -= len(piece)
            if d.eof or limit <= 0 or not piece:
                return
            piece = d.decompress(d.unconsumed_tail, min(limit, DECOMPRESS_CHUNK))
    elif codec == SNAPPY:
        yield _snappy_raw(data, limit)
    else:
        raise UnsupportedCompressionType(f"compression codec id {codec} is not supported")


def _snappy_raw(data: bytes | memoryview, limit: int) -> bytes:
    """A raw snappy block, refused before decompression when its length preamble exceeds ``limit``.

    Snappy cannot decompress in bounded pieces, but the block starts with
    its exact uncompressed length (a varint), which is checked first.
    """
    size = _snappy_length(data)
    if size > limit:
        raise CorruptRecord(f"snappy block claims {size} bytes, more than the {limit} allowed")
    return bytes(cramjam.snappy.decompress_raw(data))


def _snappy_length(data: bytes | memoryview) -> int:
    """The uncompressed length a raw snappy block starts with (a varint of at most 5 bytes)."""
    size = shift = 0
    for i in range(5):
        if i >= len(data):
            break
        b = data[i]
        size |= (b & 0x7F) << shift
        if b < 0x80:
            return size
        shift += 7
    raise CorruptRecord("snappy block has no valid length preamble")


def decompress(codec: int, data: bytes | memoryview, size: int) -> bytes:
    """Decompress ``data`` that must expand to exactly ``size`` bytes.

    The declared ``size`` only bounds the output: memory is taken chunk by
    chunk as the data really expands, so a body that claims gigabytes but
    holds a few bytes is refused after a few bytes of work.
    """
    try:
        pieces = list(_chunks(codec, data, size + 1))
    except (UnsupportedCompressionType, MemoryError, CorruptRecord):
        raise
    except Exception as e:  # every codec has its own error type
        raise CorruptRecord(f"cannot decompress batch body: {type(e).__name__}: {e}") from None
    out = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    if len(out) != size:
        raise CorruptRecord(f"batch body decompressed to {len(out)} bytes, header says {size}")
    return out


# ---------------------------------------------------------------- Kafka's framing

#: The header of snappy's "xerial" framing, as the Java client writes it.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic, int32 version, int32 minimum compatible version
_I32BE = struct.Struct(">i")


def kafka_compress(codec: int, data: bytes | memoryview) -> bytes:
    """Compress a Kafka records section with Kafka's framing for ``codec``.

    gzip is a gzip container; snappy a raw snappy block (every client reads
    it); lz4 and zstd are frames, as for our body. No size prefix.
    """
    if codec == GZIP:
        c = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: gzip container
        return c.compress(data) + c.flush()
    return compress(codec, data)


def kafka_decompress(codec: int, data: bytes | memoryview, limit: int) -> bytes:
    """Decompress a Kafka records section, refusing (CorruptRecord) output beyond ``limit`` bytes.

    Kafka's framing declares no size: output is produced chunk by chunk and
    stops at ``limit + 1``. gzip also accepts a zlib stream; snappy both a raw
    block and the xerial framing.
    """
    try:
        if codec == SNAPPY:
            out = _xerial(data, limit) if bytes(data[:8]) == XERIAL_MAGIC else _snappy_raw(data, limit)
        elif codec == GZIP:
            out = b"".join(_inflate(data, limit + 1, 47))  # wbits 47: gzip or zlib header
        else:
            pieces = list(_chunks(codec, data, limit + 1))
            out = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    except (UnsupportedCompressionType, MemoryError, CorruptRecord):
        raise
    except Exception as e:  # every codec has its own error type
        raise CorruptRecord(f"cannot decompress records: {type(e).__name__}: {e}") from None
    if len(out) > limit:
        raise CorruptRecord(f"records decompress to more than the {limit} bytes allowed")
    return out


def _inflate(data: bytes | memoryview, limit: int, wbits: int):
    d = zlib.decompressobj(wbits)
    piece = d.decompress(data, min(limit, DECOMPRESS_CHUNK))
    while True:
        yield piece
        limit -= len(piece)
        if d.eof or limit <= 0 or not piece:
            if not d.eof and limit > 0:
                raise CorruptRecord("truncated gzip stream")
            return
        piece = d.decompress(d.unconsumed_tail, min(limit, DECOMPRESS_CHUNK))


def _xerial(data: bytes | memoryview, limit: int) -> bytes:
    """snappy-java's framing: a 16-byte header, then blocks of [int32 BE size][raw snappy block]."""
    mv = memoryview(data)
    pos, end = _XERIAL_HEADER, len(mv)
    if end < pos:
        raise CorruptRecord("truncated xerial snappy header")
    out: list[bytes] = []
    total = 0
    while pos < end:
        if end - pos < 4:
            raise CorruptRecord("truncated xerial snappy block size")
        size = _I32BE.unpack_from(mv, pos)[0]
        pos += 4
        if size < 0 or size > end - pos:
            raise CorruptRecord(f"xerial snappy block of {size} bytes overruns its data")
        piece = _snappy_raw(mv[pos : pos + size], limit - total)
        total += len(piece)
        out.append(piece)
        pos += size
    return b"".join(out)
