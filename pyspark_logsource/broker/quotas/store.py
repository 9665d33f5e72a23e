"""Where the configured client quotas are kept, and the one place that changes them.

- Single broker: ``client-quotas.json`` in the first log directory, written whole to a temporary file,
  fsynced and renamed (then the directory fsynced); loaded into the broker's :class:`~.model.QuotaTable`
  when the broker opens its state.
- Cluster mode: ZooKeeper, where Kafka's ZooKeeper mode keeps them:

  ==============================================  ==========================================================
  znode                                           entity
  ==============================================  ==========================================================
  ``/config/users/<user>``                        a user (``<default>``: the default user)
  ``/config/users/<user>/clients/<client-id>``    a (user, client-id) (either part may be ``<default>``)
  ``/config/clients/<client-id>``                 a client-id (``<default>``: the default client-id)
  ==============================================  ==========================================================

  each holding ``{"version":1,"config":{"producer_byte_rate":"1048576","request_percentage":"200.0"}}``.
  Names are URL-encoded as Kafka's ``Sanitizer`` does. ``/config/users/<user>`` is shared with the user's
  SCRAM credentials (:mod:`..security.credential_store`): a write changes only the quota keys, keeps the
  others and is conditioned on the node's version (read again on a conflict). After a write the change is
  announced under ``/config/changes`` (``users/<user>``, ``users/<user>/clients/<client-id>``,
  ``clients/<client-id>``, Kafka's entity paths) and every broker re-reads that entity.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import sanitizer
from .model import DEFAULT, QUOTA_KEYS, REQUEST_PERCENTAGE, QuotaEntity, QuotaTable

log = logging.getLogger(__name__)

STORE_FILE = "client-quotas.json"
USERS, CLIENTS = "users", "clients"

#: a change: key -> new value, or None to remove the key
Changes = Mapping[str, float | None]


def sanitize(name: str) -> str:
    """A user or client-id as a znode name: Kafka's ``Sanitizer.sanitize`` (Java's URLEncoder, with
    ``*`` and space percent-encoded); the default entity keeps its name ``<default>``."""
    return DEFAULT if name == DEFAULT else sanitizer.sanitize(name)


def desanitize(name: str) -> str:
    """The inverse of :func:`sanitize` (Java's URLDecoder: ``+`` is a space)."""
    return DEFAULT if name == DEFAULT else sanitizer.desanitize(name)


def format_value(key: str, value: float) -> str:
    """A value as Kafka's ZooKeeper mode writes it: byte rates as longs, the request percentage as a double."""
    return repr(float(value)) if key == REQUEST_PERCENTAGE else str(int(round(value)))


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config map (a value that is not a number is logged and skipped)."""
    out = {}
    for key in QUOTA_KEYS:
        if key in config:
            try:
                out[key] = float(config[key])
            except ValueError:
                log.error("ignoring quota %s=%r: not a number", key, config[key])
    return out


def apply_changes(current: Mapping[str, Any], changes: Changes, fmt: Any = None) -> dict[str, Any]:
    """``current`` with ``changes`` applied (None removes a key); ``fmt(key, value)`` converts new values."""
    out = dict(current)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = fmt(key, value) if fmt is not None else value
    return out


class QuotaStore:
    """Changes an entity's quotas durably and in the broker's table."""

    def __init__(self, table: QuotaTable) -> None:
        self.table = table

    def alter(self, entity: QuotaEntity, changes: Changes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


# ------------------------------------------------------------------ single broker


class FileQuotaStore(QuotaStore):
    """The single broker's store: ``[{"user": ..., "client-id": ..., "quotas": {...}}, ...]`` in one file
    (a part the entity does not name is absent; ``<default>`` names a default)."""

    def __init__(self, directory: Path, table: QuotaTable) -> None:
        super().__init__(table)
        self.path = Path(directory) / STORE_FILE
        self._lock = threading.Lock()

    def load(self) -> None:
        """Put the saved quotas into the table (a malformed file is logged and ignored, not fatal)."""
        if not self.path.exists():
            return
        try:
            doc = json.loads(self.path.read_bytes() or b"[]")
            entries = [
                (
                    QuotaEntity(e.get("user"), e.get("client-id")),
                    {k: float(v) for k, v in e["quotas"].items()},
                )
                for e in doc
            ]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.error("%s: ignoring malformed client quotas (%s)", self.path, e)
            return
        for entity, values in entries:
            try:
                self.table.set_entity(entity, values)
            except ValueError as e:
                log.error("%s: ignoring the quotas of %s (%s)", self.path, entity, e)

    def alter(self, entity: QuotaEntity, changes: Changes) -> None:
        with self._lock:
            entities = self.table.entities()
            new = apply_changes(entities.get(entity, {}), changes)
            if new:
                entities[entity] = new
            else:
                entities.pop(entity, None)
            self._write(entities)
            self.table.set_entity(entity, new)

    def _write(self, entities: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        doc = []
        for e, values in sorted(entities.items(), key=lambda x: (x[0].user or "", x[0].client_id or "")):
            row: dict[str, Any] = {}
            if e.user is not None:
                row["user"] = e.user
            if e.client_id is not None:
                row["client-id"] = e.client_id
            row["quotas"] = dict(sorted(values.items()))
            doc.append(row)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, json.dumps(doc, indent=1).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)  # the rename itself survives a crash
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


# ------------------------------------------------------------------ cluster mode


def znode_name(entity: QuotaEntity) -> tuple[str, str]:
    """(entity type, name under /config/<type>) of an entity, as Kafka names them."""
    if entity.user is None:
        return CLIENTS, sanitize(entity.client_id or "")
    if entity.client_id is None:
        return USERS, sanitize(entity.user)
    return USERS, f"{sanitize(entity.user)}/clients/{sanitize(entity.client_id)}"


def entity_of(entity_type: str, name: str) -> QuotaEntity | None:
    """The entity a ``/config/changes`` notification names (None for other entity types)."""
    if entity_type == CLIENTS:
        return QuotaEntity(None, desanitize(name))
    if entity_type != USERS:
        return None
    user, sep, client = name.partition("/clients/")
    return QuotaEntity(desanitize(user), desanitize(client) if sep else None)


class ZkQuotaStore(QuotaStore):
    """Cluster mode: the quota entities under ``/config/users`` and ``/config/clients``; ``zk`` is the
    broker's :class:`~..cluster.zk.ZkClient` (every call through its retry object)."""

    def __init__(self, zk: Any, table: QuotaTable) -> None:
        from ..cluster.config_changes import ConfigChangeListener

        super().__init__(table)
        self.zk = zk
        self.listener = ConfigChangeListener(zk, self._on_change)

    def start(self) -> None:
        """Listen for change notifications, then load every entity (blocking): a change written while
        loading is applied by its notification."""
        self.zk.ensure_path(f"/config/{USERS}")
        self.zk.ensure_path(f"/config/{CLIENTS}")
        self.listener.start()
        self.load_all()

    def close(self) -> None:
        self.listener.stop()

    def load_all(self) -> None:
        """Make the table what ZooKeeper holds (entities gone from ZooKeeper are removed)."""
        found: dict[QuotaEntity, dict[str, float]] = {}
        for user in self.zk.children(f"/config/{USERS}"):
            self._read_into(found, QuotaEntity(desanitize(user), None))
            for client in self.zk.children(f"/config/{USERS}/{user}/{CLIENTS}"):
                self._read_into(found, QuotaEntity(desanitize(user), desanitize(client)))
        for client in self.zk.children(f"/config/{CLIENTS}"):
            self._read_into(found, QuotaEntity(None, desanitize(client)))
        for entity in set(self.table.entities()) - set(found):
            self.table.set_entity(entity, {})
        for entity, values in found.items():
            self.table.set_entity(entity, values)

    def _read_into(self, found: dict[QuotaEntity, dict[str, float]], entity: QuotaEntity) -> None:
        values = self.read(entity)
        if values:
            found[entity] = values

    def read(self, entity: QuotaEntity) -> dict[str, float]:
        """The entity's quotas in ZooKeeper ({} when it has none)."""
        got = self.zk.get(self._path(entity))
        return quota_values(_config(got[0])) if got else {}

    def _on_change(self, entity_type: str, name: str) -> None:
        entity = entity_of(entity_type, name)
        if entity is not None:
            self.table.set_entity(entity, self.read(entity))

    def _path(self, entity: QuotaEntity) -> str:
        kind, name = znode_name(entity)
        return f"/config/{kind}/{name}"

    def alter(self, entity: QuotaEntity, changes: Changes) -> None:
        from kazoo.exceptions import NodeExistsError

        from ..cluster.config_changes import CHANGE_PREFIX, CONFIG_CHANGES
        from ..cluster.zk import ConditionFailed

        path = self._path(entity)
        for _ in range(50):  # version-conditioned: a concurrent change (a SCRAM credential too) reads again
            got = self.zk.get(path)
            doc = _doc(got[0]) if got else {"version": 1, "config": {}}
            doc["config"] = apply_changes(doc.get("config") or {}, changes, format_value)
            data = json.dumps(doc, separators=(",", ":")).encode()
            try:
                if got is None:
                    self.zk.create(path, data, makepath=True)
                else:
                    self.zk.set_if(path, data, got[1].version)
            except (ConditionFailed, NodeExistsError):
                continue
            break
        else:
            raise RuntimeError(f"could not change the quotas of {entity}: too many concurrent changes")
        kind, name = znode_name(entity)
        note = json.dumps({"version": 2, "entity_path": f"{kind}/{name}"}, separators=(",", ":"))
        self.zk.create(f"{CONFIG_CHANGES}/{CHANGE_PREFIX}", note.encode(), sequence=True, makepath=True)
        self.table.set_entity(entity, quota_values(doc["config"]))  # ours at once, before the notification


def _doc(data: bytes) -> dict[str, Any]:
    if not data:
        return {"version": 1, "config": {}}
    doc = json.loads(data)
    return doc if isinstance(doc, dict) else {"version": 1, "config": {}}


def _config(data: bytes) -> dict[str, str]:
    try:
        return {str(k): str(v) for k, v in (_doc(data).get("config") or {}).items()}
    except ValueError:
        log.error("ignoring a malformed entity config in ZooKeeper")
        return {}
