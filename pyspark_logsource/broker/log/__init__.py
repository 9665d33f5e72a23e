"""The log store: segments with sparse indexes, partition logs, and the manager of them all.

A segment owns its file and indexes; a partition log (:mod:`.log`) is built
from parts that each own their state: recovery (:mod:`.loader`), the segment
list (:mod:`.segment_list`: view, roll, retention, swap, truncation), the
checks and stamping of an append and its answer (:mod:`.append`), the flush
rule and recovery point (:mod:`.flush`); it holds the log end and the high
watermark. The log manager owns the logs and the background work (flush,
retention, recovery).
"""

from .config import LogConfig
from .log import AppendInfo, PartitionLog
from .manager import LogManager
from .segment import FileRegion, LogSegment

__all__ = ["AppendInfo", "FileRegion", "LogConfig", "LogManager", "LogSegment", "PartitionLog"]
