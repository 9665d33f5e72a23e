"""Replication between brokers: the replica manager, fetcher and ISR updates, with real sockets, files and ZooKeeper.

Brokers here run in threads of the test process so the test can hand them their roles directly
(``become_leader`` / ``on_become_follower``, what the ZooKeeper member does in cluster mode); the
ISR changes the leaders make go to a real ZooKeeper's partition-state znode. The same machinery
under the controller, with broker processes and kill -9, is tested by the cluster tests.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from support.brokers import WireClient
from support.logdata import make_batch

from pyspark_logsource.broker.cluster.paths import partition_state_path
from pyspark_logsource.broker.cluster.replicas import ReplicaManager
from pyspark_logsource.broker.cluster.zk import ZkClient
from pyspark_logsource.broker.embedded import EmbeddedBroker
from pyspark_logsource.broker.log.hw_checkpoint import HW_CHECKPOINT_FILE
from pyspark_logsource.broker.state import PartitionRole
from pyspark_logsource.errors import (
    FencedLeaderEpoch,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    RequestTimedOut,
)
from pyspark_logsource.format import batch as fmt
from pyspark_logsource.format.header import LATEST_TIMESTAMP
from pyspark_logsource.protocol import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ProducePartitionData,
    ProduceRequest,
)
from pyspark_logsource.protocol.epoch_messages import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
)

pytestmark = pytest.mark.cluster

TOPIC = "rep"
FAST = {"replica.lag.time.max.ms": "800", "replica.fetch.wait.max.ms": "100"}


def wait_for(cond, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Node:
    """One broker in a thread with a replica manager and its own ZooKeeper session."""

    def __init__(self, broker_id: int, base: Path, zk_connect: str, **config: str) -> None:
        self.id = broker_id
        self.dir = base / f"broker-{broker_id}"
        self.zk_connect = zk_connect
        self.eb = EmbeddedBroker(self.dir, config={"broker.id": broker_id, **FAST, **config})
        self.zk: ZkClient | None = None

    def start(self) -> Node:
        self.eb.start()
        self.zk = ZkClient(self.zk_connect, 4000)
        self.zk.start()
        self.call(
            lambda: setattr(self.state, "replication", ReplicaManager(self.state, self.zk, self.eb._loop))
        )
        return self

    def stop(self) -> None:
        self.call(lambda: self.state.replication.close())
        self.eb.stop()
        self.zk.stop()

    @property
    def state(self):
        return self.eb._broker.state

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.eb.port

    def call(self, fn):
        """Run ``fn`` on the broker's event loop thread (where the role hooks run) and return its result."""

        async def run():
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.eb._loop).result(10)

    def lead(self, role: PartitionRole) -> None:
        self.call(lambda: self.state.become_leader(role))

    def follow(self, role: PartitionRole, leader: Node) -> None:
        def go():
            self.state.roles[(role.topic, role.partition)] = role
            self.state.replication.on_become_follower(role, *leader.address)

        self.call(go)

    def log(self, partition: int = 0):
        return self.state.logs.get_log(TOPIC, partition)

    def log_bytes(self, partition: int = 0) -> bytes:
        return b"".join(Path(s.log_path).read_bytes() for s in self.log(partition).segments)


@pytest.fixture
def nodes(tmp_path, zk_connect):
    started: list[Node] = []

    def make(*ids: int, **config: str) -> list[Node]:
        for i in ids:
            started.append(Node(i, tmp_path, zk_connect, **config).start())
        return started[-len(ids) :]

    yield make
    for n in started:
        if n.eb.running:
            n.stop()


def write_state(zk_connect: str, leader: int, epoch: int, isr: list[int], partition: int = 0) -> int:
    """The partition-state znode as a controller writes it; returns its version."""
    kz = KazooClient(zk_connect)
    kz.start(10)
    try:
        path = partition_state_path(TOPIC, partition)
        data = json.dumps(
            {"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": epoch, "isr": isr}
        ).encode()
        if kz.exists(path):
            return kz.set(path, data).version
        kz.create(path, data, makepath=True)
        return 0
    finally:
        kz.stop()
        kz.close()


def znode_isr(zk_connect: str, partition: int = 0) -> list[int]:
    kz = KazooClient(zk_connect)
    kz.start(10)
    try:
        return json.loads(kz.get(partition_state_path(TOPIC, partition))[0])["isr"]
    finally:
        kz.stop()
        kz.close()


def role(leader: int, epoch: int, isr: list[int], replicas: list[int], version: int) -> PartitionRole:
    return PartitionRole(TOPIC, 0, leader, epoch, list(isr), list(replicas), version, 1)


def produce(client: WireClient, n: int, acks: int, size: int = 20):
    return client.produce(TOPIC, 0, make_batch(0, n, size=size), acks=acks)


def test_follower_catches_up_byte_for_byte_acks_all_waits_and_isr_moves_by_lag(nodes, zk_connect):
    # a lag bound the checks of the stopped follower's phase finish within, even on a busy machine
    leader, follower = nodes(1, 2, **{"replica.lag.time.max.ms": "2500"})
    leader.call(lambda: leader.state.logs.create_log(TOPIC, 0, {"min.insync.replicas": "2"}))
    v = write_state(zk_connect, 1, 1, [1, 2])
    leader.lead(role(1, 1, [1, 2], [1, 2], v))
    follower.follow(role(1, 1, [1, 2], [1, 2], v), leader)
    with WireClient(leader.eb.bootstrap) as c:
        for i in range(20):
            r = produce(c, 5, acks=-1, size=20 + i)
            assert r.error_code == 0
            # acknowledged with acks=all: the follower has it already
            assert follower.log().log_end_offset >= r.base_offset + 5
        assert leader.log().high_watermark == leader.log().log_end_offset == 100
        # pipelined acks=all produces are appended at once and answered in request order, after the
        # replicas have them (the client's connection checks the order of correlation ids)
        for _ in range(5):
            c.send(ProduceRequest([ProducePartitionData(TOPIC, 0, bytes(make_batch(0, 2)))], acks=-1))
        c.send(ListOffsetsRequest([ListOffsetsPartition(TOPIC, 0, LATEST_TIMESTAMP)]))
        answers = [c.receive() for _ in range(6)]
        assert [a.partitions[0].base_offset for a in answers[:5]] == [100, 102, 104, 106, 108]
        assert answers[5].partitions[0].offset == 110 and follower.log().log_end_offset >= 110
        wait_for(
            lambda: follower.log().high_watermark == 110, what="the follower learning the high watermark"
        )
        assert follower.log_bytes() == leader.log_bytes()
        assert follower.log().epochs.entries() == leader.log().epochs.entries() == [(1, 0)]

        # the follower stops fetching: acks=1 appends stay above the high watermark, unseen by consumers
        follower.call(lambda: follower.state.replication.on_stop_replica(TOPIC, 0, False))
        for _ in range(3):
            assert produce(c, 5, acks=1).error_code == 0
        lg = leader.log()
        assert (lg.log_end_offset, lg.high_watermark) == (125, 110)
        fetched = c.fetch(TOPIC, 0, 110)
        assert fetched.high_watermark == 110 and len(fetched.records) == 0
        assert [
            r.offset for b in fmt.decode_all(bytes(c.fetch(TOPIC, 0, 90).records)) for r in b.records()
        ] == list(range(90, 110))
        assert c.list_offset(TOPIC, 0, LATEST_TIMESTAMP).offset == 110

        # after replica.lag.time.max.ms it leaves the ISR (written to ZooKeeper), and the HW moves on
        wait_for(lambda: znode_isr(zk_connect) == [1], what="the ISR shrinking to [1]")
        wait_for(lambda: lg.high_watermark == 125, what="the high watermark moving with the ISR of one")
        assert leader.state.roles[(TOPIC, 0)].isr == [1]
        r = produce(c, 5, acks=-1)
        assert r.error_code == NotEnoughReplicas.code, r  # min.insync.replicas=2, nothing appended
        assert lg.log_end_offset == 125

        # it resumes, catches up and rejoins; acks=all works again
        follower.follow(role(1, 1, [1, 2], [1, 2], v), leader)
        wait_for(lambda: znode_isr(zk_connect) == [1, 2], what="the ISR expanding to [1, 2]")
        wait_for(lambda: leader.state.roles[(TOPIC, 0)].isr == [1, 2], what="the leader's ISR")
        r = produce(c, 5, acks=-1)
        assert r.error_code == 0 and follower.log().log_end_offset >= 130
    wait_for(lambda: follower.log_bytes() == leader.log_bytes(), what="identical logs")


def test_acks_all_times_out_when_the_isr_does_not_fetch(nodes, zk_connect):
    (leader,) = nodes(1)
    v = write_state(zk_connect, 1, 1, [1, 2])
    leader.lead(role(1, 1, [1, 2], [1, 2], v))
    with WireClient(leader.eb.bootstrap) as c:
        req = ProduceRequest(
            [ProducePartitionData(TOPIC, 0, bytes(make_batch(0, 3)))], acks=-1, timeout_ms=300
        )
        r = c.request(req).partitions[0]
    assert (
        r.error_code == RequestTimedOut.code and r.base_offset == 0
    )  # RequestTimedOut: appended, not committed in time
    assert leader.log().high_watermark == 0


def test_acks_all_gets_not_enough_replicas_after_append_when_the_isr_shrinks_while_it_waits(
    nodes, zk_connect
):
    (leader,) = nodes(1)  # broker 2 is in the ISR but never fetches
    leader.call(lambda: leader.state.logs.create_log(TOPIC, 0, {"min.insync.replicas": "2"}))
    v = write_state(zk_connect, 1, 1, [1, 2])
    leader.lead(role(1, 1, [1, 2], [1, 2], v))
    with WireClient(leader.eb.bootstrap) as c:
        req = ProduceRequest(
            [ProducePartitionData(TOPIC, 0, bytes(make_batch(0, 3)))], acks=-1, timeout_ms=20000
        )
        r = c.request(req).partitions[0]
    # appended, then committed by an ISR of one (below min.insync.replicas): Kafka's error 20
    assert (r.error_code, r.base_offset) == (NotEnoughReplicasAfterAppend.code, 0)
    assert znode_isr(zk_connect) == [1] and leader.log().high_watermark == 3


def test_kip101_returning_follower_truncates_to_the_leaders_epoch_end_not_its_high_watermark(
    nodes, zk_connect
):
    a, b = nodes(1, 2)
    v = write_state(zk_connect, 1, 1, [1, 2])
    a.lead(role(1, 1, [1, 2], [1, 2], v))
    b.follow(role(1, 1, [1, 2], [1, 2], v), a)
    with WireClient(a.eb.bootstrap) as c:
        assert produce(c, 1, acks=-1).error_code == 0  # m1, committed
        assert produce(c, 1, acks=-1).error_code == 0  # m2, committed: on both
    wait_for(lambda: b.log().high_watermark == 2, what="b's high watermark")

    # Scenario 1 (KIP-101): b restarts with a high watermark checkpoint that lags its log (what a
    # crash leaves: it is written every few seconds). It must keep m2 instead of truncating to 1.
    b.stop()
    (b.dir / "logs" / HW_CHECKPOINT_FILE).write_text(f"0\n1\n{TOPIC} 0 1\n")
    b.start()

    def follow_and_look():
        b.state.replication.on_become_follower(role(1, 1, [1, 2], [1, 2], v), *a.address)
        return b.log().log_end_offset, b.log().high_watermark  # before its fetcher ran

    assert b.call(follow_and_look) == (2, 1)
    wait_for(lambda: b.log().high_watermark == 2, what="b rejoining")
    assert b.log().log_end_offset == 2 and b.log_bytes() == a.log_bytes()

    # Scenario 2: b stops fetching; a appends m3 that nobody else has (never committed); a "dies":
    # b leads epoch 2 and appends m4 at offset 2. a returns as follower: it must drop m3 and take m4.
    b.call(lambda: b.state.replication.on_stop_replica(TOPIC, 0, False))
    with WireClient(a.eb.bootstrap) as c:
        assert produce(c, 1, acks=1).error_code == 0  # m3 at offset 2, epoch 1
    assert a.log().log_end_offset == 3
    v = write_state(zk_connect, 2, 2, [2])
    b.lead(role(2, 2, [2], [1, 2], v))
    with WireClient(b.eb.bootstrap) as c:
        r = produce(c, 2, acks=-1, size=33)  # m4, m5
        assert (r.error_code, r.base_offset) == (0, 2)
    a.follow(role(2, 2, [2], [1, 2], v), b)
    wait_for(lambda: a.log().log_end_offset == 4 and a.log_bytes() == b.log_bytes(), what="a matching b")
    assert a.log().epochs.entries() == b.log().epochs.entries() == [(1, 0), (2, 2)]
    headers = [h for _, h in fmt.iter_headers(a.log_bytes())]
    assert [(h.base_offset, h.leader_epoch) for h in headers] == [(0, 1), (1, 1), (2, 2)]
    wait_for(lambda: znode_isr(zk_connect) == [2, 1], what="a rejoining b's ISR")

    # OffsetForLeaderEpoch (API 23) on the new leader gives Kafka's clients the same answers
    with WireClient(b.eb.bootstrap) as c:

        def ask(epoch: int, current: int = -1, replica_id: int = -1) -> tuple[int, int, int]:
            req = OffsetForLeaderEpochRequest(
                [OffsetForLeaderEpochPartition(TOPIC, 0, epoch, current)], replica_id
            )
            r = c.request(req).partitions[0]
            return r.error_code, r.leader_epoch, r.end_offset

        assert ask(1) == (0, 1, 2)  # epoch 1 ended where epoch 2 began: a's offset 2 was truncated there
        assert ask(2, current=2) == (0, 2, 4) == ask(2, replica_id=1)
        assert ask(0) == (0, 0, 0)  # older than any epoch: it ends where the first begins
        assert ask(1, current=1)[0] == FencedLeaderEpoch.code
