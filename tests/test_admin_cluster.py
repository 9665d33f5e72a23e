"""DeleteRecords, DescribeLogDirs and DeleteGroups in a three-broker cluster (real ZooKeeper, kill -9): the
log start offset reaches every in-sync replica before the answer and survives the leader's death; a group
deleted at its coordinator stays deleted at the next one; requests to the wrong broker get
NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR."""

from __future__ import annotations

import os
import signal
import time

import pytest
from support.cluster import Cluster, wait_for

from pyspark_logsource.broker.log.start_offset import read_log_start_offset
from pyspark_logsource.client import Admin, Producer
from pyspark_logsource.errors import NotCoordinator
from pyspark_logsource.protocol import records_admin_messages as ra

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

TOPIC = "deletable"
OFFSETS = "__consumer_offsets"


def _confluent_delete_records(bootstrap: str, offset: int) -> int:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.delete_records([TopicPartition(TOPIC, 0, offset)], request_timeout=30)
    return next(iter(fut.values())).result(30).low_watermark


def _confluent_read(bootstrap: str, expect: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, 0, -2)])
        out: list[int] = []
        deadline = time.monotonic() + 60
        while len(out) < expect and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m.offset())
        return out
    finally:
        c.close()


def test_delete_records_and_groups_survive_failover(zk_connect, tmp_path):
    # a long replica.lag.time.max.ms: a stopped follower stays in the ISR while DeleteRecords waits for it
    config = {"min.insync.replicas": "2", "replica.lag.time.max.ms": "15000"}
    with Cluster(zk_connect, tmp_path, brokers=3, config=config) as c:
        c.create_topic(TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
        c.wait_full_isr(TOPIC)
        with Producer(c.bootstrap, acks="all") as p:
            for i in range(300):
                p.send(TOPIC, b"v%d" % i, partition=0)
            p.flush(60)
        leader = c.leader(TOPIC, 0)
        followers = [b for b in c.assignment(TOPIC)[0] if b != leader]

        # -- answered only once every ISR replica has the new start (its checkpoint is written)
        assert _confluent_delete_records(c.bootstrap, 120) == 120
        for b in c.assignment(TOPIC)[0]:
            assert read_log_start_offset(c.log_dir(b) / f"{TOPIC}-0") == 120, b

        admin = Admin(c.bootstrap)
        try:
            # -- a follower refuses: NOT_LEADER_OR_FOLLOWER; beyond the HW: OFFSET_OUT_OF_RANGE
            admin._client.refresh_metadata(None)
            resp = admin._client.request(
                ra.DeleteRecordsRequest([ra.DeleteRecordsPartition(TOPIC, 0, 130)]), followers[0]
            )
            assert [(r.error_code, r.low_watermark) for r in resp.partitions] == [(6, -1)]
            resp = admin._client.request(
                ra.DeleteRecordsRequest([ra.DeleteRecordsPartition(TOPIC, 0, 301)]), leader
            )
            assert [(r.error_code, r.low_watermark) for r in resp.partitions] == [(1, -1)]

            # -- an ISR replica that does not fetch: REQUEST_TIMED_OUT after timeout_ms; it catches up after
            os.kill(c.pid(followers[0]), signal.SIGSTOP)
            try:
                resp = admin._client.request(
                    ra.DeleteRecordsRequest([ra.DeleteRecordsPartition(TOPIC, 0, 125)], timeout_ms=300),
                    leader,
                )
                assert [(r.error_code, r.low_watermark) for r in resp.partitions] == [(7, -1)]
                assert followers[0] in c.isr(TOPIC, 0)
            finally:
                os.kill(c.pid(followers[0]), signal.SIGCONT)
            wait_for(
                lambda: read_log_start_offset(c.log_dir(followers[0]) / f"{TOPIC}-0") == 125,
                what="the resumed follower taking log start 125",
            )

            # -- DescribeLogDirs on each replica: the partition with its size, lag 0 once caught up
            for b in c.assignment(TOPIC)[0]:
                d = wait_for(
                    lambda b=b: (
                        lambda r: (
                            r
                            if [(p.topic, p.offset_lag) for p in r.results[0].partitions if p.topic == TOPIC]
                            == [(TOPIC, 0)]
                            else None
                        )
                    )(admin._client.request(ra.DescribeLogDirsRequest({TOPIC: [0]}), b)),
                    what=f"broker {b}'s log dir with {TOPIC}-0 caught up",
                )
                (part,) = d.results[0].partitions
                assert part.size > 0 and not part.is_future

            # -- a group with offsets: its coordinator deletes it; others say NOT_COORDINATOR
            admin.commit_group_offsets("doomed", {(TOPIC, 0): 150})
            admin.commit_group_offsets("kept", {(TOPIC, 0): 160})
            coordinator = wait_for(lambda: admin._client.coordinator("doomed", refresh=True))
            other = next(b for b in c.brokers if b != coordinator)
            resp = admin._client.request(ra.DeleteGroupsRequest(["doomed"]), other)
            assert resp.results == [("doomed", 16)]
            with pytest.raises(NotCoordinator):  # the client raises OffsetDelete's top-level error 16
                admin._client.request(ra.OffsetDeleteRequest("doomed", [(TOPIC, 0)]), other)
            admin.delete_group("doomed")
            assert admin.group_offsets("doomed") == {}
        finally:
            admin.close()

        # -- kill -9 the partition's leader: the new leader starts at 120 too
        c.kill(leader)
        new = c.wait_leader(TOPIC, 0, not_in={leader})
        with Admin(c.bootstrap) as admin:
            assert wait_for(lambda: admin.list_offsets([(TOPIC, 0)], "earliest")) == {(TOPIC, 0): 125}
        assert _confluent_read(c.bootstrap, 175) == list(range(125, 300))
        assert _confluent_delete_records(c.bootstrap, 200) == 200  # the new leader and the remaining ISR
        assert read_log_start_offset(c.log_dir(new) / f"{TOPIC}-0") == 200

        # -- kill -9 the group's coordinator (if it is still alive): the deletion is on the ISR
        offsets_leader = c.leader(OFFSETS, 0)
        if offsets_leader is not None and offsets_leader != leader:
            c.kill(offsets_leader)
            c.wait_leader(OFFSETS, 0, not_in={offsets_leader, leader})
        with Admin(c.bootstrap) as admin:
            assert wait_for(lambda: admin.group_offsets("kept")) == {(TOPIC, 0): 160}
            assert admin.group_offsets("doomed") == {}
