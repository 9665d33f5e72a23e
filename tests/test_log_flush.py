"""The flush rule (broker/log/flush.py): one definition, honoured by the three append paths."""

from __future__ import annotations

import time

from support.logdata import make_batch, open_log, region_bytes

from pyspark_logsource.broker.log import LogConfig
from pyspark_logsource.broker.log.flush import FlushState
from pyspark_logsource.format import header


def test_flush_state_rule_by_messages_time_and_scheduled():
    fs = FlushState(LogConfig(flush_messages=10, flush_ms=1000), recovery_point=5, last_flush_ms=50_000)
    assert not fs.due(14, 50_999)
    assert fs.due(15, 50_000)  # 10 records past the recovery point
    assert fs.due(5, 51_000)  # flush.ms since the last flush
    fs.set_scheduled(True)  # a background thread flushes by time: appends only by messages
    assert not fs.due(5, 10**12)
    assert fs.due(15, 0)
    assert fs.flushed(20, 52_000) and fs.recovery_point == 20 and fs.last_flush_ms == 52_000
    assert not fs.flushed(10, 53_000) and fs.recovery_point == 20  # never backwards
    assert not fs.due(29, 0) and fs.due(30, 0)
    fs.set_recovery_point(3)  # a truncation below it
    assert fs.due(13, 0) and not fs.due(12, 0)
    fs.set_scheduled(False)
    assert fs.due(3, 54_000) and not fs.due(3, 53_999)


def test_transaction_bits_are_the_formats():
    assert header.TXN_BITS == header.TRANSACTIONAL_BIT | header.CONTROL_BIT == 0x30


def test_coalesced_append_flushes_by_messages(tmp_path):
    lg = open_log(tmp_path, flush_messages=25, flush_ms=10**9)
    out = lg.append_runs([make_batch(i * 10, 10) for i in range(2)])
    assert [i.base_offset for i in out] == [0, 10] and lg.flushed_offset == 0
    lg.append_runs([make_batch(20 + i * 10, 10) for i in range(2)])
    assert lg.log_end_offset == 40 and lg.flushed_offset == 40 == lg.recovery_point


def test_follower_append_flushes_by_messages_and_time(tmp_path):
    leader = open_log(tmp_path / "leader", flush_ms=10**9)
    for i in range(4):
        leader.append(make_batch(i * 10, 10))
    follower = open_log(tmp_path / "follower", flush_messages=25, flush_ms=10**9)
    regions = [region_bytes(leader.read(o, 1)) for o in (0, 10, 20, 30)]
    follower.append_as_follower(regions[0])
    follower.append_as_follower(regions[1])
    assert follower.flushed_offset == 0
    follower.append_as_follower(regions[2])
    assert follower.flushed_offset == 30
    timed = open_log(tmp_path / "timed", flush_ms=100)
    timed.append_as_follower(regions[0])
    assert timed.flushed_offset == 0
    time.sleep(0.15)
    timed.append_as_follower(regions[1])
    assert timed.flushed_offset == 20


def test_scheduled_flush_leaves_time_flushes_to_the_manager(tmp_path):
    lg = open_log(tmp_path, flush_ms=50)
    lg.scheduled_flush = True
    lg.append(make_batch(0, 10))
    time.sleep(0.1)
    lg.append(make_batch(10, 10))
    assert lg.flushed_offset == 0 and lg.unflushed_messages == 20
    lg.scheduled_flush = False
    lg.append(make_batch(20, 10))
    assert lg.flushed_offset == 30


def test_time_due_is_the_background_threads_half_of_the_rule():
    fs = FlushState(LogConfig(flush_messages=10, flush_ms=1000), recovery_point=5, last_flush_ms=50_000)
    fs.set_scheduled(True)
    assert not fs.time_due(5, 10**12)  # nothing unflushed: nothing to do, however late
    assert not fs.time_due(6, 50_999) and fs.time_due(6, 51_000)
    fs.flushed(6, 51_000)
    assert not fs.time_due(7, 51_999) and fs.time_due(7, 52_000)


def test_sync_data_leaves_the_recovery_point_and_a_reopened_log_rereads_past_it(tmp_path):
    """sync_data (the transaction coordinator's durable decisions): the records are fdatasynced, the
    recovery point and the indexes wait for the next flush; a log reopened without a clean close re-reads
    the segment from the recovery point and keeps every record."""
    lg = open_log(tmp_path, flush_ms=10**9)
    lg.append_runs([make_batch(i * 10, 10) for i in range(3)])
    lg.sync_data()
    assert lg.log_end_offset == 30 and lg.recovery_point == 0
    again = open_log(tmp_path, flush_ms=10**9)  # the first one was never closed: as after a crash
    assert again.recovery_info["clean"] is False and again.log_end_offset == 30
    assert again.flush() == 30 == again.recovery_point
