"""Sparse offset and time indexes: lookups, truncation, persistence, sanity checks."""

from __future__ import annotations

import pytest

from pyspark_logsource.broker.log.index import CorruptIndexError, OffsetIndex, TimeIndex


def test_offset_index_lookup_returns_last_entry_at_or_before(tmp_path):
    idx = OffsetIndex(tmp_path / "0.index", 100, 1 << 20)
    assert idx.lookup(150) == (100, 0)  # empty: the segment start
    for rel, pos in [(10, 1000), (20, 2000), (35, 3500)]:
        idx.append(100 + rel, pos)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 1000)
    assert idx.lookup(134) == (120, 2000)
    assert idx.lookup(10**12) == (135, 3500)
    assert idx.lookup_position(1999) == (110, 1000)
    assert idx.lookup_position(2000) == (120, 2000)
    assert idx.lookup_position(10) == (100, 0)
    assert idx.last_entry == (135, 3500)


def test_offset_index_persists_and_truncates(tmp_path):
    path = tmp_path / "0.index"
    idx = OffsetIndex(path, 0, 1 << 20)
    for i in range(1, 50):
        idx.append(i * 10, i * 100)
    idx.close()
    assert path.stat().st_size == 49 * 8
    idx = OffsetIndex(path, 0, 1 << 20)
    idx.sanity_check(segment_size=10_000)
    assert len(idx) == 49 and idx.lookup(255) == (250, 2500)
    idx.truncate_to(250)
    assert idx.last_entry == (240, 2400)
    idx.close()
    assert path.stat().st_size == 24 * 8
    assert OffsetIndex(path, 0, 1 << 20).lookup(1000) == (240, 2400)


def test_offset_index_is_full_at_segment_index_bytes(tmp_path):
    idx = OffsetIndex(tmp_path / "0.index", 0, 8 * 3)
    for i in range(1, 4):
        assert not idx.is_full
        idx.append(i, i)
    assert idx.is_full


def test_entries_reach_the_file_at_flush_and_close(tmp_path):
    """Write-behind: an append only adds to memory; flush and close write the file."""
    path, tpath = tmp_path / "0.index", tmp_path / "0.timeindex"
    idx, tidx = OffsetIndex(path, 0, 1 << 20), TimeIndex(tpath, 0, 1 << 20)
    for i in range(1, 11):
        assert idx.append(i * 10, i * 100) is False  # not full
        assert tidx.maybe_append(1000 + i, i * 10) is False
    assert path.stat().st_size == 0 and tpath.stat().st_size == 0
    idx.flush()
    tidx.flush()
    assert path.stat().st_size == 10 * 8 and tpath.stat().st_size == 10 * 12
    for i in range(11, 21):
        idx.append(i * 10, i * 100)
    idx.truncate_to(155)  # drops entries already in the file and pending ones
    idx.flush()
    assert path.stat().st_size == 15 * 8
    idx.append(160, 1600)
    idx.close()
    tidx.close()
    reopened = OffsetIndex(path, 0, 1 << 20)
    reopened.sanity_check(segment_size=10_000)
    assert [reopened.lookup(o) for o in (99, 150, 155, 10**6)] == [
        (90, 900),
        (150, 1500),
        (150, 1500),
        (160, 1600),
    ]
    assert TimeIndex(tpath, 0, 1 << 20).last_entry == (1010, 100)


def test_append_reports_a_full_index(tmp_path):
    idx, tidx = OffsetIndex(tmp_path / "0.index", 0, 8 * 2), TimeIndex(tmp_path / "0.timeindex", 0, 12 * 2)
    assert [idx.append(i, i) for i in (1, 2)] == [False, True]
    assert [tidx.maybe_append(ts, 0) for ts in (5, 5, 6)] == [False, False, True]  # 5 again: no entry


@pytest.mark.parametrize(
    "damage",
    ["partial", "not_increasing", "past_segment", "missing"],
)
def test_offset_index_sanity_check_detects_damage(tmp_path, damage):
    path = tmp_path / "0.index"
    idx = OffsetIndex(path, 0, 1 << 20)
    for i in range(1, 10):
        idx.append(i, i * 100)
    idx.close()
    raw = bytearray(path.read_bytes())
    if damage == "partial":
        raw = raw[:-3]
    elif damage == "not_increasing":
        raw[8:16] = raw[0:8]
    elif damage == "past_segment":
        raw[-4:] = (10**6).to_bytes(4, "big")
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(bytes(raw))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 1 << 20).sanity_check(segment_size=1000)


def test_time_index_lookup_and_monotonic_entries(tmp_path):
    path = tmp_path / "0.timeindex"
    idx = TimeIndex(path, 1000, 1 << 20)
    assert idx.lookup_before(5) is None
    idx.maybe_append(100, 1000)
    idx.maybe_append(90, 1005)  # not larger: skipped
    idx.maybe_append(200, 1010)
    idx.maybe_append(300, 1020)
    assert len(idx) == 3
    assert idx.lookup_before(100) is None
    assert idx.lookup_before(101) == (100, 1000)
    assert idx.lookup_before(300) == (200, 1010)
    assert idx.lookup_before(10**15) == (300, 1020)
    idx.truncate_to(1015)
    assert idx.last_entry == (200, 1010)
    idx.close()
    again = TimeIndex(path, 1000, 1 << 20)
    again.sanity_check(next_offset=1016)
    assert again.last_entry == (200, 1010)
    with pytest.raises(CorruptIndexError):
        again.sanity_check(next_offset=1005)  # entry points past the segment's data
