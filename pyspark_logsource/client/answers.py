"""The answer callback of a Produce request of one batch (the producer's request at batch size 1).

:class:`OneBatchAnswer` is what the :class:`~.sender.Sender` hands the connection with such a
request: one object while the request is in flight, where ``partial(bound method, batch)``
holds three (the partial, the bound method, its argument tuple). The connection's I/O thread
calls it with the answer, or hands consecutive answers to :meth:`OneBatchAnswer.answer_many`
at once. An appended answer completes the batch here; any other (an error code, a lost
connection, an answer about another partition) goes to the sender's ``on_response``, which
retries or fails it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .accumulator import ProducerBatch

log = logging.getLogger(__package__ + ".producer")


class Sender(Protocol):
    """What an answer asks of the producer's sender (:class:`~.sender.Sender`)."""

    def finish(self, b: ProducerBatch, result: Any = None, error: BaseException | None = None) -> None:
        """Complete a batch."""

    def finish_ok(self, done: list[tuple[ProducerBatch, tuple]]) -> None:
        """Complete several appended batches ``(batch, result)``."""

    def on_response(self, runs: dict[tuple[str, int], list[ProducerBatch]], resp: Any, error: Any) -> None:
        """Resolve, retry or fail the runs of one Produce request from its answer."""


class OneBatchAnswer:
    """The answer callback of a request of one batch (see the module docstring)."""

    __slots__ = ("sender", "batch")

    def __init__(self, sender: Sender, batch: ProducerBatch) -> None:
        self.sender = sender
        self.batch = batch

    def __call__(self, resp: Any, error: BaseException | None) -> None:
        b = self.batch
        if error is None and resp is not None:
            parts = resp.partitions
            if len(parts) == 1:
                pr = parts[0]
                if not pr.error_code and pr.partition == b.partition and pr.topic == b.topic:
                    off = pr.base_offset
                    self.sender.finish(b, (b.partition, off, off + b.record_count - 1))
                    return
        self.sender.on_response({b.tp: [b]}, resp, error)

    @staticmethod
    def answer_many(pairs: list) -> None:
        """Answers of several such requests, ``(answer, response)`` in order (BrokerConnection's bulk
        callback): the appended ones completed together, each other one as ``answer(response, None)``."""
        sender = pairs[0][0].sender
        if all(cb.sender is sender for cb, _ in pairs):
            try:
                _answer_all(sender, pairs)
                return
            except Exception:
                log.exception("producer answer handling failed; completing batch by batch")
        for cb, resp in pairs:
            if not cb.batch.done():
                cb(resp, None)


def _answer_all(sender: Sender, pairs: list) -> None:
    ok: list[tuple[ProducerBatch, tuple]] = []
    for cb, resp in pairs:
        b = cb.batch
        parts = resp.partitions if resp is not None else None
        if parts is not None and len(parts) == 1:
            pr = parts[0]
            if not pr.error_code and pr.partition == b.partition and pr.topic == b.topic:
                off = pr.base_offset
                ok.append((b, (b.partition, off, off + b.record_count - 1)))
                continue
        if ok:
            sender.finish_ok(ok)
            ok = []
        cb(resp, None)
    if ok:
        sender.finish_ok(ok)
