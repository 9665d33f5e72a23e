"""pyspark-logsource: a Kafka-style commit log for log processing, native to PySpark."""

from __future__ import annotations

__version__ = "0.1.0"
