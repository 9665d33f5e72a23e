"""The offset store that lives inside the output directory, and its manifests.

Layout of an output directory ``OUT``::

    OUT/_logsource/manifests/00000000000000000007.json   one per committed load (the commit point)
    OUT/_staging/<seq>-<uuid>/...                         a load's data before its commit
    OUT/topic=clicks/.../clicks+0+100+199.parquet         published data (what readers see)

Names starting with ``_`` or ``.`` are skipped by Spark's and pyarrow's
dataset readers, so ``spark.read.parquet(OUT)`` sees only published files.

A manifest names the load's files (staging and published path, rows, the
offset range of every topic-partition in the file), the load's [from, to)
range and row count per topic-partition, and the cumulative end offset of
every topic-partition after the load. The newest manifest is therefore the
single source of truth for where the next load starts; older manifests stay
as the audit trail of which file holds which offsets.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import CorruptRecord
from ..topics import TopicPartition
from .filesystem import FileSystem, get_filesystem

MANIFEST_VERSION = 1
META_DIR = "_logsource"
MANIFEST_DIR = META_DIR + "/manifests"
STAGING_DIR = "_staging"
#: prefix of a direct-mode load's directory: OUT/load=<seq>-<id>/ (a Hive-style partition column)
LOAD_DIR_PREFIX = "load="
TORN_DIR = META_DIR + "/torn"
_MANIFEST_NAME = re.compile(r"^(\d{20})\.json$")


@dataclass(frozen=True)
class LoadRange:
    """The offsets [start, end) of one topic-partition that a load wrote, and the rows it wrote."""

    topic: str
    partition: int
    start: int
    end: int
    count: int

    @property
    def delta(self) -> int:
        """Offsets covered: end - start."""
        return self.end - self.start


@dataclass(frozen=True)
class FileRange:
    """The rows of one topic-partition inside one data file."""

    topic: str
    partition: int
    first: int
    last: int
    count: int


@dataclass(frozen=True)
class CommittedFile:
    """One data file of a load: where it was staged, where it is published, what it holds."""

    staging: str
    path: str
    rows: int
    ranges: tuple[FileRange, ...] = ()


@dataclass
class Manifest:
    """The commit record of one load."""

    seq: int
    load_id: str
    format: str
    offsets: dict[str, dict[str, int]]
    ranges: list[LoadRange]
    files: list[CommittedFile]
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    version: int = MANIFEST_VERSION
    #: "rename": staged under _staging/ and published by rename after the commit;
    #: "direct": written in place under load=<load_id>/, the manifest is the only commit step
    mode: str = "rename"

    def end_offsets(self) -> dict[TopicPartition, int]:
        """Cumulative end offset per (topic, partition) after this load."""
        return {(t, int(p)): int(o) for t, parts in self.offsets.items() for p, o in parts.items()}

    def to_json(self) -> bytes:
        """Serialise (stable key order, one file per load)."""
        d = asdict(self)
        return json.dumps(d, sort_keys=True, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str = "") -> Manifest:
        """Parse a manifest; CorruptRecord if it is not a complete manifest."""
        try:
            d = json.loads(data)
            if not isinstance(d, dict):
                raise ValueError("not a JSON object")
            if d.get("version") != MANIFEST_VERSION:
                raise ValueError(f"unsupported manifest version {d.get('version')!r}")
            files = [
                CommittedFile(
                    f["staging"], f["path"], int(f["rows"]), tuple(FileRange(**r) for r in f["ranges"])
                )
                for f in d["files"]
            ]
            return cls(
                seq=int(d["seq"]),
                load_id=str(d["load_id"]),
                format=str(d["format"]),
                offsets={t: {str(p): int(o) for p, o in ps.items()} for t, ps in d["offsets"].items()},
                ranges=[LoadRange(**r) for r in d["ranges"]],
                files=files,
                created_ms=int(d["created_ms"]),
                version=int(d["version"]),
                mode=str(d.get("mode", "rename")),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptRecord(f"manifest {where or '?'} is not a valid manifest: {e}") from e


def offsets_dict(end: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{(topic, p): o} -> {"topic": {"p": o}} (the JSON shape of Spark's startingOffsets)."""
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(end.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


class OffsetStore:
    """Reads and writes the manifests of one output directory."""

    def __init__(self, output: str, fs: FileSystem | None = None) -> None:
        self.root = output.rstrip("/")
        self.fs = fs or get_filesystem(output)

    # -- paths ---------------------------------------------------------------------------------
    def path(self, rel: str) -> str:
        """Absolute path (in the store's namespace) of a path relative to the output root."""
        return self.fs.join(self.root, rel)

    @property
    def manifest_dir(self) -> str:
        """Where manifests live."""
        return self.path(MANIFEST_DIR)

    @property
    def staging_root(self) -> str:
        """Where loads stage their data."""
        return self.path(STAGING_DIR)

    def manifest_path(self, seq: int) -> str:
        """The path of manifest number seq."""
        return self.fs.join(self.manifest_dir, f"{seq:020d}.json")

    # -- reading -------------------------------------------------------------------------------
    def manifest_seqs(self) -> list[int]:
        """Sequence numbers of committed manifests, ascending (temporary files are ignored)."""
        out = []
        for st in self.fs.list(self.manifest_dir):
            m = _MANIFEST_NAME.match(st.name)
            if m and not st.is_dir:
                out.append(int(m.group(1)))
        return sorted(out)

    def read_manifest(self, seq: int) -> Manifest:
        """Read and parse manifest seq."""
        p = self.manifest_path(seq)
        m = Manifest.from_json(self.fs.read(p), p)
        if m.seq != seq:
            raise CorruptRecord(f"manifest {p} says seq {m.seq}")
        return m

    def manifests(self) -> list[Manifest]:
        """Every committed manifest, oldest first."""
        return [self.read_manifest(s) for s in self.manifest_seqs()]

    def latest(self) -> Manifest | None:
        """The newest committed manifest, or None before the first commit."""
        seqs = self.manifest_seqs()
        return self.read_manifest(seqs[-1]) if seqs else None

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """End offset per (topic, partition) of the newest commit: where the next load starts."""
        m = self.latest()
        return m.end_offsets() if m else {}

    def committed_files(self) -> list[str]:
        """Published paths (relative to the output root) of every committed file."""
        return [f.path for m in self.manifests() for f in m.files]

    def status_rows(self) -> list[dict[str, Any]]:
        """Per topic-partition: committed end offset, rows loaded, loads, last load seq/time."""
        stats: dict[TopicPartition, dict[str, Any]] = {}
        for m in self.manifests():
            for r in m.ranges:
                s = stats.setdefault((r.topic, r.partition), {"rows": 0, "loads": 0, "first": r.start})
                s["rows"] += r.count
                s["loads"] += 1 if r.count else 0
                s["last_seq"] = m.seq
                s["last_ms"] = m.created_ms
        out = []
        latest = self.latest()
        for (t, p), end in sorted((latest.end_offsets() if latest else {}).items()):
            s = stats.get((t, p), {"rows": 0, "loads": 0, "first": end})
            out.append(
                {
                    "topic": t,
                    "partition": p,
                    "from": s["first"],
                    "committed": end,
                    "rows": s["rows"],
                    "loads": s["loads"],
                    "last_seq": s.get("last_seq", -1),
                    "last_commit": time.strftime(
                        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(s.get("last_ms", 0) / 1000)
                    )
                    if "last_ms" in s
                    else "-",
                }
            )
        return out


def open_store(output: str, spark: Any = None) -> OffsetStore:
    """The offset store of an output directory (local path, or any URI through Spark's Hadoop)."""
    return OffsetStore(output, get_filesystem(output, spark))


def format_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """A plain-text table for humans."""
    if not rows:
        return "(nothing committed)"
    cols = columns or list(rows[0].keys())
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines.append("  ".join("-" * widths[c] for c in cols))
    for r in rows:
        lines.append(
            "  ".join(
                str(r.get(c, "")).rjust(widths[c])
                if isinstance(r.get(c), int)
                else str(r.get(c, "")).ljust(widths[c])
                for c in cols
            )
        )
    return "\n".join(lines)
