"""The broker process: logging, signals (a second SIGTERM/SIGINT exits at once, a watchdog bounds the
shutdown), running a :class:`~.server.Broker` until it is stopped, and the ``logsource broker`` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import Any

from ..errors import DirectoryInUse, LogSourceError
from .config import BrokerConfig, parse_overrides
from .server import Broker
from .shutdown import EXIT_SHUTDOWN_FAILED, ShutdownGuard, exit_now

log = logging.getLogger("pyspark_logsource.broker")


def _setup_logging() -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(
            level=os.environ.get("LOGSOURCE_LOG_LEVEL", "INFO").upper(),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )


async def run(config: BrokerConfig, ready: Any = None, guard: ShutdownGuard | None = None) -> None:
    """Run a broker until SIGTERM/SIGINT (or until its ``stop()``); ``ready(broker)`` once bound.

    The first signal starts a clean shutdown bounded by ``logsource.shutdown.timeout.ms`` (``guard``, armed
    then; run() disarms a guard it made itself when the shutdown finished); a second one exits at once with
    status 128 + the signal's number."""
    own_guard = guard is None
    guard = guard or ShutdownGuard(config.shutdown_timeout_ms / 1000)
    broker = Broker(config)
    host, port = await broker.start()
    loop = asyncio.get_running_loop()
    stop_task: list[asyncio.Task] = []
    signals = (signal.SIGTERM, signal.SIGINT)

    def _force_exit(signum: int, frame: Any) -> None:
        status = 128 + signum
        log.error(
            "second %s during shutdown (still %s): exiting now with status %d",
            signal.Signals(signum).name,
            guard.waiting_for(),
            status,
        )
        exit_now(status)

    def _signal() -> None:
        if stop_task:
            return
        log.info("signal received, shutting down")
        guard.arm(broker)
        stop_task.append(loop.create_task(broker.stop()))
        # a plain handler from now on: it runs even while a shutdown step blocks the event loop
        for sig in signals:
            try:
                loop.remove_signal_handler(sig)
                signal.signal(sig, _force_exit)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread

    for sig in signals:
        try:
            loop.add_signal_handler(sig, _signal)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread
    parent = os.environ.get("LOGSOURCE_PARENT_PID", "")
    watchers = []  # referenced so the task is not garbage-collected
    if parent.isdigit():
        watchers.append(loop.create_task(_exit_with_parent(int(parent), _signal)))
    # the first listener's address first (what a parent process reads), then every listener's
    lines = [f"listening on {host}:{port}"]
    lines += [f"listener {n} on {h}:{p}" for n, (h, p) in broker.listener_addresses.items()]
    print("\n".join(lines), flush=True)
    if ready is not None:
        ready(broker)
    guard.broker = broker
    await broker.wait_stopped()
    log.info(
        "broker %d shut down%s",
        config.broker_id,
        f" with {len(broker.shutdown_errors)} error(s)" if broker.shutdown_errors else "",
    )
    if own_guard:
        guard.disarm()
    for w in watchers:
        w.cancel()


async def _exit_with_parent(pid: int, stop: Any) -> None:
    # set by EmbeddedBroker(mode="process"): once the parent is gone (we are re-parented),
    # shut down cleanly instead of living on as an orphan
    while os.getppid() == pid:
        await asyncio.sleep(1.0)
    log.warning("parent process %d is gone; shutting down", pid)
    stop()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the broker command."""
    ap = argparse.ArgumentParser(prog="logsource broker", description="Run a pyspark-logsource broker.")
    ap.add_argument("--config", "-c", metavar="FILE", help="server.properties file (Kafka spelling)")
    ap.add_argument(
        "--override",
        "-o",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override a setting, e.g. --override listeners=PLAINTEXT://127.0.0.1:0 (repeatable)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    """``logsource broker --config FILE --override k=v ...``; returns the exit status."""
    args = build_parser().parse_args(argv)
    _setup_logging()
    try:
        config = BrokerConfig.load(args.config, parse_overrides(args.override))
    except LogSourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    guard = ShutdownGuard(config.shutdown_timeout_ms / 1000)  # never disarmed: it bounds the exit too
    try:
        asyncio.run(run(config, guard=guard))
    except KeyboardInterrupt:
        pass
    except DirectoryInUse as e:
        print(f"error: {e}", file=sys.stderr, flush=True)  # the one line a user needs, no log decoration
        return 1
    except LogSourceError as e:
        log.error("broker failed: %s", e)
        return 1
    except OSError as e:
        log.error("broker failed: %s", e)
        return 1
    if guard.broker is not None and guard.broker.shutdown_errors:
        return EXIT_SHUTDOWN_FAILED
    return 0


__all__ = ["main", "run"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
