"""The Producer: accumulate records per partition, send batches from a background thread.

``send()`` appends to the open batch of the record's partition (see
:mod:`.accumulator`) and returns at once. The sender thread closes batches
that are full (``batch_size`` bytes) or old (``linger_ms``), encodes each
with one call to :func:`pyspark_logsource.format.batch.encode`, and pipelines
Produce requests to the partition leaders; responses resolve one future per
batch.

Idempotence (on by default, as in seed 003 section 4.6): the producer gets a
producer id and epoch from the broker (InitProducerId) and numbers each
partition's records; every batch carries id, epoch and base sequence, so a
retried batch that the broker already appended is recognised and answered
with its original offsets instead of being appended twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import (
    ClientClosed,
    ConfigError,
    DuplicateSequence,
    InvalidRequest,
    LogSourceError,
    NetworkError,
    OutOfOrderSequence,
    RequestTimedOut,
    UnknownProducerId,
    UnknownTopicOrPartition,
    error_for_code,
)
from ..format import arrow_to_kafka, compression, encode_arrow, set_producer
from ..format.crc import crc32c
from ..protocol.messages import InitProducerIdRequest, ProducePartitionData, ProduceRequest
from ..topics import validate_topic_name
from .accumulator import RECORD_OVERHEAD, ProducerBatch, RecordAccumulator, RecordFuture
from .encoding import encode_records
from .metadata import Bootstrap
from .network import NetworkClient
from .partitioner import Partitioner, StickyPartitioner, hash_partitions

log = logging.getLogger(__name__)

_INT32_MAX = (1 << 31) - 1
#: unanswered batches with sequence numbers per partition: at most as many as the broker remembers per
#: producer (broker.log.producer_state.MAX_BATCHES_PER_PRODUCER), so a resent one is known as a duplicate
MAX_UNANSWERED_BATCHES = 80
_time = time.time

#: Errors after which the metadata (leaders, partitions) is refreshed before a retry.
_METADATA_ERRORS = (3, 5, 6, 74, 75)


def _as_bytes(v: Any, what: str) -> bytes | None:
    if v is None or type(v) is bytes:
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise InvalidRequest(f"{what} must be bytes, str or None, got {type(v).__name__}")


def _as_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    items = headers.items() if isinstance(headers, dict) else headers
    out = []
    for kv in items:
        try:
            k, v = kv
        except (TypeError, ValueError):
            raise InvalidRequest("headers must be (key, value) pairs or a dict") from None
        if not isinstance(k, str):
            raise InvalidRequest(f"header keys must be str, got {type(k).__name__}")
        out.append((k, _as_bytes(v, "header value")))
    return out


def restamp_producer(buf: bytearray, producer_id: int, epoch: int, base_sequence: int) -> None:
    """Write producer id/epoch/base sequence into an encoded batch and fix its CRC."""
    set_producer(buf, producer_id, epoch, base_sequence)


class Producer:
    """Publish records to topics; thread-safe, blocking only when memory is full.

    ``acks``: 0 (no answer, offsets -1), 1 or -1/"all" (the leader appended).
    ``batch_size``: bytes per partition batch; ``linger_ms``: how long a batch
    waits for more records. ``compression``: None, "gzip", "lz4" or "zstd".
    ``partitioner``: optional ``fn(topic, key, num_partitions) -> int``.
    ``buffer_memory`` bytes may wait unsent; a full buffer blocks ``send()``
    up to ``max_block_ms``, then raises BufferFull. Retriable errors are
    retried up to ``retries`` times within ``delivery_timeout_ms``.
    ``max_in_flight`` bounds unanswered requests per broker connection;
    ``max_batches_per_request`` lets one request carry several ready batches
    of a partition (a run, appended atomically; 1 = one batch per request,
    as Kafka does).
    """

    def __init__(
        self,
        bootstrap: Bootstrap | None = None,
        *,
        acks: int | str = 1,
        linger_ms: float = 5,
        batch_size: int = 16384,
        compression: str | None = None,
        partitioner: Partitioner | None = None,
        enable_idempotence: bool = True,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: float = 60000,
        retries: int = 2**31 - 1,
        retry_backoff_ms: float = 100,
        delivery_timeout_ms: float = 120000,
        request_timeout_ms: float = 30000,
        max_request_size: int = 1024 * 1024,
        max_in_flight: int = 5,
        max_batches_per_request: int = 16,
        client_id: str | None = None,
    ) -> None:
        if acks in ("all", -1):
            acks = -1
        if acks not in (0, 1, -1):
            raise ConfigError(f"acks must be 0, 1 or 'all', got {acks!r}")
        if batch_size < 1 or buffer_memory < 1:
            raise ConfigError("batch_size and buffer_memory must be positive")
        if enable_idempotence and acks == 0:
            # Idempotence needs the broker's answer to know what was appended.
            enable_idempotence = False
        self.acks = acks
        self.codec = _codec(compression)
        self.idempotent = enable_idempotence
        self.retries = retries
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.delivery_timeout = delivery_timeout_ms / 1000.0
        self.request_timeout_ms = request_timeout_ms
        self.max_request_size = max_request_size
        self.max_block = max_block_ms / 1000.0
        self.batch_size = batch_size
        self.max_batches_per_request = max(1, int(max_batches_per_request))
        self._client = NetworkClient(
            bootstrap, client_id=client_id or "logsource-producer", request_timeout_ms=request_timeout_ms,
            max_in_flight=max_in_flight,
        )  # fmt: skip
        self._acc = RecordAccumulator(
            batch_size=batch_size, linger_ms=linger_ms, buffer_memory=buffer_memory, max_block_ms=max_block_ms
        )
        self._partitioner = partitioner
        self._sticky = StickyPartitioner()
        self._nparts: dict[str, int] = {}
        self._meta_lock = threading.Lock()
        self._producer_id = -1
        self._producer_epoch = -1
        self._next_seq: dict[tuple[str, int], int] = {}
        self._last_acked: dict[tuple[str, int], int] = {}  # last sequence the broker acknowledged
        self._pid_for: dict[tuple[str, int], tuple[int, int]] = {}  # a partition's own id after a reset
        self._drain_mark = 0  # RecordAccumulator.answered when the sender last drained
        self._resets: set[tuple[str, int]] = set()  # partitions whose sequences restart (see _reset_sequences)
        self._stamped: dict[int, int] = {}  # id(batch) -> producer id of its last send
        self._assigned: dict[tuple[str, int], list[ProducerBatch]] = {}
        self._seq_lock = threading.Lock()
        self._refresh_needed = False
        self._closed = False
        self._arrow_body: bool | None = None  # learnt from the broker's ApiVersions on first use
        self._sender = threading.Thread(target=self._run, name="logsource-producer-sender", daemon=True)
        self._sender.start()

    # ------------------------------------------------------------------ public API

    def send(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        headers: Iterable[tuple[str, bytes | None]] | dict | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordFuture:
        """Queue one record; return a future resolving to ``(partition, offset)``."""
        if (
            key is None and partition is None and headers is None and timestamp_ms is None
            and type(value) is bytes and self._partitioner is None
        ):  # fmt: skip
            # The keyless record (the common case): the open batch of the topic's sticky partition
            # in one lookup, two list appends, nothing else per record.
            size = len(value) + RECORD_OVERHEAD
            ts = int(_time() * 1000)
            acc = self._acc
            with acc.lock:
                b = acc.sticky.get(topic)
                if b is not None and acc.used + size <= acc.buffer_memory:
                    acc.used += size
                    values = b.values
                    idx = len(values)
                    values.append(value)
                    b.timestamps.append(ts)
                    if b.keys is not None:
                        b.keys.append(None)
                    if b.headers is not None:
                        b.headers.append(None)
                    b.size += size
                    if b.size >= acc.batch_size:
                        acc.close_batch(b)
                        self._sticky.on_new_batch(topic, b.partition, self._nparts[topic])
                    return RecordFuture(b, idx)
        return self._send(topic, value, key, headers, partition, timestamp_ms)

    def _send(
        self, topic: str, value: Any, key: Any, headers: Any, partition: int | None, timestamp_ms: int | None
    ) -> RecordFuture:
        """send() for every record: conversions, partitioning, memory that may block, a new batch."""
        if type(value) is not bytes:
            value = _as_bytes(value, "value")
        if key is not None and type(key) is not bytes:
            key = _as_bytes(key, "key")
        n = self._nparts.get(topic)
        if n is None:
            n = self._topic_partitions(topic)
        sticky = False
        if partition is None:
            if self._partitioner is not None:
                partition = self._partitioner(topic, key, n)
                if not 0 <= partition < n:
                    raise InvalidRequest(f"partitioner returned {partition} for topic {topic!r} with {n} partitions")
            elif key is not None:
                partition = (crc32c(key) & 0x7FFFFFFF) % n
            else:
                sticky = True
        elif not 0 <= partition < n:
            raise UnknownTopicOrPartition(f"topic {topic!r} has no partition {partition} (it has {n})")
        size = (len(value) if value is not None else 0) + (len(key) if key is not None else 0) + RECORD_OVERHEAD
        if headers:
            headers = _as_headers(headers)
            size += sum(len(k) + (len(v) if v else 0) + 8 for k, v in headers)
        ts = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
        acc = self._acc
        with acc.lock:
            if acc.closed:
                raise ClientClosed("producer is closed")
            if sticky:
                partition = self._sticky._current.get(topic, n)  # inlined StickyPartitioner.partition
                if partition >= n:
                    partition = self._sticky.partition(topic, n)
            if acc.used + size > acc.buffer_memory and acc.used:
                acc.reserve(size)
            else:
                acc.used += size
            b = acc.open.get((topic, partition))
            if b is None:
                b = acc.new_batch(topic, partition)
            if sticky:
                acc.sticky[topic] = b
            idx = len(b.values)
            b.values.append(value)
            b.timestamps.append(ts)
            if key is not None:
                if b.keys is None:
                    b.keys = [None] * idx
                b.has_keys = True
            if b.keys is not None:
                b.keys.append(key)
            if headers or b.headers is not None:
                if b.headers is None:
                    b.headers = [None] * idx
                b.headers.append(headers or None)
            b.size += size
            if b.size >= acc.batch_size:
                acc.close_batch(b)
                if sticky:
                    self._sticky.on_new_batch(topic, partition, n)
        return RecordFuture(b, idx)

    def send_arrow(self, topic: str, table: pa.Table | pa.RecordBatch, partition: int | None = None) -> list:
        """Queue an Arrow table; return one future per produced batch.

        Columns: ``value`` (binary or string) required; ``key``,
        ``timestamp``, ``headers`` and ``partition`` optional. Rows are routed
        like ``send()`` (explicit partition, else key hash, else one sticky
        partition) and grouped with vectorised Arrow/numpy operations. Each
        future resolves to ``(partition, base_offset, last_offset)``.
        """
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if not isinstance(table, pa.Table):
            raise InvalidRequest(f"send_arrow needs a pyarrow Table or RecordBatch, got {type(table).__name__}")
        names = table.schema.names
        if "value" not in names:
            raise InvalidRequest("send_arrow needs a 'value' column")
        if table.num_rows == 0:
            return []
        n = self._nparts.get(topic) or self._topic_partitions(topic)
        parts: np.ndarray | None = None
        fixed: int | None = None
        if "partition" in names:
            col = table.column("partition")
            table = table.drop_columns(["partition"])
            if col.null_count == 0:
                parts = col.to_numpy().astype(np.int64)
            else:
                parts = col.fill_null(-1).to_numpy().astype(np.int64)
        if partition is not None:
            if not 0 <= partition < n:
                raise UnknownTopicOrPartition(f"topic {topic!r} has no partition {partition} (it has {n})")
            if parts is None:
                fixed = partition
            else:
                parts[parts < 0] = partition
        if fixed is None:
            if parts is None or (parts < 0).any():
                hashed = None
                if "key" in table.schema.names:
                    keys = table.column("key").combine_chunks()
                    if self._partitioner is not None:
                        hashed = np.fromiter(
                            (self._partitioner(topic, k, n) for k in keys.to_pylist()), dtype=np.int64, count=len(keys)
                        )
                    else:
                        hashed = hash_partitions(keys, n)
                if parts is None:
                    parts = hashed if hashed is not None else np.full(table.num_rows, -1, dtype=np.int64)
                elif hashed is not None:
                    parts = np.where(parts < 0, hashed, parts)
                if (parts < 0).any():
                    with self._acc.lock:
                        sticky = self._sticky.partition(topic, n)
                    parts[parts < 0] = sticky
            if parts.min() < 0 or parts.max() >= n:
                bad = int(parts.max() if parts.max() >= n else parts.min())
                raise UnknownTopicOrPartition(f"topic {topic!r} has no partition {bad} (it has {n})")
            uniq = np.unique(parts)
            if len(uniq) == 1:
                fixed = int(uniq[0])
        if fixed is not None:
            groups = [(fixed, table)]
        else:
            order = np.argsort(parts, kind="stable")
            sorted_parts = parts[order]
            table = table.take(pa.array(order))
            bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
            starts = np.concatenate([[0], bounds])
            ends = np.concatenate([bounds, [len(sorted_parts)]])
            groups = [(int(sorted_parts[s]), table.slice(s, e - s)) for s, e in zip(starts, ends, strict=True)]
        futures = []
        for p, sub in groups:
            for chunk in self._chunks(sub):
                data = self._in_broker_layout(encode_arrow(chunk, codec=self.codec))
                futures.append(self._enqueue_encoded(topic, p, data, chunk.num_rows))
        return futures

    def partition_for(self, topic: str, key: bytes | str | None) -> int:
        """The partition ``send(topic, ..., key=key)`` would choose (sticky partition for no key)."""
        n = self._nparts.get(topic) or self._topic_partitions(topic)
        key = _as_bytes(key, "key")
        if self._partitioner is not None:
            return self._partitioner(topic, key, n)
        if key is None:
            with self._acc.lock:
                return self._sticky.partition(topic, n)
        return (crc32c(key) & 0x7FFFFFFF) % n

    def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of ``topic``."""
        return list(range(self._nparts.get(topic) or self._topic_partitions(topic)))

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered and wait until it is acknowledged (or failed).

        Raises RequestTimedOut if ``timeout`` seconds pass first. Errors of
        individual records stay on their futures.
        """
        acc = self._acc
        with acc.lock:
            pending = list(acc.incomplete)
            acc.flushing += 1
            acc.wakeup.notify()
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            for b in pending:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    b.future.exception(left)
                except Exception:
                    raise RequestTimedOut(f"flush did not complete within {timeout} s") from None
        finally:
            with acc.lock:
                acc.flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flush, stop the sender thread and close the connections."""
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            self._closed = True
            acc = self._acc
            with acc.lock:
                acc.closed = True
                acc.sticky.clear()  # send() now takes the path that checks ``closed``
                acc.wakeup.notify_all()
                acc.space.notify_all()
            self._sender.join(timeout=5.0)
            with acc.lock:
                leftover = list(acc.incomplete)
            for b in leftover:
                acc.complete(b, error=ClientClosed("producer closed before the record was sent"))
            self._client.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def metrics(self) -> dict[str, int]:
        """A few counters: buffered bytes and batches not yet acknowledged."""
        with self._acc.lock:
            return {"buffer_used": self._acc.used, "incomplete_batches": len(self._acc.incomplete)}

    # ------------------------------------------------------------------ internals: metadata

    def _topic_partitions(self, topic: str) -> int:
        validate_topic_name(topic)
        if self._closed:
            raise ClientClosed("producer is closed")
        deadline = time.monotonic() + self.max_block
        last: BaseException | None = None
        while True:
            try:
                with self._meta_lock:
                    t = self._client.topic(topic, allow_auto_create=True, refresh=True)
                n = len(t.partitions)
                if n:
                    self._nparts[topic] = n
                    return n
            except LogSourceError as e:
                if not e.retriable:
                    raise
                last = e
            if time.monotonic() >= deadline:
                if isinstance(last, NetworkError):
                    raise last
                raise UnknownTopicOrPartition(
                    f"topic {topic!r} not present in metadata after max_block_ms={self.max_block * 1000:.0f}"
                    + (f": {last}" if last else "")
                )
            time.sleep(min(self.retry_backoff, max(0.0, deadline - time.monotonic())))

    def _chunks(self, table: pa.Table) -> list[pa.RecordBatch]:
        """Split rows into record batches of about ``max(batch_size, 256 KiB)`` bytes."""
        target = min(max(self.batch_size, 256 * 1024), max(self.max_request_size - 1024, 1))
        # Cheap upper bound first (buffer sizes, no per-row pass): most tables fit one batch.
        if table.nbytes + RECORD_OVERHEAD * table.num_rows <= target:
            batches = table.to_batches()
            if len(batches) == 1:
                return batches
        batches = table.combine_chunks().to_batches()
        if len(batches) != 1:  # combine_chunks leaves one chunk per column
            batches = [pa.concat_batches(batches)] if batches else []
        if not batches:
            return []
        rb = batches[0]
        sizes = pc.binary_length(rb.column("value")).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        if "key" in rb.schema.names:
            ksz = pc.binary_length(rb.column("key")).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            sizes = sizes + ksz
        cum = np.cumsum(sizes + RECORD_OVERHEAD)
        total = int(cum[-1])
        if total <= target:
            return [rb]
        # chunk boundaries where the running size crosses each multiple of target
        cuts = np.searchsorted(cum, np.arange(target, total, target), side="right")
        edges = np.unique(np.concatenate([[0], np.clip(cuts, 1, len(cum)), [len(cum)]])).tolist()
        return [rb.slice(s, e - s) for s, e in zip(edges[:-1], edges[1:], strict=True)]

    def _enqueue_encoded(self, topic: str, partition: int, data: bytearray, count: int):
        acc = self._acc
        b = ProducerBatch.from_encoded(topic, partition, data, count, time.monotonic())
        with acc.lock:
            if acc.closed:
                raise ClientClosed("producer is closed")
            acc.reserve(len(data))
            acc.add_encoded(b)
        return b.future

    # ------------------------------------------------------------------ internals: sender thread

    def _in_broker_layout(self, data: bytearray) -> bytearray:
        """Our Arrow-bodied batch as is, or in Kafka's layout for a broker without our extension."""
        if self._arrow_body is None:
            self._arrow_body = self._client.arrow_body
        return data if self._arrow_body else arrow_to_kafka(data)

    def _init_producer_id(self) -> None:
        resp = self._client.request(InitProducerIdRequest())
        self._producer_id, self._producer_epoch = resp.producer_id, resp.producer_epoch
        log.debug("producer id %d epoch %d", self._producer_id, self._producer_epoch)

    def _run(self) -> None:
        acc = self._acc
        max_run, max_bytes = self.max_batches_per_request, self.max_request_size
        while True:
            with acc.lock:
                while True:
                    runs, next_at = acc.drain(time.monotonic(), max_run, max_bytes)
                    if runs:
                        break
                    if acc.closed and not acc.has_pending():
                        return
                    acc.sender_idle = True
                    timeout = None if next_at is None else max(0.0, next_at - time.monotonic())
                    acc.wakeup.wait(timeout if timeout is None else min(timeout, 1.0))
                    acc.sender_idle = False
                # Drain more rounds while ready so several requests share one write.
                rounds = [runs]
                for _ in range(63):
                    more, _ = acc.drain(time.monotonic(), max_run, max_bytes)
                    if not more:
                        break
                    rounds.append(more)
                self._drain_mark = acc.answered  # see _sendable
            try:
                self._send_rounds(rounds)
            except Exception as e:  # keep the sender alive; the batches carry the error
                log.exception("producer sender failed")
                for r in rounds:
                    for run in r:
                        for b in run:
                            if not b.future.done():
                                self._fail_or_retry(b, e)

    def _prepare(self, b: ProducerBatch) -> None:
        if b.deadline == 0.0:
            b.deadline = time.monotonic() + self.delivery_timeout
        with self._seq_lock:
            seq = -1
            if self.idempotent and b.base_sequence is None:
                seq = self._next_seq.get(b.tp, 0)
                b.base_sequence = seq
                self._next_seq[b.tp] = (seq + b.record_count) & _INT32_MAX
                self._assigned.setdefault(b.tp, []).append(b)
            elif b.base_sequence is not None:
                seq = b.base_sequence
            pid, epoch = self._pid_for.get(b.tp) or (self._producer_id, self._producer_epoch)
            if self.idempotent:
                self._stamped[id(b)] = pid
            if b.encoded is None:
                b.encoded = self._in_broker_layout(encode_records(
                    b.values, b.keys if b.has_keys else None, b.timestamps, b.headers, codec=self.codec,
                    producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                ))  # fmt: skip
                # The lists are no longer needed; memory stays accounted until the answer.
                b.values = b.keys = b.timestamps = b.headers = None  # type: ignore[assignment]
            elif self.idempotent and (b.restamp or b.attempts == 0):
                restamp_producer(b.encoded, pid, epoch, seq)
            b.restamp = False

    def _finish(self, b: ProducerBatch, result=None, error: BaseException | None = None) -> None:
        """Complete a batch; a batch that failed for good gives its sequence numbers back."""
        if self.idempotent and b.base_sequence is not None:
            with self._seq_lock:
                self._stamped.pop(id(b), None)
                queue = self._assigned.get(b.tp, [])
                try:
                    i = queue.index(b)
                except ValueError:
                    i = -1
                if i >= 0:
                    del queue[i]
                    if error is None:
                        self._last_acked[b.tp] = (b.base_sequence + b.record_count - 1) & _INT32_MAX
                    else:
                        # Later batches move down so the broker sees no gap; their bytes are
                        # restamped before they are (re)sent.
                        n = b.record_count
                        for later in queue[i:]:
                            later.base_sequence = (later.base_sequence - n) & _INT32_MAX
                            later.restamp = True
                        self._next_seq[b.tp] = (self._next_seq.get(b.tp, 0) - n) & _INT32_MAX
        self._acc.complete(b, result, error)

    def _send_rounds(self, rounds: list[list[list[ProducerBatch]]]) -> None:
        if self.idempotent and self._producer_id < 0:
            try:
                self._init_producer_id()
            except LogSourceError as e:
                for r in rounds:
                    for run in r:
                        for b in run:
                            self._fail_or_retry(b, e)
                return
        if self._resets:
            self._reset_sequences()
        if self._refresh_needed:
            self._refresh_needed = False
            try:
                with self._meta_lock:
                    self._client.refresh_metadata(list({run[0].topic for r in rounds for run in r}))
            except LogSourceError:
                pass
        # node -> requests in round order; a round holds at most one run per partition
        by_node: dict[int, list[tuple[ProduceRequest, dict]]] = {}
        held: dict[tuple[str, int], tuple[int, list[ProducerBatch]]] = {}  # see _sendable
        for r in rounds:
            open_reqs: dict[int, tuple[list, dict]] = {}
            sizes: dict[int, int] = {}
            for run in r:
                if self.idempotent:
                    run = self._sendable(run, held)
                    if not run:
                        continue
                head = run[0]
                try:
                    for b in run:
                        self._prepare(b)
                    node = self._client.leader_for(head.topic, head.partition)
                except LogSourceError as e:
                    for b in run:
                        self._fail_or_retry(b, e)
                    continue
                data = run[0].encoded if len(run) == 1 else b"".join([b.encoded for b in run])
                entry = open_reqs.get(node)
                if entry is not None and entry[0] and sizes[node] + len(data) > self.max_request_size:
                    by_node.setdefault(node, []).append(self._request(entry))
                    entry = None
                if entry is None:
                    entry = open_reqs[node] = ([], {})
                    sizes[node] = 0
                entry[0].append(ProducePartitionData(head.topic, head.partition, data))
                entry[1][head.tp] = run
                sizes[node] += len(data)
            for node, entry in open_reqs.items():
                if entry[0]:
                    by_node.setdefault(node, []).append(self._request(entry))
        for node, items in by_node.items():
            try:
                conn = self._client.node_connection(node)
            except LogSourceError as e:
                for _, runs in items:
                    for run in runs.values():
                        for b in run:
                            self._fail_or_retry(b, e)
                continue
            calls = [(req, self._callback(runs)) for req, runs in items]
            for _, runs in items:
                for run in runs.values():
                    for b in run:
                        b.attempts += 1
            try:
                conn.send_many(calls)
            except LogSourceError:
                pass  # send_many already ran the callbacks of unsent requests with the error
        if held:  # last: if anything above raised, _run puts every unfinished batch back itself
            with self._acc.lock:
                for tp, (mark, batches) in held.items():
                    self._acc.hold(tp, batches, mark)

    def _sendable(self, run: list[ProducerBatch], held: dict) -> list[ProducerBatch]:
        """The part of an idempotent run that may be sent now; the rest goes into ``held``.

        A run carries consecutive sequence numbers only: the broker checks each
        batch against the one before, so a gap (a batch resent while a later one
        is still unanswered, followed by new batches numbered after that one)
        would be refused as OutOfOrderSequence and misread as lost state. And a
        partition has at most MAX_UNANSWERED_BATCHES batches with sequence numbers
        unanswered, no more than the broker remembers per producer (as Kafka's
        producer keeps 5 in flight): a batch whose answer is lost, resent to a
        new leader, is then always recognised as a duplicate. Held batches wait until the partition
        has an answer; a partition with held batches sends nothing later in this round.
        """
        tp = run[0].tp
        if tp in held:
            held[tp][1].extend(run)
            return []
        with self._seq_lock:
            unanswered = len(self._assigned.get(tp, ()))
            nxt = self._next_seq.get(tp, 0)
            end = None
            for i, b in enumerate(run):  # noqa: B007 - i is where the run stops
                seq = b.base_sequence
                if seq is None:
                    if unanswered >= MAX_UNANSWERED_BATCHES:
                        break
                    seq, nxt = nxt, (nxt + b.record_count) & _INT32_MAX
                    unanswered += 1
                if end is not None and seq != end:
                    break
                end = (seq + b.record_count) & _INT32_MAX
            else:
                return run
        held[tp] = (self._drain_mark, run[i:])
        return run[:i]

    def _request(self, entry: tuple[list, dict]) -> tuple[ProduceRequest, dict]:
        return ProduceRequest(entry[0], acks=self.acks, timeout_ms=int(self.request_timeout_ms)), entry[1]

    def _callback(self, runs: dict[tuple[str, int], list[ProducerBatch]]) -> Callable:
        def fail(run: list[ProducerBatch], err: BaseException) -> None:
            for b in run:
                self._fail_or_retry(b, err)

        def on_response(resp: Any, error: BaseException | None) -> None:
            if error is not None:
                for run in runs.values():
                    fail(run, error)
                return
            if resp is None:  # acks=0: written, no answer
                for run in runs.values():
                    for b in run:
                        self._finish(b, (b.partition, -1, -1))
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
                        err = _ResendAlone(str(err))
                    fail(run, err)
                    continue
                # offsets are consecutive: each batch of the run follows the previous one
                off = pr.base_offset
                for b in run:
                    self._finish(b, (b.partition, off, off + b.record_count - 1))
                    off += b.record_count
            for tp, run in runs.items():
                if tp not in seen:
                    fail(run, NetworkError(f"broker did not answer for partition {tp[0]}-{tp[1]}"))

        return on_response

    def _fail_or_retry(self, b: ProducerBatch, error: BaseException) -> None:
        retriable = isinstance(error, LogSourceError) and error.retriable
        if self.idempotent and isinstance(error, (OutOfOrderSequence, UnknownProducerId)):
            # As Kafka's idempotent producer: always retried. A batch that follows an unresolved
            # one (an earlier batch failed or is being resent, say to a new leader after a
            # failover) is resent with its sequence numbers unchanged, as is one whose answer is
            # about a send from before its partition's sequences were reset.
            retriable = True
            with self._seq_lock:
                stale = self._stamped.get(id(b)) != (self._pid_for.get(b.tp) or (self._producer_id,))[0]
            if not stale and not b.restamp and (isinstance(error, UnknownProducerId) or self._is_next(b)):
                # Every earlier batch was acknowledged, yet the broker expects another sequence or
                # no longer knows this producer: it lost acknowledged records or its producer state.
                # Retrying the same numbers cannot help; the partition's sequences restart.
                log.warning("%s-%d: broker refused sequence %s (%s); restarting the partition's sequences",
                            b.topic, b.partition, b.base_sequence, error)  # fmt: skip
                with self._seq_lock:
                    self._resets.add(b.tp)
        now = time.monotonic()
        if (
            retriable
            and not self._acc.closed
            and b.attempts <= self.retries
            and (b.deadline == 0.0 or now < b.deadline)
        ):
            if getattr(error, "code", None) in _METADATA_ERRORS or isinstance(error, NetworkError):
                self._refresh_needed = True
            with self._acc.lock:
                self._acc.requeue(b, now + self.retry_backoff)
            return
        if retriable and b.deadline and now >= b.deadline:
            error = RequestTimedOut(
                f"batch for {b.topic}-{b.partition} not delivered within delivery_timeout_ms="
                f"{self.delivery_timeout * 1000:.0f}: {error}"
            )
        self._finish(b, error=error)


    def _reset_sequences(self) -> None:
        """Restart the sequences of partitions where the broker lost this producer's state (sender thread).

        Kafka bumps the producer epoch here (KIP-360) and holds back the other partitions until
        their in-flight batches are answered; a fresh producer id for just these partitions has
        the same effect at the broker (a new producer, sequences from 0) and leaves the other
        partitions' numbering alone. Every unfinished batch of the partition is renumbered in
        order; answers to sends from before the reset are recognised by their producer id.
        """
        for tp in sorted(self._resets):
            try:
                resp = self._client.request(InitProducerIdRequest())
            except LogSourceError as e:
                log.warning("cannot get a producer id to reset %s-%d (will retry): %s", tp[0], tp[1], e)
                return
            with self._seq_lock:
                self._resets.discard(tp)
                self._pid_for[tp] = (resp.producer_id, resp.producer_epoch)
                seq = 0
                for b in self._assigned.get(tp, []):
                    b.base_sequence = seq
                    b.restamp = True
                    seq = (seq + b.record_count) & _INT32_MAX
                self._next_seq[tp] = seq
                self._last_acked.pop(tp, None)
            log.info("%s-%d: sequences restart at 0 with producer id %d", tp[0], tp[1], resp.producer_id)

    def _is_next(self, b: ProducerBatch) -> bool:
        """True if every earlier batch of ``b``'s partition was acknowledged (``b`` is the next sequence)."""
        with self._seq_lock:
            last = self._last_acked.get(b.tp, -1)
        return b.base_sequence == ((last + 1) & _INT32_MAX)


class _ResendAlone(LogSourceError):
    """Part of a run of batches was a duplicate: resend each batch alone (retriable; never surfaces)."""

    retriable = True


def _codec(name: str | None) -> int:
    try:
        return compression.codec_id(name if name != "none" else None)
    except LogSourceError as e:
        raise ConfigError(str(e)) from None
