"""Kafka's checkpoint file format, shared by the leader-epoch and high-watermark checkpoints.

A checkpoint is a small text file, replaced atomically (write ``.tmp``,
fsync, rename, fsync the directory)::

    0            version
    2            number of entries
    <entry>      one line each, fields separated by one space
    <entry>

Kafka writes ``leader-epoch-checkpoint`` (entries ``epoch start_offset``) in
each partition directory and ``replication-offset-checkpoint`` (entries
``topic partition offset``) in each log dir, in this format.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import StorageError

CHECKPOINT_VERSION = 0


class CorruptCheckpoint(StorageError):
    """A checkpoint file is malformed (bad version, count or entry); its owner rebuilds what it held."""


def write_checkpoint(path: Path, entries: list[tuple[object, ...]]) -> None:
    """Replace ``path`` by a checkpoint holding ``entries``, durably."""
    body = f"{CHECKPOINT_VERSION}\n{len(entries)}\n" + "".join(" ".join(map(str, e)) + "\n" for e in entries)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise StorageError(f"cannot write checkpoint {path}: {e}") from e


def read_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """The entries of the checkpoint at ``path`` (each ``fields`` strings); None if there is no file.

    Raises CorruptCheckpoint if the file is malformed.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise CorruptCheckpoint(f"cannot read checkpoint {path}: {e}") from e
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CorruptCheckpoint(f"checkpoint {path}: unknown version line {lines[0] if lines else ''!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CorruptCheckpoint(f"checkpoint {path}: bad entry count {lines[1]!r}") from None
    entries = [line.split(" ") for line in lines[2:]]
    if count != len(entries) or any(len(e) != fields for e in entries):
        raise CorruptCheckpoint(
            f"checkpoint {path}: expected {count} entries of {fields} fields, "
            f"found {[len(e) for e in entries]}"
        )
    return entries
