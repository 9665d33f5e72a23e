"""Follow a znode's children: the house recipe in place of kazoo's ``ChildrenWatch``.

kazoo's ChildrenWatch lists the children again after a reconnect only while it believes its watch is not
set, and it notes the watch as set after the listing returns. When the connection drops between the two
(the listing answered, the session's SUSPENDED state handled, then the note), the watch it believes set is
gone with the old connection (ZooKeeper keeps watches per connection, and kazoo does not restore them), so
no later change is ever reported: a broker would stop seeing brokers leave, topics come, or ACL changes.
This recipe lists again, re-arming the watch, on every reconnect, and calls back each time; the callers
compare with what they know (a listing that did not change changes nothing). A path that does not exist
has no children, and is watched for its creation (kazoo's recipe stopped for good there).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import ConnectionClosedError, KazooException, NoNodeError
from kazoo.retry import RetryFailedError

log = logging.getLogger(__name__)


class ChildrenWatcher:
    """Calls ``fn(children)`` with ``path``'s children now, after each change and after each reconnect, until
    ``fn`` returns False or :meth:`stop`. ``zk`` is the broker's ZkClient (its retry object does the
    listing, and it runs ``on_connected`` callbacks on a thread of their own)."""

    def __init__(self, zk: Any, path: str, fn: Callable[[list[str]], bool | None]) -> None:
        self.zk = zk
        self.path = path
        self._fn = fn
        self._lock = threading.Lock()  # one listing and call at a time: the watch and a reconnect
        self._stopped = False
        self._listener = zk.on_connected(self._list, f"watch {path}")
        self._list()

    def stop(self) -> None:
        """No more calls (the watch set last fires once more, unheard)."""
        self._stopped = True
        self.zk.remove_listener(self._listener)

    def _on_event(self, event: Any) -> None:
        if event.type != "NONE":  # NONE: a session state, handled by the reconnect listing
            self._list()

    def _children(self) -> list[str]:
        """The children, their watch set; none when the path does not exist, a watch set for its creation."""
        while True:
            try:
                return self.zk.list_and_watch(self.path, self._on_event)
            except NoNodeError:
                if self.zk.exists(self.path, watch=self._on_event) is None:
                    log.info("%s does not exist: watched for its creation", self.path)
                    return []
                # created between the two calls: list it

    def _list(self) -> None:
        with self._lock:
            if self._stopped:
                return
            try:
                children = self._children()
            except ConnectionClosedError:  # the client is closing
                self.stop()
                return
            except (RetryFailedError, KazooException) as e:  # away: the reconnect lists again
                log.warning("could not list %s (listed again on reconnecting): %r", self.path, e)
                return
            try:
                if self._fn(children) is False:
                    self.stop()
            except Exception:  # a failing callback must not stop the watch
                log.exception("the watcher of %s failed", self.path)
