"""EmbeddedBroker: a broker for notebooks, scripts and tests, in a thread or a child process.

```python
with EmbeddedBroker() as broker:              # temporary data dir, free port
    Admin(broker.bootstrap).create_topic("clicks", partitions=8)
```

``mode="thread"`` runs the asyncio server in a daemon thread of this process
(no extra interpreter to start; good for notebooks). ``mode="process"`` spawns
``python -m pyspark_logsource.broker`` and reads the bound port from its
stdout; only there does :meth:`kill` mean a real ``SIGKILL``. The port chosen
at the first start is kept by :meth:`restart`, so ``bootstrap`` stays valid.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, NetworkError
from .config import BrokerConfig

log = logging.getLogger(__name__)

_LISTENING = "listening on "


class EmbeddedBroker:
    """A single broker on 127.0.0.1, managed from this process."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        port: int = 0,
        config: Mapping[str, object] | None = None,
        mode: str = "thread",
        host: str = "127.0.0.1",
        startup_timeout: float = 60.0,
    ) -> None:
        if mode not in ("thread", "process"):
            raise ConfigError(f"mode must be 'thread' or 'process', got {mode!r}")
        self.mode = mode
        self.host = host
        self.port = port
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        self.startup_timeout = startup_timeout
        self._own_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="logsource-")) if data_dir is None else Path(data_dir)
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._broker: Any = None
        self._error: BaseException | None = None
        self._closed = False
        self._atexit = False
        #: listener name -> bound port (every listener; with ``listeners`` in ``config``, ports 0 are picked)
        self.listener_ports: dict[str, int] = {}

    # ------------------------------------------------------------ properties

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"`` for the clients."""
        if not self.running:
            raise NetworkError("the embedded broker is not running")
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """True while the broker is up."""
        if self.mode == "process":
            return self._proc is not None and self._proc.poll() is None
        return self._thread is not None and self._thread.is_alive()

    @property
    def pid(self) -> int | None:
        """The child's pid in process mode."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_file(self) -> Path:
        """Where a process-mode broker writes its log."""
        return self.data_dir / "broker.log"

    def _overrides(self) -> dict[str, str]:
        # Local short-circuit reads on: the embedded broker runs as this process's user on this host, and
        # that user owns its files already (a standalone broker has them off unless configured).
        props = {"log.dirs": str(self.data_dir / "logs"), "logsource.local.read.enable": "true"}
        props.update(self.config)
        if "listeners" not in self.config:
            props["listeners"] = f"PLAINTEXT://{self.host}:{self.port}"
        elif self.listener_ports:  # a restart keeps the ports the listeners were given
            props["listeners"] = ",".join(
                f"{name}://{self.host}:{self.listener_ports.get(name.strip().upper(), 0)}"
                for name in (item.split("://", 1)[0] for item in self.config["listeners"].split(","))
            )
        return props

    def bootstrap_on(self, listener: str) -> str:
        """``"127.0.0.1:PORT"`` of listener ``listener`` (its name in ``listeners``)."""
        if not self.running:
            raise NetworkError("the embedded broker is not running")
        return f"{self.host}:{self.listener_ports[listener]}"

    # ------------------------------------------------------------ start / stop

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it listens."""
        if self._closed:
            raise NetworkError("the embedded broker was closed")
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self._atexit:
            # a notebook that never calls close() still gets a clean shutdown (no recovery scan next time)
            atexit.register(_stop_at_exit, weakref.ref(self))
            self._atexit = True
        if self.mode == "process":
            self._start_process()
        else:
            self._start_thread()
        return self

    def _start_thread(self) -> None:
        from .server import Broker

        config = BrokerConfig.from_properties(self._overrides())
        ready = threading.Event()
        self._error = None

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._broker = Broker(config)
            try:
                _, self.port = await self._broker.start()
                self.listener_ports = {n: p for n, (_, p) in self._broker.listener_addresses.items()}
            except BaseException as e:  # reported to start()
                self._error = e
                ready.set()
                return
            ready.set()
            await self._broker.wait_stopped()

        def target() -> None:
            try:
                asyncio.run(main())
            except BaseException as e:  # reported to start()
                self._error = e
                ready.set()

        self._thread = threading.Thread(target=target, name=f"embedded-broker-{self.port}", daemon=True)
        self._thread.start()
        if not ready.wait(self.startup_timeout):
            raise NetworkError(f"embedded broker did not start within {self.startup_timeout}s")
        if self._error is not None:
            self._thread.join()
            raise self._error

    def _start_process(self) -> None:
        cmd = [sys.executable, "-m", "pyspark_logsource.broker"]
        for k, v in self._overrides().items():
            cmd += ["--override", f"{k}={v}"]
        logf = open(self.log_file, "ab")  # noqa: SIM115 - handed to the child
        try:
            # the child stops itself when this process dies, so a crashed test run or notebook
            # never leaves an orphan broker holding its port and files (see process.run)
            env = dict(os.environ, LOGSOURCE_PARENT_PID=str(os.getpid()))
            self._proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=logf, stdin=subprocess.DEVNULL, env=env
            )
        finally:
            logf.close()
        deadline = time.monotonic() + self.startup_timeout
        sel = selectors.DefaultSelector()
        sel.register(self._proc.stdout, selectors.EVENT_READ)
        line = b""
        try:
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.kill()
                    raise NetworkError(
                        f"broker did not start within {self.startup_timeout}s; see {self.log_file}"
                    )
                chunk = os.read(self._proc.stdout.fileno(), 4096)
                if not chunk:
                    self._proc.wait()
                    tail = self.log_file.read_text(errors="replace")[-2000:]
                    raise NetworkError(f"broker exited with status {self._proc.returncode}:\n{tail}")
                line += chunk
        finally:
            sel.close()
        lines = line.decode().strip().splitlines()
        text = lines[0]
        if not text.startswith(_LISTENING):
            self.kill()
            raise NetworkError(f"unexpected broker output {text!r}")
        self.port = int(text.rsplit(":", 1)[1])
        # the next lines (written with the first): "listener NAME on HOST:PORT" per listener
        for extra in lines[1:]:
            parts = extra.split()
            if len(parts) == 4 and parts[0] == "listener":
                self.listener_ports[parts[1]] = int(parts[3].rsplit(":", 1)[1])
        # keep draining stdout so the child can never block on a full pipe
        threading.Thread(target=_drain, args=(self._proc.stdout,), daemon=True).start()

    def stop(self, timeout: float = 30.0) -> None:
        """Clean shutdown: the broker flushes and closes its logs."""
        if self.mode == "process":
            if self._proc is not None and self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)
                try:
                    self._proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    log.warning("broker %d did not stop in %.0fs; killing it", self._proc.pid, timeout)
                    self.kill()
            return
        if self._thread is not None and self._thread.is_alive() and self._loop is not None:
            fut = asyncio.run_coroutine_threadsafe(self._broker.stop(), self._loop)
            fut.result(timeout)
            self._thread.join(timeout)
        self._thread = None

    def kill(self) -> None:
        """Process mode: SIGKILL (a crash; only the flush policy protects data). Thread mode: same as stop()."""
        if self.mode == "process":
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
            return
        self.stop()

    def restart(self) -> EmbeddedBroker:
        """Stop (if running) and start again on the same port and data dir."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop and remove the data dir if it was a temporary one."""
        if self._closed:
            return
        self.stop()
        self._closed = True
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"{self.host}:{self.port}" if self.running else "stopped"
        return f"EmbeddedBroker({self.mode}, {state}, data_dir={str(self.data_dir)!r})"


def _stop_at_exit(ref: weakref.ref) -> None:
    b = ref()
    if b is not None and b.running:
        try:
            b.stop(timeout=10)
        except Exception:  # interpreter shutdown: best effort
            pass


def _drain(stream: Any) -> None:
    try:
        while stream.read(4096):
            pass
    except (OSError, ValueError):
        pass
