"""PartitionLog.append_runs: several requests' runs appended together answer and store exactly as one by one."""

from __future__ import annotations

import random

import pytest
from support.logdata import make_batch, open_log, region_bytes

from pyspark_logsource.errors import LogSourceError, StorageError
from pyspark_logsource.format import batch as fmt
from pyspark_logsource.format.control import set_transactional


def pbatch(start: int, n: int, pid: int = 7, epoch: int = 0, seq: int = 0) -> bytearray:
    return make_batch(start, n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def outcome(r) -> tuple:
    return ("error", type(r).__name__) if isinstance(r, LogSourceError) else tuple(r[:2]) + tuple(r[3:])


def one_by_one(log, runs) -> list:
    out = []
    for r in runs:
        try:
            out.append(log.append(r))
        except LogSourceError as e:
            out.append(e)
    return out


def log_bytes(log) -> bytes:
    return region_bytes(log.read(log.log_start_offset, 1 << 30)) if log.log_end_offset else b""


def check_same(tmp_path, runs_of, same_bytes: bool = True, **config) -> list:
    """Append the same runs to two logs, coalesced and one by one; the answers and the bytes must agree."""
    a = open_log(tmp_path / "a", **config)
    b = open_log(tmp_path / "b", **config)
    runs = runs_of()  # made once (encode stamps the time): each log gets its own copies to stamp
    got = a.append_runs([type(r)(r) for r in runs])
    want = one_by_one(b, [type(r)(r) for r in runs])
    assert [outcome(r) for r in got] == [outcome(r) for r in want]
    assert a.log_end_offset == b.log_end_offset
    assert [s.base_offset for s in a.segments] == [s.base_offset for s in b.segments]
    if same_bytes:
        assert log_bytes(a) == log_bytes(b)
    # the producer state afterwards is the same too: the next batch of each producer is accepted alike
    nxt = [pbatch(0, 1, pid=p, seq=s) for p in (7, 8) for s in range(0, 40)]
    assert [outcome(r) for r in one_by_one(a, nxt)] == [outcome(r) for r in one_by_one(b, nxt)]
    return got


def test_good_runs_get_consecutive_offsets_and_one_write(tmp_path):
    got = check_same(tmp_path, lambda: [pbatch(i, 1, seq=i) for i in range(20)])
    assert [r.base_offset for r in got] == list(range(20))


def test_a_failed_run_changes_nothing_and_the_next_are_checked_without_it(tmp_path):
    def runs():
        bad_crc = pbatch(2, 1, seq=2)
        bad_crc[-1] ^= 0xFF
        return [
            pbatch(0, 2, seq=0),
            bad_crc,  # CorruptRecord
            pbatch(2, 1, seq=2),
            pbatch(3, 1, seq=5),  # a gap: OutOfOrderSequence
            pbatch(3, 1, seq=3),
            pbatch(0, 2, seq=0),  # a retry: the original offsets, nothing written
            bytes(pbatch(3, 1, seq=3) + pbatch(4, 1, seq=4)),  # half a retry: DuplicateSequence
            make_batch(4, 3),  # not idempotent
            pbatch(0, 1, pid=8, seq=1),  # unknown producer
            pbatch(0, 1, pid=8, seq=0),
            bytearray(),  # empty
            pbatch(9, 1, epoch=1, seq=0),  # an epoch bump
            pbatch(9, 1, epoch=0, seq=4),  # the old epoch: InvalidProducerEpoch
        ]

    got = check_same(tmp_path, runs)
    kinds = [type(r).__name__ if isinstance(r, LogSourceError) else "ok" for r in got]
    assert kinds == [
        "ok",
        "CorruptRecord",
        "ok",
        "OutOfOrderSequence",
        "ok",
        "ok",
        "DuplicateSequence",
        "ok",
        "UnknownProducerId",
        "ok",
        "CorruptRecord",
        "ok",
        "InvalidProducerEpoch",
    ]
    assert got[5].duplicate and got[5].base_offset == 0


def test_a_group_that_would_roll_the_segment_rolls_where_one_by_one_does(tmp_path):
    got = check_same(tmp_path, lambda: [pbatch(i * 5, 5, seq=i * 5) for i in range(30)], segment_bytes=2000)
    assert not any(isinstance(r, LogSourceError) for r in got)


def test_transactional_runs_are_appended_in_their_turn(tmp_path):
    def runs():
        txn = pbatch(2, 2, pid=9)
        set_transactional(txn)
        return [make_batch(0, 2), txn, make_batch(4, 2), pbatch(6, 1, pid=9, seq=2)]

    check_same(tmp_path, runs)


def test_log_append_time(tmp_path):
    got = check_same(
        tmp_path,
        lambda: [pbatch(i, 1, seq=i) for i in range(5)],
        same_bytes=False,
        message_timestamp_type="LogAppendTime",
    )
    log = open_log(tmp_path / "a", message_timestamp_type="LogAppendTime")
    batches = fmt.decode_all(log_bytes(log))  # CRCs recomputed: decoding checks them
    assert [b.header.max_timestamp for b in batches][:5] == [r.log_append_time for r in got]


def test_random_mixes(tmp_path):
    rng = random.Random(14)
    for k in range(20):
        seqs = {7: 0, 8: 0}
        plan = []
        for _ in range(rng.randint(2, 30)):
            pid = rng.choice((7, 8))
            n = rng.randint(1, 3)
            roll = rng.random()
            seq = seqs[pid]
            if roll < 0.1:
                seq = max(0, seq - n)  # a retry, or a gap at 0
            elif roll < 0.15:
                seq += 2  # a gap
            else:
                seqs[pid] += n
            plan.append((pid, n, seq, rng.random() < 0.05))

        def runs(plan=plan):
            out = []
            for pid, n, seq, corrupt in plan:
                b = pbatch(0, n, pid=pid, seq=seq)
                if corrupt:
                    b[-3] ^= 1
                out.append(b)
            return out

        check_same(tmp_path / str(k), runs, segment_bytes=rng.choice((1500, 1 << 20)))


@pytest.mark.parametrize("n", [1, 2])
def test_one_or_two_runs(tmp_path, n):
    check_same(tmp_path, lambda: [pbatch(i, 1, seq=i) for i in range(n)])


def test_a_closed_log_fails_the_whole_group(tmp_path):
    log = open_log(tmp_path)
    log.close()
    with pytest.raises(StorageError):  # the broker answers every request of the group with its code
        log.append_runs([pbatch(0, 1, seq=0), pbatch(1, 1, seq=1)])
    assert isinstance(log.append_runs([pbatch(0, 1, seq=0)])[0], StorageError)
