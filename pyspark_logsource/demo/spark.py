"""One SparkSession for the examples, configured from ``conf/`` (and a Java check)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

#: Spark 4 runs on Java 17 or 21.
JAVA_MIN_VERSION = 17

JAVA_HELP = (
    "Spark needs a Java runtime, version {need} or newer ({found}).\n"
    "  Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless\n"
    "  elsewhere:     https://adoptium.net/temurin/releases/?version=17\n"
    "Then put `java` on PATH or set JAVA_HOME, and run the command again ("
    "`make demo` installs it by itself when run as root on Debian/Ubuntu)."
)


class JavaMissing(RuntimeError):
    """No usable Java runtime: the message says which version is needed and how to get it."""


def conf_dir() -> Path | None:
    """The ``conf/`` directory: ``$LOGSOURCE_CONF_DIR``, else the one of the source checkout."""
    env = os.environ.get("LOGSOURCE_CONF_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2] / "conf")
    for c in candidates:
        if (c / "spark-defaults.conf").is_file():
            return c
    return None


def read_properties(path: Path) -> dict[str, str]:
    """Key/value pairs of a ``spark-defaults.conf``-style file (``key value`` or ``key=value``)."""
    props: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        m = re.match(r"([^\s=:]+)\s*[=:\s]\s*(.*)$", line)
        if m:
            props[m.group(1)] = m.group(2).strip()
    return props


def java_version(java: str | None = None) -> int | None:
    """Major version of the Java runtime Spark will use (``JAVA_HOME`` first, then PATH), or None."""
    if java is None:
        home = os.environ.get("JAVA_HOME")
        java = (
            str(Path(home) / "bin" / "java")
            if home and (Path(home) / "bin" / "java").exists()
            else shutil.which("java")
        )
    if not java:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def check_java(need: int = JAVA_MIN_VERSION) -> int:
    """Return the Java major version, or raise :class:`JavaMissing` with how to get Java ``need``."""
    found = java_version()
    if found is None:
        raise JavaMissing(JAVA_HELP.format(need=need, found="no `java` found on PATH or in JAVA_HOME"))
    if found < need:
        raise JavaMissing(JAVA_HELP.format(need=need, found=f"found Java {found}"))
    return found


def spark_session(app_name: str = "pyspark-logsource", *, register: bool = True, **overrides: Any):
    """Get or create the SparkSession for the examples, with ``conf/`` applied.

    ``SPARK_CONF_DIR`` is pointed at ``conf/`` before the JVM starts, so Spark
    reads ``spark-defaults.conf`` and ``log4j2.properties`` from there; the same
    defaults are also set on the builder so that they hold when a JVM was
    started elsewhere. ``overrides`` are Spark settings (``spark.x.y="v"``, with
    ``_`` allowed for ``.``). Registers the ``logsource`` data source when
    ``register`` and the data source is available.
    """
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # PySpark warns about pandas >= 3 on every import of its testing helpers; the
    # examples use only Arrow conversions that work with it.
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    from pyspark.sql import SparkSession

    settings: dict[str, str] = {}
    cdir = conf_dir()
    if cdir is not None:
        os.environ.setdefault("SPARK_CONF_DIR", str(cdir))
        settings.update(read_properties(cdir / "spark-defaults.conf"))
        log4j = cdir / "log4j2.properties"
        if log4j.is_file():
            # Also via a system property: a SPARK_CONF_DIR set by the user wins on the classpath.
            settings.setdefault(
                "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j.as_uri()}"
            )
    for k, v in overrides.items():
        settings[k if "." in k else k.replace("_", ".")] = str(v)
    builder = SparkSession.builder.appName(app_name)
    for k, v in settings.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    if register:
        _register(session)
    return session


def _register(session) -> None:
    try:
        import pyspark_logsource as pkg
    except ImportError:  # pragma: no cover - the package is what we are running
        return
    reg = getattr(pkg, "register", None)
    if reg is not None:
        # The demo filters only freshly loaded DataFrames, where pushdown is safe (see register()).
        reg(session, enable_filter_pushdown=True)
