"""Recovery: torn and garbage tails are truncated, damaged indexes rebuilt, old-segment corruption reported."""

from __future__ import annotations

import os
import random

import pytest
from support.logdata import all_records, make_batch, open_log, region_bytes, value_for

from pyspark_logsource.broker.log.segment import LogSegment
from pyspark_logsource.errors import CorruptRecord
from pyspark_logsource.format import batch as fmt

CFG = dict(segment_bytes=4000, index_interval_bytes=300, flush_ms=10**9)


def build(tmp_path, batches=30, per_batch=10):
    """A log whose active segment holds several batches; returns the batch boundaries of that segment."""
    log = open_log(tmp_path, **CFG)
    for _ in range(batches):
        log.append(make_batch(log.log_end_offset, per_batch))
    log.flush()
    active = log.active_segment
    bounds = [
        (pos, h.base_offset) for pos, h in fmt.iter_headers(region_bytes(log.read(active.base_offset, 10**9)))
    ]
    # Simulate a crash: nothing is closed cleanly, files stay as the page cache has them.
    return log, active.log_path, bounds


def check_prefix(log, expected_end):
    recs = all_records(log)
    assert [r.offset for r in recs] == list(range(expected_end))
    assert [r.value for r in recs] == [value_for(i) for i in range(expected_end)]


@pytest.mark.parametrize("seed", range(6))
def test_random_truncation_of_the_active_segment(tmp_path, seed):
    rng = random.Random(seed)
    log, path, bounds = build(tmp_path)
    size = path.stat().st_size
    cut_at = rng.randrange(bounds[0][0] + 1, size)  # somewhere inside the active segment
    os.truncate(path, cut_at)
    reopened = open_log(tmp_path, **CFG)
    # the log ends at the last batch that is whole
    batch_size = bounds[1][0] - bounds[0][0]  # every batch has the same size here
    end = max((base + 10 for pos, base in bounds if pos + batch_size <= cut_at), default=bounds[0][1])
    assert reopened.log_end_offset == end
    assert reopened.recovery_info["truncated_bytes"] == cut_at - (path.stat().st_size)
    assert path.stat().st_size == reopened.active_segment.size
    check_prefix(reopened, end)
    assert reopened.append(make_batch(end, 10)).base_offset == end  # and it goes on
    check_prefix(reopened, end + 10)


@pytest.mark.parametrize("kind", ["random", "zeros", "header_bad_crc", "header_wrong_offset", "huge_length"])
def test_garbage_appended_to_the_tail(tmp_path, kind):
    rng = random.Random(kind)
    log, path, bounds = build(tmp_path)
    end = log.log_end_offset
    if kind == "random":
        junk = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 5000)))
    elif kind == "zeros":
        junk = bytes(4096)  # a preallocated, never written block
    elif kind == "header_bad_crc":
        junk = make_batch(end, 10, base_offset=end)
        junk[-3] ^= 0xFF
    elif kind == "header_wrong_offset":
        junk = make_batch(end + 5, 10, base_offset=end + 5)  # valid CRC, but a gap
    else:
        junk = make_batch(end, 10, base_offset=end)
        junk[8:12] = (2**31 - 1).to_bytes(4, "big")  # length says 2 GiB
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(junk)
    reopened = open_log(tmp_path, **CFG)
    assert reopened.log_end_offset == end
    assert path.stat().st_size == size
    assert reopened.recovery_info["truncated_bytes"] == len(junk)
    check_prefix(reopened, end)


def test_clean_shutdown_skips_the_crc_scan(tmp_path):
    log, path, _ = build(tmp_path)
    log.close()
    reopened = open_log(tmp_path, **CFG)
    assert reopened.recovery_info == reopened.recovery_info | {"clean": True, "recovered_segments": 0}
    reopened.close()
    (tmp_path / "t-0" / ".clean_shutdown").unlink()
    again = open_log(tmp_path, **CFG)
    # only the segment past the recovery point is scanned, not the whole log
    assert again.recovery_info["clean"] is False
    assert again.recovery_info["recovered_segments"] == 1 < len(again.segments)


def test_a_torn_older_segment_drops_everything_after_it(tmp_path):
    log, _, _ = build(tmp_path)
    segs = log.segments
    (tmp_path / "t-0" / "recovery-point").write_text(f"{segs[1].base_offset}\n")  # as if crashed early
    victim = segs[2]
    os.truncate(victim.log_path, victim.size - 7)
    reopened = open_log(tmp_path, **CFG)
    assert len(reopened.segments) == 3
    assert reopened.log_end_offset == victim.next_offset - 10
    check_prefix(reopened, reopened.log_end_offset)
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == [
        f"{s.base_offset:020d}.log" for s in segs[:3]
    ]


@pytest.mark.parametrize("damage", ["garbage", "missing", "truncated", "empty", "timeindex_garbage"])
def test_damaged_index_is_rebuilt(tmp_path, damage):
    log, _, _ = build(tmp_path, batches=60)
    seg = log.segments[1]
    idx_path, tidx_path = seg.offset_index.path, seg.time_index.path
    log.close()
    original, original_t = idx_path.read_bytes(), tidx_path.read_bytes()
    assert len(original) >= 16
    if damage == "garbage":
        idx_path.write_bytes(bytes(random.Random(1).getrandbits(8) for _ in range(len(original))))
    elif damage == "missing":
        idx_path.unlink()
    elif damage == "truncated":
        idx_path.write_bytes(original[:-5])
    elif damage == "empty":
        idx_path.write_bytes(b"")
    else:
        tidx_path.write_bytes(b"\xff" * len(original_t))
    reopened = open_log(tmp_path, **CFG)  # clean shutdown: only the sanity check can catch it
    if damage != "empty":  # an empty index is valid (just less sparse): no rebuild needed
        assert idx_path.read_bytes() == original
        assert tidx_path.read_bytes() == original_t
    check_prefix(reopened, reopened.log_end_offset)
    for off in range(seg.base_offset, seg.next_offset, 3):
        assert fmt.read_header(region_bytes(reopened.read(off, 1))).base_offset <= off


def test_flipped_byte_in_an_old_segment_raises_corrupt_record_on_checked_read(tmp_path):
    log, _, _ = build(tmp_path)
    log.close()
    old = LogSegment(tmp_path / "t-0", 0, open_log(tmp_path / "other").config)
    old.load()
    headers = list(old.iter_headers(0))
    target = headers[2]
    pos = sum(h.size for h in headers[:2])
    old.close()
    with open(old.log_path, "r+b") as f:  # one byte in the middle of a record body
        f.seek(pos + fmt.HEADER_SIZE + 30)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x40]))
    log = open_log(tmp_path, **CFG)
    assert log.log_end_offset == 300  # an old segment is not rescanned, nothing is lost
    with pytest.raises(CorruptRecord, match="CRC"):
        log.read_checked(target.base_offset + 3, 10**6)
    with pytest.raises(CorruptRecord):
        log.read_checked(0, 10**6)  # a region that covers it
    # the unchecked sendfile path serves it; the client's decode catches it
    with pytest.raises(CorruptRecord):
        fmt.decode(region_bytes(log.read(target.base_offset, 1)))
    assert log.read_checked(target.next_offset, 100)  # its neighbours are fine
    assert log.read_checked(0, 1)
