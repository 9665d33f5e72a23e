"""Our clients' group requests in a 3-broker cluster: the coordinator is found, not assumed.

The clients are given only the address of a broker that does not coordinate the group; the group's
coordinator (the leader of its ``__consumer_offsets`` partition) is what FindCoordinator names. When
that broker is killed, the next request answers NotCoordinator or loses its connection, and the clients
look the coordinator up again: the new leader of the partition, with the group's offsets.
"""

from __future__ import annotations

import threading
import time

import pytest
from support.cluster import Cluster, wait_for

from pyspark_logsource.client import Admin, Consumer, Producer

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


def test_group_requests_go_to_a_coordinator_that_is_not_the_bootstrap_broker(zk_connect, tmp_path):
    with Cluster(zk_connect, tmp_path, brokers=3) as c:
        c.create_topic("g", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
        c.wait_full_isr("g")
        with Admin(c.bootstrap) as a:
            first = wait_for(lambda: a._client.coordinator("grp", refresh=True), what="a coordinator")
        only3 = c.brokers[next(b for b in (3, 2, 1) if b != first)].bootstrap
        with Producer(only3, acks="all") as p:
            for i in range(30):
                p.send("g", str(i), partition=i % 3)
            p.flush(30)
        with Admin(only3) as admin:
            coordinator = admin._client.coordinator("grp")
            assert coordinator == first and only3 != c.brokers[coordinator].bootstrap
            with Consumer(only3, group_id="grp", enable_auto_commit=False) as cons:
                cons.subscribe(["g"])
                got = []
                deadline = time.monotonic() + 60
                while len(got) < 30 and time.monotonic() < deadline:
                    got.extend(cons.poll(500))
                assert sorted(int(m.value) for m in got) == list(range(30))
                cons.commit()
                assert admin.group_offsets("grp") == {("g", 0): 10, ("g", 1): 10, ("g", 2): 10}
                d = admin.describe_group("grp")
                assert d.state == "Stable" and len(d.members) == 1
            # the coordinator dies: another broker coordinates, with the group's replicated offsets;
            # the clients find it again
            c.kill(coordinator)
            # the admin's cached coordinator of "grp" is dead: the request is re-routed, not failed
            assert admin.group_offsets("grp") == {("g", 0): 10, ("g", 1): 10, ("g", 2): 10}
            assert admin._client.coordinator("grp") != coordinator
            with Consumer(only3, group_id="grp2", enable_auto_commit=False) as cons:
                cons.assign([("g", 0)])
                cons.commit({("g", 0): 5})
                assert cons.committed(("g", 0)) == 5
            assert admin.group_offsets("grp2") == {("g", 0): 5}
            assert admin._client.coordinator("grp2") not in (coordinator, None)

        # A partition whose only replica is down has no leader: a consumer that starts then waits (within
        # its request timeout, the metadata refreshed between tries) and reads once the broker is back,
        # as Kafka's consumer treats LEADER_NOT_AVAILABLE as retriable.
        c.create_topic("solo", partitions=1, replication_factor=1)
        lead = c.wait_leader("solo", 0)
        with Producer(c.bootstrap, acks="all") as p:
            for i in range(5):
                p.send("solo", str(i), partition=0)
            p.flush(30)
        c.kill(lead)
        wait_for(lambda: c.leader("solo", 0) is None, what="solo leaderless")
        bootstrap = c.bootstrap
        comeback = threading.Timer(1.0, c.start, args=(lead,))
        comeback.start()
        try:
            with Consumer(bootstrap, request_timeout_ms=90000) as cons:
                cons.assign([("solo", 0)])
                cons.seek_to_beginning()  # ListOffsets needs the leader
                got = []
                deadline = time.monotonic() + 60
                while len(got) < 5 and time.monotonic() < deadline:
                    got.extend(cons.poll(500))
            assert [m.value for m in got] == [str(i).encode() for i in range(5)]
        finally:
            comeback.join()
