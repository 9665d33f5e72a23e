"""A Spark Connect server for the tests: pyspark's own ``SparkConnectServer`` (the jar pyspark ships, as
``sbin/start-connect-server.sh`` starts it) in a child JVM on a free loopback port.

    with ConnectServer(tmp_dir) as server:
        SparkSession.builder.remote(server.url).getOrCreate()     # "sc://127.0.0.1:PORT"

Its Python workers inherit this process's environment (PYTHONPATH), so they import the tree under test.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from .kafka_peer import free_port

CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ConnectStartError(RuntimeError):
    """The Connect server did not listen within its timeout (the message ends with its last output)."""


class ConnectServer:
    """One Spark Connect server (local[2]); stopped (SIGTERM, then SIGKILL) by ``stop``."""

    def __init__(self, directory: str | Path, *, start_timeout: float = 240.0) -> None:
        self.dir = Path(directory)
        self.start_timeout = start_timeout
        self.port = free_port()
        self.log_path = self.dir / "connect-server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> ConnectServer:
        import pyspark

        spark_home = Path(pyspark.__file__).parent
        self.dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_HOME=str(spark_home))
        cmd = [
            str(spark_home / "bin" / "spark-submit"),
            "--class",
            CONNECT_CLASS,
            "--master",
            "local[2]",
            "--name",
            "logsource-tests-connect",
            "--driver-java-options",
            "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "--conf",
            f"spark.connect.grpc.binding.port={self.port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=4",
            "--conf",
            f"spark.local.dir={self.dir}",
            "spark-internal",
        ]
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.dir, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ConnectStartError(f"the Connect server exited {self.proc.returncode}:\n{self._tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise ConnectStartError(
            f"the Connect server did not listen in {self.start_timeout:.0f} s:\n{self._tail()}"
        )

    def _tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
