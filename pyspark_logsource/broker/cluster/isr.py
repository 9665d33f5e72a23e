"""ISR changes made by a partition's leader (Kafka's Partition.maybeShrinkIsr / maybeExpandIsr).

A follower leaves the in-sync replica set when it has not caught up with the
leader's log end for ``replica.lag.time.max.ms``, and rejoins once it has
fetched up to the high watermark and holds every earlier epoch (its LEO is at
or past the start of the leader's epoch). The leader writes the new ISR into
the partition-state znode ``/brokers/topics/<t>/partitions/<p>/state`` with a
set conditioned on the znode version it last read (``PartitionRole.zk_version``),
so a controller's newer write (a new leader, say) is never overwritten. On a
version conflict it re-reads the znode: if it still leads at the same epoch
it writes again on the new version (through the ZooKeeper client's one retry
object, which also covers connection loss);
otherwise the role change reaches it through the member's watch and the
update is dropped. ZooKeeper calls run in an executor thread; the results are
applied on the event loop: the new ISR goes to the replica manager's callback,
which hands the new role to ``BrokerState.update_role`` (the one owner of roles),
and from there to :meth:`.partition.Partition.set_role`. When a follower is in or
out of sync is :class:`.partition.Partition`'s rule.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kazoo.retry import ForceRetryError

from .partition import Partition, ReplicationSettings, now_ms
from .paths import LeaderAndIsr, decode_state, encode_state, partition_state_path
from .zk import ConditionFailed

if TYPE_CHECKING:
    from ..state import PartitionRole

log = logging.getLogger(__name__)

#: (partition, the role the write was based on, the new ISR, the znode's new version)
IsrWritten = Callable[[Partition, "PartitionRole", list[int], int], None]


class IsrUpdater:
    """Shrinks (on a timer) and expands (on follower fetches) the ISR of the partitions a broker leads.

    ``led()`` gives the partitions this broker leads; ``written`` is called on the event loop with each
    ISR written to ZooKeeper.
    """

    def __init__(
        self,
        settings: ReplicationSettings,
        zk: Any,
        loop: asyncio.AbstractEventLoop,
        led: Callable[[], Iterable[Partition]],
        written: IsrWritten,
    ) -> None:
        self.settings = settings
        self.zk = zk
        self.loop = loop
        self.led = led
        self.written = written

    # ------------------------------------------------------------ when

    async def run(self) -> None:
        """Check every led partition for lagging followers, every half ``replica.lag.time.max.ms``."""
        lag_max = self.settings.lag_time_max_ms
        interval = max(0.05, lag_max / 2000)
        while True:
            await asyncio.sleep(interval)
            now = now_ms()
            for lp in list(self.led()):
                try:
                    out = lp.lagging(now, lag_max)
                    if out:
                        log.info(
                            "broker %d: %s-%d followers %s are out of sync (lag > %d ms); shrinking the ISR",
                            self.settings.broker_id,
                            lp.role.topic,
                            lp.role.partition,
                            out,
                            lag_max,
                        )
                        self.submit(lp, remove=out)
                except Exception:  # the loop must outlive one partition's trouble
                    log.exception("ISR check of %s-%d failed", lp.role.topic, lp.role.partition)

    def request_expand(self, lp: Partition, broker_id: int) -> None:
        """Add a caught-up follower to the ISR."""
        log.info(
            "broker %d: follower %d caught up on %s-%d (leo %d); expanding the ISR",
            self.settings.broker_id,
            broker_id,
            lp.role.topic,
            lp.role.partition,
            lp.followers[broker_id].leo,
        )
        self.submit(lp, add=[broker_id])

    # ------------------------------------------------------------ how

    def submit(self, lp: Partition, *, remove: list[int] = (), add: list[int] = ()) -> None:
        """Remove / add ISR members of ``lp`` (one write in flight per partition; later checks redo a dropped one)."""
        if lp.isr_update_pending:
            return
        lp.isr_update_pending = True
        role = lp.role
        fut = self.loop.run_in_executor(None, self._write, role, list(remove), list(add))
        fut.add_done_callback(lambda f: self._done(lp, role, f))

    def _write(self, role: Any, remove: list[int], add: list[int]) -> tuple[list[int], int] | None:
        """In a thread: the conditional set, redone on a newer version of the same leadership (its ISR
        with our change applied); (isr, new version), or None when the leadership moved on."""
        path = partition_state_path(role.topic, role.partition)
        me = self.settings.broker_id
        current = [role.isr, role.zk_version, role.controller_epoch]

        def attempt() -> tuple[list[int], int] | None:
            isr, version, controller_epoch = current
            new_isr = [b for b in isr if b not in remove] + [b for b in add if b not in isr]
            if new_isr == isr:
                return isr, version
            if not new_isr:  # never written: an empty ISR leaves the partition no clean leader ever again
                return None
            data = encode_state(LeaderAndIsr(me, role.leader_epoch, new_isr, controller_epoch))
            try:
                return new_isr, self.zk.set_if(path, data, version).version
            except ConditionFailed:
                got = self.zk.get(path)
                if got is None:
                    return None  # the topic is being deleted
                state = decode_state(got[0])
                if state.leader != me or state.leader_epoch != role.leader_epoch:
                    return None  # a controller moved the partition on: its change reaches us by the watch
                current[:] = [state.isr, got[1].version, state.controller_epoch]
                raise ForceRetryError(f"{path} changed to version {got[1].version}") from None

        try:
            # a copy of the client's one retry policy: kazoo's retry object is not re-entrant
            return self.zk.retry.copy()(attempt)
        except Exception as e:
            log.warning(
                "ISR update of %s-%d (remove %s, add %s) failed: %r",
                role.topic,
                role.partition,
                remove,
                add,
                e,
            )
            return None

    def _done(self, lp: Partition, role: Any, fut: asyncio.Future) -> None:
        lp.isr_update_pending = False
        result = None if fut.cancelled() or fut.exception() is not None else fut.result()
        if result is not None:
            self.written(lp, role, *result)
