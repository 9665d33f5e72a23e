"""The one place that chooses between the compiled core and the pure-Python reference.

``ckafka`` is the compiled module (``_ckafka.pyx``: the header walk and Kafka's
varint record decode) and ``crecords`` the other (``_crecords.pyx``: Kafka's varint
record encode, the consumer's Message rows), each None when it is not built or ``LOGSOURCE_NO_EXTENSIONS``
is set (to anything but ``0`` or empty), as aiokafka's ``AIOKAFKA_NO_EXTENSIONS``
does. The modules that use it keep their API; only their bodies branch on it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import warnings
from types import ModuleType

DISABLED = os.environ.get("LOGSOURCE_NO_EXTENSIONS", "") not in ("", "0")


def _load(name: str = "_ckafka") -> ModuleType | None:
    if DISABLED:
        return None
    # by name: `from . import _ckafka` reads to the import-cycle check as importing the package
    # itself (the compiled module has no .py to resolve); it imports nothing of the package
    return load_extension(__name__.rpartition(".")[0] + "." + name)  # (wires the C CRC where it takes one)


def _wire_crc(mod: ModuleType) -> None:
    """Hand the walk the crc32c package's hardware CRC-32C as a C function (no Python call per batch).

    A private symbol of that package: used only if it is there, the package says it runs on the
    hardware path, and it gives the standard check value; otherwise the walk calls ``crc32c()``.
    """
    try:
        import ctypes

        import crc32c
        from crc32c import _crc32c

        if not getattr(crc32c, "hardware_based", False):
            return
        fn = ctypes.CDLL(_crc32c.__file__)._crc32c_hw_adler
        mod.set_crc32c_function(ctypes.cast(fn, ctypes.c_void_p).value or 0)
        if mod.crc32c_direct(b"123456789") != 0xE3069283:  # CRC-32C's check value
            mod.set_crc32c_function(0)
    except Exception:  # noqa: BLE001 - any surprise: keep the Python-level call
        with contextlib.suppress(Exception):
            mod.set_crc32c_function(0)


def load_extension(qualified_name: str) -> ModuleType | None:
    """A compiled module of another package layer (``client._caccum``), None when switched off or not built."""
    if DISABLED:
        return None
    try:
        mod = importlib.import_module(qualified_name)
    except ModuleNotFoundError as e:
        if e.name != qualified_name:
            _warn_broken(qualified_name, e)
        return None  # not built: the installation said so
    except ImportError as e:
        _warn_broken(qualified_name, e)
        return None
    if hasattr(mod, "set_crc32c_function"):  # the C CRC-32C of _ckafka and _cbody (_caccum uses _cbody's)
        _wire_crc(mod)
    return mod


def _warn_broken(qualified_name: str, error: ImportError) -> None:
    # A module that is built but does not import (an import cycle inside it, a stale build for another
    # Python) must not turn a hot path pure without a word.
    warnings.warn(
        f"compiled module {qualified_name} is built but failed to import ({error}); "
        "using the pure-Python path",
        RuntimeWarning,
        stacklevel=3,
    )


ckafka = _load()
crecords = _load("_crecords")
#: ``_cbody.pyx``: the Arrow-body encode of a plain producer batch, the log append's check-and-stamp
cbody = _load("_cbody")
#: ``_cvalidate.pyx``: the produce path's check of an uncompressed Kafka-layout batch's records
cvalidate = _load("_cvalidate")
#: "compiled" or "python": what the format hot paths run (benchmarks and tests print it)
IMPLEMENTATION = "python" if ckafka is None else "compiled"
