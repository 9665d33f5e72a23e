"""CRC-32C (Castagnoli), the checksum of every record batch.

The ``crc32c`` package uses the CPU's CRC instruction (measured ~20 GB/s on
this machine); ``crcmod`` is a portable fallback (~0.5 GB/s). Both give the
same values.
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
