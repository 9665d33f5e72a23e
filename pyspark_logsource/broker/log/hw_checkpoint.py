"""The high-watermark checkpoint of a log dir: ``replication-offset-checkpoint`` (Kafka's name and format).

Entries are ``topic partition high_watermark``, one per replicated partition
in the dir. A broker writes it every ``replica.high.watermark.checkpoint.interval.ms``
and at shutdown, and reads it back at start: a replica then begins with the
high watermark it last knew instead of 0. It is only a lower bound (the
leader's high watermark may be ahead): a missing or malformed file is safe to
ignore, the leader tells each follower its high watermark with every fetch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from .checkpoint import CorruptCheckpoint, read_checkpoint, write_checkpoint

log = logging.getLogger(__name__)

HW_CHECKPOINT_FILE = "replication-offset-checkpoint"


def read_high_watermarks(log_dir: Path) -> dict[tuple[str, int], int]:
    """``(topic, partition) -> high watermark`` from the log dir's checkpoint; empty if missing or malformed."""
    path = Path(log_dir) / HW_CHECKPOINT_FILE
    try:
        entries = read_checkpoint(path, 3) or []
        out = {(t, int(p)): int(hw) for t, p, hw in entries}
    except (CorruptCheckpoint, ValueError) as e:
        log.warning(
            "%s is unreadable (%s): replicas there start from high watermark 0 and learn it from "
            "their leader",
            path,
            e,
        )
        return {}
    return {k: hw for k, hw in out.items() if k[1] >= 0 and hw >= 0}


def write_high_watermarks(log_dir: Path, hws: Mapping[tuple[str, int], int]) -> None:
    """Replace the log dir's checkpoint with ``hws``, durably."""
    write_checkpoint(Path(log_dir) / HW_CHECKPOINT_FILE, [(t, p, hw) for (t, p), hw in sorted(hws.items())])
