"""A standalone ZooKeeper server in a child process, for ``logsource cluster start`` and tests.

```python
with ZooKeeperServer(tmp / "zk") as zk:          # free loopback port, own dataDir
    broker_config["zookeeper.connect"] = zk.connect + "/cluster-a"
    zk.kill(); zk.start()                          # a crash and a restart: same port, same data
```

It runs Debian's ZooKeeper (``/usr/share/java/zookeeper.jar``, package ``zookeeper``;
``scripts/ensure-zookeeper.sh`` installs it) as ``java ... ZooKeeperServerMain zoo.cfg``,
with a cfg file written next to the data: a small ``tickTime`` so sessions may be short,
the admin (Jetty) server off, and the ``ruok``/``srvr`` four-letter words allowed, which is
how :meth:`wait_ready` knows the server serves. The port chosen at the first start is kept,
so ``connect`` stays valid across :meth:`restart`, :meth:`kill` + :meth:`start`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ...errors import ConfigError, NetworkError

#: Debian's ZooKeeper server jar; its manifest's Class-Path names the other jars it needs.
ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
#: slf4j's simple binding, when installed, gives the server a log file instead of silence.
_SLF4J_SIMPLE = "/usr/share/java/slf4j-simple.jar"
_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def four_letter_word(host: str, port: int, word: str = "ruok", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the answer ('' when nothing answers)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                data = s.recv(4096)
                if not data:
                    break
                chunks.append(data)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server on ``host``; ``data_dir`` holds its cfg, data and log."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        tick_time_ms: int = 200,
        max_session_timeout_ms: int = 60000,
        fsync: bool = True,
        detach: bool = False,
        java: str | None = None,
        jar: str = ZOOKEEPER_JAR,
        startup_timeout: float = 30.0,
        log_level: str = "info",
    ) -> None:
        """``detach``: the server outlives this process (a daemon, for ``logsource cluster start``);
        otherwise it is killed when the thread that started it dies. ``fsync=False`` skips the
        transaction log's fsync (survives a process kill, not a machine crash; tests use it)."""
        if tick_time_ms <= 0:
            raise ConfigError(f"tick_time_ms must be > 0, got {tick_time_ms}")
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = int(port)
        self.tick_time_ms = int(tick_time_ms)
        self.max_session_timeout_ms = int(max_session_timeout_ms)
        self.fsync = fsync
        self.detach = detach
        self.java = java or shutil.which("java") or "java"
        self.jar = jar
        self.startup_timeout = startup_timeout
        self.log_level = log_level
        self._proc: subprocess.Popen | None = None

    # ------------------------------------------------------------ properties

    @property
    def connect(self) -> str:
        """``host:port`` for ``zookeeper.connect`` (append a chroot such as ``/cluster-a``)."""
        if not self.port:
            raise NetworkError("the ZooKeeper server has not been started")
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """True while the child process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The java process id (None before the first start)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def cfg_file(self) -> Path:
        """The zoo.cfg this server runs with."""
        return self.data_dir / "zoo.cfg"

    @property
    def log_file(self) -> Path:
        """The server's stdout/stderr (its log when slf4j-simple is installed)."""
        return self.data_dir / "zookeeper.log"

    # ------------------------------------------------------------ start / stop

    def command(self) -> list[str]:
        """The java command line that runs the server."""
        if not os.path.exists(self.jar):
            raise ConfigError(
                f"ZooKeeper is not installed ({self.jar} is missing): run 'bash scripts/ensure-zookeeper.sh' "
                "or 'sudo apt-get install zookeeper'"
            )
        cp = [self.jar] + ([_SLF4J_SIMPLE] if os.path.exists(_SLF4J_SIMPLE) else [])
        return [
            self.java,
            "-Xms16m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.jmx.log4j.disable=true",
            f"-Dorg.slf4j.simpleLogger.defaultLogLevel={self.log_level}",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
            os.pathsep.join(cp),
            _MAIN,
            str(self.cfg_file),
        ]

    def _write_cfg(self) -> None:
        data = self.data_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        lines = {
            "tickTime": self.tick_time_ms,
            "dataDir": data,
            "clientPort": self.port,
            "clientPortAddress": self.host,
            # sessions may last 2 ticks .. this long (ZooKeeper's default max is only 20 ticks)
            "minSessionTimeout": 2 * self.tick_time_ms,
            "maxSessionTimeout": max(self.max_session_timeout_ms, 2 * self.tick_time_ms),
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat,cons,mntr",
            "maxClientCnxns": 0,  # every broker, client and test on 127.0.0.1 shares one address
            "preAllocSize": 4096,  # KiB of transaction log allocated ahead (default 64 MiB)
            "forceSync": "yes" if self.fsync else "no",
            "autopurge.snapRetainCount": 3,
            "autopurge.purgeInterval": 1,
        }
        text = "# written by pyspark_logsource.broker.cluster.zookeeper\n"
        text += "".join(f"{k}={v}\n" for k, v in lines.items())
        tmp = self.cfg_file.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.cfg_file)

    def start(self) -> ZooKeeperServer:
        """Start the server (on the port of its first start) and wait until it serves requests."""
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        pick = self.port == 0
        for attempt in range(3):
            if pick:
                self.port = free_port(self.host)
            try:
                self._spawn()
                return self
            except NetworkError:
                # a port picked free may be taken before java binds it: pick another
                if not pick or attempt == 2:
                    raise
        return self

    def _spawn(self) -> None:
        self._write_cfg()
        cmd = self.command()
        with open(self.log_file, "ab") as logf:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=self.detach,
                preexec_fn=None if self.detach else _parent_death_signal(),
            )
        try:
            self.wait_ready(self.startup_timeout)
        except NetworkError:
            self.kill()
            raise

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the server serves requests; NetworkError when it exits or times out."""
        deadline = time.monotonic() + timeout
        while True:
            # ``ruok`` answers imok as soon as the port is open, before the database is loaded;
            # ``srvr`` says "not currently serving requests" until then, and its Mode after
            if "Mode: " in four_letter_word(self.host, self.port, "srvr", timeout=1.0):
                return
            if self._proc is not None and self._proc.poll() is not None:
                raise NetworkError(
                    f"ZooKeeper exited with status {self._proc.returncode} on {self.host}:{self.port}:\n{self._tail()}"
                )
            if time.monotonic() > deadline:
                raise NetworkError(
                    f"ZooKeeper did not answer on {self.host}:{self.port} within {timeout}s:\n{self._tail()}"
                )
            time.sleep(0.05)

    def _tail(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> None:
        """Clean shutdown (SIGTERM; SIGKILL if it does not exit within ``timeout``)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: a crash. Sessions survive it if the server is back within their timeout."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def restart(self) -> ZooKeeperServer:
        """Stop and start again with the same port and data."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the server (its data dir stays)."""
        self.stop()

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = self.connect if self.running else "stopped"
        return f"ZooKeeperServer({state}, data_dir={str(self.data_dir)!r})"


def _parent_death_signal():
    # Linux: the child gets SIGKILL when the thread that forked it dies, so a crashed test run
    # never leaves a ZooKeeper holding its port (brokers do the same via LOGSOURCE_PARENT_PID).
    # libc is loaded here, in the parent: the child between fork and exec may only make the call.
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    return preexec


def pid_alive(pid: int) -> bool:
    """True if a process with ``pid`` exists (and is not a zombie we could reap)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True
