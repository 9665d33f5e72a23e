"""pyspark-logsource: a Kafka-style commit log for log processing, native to PySpark."""

from __future__ import annotations

import os
import sys

__version__ = "0.1.0"


def _python_for_spark_workers() -> None:
    # A script run as `.venv/bin/python app.py` would otherwise have Spark start its Python
    # workers (and data source planners) with the system `python3`, which lacks pyarrow and this
    # package. The JVM inherits the environment when the SparkSession starts, so pointing
    # PYSPARK_PYTHON at the running interpreter here works for sessions created after the import.
    # A choice the user made (the variable, or spark.pyspark.python, which Spark prefers) stands.
    if not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable


_python_for_spark_workers()


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
