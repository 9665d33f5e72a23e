"""The transaction coordinator of staged Spark writes: register, commit once per batch id, abort, expire.

A Spark write task attempt stages its rows as transactional batches under its
own producer id (invisible to ``read_committed`` readers) after registering
the partitions it may write under the write's id (the streaming query id, or
a batch job's write id). The driver's commit names the winning attempts and
the batch id; the coordinator then, holding the write id's lock (so two
commits of one write never interleave while one waits for replication):

1. checks every winner's staged data is still open, with the counted records
   (where this broker leads the partition; elsewhere the COMMIT marker closes
   exactly what is open);
2. appends the decision (batch id, winners, losers; state ``prepare``) to
   ``__transaction_state`` and waits until it is on the partition's ISR (on a
   single broker: fsyncs it). From here the commit happens, even across a
   crash or a failover: whoever leads ``__transaction_state-0`` next loads it;
3. writes COMMIT markers into the winners' partitions and ABORT markers with
   the epoch bumped (which fences the attempt) into every partition a losing
   attempt registered (speculative duplicates, failed attempts, zombies);
   partitions other brokers lead get theirs through WriteTxnMarkers (API 27);
4. once every marker is on its partition's ISR, completes the decision
   (Kafka's PrepareCommit -> CompleteCommit): its ``prepare`` record (one key
   per batch) is tombstoned and the write's last committed batch recorded, so
   a new coordinator re-sends markers only for decisions still in ``prepare``;
   markers are idempotent at the leader (:mod:`.markers`), so re-sending them
   never changes what readers see.

A batch id at or below the write's last committed one is answered "committed
before" and the re-run's data is aborted (a retry of the recorded commit itself,
after a lost answer or a failover, keeps its winners). Registrations are also
records of ``__transaction_state``; an attempt whose staged data saw no append
for its ``timeout_ms`` (in partitions this broker has no replica of: since its
registration) is aborted by :meth:`expire` (every second), and open
transactions nobody registered by :func:`.markers.abort_forgotten` after
``transaction.max.timeout.ms``.

Cluster mode: ``__transaction_state`` is a replicated internal topic
(:mod:`..internal_topics`) with one partition; the broker leading it is the
coordinator, loads this state when it is elected and drops it when it resigns.
One partition is enough: the coordinator sees a few requests per Spark
micro-batch, and one coordinator for the whole cluster lets every write's
client find it without hashing (records are keyed by write id, so more
partitions would only need ``partition_for(write_id)``). A coordinator that
loses leadership while it waits for replication answers NotCoordinator and
writes no markers for that decision (the new leader's log decides).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ... import format as fmt
from ...errors import (
    CoordinatorNotAvailable,
    InvalidRequest,
    InvalidTxnState,
    LogSourceError,
    NotCoordinator,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    NotLeaderOrFollower,
    RequestTimedOut,
    UnknownTopicOrPartition,
)
from ...faults import fault_point
from ...format.control import ABORT, COMMIT
from ...topics import OFFSETS_TOPIC
from .. import internal_topics
from ..tasks import spawn
from .markers import Marker, append_marker, replicated
from .producer_txns import KEY_KIND, ProducerTxns

if TYPE_CHECKING:
    from ..state import BrokerState

log = logging.getLogger(__name__)

TXN_TOPIC = internal_topics.TRANSACTION_STATE_TOPIC
#: Kafka's transaction.max.timeout.ms: the longest timeout a write may ask for, and the one for
#: open transactions nobody registered
DEFAULT_MAX_TIMEOUT_MS = 900_000

Winners = dict[int, tuple[int, dict[tuple[str, int], int]]]


@dataclass(slots=True)
class Registration:
    """One task attempt of a write: its producer and the partitions it may stage data in."""

    producer_id: int
    producer_epoch: int
    partitions: set[tuple[str, int]] = field(default_factory=set)
    timeout_ms: int = 60_000
    #: wall-clock ms of the registration
    registered_ms: int = 0


@dataclass(slots=True)
class _Completion:
    """Markers of one decision or abort still unacknowledged, and the records to append once they are."""

    remote: set[Marker]
    keys: list[bytes]
    values: list[bytes | None]
    #: a decision's write: its last committed batch is recorded too (the value current when appended)
    write_id: str | None = None
    #: called once the records are appended (Kafka's transactions: the state becomes Complete*)
    on_done: Callable[[], None] | None = None


# Record keys (the topic is compacted, so the latest value per key is the state):
#   r<0>write<0>producer   a registered attempt (tombstoned when committed, aborted or expired)
#   d<0>write<0>batch      a decision in state prepare (tombstoned once complete: one per batch, so a later
#                          batch's decision never hides an earlier one whose markers are still unwritten)
#   l<0>write              the write's last committed batch and its winners, once a decision is complete
def _reg_key(write_id: str, pid: int) -> bytes:
    return f"r\x00{write_id}\x00{pid}".encode()


def _decision_key(write_id: str, batch_id: int) -> bytes:
    return f"d\x00{write_id}\x00{batch_id}".encode()


def _last_key(write_id: str) -> bytes:
    return f"l\x00{write_id}".encode()


def transaction_state_topic(state: BrokerState) -> internal_topics.InternalTopic:
    """``__transaction_state`` as this broker creates it: one compacted partition (see the module docstring)."""
    c = state.config
    config = {"cleanup.policy": "compact"}
    if c.cluster_mode:  # a single broker's log has one copy whatever the setting says
        config["min.insync.replicas"] = str(c.transaction_state_log_min_isr)
    return internal_topics.InternalTopic(TXN_TOPIC, 1, c.transaction_state_log_replication_factor, config)


class TxnCoordinator:
    """Decisions and registrations of staged writes, loaded from ``__transaction_state-0`` (this broker leads it)."""

    def __init__(self, state: BrokerState, max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS) -> None:
        self.state = state
        self.max_timeout_ms = max_timeout_ms
        #: False once this broker stopped leading ``__transaction_state-0`` (nothing more is written)
        self.active = True
        self.last_committed: dict[str, int] = {}
        self.registrations: dict[str, dict[int, Registration]] = {}
        #: markers for partitions other brokers lead, each with the key of the completion waiting for it
        self.remote: list[tuple[Marker, int]] = []
        self._completions: dict[int, _Completion] = {}
        self._next_completion = 0
        #: write id -> (end offset, decision, its key): appended, not yet known to be on the ISR
        self._in_doubt: dict[str, tuple[int, dict, bytes]] = {}
        #: write id -> (its lock, [requests holding or waiting for it])
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}
        #: write id -> producer ids its last decision committed (a retried commit must not abort them)
        self._last_winners: dict[str, set[int]] = {}
        self._log = state.logs.get_log(TXN_TOPIC, 0)
        #: Kafka's transactions (the second front door): their state machine, on this coordinator's log
        self.producer_txns = ProducerTxns(
            self,
            lambda: state.producer_ids.init_producer_id()[0],
            state.topics,
            lambda group: (OFFSETS_TOPIC, state.group_ownership.partition_for(group)),
            max_timeout_ms,
            fsync_decisions=state.cluster is None,
        )
        self._loaded = self._replay()

    # ------------------------------------------------------------ durable records

    def _replay(self) -> list[tuple[str, dict, bytes]]:
        """Read the log: last committed batch ids, registrations; return the decisions not complete."""
        latest: dict[bytes, bytes | None] = {}
        lg = self._log
        offset, end = lg.log_start_offset, lg.log_end_offset
        while offset < end:
            data = lg.read_checked(offset, 8 << 20)
            batches = fmt.decode_all(data, check_crc=False)
            if not batches:
                break
            for rb in batches:
                t = rb.to_arrow()
                latest.update(zip(t.column("key").to_pylist(), t.column("value").to_pylist(), strict=True))
            offset = batches[-1].header.next_offset
        incomplete = []
        for key, value in latest.items():
            if key is None or value is None:
                continue
            if key.startswith(KEY_KIND.encode() + b"\x00"):  # a transactional id of a Kafka client
                self.producer_txns.load(key[2:].decode(), value)
                continue
            kind, write_id, *rest = key.decode().split("\x00")
            v = json.loads(value)
            if kind in (
                "d",
                "l",
            ):  # a decision (d<0>write: the layout before states, one per write) or the last
                batch = v.get("last_committed", -1)
                if batch > self.last_committed.get(write_id, -1):
                    self.last_committed[write_id] = batch
                    self._last_winners[write_id] = {c[0] for c in v.get("commit", [])}
                if kind == "d" and v.get("state", "prepare") != "complete":
                    incomplete.append((write_id, v, key))
            elif kind == "r":
                reg = Registration(
                    int(rest[0]), v["epoch"], {(t, p) for t, p in v["partitions"]}, v["timeout_ms"], v["ts"]
                )
                self.registrations.setdefault(write_id, {})[reg.producer_id] = reg
        log.info(
            "transaction coordinator on broker %d: %d writes committed, %d decisions to complete, %d writes "
            "with registered attempts",
            self.state.broker_id,
            len(self.last_committed),
            len(incomplete),
            len(self.registrations),
        )
        return sorted(incomplete, key=lambda i: i[1].get("batch", -1))

    def complete_loaded(self) -> None:
        """Write the markers of the decisions loaded in state ``prepare`` (a crash or failover interrupted them)."""
        todo, self._loaded = self._loaded, []
        for write_id, d, key in todo:
            self._write_markers(write_id, d, key)
        self.producer_txns.complete_loaded()

    def _append(self, keys: list[bytes], values: list[bytes | None], fsync: bool = False) -> int:
        """Append records as the leader of ``__transaction_state-0``; return the log end after them."""
        if not self.active:
            raise NotCoordinator(f"broker {self.state.broker_id} no longer coordinates transactions")
        try:
            self.state.check_leader(TXN_TOPIC, 0)
        except (
            NotLeaderOrFollower
        ) as e:  # fenced (ZooKeeper session lost): Kafka's coordinator answers so too
            raise NotCoordinator(f"broker {self.state.broker_id} cannot write {TXN_TOPIC}-0: {e}") from e
        repl = self.state.replication
        if repl is not None:
            try:
                repl.check_min_isr(TXN_TOPIC, 0)  # as an acks=all produce: refused before the append
            except NotEnoughReplicas as e:
                raise CoordinatorNotAvailable(f"the transaction state cannot be replicated: {e}") from e
        role = self.state.role(TXN_TOPIC, 0)
        info = self._log.append(fmt.encode(values, keys), role.leader_epoch if role is not None else 0)
        if fsync:  # the record only: the indexes and the recovery point wait for the next flush
            self._log.sync_data()
        if repl is not None:
            repl.after_append(TXN_TOPIC, 0)
        return info.last_offset + 1

    async def _replicated(self, end_offset: int) -> None:
        """Wait until the records below ``end_offset`` are on the ISR; Kafka's coordinator errors otherwise."""
        try:
            await internal_topics.wait_replicated(self.state, TXN_TOPIC, 0, end_offset)
        except NotLeaderOrFollower as e:
            raise NotCoordinator(
                f"broker {self.state.broker_id} lost the leadership of {TXN_TOPIC}-0: {e}"
            ) from e
        except (NotEnoughReplicas, NotEnoughReplicasAfterAppend, RequestTimedOut) as e:
            raise CoordinatorNotAvailable(f"the transaction state was not replicated: {e}") from e
        if not self.active:
            raise NotCoordinator(f"broker {self.state.broker_id} no longer coordinates transactions")

    @asynccontextmanager
    async def _write_lock(self, write_id: str) -> AsyncIterator[None]:
        """One request of a write at a time (commit awaits replication; nothing of the write interleaves)."""
        entry = self._locks.setdefault(write_id, (asyncio.Lock(), [0]))
        lock, users = entry
        users[0] += 1
        try:
            async with lock:
                await self._settle(write_id)
                yield
        finally:
            users[0] -= 1
            if not users[0]:  # nobody holds it or waits for it: forget it
                del self._locks[write_id]

    async def _settle(self, write_id: str) -> None:
        """Finish a decision appended but not yet known to be replicated (a wait that failed before)."""
        doubt = self._in_doubt.get(write_id)
        if doubt is None:
            return
        end, decision, key = doubt
        await self._replicated(end)
        fault_point(
            "decided", write_id
        )  # crash tests: SIGKILL once the decision is durable, before its markers
        del self._in_doubt[write_id]
        self.last_committed[write_id] = decision["batch"]
        self._last_winners[write_id] = {c[0] for c in decision["commit"]}
        self._write_markers(write_id, decision, key)

    # ------------------------------------------------------------ markers

    def _marker(self, m: Marker, completion: int) -> None:
        """Write one marker into a partition this broker leads, or queue it for its leader (WriteTxnMarkers)."""
        t, p, pid, epoch, kind = m
        if internal_topics.leader_of(self.state, t, p) == self.state.broker_id:
            try:
                append_marker(self.state, t, p, pid, epoch, kind)
                if self.state.replication is not None:  # done once on the ISR (a single broker: at once)
                    self._completions[completion].remote.add(m)
                    spawn(self.confirm(m, completion), name=f"txn-marker-{t}-{p}")
                return
            except UnknownTopicOrPartition as e:  # a deleted topic: nothing staged there any more
                log.warning("marker for producer %d in %s-%d not written: %s", pid, t, p, e)
                return
            except LogSourceError as e:  # leadership moving: sent to the leader
                log.info("marker for producer %d in %s-%d goes to its leader: %s", pid, t, p, e)
        self.remote.append((m, completion))
        self._completions[completion].remote.add(m)

    def _write_markers(self, write_id: str, d: dict, key: bytes) -> None:
        """COMMIT the decision's winners, ABORT (epoch + 1) its losers; once all are on their ISR the decision
        is complete: its record is tombstoned and the write's last committed batch recorded."""
        markers = [(t, p, pid, epoch, COMMIT) for pid, epoch, parts in d.get("commit", []) for t, p in parts]
        markers += [
            (t, p, pid, epoch + 1, ABORT) for pid, epoch, parts in d.get("abort", []) for t, p in parts
        ]
        self._with_completion(markers, [key], [None], write_id)

    def _with_completion(
        self,
        markers: list[Marker],
        keys: list[bytes],
        values: list[bytes | None],
        write_id: str | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> None:
        """Write ``markers``; append ``keys``/``values`` once every one of them is written or acknowledged."""
        if not self.active:  # a resigned coordinator's ABORT could close what its successor just committed
            raise NotCoordinator(f"broker {self.state.broker_id} no longer coordinates transactions")
        cid = self._next_completion
        self._next_completion += 1
        self._completions[cid] = _Completion(set(), keys, values, write_id, on_done)
        for m in markers:
            self._marker(m, cid)
        self._maybe_complete(cid)

    def _maybe_complete(self, cid: int) -> None:
        c = self._completions.get(cid)
        if c is None or c.remote:
            return
        del self._completions[cid]
        keys, values = c.keys, c.values
        if c.write_id is not None:  # the latest batch, even when an earlier decision completes last
            w = c.write_id
            last = {
                "state": "complete",
                "last_committed": self.last_committed.get(w, -1),
                "commit": [[pid] for pid in sorted(self._last_winners.get(w, ()))],
            }
            keys, values = [*keys, _last_key(w)], [*values, json.dumps(last).encode()]
        if keys:
            try:
                self._append(keys, values)  # not awaited: a lost completion only makes a successor re-send
            except LogSourceError as e:
                log.info("completion record not written (%s): the next coordinator re-sends its markers", e)
                return
        if c.on_done is not None:
            c.on_done()

    async def confirm(self, m: Marker, completion: int) -> None:
        """A marker this broker appended as leader is done once on the ISR; else its leader gets it again."""
        try:
            await replicated(self.state, m[0], m[1])
        except LogSourceError as e:
            log.info("marker for producer %d in %s-%d not replicated (%s): sent again", m[2], m[0], m[1], e)
            self.remote.append((m, completion))
            return
        self.marker_done(m, completion)

    def marker_done(self, m: Marker, completion: int) -> None:
        """A queued marker was written by its leader (or its partition is gone)."""
        c = self._completions.get(completion)
        if c is not None:
            c.remote.discard(m)
            self._maybe_complete(completion)

    def _abort_attempt(self, pid: int, epoch: int, partitions: set[tuple[str, int]]) -> list[Marker]:
        """ABORT with the epoch bumped in every partition the attempt registered or has data in (fences it)."""
        return [(t, p, pid, epoch + 1, ABORT) for t, p in sorted(partitions)]

    # ------------------------------------------------------------ the API

    async def register(
        self, write_id: str, pid: int, epoch: int, partitions: set[tuple[str, int]], timeout_ms: int
    ) -> None:
        """A task attempt will stage data in ``partitions`` (replicated before it writes)."""
        if not write_id:
            raise InvalidRequest("write id is empty")
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise InvalidRequest(
                f"timeout_ms {timeout_ms} is not in (0, {self.max_timeout_ms}] (transaction.max.timeout.ms)"
            )
        known = self.state.topics()  # the cluster's topics: this broker need not host a replica
        for t, p in partitions:
            if not 0 <= p < known.get(t, 0):
                raise UnknownTopicOrPartition(f"unknown topic or partition {t}-{p}")
        async with self._write_lock(write_id):
            regs = self.registrations.setdefault(write_id, {})
            reg = regs.get(pid)
            if reg is not None and epoch < reg.producer_epoch:
                raise InvalidTxnState(f"producer {pid} epoch {epoch} is fenced")
            if reg is None:
                reg = regs[pid] = Registration(pid, epoch, set(), timeout_ms, int(time.time() * 1000))
            reg.partitions |= partitions
            reg.producer_epoch, reg.timeout_ms = epoch, timeout_ms
            value = json.dumps(
                {
                    "epoch": epoch,
                    "partitions": sorted(reg.partitions),
                    "timeout_ms": timeout_ms,
                    "ts": reg.registered_ms,
                }
            ).encode()
            await self._replicated(self._append([_reg_key(write_id, pid)], [value]))

    async def commit(self, write_id: str, batch_id: int, winners: Winners) -> tuple[bool, int]:
        """Publish the winners' staged data as batch ``batch_id`` of the write; (committed, last batch id).

        ``winners``: producer id -> (epoch, {partition: staged records}). A batch id at or
        below the last committed one changes nothing (its re-run's data is aborted).
        """
        async with self._write_lock(write_id):
            last = self.last_committed.get(write_id, -1)
            if batch_id <= last:
                log.info(
                    "write %s: batch %d was committed before (last %d): aborting the re-run",
                    write_id,
                    batch_id,
                    last,
                )
                decided = self._last_winners.get(write_id, set())  # a retry of the commit that won: keep them
                self._abort_locked(write_id, {pid: w for pid, w in winners.items() if pid not in decided})
                return False, last
            self._check_staged(write_id, batch_id, winners)
            regs = self.registrations.get(write_id, {})
            losers = {pid: r for pid, r in regs.items() if pid not in winners}
            commit = [
                [pid, epoch, sorted([t, p] for (t, p), n in parts.items() if n > 0)]
                for pid, (epoch, parts) in winners.items()
            ]
            abort = [
                [pid, r.producer_epoch, sorted([t, p] for t, p in r.partitions)] for pid, r in losers.items()
            ]
            decision = {
                "state": "prepare",
                "last_committed": batch_id,
                "batch": batch_id,
                "commit": commit,
                "abort": abort,
                "ts": int(time.time() * 1000),
            }
            key = _decision_key(write_id, batch_id)
            keys = [key] + [_reg_key(write_id, pid) for pid in regs]
            # the commit point: fsynced on a single broker, on the ISR in a cluster (in _settle)
            end = self._append(
                keys, [json.dumps(decision).encode()] + [None] * len(regs), fsync=self.state.cluster is None
            )
            self.registrations.pop(write_id, None)
            self._in_doubt[write_id] = (end, decision, key)
            await self._settle(write_id)
            log.info(
                "write %s: committed batch %d (%d producers; %d attempts aborted)",
                write_id,
                batch_id,
                len(commit),
                len(losers),
            )
            return True, batch_id

    def _check_staged(self, write_id: str, batch_id: int, winners: Winners) -> None:
        """InvalidTxnState unless each winner with data is a live registration of the write at its epoch, and its
        data is open with its counted records (where this broker leads)."""
        me = self.state.broker_id
        regs = self.registrations.get(write_id, {})
        for pid, (epoch, parts) in winners.items():
            staged = [tp for tp, n in parts.items() if n > 0]
            reg = regs.get(pid)
            # tasks register before they stage: a winner without its registration was expired or aborted, and its
            # data in partitions other brokers lead (not counted here) is gone, so committing would lose it silently
            if staged and (reg is None or reg.producer_epoch != epoch or not set(staged) <= reg.partitions):
                raise InvalidTxnState(
                    f"write {write_id} batch {batch_id}: producer {pid} epoch {epoch} is not a "
                    "registered attempt of the write (aborted after its timeout, or fenced)"
                )
            for (t, p), n in parts.items():
                if n <= 0 or internal_topics.leader_of(self.state, t, p) != me:
                    continue  # counts are checked where the data is led (a replica here may lag)
                o = self.state.logs.get_log(t, p).txns.open.get(pid)
                if o is None or o.producer_epoch != epoch or o.records != n:
                    have = "nothing open" if o is None else f"epoch {o.producer_epoch}, {o.records} records"
                    raise InvalidTxnState(
                        f"write {write_id} batch {batch_id}: producer {pid} epoch {epoch} staged {n} records in "
                        f"{t}-{p} but the partition has {have} (aborted after its timeout, or the data was lost)"
                    )

    async def abort(self, write_id: str, producers: Winners) -> None:
        """Abort the given attempts and every registered attempt of the write."""
        async with self._write_lock(write_id):
            self._abort_locked(write_id, producers)

    def _abort_locked(self, write_id: str, producers: Winners) -> None:
        regs = self.registrations.pop(write_id, {})
        todo: dict[int, tuple[int, set[tuple[str, int]]]] = {
            pid: (epoch, set(parts)) for pid, (epoch, parts) in producers.items()
        }
        for pid, r in regs.items():
            epoch, parts = todo.get(pid, (r.producer_epoch, set()))
            todo[pid] = (max(epoch, r.producer_epoch), parts | r.partitions)
        markers = [m for pid, (epoch, parts) in todo.items() for m in self._abort_attempt(pid, epoch, parts)]
        # the registrations go once the markers are written: a successor that still has them aborts them again
        self._with_completion(markers, [_reg_key(write_id, pid) for pid in regs], [None] * len(regs))

    # ------------------------------------------------------------ timeouts

    def _idle(self, r: Registration, now: int, mono: float) -> int:
        """How long the attempt saw no append (in the partitions this broker has; else since its registration)."""
        idle_since = r.registered_ms
        for t, p in r.partitions:
            try:
                o = self.state.logs.get_log(t, p).txns.open.get(r.producer_id)
            except LogSourceError:  # no replica here
                continue
            if o is not None:
                idle_since = max(idle_since, now - int((mono - o.last_append) * 1000))
        return now - idle_since

    async def expire(self, now_ms: int | None = None) -> int:
        """Abort attempts idle for their timeout; return how many."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        n = 0
        for write_id in list(self.registrations):
            mono = time.monotonic()
            if not any(
                self._idle(r, now, mono) > r.timeout_ms for r in self.registrations[write_id].values()
            ):
                continue
            async with self._write_lock(write_id):
                if not self.active:  # resigned while waiting for the lock: the new coordinator expires them
                    return n
                regs = self.registrations.get(write_id, {})
                for pid, r in list(regs.items()):
                    idle = self._idle(r, now, time.monotonic())
                    if idle <= r.timeout_ms:
                        continue
                    log.warning(
                        "write %s: aborting attempt (producer %d) idle for %d ms", write_id, pid, idle
                    )
                    del regs[pid]
                    self._with_completion(
                        self._abort_attempt(pid, r.producer_epoch, r.partitions),
                        [_reg_key(write_id, pid)],
                        [None],
                    )
                    n += 1
                if not regs:
                    self.registrations.pop(write_id, None)
        return n

    def registered_producers(self) -> set[int]:
        """Producer ids of every registered attempt and open Kafka transaction (their own timeouts apply)."""
        return {
            pid for regs in self.registrations.values() for pid in regs
        } | self.producer_txns.open_producers()

    # ------------------------------------------------------------ for Kafka's transactions (TxnStateLog)

    def append_state(self, keys: list[bytes], values: list[bytes | None], fsync: bool = False) -> int:
        """Append records to ``__transaction_state-0`` as its leader; the log end after them."""
        return self._append(keys, values, fsync)

    async def state_replicated(self, end_offset: int) -> None:
        """Wait until the records below ``end_offset`` are on the ISR."""
        await self._replicated(end_offset)

    def write_markers(
        self,
        markers: list[Marker],
        keys: list[bytes],
        values: list[bytes | None],
        on_done: Callable[[], None],
    ) -> None:
        """Write markers; once all are on their ISR append ``keys``/``values``, then call ``on_done``."""
        self._with_completion(markers, keys, values, None, on_done)

    def txn_lock(self, name: str) -> AbstractAsyncContextManager[None]:
        """One request per name at a time (the lock StagedTxns uses per write id)."""
        return self._write_lock(name)


def winners_of(producers: list[Any]) -> Winners:
    """The request's producers as {producer id: (epoch, {partition: records})}."""
    return {p.producer_id: (p.producer_epoch, dict(p.partitions)) for p in producers}
