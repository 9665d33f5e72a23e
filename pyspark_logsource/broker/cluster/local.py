"""A local cluster on loopback: ZooKeeper plus N broker processes, run as background daemons.

```
logsource cluster start --brokers 3 --data-dir /tmp/lsc     # prints bootstrap.servers=127.0.0.1:p1,...
logsource cluster status --data-dir /tmp/lsc
logsource cluster stop --data-dir /tmp/lsc                  # data stays; start again to resume
```

``start`` on a running cluster starts the brokers that are down (a crash, a kill -9) with their
saved ids, ports and data, and leaves the running processes alone.

Layout of the data dir: ``zookeeper/`` (zoo.cfg, data, log), ``broker-<id>/`` (``logs/`` and
``broker.log``) and ``cluster.json`` (pids, ports, ``bootstrap.servers``). A second ``start``
on the same dir reuses the ports of the first, so a bootstrap list saved in a notebook stays
valid. From Python, :class:`LocalCluster` does the same.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import ConfigError, LeaderNotAvailable, LogSourceError, NetworkError
from .zookeeper import ZooKeeperServer, free_port, pid_alive

_STATE = "cluster.json"
_LISTENING = "listening on "
_ZK_MARK = "ZooKeeperServerMain"
_BROKER_MARK = "pyspark_logsource.broker"


def cluster_defaults(brokers: int) -> dict[str, str]:
    """Settings a local N-broker cluster starts with (override any with ``--override``): three
    copies of each partition (and of ``__consumer_offsets``) where there are three brokers, and
    acks=all needing two of them."""
    rf = min(3, brokers)
    return {
        "default.replication.factor": str(rf),
        "min.insync.replicas": str(2 if rf >= 3 else 1),
        # __transaction_state: Kafka's rule (no coordinator while fewer brokers are live) must fit N = 1, 2
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(2 if rf >= 3 else 1),
        "offsets.topic.replication.factor": str(rf),
    }


class LocalCluster:
    """ZooKeeper and brokers 1..N under ``data_dir``, as daemons that outlive this process."""

    def __init__(
        self,
        data_dir: str | Path,
        brokers: int = 3,
        *,
        host: str = "127.0.0.1",
        config_file: str | None = None,
        overrides: Mapping[str, str] | None = None,
        startup_timeout: float = 90.0,
    ) -> None:
        if brokers < 1:
            raise ConfigError(f"--brokers must be at least 1, got {brokers}")
        self.data_dir = Path(data_dir).resolve()
        self.brokers = brokers
        self.host = host
        self.config_file = config_file
        self.overrides = {**cluster_defaults(brokers), **dict(overrides or {})}
        self.startup_timeout = startup_timeout
        self.started: list[str] = []  # what the last start() started

    @property
    def state_file(self) -> Path:
        return self.data_dir / _STATE

    def read_state(self) -> dict[str, Any]:
        """The saved ``cluster.json`` ({} when there is none)."""
        try:
            return json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot read {self.state_file}: {e}") from None

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, self.state_file)

    def running_pids(self) -> dict[str, int]:
        """Processes of the saved cluster that are still alive: name -> pid."""
        state = self.read_state()
        out = {}
        zk = state.get("zookeeper", {})
        if _ours(zk.get("pid"), _ZK_MARK):
            out["zookeeper"] = zk["pid"]
        for b in state.get("brokers", []):
            if _ours(b.get("pid"), _BROKER_MARK):
                out[f"broker-{b['id']}"] = b["pid"]
        return out

    # ------------------------------------------------------------ start

    def start(self) -> str:
        """Start ZooKeeper and the brokers; return ``bootstrap.servers`` once all are registered and
        every existing partition has a live leader."""
        alive = self.running_pids()
        self.started = []
        if alive:
            return self._bring_back(alive)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        old = self.read_state()
        old_ports = {b["id"]: b["port"] for b in old.get("brokers", [])}
        zk = ZooKeeperServer(
            self.data_dir / "zookeeper",
            port=old.get("zookeeper", {}).get("port", 0),
            host=self.host,
            tick_time_ms=500,
            detach=True,
            startup_timeout=self.startup_timeout,
        )
        zk.start()
        state: dict[str, Any] = {
            "zookeeper": {
                "pid": zk.pid,
                "port": zk.port,
                "connect": zk.connect,
                "data_dir": str(zk.data_dir),
            },
            "brokers": [],
        }
        procs: dict[int, tuple[subprocess.Popen, Path]] = {}
        try:
            for bid in range(1, self.brokers + 1):
                port = old_ports.get(bid) or free_port(self.host)
                procs[bid] = self._spawn_broker(bid, port, zk.connect)
                state["brokers"].append(
                    {
                        "id": bid,
                        "pid": procs[bid][0].pid,
                        "port": port,
                        "data_dir": str(self.data_dir / f"broker-{bid}"),
                    }
                )
            self._write_state(state)
            for bid, (proc, out) in procs.items():
                self._wait_listening(bid, proc, out)
            self._wait_registered(zk.connect, set(procs))
        except BaseException:
            for proc, _ in procs.values():
                if proc.poll() is None:
                    proc.kill()
            zk.kill()
            raise
        bootstrap = ",".join(f"{self.host}:{b['port']}" for b in state["brokers"])
        state["bootstrap.servers"] = bootstrap
        self._write_state(state)
        self.started = ["zookeeper", *(f"broker-{bid}" for bid in procs)]
        # On a restart the data's topics are back: the list is printed once each of their partitions
        # is led again (the brokers stay up on a timeout: 'cluster stop' or a look at broker.log).
        self._wait_leaders(zk.connect, set(procs))
        return bootstrap

    def _bring_back(self, alive: dict[str, int]) -> str:
        """Part of the saved cluster runs: start its brokers that are down (same ids, ports and data),
        leave the running processes alone, and wait as :meth:`start` does."""
        state = self.read_state()
        running = ", ".join(f"{k} pid {v}" for k, v in alive.items())
        if "zookeeper" not in alive:
            raise ConfigError(
                f"brokers of the cluster in {self.data_dir} are running without its ZooKeeper ({running}); "
                "run 'logsource cluster stop --data-dir ...' first"
            )
        saved = state.get("brokers", [])
        if self.brokers != len(saved):
            raise ConfigError(
                f"the cluster in {self.data_dir} has {len(saved)} broker(s), not {self.brokers} "
                f"({running}); run 'logsource cluster stop --data-dir ...' first to change it"
            )
        zk_connect = state["zookeeper"]["connect"]
        procs: dict[int, tuple[subprocess.Popen, Path]] = {}
        try:
            for b in saved:
                if f"broker-{b['id']}" not in alive:
                    procs[b["id"]] = self._spawn_broker(b["id"], b["port"], zk_connect)
                    b["pid"] = procs[b["id"]][0].pid
            self._write_state(state)
            for bid, (proc, out) in procs.items():
                self._wait_listening(bid, proc, out)
            self._wait_registered(zk_connect, {b["id"] for b in saved})
        except BaseException:
            for proc, _ in procs.values():
                if proc.poll() is None:
                    proc.kill()
            raise
        self.started = [f"broker-{bid}" for bid in procs]
        self._wait_leaders(zk_connect, {b["id"] for b in saved})
        return state.get("bootstrap.servers") or ",".join(f"{self.host}:{b['port']}" for b in saved)

    def _spawn_broker(self, bid: int, port: int, zk_connect: str) -> tuple[subprocess.Popen, Path]:
        bdir = self.data_dir / f"broker-{bid}"
        bdir.mkdir(parents=True, exist_ok=True)
        props = dict(self.overrides)
        # brokers of one machine cannot share the metrics port a --config file may set: none unless overridden
        props.setdefault("metrics.listener", "")
        props.update(
            {
                "broker.id": str(bid),
                "zookeeper.connect": zk_connect,
                "listeners": f"PLAINTEXT://{self.host}:{port}",
                "log.dirs": str(bdir / "logs"),
            }
        )
        cmd = [sys.executable, "-m", "pyspark_logsource.broker"]
        if self.config_file:
            cmd += ["--config", self.config_file]
        for k, v in props.items():
            cmd += ["--override", f"{k}={v}"]
        out = bdir / "broker.out"
        env = {
            k: v for k, v in os.environ.items() if k != "LOGSOURCE_PARENT_PID"
        }  # a daemon: no parent watch
        with open(out, "wb") as stdout, open(bdir / "broker.log", "ab") as stderr:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=env,
                start_new_session=True,
                cwd=bdir,
            )
        return proc, out

    def _wait_listening(self, bid: int, proc: subprocess.Popen, out: Path) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                if _LISTENING in out.read_text(errors="replace"):
                    return
            except OSError:
                pass
            if proc.poll() is not None:
                raise NetworkError(
                    f"broker {bid} exited with status {proc.returncode}:\n{_tail(out.parent / 'broker.log')}"
                )
            if time.monotonic() > deadline:
                raise NetworkError(
                    f"broker {bid} did not start within {self.startup_timeout}s; see {out.parent / 'broker.log'}"
                )
            time.sleep(0.1)

    def _wait_registered(self, zk_connect: str, ids: set[int]) -> None:
        from kazoo.client import KazooClient
        from kazoo.exceptions import NoNodeError

        zk = KazooClient(zk_connect, timeout=10.0)
        zk.start(timeout=self.startup_timeout)
        try:
            deadline = time.monotonic() + self.startup_timeout
            while True:
                try:
                    live = {int(x) for x in zk.get_children("/brokers/ids")}
                    has_controller = zk.exists("/controller") is not None
                except NoNodeError:
                    live, has_controller = set(), False
                if ids <= live and has_controller:
                    return
                if time.monotonic() > deadline:
                    raise NetworkError(
                        f"brokers {sorted(ids - live)} did not register in ZooKeeper within {self.startup_timeout}s"
                    )
                time.sleep(0.1)
        finally:
            zk.stop()
            zk.close()

    def _wait_leaders(self, zk_connect: str, live: set[int]) -> None:
        """Wait until every partition in ``/brokers/topics`` has a live leader in its state znode."""
        from kazoo.client import KazooClient

        zk = KazooClient(zk_connect, timeout=10.0)
        zk.start(timeout=self.startup_timeout)
        try:
            deadline = time.monotonic() + self.startup_timeout
            while True:
                leaderless = _leaderless(zk, live)
                if not leaderless:
                    return
                if time.monotonic() > deadline:
                    shown = ", ".join(leaderless[:10]) + (
                        f" and {len(leaderless) - 10} more" if len(leaderless) > 10 else ""
                    )
                    raise LeaderNotAvailable(
                        f"the cluster in {self.data_dir} is running, but partition(s) {shown} have no leader "
                        f"after {self.startup_timeout:.0f}s (see the brokers' broker.log; 'logsource cluster stop' stops it)"
                    )
                time.sleep(0.1)
        finally:
            zk.stop()
            zk.close()

    # ------------------------------------------------------------ stop

    def stop(self, timeout: float = 30.0) -> list[str]:
        """Stop the brokers (SIGTERM: a clean shutdown), then ZooKeeper; SIGKILL what outlives ``timeout``.
        Returns the names of the processes that were running."""
        state = self.read_state()
        if not state:
            raise ConfigError(f"no cluster in {self.data_dir} ({self.state_file} is missing)")
        brokers = [(f"broker-{b['id']}", b.get("pid")) for b in state.get("brokers", [])]
        stopped = _terminate([(n, p) for n, p in brokers if _ours(p, _BROKER_MARK)], timeout)
        zk = state.get("zookeeper", {})
        if _ours(zk.get("pid"), _ZK_MARK):
            stopped += _terminate([("zookeeper", zk["pid"])], timeout)
        for b in state.get("brokers", []):
            b["pid"] = None
        zk["pid"] = None
        self._write_state(state)
        return stopped

    def status(self) -> list[tuple[str, int | None, int | None, bool]]:
        """(name, pid, port, alive) of each process of the saved cluster."""
        state = self.read_state()
        zk = state.get("zookeeper", {})
        rows = [("zookeeper", zk.get("pid"), zk.get("port"), _ours(zk.get("pid"), _ZK_MARK))]
        for b in state.get("brokers", []):
            rows.append((f"broker-{b['id']}", b.get("pid"), b.get("port"), _ours(b.get("pid"), _BROKER_MARK)))
        return rows


def _leaderless(zk: Any, live: set[int]) -> list[str]:
    """``topic-p`` of each partition whose state names no leader among ``live`` (or has no state yet);
    topics being deleted are left out."""
    from kazoo.exceptions import NoNodeError

    from . import paths

    out = []
    try:
        topics = zk.get_children(paths.BROKER_TOPICS)
    except NoNodeError:
        return out
    for topic in sorted(topics):
        if zk.exists(paths.delete_topic_path(topic)) is not None:
            continue
        try:
            parts = paths.decode_assignment(zk.get(paths.topic_path(topic))[0])
        except NoNodeError:  # deleted meanwhile
            continue
        for p in sorted(parts):
            try:
                leader = paths.decode_state(zk.get(paths.partition_state_path(topic, p))[0]).leader
            except NoNodeError:
                leader = -1
            if leader not in live:
                out.append(f"{topic}-{p}")
    return out


def _ours(pid: int | None, marker: str) -> bool:
    # a pid saved in cluster.json may have been reused by another program after a reboot
    if not pid or not pid_alive(pid):
        return False
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return True  # no /proc: trust the pid


def _terminate(procs: list[tuple[str, int]], timeout: float) -> list[str]:
    for _, pid in procs:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    for _, pid in procs:
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return [name for name, _ in procs]


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-2000:]
    except OSError:
        return ""


def build_parser() -> argparse.ArgumentParser:
    """``logsource cluster start|stop|status``."""
    p = argparse.ArgumentParser(
        prog="logsource cluster", description="A local cluster: ZooKeeper and N brokers on loopback."
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = sub.add_parser(
        "start",
        help="start ZooKeeper and N brokers in the background (of a running cluster: "
        "the brokers that are down); print bootstrap.servers",
    )
    s.add_argument(
        "--brokers",
        type=int,
        default=None,
        help="number of brokers (default: those of the cluster saved in --data-dir, else 3)",
    )
    s.add_argument(
        "--data-dir", required=True, help="where ZooKeeper, the brokers' logs and cluster.json live"
    )
    s.add_argument("--config", metavar="FILE", help="server.properties every broker starts from")
    s.add_argument(
        "--override",
        "-o",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="broker setting for every broker, e.g. min.insync.replicas=1 (repeatable)",
    )
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s = sub.add_parser("stop", help="stop the brokers (cleanly) and ZooKeeper; the data stays")
    s.add_argument("--data-dir", required=True)
    s.add_argument("--timeout", type=float, default=30.0, help="seconds before SIGKILL (default 30)")
    s = sub.add_parser("status", help="which processes of the cluster are running")
    s.add_argument("--data-dir", required=True)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``logsource cluster``."""
    args = build_parser().parse_args(argv)
    try:
        if args.action == "start":
            overrides = {}
            for item in args.override:
                k, sep, v = item.partition("=")
                if not sep or not k.strip():
                    raise ConfigError(f"expected key=value, got {item!r}")
                overrides[k.strip()] = v.strip()
            saved = len(LocalCluster(args.data_dir).read_state().get("brokers", []))
            brokers = args.brokers if args.brokers is not None else (saved or 3)
            c = LocalCluster(
                args.data_dir, brokers, host=args.host, config_file=args.config, overrides=overrides
            )
            bootstrap = c.start()
            state = c.read_state()
            if c.started[:1] == ["zookeeper"]:
                print(f"Started ZooKeeper and {brokers} broker(s) in {c.data_dir}.", file=sys.stderr)
            elif c.started:
                print(
                    f"Started {', '.join(c.started)} in {c.data_dir}; the other processes were running.",
                    file=sys.stderr,
                )
            else:
                print(f"The cluster in {c.data_dir} is running: nothing to start.", file=sys.stderr)
            print(f"zookeeper.connect={state['zookeeper']['connect']}")
            print(f"bootstrap.servers={bootstrap}", flush=True)
        elif args.action == "stop":
            c = LocalCluster(args.data_dir)
            stopped = c.stop(args.timeout)
            print(f"Stopped {', '.join(stopped) if stopped else 'nothing (no process was running)'}.")
        else:
            c = LocalCluster(args.data_dir)
            if not c.read_state():
                raise ConfigError(f"no cluster in {c.data_dir}")
            for name, pid, port, alive in c.status():
                print(f"{name}\tpid {pid if pid else '-'}\tport {port}\t{'running' if alive else 'stopped'}")
            print(f"bootstrap.servers={c.read_state().get('bootstrap.servers', '')}")
    except LogSourceError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0
