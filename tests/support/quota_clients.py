"""Clients for the quota tests: a confluent-kafka producer writing as fast as it can, and rates of what it
got acknowledged."""

from __future__ import annotations

import json
import threading
import time

from confluent_kafka import Producer as CkProducer


def rate(events: list[tuple[float, int]], t0: float, a: float, b: float) -> float:
    """Bytes per second of the events in [t0 + a, t0 + b)."""
    return sum(n for t, n in events if a <= t - t0 < b) / (b - a)


class Producing:
    """A confluent-kafka producer writing 1 KB messages as fast as it can, on a thread."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, extra: dict | None = None) -> None:
        self.acked: list[tuple[float, int]] = []
        self.throttle_cb: list[float] = []
        self.stats_throttle: list[int] = []
        self.stop = threading.Event()
        self.p = CkProducer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "linger.ms": 5,
                "batch.size": 65536,
                "queue.buffering.max.kbytes": 4096,
                "statistics.interval.ms": 500,
                "stats_cb": self._stats,
                "throttle_cb": lambda ev: self.throttle_cb.append(ev.throttle_time),
                **(extra or {}),
            }
        )
        self.topic = topic
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _stats(self, raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            if b.get("throttle", {}).get("max", 0) > 0:
                self.stats_throttle.append(b["throttle"]["max"])

    def _cb(self, err, msg) -> None:
        if err is None:
            self.acked.append((time.monotonic(), len(msg.value())))

    def _run(self) -> None:
        payload = b"x" * 1000
        while not self.stop.is_set():
            try:
                self.p.produce(self.topic, payload, on_delivery=self._cb)
            except BufferError:
                self.p.poll(0.01)
            self.p.poll(0)
        self.p.purge()
        self.p.flush(5)
        self.p = None  # destroyed now (its callbacks hold self): no reconnects after the broker stops

    def start(self) -> Producing:
        self.t0 = time.monotonic()
        self.thread.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(30)
