"""The offset store on Hadoop's FileSystem through Spark's JVM (file:// URIs), and its commit protocol."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.copy_rename_fs import CopyRenameFileSystem

from pyspark_logsource.errors import ConfigError, CorruptRecord
from pyspark_logsource.offsets import (
    CommittedFile,
    Committer,
    FileRange,
    LoadRange,
    Manifest,
    OffsetStore,
    get_filesystem,
    offsets_dict,
)
from pyspark_logsource.offsets.hadoop import HadoopFileSystem

pytestmark = pytest.mark.spark


def uri(p: Path) -> str:
    return "file://" + str(p)


def test_schemes_go_through_hadoop(spark, tmp_path):
    fs = get_filesystem(uri(tmp_path), spark)
    assert isinstance(fs, HadoopFileSystem) and fs.atomic_rename
    assert fs.local_path(uri(tmp_path / "x")) == str(tmp_path / "x")
    with pytest.raises(ConfigError, match="no filesystem"):
        get_filesystem("nosuchscheme://host/path", spark)


def test_create_read_list_rename_delete(spark, tmp_path):
    fs = get_filesystem(uri(tmp_path), spark)
    p = uri(tmp_path / "a" / "x.json")
    fs.create(p, b"one")
    with pytest.raises(FileExistsError):
        fs.create(p, b"two")  # create(path, overwrite=false): put-if-absent
    assert fs.read(p) == b"one" and fs.size(p) == 3
    fs.create(p, b"three", overwrite=True)
    assert fs.read(p) == b"three"
    with pytest.raises(FileNotFoundError):
        fs.read(uri(tmp_path / "missing"))
    assert [s.name for s in fs.list(uri(tmp_path / "a"))] == ["x.json"]  # Hadoop's .crc files are hidden
    assert fs.list(uri(tmp_path / "nothing")) == []
    # rename never overwrites (Hadoop's local FS would), files and directories
    q = uri(tmp_path / "b" / "y.json")
    fs.create(q, b"B")
    with pytest.raises(FileExistsError):
        fs.rename(p, q)
    assert fs.read(q) == b"B"
    fs.rename(p, uri(tmp_path / "c" / "z.json"))
    assert not fs.exists(p) and fs.read(uri(tmp_path / "c" / "z.json")) == b"three"
    with pytest.raises(FileExistsError):
        fs.rename(uri(tmp_path / "b"), uri(tmp_path / "c"))
    with pytest.raises(FileNotFoundError):
        fs.rename(p, uri(tmp_path / "d"))
    walked = fs.walk_files(uri(tmp_path))
    assert [s.path for s in walked] == [uri(tmp_path / "b" / "y.json"), uri(tmp_path / "c" / "z.json")]
    assert fs.delete(uri(tmp_path / "b"), recursive=True) and not fs.delete(uri(tmp_path / "b"))


def _stage(store: OffsetStore, c: Committer, n: int = 2):
    staged = c.begin()
    files = []
    for i in range(n):
        rel = f"{staged.staging_rel}/part-{i}.parquet"
        store.fs.create(store.path(rel), b"x" * (100 + i))
        final = rel if staged.mode == "direct" else f"t+0+{i * 10}+{i * 10 + 9}.parquet"
        files.append(CommittedFile(rel, final, 10, (FileRange("t", 0, i * 10, i * 10 + 9, 10),)))
    man = Manifest(
        staged.seq,
        staged.load_id,
        "parquet",
        offsets_dict({("t", 0): n * 10}),
        [LoadRange("t", 0, 0, n * 10, n * 10)],
        files,
        mode=staged.mode,
    )
    return staged, man


def test_torn_newest_manifest_is_withdrawn(spark, tmp_path):
    store = OffsetStore(uri(tmp_path), get_filesystem(uri(tmp_path), spark))
    c = Committer(store)
    staged, man = _stage(store, c)
    # the writer died inside create(): Hadoop's local FS and HDFS stream, so half a manifest is left
    store.fs.create(store.manifest_path(man.seq), man.to_json()[:40])
    rep = c.recover()
    assert rep.torn == [1] and store.manifest_seqs() == [] and not store.fs.exists(staged.staging)
    assert store.fs.list(store.path("_logsource/torn"))
    # a torn manifest whose load has no data directory is not a crash of its writer: a human looks
    store.fs.create(store.manifest_path(1), b"{")
    with pytest.raises(CorruptRecord):
        c.recover()


def test_copy_rename_store_roll_forward_of_a_short_copy(spark, tmp_path):
    fs = CopyRenameFileSystem(uri(tmp_path), spark)
    store = OffsetStore(uri(tmp_path), fs)
    c = Committer(store, "rename")
    staged, man = _stage(store, c)
    store.fs.create(store.manifest_path(man.seq), man.to_json())
    # killed in the middle of copying the first file: a short file under the published name
    first = man.files[0]
    fs.create(store.path(first.path), b"x" * 7)
    rep = c.recover()
    assert rep.rolled_forward == [1]
    assert fs.size(store.path(first.path)) == 100 and fs.size(store.path(man.files[1].path)) == 101
    assert not fs.exists(staged.staging) and fs.copies == 2


def test_direct_mode_on_a_copy_store_never_renames(spark, tmp_path):
    fs = CopyRenameFileSystem(uri(tmp_path), spark)
    store = OffsetStore(uri(tmp_path), fs)
    c = Committer(store)  # auto: the store's rename is not atomic
    assert c.mode == "direct"
    staged, man = _stage(store, c)
    c.commit(man)
    assert fs.copies == 0 and store.committed_offsets() == {("t", 0): 20}
    assert os.path.isdir(tmp_path / f"load={staged.load_id}")
    # a dead load's directory is deleted by the next recover(); the committed one stays
    dead, _ = _stage(store, c)
    rep = c.recover()
    assert rep.staging_deleted == [f"load={dead.load_id}"] and fs.exists(staged.staging)
