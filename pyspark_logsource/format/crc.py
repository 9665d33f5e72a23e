"""CRC-32C (Castagnoli), the checksum of every record batch.

Chosen by measurement on this 2-core shared VM (calls interleaved, best of
15; ``benchmarks/format.py`` table 2 prints the same comparison):

    size       crc32c             google-crc32c      crcmod
    250 B      2.5 GB/s  0.10 us  1.9 GB/s  0.13 us  0.2 GB/s   1.4 us
    11 KB     19.5 GB/s  0.56 us 19.8 GB/s  0.55 us  0.3 GB/s    40 us
    220 KB    26.6 GB/s  8.3 us  27.6 GB/s  8.0 us   0.5 GB/s   480 us
    1 MiB     28.1 GB/s  37 us   28.0 GB/s  38 us    0.5 GB/s  2300 us

Both hardware implementations are equal within noise from 11 KB up, and
``crc32c`` has the lower call overhead on tiny batches, so ``crc32c`` is the
fast path and google-crc32c is not a dependency (no clear win). ``crcmod``
(pure table lookup, 50-100x slower) stays as the portable fallback. All give
the same values (tests check them against each other and the standard check
value). ``crc32c(data, value)`` continues a CRC over pieces read apart (``direct.py``).
"""

from __future__ import annotations

try:  # fast path: hardware CRC-32C
    # the C function itself, not a wrapper: every produced batch is checked (a Python frame per call)
    from crc32c import crc32c

    IMPLEMENTATION = "crc32c"
except ImportError:  # pragma: no cover - exercised only where crc32c is missing
    import crcmod.predefined

    _fn = crcmod.predefined.mkPredefinedCrcFun("crc-32c")

    def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
        """Return the CRC-32C of ``data``, continuing from ``value`` (the CRC of the bytes before it)."""
        return _fn(bytes(data) if isinstance(data, memoryview) else data, value)

    IMPLEMENTATION = "crcmod"
