"""The broker's ZooKeeper client: kazoo with one retry object, version-conditioned writes, session states.

Every call goes through :attr:`ZkClient.retry` (one :class:`kazoo.retry.KazooRetry` policy, copied per
call because a retry object counts its attempts), which retries on connection loss with backoff until its
deadline. Writes that must not race are conditioned: :meth:`set_if`
(a ``set`` with the read version) and :meth:`transaction` (a multi-op whose ``check`` ops make it all or
nothing). Session states reach listeners as kazoo reports them (SUSPENDED: connection lost, the session
may still be alive; LOST: the session expired and its ephemeral nodes are gone; CONNECTED).
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
)
from kazoo.protocol.states import ZnodeStat
from kazoo.retry import KazooRetry, RetryFailedError

from ...errors import NetworkError
from .children_watch import ChildrenWatcher

log = logging.getLogger(__name__)

__all__ = ["ZkClient", "KazooState", "ZnodeStat", "ConditionFailed", "NodeExistsError", "NoNodeError"]


class ConditionFailed(Exception):
    """A version-conditioned write or multi-op did not apply (a version changed under it)."""


class ZkClient:
    """A kazoo client for one broker; ``connect`` may carry a chroot (``host:port/chroot``)."""

    #: what a conditioned write raises, for the layers below cluster that are handed a client (ACL store)
    ConditionFailed = ConditionFailed

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int,
        connection_timeout_ms: int | None = None,
        retry_deadline_s: float | None = None,
    ) -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        # the one retry object: connection loss is retried with backoff, bounded by a deadline so a
        # caller (a request handler's worker, the controller thread) learns that ZooKeeper is away
        deadline = (
            retry_deadline_s if retry_deadline_s is not None else max(10.0, 3 * session_timeout_ms / 1000)
        )
        self.retry = KazooRetry(
            max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, deadline=deadline, ignore_expire=True
        )
        self.client = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=1.0),
        )
        self._listeners: list[Callable[[KazooState], None]] = []
        self.client.add_listener(self._on_state)

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # a KazooRetry counts attempts on itself: each call runs a copy of the one policy (as kazoo's recipes do)
        return self.retry.copy()(fn, *args, **kwargs)

    # ------------------------------------------------------------ session

    def start(self) -> None:
        """Connect (a new session); NetworkError if ZooKeeper does not answer within the connection timeout."""
        try:
            with warnings.catch_warnings():  # "No chroot path exists": made just below
                warnings.filterwarnings("ignore", "No chroot path exists", UserWarning)
                self.client.start(timeout=self.connection_timeout_ms / 1000)
        except (KazooException, OSError, self.client.handler.timeout_exception) as e:
            self.client.stop()
            raise NetworkError(f"cannot connect to ZooKeeper at {self.connect}: {e!r}") from e
        chroot = self.client.chroot
        if chroot:  # Kafka makes its chroot if missing; kazoo only warns
            self.client.chroot = ""
            try:
                self._call(self.client.ensure_path, chroot)
            finally:
                self.client.chroot = chroot
        log.info(
            "connected to ZooKeeper at %s (session 0x%x, timeout %d ms)",
            self.connect,
            self.session_id,
            self.session_timeout_ms,
        )

    def stop(self) -> None:
        """Close the session (its ephemeral nodes go at once) and the client."""
        try:
            self.client.stop()
            self.client.close()
        except Exception as e:  # closing after a failure: nothing left to do
            log.debug("closing the ZooKeeper client: %r", e)

    @property
    def session_id(self) -> int:
        cid = self.client.client_id
        return cid[0] if cid else 0

    @property
    def connected(self) -> bool:
        return self.client.state == KazooState.CONNECTED

    def add_listener(self, fn: Callable[[KazooState], None]) -> None:
        """Call ``fn(state)`` on each session state change (on kazoo's thread: do not block in it)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[KazooState], None]) -> None:
        """No more calls to ``fn`` (added by :meth:`add_listener`; nothing if it is not there)."""
        try:
            self._listeners.remove(fn)
        except ValueError:
            pass

    def on_connected(self, fn: Callable[[], None], name: str) -> Callable[[KazooState], None]:
        """Run ``fn()`` on a thread of its own (named ``name``) each time the session is connected again: work
        that reads ZooKeeper, which a listener must not do on kazoo's thread. Returns the listener, for
        :meth:`remove_listener`."""

        def listener(state: KazooState) -> None:
            if state == KazooState.CONNECTED:
                threading.Thread(target=fn, name=name, daemon=True).start()

        self.add_listener(listener)
        return listener

    def _on_state(self, state: KazooState) -> None:
        log.info("ZooKeeper session state: %s", state)
        for fn in list(self._listeners):
            try:
                fn(state)
            except Exception:
                log.exception("ZooKeeper state listener failed")

    # ------------------------------------------------------------ reads

    def get(self, path: str, watch: Callable | None = None) -> tuple[bytes, ZnodeStat] | None:
        """(data, stat), or None when the node does not exist."""
        try:
            return self._call(self.client.get, path, watch=watch)
        except NoNodeError:
            return None

    def children(self, path: str) -> list[str]:
        """Children names ([] when the node does not exist)."""
        try:
            return self._call(self.client.get_children, path)
        except NoNodeError:
            return []

    def exists(self, path: str, watch: Callable[[Any], None] | None = None) -> ZnodeStat | None:
        """The node's stat, or None when it does not exist; ``watch(event)`` is called once at its next
        creation, deletion or change."""
        return self._call(self.client.exists, path, watch=watch)

    def list_and_watch(self, path: str, watch: Callable[[Any], None]) -> list[str]:
        """Children names, and ``watch(event)`` called once at their next change (NoNodeError if absent)."""
        return self._call(self.client.get_children, path, watch=watch)

    def watch_children(self, path: str, fn: Callable[[list[str]], bool | None]) -> ChildrenWatcher:
        """Follow ``path``'s children: ``fn(children)`` now, after each change and after each reconnect
        (:class:`.children_watch.ChildrenWatcher`, in place of kazoo's ChildrenWatch)."""
        return ChildrenWatcher(self, path, fn)

    # ------------------------------------------------------------ writes

    def ensure_path(self, path: str) -> None:
        """Create ``path`` and its parents if missing (persistent, empty)."""
        self._call(self.client.ensure_path, path)

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        makepath: bool = False,
        sequence: bool = False,
    ) -> None:
        """Create a node; NodeExistsError if it exists. A retry after a lost reply may find the node made by
        the first attempt: callers that care compare the node's owner (ephemeral) or content."""
        self._call(self.client.create, path, data, ephemeral=ephemeral, makepath=makepath, sequence=sequence)

    def set_if(self, path: str, data: bytes, version: int) -> ZnodeStat:
        """Set ``path`` only if its version is still ``version``; ConditionFailed otherwise. Returns the new stat."""
        try:
            return self._call(self.client.set, path, data, version=version)
        except (BadVersionError, NoNodeError) as e:
            raise ConditionFailed(f"{path} changed (expected version {version}): {type(e).__name__}") from e

    def delete(self, path: str, recursive: bool = False) -> None:
        """Delete a node (absent is fine)."""
        try:
            self._call(self.client.delete, path, recursive=recursive)
        except NoNodeError:
            pass

    def transaction(self, ops: Sequence[tuple[str, Any]]) -> list[Any]:
        """Run a multi-op: ``("check", (path, version))``, ``("create", (path, data))``,
        ``("set", (path, data, version))``, ``("delete", (path, version))``. All or nothing:
        ConditionFailed when one of them fails (a check, a version, a missing or existing node)."""

        def run() -> list[Any]:
            t = self.client.transaction()
            for kind, args in ops:
                if kind == "check":
                    t.check(*args)
                elif kind == "create":
                    t.create(*args)
                elif kind == "set":
                    t.set_data(*args)
                elif kind == "delete":
                    t.delete(*args)
                else:
                    raise ValueError(f"unknown transaction op {kind!r}")
            return t.commit()

        results = self._call(run)
        failures = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if failures:
            raise ConditionFailed(f"multi-op failed: {failures[0]!r}")
        return results


#: what a ZooKeeper call raises once the retry object gave up
ZK_UNAVAILABLE = (RetryFailedError, KazooException)
