"""Replication between broker processes under the controller: real ZooKeeper, SIGSTOP, kill -9.

One three-broker cluster runs the phases in order (the wall time is in the start and the failover):
the followers catch up byte for byte; stopped followers leave consumers below the high watermark,
leave the ISR after ``replica.lag.time.max.ms`` (acks=all then gets NotEnoughReplicas) and rejoin
when they resume; and KIP-101's case: a leader killed -9 with a write no follower has comes back,
truncates it by leader epoch (not to its high watermark) and ends byte-identical to the new leader.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from support.brokers import WireClient
from support.cluster import Cluster, wait_for

from pyspark_logsource.client import Producer
from pyspark_logsource.errors import NotEnoughReplicas
from pyspark_logsource.format import batch as fmt
from pyspark_logsource.format.header import LATEST_TIMESTAMP

pytestmark = pytest.mark.cluster

TOPIC = "replicated"


def records_of(resp) -> list:
    return [r for b in fmt.decode_all(bytes(resp.records)) for r in b.records()]


def test_replication_under_the_controller(zk_connect, tmp_path):
    with Cluster(zk_connect, tmp_path, brokers=3, config={"replica.lag.time.max.ms": "1500"}) as c:
        c.create_topic(TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
        c.wait_full_isr(TOPIC)
        with Producer(c.bootstrap, acks="all") as p:
            futs = [p.send(TOPIC, b"v%d" % i, partition=0) for i in range(200)]
            p.flush(60)
        assert [f.result()[1] for f in futs] == list(range(200))
        hws = c.assert_replicas_identical(TOPIC)  # the followers caught up: byte for byte below the HW
        assert hws == {0: 200}

        leader = c.leader(TOPIC, 0)
        followers = [b for b in c.assignment(TOPIC)[0] if b != leader]
        with WireClient(c.brokers[leader].bootstrap) as w:
            # -- the followers stop fetching (SIGSTOP): what the leader appends stays above the HW
            for f in followers:
                os.kill(c.pid(f), signal.SIGSTOP)
            try:
                r = w.produce(TOPIC, 0, fmt.encode([b"above-hw"] * 3), acks=1)
                assert (r.error_code, r.base_offset) == (0, 200)
                fetched = w.fetch(TOPIC, 0, 198)
                latest = w.list_offset(TOPIC, 0, LATEST_TIMESTAMP).offset
                # The HW stays at 200 while the stopped followers are in the ISR; they leave it after
                # replica.lag.time.max.ms (or their 2 s sessions), which a loaded machine can spend before
                # these reads. The leader writes a smaller ISR to ZooKeeper before it applies it, so an ISR
                # still full in ZooKeeper after the reads means it was full during them.
                if c.isr(TOPIC, 0) != [leader]:
                    assert (fetched.high_watermark, latest) == (200, 200)
                    got = records_of(fetched)  # from the start of the batch holding 198, and nothing at 200+
                    assert got[-1].offset == 199 and [x.value for x in got if x.offset >= 198] == [
                        b"v198",
                        b"v199",
                    ]
                # -- after replica.lag.time.max.ms (or their sessions' end) the ISR is the leader alone
                wait_for(
                    lambda: c.isr(TOPIC, 0) == [leader], timeout=30, what="the ISR shrinking to the leader"
                )
                # the leader applies the ISR it wrote once ZooKeeper answers it (maybe after our read)
                wait_for(
                    lambda: w.fetch(TOPIC, 0, 200).high_watermark == 203, timeout=15, what="the HW at 203"
                )
                r = w.produce(TOPIC, 0, fmt.encode([b"refused"]), acks=-1)
                assert r.error_code == NotEnoughReplicas.code
            finally:
                for f in followers:
                    os.kill(c.pid(f), signal.SIGCONT)
            # -- they resume, catch up and rejoin; acks=all works again
            c.wait_full_isr(TOPIC, timeout=60)
            assert c.leader(TOPIC, 0) == leader
            r = w.produce(TOPIC, 0, fmt.encode([b"after-rejoin"]), acks=-1)
            assert (r.error_code, r.base_offset) == (0, 203)
        c.assert_replicas_identical(TOPIC)

        # -- KIP-101: the leader appends a record no follower fetches, and dies (kill -9) before the
        # followers leave its ISR; a follower becomes leader at a new epoch and takes new writes.
        # A follower fetch parked at the leader before SIGSTOP is answered by the next append (the
        # answer waits in the stopped follower's socket and is appended after SIGCONT: Kafka does the
        # same), so a first record takes that answer and "lost-uncommitted" reaches no follower.
        # If the followers left the ISR before the kill (a slow machine: replica.lag.time.max.ms),
        # no clean election is possible: the old leader comes back and the case runs again.
        for attempt in range(3):
            old = c.leader(TOPIC, 0)
            followers = [b for b in c.assignment(TOPIC)[0] if b != old]
            epoch_before = c.partition_state(TOPIC, 0)["leader_epoch"]
            with WireClient(c.brokers[old].bootstrap) as w:
                for f in followers:
                    os.kill(c.pid(f), signal.SIGSTOP)
                try:
                    assert w.produce(TOPIC, 0, fmt.encode([b"takes-parked-fetches"]), acks=1).error_code == 0
                    time.sleep(0.15)  # past replica.fetch.wait.max.ms: no follower fetch is still parked
                    lost = b"lost-uncommitted-%d" % attempt  # an earlier attempt's is committed by its leader
                    r = w.produce(TOPIC, 0, fmt.encode([lost]), acks=1)
                    assert r.error_code == 0
                    lost_offset = r.base_offset
                    c.kill(old, wait_deregistered=False)
                    isr_at_death = c.isr(TOPIC, 0)  # the dead leader writes no more
                finally:
                    for f in followers:
                        os.kill(c.pid(f), signal.SIGCONT)
            if set(isr_at_death) & set(followers):
                break
            c.start(old)
            c.wait_full_isr(TOPIC, timeout=60)
        else:
            pytest.fail("the followers left the ISR before the leader's kill in every attempt")
        new = c.wait_leader(TOPIC, 0, not_in={old}, timeout=60)
        assert c.partition_state(TOPIC, 0)["leader_epoch"] > epoch_before
        with Producer(c.bootstrap, acks="all") as p:
            fut = p.send(TOPIC, b"by-the-new-leader", partition=0)
            p.flush(60)
        new_offset = fut.result()[1]
        assert new_offset <= lost_offset  # the uncommitted record's offset (or below), now another record's
        c.start(old)  # it returns as a follower: its lost offset diverges (epoch), it must truncate it
        c.wait_full_isr(TOPIC, timeout=60)
        c.assert_replicas_identical(TOPIC)
        got, end = c.partition_bytes(old, TOPIC, 0)
        ref, ref_end = c.partition_bytes(new, TOPIC, 0)
        assert (end, got) == (ref_end, ref)  # the whole logs, not only below the HW
        values = [r.value for b in fmt.decode_all(got) for r in b.records()]
        assert lost not in values and values[new_offset] == b"by-the-new-leader"
        assert b"refused" not in values
        log_text = c.broker_log(old)
        assert "diverged from leader" in log_text, log_text[-3000:]
