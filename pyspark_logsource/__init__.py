"""pyspark-logsource: a Kafka-style commit log for log processing, native to PySpark."""

from __future__ import annotations

__version__ = "0.1.0"


# The Spark data source is imported lazily so that `import pyspark_logsource` stays light;
# Spark's lookup of `pyspark_*` modules finds DefaultSource through this hook.
_SPARK_NAMES = ("LogSource", "DefaultSource", "register")


def __getattr__(name: str):
    if name in _SPARK_NAMES:
        from . import datasource

        return getattr(datasource, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
