"""DeleteRecords (21) and DescribeLogDirs (35): the admin APIs that act on partition logs.

DeleteRecords moves a partition's log start offset (:meth:`~..log.log.PartitionLog.delete_records_before`
owns the move, its checkpoint and the segment deletes). It is answered once the leader's log has the
new start durably and, in a cluster, once every in-sync replica reported it in its next fetch (Kafka's
DelayedDeleteRecords waits for the low watermark the same way): a leader elected after a failover
then has it too. DescribeLogDirs lists each log dir's partitions with their sizes and lags.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import InvalidTopic, LogSourceError, OffsetOutOfRange, StorageError, UnknownTopicOrPartition
from ...protocol import ApiKey
from ...protocol import records_admin_messages as ra
from ...topics import is_internal
from ..error_responses import error_fields
from ..session import Session
from ..state import topic_error

if TYPE_CHECKING:
    from ..state import BrokerState

log = logging.getLogger(__name__)


class RecordsAdminHandlers:
    """DeleteRecords and DescribeLogDirs of one broker."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {ApiKey.DELETE_RECORDS: self.delete_records, ApiKey.DESCRIBE_LOG_DIRS: self.describe_log_dirs}

    # ------------------------------------------------------------ DeleteRecords

    def _checked(self, p: ra.DeleteRecordsPartition) -> tuple[Any, int]:
        """The partition's log (this broker leads it) and the offset its start is to move to."""
        if is_internal(p.topic):
            raise InvalidTopic(f"cannot delete records of internal topic {p.topic!r}")
        self.state.check_leader(p.topic, p.partition)
        try:
            lg = self.state.logs.get_log(p.topic, p.partition)
        except UnknownTopicOrPartition:
            raise topic_error(p.topic) from None
        hw = self.state.high_watermark(p.topic, p.partition, lg)
        offset = hw if p.offset == ra.HIGH_WATERMARK else p.offset
        if offset < 0:
            raise OffsetOutOfRange(f"{p.topic}-{p.partition}: cannot delete records before offset {p.offset}")
        return lg, offset

    async def delete_records(
        self, req: ra.DeleteRecordsRequest, session: Session
    ) -> ra.DeleteRecordsResponse:
        """Per partition: the new log start offset (``low_watermark``) or an error: OFFSET_OUT_OF_RANGE beyond
        the high watermark, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER; in a cluster
        REQUEST_TIMED_OUT if the ISR does not have the new start within ``timeout_ms``."""
        out = []
        waits = []
        for p in req.partitions:
            r = ra.DeleteRecordsPartitionResult(p.topic, p.partition)
            try:
                lg, offset = self._checked(p)
                # on a worker thread: the flush and the checkpoint's fsyncs take milliseconds, and
                # this event loop serves every other client meanwhile
                r.low_watermark = await asyncio.get_running_loop().run_in_executor(
                    None, lg.delete_records_before, offset
                )
                if self.state.replication is not None:
                    waits.append((r, p))
            except LogSourceError as e:
                r.error_code = error_fields(e).code
                log.debug("delete records of %s-%d failed: %s", p.topic, p.partition, e)
            out.append(r)
        repl = self.state.replication
        if waits:
            results = await asyncio.gather(
                *(
                    repl.wait_for_log_start(p.topic, p.partition, r.low_watermark, req.timeout_ms)
                    for r, p in waits
                ),
                return_exceptions=True,
            )
            for (r, _), res in zip(waits, results, strict=True):
                if isinstance(res, BaseException):
                    r.error_code, r.low_watermark = error_fields(res).code, -1
        return ra.DeleteRecordsResponse(out)

    # ------------------------------------------------------------ DescribeLogDirs

    def describe_log_dirs(
        self, req: ra.DescribeLogDirsRequest, session: Session
    ) -> ra.DescribeLogDirsResponse:
        """Every log dir of this broker with the replicas it holds (those asked for; all with ``topics`` null):
        size in bytes, offset lag (0 on a leader; a follower's distance to its leader's high watermark, as
        far as its last fetch told it) and, in v4+, the file system's total and usable bytes."""
        logs = self.state.logs
        wanted = None if req.topics is None else {(t, p) for t, ps in req.topics.items() for p in ps}
        by_dir: dict[str, list[ra.LogDirPartition]] = {str(d): [] for d in logs.log_dirs}
        for lg in logs.logs():
            key = (lg.topic, lg.partition)
            if wanted is not None and key not in wanted:
                continue
            d = str(lg.directory.parent)
            by_dir.setdefault(d, []).append(
                ra.LogDirPartition(lg.topic, lg.partition, lg.size_bytes, self._offset_lag(lg))
            )
        results = []
        for d, parts in by_dir.items():
            try:
                usage = shutil.disk_usage(d)
                total, usable = usage.total, usage.free
                code = 0
            except OSError as e:
                log.warning("log dir %s: %s", d, e)
                total = usable = -1
                code = StorageError.code  # KAFKA_STORAGE_ERROR
            parts.sort(key=lambda x: (x.topic, x.partition))
            results.append(ra.LogDirResult(os.path.abspath(d), code, parts, total, usable))
        return ra.DescribeLogDirsResponse(results)

    def _offset_lag(self, lg: Any) -> int:
        repl = self.state.replication
        if repl is None:
            return 0
        return repl.offset_lag(lg.topic, lg.partition, lg)
