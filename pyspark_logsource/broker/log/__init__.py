"""The log store: segments with sparse indexes, partition logs, and the manager of them all.

A segment owns its file and indexes; a partition log owns its segments; the
log manager owns the logs and the background work (flush, retention, recovery).
"""

from .config import LogConfig
from .log import AppendInfo, PartitionLog
from .manager import LogManager
from .segment import FileRegion, LogSegment

__all__ = ["AppendInfo", "FileRegion", "LogConfig", "LogManager", "LogSegment", "PartitionLog"]
