"""The transaction coordinator of staged Spark writes: register, commit once per batch id, abort, expire.

A Spark write task attempt stages its rows as transactional batches under its
own producer id (invisible to ``read_committed`` readers) after registering
the partitions it may write under the write's id (the streaming query id, or
a batch job's write id). The driver's commit names the winning attempts and
the batch id; the coordinator then, in one event-loop step (so nothing
interleaves):

1. checks every winner's staged data is still open, with the counted records;
2. appends the decision (batch id, winners, losers) to ``__transaction_state``
   and fsyncs it: from here the commit happens, even across a broker crash
   (on start the last decision of each write is completed);
3. writes COMMIT markers into the winners' partitions and ABORT markers with
   the epoch bumped (which fences the attempt) into every partition a losing
   attempt registered (speculative duplicates, failed attempts, zombies);
4. remembers the batch id, so a repeated commit of it (the driver died
   before Spark recorded the commit) aborts the re-run's data and changes nothing.

Registrations are also in ``__transaction_state``. An attempt whose staged data
saw no append for its ``timeout_ms`` is aborted by :meth:`expire` (run every
second), and so is an open transaction nobody registered (a broker restart
lost it) after ``transaction.max.timeout.ms``: staged data never blocks
readers for longer than that.

Cluster mode: the controller is the coordinator (clients send StagedTxns there;
another broker answers NotCoordinator). Markers for partitions led by other
brokers are queued in :attr:`TxnCoordinator.remote` and sent with Kafka's
WriteTxnMarkers (API 27) after the decision is recorded, retried every second
until the leaders took them; the staged data, the markers and so the
published batch are replicated like any other data. Not done: the decision log
``__transaction_state`` is this broker's own (not replicated), so a new
controller does not know the old one's decisions and registrations.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ... import format as fmt
from ...errors import (
    InvalidRequest,
    InvalidTxnState,
    LogSourceError,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from ...format.control import ABORT, COMMIT, encode_marker

if TYPE_CHECKING:
    from ..state import BrokerState

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
#: crash tests: the broker kills itself with SIGKILL at the named step when this variable names it
FAULT_ENV = "LOGSOURCE_TXN_FAULT"
#: Kafka's transaction.max.timeout.ms: the longest timeout a write may ask for, and the one for
#: open transactions nobody registered
DEFAULT_MAX_TIMEOUT_MS = 900_000


@dataclass(slots=True)
class Registration:
    """One task attempt of a write: its producer and the partitions it may stage data in."""

    producer_id: int
    producer_epoch: int
    partitions: set[tuple[str, int]] = field(default_factory=set)
    timeout_ms: int = 60_000
    #: wall-clock ms of the registration
    registered_ms: int = 0


def _reg_key(write_id: str, pid: int) -> bytes:
    return f"r\x00{write_id}\x00{pid}".encode()


def _decision_key(write_id: str) -> bytes:
    return f"d\x00{write_id}".encode()


class TxnCoordinator:
    """Decisions and registrations of staged writes, kept in ``__transaction_state`` (one partition)."""

    def __init__(self, state: BrokerState, max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS) -> None:
        self.state = state
        self.max_timeout_ms = max_timeout_ms
        self.last_committed: dict[str, int] = {}
        self.registrations: dict[str, dict[int, Registration]] = {}
        #: markers for partitions other brokers lead: (topic, partition, producer id, epoch, kind)
        self.remote: list[tuple[str, int, int, int, int]] = []
        logs = state.logs
        if TXN_TOPIC not in logs.topics():
            try:
                logs.create_topic(TXN_TOPIC, 1, {"cleanup.policy": "compact"})
            except TopicAlreadyExists:
                pass
        self._log = logs.get_log(TXN_TOPIC, 0)
        decisions = self._replay()
        for write_id, d in decisions.items():
            self._complete(write_id, d)

    # ------------------------------------------------------------ durable records

    def _replay(self) -> dict[str, dict]:
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
        decisions = {}
        for key, value in latest.items():
            if key is None or value is None:
                continue
            kind, write_id, *rest = key.decode().split("\x00")
            v = json.loads(value)
            if kind == "d":
                decisions[write_id] = v
                if v.get("last_committed", -1) >= 0:
                    self.last_committed[write_id] = v["last_committed"]
            elif kind == "r":
                reg = Registration(int(rest[0]), v["epoch"], {(t, p) for t, p in v["partitions"]}, v["timeout_ms"],
                                   v["ts"])  # fmt: skip
                self.registrations.setdefault(write_id, {})[reg.producer_id] = reg
        log.info("transaction coordinator: %d writes with decisions, %d with registered attempts",
                 len(decisions), len(self.registrations))  # fmt: skip
        return decisions

    def _append(self, keys: list[bytes], values: list[bytes | None], fsync: bool) -> None:
        self._log.append(fmt.encode(values, keys))
        if fsync:
            self._log.flush()

    # ------------------------------------------------------------ markers

    def _marker(self, topic: str, partition: int, pid: int, epoch: int, kind: int, *, only_open: bool) -> bool:
        """Write one marker into a partition this broker leads, or queue it for its leader (WriteTxnMarkers)."""
        role = self.state.role(topic, partition)
        if role is not None and role.leader != self.state.broker_id:
            self.remote.append((topic, partition, pid, epoch, kind))
            return True
        return append_marker(self.state, topic, partition, pid, epoch, kind, only_open=only_open)

    def _abort_attempt(self, pid: int, epoch: int, partitions: set[tuple[str, int]]) -> None:
        """ABORT with the epoch bumped in every partition the attempt registered or has data in (fences it)."""
        for t, p in sorted(partitions):
            try:
                self._marker(t, p, pid, epoch + 1, ABORT, only_open=False)
            except LogSourceError as e:  # a deleted topic: nothing staged there any more
                log.warning("abort of producer %d in %s-%d failed: %s", pid, t, p, e)

    def _complete(self, write_id: str, d: dict) -> None:
        """Finish a recorded decision a crash may have interrupted (markers only where still open)."""
        for pid, epoch, parts in d.get("commit", []):
            for t, p in parts:
                try:
                    self._marker(t, p, pid, epoch, COMMIT, only_open=True)
                except LogSourceError as e:
                    log.warning("completing commit of %s: %s-%d: %s", write_id, t, p, e)
        for pid, epoch, parts in d.get("abort", []):
            for t, p in parts:
                try:
                    self._marker(t, p, pid, epoch + 1, ABORT, only_open=True)
                except LogSourceError as e:
                    log.warning("completing abort of %s: %s-%d: %s", write_id, t, p, e)

    # ------------------------------------------------------------ the API

    def register(self, write_id: str, pid: int, epoch: int, partitions: set[tuple[str, int]],
                 timeout_ms: int) -> None:  # fmt: skip
        """A task attempt will stage data in ``partitions`` (durable before it writes)."""
        if not write_id:
            raise InvalidRequest("write id is empty")
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise InvalidRequest(f"timeout_ms {timeout_ms} is not in (0, {self.max_timeout_ms}] "
                                 "(transaction.max.timeout.ms)")  # fmt: skip
        known = self.state.topics()  # the cluster's topics: this broker need not host a replica
        for t, p in partitions:
            if not 0 <= p < known.get(t, 0):
                raise UnknownTopicOrPartition(f"unknown topic or partition {t}-{p}")
        regs = self.registrations.setdefault(write_id, {})
        reg = regs.get(pid)
        if reg is not None and epoch < reg.producer_epoch:
            raise InvalidTxnState(f"producer {pid} epoch {epoch} is fenced")
        if reg is None:
            reg = regs[pid] = Registration(pid, epoch, set(), timeout_ms, int(time.time() * 1000))
        reg.partitions |= partitions
        reg.producer_epoch, reg.timeout_ms = epoch, timeout_ms
        value = json.dumps({"epoch": epoch, "partitions": sorted(reg.partitions), "timeout_ms": timeout_ms,
                            "ts": reg.registered_ms}).encode()  # fmt: skip
        self._append([_reg_key(write_id, pid)], [value], fsync=False)

    def commit(self, write_id: str, batch_id: int, winners: dict[int, tuple[int, dict[tuple[str, int], int]]]) -> tuple[bool, int]:
        """Publish the winners' staged data as batch ``batch_id`` of the write; (committed, last batch id).

        ``winners``: producer id -> (epoch, {partition: staged records}). A batch id at or
        below the last committed one changes nothing (its re-run's data is aborted).
        """
        last = self.last_committed.get(write_id, -1)
        regs = self.registrations.get(write_id, {})
        if batch_id <= last:
            log.info("write %s: batch %d was committed before (last %d): aborting the re-run", write_id, batch_id, last)
            self.abort(write_id, winners)
            return False, last
        for pid, (epoch, parts) in winners.items():
            for (t, p), n in parts.items():
                role = self.state.role(t, p)
                if n <= 0 or (role is not None and role.leader != self.state.broker_id):
                    continue  # counts are checked where the data is led (a replica here may lag)
                o = self.state.logs.get_log(t, p).txns.open.get(pid)
                if o is None or o.producer_epoch != epoch or o.records != n:
                    have = "nothing open" if o is None else f"epoch {o.producer_epoch}, {o.records} records"
                    raise InvalidTxnState(
                        f"write {write_id} batch {batch_id}: producer {pid} epoch {epoch} staged {n} records in "
                        f"{t}-{p} but the partition has {have} (aborted after its timeout, or the data was lost)"
                    )
        losers = {pid: r for pid, r in regs.items() if pid not in winners}
        commit = [[pid, epoch, sorted([t, p] for (t, p), n in parts.items() if n > 0)]
                  for pid, (epoch, parts) in winners.items()]  # fmt: skip
        abort = [[pid, r.producer_epoch, sorted([t, p] for t, p in r.partitions)] for pid, r in losers.items()]
        decision = {"last_committed": batch_id, "batch": batch_id, "commit": commit, "abort": abort,
                    "ts": int(time.time() * 1000)}  # fmt: skip
        keys = [_decision_key(write_id)] + [_reg_key(write_id, pid) for pid in regs]
        self._append(keys, [json.dumps(decision).encode()] + [None] * len(regs), fsync=True)  # the commit point
        _fault_point("decided")
        self.last_committed[write_id] = batch_id
        self.registrations.pop(write_id, None)
        for pid, epoch, parts in commit:
            for t, p in parts:
                self._marker(t, p, pid, epoch, COMMIT, only_open=True)
        for pid, r in losers.items():
            self._abort_attempt(pid, r.producer_epoch, r.partitions)
        log.info("write %s: committed batch %d (%d producers; %d attempts aborted)", write_id, batch_id,
                 len(commit), len(losers))  # fmt: skip
        return True, batch_id

    def abort(self, write_id: str, producers: dict[int, tuple[int, dict[tuple[str, int], int]]]) -> None:
        """Abort the given attempts and every registered attempt of the write."""
        regs = self.registrations.pop(write_id, {})
        todo: dict[int, tuple[int, set[tuple[str, int]]]] = {
            pid: (epoch, set(parts)) for pid, (epoch, parts) in producers.items()
        }
        for pid, r in regs.items():
            epoch, parts = todo.get(pid, (r.producer_epoch, set()))
            todo[pid] = (max(epoch, r.producer_epoch), parts | r.partitions)
        if regs:
            self._append([_reg_key(write_id, pid) for pid in regs], [None] * len(regs), fsync=False)
        for pid, (epoch, parts) in todo.items():
            self._abort_attempt(pid, epoch, parts)

    # ------------------------------------------------------------ timeouts

    def expire(self, now_ms: int | None = None) -> int:
        """Abort attempts idle for their timeout and unregistered open transactions past the maximum."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        mono = time.monotonic()
        registered: set[int] = set()
        n = 0
        for write_id, regs in list(self.registrations.items()):
            for pid, r in list(regs.items()):
                registered.add(pid)
                idle_since = r.registered_ms
                for t, p in r.partitions:
                    try:
                        o = self.state.logs.get_log(t, p).txns.open.get(pid)
                    except LogSourceError:
                        continue
                    if o is not None:
                        idle_since = max(idle_since, now - int((mono - o.last_append) * 1000))
                if now - idle_since > r.timeout_ms:
                    log.warning("write %s: aborting attempt (producer %d) idle for %d ms", write_id, pid,
                                now - idle_since)  # fmt: skip
                    del regs[pid]
                    self._append([_reg_key(write_id, pid)], [None], fsync=False)
                    self._abort_attempt(pid, r.producer_epoch, r.partitions)
                    n += 1
            if not regs:
                self.registrations.pop(write_id, None)
        me = self.state.broker_id
        for lg in self.state.logs.logs():
            role = self.state.role(lg.topic, lg.partition) if lg.txns.open else None
            if role is not None and role.leader != me:
                continue  # the leader's own scan aborts it
            for pid, o in list(lg.txns.open.items()):
                if pid not in registered and (mono - o.last_append) * 1000 > self.max_timeout_ms:
                    log.warning("%s: aborting unregistered transaction of producer %d", lg.name, pid)
                    try:
                        self._marker(lg.topic, lg.partition, pid, o.producer_epoch + 1, ABORT, only_open=True)
                        n += 1
                    except LogSourceError as e:
                        log.warning("abort in %s failed: %s", lg.name, e)
        return n


def _fault_point(name: str) -> None:
    if os.environ.get(FAULT_ENV) == name:
        log.warning("fault injection: SIGKILL at transaction step %r", name)
        os.kill(os.getpid(), signal.SIGKILL)


def append_marker(state: BrokerState, topic: str, partition: int, pid: int, epoch: int, kind: int, *,
                  only_open: bool) -> bool:  # fmt: skip
    """Append one marker to a partition this broker leads; False when ``only_open`` and ``pid`` has nothing open.

    Used by the coordinator for its own partitions and by the WriteTxnMarkers handler for the rest.
    """
    state.check_leader(topic, partition)
    lg = state.logs.get_log(topic, partition)
    if only_open and pid not in lg.txns.open:
        return False
    role = state.role(topic, partition)
    lg.append(encode_marker(kind, pid, epoch), role.leader_epoch if role is not None else 0, control=True)
    state.notify(topic, partition)
    return True


def winners_of(producers: list[Any]) -> dict[int, tuple[int, dict[tuple[str, int], int]]]:
    """The request's producers as {producer id: (epoch, {partition: records})}."""
    return {p.producer_id: (p.producer_epoch, dict(p.partitions)) for p in producers}
