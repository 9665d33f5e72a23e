"""The flush rule of a partition log, and its recovery point (the offset below which all is fsynced).

Kafka's rule: a log is flushed when ``flush.messages`` records are unflushed,
or when ``flush.ms`` passed since its last flush, the latter only when no
background thread flushes by time (``scheduled``: a LogManager with its flush
thread sets it). :class:`FlushState` is the rule's one definition. It keeps it
as two thresholds, ``due_offset`` and ``due_ms``, recomputed whenever their
inputs change (the recovery point, the last flush time, ``scheduled``), so that
the produce path tests it with two comparisons and no call:
``log_end >= due_offset or now_ms >= due_ms`` (what :meth:`FlushState.due` does).

The recovery point is saved in the file ``recovery-point`` at each flush; on
open, :mod:`.loader` trusts the segments below it and CRC-scans the rest.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .config import LogConfig

RECOVERY_POINT_FILE = "recovery-point"
#: a threshold that is never reached (flush.ms with a background flush thread)
_NEVER = 1 << 64


class FlushState:
    """The recovery point, the last flush time, and when the next flush is due (used under the log's lock)."""

    __slots__ = (
        "recovery_point",
        "last_flush_ms",
        "scheduled",
        "due_offset",
        "due_ms",
        "_messages",
        "_ms",
        "_told",
    )

    def __init__(self, config: LogConfig, recovery_point: int, last_flush_ms: int) -> None:
        self._messages = config.flush_messages
        self._ms = config.flush_ms
        #: every offset below it is fsynced
        self.recovery_point = recovery_point
        #: wall-clock ms of the last flush (or of opening)
        self.last_flush_ms = last_flush_ms
        #: a background thread flushes by flush.ms: appends leave time-based flushes to it
        self.scheduled = False
        self.due_offset = self.due_ms = 0
        self._told: Callable[[int, int], None] | None = None
        self._rearm()

    def tell_due(self, told: Callable[[int, int], None]) -> None:
        """Call ``told(due_offset, due_ms)`` now and whenever the thresholds change (the log's append end
        tests them per append)."""
        self._told = told
        told(self.due_offset, self.due_ms)

    def _rearm(self) -> None:
        # the rule: flush once flush.messages records are unflushed, or flush.ms after the last flush
        # when no background thread does that
        self.due_offset = self.recovery_point + self._messages
        self.due_ms = _NEVER if self.scheduled else self.last_flush_ms + self._ms
        if self._told is not None:
            self._told(self.due_offset, self.due_ms)

    def due(self, log_end: int, now_ms: int) -> bool:
        """Whether the rule asks for a flush now, with the log ending at ``log_end``."""
        return log_end >= self.due_offset or now_ms >= self.due_ms

    def time_due(self, log_end: int, now_ms: int) -> bool:
        """The background thread's half of the rule: records are unflushed and ``flush.ms`` has passed."""
        return log_end > self.recovery_point and now_ms >= self.last_flush_ms + self._ms

    def set_scheduled(self, scheduled: bool) -> None:
        """Whether a background thread does the time-based flushes."""
        self.scheduled = bool(scheduled)
        self._rearm()

    def set_config(self, config: LogConfig) -> None:
        """A dynamic config change: the rule uses the new flush.messages and flush.ms from now on."""
        self._messages = config.flush_messages
        self._ms = config.flush_ms
        self._rearm()

    def set_recovery_point(self, offset: int) -> None:
        """The recovery point moved (a roll fsynced a segment, a truncation cut below it)."""
        self.recovery_point = offset
        self._rearm()

    def flushed(self, up_to: int, now_ms: int) -> bool:
        """A flush of the offsets below ``up_to`` ended at ``now_ms``; True when the recovery point advanced."""
        advanced = up_to > self.recovery_point
        if advanced:
            self.recovery_point = up_to
        self.last_flush_ms = now_ms
        self._rearm()
        return advanced


def read_recovery_point(directory: Path) -> int:
    """The saved recovery point; 0 when there is none or it is unreadable."""
    path = Path(directory) / RECOVERY_POINT_FILE
    if not path.exists():
        return 0
    try:
        return int(path.read_text().strip())
    except ValueError:
        return 0


def write_recovery_point(directory: Path, value: int, tmp_suffix: str = ".tmp") -> None:
    """Save ``value`` durably (written aside, fsynced, renamed over the old file)."""
    path = Path(directory) / RECOVERY_POINT_FILE
    tmp = path.with_name(path.name + tmp_suffix)
    with open(tmp, "w") as f:
        f.write(f"{value}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
