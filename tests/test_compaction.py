"""Log compaction (design 4.8): the cleaner, the crash-safe swap, and what readers see (gaps)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from support.brokers import broker_process, broker_thread

from pyspark_logsource import Admin, Consumer, Producer
from pyspark_logsource.broker.log import LogConfig, LogManager
from pyspark_logsource.broker.log.loader import SWAP_META_SUFFIX
from pyspark_logsource.errors import InvalidRecord
from pyspark_logsource.faults import FAULT_ENV
from pyspark_logsource.format import ARROW_SCHEMA, encode, encode_kafka, to_arrow, walk

COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": str(64 << 10)}
N, K = 100_000, 100


def _keys(n: int = N, k: int = K, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, k, n)


def _fill(lg, keys: np.ndarray, per_batch: int = 100) -> None:
    for i in range(0, len(keys), per_batch):
        ks = keys[i : i + per_batch]
        lg.append(encode([b"v%d" % (i + j) for j in range(len(ks))], [b"k%d" % k for k in ks]))


def _last_offsets(keys: np.ndarray) -> dict[bytes, int]:
    return {b"k%d" % k: i for i, k in enumerate(keys.tolist())}


def _table(lg):
    """Every record of the log (a read returns batches of one segment: read on until the end)."""
    parts, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        data = lg.read_checked(offset, 1 << 30)
        walked = walk(data)
        if not walked:
            break  # compaction removed everything up to the end
        parts.append(to_arrow(data))
        offset = walked[-1][1].next_offset
    return pa.concat_tables(parts) if parts else ARROW_SCHEMA.empty_table()


def _check_valid(lg) -> None:
    """One copy of every offset: strictly increasing offsets, segments in order, nothing past the end."""
    offs = _table(lg).column("offset").to_numpy()
    assert (np.diff(offs) > 0).all()
    bases = [s.base_offset for s in lg.segments]
    assert bases == sorted(set(bases))
    names = sorted(p.name for p in lg.directory.iterdir())
    assert not [n for n in names if n.endswith((".cleaned", ".swap", SWAP_META_SUFFIX))], names


def open_manager(d: Path, **cfg) -> LogManager:
    return LogManager([d], LogConfig(**cfg), background=False)


def test_compacts_to_last_value_per_key_offsets_unchanged(tmp_path):
    keys = _keys()
    m = open_manager(tmp_path)
    lg = m.create_topic("t", 1, COMPACT)[0]
    _fill(lg, keys)
    lg.roll()  # the active segment is never cleaned
    before_end, before_start = lg.log_end_offset, lg.log_start_offset
    stats = m.clean_logs()
    assert stats and stats[0].records_in == N and stats[0].records_out == K
    t = _table(lg)
    want = _last_offsets(keys)
    got = dict(zip(t.column("key").to_pylist(), t.column("offset").to_pylist(), strict=True))
    assert got == want  # the last record of each key survives, at its original offset
    assert t.column("value").to_pylist() == [b"v%d" % o for o in t.column("offset").to_pylist()]
    assert (lg.log_start_offset, lg.log_end_offset) == (before_start, before_end)
    _check_valid(lg)
    # a second pass merges the now tiny segments and changes nothing readers see
    m.clean_logs(force=True)
    assert len(lg.segments) < 10
    assert _table(lg).equals(t)
    m.close()
    m = open_manager(tmp_path)  # and it all survives a restart
    assert _table(m.get_log("t", 0)).equals(t)
    m.close()


def test_tombstones_disappear_after_delete_retention(tmp_path):
    m = open_manager(tmp_path)
    lg = m.create_topic("t", 1, {**COMPACT, "delete.retention.ms": "60000"})[0]
    lg.append(encode([b"a1", b"b1", b"c1"], [b"a", b"b", b"c"]))
    lg.append(encode_kafka([None, b"c2"], [b"a", b"c"]))  # a tombstone for a, in Kafka's layout
    lg.roll()
    now = int(time.time() * 1000)
    m.clean_logs(force=True, now_ms=now)
    t = _table(lg)
    assert t.column("offset").to_pylist() == [1, 3, 4]  # a's old value is gone, its tombstone stays
    assert t.column("value").to_pylist() == [b"b1", None, b"c2"]
    m.clean_logs(force=True, now_ms=now + 61_000)  # delete.retention.ms later
    t = _table(lg)
    assert t.column("offset").to_pylist() == [1, 4]
    assert t.column("key").to_pylist() == [b"b", b"c"]
    assert lg.log_end_offset == 5
    _check_valid(lg)
    m.close()


def test_min_compaction_lag_and_dirty_ratio(tmp_path):
    m = open_manager(tmp_path)
    lg = m.create_topic("lag", 1, {**COMPACT, "min.compaction.lag.ms": str(3600_000)})[0]
    _fill(lg, _keys(2000, 10))
    lg.roll()
    assert m.clean_logs() == []  # records younger than the lag stay
    lg2 = m.create_topic("ratio", 1, {**COMPACT, "min.cleanable.dirty.ratio": "0.9"})[0]
    _fill(lg2, np.arange(2000))  # distinct keys: cleaning keeps them all
    lg2.roll()
    assert len(m.clean_logs()) == 1  # all dirty: ratio 1.0
    _fill(lg2, np.arange(100))
    lg2.roll()
    assert m.clean_logs() == []  # a little new dirt: below 0.9
    m.close()


def test_min_compaction_lag_of_records_without_timestamps_goes_by_the_files_age(tmp_path):
    """Kafka's largestTimestamp again: records stored with timestamp -1 are as young as their file."""
    m = open_manager(tmp_path)
    lg = m.create_topic("nots", 1, {**COMPACT, "min.compaction.lag.ms": str(3600_000)})[0]
    keys = _keys(2000, 10)
    for i in range(0, len(keys), 100):
        lg.append(
            encode([b"v%d" % j for j in range(100)], [b"k%d" % k for k in keys[i : i + 100]], timestamps=-1)
        )
    lg.roll()
    assert all(s.max_timestamp == -1 for s in lg.segments[:-1])
    assert m.clean_logs() == []  # fresh files: younger than the lag
    old = time.time() - 7200
    for seg in lg.segments[:-1]:
        os.utime(seg.log_path, (old, old))
    assert len(m.clean_logs()) == 1
    assert lg.size_bytes < 2000 * 10  # ten keys left of 2000 records
    m.close()


def test_bounded_offset_map_cleans_a_prefix(tmp_path):
    m = LogManager([tmp_path], LogConfig(cleaner_dedupe_buffer_size=4096), background=False)
    lg = m.create_topic("t", 1, {**COMPACT, "segment.bytes": "8192"})[0]
    keys = np.arange(3000) % 1000  # 1000 distinct keys do not fit in 4 KiB
    _fill(lg, keys, per_batch=50)
    lg.roll()
    first = m.clean_logs(force=True)[0]
    assert first.dirty_end < lg.segments[-1].base_offset  # only a prefix fitted
    for _ in range(50):
        if not m.clean_logs(force=True):
            break
    got = dict(
        zip(_table(lg).column("key").to_pylist(), _table(lg).column("offset").to_pylist(), strict=True)
    )
    assert got == _last_offsets(keys) and _table(lg).num_rows == 1000
    m.close()


def test_keyless_records_are_refused_on_compacted_topics(tmp_path):
    m = open_manager(tmp_path)
    lg = m.create_topic("t", 1, COMPACT)[0]
    lg.append(encode([b"x"], [b"k"]))
    for batch in (encode([b"y", b"z"], [b"k", None]), encode_kafka([b"y"], [None])):
        with pytest.raises(InvalidRecord) as e:
            lg.append(batch)
        assert e.value.code == 87
    assert lg.log_end_offset == 1 and _table(lg).column("value").to_pylist() == [b"x"]
    m.close()
    with broker_thread(tmp_path / "b") as b:
        Admin(b.bootstrap).create_topic("c", 1, config={"cleanup.policy": "compact"})
        p = Producer(b.bootstrap, linger_ms=0)
        try:
            with pytest.raises(InvalidRecord):
                p.send("c", value=b"v").result(30)
            assert p.send("c", value=b"v", key=b"k").result(30)[1] == 0  # nothing was appended before
        finally:
            p.close()


def test_consumer_from_the_beginning_sees_the_final_state(tmp_path):
    keys = _keys(20_000, K)
    with broker_thread(tmp_path, config={"log.cleaner.enable": "false"}) as b:
        Admin(b.bootstrap).create_topic("state", 1, config=COMPACT)
        p = Producer(b.bootstrap, linger_ms=5)
        for i, k in enumerate(keys.tolist()):
            p.send("state", value=b"v%d" % i, key=b"k%d" % k, partition=0)
        p.send("state", value=None, key=b"k0", partition=0)  # a tombstone for k0, in the head
        p.flush()
        p.close()
        logs = b._broker.logs
        lg = logs.get_log("state", 0)
        lg.roll()
        assert logs.clean_logs()
        end = lg.log_end_offset
        c = Consumer(b.bootstrap, auto_offset_reset="earliest")
        try:
            c.assign([("state", 0)])
            state: dict[bytes, tuple[int, bytes | None]] = {}
            deadline = time.monotonic() + 60
            while c.position(("state", 0)) < end and time.monotonic() < deadline:
                for msg in c.poll(1000, max_records=100_000):
                    state[msg.key] = (msg.offset, msg.value)
            assert c.position(("state", 0)) == end  # the consumer moved past the gaps to the log end
        finally:
            c.close()
    want = {key: (off, b"v%d" % off) for key, off in _last_offsets(keys).items()}
    want[b"k0"] = (len(keys), None)
    assert state == want


# ------------------------------------------------------------------ crash safety of the swap


def _prepare(d: Path, n: int = 20_000) -> tuple[dict, int]:
    keys = _keys(n, 50, seed=3)
    m = LogManager([d], LogConfig(), background=False)
    lg = m.create_topic("t", 1, {**COMPACT, "segment.bytes": str(32 << 10)})[0]
    _fill(lg, keys)
    lg.roll()
    end = lg.log_end_offset
    m.close()
    return _last_offsets(keys), end


def _check_after_crash(d: Path, want: dict, end: int) -> None:
    m = open_manager(d)
    lg = m.get_log("t", 0)
    _check_valid(lg)
    t = _table(lg)
    assert lg.log_end_offset == end
    got: dict[bytes, int] = {}
    for k, o in zip(t.column("key").to_pylist(), t.column("offset").to_pylist(), strict=True):
        got[k] = o
    assert got == want  # the final state, whether the swap was rolled back or finished
    assert t.column("value").to_pylist() == [b"v%d" % o for o in t.column("offset").to_pylist()]
    m.clean_logs(force=True)  # and cleaning goes on from there
    assert (
        dict(zip(_table(lg).column("key").to_pylist(), _table(lg).column("offset").to_pylist(), strict=True))
        == want
    )
    m.close()


@pytest.mark.slow
@pytest.mark.parametrize("step", ["cleaned", "swap", "deleted", "renamed"])
def test_broker_killed_during_a_swap_restarts_valid(tmp_path, monkeypatch, step):
    want, end = _prepare(tmp_path / "logs")
    monkeypatch.setenv(FAULT_ENV, step)
    b = broker_process(tmp_path, config={"log.cleaner.backoff.ms": "50"})
    with pytest.raises(Exception):  # noqa: B017 - the broker may die before or after it reports ready
        with b as broker:
            broker._proc.wait(60)  # it SIGKILLs itself at the swap step
            assert broker._proc.returncode == -9
            raise RuntimeError("killed")
    monkeypatch.delenv(FAULT_ENV)
    _check_after_crash(tmp_path / "logs", want, end)


@pytest.mark.slow
def test_broker_killed_at_random_moments_while_cleaning(tmp_path):
    """kill -9 at random times while the cleaner works: every restart finds one copy of everything."""
    want, end = _prepare(tmp_path / "logs", 60_000)
    rng = np.random.default_rng(5)
    for _ in range(4):
        with broker_process(tmp_path, config={"log.cleaner.backoff.ms": "10"}) as b:
            time.sleep(float(rng.uniform(0.0, 0.6)))
            b.kill()
        _check_after_crash(tmp_path / "logs", want, end)


def test_damaged_cleaned_and_swap_files(tmp_path):
    want, end = _prepare(tmp_path)
    d = tmp_path / "t-0"
    bases = sorted(int(p.name[:20]) for p in d.glob("*.log"))
    # an unfinished .cleaned segment: never committed, removed
    (d / f"{bases[0]:020d}.log.cleaned").write_bytes(os.urandom(5000))
    # a damaged .swap whose originals are all there: rolled back, nothing lost
    (d / f"{bases[1]:020d}.log.swap").write_bytes((d / f"{bases[1]:020d}.log").read_bytes()[:-7] + b"garbage")
    (d / f"{bases[1]:020d}{SWAP_META_SUFFIX}").write_text(f"{bases[1]},{bases[2]}\n")
    # a garbage .swap without its metadata: rolled back too, the segment it names is intact
    (d / f"{bases[3]:020d}.log.swap").write_bytes(os.urandom(3000))
    (d / f"{bases[4]:020d}.index.swap").write_bytes(b"\x00" * 24)  # an orphan index swap
    m = open_manager(tmp_path)
    lg = m.get_log("t", 0)
    assert [s.base_offset for s in lg.segments] == bases
    assert _table(lg).num_rows == end  # not one record lost
    m.close()
    _check_after_crash(tmp_path, want, end)


@pytest.mark.spark
def test_spark_stream_over_compacted_topic_with_gaps(spark, tmp_path):
    keys = _keys(5000, 20)
    with broker_thread(tmp_path / "b", config={"log.cleaner.enable": "false"}) as b:
        Admin(b.bootstrap).create_topic("cs", 1, config=COMPACT)
        p = Producer(b.bootstrap, linger_ms=5)
        for i, k in enumerate(keys.tolist()):
            p.send("cs", value=b"v%d" % i, key=b"k%d" % k, partition=0)
        p.flush()
        p.close()
        lg = b._broker.logs.get_log("cs", 0)
        lg.roll()
        assert b._broker.logs.clean_logs()
        out = tmp_path / "out"
        q = (
            spark.readStream.format("logsource")
            .option("bootstrap.servers", b.bootstrap)
            .option("subscribe", "cs")
            .option("startingOffsets", "earliest")
            .option("failOnDataLoss", "true")  # a gap is not data loss
            .option("maxOffsetsPerTrigger", "1000")  # micro-batches start and end inside gaps
            .load()
            .selectExpr("CAST(key AS STRING) AS k", "offset")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(300)
        assert q.exception() is None
        rows = spark.read.parquet(str(out)).collect()
        batch = (
            spark.read.format("logsource")
            .option("bootstrap.servers", b.bootstrap)
            .option("subscribe", "cs")
            .load()
        )
        assert batch.count() == 20
    assert {r.k.encode(): r.offset for r in rows} == _last_offsets(keys)
    assert len(rows) == 20
