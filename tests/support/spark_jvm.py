"""JVM options for the tests' short-lived Spark drivers: C1 only, the serial GC, and a class-data archive.

The kill tests start ~60 cold drivers per session; most of a start is the JVM loading and verifying
Spark's ~10,000 classes. A dynamic class-data-sharing archive (JDK 13+), written once per test session
by a warm-up driver (``-XX:ArchiveClassesAtExit``) in the background, lets every driver that starts
after it is ready map those classes instead (``-XX:SharedArchiveFile``): measured about half the JVM's
CPU of a start, for ~65 s of CPU once. The archive lives in the
directory named by LOGSOURCE_TEST_CDS_DIR (tests/conftest.py sets it to a session tmp dir); without
it, or if the warm-up fails, drivers run without an archive, as before. A JVM that finds the archive
unusable (another JDK or classpath) ignores it; its warnings go to stderr, never to the stdout the
tests read.

    python tests/support/spark_jvm.py build DIR   # the background warm-up (started by driver_java_options)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

BASE_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# the JVM's unified logging writes warnings to stdout by default; the tests parse drivers' stdout
LOG_TO_STDERR = "-Xlog:disable -Xlog:all=warning:stderr"
CDS_DIR_ENV = "LOGSOURCE_TEST_CDS_DIR"
ARCHIVE = "spark.jsa"
WARM_UP_TIMEOUT = 1800
BUILDING = "building.pid"
FAILED = "warm-up-failed.txt"
WITHOUT = "drivers-without-archive.txt"
_builders: list[subprocess.Popen] = []


def driver_java_options() -> str:
    """The driver JVM options for a test driver: BASE_OPTIONS plus the session's archive when there is one."""
    d = os.environ.get(CDS_DIR_ENV)
    if not d:
        return BASE_OPTIONS
    archive = _ensure_archive(Path(d))
    if archive is None:
        return BASE_OPTIONS
    return f"{BASE_OPTIONS} {LOG_TO_STDERR} -XX:SharedArchiveFile={archive}"


def submit_args(*conf: str) -> str:
    """PYSPARK_SUBMIT_ARGS for a driver started through pyspark (plain `python` scripts and jobs)."""
    extra = "".join(f" --conf {c}" for c in conf)
    return f"--driver-java-options '{driver_java_options()}'{extra} pyspark-shell"


def examples_conf_dir(dest: Path, conf: Path = Path(__file__).resolve().parents[2] / "conf") -> Path:
    """A copy of conf/ in dest for the notebooks and the demo under test (LOGSOURCE_CONF_DIR names it):
    the same settings and log4j2.properties, plus a spark.driver.extraJavaOptions line with BASE_OPTIONS.
    Their code is unchanged and a user's run never sees this file: spark_session() reads
    LOGSOURCE_CONF_DIR's spark-defaults.conf and points SPARK_CONF_DIR at it, so the kernel's session and
    the jobs it starts all get these options. Not the class-data archive: a JVM maps it only with the
    classpath it was written with, and SPARK_CONF_DIR is the classpath's first entry (measured: "Unable to
    use shared archive")."""
    dest.mkdir(parents=True, exist_ok=True)
    log4j = dest / "log4j2.properties"
    log4j.write_text((conf / "log4j2.properties").read_text())
    # the log4j property is the one spark_session() adds when the file has no extraJavaOptions line
    opts = f"{BASE_OPTIONS} -Dlog4j2.configurationFile={log4j.as_uri()}"
    text = (conf / "spark-defaults.conf").read_text()
    (dest / "spark-defaults.conf").write_text(
        f"{text.rstrip()}\n\n# the tests' JVM options\nspark.driver.extraJavaOptions  {opts}\n"
    )
    return dest


def _ensure_archive(d: Path) -> Path | None:
    """The archive in d if it is ready; otherwise None, and the first process to ask starts the warm-up
    in the background (its own session: killing the asking driver leaves it running), so that no test
    waits for it: the drivers that start meanwhile run without the archive."""
    archive, failed = d / ARCHIVE, d / FAILED
    if archive.exists():
        return archive
    if failed.exists():
        return None
    d.mkdir(parents=True, exist_ok=True)
    with open(d / WITHOUT, "a") as f:  # one line per driver that starts without it: the session's summary
        f.write(f"{os.getpid()}\n")
    start_warm_up(d)
    return None


def start_warm_up(d: Path) -> None:
    """Start writing d's archive in the background unless it is there, failed or being written."""
    if (d / ARCHIVE).exists() or (d / FAILED).exists():
        return
    d.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(d / BUILDING, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # another process is writing it
    p = subprocess.Popen(
        [sys.executable, __file__, "build", str(d)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.write(fd, str(p.pid).encode())
    os.close(fd)
    _builders.append(p)  # kept: a dropped Popen of a running child warns


def drivers_without_archive(d: Path) -> int:
    """How many drivers asked for d's archive before it was ready (and ran without it)."""
    try:
        return len((d / WITHOUT).read_text().split())
    except OSError:
        return 0


def stop_warm_up(d: Path) -> None:
    """Kill a warm-up still running for d (its process group: builder, driver and JVM)."""
    try:
        pid = int((d / BUILDING).read_text() or "0")
    except (OSError, ValueError):
        return
    if pid and not (d / ARCHIVE).exists() and not (d / FAILED).exists():
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _build(d: Path) -> None:
    """Run the warm-up driver with -XX:ArchiveClassesAtExit; rename its archive into place, or note why not."""
    tmp = d / (ARCHIVE + ".tmp")
    opts = f"{BASE_OPTIONS} {LOG_TO_STDERR} -XX:ArchiveClassesAtExit={tmp}"
    env = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_SUBMIT_ARGS=f"--driver-java-options '{opts}' pyspark-shell",
    )
    env.pop(CDS_DIR_ENV, None)
    # ~65 s of CPU; its wall time on a machine shared with other work can be many minutes
    try:
        r = subprocess.run(
            [sys.executable, __file__, "warm", str(d / "warm")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=WARM_UP_TIMEOUT,
        )
        rc, out = r.returncode, r.stdout
    except subprocess.TimeoutExpired as e:
        rc, out = -1, f"timed out after {WARM_UP_TIMEOUT} s\n{e.output or ''}"
    if rc != 0 or not tmp.exists() or tmp.stat().st_size == 0:
        (d / FAILED).write_text(f"rc={rc}\n{str(out)[-6000:]}")
        return
    tmp.rename(d / ARCHIVE)


def _warm(work: str) -> None:
    """Touch the Spark code the test drivers run (SQL planning, a Python data source, Arrow, JSON
    decoding, partitioned Parquet writes and reads, a micro-batch stream with a checkpoint), so that
    its classes are in the archive; classes left out still load, only without the saving."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class _Rows(DataSource):
        @classmethod
        def name(cls) -> str:
            return "warmrows"

        def schema(self) -> str:
            return "partition int, offset long, value binary"

        def reader(self, schema):  # noqa: ANN001, ANN201
            return _Reader()

    class _Reader(DataSourceReader):
        def read(self, partition):  # noqa: ANN001, ANN201
            for i in range(50):
                yield (i % 3, i, f'{{"n": {i}}}'.encode())

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.dataSource.register(_Rows)
    df = spark.read.format("warmrows").load()
    df = df.withColumn("j", F.from_json(F.col("value").cast("string"), "n int")).withColumn(
        "date", F.current_date()
    )
    df.write.mode("overwrite").partitionBy("date", "partition").parquet(f"{work}/a")
    back = spark.read.parquet(f"{work}/a")
    back.groupBy("partition").agg(F.count("*"), F.max("offset")).collect()
    back.toPandas() if _has_pandas() else back.collect()
    q = (
        spark.readStream.schema(back.schema)
        .parquet(f"{work}/a")
        .writeStream.format("parquet")
        .option("checkpointLocation", f"{work}/ckpt")
        .trigger(availableNow=True)
        .start(f"{work}/b")
    )
    q.awaitTermination()
    spark.read.parquet(f"{work}/b").count()
    spark.stop()


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__" and sys.argv[1:2] == ["warm"]:
    _warm(sys.argv[2])
elif __name__ == "__main__" and sys.argv[1:2] == ["build"]:
    _build(Path(sys.argv[2]))
