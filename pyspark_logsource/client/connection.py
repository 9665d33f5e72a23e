"""Socket I/O for the clients, over the sans-IO protocol in :mod:`pyspark_logsource.protocol`.

:class:`BrokerConnection` is one TCP connection to one broker. It is
thread-safe and pipelines: any number of threads may send requests, each
gets its response through a callback or a blocking wait, matched by
correlation id (the broker answers a connection's requests in order). In
threaded mode a reader thread receives responses; without it (Spark tasks,
one request at a time) the caller's thread reads.

:class:`~.network.NetworkClient` (in :mod:`.network`) owns the bootstrap
list, the cluster metadata and one connection per broker.
"""

from __future__ import annotations

import logging
import select
import socket
import ssl
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..errors import (
    ConfigError,
    LogSourceError,
    NetworkError,
    RequestTimedOut,
    UnsupportedVersion,
)
from ..protocol.connection import ClientConnection
from ..protocol.messages import ApiKey, ApiVersionsRequest
from ..protocol.primitives import ProtocolError, is_region
from .dispatch import match_answers, pop_times
from .metrics import ClientMetrics
from .security import ClientSecurity, sasl_exchange
from .threads import ClientThread
from .waiting import PendingResponse, Waiter, raise_for_response
from .window import InFlightWindow

log = logging.getLogger(__name__)

Callback = Callable[[Any, "BaseException | None"], None]

_RECV_SIZE = 1 << 20
#: what the caller-reads mode receives before it knows the next frame's size: a large answer's frame
#: is then allocated after at most this much (which is copied into it), and the rest is received
#: straight into the frame. With the whole 1 MB buffer, up to 1 MB of each fetch answer (a Spark
#: task's 8 MB answers, with the next one already in the socket) was copied twice by the framing.
_FIRST_RECV = 64 * 1024
#: how often a waiting reader thread looks at request deadlines and close()
_READ_POLL_S = 0.2
_WAITALL = getattr(socket, "MSG_WAITALL", 0)
_IOV_MAX = 512
# A write to a connection the broker (or close()'s shutdown) ended raises EPIPE, never SIGPIPE: a
# process whose SIGPIPE is the default (a command-line tool, ``logsource consume | head``) would
# otherwise die of a lost broker instead of getting its typed error.
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
#: frame parts written as they are (their len() is their size in bytes)
_PLAIN_PARTS = frozenset((bytes, bytearray))


def _recv_timeout(sock: socket.socket, seconds: float) -> bool:
    """Make blocking reads of ``sock`` give up after ``seconds`` (EAGAIN, or what came with
    MSG_WAITALL); False where SO_RCVTIMEO's layout is not known to be ``struct timeval`` of two longs."""
    if not sys.platform.startswith("linux"):
        return False
    usec = int(seconds * 1e6)
    try:
        sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", usec // 1_000_000, usec % 1_000_000)
        )
    except (OSError, struct.error):
        return False
    return True


class BrokerConnection:
    """One pipelined, thread-safe connection to a broker.

    A callback's type may offer ``answer_many(pairs)``, a static method: the I/O thread then hands it
    consecutive ``(callback, answer)`` pairs of that type at once (answered requests, in order; each
    pair as if ``callback(answer.response, None)``), and it must answer for every pair. An answer is
    what ``ClientConnection.receive_data`` gives: a ResponseReceived, or a ProduceAnswer whose fields
    can be read without building its response.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = None,
        request_timeout_ms: float = 30000,
        connect_timeout_ms: float = 10000,
        threaded: bool = True,
        max_in_flight: int = 0,
        security: ClientSecurity | None = None,
        stats: ClientMetrics | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.security = security or ClientSecurity()
        #: the client's metrics (latency and throttle of each answer) and when each pending request was written
        self._stats = stats
        self._sent_at: deque[float] = deque()
        self.address = f"{host}:{port}"
        self.request_timeout = request_timeout_ms / 1000.0
        self.threaded = threaded
        self._proto = ClientConnection(client_id)
        self._lock = threading.Lock()  # guards the protocol state, the socket writes and _pending
        self._pending: deque[tuple[int, Callback, float]] = deque()
        self._slots = InFlightWindow(max_in_flight) if max_in_flight > 0 else None
        self._closed = False
        self._error: BaseException | None = None
        #: monotonic time before which no request goes to this broker: its last throttle_time_ms (KIP-219)
        self.throttled_until = 0.0
        try:
            self._sock = socket.create_connection((host, port), timeout=connect_timeout_ms / 1000.0)
        except OSError as e:
            raise NetworkError(f"cannot connect to broker {self.address}: {e.strerror or e}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        #: TLS: reads and writes of the one SSL object take turns (OpenSSL's objects are not thread-safe);
        #: the socket is non-blocking so that neither holds the lock while it waits
        self._tls_lock: threading.Lock | None = None
        if self.security.tls:
            self._start_tls()
        self._reader: threading.Thread | None = None
        self._rbuf: bytearray | None = None  # receive buffer of the caller-reads mode, reused
        if threaded:
            # Blocking writes; the reader waits in select() so it can notice expired requests.
            self._sock.settimeout(None if self._tls_lock is None else 0.0)
            self._reader = ClientThread(
                self._read_loop if self._tls_lock is None else self._read_loop_tls,
                f"logsource-io-{self.address}",
            )
            self._reader.start()
        else:
            self._sock.settimeout(self.request_timeout)
        try:
            self._negotiate()
        except BaseException:
            self.close()
            raise

    def _negotiate(self) -> None:
        """ApiVersions first, as Kafka clients do: pick each API's version and learn the broker's features.

        A broker that does not know our ApiVersions version answers with a v0
        body, error 35 and its ranges; we retry at the highest version it has.
        """
        proto = self._proto
        version = proto.versions[ApiKey.API_VERSIONS]
        for _ in range(3):
            proto.versions[ApiKey.API_VERSIONS] = version
            w = Waiter()
            self.send(ApiVersionsRequest(arrow_body=True), w)
            if self.threaded:
                if not w.event.wait(self.request_timeout + 1.0):
                    self._fail(RequestTimedOut(f"no ApiVersions answer from broker {self.address}"))
            else:
                self._read_until(w, self.request_timeout + 1.0)
            if w.error is not None:
                raise w.error
            resp = w.response
            if resp.error_code == UnsupportedVersion.code:
                theirs = next((a for a in resp.api_keys if a.api_key == ApiKey.API_VERSIONS), None)
                if theirs is None or theirs.max_version >= version:
                    raise UnsupportedVersion(f"broker {self.address} refused ApiVersions v{version}")
                version = theirs.max_version
                continue
            raise_for_response(resp)
            proto.negotiated(resp)
            if self.security.sasl:
                sasl_exchange(self.security, self.request, self.address)
            return
        raise UnsupportedVersion(f"no ApiVersions version in common with broker {self.address}")

    def supports(self, api_key: int) -> bool:
        """True if the broker offers ``api_key`` at a version we speak (as ApiVersions told)."""
        return api_key in self._proto.versions

    def _start_tls(self) -> None:
        """The TLS handshake over the new socket (within the connect timeout); NetworkError says why not."""
        try:
            self._sock = self.security.wrap(self._sock, self.host)
        except ssl.SSLCertVerificationError as e:
            self._sock.close()
            raise NetworkError(
                f"TLS to broker {self.address}: its certificate is not trusted ({e.verify_message}); "
                "set ssl_cafile to the CA that signed it"
            ) from None
        except (ssl.SSLError, OSError) as e:
            self._sock.close()
            raise NetworkError(f"TLS handshake with broker {self.address} failed: {e}") from None
        except ConfigError:
            self._sock.close()
            raise
        self._tls_lock = threading.Lock()

    def _tls_send(self, data: bytes | bytearray | memoryview) -> None:
        """Write all of ``data`` through TLS on the non-blocking socket (threaded mode)."""
        view = memoryview(data).cast("B")
        assert self._tls_lock is not None
        while view.nbytes:
            with self._tls_lock:
                try:
                    n = self._sock.send(view)
                except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                    n = 0
            if n:
                view = view[n:]
            else:  # OpenSSL wants the same bytes again once the socket has room
                select.select([], [self._sock], [], _READ_POLL_S)

    @property
    def arrow_body(self) -> bool:
        """True if the broker stores and serves our Arrow-bodied batches (else: Kafka's layout only)."""
        return self._proto.arrow_body

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------ sending

    def send(self, request: Any, callback: Callback | None = None, *, timeout: float | None = None) -> None:
        """Send ``request``; ``callback(response, error)`` is called when its answer arrives.

        A Produce with ``acks=0`` gets no answer
        and its callback is called with ``(None, None)`` once written.
        """
        self.send_many([(request, callback)], timeout=timeout)

    def send_many(self, items: list[tuple[Any, Callback | None]], *, timeout: float | None = None) -> None:
        """Send several requests, as few system calls as the in-flight bound allows (pipelined).

        If sending fails, the callback of every request not yet written is
        called with the error before it is raised.
        """
        i = 0
        try:
            while i < len(items):
                k = 1
                if self._slots is not None:
                    k = self._slots.acquire(len(items) - i, self.request_timeout)
                    if k == 0:
                        raise RequestTimedOut(
                            f"no in-flight slot on {self.address} within the request timeout"
                        )
                self._send_group(items[i : i + k], timeout)
                i += k
        except LogSourceError as e:
            for _, cb in items[i:]:
                if cb is not None:
                    try:
                        cb(None, e)
                    except Exception:
                        log.exception("callback for an unsent request to %s failed", self.address)
            raise

    def _send_group(self, items: list[tuple[Any, Callback | None]], timeout: float | None) -> None:
        # the caller holds one in-flight slot per item
        no_reply: list[Callback] = []
        wait = self.throttled_until - time.monotonic()
        if wait > 0:  # the broker throttled us: send nothing until the delay passed, as Kafka's clients
            time.sleep(wait)
        with self._lock:
            if self._closed:
                self._release(len(items))
                raise self._error or NetworkError(f"connection to {self.address} is closed")
            now = time.monotonic()
            deadline = now + (self.request_timeout if timeout is None else timeout)
            pending = []
            try:
                cids, parts = self._proto.send_requests([request for request, _ in items])
            except BaseException:  # nothing of the group written (UnsupportedVersion too): its slots back
                self._release(len(items))
                raise
            for cid, (request, cb) in zip(cids, items, strict=True):
                if int(request.API_KEY) == 0 and request.acks == 0:
                    if cb is not None:
                        no_reply.append(cb)
                    self._release(1)
                else:
                    pending.append((cid, cb, deadline))
            self._pending.extend(pending)
            if self._stats is not None:
                self._sent_at.extend([now] * len(pending))
            try:
                self._write(parts)
            except OSError as e:
                err = NetworkError(f"connection to broker {self.address} failed while sending: {e}")
                failed = self._fail_locked(err)
            else:
                failed = None
        if failed is not None:
            self._release(len(failed))
            for _, cb, _ in failed:
                if cb is not None:
                    cb(None, err)
            return
        for cb in no_reply:
            cb(None, None)

    def _release(self, n: int) -> None:
        if self._slots is not None and n > 0:
            self._slots.release(n)

    def _write(self, parts: list[Any]) -> None:
        sock = self._sock
        if isinstance(sock, ssl.SSLSocket):  # no sendmsg through TLS: one buffer
            data = parts[0] if len(parts) == 1 else b"".join(parts)
            if self._tls_lock is not None and self.threaded:
                self._tls_send(data)
            else:
                sock.sendall(data)
            return
        if len(parts) <= _IOV_MAX and set(map(type, parts)) <= _PLAIN_PARTS:
            # The common case (many small pipelined requests): bytes and bytearrays, whose len()
            # is their size, in one sendmsg, with no Python-level pass over the parts.
            if len(parts) == 1:
                sock.sendall(parts[0], _NOSIGNAL)
                return
            sent = sock.sendmsg(parts, (), _NOSIGNAL)
            if sent == sum(map(len, parts)):
                return
            views = [memoryview(p) for p in parts]
            while sent >= views[0].nbytes:  # drop what the first call wrote
                sent -= views.pop(0).nbytes
            views[0] = views[0][sent:]
        else:
            for p in parts:
                if is_region(p):  # pragma: no cover - clients never send file regions
                    raise TypeError("a client request cannot carry a file region")
            if len(parts) == 1:
                sock.sendall(parts[0], _NOSIGNAL)
                return
            views = [memoryview(p).cast("B") for p in parts]
        # sendmsg writes the parts without joining them; finish partial writes.
        while views:
            sent = sock.sendmsg(views[:_IOV_MAX], (), _NOSIGNAL)
            while sent and views:
                n = views[0].nbytes
                if sent >= n:
                    sent -= n
                    views.pop(0)
                else:
                    views[0] = views[0][sent:]
                    sent = 0

    def request(self, request: Any, timeout: float | None = None) -> Any:
        """Send ``request`` and wait for its response (typed errors raised for top-level codes)."""
        return self.submit(request, timeout).result()

    def submit(self, request: Any, timeout: float | None = None) -> PendingResponse:
        """Send ``request`` now and return a handle whose ``result()`` waits for its response.

        The caller works in between (a reader decodes one fetch answer while the next is under
        way); on a connection without a reader thread the response is read in ``result()``.
        """
        w = Waiter()
        self.send(request, w, timeout=timeout)
        return PendingResponse(self, w, (self.request_timeout if timeout is None else timeout) + 1.0)

    def wait_response(self, w: Waiter, limit: float) -> Any:
        """Wait up to ``limit`` seconds for the response of the request ``w`` was sent with (what
        :meth:`PendingResponse.result` does); on a connection without a reader thread, read it here."""
        if self.threaded:
            if not w.event.wait(limit):
                self._fail(RequestTimedOut(f"no response from broker {self.address} within {limit:.1f} s"))
                w.event.wait(1.0)
        else:
            self._read_until(w, limit)
        if w.error is not None:
            raise w.error
        return raise_for_response(w.response)

    # ------------------------------------------------------------ receiving

    def _answered_stats(self, n: int, throttle_sum: int, throttle_max: int) -> None:
        """The metrics of the next ``n`` answered requests (their write times leave the queue); lock held."""
        now = time.monotonic()
        first, total = pop_times(self._sent_at, n)
        # the write times are in order: the first is the longest wait
        self._stats.add_responses(n, n * now - total, now - first, throttle_sum, throttle_max)

    def _dispatch(self, data: bytes | memoryview | None, filled: int = 0) -> None:
        """Decode received bytes: ``data``, or ``filled`` bytes received into the protocol's receive_buffer()."""
        with self._lock:
            if self._closed:  # a read that was under way when close() or a failure dropped the requests
                return
            answers = (
                self._proto.receive_data(data) if data is not None else self._proto.received_into(filled)
            )
            if not answers:
                return
            # one pass over the run: the requests matched in order, the throttles summed and the longest kept
            done, throttle_sum, throttle = match_answers(answers, self._pending)
            if self._stats is not None:
                self._answered_stats(len(done), throttle_sum, throttle)
            if throttle > 0:
                self.throttled_until = max(self.throttled_until, time.monotonic() + throttle / 1000.0)
        self._release(len(done))
        i, n = 0, len(done)
        while i < n:
            cb, r = done[i]
            i += 1
            if cb is None:
                continue
            kind = type(cb)
            many = getattr(kind, "answer_many", None)
            try:
                if many is None:
                    cb(r.response, None)
                else:  # consecutive answers for callbacks of one kind, in one call (the producer's batches)
                    j = i
                    while j < n and type(done[j][0]) is kind:
                        j += 1
                    start, i = i - 1, j  # moved on first: a failing bulk call answers none of them twice
                    many(done[start:j])
            except Exception:  # a user callback must not kill the I/O thread
                log.exception("callback for a response from %s failed", self.address)

    def _read_loop(self) -> None:
        sock = self._sock
        buf = bytearray(_RECV_SIZE)
        view = memoryview(buf)
        # recv() itself gives up every _READ_POLL_S (SO_RCVTIMEO) to look at deadlines and close(),
        # where a select() before each recv() cost a system call and a GIL hand-off per read
        timed = _recv_timeout(sock, _READ_POLL_S)
        while not self._closed:
            try:
                if not timed:
                    readable, _, _ = select.select([sock], [], [], _READ_POLL_S)
                    if not readable:
                        self._check_deadlines()
                        continue
                direct = self._proto.receive_buffer()
                if direct is None:
                    n = sock.recv_into(buf)
                else:  # the rest of a large response, straight into its frame, in one call if it comes in time
                    n = sock.recv_into(direct, 0, _WAITALL)
            except BlockingIOError:  # SO_RCVTIMEO: nothing came within _READ_POLL_S
                self._check_deadlines()
                continue
            except (OSError, ValueError) as e:
                if not self._closed:
                    self._fail(NetworkError(f"connection to broker {self.address} failed: {e}"))
                return
            if not self._received(view if direct is None else None, n):
                return
            if self._pending and self._pending[0][2] < time.monotonic():
                self._check_deadlines()

    def _read_loop_tls(self) -> None:
        """The reader thread over TLS: select, then read what OpenSSL has under the TLS lock."""
        sock = self._sock
        assert self._tls_lock is not None
        buf = bytearray(_RECV_SIZE)
        view = memoryview(buf)
        while not self._closed:
            try:
                if not sock.pending():
                    readable, _, _ = select.select([sock], [], [], _READ_POLL_S)
                    if not readable:
                        self._check_deadlines()
                        continue
                direct = self._proto.receive_buffer()
                with self._tls_lock:
                    n = sock.recv_into(buf if direct is None else direct)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                continue
            except (OSError, ValueError) as e:
                if not self._closed:
                    self._fail(NetworkError(f"connection to broker {self.address} failed: {e}"))
                return
            if not self._received(view if direct is None else None, n):
                return
            if self._pending and self._pending[0][2] < time.monotonic():
                self._check_deadlines()

    def _read_until(self, w: Waiter, limit: float) -> None:
        deadline = time.monotonic() + limit
        if self._rbuf is None:
            self._rbuf = bytearray(_FIRST_RECV)
        buf = self._rbuf
        view = memoryview(buf)
        while not w.event.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail(RequestTimedOut(f"no response from broker {self.address} within {limit:.1f} s"))
                return
            self._sock.settimeout(left)
            # the rest of a large response is received straight into its frame (no copy)
            direct = self._proto.receive_buffer()
            try:
                n = self._sock.recv_into(buf if direct is None else direct)
            except TimeoutError:
                continue
            except OSError as e:
                self._fail(NetworkError(f"connection to broker {self.address} failed: {e}"))
                return
            if not self._received(view if direct is None else None, n):
                return

    def _received(self, view: memoryview | None, n: int) -> bool:
        """Hand ``n`` received bytes (in ``view``, or in the protocol's receive_buffer() when None) to the
        decoder; False when the connection is finished."""
        if n == 0:
            self._fail(NetworkError(f"broker {self.address} closed the connection"))
            return False
        try:
            self._dispatch(None if view is None else view[:n], n)
        except ProtocolError as e:
            self._fail(NetworkError(f"bad response from broker {self.address}: {e}"))
            return False
        return True

    def _check_deadlines(self) -> None:
        if self._pending and self._pending[0][2] < time.monotonic():
            # Responses come in order, so one late answer blocks the rest: drop the connection.
            self._fail(RequestTimedOut(f"request to broker {self.address} timed out"))

    # ------------------------------------------------------------ failure / close

    def _fail_locked(self, err: BaseException) -> list[tuple[int, Callback, float]]:
        if self._closed:
            return []
        self._closed = True
        self._error = err
        pending = list(self._pending)
        self._pending.clear()
        self._sent_at.clear()
        try:
            # shutdown first: it wakes the reader out of recv()/select() at once; close() alone leaves it
            # there until its _READ_POLL_S timeout, and close() joins it (0.2 s per closed client)
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass
        return pending

    def _fail(self, err: BaseException) -> None:
        with self._lock:
            pending = self._fail_locked(err)
        self._release(len(pending))
        for _, cb, _ in pending:
            if cb is not None:
                try:
                    cb(None, err)
                except Exception:
                    log.exception("callback for a failed request to %s failed", self.address)

    def close(self) -> None:
        """Close the socket; requests still in flight fail with NetworkError."""
        self._fail(NetworkError(f"connection to {self.address} was closed by the client"))
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=2.0)
