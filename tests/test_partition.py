"""Kafka's Partition rules (broker/cluster/partition.py) and the fetch isolations (broker/fetch.py), on real logs.

The replication tests run these rules between brokers; here each rule is checked on its own, with the
exact offsets: the high watermark as the ISR's minimum LEO, the ISR shrink and expand conditions, the
typed errors, and how far each FetchIsolation reads.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from pyspark_logsource.broker.cluster.partition import (
    Partition,
    ReplicationSettings,
    follow_high_watermark,
    init_high_watermark,
)
from pyspark_logsource.broker.config import BrokerConfig
from pyspark_logsource.broker.fetch import FetchIsolation, read_partitions
from pyspark_logsource.broker.log import LogConfig, PartitionLog
from pyspark_logsource.broker.state import PartitionRole
from pyspark_logsource.errors import NotEnoughReplicas, NotLeaderOrFollower
from pyspark_logsource.format import batch as fmt
from pyspark_logsource.format.control import set_transactional
from pyspark_logsource.protocol import FetchPartition, FetchPartitionResponse, FetchRequest


@pytest.fixture
def lg(tmp_path: Path):
    log = PartitionLog(tmp_path / "t-0", LogConfig(min_insync_replicas=2), "t", 0)
    yield log
    log.close()


def append(lg: PartitionLog, n: int) -> None:
    lg.append(fmt.encode([b"v%d" % i for i in range(n)]), 0)


def leader(lg: PartitionLog, isr: list[int], replicas: list[int] = (1, 2, 3), version: int = 0) -> Partition:
    p = Partition(
        1, PartitionRole("t", 0, 1, 0, list(isr), list(replicas), zk_version=version), lg, lg.log_end_offset
    )
    p.refresh_followers(now=1000)
    return p


def test_high_watermark_is_the_isr_minimum_leo_and_never_moves_back(lg):
    append(lg, 10)
    lg.set_high_watermark(0)
    p = leader(lg, [1, 2, 3])
    assert p.maybe_advance_hw() is False  # followers' LEOs unknown
    p.update_follower(2, 6, now=1100)
    p.update_follower(3, 4, now=1100)
    assert p.maybe_advance_hw() is True and lg.high_watermark == 4
    p.update_follower(3, 10, now=1200)
    assert p.maybe_advance_hw() is True and lg.high_watermark == 6
    p.update_follower(2, 3, now=1300)  # a follower that truncated does not move the HW back
    assert p.maybe_advance_hw() is False and lg.high_watermark == 6


def test_a_waiting_acks_all_produce_completes_once_the_hw_passes_it(lg):
    async def run() -> None:
        append(lg, 5)
        lg.set_high_watermark(0)
        p = leader(lg, [1, 2])
        loop = asyncio.get_running_loop()
        early, late = loop.create_future(), loop.create_future()
        p.waiters += [(3, early), (5, late)]
        p.update_follower(2, 3, now=1100)
        p.maybe_advance_hw()
        assert early.done() and not late.done() and [e for e, _ in p.waiters] == [5]
        p.fail_waiters(NotLeaderOrFollower("moved"))
        assert isinstance(late.exception(), NotLeaderOrFollower) and p.waiters == []

    asyncio.run(run())


def test_isr_shrink_and_expand_rules(lg):
    append(lg, 8)
    lg.set_high_watermark(5)
    p = leader(lg, [1, 2], replicas=[1, 2, 3])
    p.epoch_start_offset = 7
    # 2 is in the ISR and starts caught up at 1000; 3 is out of it
    assert p.lagging(now=1000 + 500, lag_time_max_ms=800) == []
    assert p.lagging(now=1000 + 801, lag_time_max_ms=800) == [2]
    f3 = p.update_follower(3, 6, now=1100)
    assert not p.can_join(f3)  # past the HW but before the start of this leader's epoch
    f3 = p.update_follower(3, 7, now=1200)
    assert p.can_join(f3) and p.should_expand(f3)
    f2 = p.update_follower(2, 8, now=1300)
    assert not p.should_expand(f2)  # already in the ISR
    with pytest.raises(NotLeaderOrFollower, match="broker 9 is not a replica of t-0"):
        p.update_follower(9, 0, now=1300)


def test_role_updates_and_min_isr(lg):
    p = leader(lg, [1], replicas=[1, 2], version=3)
    with pytest.raises(
        NotEnoughReplicas, match=r"t-0 has 1 in-sync replicas \[1\], min.insync.replicas is 2"
    ):
        p.check_min_isr()
    older = PartitionRole("t", 0, 1, 0, [1, 2], [1, 2, 3], zk_version=2)
    assert p.set_role(older) is False and p.role.isr == [1]
    newer = PartitionRole("t", 0, 1, 0, [1, 2], [1, 2, 3], zk_version=4)
    assert p.set_role(newer, now=2000) is True and sorted(p.followers) == [2, 3]
    p.check_min_isr()


def test_follower_high_watermark_is_the_leaders_capped_by_its_log_end(lg):
    append(lg, 4)
    init_high_watermark(lg, None)
    assert lg.high_watermark == 0
    init_high_watermark(lg, 9)
    assert lg.high_watermark == 4
    follow_high_watermark(lg, 2)
    assert lg.high_watermark == 2
    follow_high_watermark(lg, -1)  # no HW in the answer: unchanged
    assert lg.high_watermark == 2


def test_each_isolation_reads_as_far_as_it_may(lg):
    """The shared read of broker/fetch.py with each FetchIsolation, around an open transaction."""
    append(lg, 2)  # offsets 0-1
    staged = bytearray(fmt.encode([b"open"], producer_id=7, producer_epoch=0, base_sequence=0))
    set_transactional(staged)
    lg.append(staged, 0)  # offset 2: an open transaction
    append(lg, 1)  # offset 3
    lg.set_high_watermark(3)
    req = FetchRequest([FetchPartition("t", 0, 0, 1 << 20)], max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)

    def read(isolation: FetchIsolation) -> tuple[FetchPartitionResponse, bytes]:
        resp, size, now = read_partitions(req, 1 << 20, isolation, lambda req, fp, r: (lg, lg.high_watermark))
        (r,) = resp.partitions
        region = r.records
        data = os.pread(region.file.fileno(), region.length, region.position) if size else b""
        assert not now and r.error_code == 0
        return r, data

    offsets = {}
    for iso in FetchIsolation:
        r, data = read(iso)
        offsets[iso] = [h.base_offset for _, h in fmt.iter_headers(data)]
        assert r.high_watermark == 3 and r.log_start_offset == 0
    assert offsets[FetchIsolation.LOG_END] == [0, 2, 3]
    assert offsets[FetchIsolation.HIGH_WATERMARK] == [0, 2]
    assert offsets[FetchIsolation.TXN_COMMITTED] == [0]
    r, _ = read(FetchIsolation.TXN_COMMITTED)
    assert r.last_stable_offset == 2 and [a.producer_id for a in r.aborted_transactions] == []
    r, _ = read(FetchIsolation.LOG_END)
    assert r.last_stable_offset == 3  # a follower is told the HW as its LSO


def test_a_partition_error_is_its_code_and_answers_now(lg):
    from pyspark_logsource.errors import OffsetOutOfRange

    append(lg, 2)
    req = FetchRequest([FetchPartition("t", 0, 99, 1 << 20)], max_wait_ms=500, min_bytes=1, max_bytes=1 << 20)
    resp, size, now = read_partitions(
        req, 1 << 20, FetchIsolation.HIGH_WATERMARK, lambda req, fp, r: (lg, lg.high_watermark)
    )
    (r,) = resp.partitions
    assert (size, now, r.error_code, r.records, r.high_watermark) == (0, True, OffsetOutOfRange.code, None, 2)


def test_replication_settings_are_read_once_from_the_config(tmp_path):
    c = BrokerConfig.from_properties(
        {
            "log.dirs": str(tmp_path),
            "broker.id": 4,
            "replica.lag.time.max.ms": 1500,
            "replica.fetch.wait.max.ms": 100,
        }
    )
    s = ReplicationSettings.from_config(c)
    assert (s.broker_id, s.lag_time_max_ms, s.fetch_wait_max_ms, s.fetch_backoff_ms) == (4, 1500, 100, 200)
    assert s.answer_max_bytes == c.fetch_max_bytes
    with pytest.raises(AttributeError):
        s.lag_time_max_ms = 1  # frozen
