"""Whole-body compression codecs of a record batch.

Codec ids are Kafka's (attributes bits 0-2). Decompression is always bounded
by the uncompressed size that the batch declares, which is itself bounded by
the caller, and output is produced in chunks, so a hostile batch cannot make
us allocate more than it really expands to, nor more than we allow.

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
import zlib

import lz4.frame
import zstandard

from ..errors import CorruptRecord, UnsupportedCompressionType

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = {"none": NONE, "gzip": GZIP, "lz4": LZ4, "zstd": ZSTD}
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
    else:
        raise UnsupportedCompressionType(f"compression codec id {codec} is not supported")


def decompress(codec: int, data: bytes | memoryview, size: int) -> bytes:
    """Decompress ``data`` that must expand to exactly ``size`` bytes.

    The declared ``size`` only bounds the output: memory is taken chunk by
    chunk as the data really expands, so a body that claims gigabytes but
    holds a few bytes is refused after a few bytes of work.
    """
    try:
        pieces = list(_chunks(codec, data, size + 1))
    except (UnsupportedCompressionType, MemoryError):
        raise
    except Exception as e:  # every codec has its own error type
        raise CorruptRecord(f"cannot decompress batch body: {type(e).__name__}: {e}") from None
    out = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    if len(out) != size:
        raise CorruptRecord(f"batch body decompressed to {len(out)} bytes, header says {size}")
    return out
