"""Where consumer positions live: with the output (the exactly-once pattern).

``OffsetStore`` reads the manifests of an output directory, ``Committer`` runs
the commit protocol (stage, put the manifest, publish, roll forward), and
``FileSystem`` is the small Hadoop-style interface both are written against.
"""

from __future__ import annotations

from .commit import MODES, Committer, RecoveryReport, StagedLoad, committed_paths, resolve_mode
from .filesystem import (
    FileStatus,
    FileSystem,
    LocalFileSystem,
    get_filesystem,
    register_filesystem,
    uri_scheme,
)
from .store import (
    CommittedFile,
    FileRange,
    LoadRange,
    Manifest,
    OffsetStore,
    format_table,
    offsets_dict,
    open_store,
)

__all__ = [
    "MODES",
    "committed_paths",
    "resolve_mode",
    "uri_scheme",
    "CommittedFile",
    "Committer",
    "FileRange",
    "FileStatus",
    "FileSystem",
    "LoadRange",
    "LocalFileSystem",
    "Manifest",
    "OffsetStore",
    "RecoveryReport",
    "StagedLoad",
    "format_table",
    "get_filesystem",
    "offsets_dict",
    "open_store",
    "register_filesystem",
]
