"""The one place that chooses between the compiled core and the pure-Python reference.

``ckafka`` is the compiled module (``_ckafka.pyx``: the header walk and Kafka's
varint record decode), or None when it is not built or ``LOGSOURCE_NO_EXTENSIONS``
is set (to anything but ``0`` or empty), as aiokafka's ``AIOKAFKA_NO_EXTENSIONS``
does. The modules that use it keep their API; only their bodies branch on it.
"""

from __future__ import annotations

import os
from types import ModuleType

DISABLED = os.environ.get("LOGSOURCE_NO_EXTENSIONS", "") not in ("", "0")


def _load() -> ModuleType | None:
    if DISABLED:
        return None
    try:
        from . import _ckafka
    except ImportError:
        return None
    return _ckafka


ckafka = _load()
#: "compiled" or "python": what the format hot paths run (benchmarks and tests print it)
IMPLEMENTATION = "python" if ckafka is None else "compiled"
