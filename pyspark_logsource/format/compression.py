"""Whole-body compression codecs of a record batch.

Codec ids are Kafka's (attributes bits 0-2). Decompression is always bounded
by the uncompressed size that the batch declares, which is itself bounded by
the caller, so a hostile batch cannot make us allocate more than we allow.
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


def decompress(codec: int, data: bytes | memoryview, size: int) -> bytes:
    """Decompress ``data`` that must expand to exactly ``size`` bytes."""
    try:
        if codec == LZ4:
            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(data, max_length=size + 1)
        elif codec == ZSTD:
            # stream_reader bounds the output; a frame's declared content size is not trusted
            with _zstd_d.stream_reader(io.BytesIO(data)) as reader:
                out = reader.read(size + 1)
        elif codec == GZIP:
            d = zlib.decompressobj()
            out = d.decompress(data, size + 1)
        else:
            raise UnsupportedCompressionType(f"compression codec id {codec} is not supported")
    except UnsupportedCompressionType:
        raise
    except Exception as e:  # every codec has its own error type
        raise CorruptRecord(f"cannot decompress batch body: {e}") from None
    if len(out) != size:
        raise CorruptRecord(f"batch body decompressed to {len(out)} bytes, header says {size}")
    return out
