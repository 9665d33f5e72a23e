"""The commit protocol of an exactly-once load, in two modes chosen by the store.

**rename** (stores whose rename is an atomic metadata operation: local disks, HDFS)::

    recover()            roll forward the renames of a committed manifest whose staging dir remains,
                         delete every other staging dir and temporary manifest (leftovers of dead loads)
    begin()              pick seq = last + 1 and a staging dir _staging/<seq>-<uuid>
    ... the job writes data under the staging dir and audits it ...
    commit(manifest)     check every named file is staged, put-if-absent the manifest (THE commit
                         point: data and offsets become committed together), then publish
    publish(manifest)    rename each staged file to its published path (idempotent), delete staging

**direct** (object stores, where a rename copies every byte): the load writes straight into its
final, load-specific directory ``OUT/load=<seq>-<uuid>/`` and the manifest put is the only commit
step; nothing is ever renamed or copied. recover() deletes the directory of a load that has no
manifest (it can only be newer than the newest manifest, or a loser of a concurrent commit).

Crash analysis (single writer per output directory):

- before the manifest put: nothing committed; rename mode: nothing visible changed and the staging
  dir is deleted by the next recover(); direct mode: a plain directory reader may see the dead
  load's files (Spark committed them) until the next recover() deletes them; readers that follow
  the manifests (``committed_paths``) never do.
- during the put: put-if-absent never overwrites; where the store streams the bytes (HDFS, local
  Hadoop FS) a writer killed inside ``create`` can leave a torn newest manifest: its load never
  committed, so recover() moves it to ``_logsource/torn/`` (in rename mode only while the load's
  staging dir exists, i.e. nothing of it was published; otherwise it raises CorruptRecord).
- after the put, during publish (rename mode): the load is committed; readers of the published tree
  may see part of it until the next recover() (or ``--status``/``--verify``) finishes the renames.
  Renames never overwrite, and a file present at its published path counts as moved once its size
  equals the staged copy's (a copy-based rename killed mid-copy leaves a short file, which is
  copied again), so roll-forward is idempotent.
- a committed manifest whose files are nowhere (storage lost them): recover() raises
  CommittedDataMissing and refuses to load on top; rollback_latest() (``--repair``) withdraws that
  manifest and its published files so that the range is loaded again from the log.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from ..errors import CommitConflict, CommittedDataMissing, ConfigError, CorruptRecord
from ..faults import fault_point
from .store import LOAD_DIR_PREFIX, META_DIR, STAGING_DIR, TORN_DIR, Manifest, OffsetStore

MODES = ("auto", "rename", "direct")

_STAGING_NAME = re.compile(r"^(\d{20})-([0-9a-f]+)$")
_LOAD_DIR_NAME = re.compile(r"^load=((\d{20})-[0-9a-f]+)$")


@dataclass
class StagedLoad:
    """A load in progress: its sequence number, id and staging directory."""

    seq: int
    load_id: str
    staging_rel: str
    staging: str
    mode: str = "rename"


@dataclass
class RecoveryReport:
    """What recover() did."""

    rolled_forward: list[int] = field(default_factory=list)
    files_moved: int = 0
    staging_deleted: list[str] = field(default_factory=list)
    temp_deleted: int = 0
    torn: list[int] = field(default_factory=list)

    @property
    def nothing(self) -> bool:
        """True when recover() found nothing to do."""
        return not (self.rolled_forward or self.staging_deleted or self.temp_deleted or self.torn)

    def __str__(self) -> str:
        parts = []
        if self.rolled_forward:
            parts.append(
                f"rolled forward load(s) {self.rolled_forward} ({self.files_moved} file(s) published)"
            )
        if self.staging_deleted:
            parts.append(f"deleted {len(self.staging_deleted)} uncommitted staging dir(s)")
        if self.temp_deleted:
            parts.append(f"deleted {self.temp_deleted} temporary manifest file(s)")
        if self.torn:
            parts.append(f"withdrew torn manifest(s) {self.torn} (their writer died inside the put)")
        return "; ".join(parts) or "nothing to recover"


def resolve_mode(mode: str, atomic_rename: bool) -> str:
    """auto -> rename where the store renames atomically, direct where a rename is a copy."""
    if mode not in MODES:
        raise ConfigError(f"commit mode must be one of {MODES}, got {mode!r}")
    if mode == "auto":
        return "rename" if atomic_rename else "direct"
    return mode


class Committer:
    """Runs the commit protocol on an OffsetStore."""

    def __init__(self, store: OffsetStore, mode: str = "auto") -> None:
        self.store = store
        self.fs = store.fs
        self.mode = resolve_mode(mode, store.fs.atomic_rename)

    def recover(self) -> RecoveryReport:
        """Finish committed loads and remove leftovers of dead ones; run before every load."""
        rep = RecoveryReport()
        latest = self._latest_or_torn(rep)
        committed = set(self.store.manifest_seqs())
        for st in self.fs.list(self.store.staging_root):
            m = _STAGING_NAME.match(st.name)
            if m and st.is_dir and int(m.group(1)) in committed:
                man = self.store.read_manifest(int(m.group(1)))
                if man.load_id == st.name:
                    rep.files_moved += self.publish(man)
                    rep.rolled_forward.append(man.seq)
                    continue
            self.fs.delete(st.path, recursive=True)
            rep.staging_deleted.append(st.name)
        # direct mode: a load directory without a manifest is newer than the newest manifest (a dead
        # load: recover() runs before every load) or lost a concurrent commit of the same seq
        last_seq = latest.seq if latest else 0
        for st in self.fs.list(self.store.root):
            m = _LOAD_DIR_NAME.match(st.name)
            if not (m and st.is_dir):
                continue
            seq = int(m.group(2))
            if seq > last_seq or (latest is not None and seq == last_seq and m.group(1) != latest.load_id):
                self.fs.delete(st.path, recursive=True)
                rep.staging_deleted.append(st.name)
        # A put-if-absent that died before its link leaves a hidden temp file: never a manifest.
        for st in self.fs.list(self.store.manifest_dir):
            if st.name.startswith(".") and st.name.endswith(".tmp"):
                self.fs.delete(st.path)
                rep.temp_deleted += 1
        if latest is not None:
            self._check_published(latest)
        return rep

    def _latest_or_torn(self, rep: RecoveryReport) -> Manifest | None:
        """The newest manifest; a torn one (its writer died inside create) is withdrawn first."""
        while True:
            seqs = self.store.manifest_seqs()
            if not seqs:
                return None
            try:
                return self.store.read_manifest(seqs[-1])
            except CorruptRecord:
                seq = seqs[-1]
                prefix = f"{seq:020d}-"
                staged = any(st.name.startswith(prefix) for st in self.fs.list(self.store.staging_root))
                direct = any(
                    st.name.startswith(LOAD_DIR_PREFIX + prefix) for st in self.fs.list(self.store.root)
                )
                if not (staged or direct):
                    raise
                dst = self.store.path(f"{TORN_DIR}/{seq:020d}-{uuid.uuid4().hex[:8]}.json")
                self.fs.rename(self.store.manifest_path(seq), dst)
                rep.torn.append(seq)

    def _check_published(self, man: Manifest) -> None:
        missing = [f.path for f in man.files if not self.fs.exists(self.store.path(f.path))]
        if missing:
            raise CommittedDataMissing(
                f"load {man.seq} is committed but {len(missing)} of its files are missing "
                f"(first: {missing[0]}); run with --repair to withdraw it and load the range again"
            )

    def begin(self) -> StagedLoad:
        """Start a load: next sequence number and a fresh data directory (staging or final)."""
        seqs = self.store.manifest_seqs()
        seq = (seqs[-1] if seqs else 0) + 1
        load_id = f"{seq:020d}-{uuid.uuid4().hex[:16]}"
        rel = f"{STAGING_DIR}/{load_id}" if self.mode == "rename" else f"{LOAD_DIR_PREFIX}{load_id}"
        return StagedLoad(seq, load_id, rel, self.store.path(rel), self.mode)

    def data_dir(self, manifest: Manifest) -> str:
        """Where a load's data was written."""
        if manifest.mode == "direct":
            return self.store.path(f"{LOAD_DIR_PREFIX}{manifest.load_id}")
        return self.store.path(f"{STAGING_DIR}/{manifest.load_id}")

    def commit(self, manifest: Manifest) -> None:
        """Commit a written load atomically (the manifest put), then publish its files (rename mode)."""
        staged = {st.path for st in self.fs.walk_files(self.data_dir(manifest))}
        missing = [f.staging for f in manifest.files if self.store.path(f.staging) not in staged]
        if missing:
            raise CommittedDataMissing(
                f"refusing to commit load {manifest.seq}: staged file(s) missing: {missing[:3]}"
            )
        fault_point("commit")
        try:
            self.fs.create(self.store.manifest_path(manifest.seq), manifest.to_json(), overwrite=False)
        except FileExistsError:
            self.fs.delete(self.data_dir(manifest), recursive=True)
            raise CommitConflict(
                f"manifest {manifest.seq} already exists in {self.store.root}: another load committed first "
                "(one writer per output directory); this load's files were deleted, nothing is doubled"
            ) from None
        fault_point("publish")
        self.publish(manifest)

    def publish(self, manifest: Manifest) -> int:
        """Move a committed load's files to their published paths; idempotent. Returns files moved."""
        if manifest.mode == "direct":
            return 0  # written in place: the manifest put was the whole commit
        moved = 0
        for f in manifest.files:
            final, staged = self.store.path(f.path), self.store.path(f.staging)
            if self.fs.exists(final):
                if not self.fs.exists(staged):
                    continue  # moved already
                if self.fs.size(final) == self.fs.size(staged):
                    # moved already: a crash between link/copy and unlink leaves both names
                    self.fs.delete(staged)
                    continue
                # a copy-based rename killed mid-copy left a short file: copy again
                self.fs.delete(final)
            if not self.fs.exists(staged):
                raise CommittedDataMissing(
                    f"load {manifest.seq} is committed but {f.path} is in neither the published tree "
                    "nor staging; run with --repair to withdraw it and load the range again"
                )
            self.fs.rename(staged, final)
            moved += 1
            if moved == 1:
                fault_point("publish_mid")
        self.fs.delete(self.data_dir(manifest), recursive=True)
        return moved

    def rollback_latest(self) -> Manifest | None:
        """Withdraw the newest manifest and its published files (for a load whose data storage lost).

        The manifest is moved to ``_logsource/withdrawn/`` (kept for the audit trail), so the next
        load starts from the previous commit's offsets and loads the range again from the log.
        """
        man = self.store.latest()
        if man is None:
            return None
        for f in man.files:
            self.fs.delete(self.store.path(f.path))
        self.fs.delete(self.data_dir(man), recursive=True)
        dst = self.store.path(f"{META_DIR}/withdrawn/{man.seq:020d}-{uuid.uuid4().hex[:8]}.json")
        self.fs.rename(self.store.manifest_path(man.seq), dst)
        return man


def committed_paths(store: OffsetStore) -> list[str]:
    """Full paths of every committed data file: what a reader that must see exactly the commits reads.

    On stores where a plain directory listing can show files of a dead load (direct mode before
    recovery), ``spark.read.parquet(*committed_paths(store))`` reads exactly the committed loads.
    """
    return [store.path(f.path) for m in store.manifests() for f in m.files]
