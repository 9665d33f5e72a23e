"""Where the broker keeps users' SCRAM credentials, and the one place that reads and changes them.

- Single broker: ``scram-credentials.json`` in the first log directory (written whole to a temporary
  file, fsynced and renamed; re-read when its modification time changes, so ``logsource users set``
  run offline, or next to a running broker, is seen at the next login).
- Cluster mode: ZooKeeper, where Kafka's ZooKeeper mode kept them: ``/config/users/<user>`` (the name
  URL-encoded as Kafka's Sanitizer does; the node's other keys, the user's client quotas, are kept) holding
  ``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,server_key=...,iterations=4096"}}``.
  Writes are conditioned on the node's version (retried on a conflict); every broker watches the nodes,
  so a change reaches it within a ZooKeeper notification (milliseconds).

Salts and keys never leave the store except to the SASL state machine; passwords are never stored.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from ...errors import ResourceNotFound
from ..quotas.sanitizer import desanitize, sanitize
from .scram_credentials import HASHES, ScramCredential

log = logging.getLogger(__name__)

STORE_FILE = "scram-credentials.json"
USERS_PATH = "/config/users"

#: user -> mechanism -> credential
Credentials = dict[str, dict[str, ScramCredential]]


def _decode(data: bytes | str) -> dict[str, ScramCredential]:
    doc = json.loads(data or b"{}")
    out = {}
    for mech, text in (doc.get("config") or {}).items():
        if mech in HASHES:
            out[mech] = ScramCredential.from_kafka_string(text)
    return out


def _encode(creds: dict[str, ScramCredential], others: dict[str, Any] | None = None) -> bytes:
    config = {**(others or {}), **{m: c.to_kafka_string() for m, c in creds.items()}}
    doc = {"version": 1, "config": dict(sorted(config.items()))}
    return json.dumps(doc, sort_keys=True).encode()


def _others(data: bytes | str) -> dict[str, Any]:
    """The node's config keys that are not SCRAM credentials (its client quotas, which share
    ``/config/users/<user>`` in Kafka's layout): a credential change keeps them."""
    doc = json.loads(data or b"{}")
    return {k: v for k, v in (doc.get("config") or {}).items() if k not in HASHES}


class CredentialStore:
    """Users' SCRAM credentials: lookups for authentication, changes for the admin APIs and the CLI."""

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        """``user``'s credential for ``mechanism``, or None."""
        return self.snapshot().get(user, {}).get(mechanism)

    def any(self, user: str) -> tuple[str, ScramCredential] | None:
        """One (mechanism, credential) of ``user`` (PLAIN checks a password against it), or None."""
        creds = self.snapshot().get(user, {})
        for mech in sorted(creds, reverse=True):  # SCRAM-SHA-512 first
            return mech, creds[mech]
        return None

    def snapshot(self) -> Credentials:
        raise NotImplementedError

    def set(self, user: str, mechanism: str, cred: ScramCredential) -> None:
        self._change(user, lambda creds: {**creds, mechanism: cred})

    def delete(self, user: str, mechanism: str) -> None:
        """Remove ``user``'s ``mechanism`` credential; ResourceNotFound if it has none."""

        def drop(creds: dict[str, ScramCredential]) -> dict[str, ScramCredential]:
            if mechanism not in creds:
                raise ResourceNotFound(f"user {user!r} has no {mechanism} credential")
            return {m: c for m, c in creds.items() if m != mechanism}

        self._change(user, drop)

    def _change(self, user: str, fn: Any) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class FileCredentialStore(CredentialStore):
    """The single broker's store: one JSON file, ``{user: {"version":1,"config":{...}}}``."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / STORE_FILE
        self._lock = threading.Lock()
        self._mtime: int | None = None
        self._creds: Credentials = {}

    def snapshot(self) -> Credentials:
        with self._lock:
            self._reload()
            return self._creds

    def _reload(self) -> None:
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            self._creds, self._mtime = {}, None
            return
        if mtime == self._mtime:
            return
        doc = json.loads(self.path.read_bytes() or b"{}")
        self._creds = {u: _decode(json.dumps(d)) for u, d in doc.items()}
        self._mtime = mtime

    def _change(self, user: str, fn: Any) -> None:
        with self._lock:
            self._reload()
            creds = dict(self._creds)
            new = fn(dict(creds.get(user, {})))
            if new:
                creds[user] = new
            else:
                creds.pop(user, None)
            doc = {u: json.loads(_encode(c)) for u, c in sorted(creds.items())}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # keys are secrets: owner only
            try:
                os.write(fd, json.dumps(doc, indent=1, sort_keys=True).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            self._creds, self._mtime = creds, self.path.stat().st_mtime_ns


class ZkCredentialStore(CredentialStore):
    """Cluster mode: ``/config/users/<user>`` in ZooKeeper, cached here and kept current by watches.

    ``zk`` is the broker's :class:`~..cluster.zk.ZkClient` (its kazoo client does the watches)."""

    def __init__(self, zk: Any) -> None:
        self.zk = zk
        self._lock = threading.Lock()
        self._creds: Credentials = {}
        self._watched: set[str] = set()
        zk.ensure_path(USERS_PATH)
        self._children = zk.watch_children(USERS_PATH, self._on_users)

    def _on_users(self, nodes: list[str]) -> None:
        from kazoo.recipe.watchers import DataWatch

        with self._lock:
            for gone in set(self._creds) - {desanitize(n) for n in nodes}:
                self._creds.pop(gone, None)
            new = [n for n in nodes if n not in self._watched]
            self._watched.update(new)
        for node in new:
            DataWatch(self.zk.client, f"{USERS_PATH}/{node}", self._watcher(node))

    def _watcher(self, node: str) -> Any:
        # two parameters exactly: kazoo also passes the event to a function that takes a third
        def on_data(data: bytes | None, stat: Any) -> bool | None:
            return self._on_user(node, data)

        return on_data

    def _on_user(self, node: str, data: bytes | None) -> bool | None:
        user = desanitize(node)
        with self._lock:
            if data is None:  # deleted: stop watching (a new node gets a new watch from _on_users)
                self._creds.pop(user, None)
                self._watched.discard(node)
                return False
            try:
                creds = _decode(data)
                if creds:
                    self._creds[user] = creds
                else:  # the node holds only other configs (client quotas): not a user with credentials
                    self._creds.pop(user, None)
            except ValueError:
                log.error("ignoring the malformed SCRAM credentials of user %r in ZooKeeper", user)
        return None

    def snapshot(self) -> Credentials:
        with self._lock:
            return dict(self._creds)

    def _change(self, user: str, fn: Any) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        client = self.zk.client
        path = f"{USERS_PATH}/{sanitize(user)}"
        for _ in range(20):  # version-conditioned: another broker's concurrent change makes us read again
            try:
                data, stat = client.get(path)
                current, version, others = _decode(data), stat.version, _others(data)
            except NoNodeError:
                current, version, others = {}, None, {}
            new = fn(dict(current))
            try:
                if version is None:
                    client.create(path, _encode(new), makepath=True)
                else:
                    client.set(path, _encode(new, others), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            with self._lock:  # our own change is visible at once, before the watch fires
                if new:
                    self._creds[user] = new
                else:
                    self._creds.pop(user, None)
            return
        raise RuntimeError(f"could not change the credentials of {user!r}: too many concurrent changes")
