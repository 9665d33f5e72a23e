"""The log layer of replication: leader-epoch cache and checkpoint, high watermark and its checkpoint,
append as follower (leader's bytes, offsets and epochs), truncation, and crash recovery of the files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from support.logdata import all_records, make_batch, open_log, region_bytes

from pyspark_logsource.broker.log import LogConfig, LogManager
from pyspark_logsource.broker.log.checkpoint import CorruptCheckpoint, read_checkpoint, write_checkpoint
from pyspark_logsource.broker.log.epochs import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCache
from pyspark_logsource.broker.log.hw_checkpoint import HW_CHECKPOINT_FILE, read_high_watermarks
from pyspark_logsource.errors import CorruptRecord, InvalidRecord
from pyspark_logsource.format import batch as fmt


def log_bytes(lg) -> bytes:
    out = b""
    for seg in lg.segments:
        with open(seg.log_path, "rb") as f:
            out += f.read()
    return out


def replicate(leader, follower, max_bytes: int = 1 << 20) -> None:
    """What the replica fetcher does: read from the follower's end on the leader, append as follower."""
    while follower.log_end_offset < leader.log_end_offset:
        follower.append_as_follower(region_bytes(leader.read(follower.log_end_offset, max_bytes)))


# ---------------------------------------------------------------- the epoch cache


def test_end_offset_for_follows_kafkas_rules(tmp_path):
    c = LeaderEpochCache(tmp_path)
    c.assign(1, 0)
    c.assign(3, 10)
    c.assign(5, 25)
    leo = 40
    assert c.end_offset_for(5, leo) == (5, 40)  # the latest epoch ends at the log end
    assert c.end_offset_for(3, leo) == (3, 25)  # an older one where the next begins
    assert c.end_offset_for(4, leo) == (3, 25)  # an unknown one between: the largest epoch below it
    assert c.end_offset_for(2, leo) == (1, 10)
    assert c.end_offset_for(0, leo) == (0, 0)  # below every known epoch: the first start
    assert c.end_offset_for(6, leo) == (-1, -1)  # newer than any known
    assert c.end_offset_for(-1, leo) == (-1, -1)
    assert c.epoch_for_offset(24) == 3 and c.epoch_for_offset(25) == 5


def test_assign_ignores_older_epochs_and_drops_conflicting_entries(tmp_path):
    c = LeaderEpochCache(tmp_path)
    c.assign(1, 0)
    c.assign(2, 10)
    c.assign(2, 15)  # same epoch again: no change
    c.assign(1, 20)  # older: ignored
    assert c.entries() == [(1, 0), (2, 10)]
    c.assign(4, 5)  # a newer epoch starting before the last one's start replaces it
    assert c.entries() == [(1, 0), (4, 5)]


def test_truncation_from_end_and_start(tmp_path):
    c = LeaderEpochCache(tmp_path)
    for e, s in [(0, 0), (1, 10), (2, 20)]:
        c.assign(e, s)
    c.truncate_from_end(20)
    assert c.entries() == [(0, 0), (1, 10)]
    c.truncate_from_start(12)
    assert c.entries() == [(1, 12)]
    reloaded = LeaderEpochCache(tmp_path)
    assert reloaded.load() and reloaded.entries() == [(1, 12)]


def test_checkpoint_file_is_kafkas_format(tmp_path):
    c = LeaderEpochCache(tmp_path)
    c.assign(0, 0)
    c.assign(7, 42)
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n2\n0 0\n7 42\n"


@pytest.mark.parametrize(
    "text", ["", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0 x\n", "0\n1\n0 0 0\n", "0\n2\n5 0\n3 10\n", "\xff\xfe"]
)
def test_malformed_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path, text):
    lg = open_log(tmp_path)
    lg.append(make_batch(0, 5), leader_epoch=2)
    lg.append(make_batch(5, 5), leader_epoch=2)
    lg.append(make_batch(10, 3), leader_epoch=6)
    lg.close()
    path = lg.directory / LEADER_EPOCH_CHECKPOINT_FILE
    path.write_bytes(text.encode("latin-1"))
    lg = open_log(tmp_path)
    assert lg.epochs.entries() == [(2, 0), (6, 10)]
    assert path.read_text() == "0\n2\n2 0\n6 10\n"  # rebuilt and saved
    lg.close()


def test_checkpoint_reader_raises_a_typed_error(tmp_path):
    path = tmp_path / "cp"
    write_checkpoint(path, [("a", 1, 2)])
    assert read_checkpoint(path, 3) == [["a", "1", "2"]]
    assert read_checkpoint(tmp_path / "missing", 3) is None
    path.write_text("0\n3\na 1 2\n")
    with pytest.raises(CorruptCheckpoint) as ei:
        read_checkpoint(path, 3)
    assert ei.value.code == CorruptCheckpoint.code  # a StorageError: Kafka's KAFKA_STORAGE_ERROR code


# ---------------------------------------------------------------- the leader's side


def test_leader_appends_stamp_the_epoch_and_record_where_it_starts(tmp_path):
    lg = open_log(tmp_path)
    lg.append(make_batch(0, 4), leader_epoch=0)
    lg.append(make_batch(4, 4), leader_epoch=3)
    lg.append(make_batch(8, 4), leader_epoch=3)
    assert lg.epochs.entries() == [(0, 0), (3, 4)]
    epochs = [h.leader_epoch for _, h in fmt.iter_headers(log_bytes(lg))]
    assert epochs == [0, 3, 3]
    assert lg.epochs.end_offset_for(0, lg.log_end_offset) == (0, 4)
    lg.close()
    lg = open_log(tmp_path)  # the checkpoint survives a restart
    assert lg.epochs.entries() == [(0, 0), (3, 4)]


def test_appends_without_an_epoch_stamp_the_epoch_this_replica_leads_in(tmp_path):
    lg = open_log(tmp_path)
    lg.append(make_batch(0, 2))
    lg.epochs.assign(5, lg.log_end_offset)  # what becoming leader at epoch 5 records
    lg.append(make_batch(2, 2))  # an appender that does not know the epoch (the group store, say)
    assert [h.leader_epoch for _, h in fmt.iter_headers(log_bytes(lg))] == [0, 5]
    assert lg.epochs.entries() == [(0, 0), (5, 2)]


def test_high_watermark_is_the_log_end_unless_replicated(tmp_path):
    lg = open_log(tmp_path)
    lg.append(make_batch(0, 10))
    assert lg.high_watermark == 10  # single broker: everything appended is committed
    lg.set_high_watermark(4)
    assert lg.high_watermark == 4
    lg.append(make_batch(10, 2))
    assert lg.high_watermark == 4
    lg.set_high_watermark(12)
    lg.truncate_to(10)
    assert lg.high_watermark == 10  # never above the log end
    lg.set_high_watermark(None)
    assert lg.high_watermark == 10 == lg.log_end_offset


# ---------------------------------------------------------------- the follower's side


def test_follower_log_equals_the_leaders_byte_for_byte(tmp_path):
    leader = open_log(tmp_path / "leader", segment_bytes=2000)
    follower = open_log(tmp_path / "follower", segment_bytes=2000)
    pid = 77
    for i in range(12):
        leader.append(
            make_batch(leader.log_end_offset, 5, producer_id=pid, producer_epoch=0, base_sequence=5 * i),
            leader_epoch=1 if i < 6 else 2,
        )
    replicate(leader, follower, max_bytes=700)  # several fetches, some ending in a partial batch
    assert follower.log_end_offset == leader.log_end_offset == 60
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.epochs.entries() == leader.epochs.entries() == [(1, 0), (2, 30)]
    assert [len(s.log_path.read_bytes()) for s in follower.segments] == [
        len(s.log_path.read_bytes()) for s in leader.segments
    ]
    # the follower knows the producer's sequences: as the new leader it answers a retry as a duplicate
    retry = make_batch(0, 5, producer_id=pid, producer_epoch=0, base_sequence=55)
    info = follower.append(retry, leader_epoch=3)
    assert info.duplicate and info.base_offset == 55
    nxt = follower.append(
        make_batch(0, 5, producer_id=pid, producer_epoch=0, base_sequence=60), leader_epoch=3
    )
    assert (nxt.base_offset, nxt.duplicate) == (60, False)
    assert follower.epochs.entries() == [(1, 0), (2, 30), (3, 60)]


def test_follower_append_refuses_bad_crc_and_offsets_below_its_end(tmp_path):
    leader = open_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    leader.append(make_batch(0, 5), leader_epoch=1)
    data = bytearray(region_bytes(leader.read(0, 1 << 20)))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecord):
        follower.append_as_follower(data)
    assert follower.log_end_offset == 0 and follower.size_bytes == 0
    good = region_bytes(leader.read(0, 1 << 20))
    follower.append_as_follower(good)
    with pytest.raises(InvalidRecord):
        follower.append_as_follower(good)  # offsets 0-4 again
    assert follower.log_end_offset == 5
    assert follower.append_as_follower(good[:30]) is None  # a partial batch: nothing to append yet


def test_kip101_divergent_follower_truncates_to_the_leaders_epoch_end(tmp_path):
    """KIP-101's scenario: A leads epoch 1 and appends m1, m2; B has only m1 when A dies. B leads epoch 2
    and appends m3 at offset 1. A returns: its high watermark would keep m2 (wrong); the epoch end does not."""
    a = open_log(tmp_path / "a")
    b = open_log(tmp_path / "b")
    a.append(make_batch(0, 1), leader_epoch=1)
    replicate(a, b)
    a.append(make_batch(1, 1), leader_epoch=1)  # m2: never replicated, never committed
    a.set_high_watermark(1)
    b.append(make_batch(1, 1, size=40), leader_epoch=2)  # m3 by the new leader
    # A returns as follower: it asks the leader where its latest epoch ended
    epoch, end = b.epochs.end_offset_for(a.epochs.latest_epoch, b.log_end_offset)
    assert (epoch, end) == (1, 1)
    a.truncate_to(min(end, a.epochs.end_offset_for(epoch, a.log_end_offset)[1]))
    assert a.log_end_offset == 1 and a.epochs.entries() == [(1, 0)]
    replicate(b, a)
    assert log_bytes(a) == log_bytes(b)
    assert a.epochs.entries() == b.epochs.entries() == [(1, 0), (2, 1)]


def test_truncate_fully_clears_the_epochs(tmp_path):
    lg = open_log(tmp_path)
    lg.append(make_batch(0, 5), leader_epoch=4)
    lg.set_high_watermark(5)
    lg.truncate_fully_and_start_at(100)
    assert lg.epochs.entries() == [] and lg.high_watermark == 100
    assert (lg.directory / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n0\n"


# ---------------------------------------------------------------- the high-watermark checkpoint


def test_high_watermark_checkpoint_per_log_dir(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    mgr = LogManager(dirs, LogConfig(), background=False)
    logs = [mgr.create_log("t", p) for p in range(3)]
    for lg in logs:
        lg.append(make_batch(0, 10))
    mgr.hw_checkpoint_enabled = True
    for i, lg in enumerate(logs):
        lg.set_high_watermark(3 + i)
    mgr.close()
    found = {}
    for d in dirs:
        assert (d / HW_CHECKPOINT_FILE).exists()
        found.update(read_high_watermarks(d))
    assert found == {("t", 0): 3, ("t", 1): 4, ("t", 2): 5}
    mgr = LogManager(dirs, LogConfig(), background=False)
    assert [mgr.checkpointed_high_watermark("t", p) for p in range(3)] == [3, 4, 5]
    assert mgr.checkpointed_high_watermark("t", 9) is None
    mgr.close()


def test_corrupt_high_watermark_checkpoint_is_ignored(tmp_path):
    d = tmp_path / "d"
    mgr = LogManager([d], LogConfig(), background=False)
    mgr.create_log("t", 0).append(make_batch(0, 3))
    mgr.close()
    (d / HW_CHECKPOINT_FILE).write_text("0\n5\nt 0 2\n")
    mgr = LogManager([d], LogConfig(), background=False)
    assert mgr.checkpointed_high_watermark("t", 0) is None  # safe: the leader tells the replica its HW
    assert mgr.get_log("t", 0).log_end_offset == 3
    mgr.close()


def test_single_broker_writes_no_high_watermark_checkpoint(tmp_path):
    d = tmp_path / "d"
    mgr = LogManager([d], LogConfig(), background=False)
    mgr.create_log("t", 0).append(make_batch(0, 3))
    mgr.close()
    assert not (d / HW_CHECKPOINT_FILE).exists()


# ---------------------------------------------------------------- crash recovery


_CRASHER = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[2])
    from support.logdata import make_batch, open_log
    from pyspark_logsource.broker.log.epochs import LeaderEpochCache
    lg = open_log(sys.argv[1], flush_messages=1)
    lg.append(make_batch(0, 5), leader_epoch=1)
    lg.append(make_batch(5, 5), leader_epoch=2)
    if sys.argv[3] == "torn-checkpoint":
        # die between writing the checkpoint's temporary file and its rename
        with open(lg.epochs.path.with_name(lg.epochs.path.name + ".tmp"), "w") as f:
            f.write("0\\n3\\n1 0\\n")
    else:
        # an epoch the checkpoint records whose batch never reached the disk whole
        lg.epochs.assign(3, 10)
        with open(lg.active_segment.log_path, "ab") as f:
            f.write(bytes(make_batch(10, 5))[:40])
    os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.parametrize("case", ["torn-checkpoint", "torn-batch"])
def test_kill_minus_nine_leaves_a_consistent_epoch_cache(tmp_path, case):
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run(
        [sys.executable, "-c", _CRASHER, str(tmp_path), tests_dir, case], capture_output=True
    )
    assert proc.returncode == -9, proc.stderr.decode()
    lg = open_log(tmp_path)
    assert lg.log_end_offset == 10
    assert lg.epochs.entries() == [(1, 0), (2, 5)]  # the epoch past the recovered log end is dropped
    assert [r.offset for r in all_records(lg)] == list(range(10))
    lg.close()
