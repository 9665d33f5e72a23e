"""The broker's event counters and request-time histograms, and their Prometheus names.

The counters are plain ints and lists updated on the broker's event loop, once per request or per
partition of a request (never per record: a produce's record count is summed from its batch headers).
Nothing locks: the loop is the only writer, and the scrape (:mod:`.http`) runs on the same loop. At
scrape time :class:`RequestCollector` turns them into metric families of ``prometheus_client``.

The names follow what Prometheus' JMX exporter makes of Kafka's MBeans with the rules Kafka deployments
use (``kafka.<domain><type=T, name=N, ...>`` -> ``kafka_<domain>_<t>_<n>``, lower case, ``PerSec``
dropped and ``_total`` added to counters); the README's "Metrics" section lists the mapping.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any

import numpy as np
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from ...protocol import ApiKey

_FETCH = int(ApiKey.FETCH)

#: request time buckets, in ms (Kafka's request metrics are in ms: ``TotalTimeMs`` ...)
TIME_BUCKETS_MS: tuple[float, ...] = (
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1000.0,
    2500.0,
    5000.0,
    10000.0,
)

#: the split of a request's time, as Kafka's RequestMetrics: waiting behind the connection's earlier
#: requests of the same read, in the handler, parked (a long-poll fetch, an acks=all produce), and all of it
REQUEST_TIMES = ("requestqueuetimems", "localtimems", "remotetimems", "totaltimems")


def request_name(api_key: int) -> str:
    """Kafka's name of an API (``Produce``, ``FetchConsumer`` ... as the ``request`` label)."""
    try:
        return "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


_BOUNDS = np.array(TIME_BUCKETS_MS)
#: requests whose times wait in a list before they are put in buckets (with numpy, all at once)
FOLD_EVERY = 4096


class _Histogram:
    """Cumulative-on-export bucket counts of one series."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = np.zeros(len(TIME_BUCKETS_MS) + 1, dtype=np.int64)
        self.total = 0.0

    def observe_all(self, ms: np.ndarray, weights: np.ndarray) -> None:
        """Observe each of ``ms`` ``weights`` times."""
        # bucket i holds bound[i-1] < v <= bound[i], as Prometheus' le
        idx = np.searchsorted(_BOUNDS, ms, side="left")
        self.counts += np.bincount(idx, weights=weights, minlength=len(self.counts)).astype(np.int64)
        self.total += float((ms * weights).sum())

    def buckets(self) -> list[tuple[str, int]]:
        out, acc = [], 0
        for bound, n in zip((*map(str, TIME_BUCKETS_MS), "+Inf"), self.counts.tolist(), strict=True):
            acc += n
            out.append((bound, acc))
        return out


class _RequestStats:
    """One API's request count and time histograms. Requests are appended to ``pending`` as
    ``(queued, local, remote, count)``: one tuple per request, or per run of pipelined produces answered
    together with the same times (the per-request cost), and put in the buckets every
    :data:`FOLD_EVERY` tuples or at a scrape."""

    __slots__ = ("folded", "times", "pending")

    def __init__(self) -> None:
        self.folded = 0
        self.times = tuple(_Histogram() for _ in REQUEST_TIMES)
        self.pending: list[tuple[float, float, float, int]] = []

    def fold(self) -> None:
        if not self.pending:
            return
        n = len(self.pending)
        # fromiter over the flattened tuples: half of np.array(list of tuples)'s time
        flat = np.fromiter(chain.from_iterable(self.pending), dtype=np.float64, count=4 * n).reshape(n, 4)
        self.pending = []
        ms, weights = flat[:, :3] * 1000.0, flat[:, 3]
        self.folded += int(weights.sum())
        q, lo, re, tot = self.times
        q.observe_all(ms[:, 0], weights)
        lo.observe_all(ms[:, 1], weights)
        re.observe_all(ms[:, 2], weights)
        tot.observe_all(ms.sum(axis=1), weights)


class BrokerTopicStats:
    """Kafka's ``BrokerTopicStats`` counters of what comes in: the messages and bytes the produce path appended per topic,
    counted from its append results (no header walk of its own: the count is free there) once per request
    or per run of pipelined requests. Duplicates (an idempotent retry) and refused batches are not
    appended, so not counted; replicas' appends are not produce requests."""

    __slots__ = ("topics_in",)

    def __init__(self) -> None:
        #: topic -> [messages in, bytes in]
        self.topics_in: dict[str, list[int]] = {}

    def appended(self, topic: str, messages: int, size: int) -> None:
        """``messages`` records in ``size`` bytes appended to ``topic`` by produce requests."""
        t = self.topics_in.get(topic)
        if t is None:
            t = self.topics_in[topic] = [0, 0]
        t[0] += messages
        t[1] += size


class BrokerMetrics:
    """What the broker's network layer counts: requests and their times per API, errors, bytes and
    messages in and out per topic. Updated on the event loop only."""

    def __init__(self) -> None:
        #: request label -> stats (Fetch split into FetchConsumer and FetchFollower, as Kafka)
        self.requests: dict[str, _RequestStats] = {}
        #: (request label, error name) -> count of requests answered with that error
        self.errors: dict[tuple[str, str], int] = {}
        #: what the produce path appended, per topic (it counts into it; the scrape reads it)
        self.topic_stats = BrokerTopicStats()
        #: topic -> [messages in, bytes in]
        self.topics_in = self.topic_stats.topics_in
        #: topic -> bytes out to consumers
        self.topics_out: dict[str, int] = {}
        #: bytes out to followers (Kafka's ReplicationBytesOutPerSec)
        self.replication_bytes_out = 0
        self._names = {int(k): request_name(k) for k in ApiKey}
        self._names[_FETCH] = "FetchConsumer"

    def request_label(self, api_key: int, request: Any) -> str:
        if api_key == _FETCH and request.replica_id >= 0:
            return "FetchFollower"
        name = self._names.get(api_key)
        return name if name is not None else request_name(api_key)

    def record(self, label: str, queued_s: float, local_s: float, remote_s: float) -> None:
        """One request answered: its times in seconds (the total is their sum)."""
        st = self.requests.get(label)
        if st is None:
            st = self.requests[label] = _RequestStats()
        pending = st.pending
        pending.append((queued_s, local_s, remote_s, 1))
        if len(pending) >= FOLD_EVERY:
            st.fold()

    def record_run(self, label: str, queued_s: float, local_s: float, count: int) -> None:
        """``count`` requests answered together with the same times (a run of pipelined produces)."""
        st = self.requests.get(label)
        if st is None:
            st = self.requests[label] = _RequestStats()
        pending = st.pending
        pending.append((queued_s, local_s, 0.0, count))
        if len(pending) >= FOLD_EVERY:
            st.fold()

    def error(self, label: str, error: str) -> None:
        key = (label, error)
        self.errors[key] = self.errors.get(key, 0) + 1

    def fetched(self, label: str, response: Any) -> None:
        """A fetch answer's record bytes, per topic (a file region counts its length)."""
        n_total = 0
        out = self.topics_out
        for p in response.partitions:
            records = p.records
            if records is None:
                continue
            n = getattr(records, "length", None)
            if n is None:
                n = len(records)
            if label == "FetchFollower":
                n_total += n
            elif n:
                out[p.topic] = out.get(p.topic, 0) + n
        self.replication_bytes_out += n_total


class RequestCollector(Collector):
    """Exports :class:`BrokerMetrics` as metric families at scrape time."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.m = metrics

    def collect(self) -> Iterator[Any]:
        m = self.m
        reqs = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests answered, per API", labels=["request"]
        )
        hists = [
            HistogramMetricFamily(
                f"kafka_network_requestmetrics_{n}", f"Request {n[:-6]} time in ms", labels=["request"]
            )
            for n in REQUEST_TIMES
        ]
        for label, st in sorted(m.requests.items()):
            st.fold()
            reqs.add_metric([label], st.folded)
            for fam, h in zip(hists, st.times, strict=True):
                fam.add_metric([label], h.buckets(), h.total)
        yield reqs
        yield from hists
        errs = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Requests answered with an error, per API and error",
            labels=["request", "error"],
        )
        for (label, error), n in sorted(m.errors.items()):
            errs.add_metric([label, error], n)
        yield errs
        msgs = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_messagesin", "Messages received, per topic", labels=["topic"]
        )
        bytes_in = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesin",
            "Bytes received from producers, per topic",
            labels=["topic"],
        )
        bytes_out = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesout", "Bytes sent to consumers, per topic", labels=["topic"]
        )
        for topic, (n, b) in sorted(m.topics_in.items()):
            msgs.add_metric([topic], n)
            bytes_in.add_metric([topic], b)
        for topic, b in sorted(m.topics_out.items()):
            bytes_out.add_metric([topic], b)
        yield msgs
        yield bytes_in
        yield bytes_out
        yield CounterMetricFamily(
            "kafka_server_brokertopicmetrics_replicationbytesout",
            "Bytes sent to followers",
            value=m.replication_bytes_out,
        )
