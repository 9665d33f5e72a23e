"""Kafka's sampled statistics for quotas: a rate over ``samples`` windows of ``window_s`` seconds.

This is Kafka's ``SampledStat``/``Rate`` (org.apache.kafka.common.metrics.stats) as the
``ClientQuotaManager`` uses it since KIP-219: values go into the current sample; a sample is
complete after ``window_s`` and the next one starts (the ring reuses the oldest); samples older than
``samples * window_s`` are reset before a measurement; the rate is the samples' sum over the elapsed
time since the oldest sample started, but never over less than ``min_windows`` full windows.

Kafka's ``min_windows`` is ``samples - 1``: a new or idle group may then send a whole window's worth
(10 s of its quota) at once, and, while it keeps trying, again each time that burst's sample expires:
at 1 MB/s a producer writes ~11 MB in the first second of every 11, nothing in between. Enforcement
here uses 0 (:mod:`.manager`): the rate is over the time actually measured, so a group is paced at its
quota second by second; the measurement (11 samples of 1 s, expiry, window) is otherwise Kafka's.

:func:`throttle_ms` is Kafka's ``QuotaUtils.throttleTime``: how long the group must send nothing
for its rate to come back to the quota.
"""

from __future__ import annotations


class SampledStat:
    """Samples of (start, sum, count); times in seconds (any monotonic clock)."""

    __slots__ = (
        "window_s",
        "samples",
        "min_windows",
        "_starts",
        "_sums",
        "_counts",
        "_current",
        "last_record",
    )

    def __init__(self, window_s: float, samples: int, now: float, min_windows: int | None = None) -> None:
        self.window_s = window_s
        self.samples = samples
        #: the rate divides by at least this many windows (Kafka: samples - 1)
        self.min_windows = samples - 1 if min_windows is None else min_windows
        self._starts = [now]
        self._sums = [0.0]
        self._counts = [0]
        self._current = 0
        #: when a value was last recorded (idle sensors expire)
        self.last_record = now

    def record(self, value: float, now: float) -> None:
        """Add ``value`` to the current sample (starting the next one if the current is complete)."""
        i = self._current
        if now >= self._starts[i] + self.window_s:
            i = (i + 1) % self.samples
            if i >= len(self._starts):
                self._starts.append(now)
                self._sums.append(0.0)
                self._counts.append(0)
            else:
                self._starts[i], self._sums[i], self._counts[i] = now, 0.0, 0
            self._current = i
        self._sums[i] += value
        self._counts[i] += 1
        self.last_record = now

    def _purge(self, now: float) -> None:
        """Reset the samples older than the whole window (Kafka's purgeObsoleteSamples)."""
        expire = self.samples * self.window_s
        starts = self._starts
        for i in range(len(starts)):
            if now - starts[i] >= expire:
                starts[i], self._sums[i], self._counts[i] = now, 0.0, 0

    def total(self, now: float) -> float:
        """The sum of the live samples."""
        self._purge(now)
        return sum(self._sums)

    def average(self, now: float) -> float:
        """The mean of the values recorded in the live samples (0 if none)."""
        self._purge(now)
        n = sum(self._counts)
        return sum(self._sums) / n if n else 0.0

    def window_size(self, now: float) -> float:
        """The time the rate divides by (Kafka's ``Rate.windowSize``): since the oldest sample started,
        and at least ``samples - 1`` full windows."""
        self._purge(now)
        elapsed = now - min(self._starts)
        full = int(elapsed / self.window_s)
        if full < self.min_windows:
            elapsed += (self.min_windows - full) * self.window_s
        return elapsed

    def rate(self, now: float) -> float:
        """Per second, over :meth:`window_size` (Kafka's ``Rate.measure``)."""
        window = self.window_size(now)
        return self.total(now) / window if window > 0 else 0.0


def throttle_ms(total: float, window_s: float, quota: float) -> float:
    """Kafka's ``QuotaUtils.throttleTime``, (observed - quota) / quota x window, in ms (0 if within).

    With observed = total / window this is (total - quota x window) / quota: the time the group must
    send nothing for ``total`` to be what the quota allows; written so, a window of 0 needs no division.
    """
    excess = total - quota * window_s
    if excess <= 0:
        return 0.0
    if quota <= 0:
        return float("inf")
    return excess / quota * 1000.0
