"""pyspark-logsource: a Kafka-style commit log for log processing, native to PySpark."""

from __future__ import annotations

__version__ = "0.1.0"


# The Spark data source is imported lazily so that `import pyspark_logsource` stays light;
# Spark's lookup of `pyspark_*` modules finds DefaultSource through this hook.
_SPARK_NAMES = ("LogSource", "DefaultSource", "register")
# The clients and the embedded broker are imported lazily for the same reason.
_CLIENT_NAMES = ("Producer", "Consumer", "Admin", "Message", "read_range")


def __getattr__(name: str):
    if name in _SPARK_NAMES:
        from . import datasource

        return getattr(datasource, name)
    if name in _CLIENT_NAMES:
        from . import client

        return getattr(client, name)
    if name == "EmbeddedBroker":
        from .broker.embedded import EmbeddedBroker

        return EmbeddedBroker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
