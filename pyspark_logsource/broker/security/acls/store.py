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

A change writes the resource's node (conditioned on the version read; retried on a conflict) and its
notification in one multi-op. A notification the watch could not read while ZooKeeper was away is read when
the session is back.
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

from kazoo.exceptions import KazooException
from kazoo.retry import RetryFailedError

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

#: what a ZooKeeper call raises once the client's retry object gave up (as the cluster's ZK_UNAVAILABLE; this
#: layer is below cluster, so it names kazoo's types itself)
ZK_UNAVAILABLE = (RetryFailedError, KazooException)

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
        self.zk = zk
        self.change_expiration_ms = change_expiration_ms
        self._clock = clock
        self._seen: dict[str, set[str]] = {LITERAL_CHANGES: set(), EXTENDED_CHANGES: set()}
        for path in (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES):
            zk.ensure_path(path)
        for root, pattern_type in (
            (LITERAL_ROOT, PatternType.LITERAL),
            (PREFIXED_ROOT, PatternType.PREFIXED),
        ):
            for kind in zk.children(root):
                try:
                    rtype = parse_enum(ResourceType, kind)
                except Exception:
                    continue  # Kafka's other resource types (DelegationToken, User): not ours
                for name in zk.children(f"{root}/{kind}"):
                    self._reload(ResourcePattern(rtype, name, pattern_type))
        # the broker's watch recipe lists the children again on every reconnect: a notification left unread
        # while ZooKeeper was away is read then
        self._watches = [
            zk.watch_children(root, lambda children, root=root: self._on_changes(root, children))
            for root in (LITERAL_CHANGES, EXTENDED_CHANGES)
        ]

    def _reload(self, pattern: ResourcePattern) -> None:
        got = self.zk.get(_node(pattern))
        try:
            entries = decode_entries(got[0] if got is not None else None)
        except (ValueError, KeyError, LogSourceError) as e:
            log.error("ignoring the malformed ACLs of %s in ZooKeeper: %s", _node(pattern), e)
            return
        self._set_local(pattern, entries)

    def _on_changes(self, root: str, children: list[str]) -> None:
        """The watch on a change root: re-read the resource each new notification names.

        A notification counts as seen once its resource was read (or it is gone, or malformed). One that
        could not be read because ZooKeeper was away stays unseen and is read when the watch lists the
        children again on reconnecting, as Kafka's listener processes the notifications again then."""
        listed = set(children)
        seen = self._seen[root] & listed
        new = sorted(listed - seen)
        read = False
        for child in new:
            try:
                got = self.zk.get(f"{root}/{child}")
                if got is not None:
                    self._reload(_parse_change(root, got[0]))
                    read = True
            except ZK_UNAVAILABLE as e:
                log.warning(
                    "could not read the ACL change notification %s/%s (read again on reconnecting): %r",
                    root,
                    child,
                    e,
                )
                continue
            except Exception as e:  # a malformed notification must not stop the watch
                log.error("ignoring the ACL change notification %s/%s: %s", root, child, e)
            seen.add(child)
        self._seen[root] = seen
        if read:
            self._changed()
        if new:
            try:
                self._purge(root, children)
            except ZK_UNAVAILABLE as e:  # the next change purges them
                log.warning("could not purge old ACL change notifications under %s: %r", root, e)

    def _purge(self, root: str, children: list[str]) -> None:
        """Delete the notifications under ``root`` created more than ``change_expiration_ms`` ago (every
        broker does, as Kafka's; one that loses the race to another finds the node gone)."""
        now_ms = self._clock() * 1000
        for child in sorted(children):
            path = f"{root}/{child}"
            stat = self.zk.exists(path)
            if stat is not None and now_ms - stat.ctime > self.change_expiration_ms:
                self.zk.delete(path)

    def _change(self, pattern: ResourcePattern, fn: Callable[[frozenset], frozenset]) -> None:
        # the resource node and its change notification are written in one multi-op, conditioned on the
        # version read: a broker killed between the two writes cannot leave a change the others never hear of
        path = _node(pattern)
        root, note = _change_data(pattern)
        notification = ("create", (f"{root}/{CHANGE_PREFIX}", note, None, False, True))
        for _ in range(20):
            got = self.zk.get(path)
            current = decode_entries(got[0]) if got is not None else frozenset()
            new = fn(current)
            if new == current:
                self._set_local(pattern, new)
                return
            if not new:
                write = ("delete", (path, got[1].version))
            elif got is None:
                self.zk.ensure_path(path.rsplit("/", 1)[0])
                write = ("create", (path, encode_entries(new)))
            else:
                write = ("set", (path, encode_entries(new), got[1].version))
            try:
                self.zk.transaction([write, notification])
            except self.zk.ConditionFailed:
                continue  # changed under us (or an earlier attempt applied): read it again
            self._set_local(pattern, new)
            return
        raise RuntimeError(f"could not change the ACLs of {path}: too many concurrent changes")

    def close(self) -> None:
        for w in self._watches:
            w.stop()
        self._watches.clear()
