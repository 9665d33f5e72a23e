"""The offset store and commit protocol, on the local filesystem (no Spark needed)."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from pyspark_logsource.errors import CommitConflict, CommittedDataMissing, ConfigError, CorruptRecord
from pyspark_logsource.offsets import (
    CommittedFile,
    Committer,
    FileRange,
    LoadRange,
    LocalFileSystem,
    Manifest,
    OffsetStore,
    format_table,
    get_filesystem,
    offsets_dict,
)

# -- filesystem ------------------------------------------------------------------------------------


def test_create_is_put_if_absent(tmp_path):
    fs = LocalFileSystem()
    p = str(tmp_path / "a" / "x.json")
    fs.create(p, b"one")
    with pytest.raises(FileExistsError):
        fs.create(p, b"two")
    assert fs.read(p) == b"one"
    fs.create(p, b"three", overwrite=True)
    assert fs.read(p) == b"three"
    # no temporary files are left behind by either outcome
    assert [s.name for s in fs.list(str(tmp_path / "a"))] == ["x.json"]


def test_full_disk_during_create_leaves_nothing_behind(tmp_path, monkeypatch):
    fs = LocalFileSystem()
    p = str(tmp_path / "a" / "x.json")

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        fs.create(p, b"one")
    monkeypatch.undo()
    assert not fs.exists(p)
    assert list(fs.list(str(tmp_path / "a"))) == []  # no temporary file either
    fs.create(p, b"two")  # the name is still free once the disk has room again
    assert fs.read(p) == b"two"


def test_create_race_has_exactly_one_winner(tmp_path):
    fs = LocalFileSystem(fsync=False)
    p = str(tmp_path / "m.json")
    wins, losses = [], []
    barrier = threading.Barrier(8)

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            fs.create(p, f"writer {i}".encode())
            wins.append(i)
        except FileExistsError:
            losses.append(i)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(losses) == 7
    assert fs.read(p) == f"writer {wins[0]}".encode()


def test_rename_never_overwrites(tmp_path):
    fs = LocalFileSystem()
    a, b = str(tmp_path / "a"), str(tmp_path / "sub" / "b")
    fs.create(a, b"A")
    fs.create(b, b"B")
    with pytest.raises(FileExistsError):
        fs.rename(a, b)
    assert fs.read(b) == b"B" and fs.exists(a)
    fs.delete(b)
    fs.rename(a, b)
    assert fs.read(b) == b"A" and not fs.exists(a)
    with pytest.raises(FileNotFoundError):
        fs.rename(a, b + "2")
    # directories too
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    fs.mkdirs(d1)
    fs.mkdirs(d2)
    with pytest.raises(FileExistsError):
        fs.rename(d1, d2)


def test_list_delete_exists(tmp_path):
    fs = get_filesystem(str(tmp_path))
    assert isinstance(fs, LocalFileSystem)
    uri = str(tmp_path / "d")
    assert fs.list(uri) == []
    fs.create(fs.join(uri, "x/y.bin"), b"123")
    assert fs.exists(fs.join(uri, "x", "y.bin"))
    walked = fs.walk_files(uri)
    assert [(s.name, s.size) for s in walked] == [("y.bin", 3)]
    assert fs.delete(uri, recursive=True)
    assert not fs.delete(uri)
    assert not fs.exists(uri)


def test_a_scheme_without_spark_is_a_config_error():
    # URIs with a scheme are served by Hadoop's FileSystem in Spark's JVM (tests/test_offsets_hadoop.py)
    if "pyspark.sql" in __import__("sys").modules:
        from pyspark.sql import SparkSession

        if SparkSession.getActiveSession() is not None:
            pytest.skip("a SparkSession runs in this process")
    with pytest.raises(ConfigError, match="no SparkSession"):
        get_filesystem("hdfs://namenode:8020/data")


# -- manifests -------------------------------------------------------------------------------------


def _manifest(seq=1, load_id="x", files=(), offsets=None, ranges=()):
    return Manifest(seq, load_id, "parquet", offsets or {"t": {"0": 10}}, list(ranges), list(files))


def test_manifest_roundtrip():
    f = CommittedFile("_staging/a/p.parquet", "t+0+0+9.parquet", 10, (FileRange("t", 0, 0, 9, 10),))
    m = _manifest(files=[f], ranges=[LoadRange("t", 0, 0, 10, 10)])
    back = Manifest.from_json(m.to_json())
    assert back == m
    assert back.end_offsets() == {("t", 0): 10}
    assert offsets_dict({("t", 1): 5, ("t", 0): 3, ("u", 0): 1}) == {"t": {"0": 3, "1": 5}, "u": {"0": 1}}


@pytest.mark.parametrize("data", [b"", b"{", b'{"version": 1}', b'{"version": 99, "seq": 1}', b"[1, 2]"])
def test_corrupt_manifest_is_a_typed_error(tmp_path, data):
    store = OffsetStore(str(tmp_path))
    store.fs.create(store.manifest_path(1), data)
    with pytest.raises(CorruptRecord, match="manifest"):
        store.committed_offsets()


def test_empty_store(tmp_path):
    store = OffsetStore(str(tmp_path / "out"))
    assert store.latest() is None
    assert store.committed_offsets() == {}
    assert store.status_rows() == []
    assert format_table([]) == "(nothing committed)"
    assert str(Committer(store).recover()) == "nothing to recover"


# -- the commit protocol ---------------------------------------------------------------------------


def stage_load(store: OffsetStore, ranges: dict[tuple[str, int], tuple[int, int]], files_per_tp: int = 2):
    """Stage fake data files for a load and return (staged, manifest) as the ETL job would."""
    c = Committer(store)
    staged = c.begin()
    prev = store.committed_offsets()
    files, load_ranges = [], []
    for (t, p), (start, end) in sorted(ranges.items()):
        step = max(1, (end - start + files_per_tp - 1) // files_per_tp)
        for first in range(start, end, step):
            last = min(end, first + step) - 1
            rel_staged = f"{staged.staging_rel}/topic={t}/part-{p}-{first}.parquet"
            store.fs.create(store.path(rel_staged), f"{t} {p} {first}..{last}".encode())
            n = last - first + 1
            files.append(
                CommittedFile(
                    rel_staged,
                    f"topic={t}/{t}+{p}+{first}+{last}.parquet",
                    n,
                    (FileRange(t, p, first, last, n),),
                )
            )
        load_ranges.append(LoadRange(t, p, start, end, end - start))
    new = dict(prev)
    new.update({tp: e for tp, (_, e) in ranges.items()})
    return staged, Manifest(staged.seq, staged.load_id, "parquet", offsets_dict(new), load_ranges, files)


def published(store: OffsetStore) -> list[str]:
    return sorted(
        os.path.relpath(s.path, store.root)
        for s in store.fs.walk_files(store.root)
        if "/_" not in "/" + os.path.relpath(s.path, store.root)
    )


def test_commit_publishes_files_and_offsets_together(tmp_path):
    store = OffsetStore(str(tmp_path))
    c = Committer(store)
    staged, man = stage_load(store, {("t", 0): (0, 10), ("t", 1): (0, 4)})
    # before the commit nothing is visible and no offsets are committed
    assert published(store) == [] and store.committed_offsets() == {}
    c.commit(man)
    assert store.committed_offsets() == {("t", 0): 10, ("t", 1): 4}
    assert published(store) == sorted(f.path for f in man.files)
    assert not store.fs.exists(staged.staging)
    assert store.committed_files() == [f.path for f in man.files]
    # the next load starts where this one ended and keeps untouched partitions
    staged2, man2 = stage_load(store, {("t", 0): (10, 15)})
    assert staged2.seq == 2
    c.commit(man2)
    assert store.committed_offsets() == {("t", 0): 15, ("t", 1): 4}
    rows = {(r["topic"], r["partition"]): r for r in store.status_rows()}
    assert rows[("t", 0)]["rows"] == 15 and rows[("t", 0)]["loads"] == 2 and rows[("t", 1)]["committed"] == 4
    assert "committed" in format_table(store.status_rows())


def test_half_written_staging_is_discarded(tmp_path):
    store = OffsetStore(str(tmp_path))
    c = Committer(store)
    c.commit(stage_load(store, {("t", 0): (0, 5)})[1])
    before = published(store)
    # a load dies while writing: a staging dir with a partial file, no manifest
    staged, _ = stage_load(store, {("t", 0): (5, 9)})
    with open(os.path.join(staged.staging, "part-torn.parquet"), "wb") as f:
        f.write(b"PAR1\x00\x00")
    rep = c.recover()
    assert rep.staging_deleted == [staged.load_id] and rep.rolled_forward == []
    assert not store.fs.exists(staged.staging)
    assert published(store) == before
    assert store.committed_offsets() == {("t", 0): 5}
    # the range is loaded again by the next load, under the same sequence number
    staged2, man2 = stage_load(store, {("t", 0): (5, 9)})
    assert staged2.seq == staged.seq
    c.commit(man2)
    assert store.committed_offsets() == {("t", 0): 9}


def test_full_disk_at_the_commit_point_keeps_the_previous_state(tmp_path, monkeypatch):
    store = OffsetStore(str(tmp_path))
    c = Committer(store)
    c.commit(stage_load(store, {("t", 0): (0, 5)})[1])
    before = published(store)
    _, man = stage_load(store, {("t", 0): (5, 9)})
    real_create = store.fs.create

    def create(path, data, overwrite=False):
        if "/manifests/" in path.replace(os.sep, "/"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_create(path, data, overwrite)

    monkeypatch.setattr(store.fs, "create", create)
    with pytest.raises(OSError, match="No space left"):
        c.commit(man)
    monkeypatch.undo()
    assert store.committed_offsets() == {("t", 0): 5}
    assert published(store) == before
    Committer(store).recover()  # the next run discards the uncommitted staging
    staged, man2 = stage_load(store, {("t", 0): (5, 9)})
    c.commit(man2)
    assert store.committed_offsets() == {("t", 0): 9}


def test_crash_between_manifest_and_renames_rolls_forward(tmp_path):
    store = OffsetStore(str(tmp_path))
    c = Committer(store)
    staged, man = stage_load(store, {("t", 0): (0, 10), ("t", 1): (0, 10)})
    # the commit point happened, then the process died after moving only the first file
    store.fs.create(store.manifest_path(man.seq), man.to_json())
    first = man.files[0]
    store.fs.rename(store.path(first.staging), store.path(first.path))
    assert published(store) == [first.path]
    rep = Committer(store).recover()
    assert rep.rolled_forward == [man.seq] and rep.files_moved == len(man.files) - 1
    assert published(store) == sorted(f.path for f in man.files)
    assert not store.fs.exists(staged.staging)
    # idempotent: nothing left to do
    assert str(c.recover()) == "nothing to recover"


def test_crash_inside_a_rename_leaves_both_names(tmp_path):
    store = OffsetStore(str(tmp_path))
    staged, man = stage_load(store, {("t", 0): (0, 4)}, files_per_tp=1)
    store.fs.create(store.manifest_path(man.seq), man.to_json())
    f = man.files[0]
    # link done, unlink not: the file exists under both names
    os.makedirs(os.path.dirname(store.path(f.path)), exist_ok=True)
    os.link(store.path(f.staging), store.path(f.path))
    Committer(store).recover()
    assert published(store) == [f.path]
    assert not store.fs.exists(staged.staging)


def test_manifest_without_its_files(tmp_path):
    store = OffsetStore(str(tmp_path))
    c = Committer(store)
    c.commit(stage_load(store, {("t", 0): (0, 5)})[1])
    good = published(store)
    # a manifest whose staged data storage lost (or that a broken writer put before its files)
    staged, man = stage_load(store, {("t", 0): (5, 9)})
    store.fs.delete(staged.staging, recursive=True)
    # the commit step itself refuses to put such a manifest
    with pytest.raises(CommittedDataMissing, match="staged file"):
        c.commit(man)
    assert store.committed_offsets() == {("t", 0): 5}
    # if one exists anyway, recovery refuses to load on top of it ...
    store.fs.create(store.manifest_path(man.seq), man.to_json())
    with pytest.raises(CommittedDataMissing, match="--repair"):
        c.recover()
    assert published(store) == good
    # ... and --repair withdraws it, so the range is loaded again from the log
    withdrawn = c.rollback_latest()
    assert withdrawn.seq == man.seq
    assert store.committed_offsets() == {("t", 0): 5}
    assert store.fs.list(store.path("_logsource/withdrawn"))
    c.recover()
    staged2, man2 = stage_load(store, {("t", 0): (5, 9)})
    c.commit(man2)
    assert store.committed_offsets() == {("t", 0): 9}


def test_torn_manifest_put_is_ignored(tmp_path):
    store = OffsetStore(str(tmp_path))
    c = Committer(store)
    staged, man = stage_load(store, {("t", 0): (0, 3)})
    # the put-if-absent died before its link: only the hidden temporary file exists
    store.fs.mkdirs(store.manifest_dir)
    with open(os.path.join(store.manifest_dir, ".00000000000000000001.json.abc.tmp"), "wb") as fh:
        fh.write(man.to_json()[:20])
    assert store.latest() is None
    rep = c.recover()
    assert rep.temp_deleted == 1 and rep.staging_deleted == [staged.load_id]
    assert store.fs.list(store.manifest_dir) == []


def test_second_writer_gets_commit_conflict(tmp_path):
    store = OffsetStore(str(tmp_path))
    c = Committer(store)
    staged_a, man_a = stage_load(store, {("t", 0): (0, 5)})
    staged_b, man_b = stage_load(store, {("t", 0): (0, 5)})
    assert staged_a.seq == staged_b.seq
    c.commit(man_a)
    with pytest.raises(CommitConflict):
        c.commit(man_b)
    assert store.committed_offsets() == {("t", 0): 5}
    assert len(store.manifest_seqs()) == 1
