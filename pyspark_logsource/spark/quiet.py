"""Spark's console, quiet by default: the one place that sets its log level and known-harmless warnings.

Called where this package creates or configures a session (``register()``, the ETL's and the
demo's sessions), once per SparkContext, so a level the user sets afterwards stands. A level the
user chose before stands too: ``spark.log.level`` in the Spark configuration, or a root level
other than Spark's shell default (WARN), e.g. from their own ``log4j2.properties`` or an earlier
``sc.setLogLevel``.
"""

from __future__ import annotations

import warnings
from typing import Any

#: The console level when the user chose none: errors only, so the output shows the product's messages.
DEFAULT_LEVEL = "ERROR"

#: Spark loggers whose warnings are expected in this package's normal use, with why.
HARMLESS_LOGGERS = {
    # "The data source logsource replaced a statically registered data source": Spark's lookup of
    # installed pyspark_* modules found pyspark_logsource.DefaultSource, and register() registers
    # the same class again for sessions where that lookup does not run (Spark Connect, other paths).
    "org.apache.spark.sql.execution.datasources.DataSourceManager": "ERROR",
}

_quieted: set[str] = set()  # applicationId of every SparkContext already configured


def quiet_spark(spark: Any, level: str = DEFAULT_LEVEL) -> bool:
    """Set the console level to ``level`` unless the user chose one, and silence the harmless
    warnings; once per SparkContext. True if this call changed the level."""
    # PySpark warns about pandas >= 3 on every import of its testing helpers; our reads and writes
    # use Arrow conversions that work with it.
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    try:
        sc = spark.sparkContext
        jvm = sc._jvm
        app = sc.applicationId
    except Exception:  # Spark Connect (no JVM here), or a stopped session: nothing to configure
        return False
    if app in _quieted:
        return False
    _quieted.add(app)
    try:
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        levels = jvm.org.apache.logging.log4j.Level
        for name, lvl in HARMLESS_LOGGERS.items():
            configurator.setLevel(name, levels.toLevel(lvl))
        if sc.getConf().get("spark.log.level", None):
            return False  # the user's spark.log.level, applied by Spark at startup
        current = str(jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().toString())
    except Exception:  # not log4j2 underneath: leave the logging as it is
        return False
    if current.upper() != "WARN":
        return False  # the user's log4j2.properties or setLogLevel chose this level
    sc.setLogLevel(level)
    return True
