"""The commit protocol of an exactly-once load.

One load, start to end::

    recover()            roll forward the moves of a committed manifest whose staging dir remains,
                         delete every other staging dir and temporary manifest (leftovers of dead loads)
    begin()              pick seq = last + 1 and a staging dir _staging/<seq>-<uuid>
    ... the job writes data under the staging dir and audits it ...
    commit(manifest)     check every named file is staged, put-if-absent the manifest (THE commit
                         point: data and offsets become committed together), then publish
    publish(manifest)    rename each staged file to its published path (idempotent), delete staging

Crash analysis (single writer per output directory):

- before the manifest put: nothing visible changed; the staging dir is deleted by the next recover().
- during the put: put-if-absent is atomic (temp file + link), so the manifest is either whole or absent.
- after the put, during publish: the load is committed; readers of the published tree may see part of
  it until the next recover() (or ``--status``/``--verify``) finishes the renames. Renames never
  overwrite, and a file present at its published path counts as moved, so roll-forward is idempotent.
- a committed manifest whose files are nowhere (storage lost them): recover() raises
  CommittedDataMissing and refuses to load on top; rollback_latest() (``--repair``) withdraws that
  manifest and its published files so that the range is loaded again from the log.
"""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from dataclasses import dataclass, field

from ..errors import CommitConflict, CommittedDataMissing
from .store import META_DIR, STAGING_DIR, Manifest, OffsetStore

PAUSE_ENV = "LOGSOURCE_ETL_PAUSE_AT"
PAUSE_SECONDS_ENV = "LOGSOURCE_ETL_PAUSE_SECONDS"
PAUSED_MARKER = "LOGSOURCE_ETL_PAUSED_AT"
_STAGING_NAME = re.compile(r"^(\d{20})-([0-9a-f]+)$")


def pause_point(name: str) -> None:
    """Test hook: sleep here if LOGSOURCE_ETL_PAUSE_AT names this point (so a kill -9 lands here)."""
    points = os.environ.get(PAUSE_ENV, "")
    if name in {p.strip() for p in points.split(",") if p.strip()}:
        print(f"{PAUSED_MARKER} {name}", file=sys.stderr, flush=True)
        time.sleep(float(os.environ.get(PAUSE_SECONDS_ENV, "60")))


@dataclass
class StagedLoad:
    """A load in progress: its sequence number, id and staging directory."""

    seq: int
    load_id: str
    staging_rel: str
    staging: str


@dataclass
class RecoveryReport:
    """What recover() did."""

    rolled_forward: list[int] = field(default_factory=list)
    files_moved: int = 0
    staging_deleted: list[str] = field(default_factory=list)
    temp_deleted: int = 0

    def __str__(self) -> str:
        parts = []
        if self.rolled_forward:
            parts.append(f"rolled forward load(s) {self.rolled_forward} ({self.files_moved} file(s) published)")
        if self.staging_deleted:
            parts.append(f"deleted {len(self.staging_deleted)} uncommitted staging dir(s)")
        if self.temp_deleted:
            parts.append(f"deleted {self.temp_deleted} temporary manifest file(s)")
        return "; ".join(parts) or "nothing to recover"


class Committer:
    """Runs the commit protocol on an OffsetStore."""

    def __init__(self, store: OffsetStore) -> None:
        self.store = store
        self.fs = store.fs

    def recover(self) -> RecoveryReport:
        """Finish committed loads and remove leftovers of dead ones; run before every load."""
        rep = RecoveryReport()
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
        # A put-if-absent that died before its link leaves a hidden temp file: never a manifest.
        for st in self.fs.list(self.store.manifest_dir):
            if st.name.startswith(".") and st.name.endswith(".tmp"):
                self.fs.delete(st.path)
                rep.temp_deleted += 1
        latest = self.store.latest()
        if latest is not None:
            self._check_published(latest)
        return rep

    def _check_published(self, man: Manifest) -> None:
        missing = [f.path for f in man.files if not self.fs.exists(self.store.path(f.path))]
        if missing:
            raise CommittedDataMissing(
                f"load {man.seq} is committed but {len(missing)} of its files are missing "
                f"(first: {missing[0]}); run with --repair to withdraw it and load the range again"
            )

    def begin(self) -> StagedLoad:
        """Start a load: next sequence number and a fresh staging directory name."""
        seqs = self.store.manifest_seqs()
        seq = (seqs[-1] if seqs else 0) + 1
        load_id = f"{seq:020d}-{uuid.uuid4().hex[:16]}"
        rel = f"{STAGING_DIR}/{load_id}"
        return StagedLoad(seq, load_id, rel, self.store.path(rel))

    def commit(self, manifest: Manifest) -> None:
        """Commit a staged load atomically, then publish its files."""
        staging = self.store.path(f"{STAGING_DIR}/{manifest.load_id}")
        staged = {st.path for st in self.fs.walk_files(staging)}
        missing = [f.staging for f in manifest.files if self.store.path(f.staging) not in staged]
        if missing:
            raise CommittedDataMissing(f"refusing to commit load {manifest.seq}: staged file(s) missing: {missing[:3]}")
        pause_point("commit")
        try:
            self.fs.create(self.store.manifest_path(manifest.seq), manifest.to_json(), overwrite=False)
        except FileExistsError:
            raise CommitConflict(
                f"manifest {manifest.seq} already exists in {self.store.root}: another load committed first "
                "(one writer per output directory)"
            ) from None
        pause_point("publish")
        self.publish(manifest)

    def publish(self, manifest: Manifest) -> int:
        """Move a committed load's files to their published paths; idempotent. Returns files moved."""
        moved = 0
        for f in manifest.files:
            final, staged = self.store.path(f.path), self.store.path(f.staging)
            if self.fs.exists(final):
                # moved already (a crash between link and unlink can leave both names)
                self.fs.delete(staged)
                continue
            if not self.fs.exists(staged):
                raise CommittedDataMissing(
                    f"load {manifest.seq} is committed but {f.path} is in neither the published tree "
                    "nor staging; run with --repair to withdraw it and load the range again"
                )
            self.fs.rename(staged, final)
            moved += 1
            if moved == 1:
                pause_point("publish_mid")
        self.fs.delete(self.store.path(f"{STAGING_DIR}/{manifest.load_id}"), recursive=True)
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
        self.fs.delete(self.store.path(f"{STAGING_DIR}/{man.load_id}"), recursive=True)
        dst = self.store.path(f"{META_DIR}/withdrawn/{man.seq:020d}-{uuid.uuid4().hex[:8]}.json")
        self.fs.rename(self.store.manifest_path(man.seq), dst)
        return man
