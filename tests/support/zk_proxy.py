"""A TCP proxy in front of the test ZooKeeper that drops a client's connection at a chosen point of the protocol.

Armed with :meth:`ZkProxy.cut_after_watch_read`, it forwards ZooKeeper's next watch event (a reply with xid
-1) and the reply to the client's next request (the watch recipe listing the children again); the request
after that (the listener reading the new notification) is not forwarded: the connection is closed instead,
and new ones are refused for a while. The client's session survives (it reconnects within its timeout),
but that read fails with a connection loss, the case a change-notification listener must not lose a change
in. With ``at_reply`` the cut comes right after the recipe's listing is answered: kazoo's ChildrenWatch then
loses its watch (see broker/cluster/children_watch.py).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

_WATCH_XID = -1


class ZkProxy:
    """Listens on 127.0.0.1 (``port``) and forwards each connection to ``upstream`` (host, port)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listen = socket.create_server(("127.0.0.1", 0))
        self.port = self._listen.getsockname()[1]
        self._lock = threading.Lock()
        self._armed_refuse_s: float | None = None
        self._at_reply = False
        self._refuse_until = 0.0
        self._closed = False
        self._sockets: list[socket.socket] = []
        self.cuts = 0
        threading.Thread(target=self._accept, name="zk-proxy", daemon=True).start()

    def connect_string(self, chroot: str = "") -> str:
        return f"127.0.0.1:{self.port}{chroot}"

    def cut_after_watch_read(self, refuse_s: float, at_reply: bool = False) -> None:
        """Cut the connection at the first request after the next watch event and the reply that follows
        it (``at_reply``: right after forwarding that reply instead); refuse connections for ``refuse_s``
        seconds after."""
        with self._lock:
            self._armed_refuse_s = refuse_s
            self._at_reply = at_reply

    def drop_connections(self) -> None:
        """Close every proxied connection now (the clients reconnect through the proxy)."""
        with self._lock:
            for s in self._sockets:
                _close(s)
            self._sockets.clear()
            self.cuts += 1

    def _cut(self) -> None:
        # lock held
        self._refuse_until = time.monotonic() + (self._armed_refuse_s or 0.0)
        self._armed_refuse_s = None
        self.cuts += 1

    def close(self) -> None:
        self._closed = True
        self._listen.close()
        with self._lock:
            for s in self._sockets:
                _close(s)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listen.accept()
            except OSError:
                return
            if time.monotonic() < self._refuse_until:
                _close(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            state = {"watch": False, "answered": False}
            threading.Thread(target=self._pump, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._replies, args=(server, client, state), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket, state: dict) -> None:
        # the client's requests. Armed, once the watch recipe has had its answer, the next request is not
        # forwarded: the connection is cut instead, so the read it asks for fails with a connection loss.
        try:
            for frame, xid in _frames(client):
                if xid is not None and xid > 0 and state["answered"]:
                    with self._lock:
                        if self._armed_refuse_s is not None and not self._at_reply:
                            self._cut()
                            break
                server.sendall(frame)
        except OSError:
            pass
        _close(client)
        _close(server)

    def _replies(self, server: socket.socket, client: socket.socket, state: dict) -> None:
        # ZooKeeper's replies, forwarded as they come; noted: a watch event (xid -1) and then the answer
        # to the client's next request (the recipe listing the children again), while armed
        try:
            for frame, xid in _frames(server):
                if xid is not None:
                    with self._lock:
                        if self._armed_refuse_s is None:
                            state["watch"] = state["answered"] = False
                        elif xid == _WATCH_XID:
                            state["watch"] = True
                        elif xid > 0 and state["watch"]:
                            state["answered"] = True
                client.sendall(frame)
                if state["answered"]:
                    with self._lock:
                        if self._armed_refuse_s is not None and self._at_reply:
                            self._cut()
                            break
        except OSError:
            pass
        _close(server)
        _close(client)


def _frames(sock: socket.socket) -> Iterator[tuple[bytes, int | None]]:
    """Each frame that comes on ``sock`` (a 4-byte length and a body) and its xid: None for the first, the
    connect request or answer, the only frame that does not start with one."""
    first = True
    while True:
        head = _read(sock, 4)
        body = _read(sock, struct.unpack(">i", head)[0])
        yield head + body, None if first else struct.unpack(">i", body[:4])[0]
        first = False


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    return buf


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
