"""Where the broker keeps its ACLs, and the one place that changes them.

- Single broker: ``acls.json`` in the first log directory, written whole (temporary file, fsync, rename).
- Cluster mode: ZooKeeper under Kafka's ZooKeeper-mode paths (``AclAuthorizer`` / ``ZkAclStore``), so the
  layout is the one Kafka's tools know:

  - LITERAL patterns: ``/kafka-acl/<ResourceType>/<name>`` (``Topic``, ``Group``, ``Cluster``,
    ``TransactionalId``), PREFIXED ones: ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``; each node
    holds ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",
    "host":"*"}]}``;
  - every change writes a sequential node, ``/kafka-acl-changes/acl_changes_<n>`` (data ``Topic:name``) for
    a literal pattern and ``/kafka-acl-extended-changes/acl_changes_<n>`` (data ``{"version":1,
    "resourceType":"Topic","name":"...","patternType":"Prefixed"}``) for a prefixed one. Every broker
    watches both and re-reads the named resource: a change reaches all brokers within a ZooKeeper
    notification (milliseconds). As Kafka's ``ZkNodeChangeNotificationListener``, a broker that processes
    changes deletes the notifications older than 15 minutes (``CHANGE_EXPIRATION_MS``), so they do not
    pile up in ZooKeeper.

A change to one resource's node is conditioned on its version (retried on a conflict), as Kafka's.
``on_change(bindings)`` is called with every binding after each change (the authorizer's update).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ....errors import LogSourceError
from .model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    enum_text,
    parse_enum,
)

log = logging.getLogger(__name__)

STORE_FILE = "acls.json"
LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
#: a change notification's lifetime (Kafka's ZkNodeChangeNotificationListener changeExpirationMs default)
CHANGE_EXPIRATION_MS = 15 * 60 * 1000

Acls = dict[ResourcePattern, frozenset[AccessControlEntry]]


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    """A resource node's data, as Kafka writes it."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": enum_text(e.permission),
            "operation": enum_text(e.operation),
            "host": e.host,
        }
        for e in sorted(entries)
    ]
    return json.dumps({"version": 1, "acls": acls}).encode()


def decode_entries(data: bytes | None) -> frozenset[AccessControlEntry]:
    if not data:
        return frozenset()
    doc = json.loads(data)
    return frozenset(
        AccessControlEntry(
            a["principal"],
            a["host"],
            parse_enum(Operation, a["operation"]),
            parse_enum(Permission, a["permissionType"]),
        )
        for a in doc.get("acls", ())
    )


class AclStore:
    """The ACLs of the broker (or cluster): add, remove by filter, and the current bindings."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._acls: Acls = {}
        self.on_change: Callable[[list[AclBinding]], None] | None = None

    def bindings(self) -> list[AclBinding]:
        with self._lock:
            return sorted(AclBinding(p, e) for p, es in self._acls.items() for e in es)

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Add each binding (an existing one is kept once)."""
        by: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            by.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in by.items():
            self._change(pattern, lambda cur, entries=entries: cur | entries)
        self._changed()

    def remove(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove the bindings each filter matches; per filter, the bindings it removed."""
        current = self.bindings()
        matched = [[b for b in current if f.matches(b)] for f in filters]
        by: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for bs in matched:
            for b in bs:
                by.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in by.items():
            self._change(pattern, lambda cur, entries=entries: cur - entries)
        if by:
            self._changed()
        return matched

    def _set_local(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        with self._lock:
            if entries:
                self._acls[pattern] = entries
            else:
                self._acls.pop(pattern, None)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.bindings())

    def _change(self, pattern: ResourcePattern, fn: Callable[[frozenset], frozenset]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class FileAclStore(AclStore):
    """The single broker's store: ``acls.json``, ``[{"resourceType":..., "name":..., "patternType":...,
    "acls":[...]}]``."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.path = Path(directory) / STORE_FILE
        if self.path.exists():
            for r in json.loads(self.path.read_bytes() or b"[]"):
                pattern = ResourcePattern(
                    parse_enum(ResourceType, r["resourceType"]),
                    r["name"],
                    parse_enum(PatternType, r["patternType"]),
                )
                self._acls[pattern] = decode_entries(json.dumps(r).encode())

    def _change(self, pattern: ResourcePattern, fn: Callable[[frozenset], frozenset]) -> None:
        with self._lock:
            new = fn(self._acls.get(pattern, frozenset()))
            acls = dict(self._acls)
            if new:
                acls[pattern] = new
            else:
                acls.pop(pattern, None)
            doc = [
                {
                    "resourceType": enum_text(p.resource_type),
                    "name": p.name,
                    "patternType": enum_text(p.pattern_type),
                    **json.loads(encode_entries(es)),
                }
                for p, es in sorted(acls.items())
            ]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, json.dumps(doc, indent=1).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            self._acls = acls


def _node(pattern: ResourcePattern) -> str:
    root = PREFIXED_ROOT if pattern.pattern_type == PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{enum_text(pattern.resource_type)}/{pattern.name}"


def _change_data(pattern: ResourcePattern) -> tuple[str, bytes]:
    if pattern.pattern_type == PatternType.LITERAL:
        return LITERAL_CHANGES, f"{enum_text(pattern.resource_type)}:{pattern.name}".encode()
    doc = {
        "version": 1,
        "resourceType": enum_text(pattern.resource_type),
        "name": pattern.name,
        "patternType": enum_text(pattern.pattern_type),
    }
    return EXTENDED_CHANGES, json.dumps(doc).encode()


def _parse_change(root: str, data: bytes) -> ResourcePattern:
    if root == LITERAL_CHANGES:
        kind, _, name = data.decode().partition(":")
        return ResourcePattern(parse_enum(ResourceType, kind), name)
    doc = json.loads(data)
    return ResourcePattern(
        parse_enum(ResourceType, doc["resourceType"]),
        doc["name"],
        parse_enum(PatternType, doc["patternType"]),
    )


class ZkAclStore(AclStore):
    """Cluster mode: Kafka's ZooKeeper layout, cached here, kept current by the change notifications.

    ``zk`` is the broker's :class:`~..cluster.zk.ZkClient` (its kazoo client does the watches);
    notifications older than ``change_expiration_ms`` by ``clock`` (seconds) are purged."""

    def __init__(
        self,
        zk: Any,
        change_expiration_ms: int = CHANGE_EXPIRATION_MS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        from kazoo.recipe.watchers import ChildrenWatch

        self.zk = zk
        self.change_expiration_ms = change_expiration_ms
        self._clock = clock
        self._seen: dict[str, set[str]] = {LITERAL_CHANGES: set(), EXTENDED_CHANGES: set()}
        for path in (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES):
            zk.ensure_path(path)
        client = zk.client
        for root, pattern_type in (
            (LITERAL_ROOT, PatternType.LITERAL),
            (PREFIXED_ROOT, PatternType.PREFIXED),
        ):
            for kind in client.get_children(root):
                try:
                    rtype = parse_enum(ResourceType, kind)
                except Exception:
                    continue  # Kafka's other resource types (DelegationToken, User): not ours
                for name in client.get_children(f"{root}/{kind}"):
                    self._reload(ResourcePattern(rtype, name, pattern_type))
        self._watches = [
            ChildrenWatch(client, root, lambda children, root=root: self._on_changes(root, children))
            for root in (LITERAL_CHANGES, EXTENDED_CHANGES)
        ]

    def _reload(self, pattern: ResourcePattern) -> None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk.client.get(_node(pattern))
        except NoNodeError:
            data = None
        try:
            entries = decode_entries(data)
        except (ValueError, KeyError, LogSourceError) as e:
            log.error("ignoring the malformed ACLs of %s in ZooKeeper: %s", _node(pattern), e)
            return
        self._set_local(pattern, entries)

    def _on_changes(self, root: str, children: list[str]) -> None:
        from kazoo.exceptions import NoNodeError

        new = sorted(c for c in children if c not in self._seen[root])
        self._seen[root] = set(children)
        for child in new:
            try:
                data, _ = self.zk.client.get(f"{root}/{child}")
                self._reload(_parse_change(root, data))
            except NoNodeError:
                continue
            except Exception as e:  # a malformed notification must not stop the watch
                log.error("ignoring the ACL change notification %s/%s: %s", root, child, e)
        if new:
            self._changed()
            try:
                self._purge(root, children)
            except Exception as e:  # ZooKeeper away: the next change purges them
                log.warning("could not purge old ACL change notifications under %s: %s", root, e)

    def _purge(self, root: str, children: list[str]) -> None:
        """Delete the notifications under ``root`` created more than ``change_expiration_ms`` ago (every
        broker does, as Kafka's; one that loses the race to another finds the node gone)."""
        from kazoo.exceptions import NoNodeError

        now_ms = self._clock() * 1000
        for child in sorted(children):
            path = f"{root}/{child}"
            try:
                stat = self.zk.client.exists(path)
                if stat is not None and now_ms - stat.ctime > self.change_expiration_ms:
                    self.zk.client.delete(path)
            except NoNodeError:
                continue

    def _change(self, pattern: ResourcePattern, fn: Callable[[frozenset], frozenset]) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        client = self.zk.client
        path = _node(pattern)
        for _ in range(20):
            try:
                data, stat = client.get(path)
                current, version = decode_entries(data), stat.version
            except NoNodeError:
                current, version = frozenset(), None
            new = fn(current)
            if new == current:
                return
            try:
                if not new:
                    client.delete(path, version=version)
                elif version is None:
                    client.create(path, encode_entries(new), makepath=True)
                else:
                    client.set(path, encode_entries(new), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            root, note = _change_data(pattern)
            client.create(f"{root}/{CHANGE_PREFIX}", note, sequence=True, makepath=True)
            self._set_local(pattern, new)
            return
        raise RuntimeError(f"could not change the ACLs of {path}: too many concurrent changes")

    def close(self) -> None:
        self._watches.clear()
