"""Offset-named snapshot files of one partition directory: ``<20-digit offset><suffix>``.

The producer-state snapshots (``.snapshot``) and the transaction snapshots
(``.txnsnapshot``) are both taken at a log end offset, written atomically, kept
two deep (the newest and one to fall back to), and dropped when the log is
truncated below them. This class owns those files; the stores own the bodies.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

#: The newest snapshot and one to fall back to if the newest is unreadable.
KEEP = 2


class SnapshotFiles:
    """The snapshot files with one suffix in one directory."""

    def __init__(self, directory: Path, suffix: str) -> None:
        self.directory = Path(directory)
        self.suffix = suffix

    def path(self, offset: int) -> Path:
        """Where the snapshot taken at ``offset`` lives."""
        return self.directory / f"{offset:020d}{self.suffix}"

    def offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending."""
        out = []
        for p in self.directory.glob("*" + self.suffix):
            stem = p.name[: -len(self.suffix)]
            if len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def write(self, offset: int, body: bytes) -> None:
        """Save ``body`` as the snapshot at ``offset`` (write, fsync, rename), then prune old ones."""
        path = self.path(offset)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        for old in self.offsets()[:-KEEP]:
            self.path(old).unlink(missing_ok=True)

    def newest_first(self, log_end_offset: int) -> Iterator[tuple[int, Path]]:
        """Candidate snapshots at or below the log end, newest first; those past it are deleted.

        Leftover ``.tmp`` files of an interrupted write are removed first.
        """
        for p in self.directory.glob("*" + self.suffix + ".tmp"):
            p.unlink(missing_ok=True)
        for off in reversed(self.offsets()):
            path = self.path(off)
            if off > log_end_offset:
                path.unlink(missing_ok=True)
                continue
            yield off, path

    def delete_after(self, offset: int) -> None:
        """Remove snapshots taken past ``offset`` (after a truncation)."""
        for off in self.offsets():
            if off > offset:
                self.path(off).unlink(missing_ok=True)
