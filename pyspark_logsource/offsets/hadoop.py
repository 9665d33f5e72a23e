"""The offset store's FileSystem on Hadoop's ``org.apache.hadoop.fs.FileSystem``, through Spark's JVM.

Every scheme the user's Spark can write (``hdfs://``, ``s3a://``, ``abfs://``,
``gs://``, ``viewfs://``, ``file://``) is served with the cluster's own Hadoop
configuration and credentials (``spark._jsc.hadoopConfiguration()``), the same
ones Spark's writers use. What the commit protocol relies on, per operation:

- ``create(path, data, overwrite=False)``: ``FileSystem.create(path, false)``, put-if-absent.
  Atomic against a second creator on HDFS (the NameNode checks under its lock), on S3A with
  conditional PUT (Hadoop >= 3.4.2) and on GCS; a check-then-create on Hadoop's local FS, which is
  enough with one writer per output. On HDFS and the local FS the bytes are streamed, so a
  writer killed inside ``create`` can leave a torn file; on object stores the object appears
  whole at ``close()`` or not at all. The commit protocol treats a torn newest manifest as
  never committed (its writer died before ``create`` returned).
- ``rename(src, dst)``: atomic and never overwriting on HDFS (``rename`` returns false when dst
  exists); on object stores it is a copy of every byte then a delete, not atomic
  (:attr:`atomic_rename` is False, and the protocol then never renames data).
- ``list``/``walk_files`` (``listStatus``/``listFiles``), ``delete``, ``exists``, ``mkdirs``: plain.
"""

from __future__ import annotations

import sys
from typing import Any

from ..errors import ConfigError
from .filesystem import FileStatus, FileSystem, to_local_path, uri_scheme

#: schemes whose rename is an atomic metadata operation (object stores copy; ABFS only with a
#: hierarchical namespace, so it is not listed: ``--commit-mode rename`` opts in)
ATOMIC_RENAME_SCHEMES = frozenset({"hdfs", "viewfs", "webhdfs", "swebhdfs", "file"})


def _java_class(e: BaseException) -> str:
    je = getattr(e, "java_exception", None)
    if je is None:
        return ""
    try:
        name = str(je.getClass().getName())
        if name.endswith("RemoteException"):  # HDFS wraps the NameNode's exception
            name = str(je.getClassName())
        return name
    except Exception:  # pragma: no cover - a broken gateway
        return ""


def _active_spark() -> Any:
    if "pyspark.sql" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


class HadoopFileSystem(FileSystem):
    """Hadoop's FileSystem for one URI's scheme and authority, reached through a SparkSession's JVM."""

    def __init__(self, uri: str, spark: Any = None) -> None:
        spark = spark or _active_spark()
        if spark is None:
            raise ConfigError(
                f"{uri!r} is served by Hadoop's FileSystem through Spark's JVM, and no SparkSession is running"
            )
        from py4j.protocol import Py4JJavaError

        self._err = Py4JJavaError
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()
        self.scheme = uri_scheme(uri)
        try:
            self._fs = self._path(uri).getFileSystem(self._conf)
        except Py4JJavaError as e:
            raise ConfigError(f"Spark's Hadoop has no filesystem for {uri!r}: {e.java_exception}") from None
        self.atomic_rename = self.scheme in ATOMIC_RENAME_SCHEMES

    def _path(self, p: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(p)

    def _call(self, fn: Any, path: str, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._err as e:
            name = _java_class(e)
            if name.endswith(("FileAlreadyExistsException", "AlreadyBeingCreatedException")):
                raise FileExistsError(17, "file exists", path) from None
            if name.endswith("FileNotFoundException"):
                raise FileNotFoundError(2, "no such file", path) from None
            raise OSError(f"{name or 'Hadoop error'} on {path}: {e.java_exception}") from None

    def local_path(self, path: str) -> str | None:
        return to_local_path(path) if self.scheme == "file" else None

    def create(self, path: str, data: bytes, overwrite: bool = False) -> None:
        out = self._call(self._fs.create, path, self._path(path), bool(overwrite))
        try:
            out.write(bytearray(data))
            out.hsync()  # durable before the caller counts it as committed (flush where not Syncable)
        finally:
            out.close()

    def read(self, path: str) -> bytes:
        stream = self._call(self._fs.open, path, self._path(path))
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def list(self, path: str) -> list[FileStatus]:
        try:
            statuses = self._call(self._fs.listStatus, path, self._path(path))
        except FileNotFoundError:
            return []
        out = []
        for st in statuses:
            name = str(st.getPath().getName())
            is_dir = bool(st.isDirectory())
            out.append(FileStatus(self.join(path, name), name, is_dir, 0 if is_dir else int(st.getLen())))
        out.sort(key=lambda s: s.name)
        return out

    def walk_files(self, path: str) -> list[FileStatus]:
        """All files under path in one recursive listing (one LIST per page on object stores)."""
        if not self.exists(path):
            return []
        root = str(self._fs.makeQualified(self._path(path)).toString()).rstrip("/")
        it = self._call(self._fs.listFiles, path, self._path(path), True)
        out = []
        while it.hasNext():
            st = it.next()
            q = str(st.getPath().toString())
            rel = q[len(root) + 1 :] if q.startswith(root + "/") else str(st.getPath().getName())
            out.append(FileStatus(self.join(path, rel), rel.rsplit("/", 1)[-1], False, int(st.getLen())))
        out.sort(key=lambda s: s.path)
        return out

    def rename(self, src: str, dst: str) -> None:
        s, d = self._path(src), self._path(dst)
        if not self._call(self._fs.exists, src, s):
            raise FileNotFoundError(2, "no such file", src)
        # Hadoop renames a directory *into* an existing one and the local FS overwrites a file,
        # so refuse an existing dst first (HDFS's rename also returns false for it, atomically)
        if self._call(self._fs.exists, dst, d):
            raise FileExistsError(17, "file exists", dst)
        self._call(self._fs.mkdirs, dst, d.getParent())
        if not self._call(self._fs.rename, src, s, d):
            if self._fs.exists(d):
                raise FileExistsError(17, "file exists", dst)
            raise OSError(f"Hadoop rename {src} -> {dst} failed")

    def delete(self, path: str, recursive: bool = False) -> bool:
        try:
            return bool(self._call(self._fs.delete, path, self._path(path), bool(recursive)))
        except FileNotFoundError:
            return False

    def exists(self, path: str) -> bool:
        return bool(self._call(self._fs.exists, path, self._path(path)))

    def mkdirs(self, path: str) -> None:
        self._call(self._fs.mkdirs, path, self._path(path))

    def size(self, path: str) -> int:
        """Length of a file in bytes."""
        return int(self._call(self._fs.getFileStatus, path, self._path(path)).getLen())
