"""Replication between brokers is never throttled by client quotas: with every user held to a tiny fetch
and request quota, followers still copy what an acks=all producer writes, while a consumer is throttled."""

from __future__ import annotations

import time

import pytest
from support.brokers import WireClient
from support.cluster import Cluster, wait_for
from support.quota_clients import Producing, rate

from pyspark_logsource.broker.quotas.model import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
)
from pyspark_logsource.client import Producer
from pyspark_logsource.protocol import FetchPartition, FetchRequest
from pyspark_logsource.protocol import quota_messages as qm

MB = 1_000_000

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


def test_followers_catch_up_under_a_tiny_quota_for_every_user(zk_connect, tmp_path):
    with Cluster(zk_connect, tmp_path, brokers=2, thread_brokers={1, 2}) as c:
        c.create_topic("q", 1, 2)
        c.wait_full_isr("q")
        for b in c.brokers.values():  # every broker: followers fetch from the leader, ANONYMOUS as anyone
            quotas = b._broker.state.quotas
            quotas.set_entity(
                QuotaEntity(DEFAULT, None), {CONSUMER_BYTE_RATE: 1000, REQUEST_PERCENTAGE: 0.01}
            )
            quotas.set_entity(QuotaEntity(DEFAULT, "bulk"), {REQUEST_PERCENTAGE: 10_000})
        leader = c.leader("q", 0)
        follower = next(b for b in c.brokers if b != leader)
        with Producer(c.bootstrap, acks="all", client_id="bulk") as p:
            for _ in range(2000):
                p.send("q", b"r" * 1000, partition=0)
            p.flush(60)
        # 2 MB through the follower: at the 1 KB/s every user has it would take over half an hour
        wait_for(lambda: c.partition_bytes(follower, "q", 0)[1] == 2000, 30, what="the follower's copy")
        assert c.isr("q", 0) == sorted(c.brokers)
        leader_host = c.brokers[leader].bootstrap
        with WireClient(leader_host, client_id="reader") as w:  # a consumer is held all the same
            resp = w.request(FetchRequest([FetchPartition("q", 0, 0, 1 << 20)], max_wait_ms=0))
        print(f"the follower copied 2 MB; a consumer: throttle {resp.throttle_time_ms} ms, no data")
        assert resp.throttle_time_ms > 0 and not resp.partitions  # over its quota: no data


def test_a_quota_altered_on_one_broker_holds_a_producer_on_another_within_two_seconds(zk_connect, tmp_path):
    """AlterClientQuotas sent to one broker (ZooKeeper, then /config/changes) throttles a producer writing to
    the other broker's partition within 2 s: raised from 1 to 3 MB/s, then lowered back to 1."""
    with Cluster(zk_connect, tmp_path, brokers=2) as c:
        c.create_topic("qx", 1, 1)
        leader = c.leader("qx", 0)
        other = next(b for b in c.brokers if b != leader)

        def alter(mb: float) -> None:
            entry = qm.QuotaAlteration(((qm.CLIENT_ID, "mover"),), [qm.QuotaOp(PRODUCER_BYTE_RATE, mb * MB)])
            with WireClient(c.brokers[other].bootstrap) as w:
                resp = w.request(qm.AlterClientQuotasRequest([entry], False))
            assert [r.error_code for r in resp.entries] == [0]

        alter(1)
        p = Producing(c.brokers[leader].bootstrap, "qx", "mover").start()
        time.sleep(5)
        t_up = time.monotonic() - p.t0
        alter(3)
        time.sleep(6)
        t_down = time.monotonic() - p.t0
        alter(1)
        time.sleep(7)
        p.finish()
        first = rate(p.acked, p.t0, 1, t_up)
        raised = rate(p.acked, p.t0, t_up + 2, t_down)
        lowered = rate(p.acked, p.t0, t_down + 3, t_down + 7)
        print(f"1 MB/s: {first / MB:.2f}; raised to 3: {raised / MB:.2f}; back to 1: {lowered / MB:.2f} MB/s")
        assert 0.9 * MB <= first <= 1.1 * MB
        assert raised >= 2 * MB
        assert lowered <= 1.3 * MB
