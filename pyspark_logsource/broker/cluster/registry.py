"""Broker registration (``/brokers/ids/<id>``, ephemeral) and the live-broker watch.

A broker registers with its advertised host and port in Kafka's JSON shape; the node lives as long as
its ZooKeeper session. After a session is lost, :meth:`BrokerRegistry.register` runs again on the new
session. A restarted broker may find its previous session's node still there (the session has not
expired yet, e.g. after kill -9): it waits for that node to go, up to twice the session timeout, as the
old session can outlive the process by at most the timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import ConnectionClosedError

from ...errors import BrokerIdConflict
from . import paths
from .children_watch import ChildrenWatcher
from .zk import NodeExistsError, ZkClient

log = logging.getLogger(__name__)


class BrokerRegistry:
    """This broker's registration, and a cache of every live broker (id -> BrokerInfo)."""

    def __init__(self, zk: ZkClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._live: dict[int, paths.BrokerInfo] = {}
        self._lock = threading.Lock()
        self._listeners: list[Callable[[set[int]], None]] = []
        self._watch: ChildrenWatcher | None = None

    def register(
        self,
        host: str,
        port: int,
        wait_s: float | None = None,
        endpoints: dict[str, tuple[str, int]] | None = None,
        protocol_map: dict[str, str] | None = None,
    ) -> None:
        """Create ``/brokers/ids/<id>`` on the current session, waiting out a previous session's node
        (``wait_s``, by default twice the session timeout); BrokerIdConflict if it stays."""
        path = paths.broker_path(self.broker_id)
        data = paths.encode_broker(host, port, endpoints, protocol_map)
        if wait_s is None:
            wait_s = 2 * self.zk.session_timeout_ms / 1000 + 1
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.zk.create(path, data, ephemeral=True, makepath=True)
                break
            except NodeExistsError:
                got = self.zk.get(path)
                if got is not None and got[1].ephemeralOwner == self.zk.session_id:
                    break  # ours: a retried create that had succeeded
                if time.monotonic() > deadline:
                    raise BrokerIdConflict(
                        f"broker.id {self.broker_id} is registered by another live session "
                        f"({path}); is another broker running with this id?"
                    ) from None
                time.sleep(0.1)
        log.info("registered broker %d at %s:%d in %s", self.broker_id, host, port, path)

    def watch(self) -> None:
        """Follow ``/brokers/ids``: the live-broker cache and the listeners (called with the live ids)."""
        self.zk.ensure_path(paths.BROKER_IDS)
        self._watch = self.zk.watch_children(paths.BROKER_IDS, self._on_children)

    def _on_children(self, children: list[str]) -> bool:
        try:
            self._refresh(children)
        except ConnectionClosedError:
            return False  # the client is closing: stop watching
        return True

    def _refresh(self, children: list[str]) -> None:
        live: dict[int, paths.BrokerInfo] = {}
        for c in children:
            if not c.isdigit():
                continue
            bid = int(c)
            with self._lock:
                known = self._live.get(bid)
            got = self.zk.get(paths.broker_path(bid))
            if got is None:
                continue  # gone between the listing and the read
            data, stat = got
            if known is not None and known.czxid == stat.czxid:
                live[bid] = known
                continue
            info = paths.decode_broker(bid, data)
            live[bid] = paths.BrokerInfo(
                bid, info.host, info.port, info.timestamp, stat.czxid, info.endpoints
            )
        with self._lock:
            changed = set(live) != set(self._live) or any(self._live.get(b) != i for b, i in live.items())
            self._live = live
        if changed:
            log.info("live brokers: %s", sorted(live))
            for fn in list(self._listeners):
                try:
                    fn(set(live))
                except Exception:
                    log.exception("live-broker listener failed")

    def add_listener(self, fn: Callable[[set[int]], None]) -> None:
        """Call ``fn(live_ids)`` when the set of live brokers (or an address) changes (kazoo's thread)."""
        self._listeners.append(fn)

    def live(self) -> dict[int, paths.BrokerInfo]:
        with self._lock:
            return dict(self._live)

    def live_ids(self, fresh: bool = False) -> list[int]:
        """Live broker ids, sorted; ``fresh`` reads ``/brokers/ids`` now instead of the watch's cache (which
        trails by a watch delivery: a topic created right after brokers joined must see them)."""
        if not fresh:
            with self._lock:
                return sorted(self._live)
        return sorted(int(c) for c in self.zk.children(paths.BROKER_IDS) if c.isdigit())

    def registrations(self) -> dict[int, int]:
        """Live broker id -> the czxid of its registration (a new one per session), read from ZooKeeper now."""
        out = {}
        for c in self.zk.children(paths.BROKER_IDS):
            if c.isdigit() and (stat := self.zk.exists(paths.broker_path(int(c)))) is not None:
                out[int(c)] = stat.czxid
        return out

    def brokers(self, listener: str | None = None) -> list[tuple[int, str, int]]:
        """Live brokers (id, host, port) on ``listener`` (None: the inter-broker one), sorted by id."""
        with self._lock:
            return [(b, *i.address_on(listener)) for b, i in sorted(self._live.items())]
