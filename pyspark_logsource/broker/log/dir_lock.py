"""An exclusive lock on a data directory, held for the life of the process that owns it.

As Kafka's ``LogManager.lockLogDirs``: ``flock(LOCK_EX | LOCK_NB)`` on ``<dir>/.lock`` through a file
descriptor kept open until :meth:`DirLock.release`. The kernel drops the lock when the descriptor is
closed or its process dies (``kill -9`` included), so a restart never needs a manual step. ``flock``
locks belong to the open file, not to the process: a second broker inside the same process (an
:class:`~pyspark_logsource.broker.embedded.EmbeddedBroker`, a test) is refused like another process.
The holder's pid is written into the file, only to name it in the refusal.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from ...errors import DirectoryInUse, StorageError

LOCK_FILE = ".lock"


class DirLock:
    """An exclusive ``flock`` on ``<directory>/.lock``; :meth:`acquire` takes it, :meth:`release` drops it."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, directory: str | Path, owner: str = "broker", kind: str = "log dir") -> DirLock:
        """Lock ``directory`` (created if missing); DirectoryInUse if another holder has it. ``owner`` and
        ``kind`` name the holder and the directory in that error's message."""
        d = Path(directory)
        path = d / LOCK_FILE
        try:
            d.mkdir(parents=True, exist_ok=True)
            # os.open's descriptors are not inherited by child processes (PEP 446): a spawned
            # child can never keep the lock alive after this process died
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StorageError(f"cannot open lock file {path}: {e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read_pid(fd)
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):  # somebody holds it
                by = f"pid {holder}, " if holder else ""
                raise DirectoryInUse(
                    f"{kind} {d} is in use by another {owner} ({by}{path} is locked)"
                ) from None
            raise StorageError(f"cannot lock {path}: {e}") from e
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid is informative only; the lock is what counts
        return cls(d, fd)

    @property
    def held(self) -> bool:
        """True until :meth:`release`."""
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock (closing the descriptor drops it); idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> DirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"DirLock({str(self.directory)!r}, {'held' if self.held else 'released'})"


def lock_dirs(
    directories: Iterable[str | Path], owner: str = "broker", kind: str = "log dir"
) -> list[DirLock]:
    """Lock every directory, or none: on a refusal the locks already taken are released."""
    locks: list[DirLock] = []
    seen: set[Path] = set()
    try:
        for d in directories:
            key = Path(d).resolve()
            if key not in seen:  # one directory named twice is one directory, not a second holder
                seen.add(key)
                locks.append(DirLock.acquire(d, owner, kind))
    except BaseException:
        release_all(locks)
        raise
    return locks


def release_all(locks: Iterable[DirLock]) -> None:
    """Release each lock."""
    for lk in locks:
        lk.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
