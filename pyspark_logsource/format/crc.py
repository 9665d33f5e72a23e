"""CRC-32C (Castagnoli), the checksum of every record batch.

Chosen by measurement (``benchmarks/format.py``, table 2; 2-core shared VM,
GB/s at batch-like sizes 250 B / 11 KB / 220 KB / 1 MiB):

    crc32c          1.2 / 13.1 / 25.7 / 14.7   (0.20 us per call at 250 B)
    google-crc32c   1.2 / 12.4 / 14.6 / 13.5
    crcmod          0.2 /  0.2 /  0.2 /  0.4   (pure table lookup, 30-100x slower)

``crc32c`` (hardware CRC instruction) is as fast as google-crc32c for small
batches and faster for large ones, so it is the fast path and google-crc32c is
not a dependency; ``crcmod`` stays as the portable fallback. All give the same
values (tests check them against each other and the standard check value).
"""

from __future__ import annotations

try:  # fast path: hardware CRC-32C
    from crc32c import crc32c as _crc32c

    def crc32c(data: bytes | bytearray | memoryview) -> int:
        """Return the CRC-32C of ``data``."""
        return _crc32c(data)

    IMPLEMENTATION = "crc32c"
except ImportError:  # pragma: no cover - exercised only where crc32c is missing
    import crcmod.predefined

    _fn = crcmod.predefined.mkPredefinedCrcFun("crc-32c")

    def crc32c(data: bytes | bytearray | memoryview) -> int:
        """Return the CRC-32C of ``data``."""
        return _fn(bytes(data) if isinstance(data, memoryview) else data)

    IMPLEMENTATION = "crcmod"
