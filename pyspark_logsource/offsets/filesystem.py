"""A small Hadoop-style filesystem interface for the offset store.

The exactly-once commit protocol needs only what HDFS and object stores offer:
create a new file (optionally put-if-absent), read it, list a directory, rename
without overwriting, delete, test existence. :class:`FileSystem` names these
operations; :class:`LocalFileSystem` implements them for local ``file:`` paths
(and plain paths), with the atomicity the protocol relies on:

- ``create(path, data, overwrite=False)`` is put-if-absent: the bytes are
  written to a hidden temporary file, fsynced, then hard-linked to ``path``;
  ``link`` fails if ``path`` exists, so a reader never sees a half-written file
  and two writers never both win.
- ``rename(src, dst)`` never overwrites ``dst`` (HDFS semantics).

Every other store (``hdfs://``, ``s3a://``, ``abfs://``, ``gs://``, ``viewfs://``,
``file://``) is reached through Hadoop's own FileSystem API in the running
SparkSession's JVM (:mod:`.hadoop`), with the cluster's configuration and
credentials: ``get_filesystem`` picks it for any URI with a scheme unless
:func:`register_filesystem` registered another implementation for that scheme.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import urlparse


class FileStatus(NamedTuple):
    """One entry of a directory listing."""

    path: str
    name: str
    is_dir: bool
    size: int


class FileSystem(ABC):
    """The operations a Hadoop-style store offers; paths are strings of that store."""

    #: True when rename is an atomic metadata operation (local disks, HDFS); False when a rename
    #: copies the bytes (object stores). The commit protocol publishes by rename only when True.
    atomic_rename: bool = True

    def local_path(self, path: str) -> str | None:
        """The local path of ``path`` when the store is the local disk (pyarrow can read it), else None."""
        return None

    @abstractmethod
    def create(self, path: str, data: bytes, overwrite: bool = False) -> None:
        """Write a whole new file atomically; raise FileExistsError if it exists and not overwrite."""

    @abstractmethod
    def read(self, path: str) -> bytes:
        """Return the whole content of a file (FileNotFoundError if absent)."""

    @abstractmethod
    def list(self, path: str) -> list[FileStatus]:
        """List a directory (empty list if it does not exist), sorted by name."""

    @abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Move src to dst; raise FileExistsError if dst exists, FileNotFoundError if src is absent."""

    @abstractmethod
    def delete(self, path: str, recursive: bool = False) -> bool:
        """Delete a file or directory; return False if it did not exist."""

    @abstractmethod
    def exists(self, path: str) -> bool:
        """True if the path exists."""

    @abstractmethod
    def mkdirs(self, path: str) -> None:
        """Create a directory and its parents (no error if it exists)."""

    def size(self, path: str) -> int:
        """Length of a file in bytes (FileNotFoundError if absent)."""
        parent, _, name = path.rstrip("/").rpartition("/")
        for st in self.list(parent):
            if st.name == name:
                return st.size
        raise FileNotFoundError(2, "no such file", path)

    def join(self, *parts: str) -> str:
        """Join path components with '/'."""
        out = parts[0].rstrip("/")
        for p in parts[1:]:
            if p:
                out = out + "/" + p.strip("/")
        return out

    def walk_files(self, path: str) -> list[FileStatus]:
        """All files under path, recursively, sorted by path."""
        out: list[FileStatus] = []
        stack = [path]
        while stack:
            for st in self.list(stack.pop()):
                if st.is_dir:
                    stack.append(st.path)
                else:
                    out.append(st)
        out.sort(key=lambda s: s.path)
        return out


def _local_path(path: str) -> str:
    if path.startswith("file:"):
        parsed = urlparse(path)
        return parsed.path
    return path


class LocalFileSystem(FileSystem):
    """The local filesystem; accepts ``file:///abs/path`` and plain paths."""

    def __init__(self, fsync: bool = True) -> None:
        # fsync makes a committed manifest survive a machine crash, not just a process kill.
        self.fsync = fsync

    def local_path(self, path: str) -> str | None:
        return os.path.abspath(_local_path(path))

    def _sync_dir(self, d: str) -> None:
        if not self.fsync:
            return
        try:
            fd = os.open(d, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def create(self, path: str, data: bytes, overwrite: bool = False) -> None:
        p = _local_path(path)
        d = os.path.dirname(p) or "."
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f".{os.path.basename(p)}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                if self.fsync:
                    os.fsync(f.fileno())
            if overwrite:
                os.replace(tmp, p)
            else:
                try:
                    os.link(tmp, p)
                except FileExistsError:
                    raise FileExistsError(errno.EEXIST, "file exists", path) from None
        finally:
            # after link() the temp name is a second name of the file; after a failed write it is
            # all that is left: either way it goes (a failed write must not leave litter behind)
            if os.path.exists(tmp):
                os.unlink(tmp)
        self._sync_dir(d)

    def size(self, path: str) -> int:
        return os.path.getsize(_local_path(path))

    def read(self, path: str) -> bytes:
        with open(_local_path(path), "rb") as f:
            return f.read()

    def list(self, path: str) -> list[FileStatus]:
        p = _local_path(path)
        try:
            entries = list(os.scandir(p))
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for e in entries:
            is_dir = e.is_dir(follow_symlinks=False)
            size = 0 if is_dir else e.stat(follow_symlinks=False).st_size
            out.append(FileStatus(self.join(path, e.name), e.name, is_dir, size))
        out.sort(key=lambda s: s.name)
        return out

    def rename(self, src: str, dst: str) -> None:
        s, t = _local_path(src), _local_path(dst)
        if not os.path.lexists(s):
            raise FileNotFoundError(errno.ENOENT, "no such file", src)
        os.makedirs(os.path.dirname(t) or ".", exist_ok=True)
        if os.path.isdir(s):
            if os.path.lexists(t):
                raise FileExistsError(errno.EEXIST, "file exists", dst)
            os.rename(s, t)
        else:
            # link + unlink is an atomic no-overwrite rename for files; a crash in between leaves
            # both names, which the caller's idempotent roll-forward treats as "already moved".
            try:
                os.link(s, t)
            except FileExistsError:
                raise FileExistsError(errno.EEXIST, "file exists", dst) from None
            os.unlink(s)
        self._sync_dir(os.path.dirname(t) or ".")

    def delete(self, path: str, recursive: bool = False) -> bool:
        p = _local_path(path)
        if not os.path.lexists(p):
            return False
        if os.path.isdir(p) and not os.path.islink(p):
            if recursive:
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.rmdir(p)
        else:
            try:
                os.unlink(p)
            except FileNotFoundError:
                return False
        return True

    def exists(self, path: str) -> bool:
        return os.path.lexists(_local_path(path))

    def mkdirs(self, path: str) -> None:
        os.makedirs(_local_path(path), exist_ok=True)


_REGISTRY: dict[str, Callable[[str], FileSystem]] = {
    "": lambda uri: LocalFileSystem(),
}


def register_filesystem(scheme: str, factory: Callable[[str], FileSystem] | None) -> None:
    """Make get_filesystem return factory(uri) for URIs with this scheme (None: back to Hadoop's)."""
    if factory is None:
        _REGISTRY.pop(scheme.lower(), None)
    else:
        _REGISTRY[scheme.lower()] = factory


def uri_scheme(uri: str) -> str:
    """The lower-case scheme of a URI, '' for a plain path."""
    return urlparse(uri).scheme.lower() if "://" in uri or uri.startswith("file:") else ""


def get_filesystem(uri: str, spark: Any = None) -> FileSystem:
    """The FileSystem for a path or URI: local for plain paths, Hadoop's (through Spark) for a scheme.

    A factory registered for the scheme wins. ConfigError when a scheme needs Hadoop and no
    SparkSession runs, or when the cluster's Hadoop has no filesystem for the scheme.
    """
    scheme = uri_scheme(uri)
    factory = _REGISTRY.get(scheme)
    if factory is not None:
        return factory(uri)
    from .hadoop import HadoopFileSystem

    return HadoopFileSystem(uri, spark)


def to_local_path(uri: str) -> str:
    """The local path of a file: URI or plain path (for Spark/pyarrow readers)."""
    return os.path.abspath(_local_path(uri))
