"""Kafka's transactions: the coordinator's state machine per ``transactional.id`` (the second front door).

A Kafka client's transactional producer talks to the same transaction
coordinator as our Spark writes (:mod:`.coordinator`): its state lives on
``__transaction_state`` (keys ``k<0>transactional id``, a JSON value per
transition, the latest one wins), its COMMIT / ABORT markers go through the
coordinator's marker path (local appends, WriteTxnMarkers to other leaders,
done once on the ISR), and its decisions in prepare are completed by whoever
loads the topic next. This module owns only the state machine; it is handed a
:class:`TxnStateLog` (what the coordinator offers it) and the few broker facts
it needs, so it never reaches into the coordinator's fields.

States and transitions (Kafka's TransactionState)::

    Empty / CompleteCommit / CompleteAbort --AddPartitions/AddOffsets--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers on the ISR--> CompleteCommit
    Ongoing --EndTxn(abort), timeout, a new instance--> PrepareAbort --markers--> CompleteAbort
    any complete state --InitProducerId--> Empty (epoch + 1: the older instance is fenced)

A prepare record is appended (fsynced on a single broker, on the ISR in a
cluster) before any marker: that is the decision. The complete record follows
once every marker is on its partition's ISR. A transaction left Ongoing past
its ``transaction.timeout.ms`` is aborted with the epoch bumped (Kafka's
PrepareEpochFence), so the timed-out producer is fenced and its open
transactions stop pinning the last stable offset.

Narrow reads for later APIs (ListTransactions, DescribeTransactions):
:meth:`ProducerTxns.transactions` and :meth:`ProducerTxns.get` return copies of
:class:`TxnMetadata`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from ...errors import (
    ConcurrentTransactions,
    InvalidProducerEpoch,
    InvalidProducerIdMapping,
    InvalidRequest,
    InvalidTransactionTimeout,
    InvalidTxnState,
    ProducerFenced,
)
from ...faults import fault_point
from ...format.control import ABORT, COMMIT
from .markers import Marker

log = logging.getLogger(__name__)

_EPOCH_MAX = 0x7FFF
KEY_KIND = "k"


class TxnState(str, Enum):
    """Kafka's transaction states (the names Kafka's tools print)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


_PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)
_COMPLETE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id as the coordinator knows it (one record of ``__transaction_state``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    #: partitions of the ongoing (or preparing) transaction, the group's offsets partition included
    partitions: set[tuple[str, int]] = field(default_factory=set)
    #: the id and epoch before the last bump (KIP-360: a client retrying InitProducerId names them)
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    #: wall-clock ms the ongoing transaction started (-1: none), and of the last transition
    txn_start_ms: int = -1
    last_update_ms: int = 0

    def to_json(self) -> bytes:
        d = dataclasses.asdict(self)
        d["state"] = self.state.value
        d["partitions"] = sorted([t, p] for t, p in self.partitions)
        del d["transactional_id"]  # in the key
        return json.dumps(d).encode()

    @classmethod
    def from_json(cls, transactional_id: str, raw: bytes) -> TxnMetadata:
        d = json.loads(raw)
        d["state"] = TxnState(d["state"])
        d["partitions"] = {(t, p) for t, p in d["partitions"]}
        return cls(transactional_id, **d)

    def copy(self, **changes: object) -> TxnMetadata:
        c = dataclasses.replace(self, **changes)
        if "partitions" not in changes:
            c.partitions = set(self.partitions)
        return c


def state_key(transactional_id: str) -> bytes:
    """The record key of a transactional id on ``__transaction_state``."""
    return f"{KEY_KIND}\x00{transactional_id}".encode()


class TxnStateLog(Protocol):
    """What the coordinator offers this state machine (implemented by :class:`.coordinator.TxnCoordinator`)."""

    def append_state(self, keys: list[bytes], values: list[bytes | None], fsync: bool = False) -> int:
        """Append records to ``__transaction_state-0``; return the log end after them."""

    async def state_replicated(self, end_offset: int) -> None:
        """Wait until the records below ``end_offset`` are on the ISR (errors as the coordinator's)."""

    def write_markers(
        self,
        markers: list[Marker],
        keys: list[bytes],
        values: list[bytes | None],
        on_done: Callable[[], None],
    ) -> None:
        """Write the markers; once all are on their ISR, append ``keys``/``values`` and call ``on_done``."""

    def txn_lock(self, name: str) -> AbstractAsyncContextManager[None]:
        """One request per name at a time (held across replication waits)."""


class ProducerTxns:
    """The state of every transactional id; requests of one id are serialized by the coordinator's lock."""

    def __init__(
        self,
        log_: TxnStateLog,
        allocate_producer_id: Callable[[], int],
        partition_counts: Callable[[], dict[str, int]],
        offsets_partition: Callable[[str], tuple[str, int]],
        max_timeout_ms: int,
        fsync_decisions: bool,
    ) -> None:
        self._log = log_
        self._allocate = allocate_producer_id
        self._partition_counts = partition_counts
        self._offsets_partition = offsets_partition
        self.max_timeout_ms = max_timeout_ms
        self._fsync = fsync_decisions
        self._txns: dict[str, TxnMetadata] = {}
        #: producer id -> transactional id (the produce check looks producers up by id)
        self._by_pid: dict[int, str] = {}

    # ------------------------------------------------------------ reads

    def get(self, transactional_id: str) -> TxnMetadata | None:
        """A copy of the id's state (None: unknown)."""
        m = self._txns.get(transactional_id)
        return None if m is None else m.copy()

    def transactions(self) -> list[TxnMetadata]:
        """Copies of every transactional id's state (what ListTransactions would list)."""
        return [m.copy() for m in self._txns.values()]

    def open_producers(self) -> set[int]:
        """Producer ids with a transaction not yet complete (their own timeout applies, not the maximum)."""
        return {m.producer_id for m in self._txns.values() if m.state not in _COMPLETE}

    def check_produce(self, producer_id: int, producer_epoch: int, topic: str, partition: int) -> None:
        """KIP-890 part 1: a transactional batch of a Kafka transactional producer must go to a partition of
        its ongoing transaction (InvalidTxnState, as Kafka's leader answers older produce versions);
        producers this coordinator does not know (our Spark writes' attempts) are not checked here."""
        tid = self._by_pid.get(producer_id)
        if tid is None:
            return
        m = self._txns[tid]
        if producer_epoch < m.producer_epoch:
            return  # the log's producer state refuses an old epoch itself (InvalidProducerEpoch)
        if m.state != TxnState.ONGOING or (topic, partition) not in m.partitions:
            raise InvalidTxnState(
                f"transactional id {tid!r} (producer {producer_id}) has no ongoing transaction with "
                f"{topic}-{partition}: AddPartitionsToTxn must come first"
            )

    def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """AddPartitionsToTxn v4 ``verify_only`` from a partition leader: per partition 0 if it is in the
        ongoing transaction, else Kafka's code (49 another producer, 47 an older epoch, 48 not added)."""
        m = self._txns.get(transactional_id)
        if m is None or m.producer_id != producer_id:
            return dict.fromkeys(partitions, InvalidProducerIdMapping.code)
        if producer_epoch < m.producer_epoch:
            return dict.fromkeys(partitions, InvalidProducerEpoch.code)  # Kafka's leader answers fencing so
        ok = m.state == TxnState.ONGOING and producer_epoch == m.producer_epoch
        return {tp: 0 if ok and tp in m.partitions else InvalidTxnState.code for tp in partitions}

    # ------------------------------------------------------------ load

    def load(self, transactional_id: str, value: bytes) -> None:
        """A record replayed from ``__transaction_state`` (the latest per key)."""
        m = TxnMetadata.from_json(transactional_id, value)
        self._install(m)

    def complete_loaded(self) -> int:
        """Re-send the markers of every decision still in prepare (a crash or failover interrupted it)."""
        n = 0
        for m in list(self._txns.values()):
            if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                log.info(
                    "transactional id %s: completing %s after a restart", m.transactional_id, m.state.value
                )
                self._send_markers(m)
                n += 1
        return n

    def _install(self, m: TxnMetadata) -> None:
        old = self._txns.get(m.transactional_id)
        if old is not None and self._by_pid.get(old.producer_id) == m.transactional_id:
            del self._by_pid[old.producer_id]
        self._txns[m.transactional_id] = m
        self._by_pid[m.producer_id] = m.transactional_id

    async def _persist(self, m: TxnMetadata, fsync: bool = False) -> None:
        """Make ``m`` the id's state once its record is durable (fsynced / on the ISR)."""
        m.last_update_ms = _now()
        end = self._log.append_state([state_key(m.transactional_id)], [m.to_json()], fsync)
        await self._log.state_replicated(end)
        self._install(m)

    def _lock(self, transactional_id: str) -> AbstractAsyncContextManager[None]:
        return self._log.txn_lock(f"{KEY_KIND}\x00{transactional_id}")

    # ------------------------------------------------------------ InitProducerId

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1
    ) -> tuple[int, int]:
        """The id's producer id and a new epoch (fencing older instances; an ongoing transaction is aborted)."""
        if not transactional_id:
            raise InvalidRequest("transactional id is empty")
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise InvalidTransactionTimeout(
                f"transaction.timeout.ms {timeout_ms} is not in (0, {self.max_timeout_ms}] "
                "(the broker's transaction.max.timeout.ms)"
            )
        async with self._lock(transactional_id):
            m = self._txns.get(transactional_id)
            if m is None:
                m = TxnMetadata(transactional_id, self._allocate(), 0, timeout_ms)
                await self._persist(m)
                log.info("transactional id %s: producer %d epoch 0", transactional_id, m.producer_id)
                return m.producer_id, 0
            if producer_id >= 0:  # KIP-360: the client names the id and epoch it had
                # the current pair, or the one before the last bump (a timeout's abort, a lost answer): bumped again
                known = {(m.producer_id, m.producer_epoch), (m.last_producer_id, m.last_producer_epoch)}
                if (producer_id, producer_epoch) not in known:
                    raise ProducerFenced(
                        f"transactional id {transactional_id!r}: producer {producer_id} epoch {producer_epoch} "
                        f"is not the current one ({m.producer_id}, {m.producer_epoch})"
                    )
            if m.state in _PREPARING:
                raise ConcurrentTransactions(
                    f"transactional id {transactional_id!r} is completing a transaction"
                )
            if m.state == TxnState.ONGOING:  # a new instance: abort what the old one left open, fenced
                await self._prepare(m, commit=False, bump=True)
                m = self._txns[transactional_id]
                if m.state != TxnState.COMPLETE_ABORT:  # markers still on their way to other leaders
                    raise ConcurrentTransactions(
                        f"transactional id {transactional_id!r}: aborting the previous instance's transaction"
                    )
            new = self._bumped(m)
            new.state, new.partitions, new.timeout_ms, new.txn_start_ms = (
                TxnState.EMPTY,
                set(),
                timeout_ms,
                -1,
            )
            await self._persist(new)
            log.info(
                "transactional id %s: producer %d epoch %d",
                transactional_id,
                new.producer_id,
                new.producer_epoch,
            )
            return new.producer_id, new.producer_epoch

    def _bumped(self, m: TxnMetadata) -> TxnMetadata:
        """A copy with the epoch bumped (a new producer id once the epoch is exhausted, as Kafka does)."""
        if m.producer_epoch + 1 > _EPOCH_MAX:
            return m.copy(
                producer_id=self._allocate(),
                producer_epoch=0,
                last_producer_id=m.producer_id,
                last_producer_epoch=m.producer_epoch,
            )
        return m.copy(
            producer_epoch=m.producer_epoch + 1,
            last_producer_id=m.producer_id,
            last_producer_epoch=m.producer_epoch,
        )

    # ------------------------------------------------------------ the transaction

    def _current(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        m = self._txns.get(transactional_id)
        if m is None or m.producer_id != producer_id:
            raise InvalidProducerIdMapping(
                f"transactional id {transactional_id!r} has no producer {producer_id} (call InitProducerId)"
            )
        if m.producer_epoch != producer_epoch or m.state == TxnState.PREPARE_EPOCH_FENCE:
            raise ProducerFenced(
                f"transactional id {transactional_id!r}: epoch {producer_epoch} is fenced "
                f"(the current epoch is {m.producer_epoch})"
            )
        return m

    def unknown_partitions(self, partitions: list[tuple[str, int]]) -> set[tuple[str, int]]:
        """The partitions that do not exist (AddPartitionsToTxn answers them UNKNOWN_TOPIC_OR_PARTITION)."""
        known = self._partition_counts()
        return {(t, p) for t, p in partitions if not 0 <= p < known.get(t, 0)}

    async def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[tuple[str, int]]
    ) -> None:
        """Add partitions to the ongoing transaction (starting one), durably before the answer."""
        async with self._lock(transactional_id):
            m = self._current(transactional_id, producer_id, producer_epoch)
            if m.state in _PREPARING:
                raise ConcurrentTransactions(
                    f"transactional id {transactional_id!r} is completing a transaction"
                )
            if m.state == TxnState.ONGOING and partitions <= m.partitions:
                return
            new = m.copy(state=TxnState.ONGOING, partitions=m.partitions | partitions)
            if m.state != TxnState.ONGOING:
                new.txn_start_ms = _now()
            await self._persist(new)

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group: str
    ) -> None:
        """Add the group's ``__consumer_offsets`` partition (its TxnOffsetCommit records get the markers too)."""
        if not group:
            raise InvalidRequest("group id is empty")
        await self.add_partitions(
            transactional_id, producer_id, producer_epoch, {self._offsets_partition(group)}
        )

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> None:
        """Commit or abort the ongoing transaction: the decision is durable when this returns; its markers are
        written (local partitions at once, others through WriteTxnMarkers)."""
        async with self._lock(transactional_id):
            m = self._current(transactional_id, producer_id, producer_epoch)
            want = "commit" if commit else "abort"
            s = m.state
            if s == TxnState.ONGOING:
                await self._prepare(m, commit, bump=False)
                return
            if s == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
                return  # a retry of the EndTxn that completed it
            if s == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
                raise ConcurrentTransactions(
                    f"transactional id {transactional_id!r}: the {want} is in progress"
                )
            raise InvalidTxnState(f"transactional id {transactional_id!r} is {s.value}: cannot {want}")

    async def _prepare(self, m: TxnMetadata, commit: bool, bump: bool) -> None:
        """Append the decision (durable first), then write its markers; complete once they are on the ISR."""
        new = self._bumped(m) if bump else m.copy()
        new.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        await self._persist(new, fsync=self._fsync)
        fault_point("decided", m.transactional_id)  # crash tests: SIGKILL once the decision is durable
        self._send_markers(new)

    def _send_markers(self, m: TxnMetadata) -> None:
        commit = m.state == TxnState.PREPARE_COMMIT
        done = m.copy(state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT, partitions=set())
        done.txn_start_ms, done.last_update_ms = -1, _now()
        kind = COMMIT if commit else ABORT
        markers = [(t, p, m.producer_id, m.producer_epoch, kind) for t, p in sorted(m.partitions)]

        def on_done() -> None:
            cur = self._txns.get(m.transactional_id)
            if cur is not None and cur.state == m.state and cur.producer_epoch == m.producer_epoch:
                self._install(done)
                log.info("transactional id %s: %s", m.transactional_id, done.state.value)

        self._log.write_markers(markers, [state_key(m.transactional_id)], [done.to_json()], on_done)

    # ------------------------------------------------------------ timeouts

    async def expire(self, now_ms: int | None = None) -> int:
        """Abort (epoch bumped: the producer is fenced) transactions ongoing past their timeout; return how many."""
        now = _now() if now_ms is None else now_ms
        n = 0
        for m in list(self._txns.values()):
            if m.state != TxnState.ONGOING or now - m.txn_start_ms <= m.timeout_ms:
                continue
            async with self._lock(m.transactional_id):
                cur = self._txns.get(m.transactional_id)
                if cur is None or cur.state != TxnState.ONGOING or now - cur.txn_start_ms <= cur.timeout_ms:
                    continue
                log.warning(
                    "transactional id %s: aborting the transaction of producer %d open for %d ms (timeout %d ms)",
                    cur.transactional_id,
                    cur.producer_id,
                    now - cur.txn_start_ms,
                    cur.timeout_ms,
                )
                await self._prepare(cur, commit=False, bump=True)
                n += 1
        return n


def _now() -> int:
    return int(time.time() * 1000)
