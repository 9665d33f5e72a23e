"""PartitionLog: append, roll, read regions, offset/timestamp lookup, retention, flush, idempotence."""

from __future__ import annotations

import os
import threading
import time

import pytest
from support.logdata import all_records, make_batch, open_log, region_bytes, value_for

from pyspark_logsource.broker.log import PartitionLog
from pyspark_logsource.errors import (
    CorruptRecord,
    DuplicateSequence,
    InvalidProducerEpoch,
    MessageTooLarge,
    OffsetOutOfRange,
    OutOfOrderSequence,
    UnknownProducerId,
)
from pyspark_logsource.format import batch as fmt


def fill(log: PartitionLog, batches: int, per_batch: int = 10, **kw) -> None:
    for _ in range(batches):
        log.append(make_batch(log.log_end_offset, per_batch, **kw))


# ---------------------------------------------------------------- append


def test_append_assigns_consecutive_offsets_and_runs_of_batches(tmp_path):
    log = open_log(tmp_path)
    info = log.append(make_batch(0, 10))
    assert info == (0, 9, -1, 10, False)
    run = make_batch(10, 5) + make_batch(15, 7) + make_batch(22, 1)
    info = log.append(bytes(run))
    assert (info.base_offset, info.last_offset, info.record_count) == (10, 22, 13)
    assert log.log_end_offset == 23
    recs = all_records(log)
    assert [r.offset for r in recs] == list(range(23))
    assert [r.value for r in recs] == [value_for(i) for i in range(23)]


def test_bytes_are_not_mutated_bytearrays_are_stamped_in_place(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(0, 3))
    b = bytes(make_batch(0, 2))
    log.append(b)
    assert fmt.read_header(b).base_offset == 0
    ba = make_batch(0, 2)
    log.append(ba)
    assert fmt.read_header(ba).base_offset == 5


@pytest.mark.parametrize("bad", ["crc", "truncated", "garbage", "empty", "magic"])
def test_bad_batches_raise_corrupt_record_and_append_nothing(tmp_path, bad):
    log = open_log(tmp_path)
    log.append(make_batch(0, 4))
    good = make_batch(0, 3)
    if bad == "crc":
        b = make_batch(0, 3)
        b[-1] ^= 0x01
    elif bad == "truncated":
        b = make_batch(0, 3)[:-5]
    elif bad == "garbage":
        b = bytearray(b"\x07" * 200)
    elif bad == "magic":
        b = make_batch(0, 3)
        b[16] = 9
    else:
        good = b = bytearray()
    size = log.size_bytes
    with pytest.raises(CorruptRecord) as e:
        log.append(bytes(good + b))  # a good batch before the bad one: all or nothing
    assert e.value.code == 2
    assert log.log_end_offset == 4 and log.size_bytes == size
    assert log.append(make_batch(4, 3)).base_offset == 4


def test_message_too_large(tmp_path):
    log = open_log(tmp_path, max_message_bytes=1000)
    with pytest.raises(MessageTooLarge) as e:
        log.append(make_batch(0, 10, size=200))
    assert e.value.code == 10
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_log_append_time_is_stamped(tmp_path):
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    before = int(time.time() * 1000)
    info = log.append(make_batch(0, 5, timestamps=[1, 2, 3, 4, 5]))
    assert before <= info.log_append_time <= int(time.time() * 1000)
    data = region_bytes(log.read(0, 1000))
    rb = fmt.decode(data)  # CRC recomputed: decoding checks it
    assert rb.header.timestamp_type == fmt.LOG_APPEND_TIME
    assert {r.timestamp for r in rb.records()} == {info.log_append_time}


# ---------------------------------------------------------------- roll


def test_roll_by_bytes(tmp_path):
    log = open_log(tmp_path, segment_bytes=2000, index_interval_bytes=300)
    fill(log, 40)  # batches of ~350 bytes
    segs = log.segments
    assert len(segs) > 5
    assert all(s.size <= 2000 for s in segs)
    assert [s.base_offset for s in segs] == sorted(s.base_offset for s in segs)
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert names == [f"{s.base_offset:020d}.log" for s in segs]
    assert all((tmp_path / "t-0" / f"{s.base_offset:020d}.index").exists() for s in segs)
    assert [r.offset for r in all_records(log)] == list(range(400))


def test_a_batch_larger_than_segment_bytes_gets_its_own_segment(tmp_path):
    log = open_log(tmp_path, segment_bytes=500)
    log.append(make_batch(0, 2))
    log.append(make_batch(2, 40))
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert log.segments[1].size > 500


def test_roll_by_ms(tmp_path):
    log = open_log(tmp_path, segment_ms=100)
    fill(log, 3)
    assert len(log.segments) == 1
    time.sleep(0.15)
    fill(log, 1)
    assert [s.base_offset for s in log.segments] == [0, 30]
    fill(log, 1)
    assert len(log.segments) == 2


def test_roll_when_an_index_is_full_and_after_truncating_it(tmp_path):
    # 3 offset index entries per segment, one per batch after the first: a segment holds 4 batches.
    # One timestamp for every record: the time index (2 entries of 12 bytes) gets an entry only when the
    # largest timestamp grows, so clock ticks between appends would fill it first and roll early.
    log = open_log(tmp_path, segment_index_bytes=8 * 3, index_interval_bytes=0)
    same_ms = {"timestamps": [1_764_000_000_000] * 2}
    fill(log, 10, per_batch=2, **same_ms)
    assert [s.base_offset for s in log.segments] == [0, 8, 16]
    log.truncate_to(12)  # the middle segment keeps 2 batches: its indexes have room again
    active = log.active_segment
    assert active.base_offset == 8 and not (active.offset_index.is_full or active.time_index.is_full)
    while not (active.offset_index.is_full or active.time_index.is_full):
        fill(log, 1, per_batch=2, **same_ms)
        assert log.active_segment is active
    fill(log, 1, per_batch=2, **same_ms)  # the next append rolls
    assert log.active_segment.base_offset == log.log_end_offset - 2
    assert [r.offset for r in all_records(log)] == list(range(log.log_end_offset))


def test_index_files_stay_whole_when_flushes_race_appends_and_rolls(tmp_path, caplog):
    # the log manager's thread flushes (writing pending index entries) while the appending thread
    # adds entries and rolls (which writes them too): reopened, no index needs a rebuild
    log = open_log(tmp_path, index_interval_bytes=0, segment_bytes=20_000)
    stop = threading.Event()

    def flusher() -> None:
        while not stop.is_set():
            log.flush()

    t = threading.Thread(target=flusher)
    t.start()
    try:
        fill(log, 400, per_batch=2)
    finally:
        stop.set()
        t.join()
    entries = [len(s.offset_index) for s in log.segments]
    assert len(entries) >= 3 and all(entries)
    log.close()
    with caplog.at_level("WARNING"):
        reopened = PartitionLog(tmp_path / "t-0", log.config, "t", 0)
    assert "rebuilding indexes" not in caplog.text
    assert [len(s.offset_index) for s in reopened.segments] == entries
    assert [r.offset for r in all_records(reopened)] == list(range(800))


def test_explicit_roll_and_empty_roll_is_a_no_op(tmp_path):
    log = open_log(tmp_path)
    assert log.roll() is log.active_segment
    fill(log, 1)
    seg = log.roll()
    assert seg.base_offset == 10 and log.roll() is seg


# ---------------------------------------------------------------- read


def test_read_regions_hold_whole_batches_from_the_one_containing_offset(tmp_path):
    log = open_log(tmp_path, segment_bytes=3000, index_interval_bytes=500)
    fill(log, 50, per_batch=7)
    for offset in range(0, log.log_end_offset, 3):
        for max_bytes in (1, 400, 1000, 5000):
            region = log.read(offset, max_bytes)
            data = region_bytes(region)
            headers = [h for _, h in fmt.iter_headers(data, check_crc=True)]
            assert sum(h.size for h in headers) == region.length  # whole batches only
            assert headers[0].base_offset <= offset <= headers[0].last_offset
            assert region.length <= max(max_bytes, headers[0].size)
            assert [h.base_offset for h in headers] == list(
                range(headers[0].base_offset, headers[-1].next_offset, 7)
            )
            if region.length + 400 < max_bytes:  # it stopped early only at a segment end
                seg = next(s for s in log.segments if s.log_path.samefile(region.file.name))
                assert region.position + region.length == seg.size


def test_read_at_the_end_is_empty_and_out_of_range_on_both_sides(tmp_path):
    log = open_log(tmp_path)
    assert log.read(0, 100).length == 0  # empty log
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 100)
    fill(log, 3)
    assert log.read(30, 100).length == 0
    for bad in (-1, 31, 10**9):
        with pytest.raises(OffsetOutOfRange) as e:
            log.read(bad, 100)
        assert e.value.code == 1


def test_read_max_offset_is_exclusive(tmp_path):
    log = open_log(tmp_path)
    fill(log, 5)
    r = log.read(0, 10**6, max_offset=20)
    assert [h.base_offset for _, h in fmt.iter_headers(region_bytes(r))] == [0, 10]
    assert log.read(20, 10**6, max_offset=20).length == 0
    r = log.read(12, 10**6, max_offset=25)  # a batch that starts before max_offset is whole
    assert [h.base_offset for _, h in fmt.iter_headers(region_bytes(r))] == [10, 20]


def test_read_checked_returns_verified_bytes(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3)
    data = log.read_checked(15, 10**6)
    assert [b.base_offset for b in fmt.decode_all(data)] == [10, 20]


def test_reads_run_concurrently_with_appends_and_retention(tmp_path):
    log = open_log(tmp_path, segment_bytes=2000, retention_bytes=6000, file_delete_delay_ms=50)
    stop = threading.Event()
    errors = []

    def reader():
        while not stop.is_set():
            try:
                start, end = log.log_start_offset, log.log_end_offset
                for off in (start, (start + end) // 2, max(start, end - 1)):
                    data = region_bytes(log.read(off, 3000))
                    if data:
                        b = fmt.decode(data)
                        assert b.base_offset <= off <= b.header.last_offset
            except OffsetOutOfRange:
                pass  # retention moved the start between the two reads
            except Exception as e:  # noqa: BLE001 - surfaced by the assert below
                errors.append(e)
                return

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(300):
        log.append(make_batch(log.log_end_offset, 10))
        if i % 20 == 0:
            log.delete_old_segments()
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors
    assert log.log_start_offset > 0


# ---------------------------------------------------------------- timestamps


def test_offset_for_timestamp_matches_brute_force(tmp_path):
    import random

    rng = random.Random(7)
    log = open_log(tmp_path, segment_bytes=4000, index_interval_bytes=300)
    batches = []  # (base offset, timestamps)
    t = 1_000_000
    for _ in range(80):
        n = rng.randint(1, 12)
        ts = [t + rng.randint(-50, 100) for _ in range(n)]  # CreateTime is not monotonic
        t += 60
        batches.append((log.log_end_offset, ts))
        log.append(make_batch(log.log_end_offset, n, timestamps=ts))
    assert len(log.segments) > 3

    def expected(target):
        # Kafka's answer: in the first batch whose max timestamp reaches the
        # target, the first record that does.
        for base, ts in batches:
            if max(ts) >= target:
                return base + next(i for i, x in enumerate(ts) if x >= target)
        return None

    for target in [0, 999_000, *range(999_950, t + 200, 37)]:
        assert log.offset_for_timestamp(target) == expected(target), target
    assert log.offset_for_timestamp(-1) == log.log_end_offset
    assert log.offset_for_timestamp(-2) == 0


def test_offset_for_timestamp_monotonic_is_exact(tmp_path):
    log = open_log(tmp_path, segment_bytes=3000, index_interval_bytes=200)
    for b in range(60):
        log.append(make_batch(b * 5, 5, timestamps=[10_000 + (b * 5 + i) * 10 for i in range(5)]))
    for off in range(0, 300, 7):
        assert log.offset_for_timestamp(10_000 + off * 10) == off
        assert log.offset_for_timestamp(10_000 + off * 10 - 3) == off
    assert log.offset_for_timestamp(10_000 + 300 * 10) is None
    log.close()
    log = open_log(tmp_path, segment_bytes=3000, index_interval_bytes=200)
    assert log.offset_for_timestamp(10_000 + 2990) == 299


# ---------------------------------------------------------------- retention


def test_retention_by_time_deletes_old_segments_and_moves_the_start(tmp_path):
    log = open_log(tmp_path, segment_bytes=1500, retention_ms=60_000, file_delete_delay_ms=0)
    now = int(time.time() * 1000)
    for _ in range(20):
        log.append(make_batch(log.log_end_offset, 10, timestamps=now - 3600_000))  # an hour old
    for _ in range(10):
        log.append(make_batch(log.log_end_offset, 10, timestamps=now))
    old_segments = [s for s in log.segments if s.max_timestamp < now - 60_000]
    assert 0 < len(old_segments) < len(log.segments)
    assert log.delete_old_segments() == len(old_segments)
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert all(s.max_timestamp >= now - 60_000 for s in log.segments)
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()
    log.close()


def test_an_expired_active_segment_is_rolled_and_deleted_once_below_the_high_watermark(tmp_path):
    """Kafka's retention: a quiet topic's last segment does not outlive retention.ms. It goes once all of it
    is below the high watermark (a follower may still need it before); the log goes on empty from its end,
    and a restart keeps that start."""
    log = open_log(tmp_path, segment_bytes=1500, retention_ms=60_000, file_delete_delay_ms=0)
    now = int(time.time() * 1000)
    for _ in range(8):
        log.append(make_batch(log.log_end_offset, 10, timestamps=now - 3600_000))
    end = log.log_end_offset
    assert len(log.segments) > 1 and log.active_segment.size > 0
    log.set_high_watermark(end - 1)  # a follower has not fetched the last batch yet
    inactive = len(log.segments) - 1
    assert log.delete_old_segments() == inactive
    assert log.active_segment.size > 0 and log.log_start_offset < end
    log.set_high_watermark(end)
    assert log.delete_old_segments() == 1
    assert [s.size for s in log.segments] == [0] and log.active_segment.base_offset == end
    assert log.log_start_offset == log.log_end_offset == end
    with pytest.raises(OffsetOutOfRange):
        log.read(end - 1, 100)
    assert log.delete_old_segments() == 0  # nothing left to expire: no roll of the empty segment
    log.append(make_batch(end, 10, timestamps=now))
    assert [r.offset for r in all_records(log)] == list(range(end, end + 10))
    log.close()
    again = open_log(tmp_path, segment_bytes=1500, retention_ms=60_000)
    assert again.log_start_offset == end and again.log_end_offset == end + 10
    again.close()


def test_retention_of_records_without_timestamps_goes_by_the_files_last_modification(tmp_path):
    """Kafka's largestTimestamp: records stored without a timestamp (-1) are as old as the segment file,
    not older than any retention.ms."""
    log = open_log(tmp_path, segment_bytes=1500, retention_ms=60_000, file_delete_delay_ms=0)
    for _ in range(8):
        log.append(make_batch(log.log_end_offset, 10, timestamps=-1))
    assert all(s.max_timestamp == -1 for s in log.segments) and len(log.segments) > 1
    assert log.delete_old_segments() == 0 and log.log_start_offset == 0
    old = time.time() - 3600
    segs = log.segments
    os.utime(segs[0].log_path, (old, old))
    assert log.delete_old_segments() == 1 and log.log_start_offset == segs[1].base_offset
    for seg in segs[1:]:
        os.utime(seg.log_path, (old, old))
    assert log.delete_old_segments() == len(segs) - 1  # the active one too, rolled first
    assert log.log_start_offset == log.log_end_offset == 80
    log.close()


def test_a_closed_segment_without_timestamps_has_no_largest_timestamp(tmp_path):
    """A cleaner pass may still hold a segment that retention removed and closed meanwhile: its age is
    then unknown (-1), not an error (the cleaner's swap then finds it gone and changes nothing)."""
    log = open_log(tmp_path, segment_bytes=1500, file_delete_delay_ms=0)
    for _ in range(4):
        log.append(make_batch(log.log_end_offset, 10, timestamps=-1))
    seg = log.segments[0]
    assert seg.largest_timestamp > 0  # the file's modification time
    seg.destroy()
    assert seg.largest_timestamp == -1
    log.close()


def test_retention_bytes_zero_takes_the_active_segment_too(tmp_path):
    log = open_log(tmp_path, segment_bytes=1500, retention_bytes=0, file_delete_delay_ms=0)
    fill(log, 40)
    end, n = log.log_end_offset, len(log.segments)
    assert log.delete_old_segments() == n
    assert log.log_start_offset == end and [s.size for s in log.segments] == [0]


def test_a_compacted_log_keeps_every_segment_under_retention(tmp_path):
    log = open_log(tmp_path, segment_bytes=1500, retention_bytes=0, cleanup_policy="compact")
    for _ in range(40):
        log.append(make_batch(log.log_end_offset, 10, keys=[b"k%d" % i for i in range(10)]))
    n = len(log.segments)
    assert log.delete_old_segments() == 0 and len(log.segments) == n


def test_retention_by_size(tmp_path):
    log = open_log(tmp_path, segment_bytes=1500, retention_bytes=4000, file_delete_delay_ms=0)
    fill(log, 40)
    before = log.size_bytes
    n = log.delete_old_segments()
    assert n > 0
    # Kafka's rule: a segment goes only if what remains is still >= retention.bytes,
    # so the log keeps at least the budget and at most one segment more.
    assert before > log.size_bytes >= 4000
    assert log.size_bytes - log.segments[0].size < 4000
    assert log.delete_old_segments() == 0
    assert [r.offset for r in all_records(log)] == list(range(log.log_start_offset, 400))
    log.close()
    again = open_log(tmp_path, segment_bytes=1500, retention_bytes=4000)
    assert again.log_start_offset == log.log_start_offset


def test_deleted_segments_stay_readable_until_the_delay_passes(tmp_path):
    log = open_log(tmp_path, segment_bytes=1000, retention_bytes=0, file_delete_delay_ms=200)
    fill(log, 10)
    region = log.read(0, 500)
    assert log.delete_old_segments() > 0
    assert list((tmp_path / "t-0").glob("*.log.deleted"))
    assert fmt.decode(region_bytes(region)).base_offset == 0  # a served region still reads
    time.sleep(0.25)
    log.run_pending_deletes()
    assert not list((tmp_path / "t-0").glob("*.deleted"))


# ---------------------------------------------------------------- flush policy


def _recovery_point_file(tmp_path) -> int:
    return int((tmp_path / "t-0" / "recovery-point").read_text())


def test_flush_by_messages_tracks_flushed_offset(tmp_path):
    log = open_log(tmp_path, flush_messages=25, flush_ms=10**9)
    seen = []
    for _ in range(10):
        log.append(make_batch(log.log_end_offset, 10))
        seen.append((log.log_end_offset, log.flushed_offset))
    assert seen[:3] == [(10, 0), (20, 0), (30, 30)]
    assert seen[-1] == (100, 90)
    assert _recovery_point_file(tmp_path) == 90
    assert log.unflushed_messages == 10
    log.flush()
    assert log.flushed_offset == 100 == _recovery_point_file(tmp_path)


def test_flush_by_ms(tmp_path):
    log = open_log(tmp_path, flush_ms=150)
    log.append(make_batch(0, 10))
    assert log.flushed_offset == 0
    time.sleep(0.2)
    log.append(make_batch(10, 10))
    assert log.flushed_offset == 20
    log.append(make_batch(20, 10))
    assert log.flushed_offset == 20 and log.log_end_offset == 30


def test_flush_up_to(tmp_path):
    log = open_log(tmp_path, flush_ms=10**9)
    fill(log, 3)
    assert log.flush(up_to=10) == 10
    assert log.flush(up_to=5) == 10
    assert log.flush() == 30


# ---------------------------------------------------------------- idempotent producers


def pbatch(start_value: int, n: int, pid=7, epoch=0, seq=0) -> bytearray:
    return make_batch(start_value, n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_idempotent_retry_is_a_duplicate_with_original_offsets(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(0, 3))  # a non-idempotent batch first
    first = log.append(pbatch(3, 5, seq=0))
    second = log.append(pbatch(8, 5, seq=5))
    size = log.size_bytes
    retry = log.append(pbatch(3, 5, seq=0))
    assert retry == (first.base_offset, first.last_offset, -1, 5, True)
    assert log.append(pbatch(8, 5, seq=5)).duplicate
    assert log.size_bytes == size and log.log_end_offset == second.last_offset + 1
    assert log.append(pbatch(13, 2, seq=10)).base_offset == 13


def test_sequence_gap_and_old_epoch_are_rejected(tmp_path):
    log = open_log(tmp_path)
    log.append(pbatch(0, 5, seq=0, epoch=1))
    with pytest.raises(OutOfOrderSequence) as e:
        log.append(pbatch(5, 5, seq=6, epoch=1))
    assert e.value.code == 45
    with pytest.raises(InvalidProducerEpoch) as e:
        log.append(pbatch(5, 5, seq=5, epoch=0))
    assert e.value.code == 47
    with pytest.raises(OutOfOrderSequence):
        log.append(pbatch(5, 5, seq=5, epoch=2))  # a new epoch starts at 0
    with pytest.raises(UnknownProducerId):
        log.append(pbatch(5, 5, pid=99, seq=3))
    assert log.log_end_offset == 5
    assert log.append(pbatch(5, 5, seq=0, epoch=2)).base_offset == 5
    with pytest.raises(InvalidProducerEpoch):
        log.append(pbatch(10, 1, seq=5, epoch=1))


def test_only_the_last_batches_are_remembered(tmp_path):
    from pyspark_logsource.broker.log.producer_state import MAX_BATCHES_PER_PRODUCER as window

    log = open_log(tmp_path)
    for i in range(window + 2):
        log.append(pbatch(i, 1, seq=i))
    for i in range(2, window + 2):
        assert log.append(pbatch(i, 1, seq=i)).duplicate
    with pytest.raises(OutOfOrderSequence):
        log.append(pbatch(1, 1, seq=1))


def test_a_run_with_two_batches_of_one_producer(tmp_path):
    log = open_log(tmp_path)
    info = log.append(bytes(pbatch(0, 3, seq=0) + pbatch(3, 3, seq=3)))
    assert (info.base_offset, info.last_offset, info.duplicate) == (0, 5, False)
    assert log.append(bytes(pbatch(0, 3, seq=0) + pbatch(3, 3, seq=3))).duplicate
    with pytest.raises(DuplicateSequence):
        log.append(bytes(pbatch(3, 3, seq=3) + pbatch(6, 3, seq=6)))
    with pytest.raises(OutOfOrderSequence):  # the second batch's gap fails the whole run
        log.append(bytes(pbatch(6, 3, seq=6) + pbatch(9, 3, seq=10)))
    assert log.log_end_offset == 6


def test_a_run_of_two_producers_with_an_epoch_bump(tmp_path):
    # later batches of a producer in one run are checked against its earlier ones (staged, not yet committed)
    log = open_log(tmp_path)
    run = pbatch(0, 2, pid=1, seq=0) + pbatch(2, 2, pid=2, seq=0) + pbatch(4, 2, pid=1, seq=2)
    run += pbatch(6, 2, pid=1, epoch=1, seq=0) + pbatch(8, 2, pid=1, epoch=1, seq=2)
    assert log.append(bytes(run)).last_offset == 9
    with pytest.raises(OutOfOrderSequence):  # epoch 1 goes on at 4; nothing of this run is kept
        log.append(bytes(pbatch(10, 1, pid=2, seq=2) + pbatch(11, 1, pid=1, epoch=1, seq=5)))
    with pytest.raises(InvalidProducerEpoch):
        log.append(pbatch(10, 1, pid=1, epoch=0, seq=4))
    assert (
        log.append(bytes(pbatch(10, 1, pid=2, seq=2) + pbatch(11, 1, pid=1, epoch=1, seq=4))).base_offset
        == 10
    )
    assert log.append(pbatch(6, 2, pid=1, epoch=1, seq=0)).duplicate


@pytest.mark.parametrize("how", ["clean", "crash", "crash_without_snapshots"])
def test_producer_state_survives_reopen(tmp_path, how):
    log = open_log(tmp_path, segment_bytes=1000)
    infos = [log.append(pbatch(i * 4, 4, seq=i * 4)) for i in range(10)]
    assert len(log.segments) > 2  # snapshots were taken at rolls
    d = tmp_path / "t-0"
    if how == "clean":
        log.close()
    else:
        log.flush()  # and then "crash": no close, no marker
        if how == "crash_without_snapshots":
            for p in d.glob("*.snapshot"):
                p.unlink()
    log = open_log(tmp_path, segment_bytes=1000)
    assert log.recovery_info["clean"] == (how == "clean")
    for info, i in zip(infos[-5:], range(5, 10), strict=True):
        assert log.append(pbatch(i * 4, 4, seq=i * 4)) == info._replace(duplicate=True)
    with pytest.raises(OutOfOrderSequence):
        log.append(pbatch(40, 4, seq=41))
    assert log.append(pbatch(40, 4, seq=40)).base_offset == 40


# ---------------------------------------------------------------- truncation, close, delete


def test_truncate_to(tmp_path):
    log = open_log(tmp_path, segment_bytes=1000)
    for i in range(20):
        log.append(pbatch(i * 5, 5, seq=i * 5))
    assert log.truncate_to(52) == 50  # the batch holding 52 goes entirely
    assert log.log_end_offset == 50 and log.active_segment.next_offset == 50
    assert [r.offset for r in all_records(log)] == list(range(50))
    assert log.append(pbatch(50, 5, seq=50)).base_offset == 50  # producer state follows the log
    assert log.truncate_to(0) == 0 and log.size_bytes == 0
    assert log.append(pbatch(0, 5, seq=0)).base_offset == 0


def test_closed_log_refuses_writes_and_delete_removes_directory(tmp_path):
    from pyspark_logsource.errors import StorageError

    log = open_log(tmp_path)
    fill(log, 1)
    log.close()
    assert (tmp_path / "t-0" / ".clean_shutdown").exists()
    with pytest.raises(StorageError):
        log.append(make_batch(0, 1))
    log = open_log(tmp_path)
    assert not (tmp_path / "t-0" / ".clean_shutdown").exists()  # a crash now must not look clean
    log.delete()
    assert not (tmp_path / "t-0").exists()


def test_truncate_fully_and_start_at(tmp_path):
    log = open_log(tmp_path, segment_bytes=1000, file_delete_delay_ms=0)
    for i in range(10):
        log.append(pbatch(i * 5, 5, seq=i * 5))
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (1000, 1000, 0)
    with pytest.raises(OffsetOutOfRange):
        log.read(999, 100)
    assert log.read(1000, 100).length == 0
    assert log.append(pbatch(1000, 5, pid=8, seq=0)).base_offset == 1000
    log.run_pending_deletes()
    log.close()
    log = open_log(tmp_path, segment_bytes=1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1005)
    assert [p.name for p in (tmp_path / "t-0").glob("*.log")] == ["00000000000000001000.log"]


def test_unknown_codec_is_rejected(tmp_path):
    import struct

    from pyspark_logsource.errors import UnsupportedCompressionType
    from pyspark_logsource.format.crc import crc32c

    log = open_log(tmp_path)
    b = make_batch(0, 3)
    attrs = struct.unpack_from(">h", b, 21)[0]
    struct.pack_into(">h", b, 21, (attrs & ~0x07) | 5)  # codec id 5 does not exist
    struct.pack_into(">I", b, 17, crc32c(memoryview(b)[21:]))
    with pytest.raises(UnsupportedCompressionType) as e:
        log.append(b)
    assert e.value.code == 76 and log.log_end_offset == 0


def test_full_disk_mid_append_appends_nothing(tmp_path, monkeypatch):
    import errno
    import os

    from pyspark_logsource.broker.log import append as append_mod
    from pyspark_logsource.broker.log import segment as segment_mod
    from pyspark_logsource.errors import StorageError
    from pyspark_logsource.format import plain_run

    # the writes through os.pwrite (the compiled one-call step's write: test_log_plain_append.py)
    monkeypatch.setattr(append_mod, "write_plain_batch", plain_run.write_plain_batch_py)
    log = open_log(tmp_path)
    log.append(make_batch(0, 4))
    size, leo = log.size_bytes, log.log_end_offset
    real_pwrite, calls = os.pwrite, []

    def half_then_full(fd, data, offset):
        calls.append(len(data))
        if len(calls) == 1:  # a short write, then the disk is full
            return real_pwrite(fd, bytes(data[: len(data) // 2]), offset)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment_mod.os, "pwrite", half_then_full)
    with pytest.raises(StorageError, match="No space left"):
        log.append(make_batch(0, 50))
    monkeypatch.undo()
    assert len(calls) == 2
    assert (log.size_bytes, log.log_end_offset) == (size, leo)
    assert os.path.getsize(log.active_segment.log_path) == size  # the half-written batch is cut off
    assert log.append(make_batch(0, 3)).base_offset == leo  # the disk has room again
    log.close()
    log = open_log(tmp_path)
    assert [r.value for r in all_records(log)] == [value_for(i) for i in range(4)] + [
        value_for(i) for i in range(3)
    ]
