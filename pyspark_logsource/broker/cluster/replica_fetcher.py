"""The replica fetcher: one per leader broker, pulling every partition this broker follows from it.

It is an asyncio task on the broker's event loop speaking the normal protocol
through the sans-IO :class:`~...protocol.connection.ClientConnection` over
asyncio streams, as Kafka's ReplicaFetcherThread speaks Fetch: a
FetchRequest with ``replica_id`` set to this broker's id, one partition entry
per followed partition at its log end offset, with the leader epoch it
believes current and (Fetch v12) the epoch of its last record. The leader
answers with its batches as stored, which :meth:`~..log.log.PartitionLog.append_as_follower`
writes unchanged, and its high watermark, which the follower adopts; or,
when the follower's log diverges from its own, with the diverging epoch and
its end offset, where the follower truncates (KIP-101/279: a returning
follower truncates to the leader's end of its epoch, never to its own high
watermark). Errors back off ``replica.fetch.backoff.ms``; a role change
removes a partition (the fetcher stops when it has none left).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ...client.security import sasl_steps
from ...errors import (
    CorruptRecord,
    InvalidRecord,
    LeaderNotAvailable,
    LogSourceError,
    OffsetOutOfRange,
    UnknownTopicOrPartition,
    error_for_code,
)
from ...protocol import ApiKey, ApiVersionsRequest, FetchPartition, FetchRequest
from ...protocol.connection import ClientConnection
from ...protocol.primitives import ProtocolError
from ..tasks import spawn
from .partition import ReplicationSettings, follow_high_watermark

if TYPE_CHECKING:
    from ..log.log import PartitionLog
    from ..state import PartitionRole

log = logging.getLogger(__name__)

#: Fetch v12 carries last_fetched_epoch and diverging_epoch
REPLICA_FETCH_VERSION = 12


class Logs(Protocol):
    """What a fetcher uses of the log manager."""

    def get_log(self, topic: str, partition: int) -> PartitionLog:
        """The partition's log; UnknownTopicOrPartition if this broker has none."""


class ReplicaFetcher:
    """Fetches the partitions this broker follows from the leader ``leader_id`` at ``host:port``.

    ``logs`` are this broker's logs; ``address_of(broker_id)`` is a broker's registered (host, port), or None.
    """

    def __init__(
        self,
        settings: ReplicationSettings,
        loop: asyncio.AbstractEventLoop,
        logs: Logs,
        address_of: Callable[[int], tuple[str, int] | None],
        leader_id: int,
        host: str,
        port: int,
    ) -> None:
        self.settings = settings
        self.loop = loop
        self.logs = logs
        self.address_of = address_of
        self.leader_id = leader_id
        self.address = (host, port)
        self.partitions: dict[tuple[str, int], PartitionRole] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._conn: ClientConnection | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._failed: dict[tuple[str, int], str] = {}  # last error per partition, logged once
        #: the leader's high watermark per partition as its last answer said (DescribeLogDirs' offset lag)
        self.leader_hw: dict[tuple[str, int], int] = {}

    def __repr__(self) -> str:
        return f"ReplicaFetcher(broker {self.settings.broker_id} <- {self.leader_id} at {self.address})"

    # ------------------------------------------------------------ control (event loop thread)

    def start(self) -> None:
        self._task = spawn(self._run(), name=f"replica-fetcher-{self.leader_id}", loop=self.loop)

    def stop(self) -> None:
        """Cancel the task and close the connection."""
        if self._task is not None:
            self._task.cancel()
        self._close()

    def add_partition(self, role: PartitionRole) -> None:
        """Fetch ``role``'s partition (or update its epoch)."""
        self.partitions[(role.topic, role.partition)] = role
        self._wake.set()

    def remove_partition(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)
        self.leader_hw.pop(key, None)
        self._failed.pop(key, None)

    def set_address(self, host: str, port: int) -> None:
        """The leader registered again elsewhere (a restart): reconnect there."""
        if port > 0 and (host, port) != self.address:
            self.address = (host, port)
            self._close()

    def _leader_address(self) -> tuple[str, int]:
        # the registry's current view (the leader may have restarted elsewhere), else the hint given
        found = self.address_of(self.leader_id)
        if found is not None and found[1] > 0:
            self.address = found
        if self.address[1] <= 0:
            raise LeaderNotAvailable(f"broker {self.leader_id} (the leader) is not registered")
        return self.address

    # ------------------------------------------------------------ the loop

    async def _run(self) -> None:
        backoff = self.settings.fetch_backoff_ms / 1000
        while True:
            try:
                if not self.partitions:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                if self._conn is None:
                    await self._connect()
                if not await self._fetch_once():
                    await asyncio.sleep(backoff)
            except asyncio.CancelledError:
                self._close()
                raise
            except (OSError, ProtocolError, asyncio.TimeoutError, EOFError, LogSourceError) as e:
                log.info("%r: %s: %s; retrying in %.0f ms", self, type(e).__name__, e, backoff * 1000)
                self._close()
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("%r failed; retrying", self)
                self._close()
                await asyncio.sleep(backoff)

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._conn = self._reader = self._writer = None

    async def _connect(self) -> None:
        host, port = self._leader_address()
        timeout = self.settings.socket_timeout_ms / 1000
        sec = self.settings.security  # the inter-broker listener's TLS/SASL (None: PLAINTEXT)
        tls = {"ssl": sec.context(), "server_hostname": host} if sec is not None and sec.tls else {}
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, **tls), timeout
        )
        self._conn = ClientConnection(f"replica-fetcher-{self.settings.broker_id}")
        resp = await self._request(ApiVersionsRequest(arrow_body=True), 3)
        self._conn.negotiated(resp)
        if sec is not None and sec.sasl:
            steps = sasl_steps(sec, f"{host}:{port}")
            req = next(steps)
            while True:
                try:
                    req = steps.send(await self._request(req))
                except StopIteration:
                    break

    async def _request(self, request: Any, version: int | None = None, extra_timeout_ms: int = 0) -> Any:
        conn, reader, writer = self._conn, self._reader, self._writer
        _, parts = conn.send_request(request, version)
        writer.write(b"".join(parts))
        await writer.drain()
        deadline = (self.settings.socket_timeout_ms + extra_timeout_ms) / 1000
        async with asyncio.timeout(deadline):
            while True:
                data = await reader.read(1 << 20)
                if not data:
                    raise EOFError(f"leader {self.leader_id} closed the connection")
                events = conn.receive_data(data)
                if events:
                    return events[0].response

    async def _fetch_once(self) -> bool:
        """One fetch round; False if every partition failed (the caller backs off)."""
        m = self.settings
        logs = self.logs
        sent: dict[tuple[str, int], int] = {}
        parts = []
        for key, role in list(self.partitions.items()):
            try:
                lg = logs.get_log(*key)
            except UnknownTopicOrPartition:
                continue
            sent[key] = lg.log_end_offset
            parts.append(
                FetchPartition(
                    key[0],
                    key[1],
                    lg.log_end_offset,
                    m.fetch_max_bytes,
                    lg.log_start_offset,
                    role.leader_epoch,
                    lg.epochs.latest_epoch,
                )
            )
        if not parts:
            return False
        req = FetchRequest(
            parts,
            max_wait_ms=m.fetch_wait_max_ms,
            min_bytes=m.fetch_min_bytes,
            max_bytes=m.fetch_response_max_bytes,
            replica_id=m.broker_id,
        )
        version = min(REPLICA_FETCH_VERSION, self._conn.version_for(ApiKey.FETCH))
        resp = await self._request(req, version, m.fetch_wait_max_ms)
        ok = False
        for r in resp.partitions:
            key = (r.topic, r.partition)
            if key not in self.partitions or key not in sent:
                continue  # no longer followed (a role change while the fetch was in flight)
            try:
                lg = logs.get_log(*key)
                if lg.log_end_offset != sent[key]:
                    continue  # truncated meanwhile: the next round fetches from the new end
                self._handle(lg, r)
                ok = True
                self._failed.pop(key, None)
            except LogSourceError as e:
                msg = f"{type(e).__name__}: {e}"
                if self._failed.get(key) != msg:
                    log.info("%r: %s-%d: %s", self, key[0], key[1], msg)
                self._failed[key] = msg
        return ok

    # ------------------------------------------------------------ one partition's answer

    def _handle(self, lg: PartitionLog, r: Any) -> None:
        if r.error_code == OffsetOutOfRange.code and 0 <= lg.log_end_offset < r.log_start_offset:
            # the leader deleted what we miss (retention): start over at its log start, as Kafka does
            log.warning(
                "%r: %s is below the leader's log start %d; restarting it there",
                self,
                lg.name,
                r.log_start_offset,
            )
            lg.truncate_fully_and_start_at(r.log_start_offset)
            return
        if r.error_code:
            raise error_for_code(r.error_code, f"leader {self.leader_id} answered error {r.error_code}")
        if r.diverging_epoch >= 0 or r.diverging_end_offset >= 0:
            self._truncate(lg, r.diverging_epoch, r.diverging_end_offset)
            return
        records = r.records
        if records is not None and len(records):
            try:
                lg.append_as_follower(records)
            except (CorruptRecord, InvalidRecord) as e:
                raise type(e)(f"{lg.name}: leader {self.leader_id}'s data refused: {e}") from e
        follow_high_watermark(lg, r.high_watermark)
        self.leader_hw[(lg.topic, lg.partition)] = r.high_watermark
        if r.log_start_offset > lg.log_start_offset:  # DeleteRecords on the leader: move ours too
            lg.follow_log_start_offset(r.log_start_offset)

    def _truncate(self, lg: PartitionLog, epoch: int, end_offset: int) -> None:
        """Truncate where the leader says our logs diverge (Kafka's getOffsetTruncationState)."""
        leo = lg.log_end_offset
        if epoch < 0:
            target = max(0, end_offset)  # the leader holds no epoch of ours: keep nothing it lacks
        else:
            mine, my_end = lg.epochs.end_offset_for(epoch, leo)
            # the same epoch: both logs agree up to the smaller end; an older epoch of ours
            # (KIP-279): cut to it and ask again with it on the next fetch
            target = min(end_offset, my_end) if mine >= 0 else end_offset
        target = min(target, leo)
        new_end = lg.truncate_to(target)
        log.info(
            "broker %d: %s diverged from leader %d at epoch %d (leader's end offset %d): truncated from %d to "
            "%d",
            self.settings.broker_id,
            lg.name,
            self.leader_id,
            epoch,
            end_offset,
            leo,
            new_end,
        )
