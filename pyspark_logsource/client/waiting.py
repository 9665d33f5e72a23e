"""Waiting for one response: the callback a blocking request gives its connection, and the handle of
a request sent ahead (:meth:`~.connection.BrokerConnection.submit`)."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from ..errors import error_for_code


class _Connection(Protocol):
    """What a PendingResponse asks of its connection (:class:`~.connection.BrokerConnection`)."""

    def wait_response(self, w: Waiter, limit: float) -> Any:
        """Wait up to ``limit`` seconds for ``w``'s response; return it or raise its typed error."""


class Waiter:
    """Blocking wait for one response (used by ``request()``)."""

    __slots__ = ("event", "response", "error")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.response: Any = None
        self.error: BaseException | None = None

    def __call__(self, response: Any, error: BaseException | None) -> None:
        self.response, self.error = response, error
        self.event.set()


class PendingResponse:
    """A request sent by :meth:`BrokerConnection.submit`; ``result()`` waits for its response."""

    __slots__ = ("_conn", "_waiter", "_limit")

    def __init__(self, conn: _Connection, waiter: Waiter, limit: float) -> None:
        self._conn, self._waiter, self._limit = conn, waiter, limit

    def result(self) -> Any:
        """The response (typed errors raised as ``request()`` raises them); waits up to the request timeout."""
        return self._conn.wait_response(self._waiter, self._limit)


def raise_for_response(resp: Any) -> Any:
    """Raise the typed error of a response's top-level error code (where its API has one)."""
    code = getattr(resp, "error_code", 0)
    if code:
        raise error_for_code(code, getattr(resp, "error_message", None) or "")
    return resp
