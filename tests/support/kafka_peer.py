"""A real Apache Kafka (single-node KRaft, from the jars scripts/peers.py fetched) and its command-line tools.

Usage::

    with KafkaServer(tmp_dir) as kafka:          # formats storage, starts kafka.Kafka, waits until it serves
        kafka.bootstrap                           # "127.0.0.1:PORT"
    kafka_tool("TopicCommand", "--bootstrap-server", bootstrap, "--list")   # org.apache.kafka.tools.*

The session fixture ``real_kafka`` (tests/conftest.py) starts one for the whole test session.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]

_LOG4J = """status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.target = {target}
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
"""


@functools.cache
def peers() -> ModuleType:
    """scripts/peers.py as a module (versions, cache paths, classpaths)."""
    if "logsource_peers" in sys.modules:
        return sys.modules["logsource_peers"]
    spec = importlib.util.spec_from_file_location("logsource_peers", ROOT / "scripts" / "peers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["logsource_peers"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def kafka_classpath() -> str:
    """The fetched Kafka's classpath; raises with what to do when it has not been fetched."""
    cp = peers().classpath("kafka")
    if cp is None:
        raise RuntimeError("Apache Kafka's jars are not fetched: run 'make peers' (make test does)")
    return cp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log4j_config(directory: Path, name: str, level: str, target: str) -> Path:
    path = directory / name
    if not path.exists():
        path.write_text(_LOG4J.format(level=level, target=target))
    return path


def kafka_tool(
    tool: str,
    *args: str,
    input: str | None = None,
    timeout: float = 60.0,
    check: bool = True,
    jvm: tuple[str, ...] = ("-Xmx256m", "-XX:TieredStopAtLevel=1"),
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools (``org.apache.kafka.tools.<tool>``, or a full class name) from
    the fetched jars, as kafka-topics.sh etc. do; its log goes to stderr at WARN. The default ``jvm``
    options start fast (C1 only): a benchmark's client passes its own."""
    main = tool if "." in tool else f"org.apache.kafka.tools.{tool}"
    conf_dir = Path(os.environ.get("TMPDIR", "/tmp"))
    log4j = _log4j_config(conf_dir, "logsource-kafka-tools-log4j2.properties", "WARN", "SYSTEM_ERR")
    cmd = [
        "java",
        *jvm,
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        kafka_classpath(),
        main,
        *args,
    ]
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{tool} {' '.join(args)} exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\n"
            f"stderr:\n{proc.stderr[-3000:]}"
        )
    return proc


def random_cluster_id() -> str:
    """A cluster id as Kafka's ``Uuid.randomUuid()`` makes one: URL-safe base64 of 16 random bytes, never
    starting with '-' (kafka-storage's argument parser would read ``-t -xyz`` as a missing value: one id
    in 64 failed the format)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaStartError(RuntimeError):
    """Apache Kafka did not come up within its timeout (the message ends with its last log lines)."""


class KafkaServer:
    """One single-node Apache Kafka in KRaft mode (combined broker + controller) on free loopback ports."""

    def __init__(
        self,
        directory: str | Path,
        *,
        heap: str = "512m",
        start_timeout: float = 60.0,
        overrides: dict[str, str] | None = None,
        extra_jvm: tuple[str, ...] = (),
        sasl_ssl_keystore: Path | None = None,
        scram_users: dict[str, str] | None = None,
    ) -> None:
        """``sasl_ssl_keystore``: a PEM file (PKCS#8 key and chain) for a SASL_SSL listener with SCRAM-SHA-512
        beside PLAINTEXT, whose ``scram_users`` (name -> password) ``kafka-storage format --add-scram`` makes."""
        self.dir = Path(directory)
        self.heap = heap
        self.start_timeout = start_timeout
        self.overrides = overrides or {}
        self.extra_jvm = extra_jvm
        self.port = free_port()
        self.controller_port = free_port()
        self.sasl_ssl_keystore = sasl_ssl_keystore
        self.scram_users = dict(scram_users or {})
        self.sasl_ssl_port = free_port() if sasl_ssl_keystore else None
        self.log_path = self.dir / "kafka.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """The SASL_SSL listener's address (with ``sasl_ssl_keystore``)."""
        assert self.sasl_ssl_port is not None, "started without a SASL_SSL listener"
        return f"127.0.0.1:{self.sasl_ssl_port}"

    def _sasl_ssl(self) -> dict[str, str]:
        if self.sasl_ssl_port is None:
            return {}
        p, s, c = self.port, self.sasl_ssl_port, self.controller_port
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{p},SASL_SSL://127.0.0.1:{s},CONTROLLER://127.0.0.1:{c}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{p},SASL_SSL://127.0.0.1:{s}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.sasl_ssl_keystore),
        }

    def properties(self) -> dict[str, str]:
        """The broker's server.properties: a combined node, single replicas for the internal topics."""
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.dir / "data"),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            **self._sasl_ssl(),
            **self.overrides,
        }

    def _java(self, main: str, *args: str, heap: str) -> list[str]:
        log4j = _log4j_config(self.dir, "log4j2.properties", "INFO", "SYSTEM_OUT")
        return [
            "java",
            f"-Xmx{heap}",
            f"-Xms{heap}",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}",
            *self.extra_jvm,
            "-cp",
            kafka_classpath(),
            main,
            *args,
        ]

    def start(self) -> KafkaServer:
        """Format the storage with a random cluster id, start kafka.Kafka and wait until it serves."""
        self.dir.mkdir(parents=True, exist_ok=True)
        config = self.dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        if not (self.dir / "data" / "meta.properties").exists():
            cluster_id = random_cluster_id()
            scram = [
                a
                for u, pw in self.scram_users.items()
                for a in ("--add-scram", f"SCRAM-SHA-512=[name={u},password={pw}]")
            ]
            fmt = self._java(
                "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config), *scram, heap="256m"
            )
            proc = subprocess.run(fmt, capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                raise KafkaStartError(
                    f"kafka-storage format failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
                )
        out = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self._java("kafka.Kafka", str(config), heap=self.heap),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        self._wait_started()
        return self

    def _wait_started(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise KafkaStartError(f"Apache Kafka exited {self.proc.returncode}:\n{self.last_log_lines()}")
            if "Kafka Server started" in self.log_path.read_text(errors="replace") and self._answers():
                return
            time.sleep(0.2)
        self.stop()
        raise KafkaStartError(
            f"Apache Kafka did not start within {self.start_timeout:.0f} s; its last log lines:\n"
            + self.last_log_lines()
        )

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                return True
        except OSError:
            return False

    def last_log_lines(self, n: int = 20) -> str:
        """The log's first ERROR/FATAL line (the cause; a shutdown logs many lines after it) and its last
        ``n`` lines."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        first = next((i for i, ln in enumerate(lines) if "] ERROR " in ln or "] FATAL " in ln), None)
        tail = "\n".join(lines[-n:]) or "(empty log)"
        if first is None or first >= len(lines) - n:
            return tail
        return "\n".join(lines[first : first + 3]) + "\n...\n" + tail

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL after ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> KafkaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
