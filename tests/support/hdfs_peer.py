"""A real HDFS for the tests: Hadoop's MiniDFSCluster (one NameNode, one DataNode) in a child JVM, from the
hadoop-client-minicluster jars scripts/peers.py fetched (``MiniDFSClusterManager``, its command line).

    with HdfsServer(tmp_dir) as hdfs:
        hdfs.url            # "hdfs://127.0.0.1:PORT"
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from .kafka_peer import free_port, peers


class HdfsStartError(RuntimeError):
    """The MiniDFSCluster did not come up within its timeout (the message ends with its last output)."""


class HdfsServer:
    """One MiniDFSCluster on a free loopback NameNode port; stopped (SIGTERM, then SIGKILL) by ``stop``."""

    def __init__(self, directory: str | Path, *, start_timeout: float = 180.0, heap: str = "512m") -> None:
        self.dir = Path(directory)
        self.start_timeout = start_timeout
        self.heap = heap
        self.port = free_port()
        self.conf = self.dir / "hdfs-site.xml"
        self.log_path = self.dir / "minidfs.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"hdfs://127.0.0.1:{self.port}"

    def start(self) -> HdfsServer:
        cp = peers().classpath("hadoop-minicluster")
        if cp is None:
            raise HdfsStartError(
                "hadoop-client-minicluster is not fetched: run 'make peers' (make test does)"
            )
        self.dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            "java",
            f"-Xmx{self.heap}",
            f"-Dtest.build.data={self.dir / 'data'}",
            "-cp",
            cp,
            "org.apache.hadoop.test.MiniDFSClusterManager",
            "-format",
            "-datanodes",
            "1",
            "-nnport",
            str(self.port),
            "-writeConfig",
            str(self.conf),
        ]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=self.dir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise HdfsStartError(f"MiniDFSCluster exited {self.proc.returncode}:\n{self.last_lines()}")
            if self.conf.exists() and os.path.getsize(self.conf) > 0:  # written once the cluster is up
                return self
            time.sleep(0.3)
        self.stop()
        raise HdfsStartError(
            f"MiniDFSCluster did not start within {self.start_timeout:.0f} s; its last output:\n{self.last_lines()}"
        )

    def last_lines(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:]) or "(no output)"
        except FileNotFoundError:
            return "(no output)"

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def __enter__(self) -> HdfsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
