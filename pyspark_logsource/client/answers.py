"""The answer callbacks of the producer's Produce requests.

:class:`RunsAnswer` resolves, retries or fails the runs of batches of one request from its
answer. :class:`OneBatchAnswer` is what the :class:`~.sender.Sender` hands the connection with a
request of one batch (the producer's request at batch size 1): one object while the request is in
flight, where ``partial(bound method, batch)`` holds three (the partial, the bound method, its
argument tuple). The connection's I/O thread calls it with the answer, or hands consecutive
answers to :meth:`OneBatchAnswer.answer_many` at once. An appended answer completes the batch
there; any other (an error code, a lost connection, an answer about another partition) goes
through a :class:`RunsAnswer`, which has the sender retry or fail it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import DuplicateSequence, LogSourceError, NetworkError, error_for_code
from ..format._speedups import load_extension
from ..protocol.connection import ANSWER_TYPES

if TYPE_CHECKING:
    from .accumulator import ProducerBatch

log = logging.getLogger(__package__ + ".producer")


class Sender(Protocol):
    """What an answer asks of the producer's sender (:class:`~.sender.Sender`)."""

    def finish(self, b: ProducerBatch, result: Any = None, error: BaseException | None = None) -> None:
        """Complete a batch."""

    def finish_ok(self, done: list[tuple[ProducerBatch, tuple]]) -> None:
        """Complete several appended batches ``(batch, result)``."""

    def fail_or_retry(self, b: ProducerBatch, error: BaseException) -> None:
        """Put a failed batch back for a retry, or fail it."""


class RunsAnswer:
    """The answer callback of a Produce request of runs of batches ``{(topic, partition): [batch, ...]}``:
    resolves, retries or fails each run from the answer (I/O thread)."""

    __slots__ = ("sender", "runs")

    def __init__(self, sender: Sender, runs: dict[tuple[str, int], list[ProducerBatch]]) -> None:
        self.sender = sender
        self.runs = runs

    def _fail_run(self, run: list[ProducerBatch], err: BaseException) -> None:
        for b in run:
            self.sender.fail_or_retry(b, err)

    def __call__(self, resp: Any, error: BaseException | None) -> None:
        runs, finish = self.runs, self.sender.finish
        if error is None and resp is not None and len(runs) == 1:
            # the common answer: one partition, appended (no set of seen partitions to build)
            parts = resp.partitions
            if len(parts) == 1:
                pr = parts[0]
                run = runs.get((pr.topic, pr.partition))
                if run is not None and not pr.error_code:
                    off = pr.base_offset
                    for b in run:
                        finish(b, (b.partition, off, off + b.record_count - 1))
                        off += b.record_count
                    return
        if error is not None:
            for run in runs.values():
                self._fail_run(run, error)
            return
        if resp is None:  # acks=0: written, no answer
            for run in runs.values():
                for b in run:
                    finish(b, (b.partition, -1, -1))
            return
        seen = set()
        for pr in resp.partitions:
            tp = (pr.topic, pr.partition)
            run = runs.get(tp)
            if run is None:
                continue
            seen.add(tp)
            if pr.error_code:
                err = error_for_code(pr.error_code, pr.error_message or "")
                if isinstance(err, DuplicateSequence) and len(run) > 1:
                    # part of the run was appended before (a retry): resend each batch alone
                    for b in run:
                        b.solo = True
                    err = ResendAlone(str(err))
                self._fail_run(run, err)
                continue
            # offsets are consecutive: each batch of the run follows the previous one
            off = pr.base_offset
            for b in run:
                finish(b, (b.partition, off, off + b.record_count - 1))
                off += b.record_count
        for tp, run in runs.items():
            if tp not in seen:
                self._fail_run(run, NetworkError(f"broker did not answer for partition {tp[0]}-{tp[1]}"))


class ResendAlone(LogSourceError):
    """Part of a run of batches was a duplicate: resend each batch alone (retriable; never surfaces)."""

    retriable = True


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
        RunsAnswer(self.sender, {b.tp: [b]})(resp, error)

    @staticmethod
    def answer_many(pairs: list) -> None:
        """Answers of several such requests, ``(callback, answer)`` in order (BrokerConnection's bulk
        callback; ``answer`` a ResponseReceived or a ProduceAnswer): the appended ones completed
        together, each other one as ``callback(answer.response, None)``."""
        try:
            _answer_all(pairs)
            return
        except Exception:
            log.exception("producer answer handling failed; completing batch by batch")
        for cb, a in pairs:
            if not cb.batch.done():
                cb(a.response, None)


def _answer_all(pairs: list) -> None:
    i, n = 0, len(pairs)
    while i < n:
        sender = pairs[i][0].sender
        ok, i = split_appended(pairs, i, sender)
        if ok:
            sender.finish_ok(ok)
        if i < n:  # not appended (or another sender's): the answer's own way
            cb, a = pairs[i]
            i += 1
            cb(a.response, None)


def split_appended_py(pairs: list, i: int, sender: Any) -> tuple[list[tuple[ProducerBatch, tuple]], int]:
    """From ``pairs[i]`` on, the run of answers that appended their batch, as ``(batch, (partition,
    base offset, last offset))``, and the index of the first pair after the run: one that did not
    (an error code, another partition, not a one-partition Produce answer) or whose callback's sender
    is not ``sender``. The reference of ``_cio.split_appended``."""
    ok: list[tuple[ProducerBatch, tuple]] = []
    n = len(pairs)
    while i < n:
        cb, a = pairs[i]
        if cb.sender is not sender:
            break
        b = cb.batch
        # the compact answer's fields read as they are: no ProduceResponse built for an appended batch
        pr = a if type(a) in ANSWER_TYPES else _one_partition(a.response)
        if pr is None or pr.error_code or pr.partition != b.partition or pr.topic != b.topic:
            break
        off = pr.base_offset
        ok.append((b, (b.partition, off, off + b.record_count - 1)))
        i += 1
    return ok, i


def run_sizes_py(done: list[tuple[ProducerBatch, tuple]]) -> tuple[int, int]:
    """The records and bytes of appended batches ``(batch, result)`` for the producer's metrics (a batch's
    encoded size once it has one). The reference of ``_cio.run_sizes``."""
    records = size = 0
    for b, _ in done:
        records += b.record_count
        size += b.size if b.encoded is None else len(b.encoded)
    return records, size


def _one_partition(resp: Any) -> Any:
    """The one partition's answer of a ProduceResponse, or None."""
    parts = resp.partitions if resp is not None else None
    return parts[0] if parts is not None and len(parts) == 1 else None


#: the I/O thread's compiled step (client/_cio.pyx), None when not built or LOGSOURCE_NO_EXTENSIONS is set
_cio = load_extension(__package__ + "._cio")
split_appended = _cio.split_appended if _cio is not None else split_appended_py
run_sizes = _cio.run_sizes if _cio is not None else run_sizes_py
