"""Keep glibc's malloc from handing fetch-sized blocks back to the kernel after every fetch answer.

A fetch answer (a 200 KB - 50 MB frame) and the buffers decoded from it are
blocks over glibc's mmap threshold (128 KB at start): each one was mapped,
zero-filled by page faults and unmapped again, and the freed top of a thread's
heap was trimmed the same way. Measured on a consumer reading a librdkafka-written
topic (benchmarks/compiled.py's poll_arrow row): page faults and unmapping were
~40% of the client's CPU (perf: exc_page_fault, clear_page_erms, unmap_page_range);
with the thresholds below, client CPU per 300k messages went from ~120 ms to ~70 ms.

So readers (``Consumer``, a Spark task's ``read_range``) set, once per process,
``M_MMAP_THRESHOLD`` to 32 MiB (glibc's maximum; larger blocks are still mapped)
and ``M_TRIM_THRESHOLD`` to 128 MiB (at most that much freed memory stays in the
process for reuse). Only on glibc; ``LOGSOURCE_NO_MALLOPT=1`` leaves malloc alone.
"""

from __future__ import annotations

import os
import threading

#: mallopt() parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 128 << 20

_lock = threading.Lock()
_done: bool | None = None


def tune_for_fetches() -> bool:
    """Set the thresholds (once per process); True when they are set (glibc, not switched off)."""
    global _done
    with _lock:
        if _done is None:
            _done = _apply()
        return _done


def _apply() -> bool:
    if os.environ.get("LOGSOURCE_NO_MALLOPT", "") not in ("", "0"):
        return False
    try:  # "glibc 2.36" on glibc (platform.libc_ver() reads the interpreter's binary: 50 ms)
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
    except (ValueError, OSError, AttributeError):
        return False
    import ctypes  # here: a Spark worker's read path imports this module

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
