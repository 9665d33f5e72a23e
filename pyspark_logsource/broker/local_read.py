"""The broker's side of a local short-circuit read (as HDFS's ``dfs.client.read.shortcircuit``).

A reader on this host asks for a grant with :class:`LocalReadGrantRequest` over its normal,
authenticated Kafka connection. The ACL step in front of the handlers checks the topic's Read ACL as
for a Fetch (``security/acls/checks.py``); :meth:`LocalReadHandlers.grant` then checks what a Fetch
checks (topic, leadership, the leader epoch), takes the bounds a Fetch at that isolation would use
(high watermark or last stable offset, the aborted transactions, the log start) and the file regions
holding ``[start, end)``, and keeps a duplicate of each region's file descriptor under a random
one-time token that expires after :data:`GRANT_TTL_S`.

The reader redeems the token on the broker's Unix socket (``local-read.sock`` in the first data dir,
mode 0600): :class:`LocalReadServer` checks the peer's uid (SO_PEERCRED: this broker's own uid only),
takes the grant out of :class:`Grants` (so a token works once) and sends the descriptors with
SCM_RIGHTS. While any client quota is configured no descriptors are granted (a file read would
bypass the fetch byte rate and request quotas): the answer then holds the bounds only. A descriptor keeps the file it was opened on: compaction swaps in a new file and retention
unlinks the old one without changing what the reader sees; truncation shortens the file, which the
reader's checks (offsets, CRC, exact lengths) catch, and it then reads that range over the network.

Wire of the Unix socket: the reader sends ``MAGIC`` + the token (16 bytes); the broker answers one
``(status int8, count int32)`` message carrying ``count`` descriptors (status 0) or none (1: unknown,
used or expired token; 2: peer refused).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import struct
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidRequest, LogSourceError, OffsetOutOfRange, UnknownTopicOrPartition
from ..format import header as fmt
from ..protocol import local_read_messages as lrm
from .cluster.handlers import check_epoch
from .error_responses import error_fields
from .session import Session
from .state import topic_error

if TYPE_CHECKING:
    from .state import BrokerState

log = logging.getLogger(__name__)

MAGIC, TOKEN_BYTES, ANSWER = lrm.MAGIC, lrm.TOKEN_BYTES, lrm.ANSWER
OK, REFUSED_TOKEN, REFUSED_PEER = lrm.OK, lrm.REFUSED_TOKEN, lrm.REFUSED_PEER
host_id = lrm.host_id

#: a grant's token is redeemable this long (the reader redeems it at once)
GRANT_TTL_S = 10.0
#: at most this many grants wait to be redeemed (each holds open descriptors); the oldest goes first
MAX_GRANTS = 256
#: the socket's name in the first data dir
SOCKET_NAME = "local-read.sock"
#: descriptors per grant: one SCM_RIGHTS message carries at most 253 (SCM_MAX_FD), and a grant holds its
#: descriptors open until it is redeemed or expires
MAX_REGIONS = 64
#: sun_path holds 108 bytes with its terminating NUL
_MAX_SOCKET_PATH = 107
_UCRED = struct.Struct("3i")  # pid, uid, gid


def peer_allowed(peer_uid: int, broker_uid: int) -> bool:
    """Only a process of the broker's own user may receive descriptors (the files are that user's)."""
    return peer_uid == broker_uid


def peer_uid(conn: socket.socket) -> int:
    """The connected peer's uid (SO_PEERCRED)."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return _UCRED.unpack(raw)[1]


class Grants:
    """Granted descriptors by one-time token, each until it is redeemed or expires (thread-safe)."""

    def __init__(
        self, ttl_s: float = GRANT_TTL_S, limit: int = MAX_GRANTS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl, self._limit, self._clock = ttl_s, limit, clock
        self._lock = threading.Lock()
        self._grants: dict[bytes, tuple[float, list[int]]] = {}
        #: counts for metrics: granted, redeemed, refused (unknown / used / expired token)
        self.counts = {"granted": 0, "redeemed": 0, "refused": 0, "expired": 0}

    def add(self, fds: list[int]) -> bytes:
        """Keep ``fds`` (owned from now on) under a new token; return it."""
        token = secrets.token_bytes(TOKEN_BYTES)
        drop: list[int] = []
        with self._lock:
            drop += self._purge_locked()
            while len(self._grants) >= self._limit:
                oldest = next(iter(self._grants))
                drop += self._grants.pop(oldest)[1]
            self._grants[token] = (self._clock() + self._ttl, fds)
            self.counts["granted"] += 1
        _close_all(drop)
        return token

    def redeem(self, token: bytes) -> list[int] | None:
        """The descriptors of ``token`` (the caller owns them now), once; None if unknown, used or expired."""
        with self._lock:
            drop = self._purge_locked()
            found = self._grants.pop(bytes(token), None)
            self.counts["redeemed" if found is not None else "refused"] += 1
        _close_all(drop)
        return None if found is None else found[1]

    def purge(self) -> None:
        """Close the descriptors of expired grants now (the socket's thread calls it when idle, so files
        deleted by retention or the cleaner do not keep their space once grant traffic stops)."""
        with self._lock:
            drop = self._purge_locked()
        _close_all(drop)

    def _purge_locked(self) -> list[int]:
        now, drop = self._clock(), []
        for token in [t for t, (exp, _) in self._grants.items() if exp <= now]:
            drop += self._grants.pop(token)[1]
            self.counts["expired"] += 1
        return drop

    def snapshot(self) -> dict[str, int]:
        """A copy of :attr:`counts` (the metrics endpoint reads it from its own thread)."""
        with self._lock:
            return dict(self.counts)

    def __len__(self) -> int:
        with self._lock:
            return len(self._grants)

    def close(self) -> None:
        with self._lock:
            drop = [fd for _, fds in self._grants.values() for fd in fds]
            self._grants.clear()
        _close_all(drop)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class LocalReadServer:
    """The Unix socket that hands granted descriptors to readers of this broker's user (a thread)."""

    def __init__(self, path: Path, grants: Grants) -> None:
        self.path, self.grants = Path(path), grants
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def start(self) -> None:
        """Bind (mode 0600 before the name appears: bound under a temporary name, then renamed) and serve."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        for p in (tmp, self.path):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(str(tmp))
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
            s.listen(16)
            s.settimeout(0.5)
        except OSError:
            s.close()
            raise
        self._sock = s
        self._thread = threading.Thread(target=self._serve, name="local-read-socket", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        uid = os.geteuid()
        while not self._closed:
            try:
                conn, _ = self._sock.accept()  # type: ignore[union-attr]
            except TimeoutError:
                self.grants.purge()
                continue
            except OSError:
                if self._closed:
                    return
                continue
            with conn:
                try:
                    self._answer(conn, uid)
                except OSError as e:
                    log.info("local read socket: a reader's exchange failed: %s", e)

    def _answer(self, conn: socket.socket, uid: int) -> None:
        conn.settimeout(2.0)
        want = len(MAGIC) + TOKEN_BYTES
        buf = b""
        while len(buf) < want:
            chunk = conn.recv(want - len(buf))
            if not chunk:
                return
            buf += chunk
        # Refused only once the request is read: closing with it unread would reset the connection, and
        # the reader would see ECONNRESET (or EPIPE on its write) instead of the refusal.
        if not peer_allowed(peer_uid(conn), uid):
            conn.sendall(ANSWER.pack(REFUSED_PEER, 0))
            return
        fds = self.grants.redeem(buf[len(MAGIC) :]) if buf.startswith(MAGIC) else None
        if fds is None:
            conn.sendall(ANSWER.pack(REFUSED_TOKEN, 0))
            return
        try:
            socket.send_fds(conn, [ANSWER.pack(OK, len(fds))], fds)
        finally:
            _close_all(fds)

    def close(self) -> None:
        self._closed = True
        if self._sock is not None:
            self._sock.close()
        if self._thread is not None:
            self._thread.join(2.0)
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        self.grants.close()


def _reopen_read_only(fd: int, path: Path) -> int:
    """A new read-only descriptor of the segment file open as ``fd`` (never the broker's read-write one):
    OSError if ``fd`` no longer is that file (closed by a roll, retention or the cleaner meanwhile, and its
    number taken by another open, or the path swapped to a cleaned file)."""
    new = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        got, want = os.fstat(new), os.stat(path)
        if (got.st_dev, got.st_ino) != (want.st_dev, want.st_ino):
            raise OSError(f"descriptor {fd} is no longer {path}")
    except BaseException:
        os.close(new)
        raise
    return new


def regions_of(lg: Any, start: int, end: int) -> list[tuple[int, lrm.LocalReadRegion]]:
    """(a new descriptor, region) per segment holding batches of ``[start, end)``: what Fetches from
    ``start`` bounded by ``end`` would read, whole batches, in order. Stops early (the reader reads the
    rest over the network) when a segment went away meanwhile."""
    out: list[tuple[int, lrm.LocalReadRegion]] = []
    if start >= end:
        return out
    segs = lg.segments
    bases = [s.base_offset for s in segs]
    offset = start
    try:
        for seg in segs[max(0, bisect_right(bases, start) - 1) :]:
            if offset >= end or seg.base_offset >= end:
                break
            offset = max(offset, seg.base_offset)
            region = seg.read(offset, 1 << 62, end)
            if region is None or region.length == 0:
                continue
            if len(out) >= MAX_REGIONS:
                break  # within one SCM_RIGHTS message (253 at most); the reader goes on over the network
            fd = _reopen_read_only(region.file.fileno(), seg.log_path)
            try:
                h = fmt.read_header(os.pread(fd, fmt.HEADER_SIZE, region.position))
            except BaseException:
                os.close(fd)
                raise
            out.append((fd, lrm.LocalReadRegion(h.base_offset, region.position, region.length)))
    except (OSError, ValueError, LogSourceError) as e:  # a segment deleted or closed meanwhile
        log.info("local read of %s: regions end early at offset %d: %s", lg.name, offset, e)
    return out


class LocalReadHandlers:
    """The LocalReadGrant API of one broker, and its Unix socket (started on the first grant)."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.grants = Grants()
        self._server: LocalReadServer | None = None
        self._unavailable = False
        self._host_id = host_id()

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {lrm.LOCAL_READ_GRANT_KEY: self.grant}

    def socket_path(self) -> Path | None:
        """The socket, started on first use; None when it cannot be offered (path too long, bind error)."""
        if self._server is not None:
            return self._server.path
        if self._unavailable:
            return None
        path = Path(self.state.config.log_dirs[0]).resolve() / SOCKET_NAME
        try:
            if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
                raise OSError(f"socket path {path} is longer than {_MAX_SOCKET_PATH} bytes")
            server = LocalReadServer(path, self.grants)
            server.start()
        except OSError as e:
            log.warning("local reads are not offered: %s", e)
            self._unavailable = True
            return None
        self._server = server
        return path

    def grant(self, req: lrm.LocalReadGrantRequest, session: Session) -> lrm.LocalReadGrantResponse:
        """The bounds a Fetch from ``start_offset`` would use, the regions and the token (see the module)."""
        r = lrm.LocalReadGrantResponse()
        try:
            if req.isolation_level not in (0, 1):
                raise InvalidRequest(f"isolation level {req.isolation_level} is neither 0 nor 1")
            self.state.check_leader(req.topic, req.partition, write=False)
            try:
                lg = self.state.logs.get_log(req.topic, req.partition)
            except UnknownTopicOrPartition:
                raise topic_error(req.topic) from None
            role = self.state.role(req.topic, req.partition)
            r.leader_epoch = role.leader_epoch if role is not None else 0
            if req.current_leader_epoch >= 0:
                check_epoch(req.topic, req.partition, r.leader_epoch, req.current_leader_epoch)
            r.high_watermark = hw = self.state.high_watermark(req.topic, req.partition, lg)
            r.last_stable_offset = lso = lg.txns.last_stable_offset(hw)
            r.log_start_offset = lg.log_start_offset
            r.end_offset = end = lso if req.isolation_level else hw
            start = req.start_offset
            if start < r.log_start_offset or start > hw:
                raise OffsetOutOfRange(
                    f"offset {start} is outside [{r.log_start_offset}, {hw}] of {req.topic}-{req.partition}"
                )
            if req.isolation_level:
                r.aborted_transactions = [
                    (a.producer_id, a.first_offset) for a in lg.txns.aborted_between(start, end)
                ]
        except LogSourceError as e:
            r.error_code, r.error_message = error_fields(e)
            return r
        if not self.state.config.local_read_enable or self.state.quotas.entities():
            # a file read is neither measured nor throttled: with client quotas configured, every read
            # goes through Fetch, whose fetch byte rate and request time the quotas limit; and an
            # operator may switch local reads off (logsource.local.read.enable=false)
            return r  # the bounds only: no token, the reader reads over the network
        path = self.socket_path()
        if path is None or start >= end:
            return r
        found = regions_of(lg, start, end)
        if not found:
            return r
        r.regions = [x for _, x in found]
        r.compacted = "compact" in lg.config.cleanup_policy
        r.token = self.grants.add([fd for fd, _ in found])
        r.socket_path, r.host_id = str(path), self._host_id
        return r

    def close(self) -> None:
        """Close the socket and the descriptors of unredeemed grants; no grant after this starts it again."""
        self._unavailable = True
        if self._server is not None:
            self._server.close()
            self._server = None
        self.grants.close()
