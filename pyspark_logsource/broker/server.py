"""The broker: an asyncio network layer over the log store, speaking the sans-IO protocol.

One process, one event loop. Each connection reads bytes, feeds them to a
:class:`~pyspark_logsource.protocol.ServerConnection` and handles the decoded
requests in order (Kafka's per-connection ordering), writing each response
before the next request of that connection is handled — except that in a
cluster an ``acks=all`` produce's answer, which waits for the replicas, is
parked (:mod:`.pipeline`) while the connection's next produces are appended;
answers still leave in request order. Produce appends the
received batches as they are (the log validates and stamps them in place);
consecutive produces of one read to one partition are appended together and
answered one by one (:func:`.pipeline.produce_run_length`);
Fetch answers with the log's file regions, which are written with
``loop.sendfile`` (``os.sendfile``, zero copy) — except small ones, see
:data:`SENDFILE_MIN_BYTES`.

Run it with ``python -m pyspark_logsource.broker --config conf/server.properties
[--override k=v ...]`` or :func:`main`. It prints ``listening on HOST:PORT`` on
stdout once the socket is bound, so a parent process can read the port.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import ssl
from time import perf_counter
from types import CoroutineType
from typing import Any

from ..errors import LogSourceError
from ..faults import fault_point
from ..protocol import ApiKey, ProtocolError, RequestReceived, ServerConnection, is_region
from .builder import open_state
from .cluster import replicas
from .cluster.member import ClusterMember
from .config import BrokerConfig
from .error_responses import error_fields, error_response
from .handlers import Handlers
from .log import LogManager
from .metrics import BrokerMetrics, MetricsServer, build_endpoint
from .pipeline import OrderedResponses, produce_run_length
from .quotas.manager import QuotaManager
from .quotas.store import ZkQuotaStore
from .quotas.throttle import ConnectionQuotas
from .security.acls.authorization import Authorization
from .security.connection import (
    OWN_TLS_HANDSHAKE,
    TLS_HANDSHAKE_S,
    UntilTls,
    authenticate,
    open_session,
    start_tls,
)
from .security.credential_store import CredentialStore, FileCredentialStore, ZkCredentialStore
from .security.handlers import SecurityHandlers
from .security.listeners import Listener
from .security.tls import server_context
from .session import Session
from .state import BrokerState

log = logging.getLogger("pyspark_logsource.broker")

#: Regions smaller than this are read with one ``pread`` and written with the
#: response header in the same ``write``: for a few KB the syscalls and the
#: write-buffer drain that ``sendfile`` needs cost more than the copy.
SENDFILE_MIN_BYTES = 64 * 1024
_READ_CHUNK = 1 << 18
#: what a connection on a SASL listener may send before it authenticated (Kafka's rule)


class Broker:
    """The network layer and lifecycle of one broker over its :class:`~.state.BrokerState`."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.state = BrokerState(config)
        self.handlers = Handlers(self.state)
        #: users' SCRAM credentials (opened by start(): the data dir, or ZooKeeper in cluster mode)
        self.credentials: CredentialStore | None = None
        self.handlers.by_key.update(
            SecurityHandlers(lambda: self.credentials, config.security.sasl_mechanisms).by_key()
        )
        #: ACLs (authorizer.class.name): the ACL APIs, and the checks in front of every handler
        self.acls = Authorization(config.properties, self.state.topics)
        self.handlers.by_key.update(self.acls.handlers().by_key())
        self.acls.install(self.handlers)
        self.host, self.port = config.host, config.port
        #: the measured client rates and their throttles (the quotas themselves: state.quotas)
        self.quotas = QuotaManager.for_broker(self.state.quotas, config.properties)
        self._server: asyncio.base_events.Server | None = None
        self._servers: list[asyncio.base_events.Server] = []
        #: security protocol (SSL, SASL_SSL) -> its TLS context
        self._tls: dict[str, ssl.SSLContext] = {}
        self._delay_s = config.security.failed_authentication_delay_ms / 1000
        #: listener name -> bound (host, port)
        self.listener_addresses: dict[str, tuple[str, int]] = {}
        self._conns: set[asyncio.Task] = set()
        #: open connections per listener name (the metrics' connection_count)
        self._listener_conns: dict[str, int] = {}
        self._stopped: asyncio.Event | None = None
        #: what a running :meth:`stop` is doing now (None when it is not running)
        self.shutdown_step: str | None = None
        #: the errors the steps of :meth:`stop` raised (each logged; the others ran anyway)
        self.shutdown_errors: list[Exception] = []
        #: the request counters (None: no metrics.listener, nothing counted) and their endpoint
        self.metrics = BrokerMetrics() if config.metrics_listener else None
        if self.metrics is not None:  # the produce path counts what it appends into them
            self.state.topic_stats = self.metrics.topic_stats
        self.metrics_http: MetricsServer | None = None

    @property
    def logs(self) -> LogManager | None:
        """The broker's log manager (None when stopped)."""
        return self.state.logs

    @property
    def cluster_id(self) -> str | None:
        return self.state.cluster_id

    # ------------------------------------------------------------ lifecycle

    @property
    def advertised(self) -> tuple[str, int]:
        """Host and port clients should connect to (on the first listener)."""
        host = self.config.advertised_host or self.host
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        return host, self.config.advertised_port or self.port

    def advertised_on(self, name: str) -> tuple[str, int]:
        """Host and port advertised for listener ``name`` (``advertised.listeners``, else the bound address)."""
        ls = self.config.listeners
        host, port = self.listener_addresses[name]
        if ls is not None and name in ls.advertised:
            host, port = ls.advertised[name][0], ls.advertised[name][1] or port
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        return host, port

    async def start(self) -> tuple[str, int]:
        """Open the logs (recovering them), bind the listener; return the bound (host, port)."""
        c = self.config
        log.info("starting broker %d with config:\n%s", c.broker_id, c.summary())
        self._stopped = asyncio.Event()
        open_state(self.state)  # locks the log dirs, recovers the logs, builds the coordinators' state
        self.handlers.txn.start()  # completes transaction decisions a crash interrupted; starts its timeouts
        try:
            # bound now (the port is known for the registration), served once the broker is ready: a broker
            # still joining its cluster would answer Metadata with no topics (as Kafka, which starts
            # processing requests at the end of its startup); clients meanwhile find the port refused
            listeners = (
                c.listeners.listeners
                if c.listeners is not None
                else (Listener("PLAINTEXT", "PLAINTEXT", c.host, c.port),)
            )
            # SSL listeners ask for client certificates as ssl.client.auth says; SASL_SSL listeners
            # authenticate with SASL and do not (Kafka's rule since KIP-684)
            self._tls = {
                proto: server_context(c.security, None if proto == "SSL" else "none")
                for proto in {x.protocol for x in listeners if x.tls}
            }
            for lst in listeners:
                self._listener_conns[lst.name] = 0
                server = await self._listen(lst)
                self._servers.append(server)
                self.listener_addresses[lst.name] = server.sockets[0].getsockname()[:2]
            self.credentials = FileCredentialStore(c.log_dirs[0])
            if self.metrics is not None:
                self.metrics_http = build_endpoint(
                    self.state,
                    self.metrics,
                    lambda: dict(self._listener_conns),
                    self.quotas,
                    self.handlers.local_read.grants.snapshot,
                )
                await self.metrics_http.start()
            if not c.cluster_mode:
                self.acls.open_file(c.log_dirs[0])
        except BaseException:
            self._close_listener()
            self.state.close()
            raise
        self._server = self._servers[0]
        self.host, self.port = self.listener_addresses[listeners[0].name]
        self.state.endpoints = {lst.name: self.advertised_on(lst.name) for lst in listeners}
        inter = c.listeners.inter_broker if c.listeners is not None else listeners[0].name
        self.state.advertised = self.advertised if inter == listeners[0].name else self.advertised_on(inter)
        if c.cluster_mode:
            try:
                await self._join_cluster()
            except BaseException:
                self._close_listener()
                await self._leave_cluster()
                self.state.close()
                raise
        for server in self._servers:
            await server.start_serving()
        log.info(
            "broker %d (cluster %s) listening on %s with %d topics",
            c.broker_id,
            self.state.cluster_id,
            ", ".join(
                f"{n}://{h}:{p} ({self._protocol(n)})" for n, (h, p) in self.listener_addresses.items()
            ),
            len(self.state.logs.topics()),
        )
        return self.host, self.port

    async def _listen(self, lst: Listener) -> asyncio.base_events.Server:
        """Bind one listener (not serving yet)."""
        on_connect = functools.partial(self._on_connect, lst)
        if lst.tls and OWN_TLS_HANDSHAKE:
            loop = asyncio.get_running_loop()

            def protocol() -> asyncio.StreamReaderProtocol:
                return UntilTls(asyncio.StreamReader(limit=_READ_CHUNK, loop=loop), on_connect, loop=loop)

            return await loop.create_server(protocol, lst.host, lst.port, start_serving=False)
        return await asyncio.start_server(
            on_connect,
            lst.host,
            lst.port,
            limit=_READ_CHUNK,
            start_serving=False,
            ssl=self._tls.get(lst.protocol),
            ssl_handshake_timeout=TLS_HANDSHAKE_S if lst.tls else None,
        )

    async def _join_cluster(self) -> None:
        """Cluster mode: connect to ZooKeeper, register, join the controller election; roles follow by watches."""
        loop = asyncio.get_running_loop()
        member = ClusterMember(self.state, loop)
        self.state.cluster = member
        # before the member starts: its watches deliver the roles, which the replica manager acts on
        self.state.replication = replicas.build(self.state, member.zk, loop)
        await loop.run_in_executor(None, member.start, *self.state.advertised)
        # credentials live in ZooKeeper in a cluster (/config/users/<user>), watched by every broker
        self.credentials = await loop.run_in_executor(None, ZkCredentialStore, member.zk)
        # ACLs too, under Kafka's paths (/kafka-acl, /kafka-acl-extended), applied on change notifications
        await loop.run_in_executor(None, self.acls.open_zk, member.zk)
        # client quotas: /config/users and /config/clients, applied on change notifications
        self.state.quota_store = ZkQuotaStore(member.zk, self.state.quotas)
        await loop.run_in_executor(None, self.state.quota_store.start)

    async def _leave_cluster(self) -> None:
        """Resign as controller and close the ZooKeeper session: the controller moves this broker's leaderships."""
        member = self.state.cluster
        if member is not None:
            try:
                await asyncio.get_running_loop().run_in_executor(None, member.stop)
            except Exception:  # never keep the logs from closing cleanly
                log.exception("broker %d could not leave the cluster cleanly", self.config.broker_id)

    async def stop(self) -> None:
        """Stop accepting, close connections, leave the cluster, flush and close the logs, release the log dirs.

        Every step runs even if an earlier one raised: the error is logged and kept in :attr:`shutdown_errors`,
        and :meth:`wait_stopped` returns in any case."""
        try:
            await self._shutdown_step("listener", "closing the listener", self._close_listener)
            await self._shutdown_step(
                "connections", f"closing {len(self._conns)} client connection(s)", self._close_connections
            )
            await self._shutdown_step("replication", "stopping the replica fetchers", self._close_replication)
            await self._shutdown_step(
                "cluster", "leaving the cluster (ZooKeeper session)", self._leave_cluster
            )
            await self._shutdown_step("logs", "flushing and closing the logs", self.state.close)
        finally:
            self.shutdown_step = None
            if self._stopped is not None:
                self._stopped.set()

    async def _shutdown_step(self, name: str, doing: str, step: Any) -> None:
        self.shutdown_step = doing
        try:
            fault_point(f"shutdown.{name}")  # crash tests: the step raises, or hangs
            result = step()
            if asyncio.iscoroutine(result):
                await result
        except Exception as e:
            self.shutdown_errors.append(e)
            # BrokerState.close logged each of its failures with its traceback already
            log.error(
                "broker %d: shutdown step %r failed (%s: %s); shutdown goes on",
                self.config.broker_id,
                name,
                type(e).__name__,
                e,
                exc_info=e if name != "logs" else None,
            )

    def _close_listener(self) -> None:
        for server in self._servers:
            server.close()
        self.handlers.local_read.close()
        if self.metrics_http is not None:
            self.metrics_http.close()

    def _protocol(self, name: str) -> str:
        ls = self.config.listeners
        return ls.by_name(name).protocol if ls is not None else "PLAINTEXT"

    async def _close_connections(self) -> None:
        for t in list(self._conns):
            t.cancel()
        if self._conns:
            await asyncio.gather(*self._conns, return_exceptions=True)

    def _close_replication(self) -> None:
        if self.state.replication is not None:
            self.state.replication.close()  # fetchers and ISR checks stop before the session goes

    async def wait_stopped(self) -> None:
        """Wait until :meth:`stop` finished."""
        assert self._stopped is not None
        await self._stopped.wait()

    # ------------------------------------------------------------ connections

    async def _on_connect(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        self._conns.add(task)
        self._listener_conns[listener.name] = self._listener_conns.get(listener.name, 0) + 1
        try:
            if (
                listener.tls
                and OWN_TLS_HANDSHAKE
                and not await start_tls(writer, self._tls[listener.protocol], listener)
            ):
                return
            await self._serve(reader, writer, listener)
        finally:
            self._conns.discard(task)
            self._listener_conns[listener.name] -= 1

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener: Listener | None = None
    ) -> None:
        peer = writer.get_extra_info("peername")
        peer_s = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        sock = writer.get_extra_info("socket")
        c = self.config
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if c.socket_send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, c.socket_send_buffer_bytes)
            if c.socket_receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, c.socket_receive_buffer_bytes)
        conn = ServerConnection(c.socket_request_max_bytes)
        session = Session(peer_s)
        auth = None
        if listener is not None:  # the listener's principal (mTLS), or a SASL exchange to come
            assert self.credentials is not None
            auth = open_session(session, listener, writer, self.credentials, c.security.sasl_mechanisms)
        # acks=all produces are answered once replicated; meanwhile the next requests are handled
        parked = OrderedResponses(lambda header, result: self._write_response(writer, header, result))
        quota = ConnectionQuotas(self.quotas)  # KIP-219: throttled answers at once, then the connection muted
        log.debug("connection from %s", peer_s)
        # LOGSOURCE_LOG_LEVEL=DEBUG: each request and the bytes a read's answers took, to tell a client's
        # "request timed out" (the broker never answered) from answers lost in the client
        trace = log.isEnabledFor(logging.DEBUG)
        try:
            while True:
                if quota.muted_until:
                    await quota.mute()
                data = await reader.read(_READ_CHUNK)
                t_read = perf_counter()
                if not data:
                    if conn.frames.in_frame:
                        log.info(
                            "client %s disconnected mid-request; dropped %d unprocessed bytes",
                            peer_s,
                            conn.frames.buffered,
                        )
                    return
                try:
                    frames = conn.frames.feed(data)
                except ProtocolError as e:
                    log.warning("closing connection from %s: %s", peer_s, e)
                    return
                # responses to one read's requests go out in one write (fewer syscalls), except
                # before a fetch parks (earlier answers must not wait) and around a sendfile;
                # requests before a malformed one are answered, then the connection closes
                out = bytearray()
                evs, bad = ServerConnection.decode_frames(frames)
                if trace:
                    for ev in evs:
                        h = ev.header
                        log.debug(
                            "%s: request key %d v%d corr %d",
                            peer_s,
                            h.api_key,
                            h.api_version,
                            h.correlation_id,
                        )
                i = 0
                while i < len(evs):
                    ev = evs[i]
                    i += 1
                    if not isinstance(ev, RequestReceived):
                        log.warning(
                            "client %s (%s) sent unsupported api key %d version %d",
                            peer_s,
                            ev.header.client_id,
                            ev.header.api_key,
                            ev.header.api_version,
                        )
                        if not ev.answerable:
                            # Kafka closes the connection: the body's layout is unknown
                            bad = ProtocolError(
                                f"unsupported api key {ev.header.api_key} version {ev.header.api_version}"
                            )
                            break
                        out += b"".join(conn.unsupported_parts(ev.header))
                        continue
                    if auth is not None and not auth.authenticated:
                        # before authentication: ApiVersions and the SASL exchange only
                        out, close = await authenticate(
                            auth, ev, session, writer, out, self._delay_s, lambda e: self._call(e, session)
                        )
                        if close:
                            return
                        continue
                    n = produce_run_length(evs, i - 1)
                    if n > 1:  # pipelined produces to one partition: appended together, answered one by one
                        run = evs[i - 1 : i - 1 + n]
                        i += n - 1
                        t0 = perf_counter()
                        results = quota.call_run(run, session, self._call_runs)
                        if self.metrics is not None:
                            self._measure_run(run, t_read, t0)
                        if parked.busy:
                            await parked.flush()
                        out = ServerConnection.append_responses(out, run, results)  # None: acks=0
                        continue
                    if parked.busy and ev.header.api_key != ApiKey.PRODUCE:
                        await parked.flush()  # only produces overtake parked answers: others see their effect
                    t0 = perf_counter()
                    result = quota.call(ev, session, self._call) if quota.on else self._call(ev, session)
                    if self.metrics is not None:
                        result = self._measure(ev, t_read, t0, result)
                    if asyncio.iscoroutine(result) and ev.header.api_key == ApiKey.PRODUCE:
                        if out:  # appended already; its answer waits for the ISR, behind earlier answers
                            writer.write(out)
                            out = bytearray()
                        await parked.park(ev.header, self._await(result, ev, session))
                        continue
                    if parked.busy:
                        await parked.flush()  # a produce answered at once (acks=1, an error) waits its turn
                    if asyncio.iscoroutine(result):
                        if out:
                            writer.write(out)
                            out = bytearray()
                        result = await self._await(result, ev, session)
                    if result is not None:  # None: acks=0
                        parts = ServerConnection.response_parts(ev.header, result)
                        if len(parts) == 1 and not is_region(parts[0]):
                            out += parts[0]  # the common small response: no coroutine per request
                        else:
                            out = await self._send(writer, parts, out)
                if out:
                    writer.write(out)
                    if trace:
                        log.debug("%s: answered with %d bytes", peer_s, len(out))
                if quota.on:
                    quota.cycle_done(t_read)  # the decoding and encoding count for the request quota too
                bad = bad or conn.frames.error
                if bad is not None:
                    log.warning("closing connection from %s: %s", peer_s, bad)
                    await parked.flush()
                    await writer.drain()
                    return
                if writer.transport.get_write_buffer_size() > (1 << 20):
                    await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            log.debug("connection from %s lost: %s", peer_s, e)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection from %s failed; closing it", peer_s)
        finally:
            parked.cancel()
            writer.close()

    def _error_response(self, ev: RequestReceived, session: Session, e: Exception) -> Any:
        h = ev.header
        if isinstance(e, LogSourceError):
            log.info("request %d from %s (client %s) failed: %s", h.api_key, session.peer, h.client_id, e)
        else:  # the traceback stays here: the client gets UNKNOWN_SERVER_ERROR with a fixed message
            log.error(
                "request %d from %s (client %s) hit a broker error",
                h.api_key,
                session.peer,
                h.client_id,
                exc_info=e,
            )
        if self.metrics is not None:
            self.metrics.error(self.metrics.request_label(h.api_key, ev.request), type(e).__name__)
        return error_response(h.api_key, ev.request, *error_fields(e))

    def _measure(self, ev: RequestReceived, t_read: float, t0: float, result: Any) -> Any:
        """Count a request answered now; a parked one's coroutine is wrapped to count it when answered."""
        m, t1 = self.metrics, perf_counter()
        key = ev.header.api_key
        if key == 0:  # Produce (an int compare: this runs per request)
            label = "Produce"
        else:
            label = m.request_label(key, ev.request)
        if type(result) is not CoroutineType:  # asyncio.iscoroutine costs ten times more
            m.record(label, t0 - t_read, t1 - t0, 0.0)
            if key == 1:  # Fetch
                m.fetched(label, result)
            return result

        async def answered() -> Any:
            r = await result
            m.record(label, t0 - t_read, t1 - t0, perf_counter() - t1)
            if key == 1 and r is not None:
                m.fetched(label, r)
            return r

        return answered()

    def _measure_run(self, run: list[RequestReceived], t_read: float, t0: float) -> None:
        """Count a run of produces appended together (the local time shared out)."""
        m = self.metrics
        local = (perf_counter() - t0) / len(run)
        m.record_run("Produce", t0 - t_read, local, len(run))  # the messages: counted by the handler

    def _call(self, ev: RequestReceived, session: Session) -> Any:
        """The handler's response, or its coroutine (Fetch); errors become error responses."""
        try:
            session.client_id = ev.header.client_id
            return self.handlers.by_key[ev.header.api_key](ev.request, session)
        except Exception as e:
            return self._error_response(ev, session, e)

    def _call_runs(self, run: list[RequestReceived], session: Session) -> list[Any]:
        """The responses to a run of produces that :func:`.pipeline.produce_run_length` grouped."""
        try:
            session.client_id = run[0].header.client_id
            return self.handlers.produce_runs([ev.request for ev in run], session)
        except Exception as e:
            return [self._error_response(ev, session, e) for ev in run]

    async def _await(self, coro: Any, ev: RequestReceived, session: Session) -> Any:
        try:
            return await coro
        except Exception as e:
            return self._error_response(ev, session, e)

    async def _write_response(self, writer: asyncio.StreamWriter, header: Any, result: Any) -> None:
        """Send one response now (a parked one whose turn came)."""
        if result is not None:
            rest = await self._send(writer, ServerConnection.response_parts(header, result), bytearray())
            if rest:
                writer.write(rest)

    async def _send(self, writer: asyncio.StreamWriter, parts: list[Any], pending: bytearray) -> bytearray:
        """Queue a response: bytes join ``pending``; big regions go out with sendfile. Returns what is pending."""
        for p in parts:
            if not is_region(p):
                pending += p
                continue
            if p.length < SENDFILE_MIN_BYTES or writer.get_extra_info("ssl_object") is not None:
                # small, or a TLS connection: the bytes must go through TLS, so no sendfile
                data = os.pread(p.file.fileno(), p.length, p.position)
                if len(data) != p.length:
                    raise ConnectionError(
                        f"log region shrank while being sent ({len(data)} of {p.length} bytes)"
                    )
                pending += data
                continue
            transport = writer.transport
            if pending:
                transport.write(pending)  # sent at once when nothing is queued before it
                pending = bytearray()
            sent = 0
            if transport.get_write_buffer_size() == 0 and not transport.is_closing():
                # nothing queued: sendfile straight into the socket. loop.sendfile costs two turns
                # of the event loop and four epoll_ctl calls per region even when the socket takes it all
                sent = _sendfile_now(transport.get_extra_info("socket").fileno(), p)
            if sent < p.length:  # the socket is full: let the loop wait for room
                await writer.drain()
                # the loop is looked up only here: get_running_loop() costs a getpid() system call
                loop = asyncio.get_running_loop()
                rest = await loop.sendfile(transport, p.file, p.position + sent, p.length - sent)
                if rest != p.length - sent:
                    raise ConnectionError(f"sendfile sent {sent + rest} of {p.length} bytes")
        return pending


def _sendfile_now(sock_fd: int, region: Any) -> int:
    """Send as much of ``region`` as the (non-blocking) socket takes now; return the bytes sent."""
    sent = 0
    fd = region.file.fileno()
    while sent < region.length:
        try:
            n = os.sendfile(sock_fd, fd, region.position + sent, region.length - sent)
        except (BlockingIOError, InterruptedError):
            break
        if n == 0:
            raise ConnectionError(f"log region shrank while being sent ({sent} of {region.length} bytes)")
        sent += n
    return sent


# ---------------------------------------------------------------- entry point


__all__ = ["Broker", "SENDFILE_MIN_BYTES"]
