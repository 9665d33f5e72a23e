"""GroupOffsetStore per ``__consumer_offsets`` partition (cluster mode's loading), on a real LogManager.

In a cluster nothing is loaded until the broker leads a partition; a commit is appended first and
applied to the map only once replicated (``apply``), never over a newer record of the same key; and
unloading drops exactly the groups of that partition. The replicated topic's logs are made here as a
broker's replica logs would be (the cluster tests run the whole path against broker processes).
"""

from __future__ import annotations

import pytest

from pyspark_logsource.broker.groups.offsets import OFFSETS_TOPIC, GroupOffsetStore
from pyspark_logsource.broker.groups.ownership import coordinator_error
from pyspark_logsource.broker.internal_topics import partition_for
from pyspark_logsource.broker.log import LogManager
from pyspark_logsource.broker.log.config import LogConfig
from pyspark_logsource.errors import (
    CoordinatorNotAvailable,
    IllegalGeneration,
    InvalidCommitOffsetSize,
    MessageTooLarge,
    NotCoordinator,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    NotLeaderOrFollower,
    RequestTimedOut,
)

N = 4


@pytest.fixture
def logs(tmp_path):
    m = LogManager([tmp_path], LogConfig(), background=False)
    m.create_topic(OFFSETS_TOPIC, N)  # the replica logs, as the cluster member makes them
    yield m
    m.close()


def _groups_on(partition: int, k: int) -> list[str]:
    out = [f"grp-{i}" for i in range(200) if partition_for(f"grp-{i}", N) == partition]
    return out[:k]


def test_a_replicated_store_loads_only_the_partitions_it_leads(logs):
    single = GroupOffsetStore(logs, N)  # what a single broker would read: everything
    a, b = _groups_on(0, 1)[0], _groups_on(1, 1)[0]
    single.commit(a, [("t", 0, 5, None, -1)])
    single.commit(b, [("t", 0, 7, "m", -1)])
    single.store_group(a, b"membership-a")

    store = GroupOffsetStore(logs, N, replicated=True)
    assert store.offsets == {} and store.loaded == set() and not store.is_loaded(a)
    assert store.load_partition(0, N) == {a: b"membership-a"}
    assert store.fetch(a, None) == {("t", 0): single.fetch(a, None)[("t", 0)]}
    assert store.fetch(b, None) == {} and store.is_loaded(a) and not store.is_loaded(b)
    store.load_partition(1, N)
    assert store.fetch(b, [("t", 0)])[("t", 0)].metadata == "m"
    assert store.unload_partition(0) == {a}
    assert store.groups() == {b} and a not in store.group_meta


def test_a_replicated_commit_shows_only_once_applied_and_never_over_a_newer_one(logs):
    store = GroupOffsetStore(logs, N, replicated=True)
    g = _groups_on(2, 1)[0]
    store.load_partition(2, N)
    first = store.append_commit(g, [("t", 0, 10, None, -1)])
    second = store.append_commit(g, [("t", 0, 20, None, -1)])
    assert first.partition == 2 and second.base_offset > first.base_offset
    assert store.fetch(g, None) == {}  # appended, not replicated yet: not visible
    store.apply(second)
    store.apply(first)  # its replication finished later: the newer record stays
    assert store.fetch(g, None)[("t", 0)].offset == 20
    # a partition that moved away meanwhile: the write is not applied here (the new leader reads it)
    store.unload_partition(2)
    store.apply(store.append_commit(g, [("t", 0, 30, None, -1)]))
    assert store.fetch(g, None) == {}
    store.load_partition(2, N)  # every appended record is in the log: the last one wins
    assert store.fetch(g, None)[("t", 0)].offset == 30


@pytest.mark.parametrize(
    "error, kind",
    [
        (NotLeaderOrFollower, NotCoordinator),
        (NotEnoughReplicas, CoordinatorNotAvailable),
        (NotEnoughReplicasAfterAppend, CoordinatorNotAvailable),
        (RequestTimedOut, CoordinatorNotAvailable),
        (MessageTooLarge, InvalidCommitOffsetSize),
        (IllegalGeneration, IllegalGeneration),
    ],
)
def test_failed_offsets_writes_answer_kafkas_group_errors(error, kind):
    got = coordinator_error(error("why"))
    assert type(got) is kind and "why" in str(got)
