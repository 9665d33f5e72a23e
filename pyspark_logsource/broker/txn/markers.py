"""Transaction markers at a partition leader: when one is written, and the scan for forgotten transactions.

A marker may be sent more than once: a new coordinator completes the decisions
its predecessor may not have finished, and a WriteTxnMarkers request whose
answer was lost is sent again. :func:`append_marker` therefore writes a marker
only when it changes something:

* the producer has a transaction open here (at the marker's epoch or below): the
  marker closes it;
* nothing is open and the marker is an ABORT with an epoch above the producer's
  epoch here: it fences the producer (a zombie attempt's later writes are refused);
* otherwise (a repeat: the transaction was closed by this marker before, or a
  newer epoch owns the producer) nothing is appended and the call succeeds.

So a repeated marker never adds a control batch, and a COMMIT never closes a
transaction it was not meant for (a newer epoch's). A marker is done once it is
on the partition's ISR (:func:`replicated`): a leader failover cannot lose it
after the coordinator recorded its decision complete.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ...errors import LogSourceError
from ...format.control import ABORT, COMMIT, encode_marker
from ...topics import OFFSETS_TOPIC

if TYPE_CHECKING:
    from ..state import BrokerState

log = logging.getLogger(__name__)

#: how long a leader waits for its markers to reach the ISR before answering with an error
MARKER_TIMEOUT_MS = 10_000
#: (topic, partition, producer id, producer epoch, COMMIT or ABORT)
Marker = tuple[str, int, int, int, int]


def marker_needed(state: BrokerState, topic: str, partition: int, pid: int, epoch: int, kind: int) -> bool:
    """Whether a marker would change the partition (see the module docstring); the log must be local."""
    lg = state.logs.get_log(topic, partition)
    o = lg.txns.open.get(pid)
    if o is not None:
        return o.producer_epoch <= epoch
    if kind != ABORT:
        return False
    entry = lg.producer_state.producers.get(pid)
    return entry is None or entry.epoch < epoch


def append_marker(
    state: BrokerState,
    topic: str,
    partition: int,
    pid: int,
    epoch: int,
    kind: int,
    *,
    only_open: bool = False,
) -> bool:
    """Append one marker to a partition this broker leads when it changes something; True when appended.

    ``only_open``: write it only if ``pid`` has a transaction open here (no fencing ABORT).
    Used by the coordinator for the partitions it leads and by the WriteTxnMarkers handler.
    """
    state.check_leader(topic, partition)
    lg = state.logs.get_log(topic, partition)
    if only_open and pid not in lg.txns.open:
        return False
    if not marker_needed(state, topic, partition, pid, epoch, kind):
        return False
    role = state.role(topic, partition)
    info = lg.append(
        encode_marker(kind, pid, epoch), role.leader_epoch if role is not None else 0, control=True
    )
    if (
        topic == OFFSETS_TOPIC and state.groups is not None
    ):  # the group coordinator applies or drops its offsets
        state.groups.complete_txn(partition, pid, kind == COMMIT, info.base_offset)
    state.notify(topic, partition)
    if state.replication is not None:
        state.replication.after_append(topic, partition)  # an ISR of the leader alone moves the HW now
    return True


async def replicated(
    state: BrokerState, topic: str, partition: int, timeout_ms: int = MARKER_TIMEOUT_MS
) -> None:
    """Wait until everything this leader has of the partition is on its ISR (a marker counts once it is, as
    Kafka writes markers with acks=all); a no-op on a single broker. A repeated marker that appended
    nothing waits too, so its answer also confirms the first copy."""
    if state.replication is None:
        return
    end = state.logs.get_log(topic, partition).log_end_offset
    await state.replication.wait_for_commit(topic, partition, end, timeout_ms)


def abort_forgotten(state: BrokerState, max_timeout_ms: int, registered: set[int]) -> int:
    """ABORT open transactions of partitions this broker leads that nobody registered, idle past the maximum.

    Staged data a coordinator lost track of (an unregistered producer, a decision that
    was never made) then blocks ``read_committed`` readers for at most
    ``transaction.max.timeout.ms``. Every broker runs it for the partitions it leads.
    """
    mono = time.monotonic()
    me = state.broker_id
    n = 0
    for lg in state.logs.logs():
        if not lg.txns.open:
            continue
        role = state.role(lg.topic, lg.partition)
        if role is not None and role.leader != me:
            continue  # the leader's own scan aborts it
        for pid, o in list(lg.txns.open.items()):
            if pid not in registered and (mono - o.last_append) * 1000 > max_timeout_ms:
                log.warning("%s: aborting unregistered transaction of producer %d", lg.name, pid)
                try:
                    append_marker(
                        state, lg.topic, lg.partition, pid, o.producer_epoch + 1, ABORT, only_open=True
                    )
                    n += 1
                except LogSourceError as e:
                    log.warning("abort in %s failed: %s", lg.name, e)
    return n
