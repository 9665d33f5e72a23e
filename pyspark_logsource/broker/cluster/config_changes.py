"""Dynamic configs in ZooKeeper, as Kafka's ZooKeeper mode keeps them, and their change notifications.

==============================================  ==============================================================
znode                                           data
==============================================  ==============================================================
``/config/topics/<t>``                          ``{"version":1,"config":{"retention.ms":"1000",...}}``
``/config/brokers/<id>``                        ``{"version":1,"config":{"log.retention.ms":"1000",...}}``
``/config/brokers/<default>``                   the cluster-wide dynamic broker default, same shape
``/config/changes/config_change_<seq>``         ``{"version":2,"entity_path":"topics/<t>"}`` (persistent,
                                                sequential): every broker watches the children and re-reads
                                                the entity each new one names
==============================================  ==============================================================

A writer sets the entity's znode and then creates the notification (Kafka's AdminZkClient.changeConfigs);
every broker's :class:`ConfigChangeListener` sees the new child within the watch's latency (milliseconds) and
calls back with the entity. Notifications older than :data:`NOTIFICATION_TTL_S` are purged, as Kafka's
``ZkNodeChangeNotificationListener`` does after 15 minutes.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping

from . import paths
from .zk import ZK_UNAVAILABLE, ZkClient

log = logging.getLogger(__name__)

CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
CHANGE_PREFIX = "config_change_"
DEFAULT_BROKER = "<default>"
TOPICS, BROKERS = "topics", "brokers"
NOTIFICATION_TTL_S = 15 * 60


def entity_path(entity_type: str, name: str) -> str:
    """``/config/topics/<t>`` or ``/config/brokers/<id|<default>>``."""
    return f"/config/{entity_type}/{name}"


def read_entity(zk: ZkClient, entity_type: str, name: str) -> dict[str, str]:
    """The entity's dynamic config ({} when it has none)."""
    got = zk.get(entity_path(entity_type, name))
    return paths.decode_topic_config(got[0]) if got else {}


def write_entity(zk: ZkClient, entity_type: str, name: str, config: Mapping[str, str]) -> None:
    """Set the entity's config, then announce the change to every broker (blocking)."""
    path = entity_path(entity_type, name)
    data = paths.encode_topic_config(dict(config))
    if zk.exists(path) is None:
        zk.create(path, data, makepath=True)
    else:
        zk.set_if(path, data, -1)
    note = json.dumps({"version": 2, "entity_path": f"{entity_type}/{name}"}, separators=(",", ":"))
    zk.create(f"{CONFIG_CHANGES}/{CHANGE_PREFIX}", note.encode(), sequence=True, makepath=True)


class ConfigChangeListener:
    """Calls ``on_change(entity_type, name)`` for each change notification written after it started."""

    def __init__(self, zk: ZkClient, on_change: Callable[[str, str], None]) -> None:
        self.zk = zk
        self.on_change = on_change
        self._last = -1
        self._lock = threading.Lock()
        self._stopped = False

    def start(self) -> None:
        for p in (CONFIG_BROKERS, CONFIG_CHANGES):
            self.zk.ensure_path(p)
        existing = self.zk.children(CONFIG_CHANGES)
        self._last = max((_seq(c) for c in existing), default=-1)
        # the broker's watch recipe lists the children again on every reconnect: a notification left unread
        # while ZooKeeper was away is read then
        self.zk.watch_children(CONFIG_CHANGES, self._on_children)

    def stop(self) -> None:
        self._stopped = True

    def _on_children(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        with self._lock:
            fresh = sorted((s, c) for c in children if (s := _seq(c)) > self._last)
            for seq, child in fresh:
                try:
                    got = self.zk.get(f"{CONFIG_CHANGES}/{child}")
                except ZK_UNAVAILABLE as e:
                    # not applied, so not passed: read when the watch lists the children on reconnecting
                    log.warning("could not read config change %s (read again on reconnecting): %r", child, e)
                    break
                self._last = seq
                if got is None:
                    continue
                try:
                    entity = json.loads(got[0].decode())["entity_path"]
                    entity_type, _, name = entity.partition("/")
                    self.on_change(entity_type, name)
                except Exception:  # one bad notification must not stop the others
                    log.exception("config change %s could not be applied", child)
                if (time.time() * 1000 - got[1].ctime) / 1000 > NOTIFICATION_TTL_S:
                    self._purge(child)
        return True

    def _purge(self, child: str) -> None:
        try:
            self.zk.delete(f"{CONFIG_CHANGES}/{child}")
        except Exception:  # another broker purged it first
            pass


def _seq(child: str) -> int:
    try:
        return int(child[len(CHANGE_PREFIX) :])
    except ValueError:
        return -1
