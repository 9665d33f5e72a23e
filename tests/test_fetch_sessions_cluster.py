"""Fetch sessions in a cluster: a consumer with sessions (kafka-python 3.0, one session per broker) across
the kill -9 of a partition leader. Its session on the dead broker is gone with it; on the new leader it
starts a full fetch, and the sessions elsewhere see NOT_LEADER for the partitions that moved (an error is
always answered) and forget them. Nothing acknowledged is missed.
"""

from __future__ import annotations

import logging
import time

import pytest
from support.cluster import Cluster

from pyspark_logsource.client import Producer

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]


def test_kafka_python_sessions_across_a_leader_kill(zk_connect, tmp_path, caplog):
    from kafka import KafkaConsumer, TopicPartition

    n = 6
    with Cluster(zk_connect, tmp_path, brokers=3, config={"min.insync.replicas": "2"}) as c:
        c.create_topic("t", partitions=n, replication_factor=3, config={"min.insync.replicas": "2"})
        c.wait_full_isr("t")
        caplog.set_level(logging.DEBUG, logger="kafka.consumer.fetcher")
        cons = KafkaConsumer(
            bootstrap_servers=c.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
            metadata_max_age_ms=1000,
        )
        want: set[str] = set()
        got: list[str] = []

        def drain(timeout: float = 60) -> None:
            deadline = time.monotonic() + timeout
            while len(set(got)) < len(want) and time.monotonic() < deadline:
                for recs in cons.poll(timeout_ms=200).values():
                    got.extend(r.value.decode() for r in recs)

        try:
            cons.assign([TopicPartition("t", p) for p in range(n)])
            with Producer(c.bootstrap, acks="all") as p:
                for rnd in range(6):
                    if rnd == 3:
                        victim = c.leader("t", 0)
                        c.kill(victim)
                        c.wait_leader("t", 0, not_in=[victim])
                    for i in range(n * 5):
                        v = f"r{rnd}-{i}"
                        p.send("t", v, partition=i % n)
                        want.add(v)
                    p.flush(60)
                    drain()
                    assert set(got) == want, f"round {rnd}: missing {sorted(want - set(got))[:5]}"
        finally:
            cons.close()
    assert len(got) == len(want)  # and none twice
    text = caplog.text
    assert "created a new incremental fetch session" in text
    assert "sent an incremental fetch response for session" in text
    assert "invalid full fetch response" not in text and "invalid incremental" not in text
