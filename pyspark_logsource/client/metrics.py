"""A client's metrics, as Kafka's clients name them (``record-send-total``, ``request-latency-avg`` ...).

The counters move once per response (latency, throttle), per produced batch or per fetch answer (records
and bytes), never per record; :meth:`ClientMetrics.snapshot` turns them into the dict that
``Producer.metrics()`` and ``Consumer.metrics()`` return. Several I/O threads update them: one small lock.
"""

from __future__ import annotations

import threading
from typing import Any


class ClientMetrics:
    """Counters of one producer or consumer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records = 0
        self.bytes = 0
        self.responses = 0
        self.latency_sum = 0.0
        self.latency_max = 0.0
        self.throttled = 0
        self.throttle_sum = 0
        self.throttle_max = 0

    def response(self, latency_s: float, response: Any) -> None:
        """One answer arrived ``latency_s`` after its request was written (any API)."""
        self.responses_after([latency_s], [response])

    def responses_after(self, latencies: list[float], responses: list[Any]) -> None:
        """``response(latency, response)`` for each pair of the two lists, in order, under one lock."""
        with self._lock:
            for latency_s, response in zip(latencies, responses, strict=True):
                throttle = getattr(response, "throttle_time_ms", 0) or 0
                self.responses += 1
                self.latency_sum += latency_s
                if latency_s > self.latency_max:
                    self.latency_max = latency_s
                self.throttled += 1
                self.throttle_sum += throttle
                if throttle > self.throttle_max:
                    self.throttle_max = throttle

    def add_responses(
        self, n: int, latency_sum: float, latency_max: float, throttle_sum: int, throttle_max: int
    ) -> None:
        """:meth:`responses_after` of ``n`` answers given by their sums and maxima (the I/O thread's run)."""
        with self._lock:
            self.responses += n
            self.latency_sum += latency_sum
            if latency_max > self.latency_max:
                self.latency_max = latency_max
            self.throttled += n
            self.throttle_sum += throttle_sum
            if throttle_max > self.throttle_max:
                self.throttle_max = throttle_max

    def add(self, records: int, nbytes: int) -> None:
        """Records and bytes sent (a batch acknowledged) or received (a fetch answer, a poll)."""
        with self._lock:
            self.records += records
            self.bytes += nbytes

    def add_records(self, records: int) -> None:
        with self._lock:
            self.records += records

    def add_bytes(self, nbytes: int) -> None:
        with self._lock:
            self.bytes += nbytes

    def snapshot(self, records_key: str, bytes_key: str, throttle_prefix: str) -> dict[str, float]:
        """The counters under Kafka's names; latencies in ms, as Kafka's."""
        with self._lock:
            n = self.responses
            return {
                records_key: self.records,
                bytes_key: self.bytes,
                "request-total": n,
                "request-latency-avg": self.latency_sum / n * 1000 if n else 0.0,
                "request-latency-max": self.latency_max * 1000,
                f"{throttle_prefix}-throttle-time-avg": self.throttle_sum / self.throttled
                if self.throttled
                else 0.0,
                f"{throttle_prefix}-throttle-time-max": float(self.throttle_max),
            }
