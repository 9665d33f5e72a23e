"""The ``metrics.listener`` endpoint: ``GET /metrics`` in Prometheus' text format, on the broker's event loop.

It runs on the broker's loop so the collectors read state on the thread that owns it. It must never
slow the Kafka listeners down, so it is bounded: at most :data:`MAX_CONNECTIONS` at once (more are
closed as soon as accepted), a request head of at most :data:`MAX_HEAD_BYTES` that must arrive within
:data:`TIMEOUT_S`, one request per connection. ``GET /metrics`` (or HEAD) answers 200; another path 404;
another method on ``/metrics`` 405; a malformed head 400.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 32
MAX_HEAD_BYTES = 8192
TIMEOUT_S = 5.0

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


def answer(
    status: int, body: bytes, content_type: str = "text/plain; charset=utf-8", head: bool = False
) -> bytes:
    """A whole HTTP/1.1 response that closes the connection."""
    lines = [
        f"HTTP/1.1 {status} {_REASONS[status]}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    if status == 405:
        lines.append("Allow: GET, HEAD")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (b"" if head else body)


def route(head: bytes) -> tuple[int, str]:
    """(status, method) for a request head (its request line decides)."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return 400, ""
    method, target = parts[0], parts[1].split("?", 1)[0]
    if target != "/metrics":
        return 404, method
    if method not in ("GET", "HEAD"):
        return 405, method
    return 200, method


class MetricsServer:
    """Serves ``registry`` at ``http://host:port/metrics`` on the running loop."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host, self.port = host, port
        self.active = 0
        #: connections closed at once because :data:`MAX_CONNECTIONS` were open
        self.refused = 0
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(
            self._on_connect, self.host, self.port, limit=MAX_HEAD_BYTES
        )
        self.host, self.port = self._server.sockets[0].getsockname()[:2]
        log.info("metrics endpoint on http://%s:%d/metrics", self.host, self.port)
        return self.host, self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.active >= MAX_CONNECTIONS:
            self.refused += 1
            writer.transport.abort()
            return
        self.active += 1
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT_S)
            status, method = route(head)
            if status == 200:
                out = answer(200, generate_latest(self.registry), CONTENT_TYPE_LATEST, head=method == "HEAD")
            else:
                out = answer(status, f"{status} {_REASONS[status]}: only GET /metrics is served\n".encode())
            writer.write(out)
            await asyncio.wait_for(writer.drain(), TIMEOUT_S)
        except asyncio.LimitOverrunError:
            writer.write(answer(400, b"request head too large\n"))
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass  # a slow, idle or vanished scraper: closed below
        except Exception:
            log.exception("metrics request failed")
        finally:
            self.active -= 1
            if writer.transport.get_write_buffer_size():
                writer.transport.abort()  # a scraper that does not read its answer
            else:
                writer.close()
