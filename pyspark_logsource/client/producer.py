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

The sender thread and the sequence bookkeeping (the producer id, the
unanswered batches) are owned by a :class:`~.sender.Sender`, which the
producer holds as ``_sender`` and hands the accumulator, the network client,
its frozen settings and a metadata refresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import (
    ClientClosed,
    ConfigError,
    InvalidRequest,
    LogSourceError,
    NetworkError,
    RequestTimedOut,
    UnknownTopicOrPartition,
)
from ..format import compression, encode_arrow
from ..format.crc import crc32c
from ..topics import validate_topic_name
from . import accumulator
from .accumulator import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD,
    CompiledAccumulator,
    ProducerBatch,
    RecordAccumulator,
    RecordFuture,
)
from .metadata import Bootstrap
from .metrics import ClientMetrics
from .network import NetworkClient
from .partitioner import Partitioner, StickyPartitioner, hash_partitions
from .security import ClientSecurity
from .sender import MAX_UNANSWERED_BATCHES, Sender, SenderSettings, restamp_producer  # noqa: F401

log = logging.getLogger(__name__)

#: the compiled accumulator (client/_caccum.pyx: C record buffers, send() into them, their batch encode);
#: read when a Producer is made (benchmarks/compiled.py sets it to None for the pure-Python row)
_caccum = accumulator._caccum

#: how many of the batches it waits for flush() holds at a time (see flush)
_FLUSH_CHUNK = 1024

_time_ns = time.time_ns
_new_object = object.__new__


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

    #: the sender a producer makes (TransactionalProducer's marks every batch transactional)
    _sender_type: type[Sender] = Sender

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
        **security: Any,
    ) -> None:
        """``security``: kafka-python's TLS/SASL options (``security_protocol``, ``sasl_mechanism``,
        ``sasl_plain_username``, ``sasl_plain_password``, ``ssl_cafile``, ... see client/security.py)."""
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
            bootstrap,
            client_id=client_id or "logsource-producer",
            request_timeout_ms=request_timeout_ms,
            max_in_flight=max_in_flight,
            security=ClientSecurity.from_options(security),
            stats=(stats := ClientMetrics()),
        )
        self._stats = stats
        # the compiled accumulator where send() is the compiled one (a subclass's send() appends to lists)
        compiled = _caccum is not None and type(self).send is Producer.send
        self._acc = (CompiledAccumulator if compiled else RecordAccumulator)(
            batch_size=batch_size, linger_ms=linger_ms, buffer_memory=buffer_memory, max_block_ms=max_block_ms
        )
        self._partitioner = partitioner
        # the partition of keyless records: the compiled one where send() is (it asks and moves it in C)
        self._sticky = _caccum.StickyPartitioner() if compiled else StickyPartitioner()
        self._nparts: dict[str, int] = {}
        self._meta_lock = threading.Lock()
        self._closed = False
        settings = SenderSettings(
            idempotent=self.idempotent,
            acks=acks,
            codec=self.codec,
            retries=retries,
            retry_backoff=self.retry_backoff,
            delivery_timeout=self.delivery_timeout,
            request_timeout_ms=request_timeout_ms,
            max_request_size=max_request_size,
            max_batches_per_request=self.max_batches_per_request,
        )
        self._sender = self._sender_type(self._acc, self._client, settings, self._refresh_metadata)
        self._sender.stats = stats
        self._sender.start()
        if compiled:
            # send() into the accumulator's C buffers (client/_caccum); the rest goes to _send
            self.send = _caccum.fast_send(
                self, Producer._send, RecordFuture, ProducerBatch, RECORD_OVERHEAD, BATCH_OVERHEAD, crc32c
            )

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
            key is None
            and partition is None
            and headers is None
            and timestamp_ms is None
            and type(value) is bytes
            and self._partitioner is None
        ):
            # The keyless record (the common case): the open batch of the topic's sticky partition
            # in one lookup, two list appends, nothing else per record. (A sticky batch has no
            # keys or headers: _send takes it out of ``acc.sticky`` when a keyed record joins it.)
            size = len(value) + RECORD_OVERHEAD
            ts = _time_ns() // 1_000_000
            acc = self._acc
            with acc.lock:
                b = acc.sticky.get(topic)
                if acc.used + size <= acc.buffer_memory:
                    if b is not None:
                        acc.used += size
                        values = b.values
                        idx = len(values)
                        values.append(value)
                        b.timestamps.append(ts)
                        b.size += size
                        if b.size >= acc.batch_size:
                            acc.close_batch(b)
                            self._sticky.on_new_batch(topic, b.partition, self._nparts[topic])
                        # RecordFuture(b, idx) without the call of its __init__ (a Python frame per record)
                        f = _new_object(RecordFuture)
                        f._batch = b
                        f._index = idx
                        return f
                    if size + BATCH_OVERHEAD >= acc.batch_size and not acc.closed:
                        f = self._alone(topic, value, size, ts)
                        if f is not None:
                            return f
        return self._send(topic, value, key, headers, partition, timestamp_ms)

    def _alone(self, topic: str, value: bytes, size: int, ts: int) -> RecordFuture | None:
        """A keyless record that fills a batch alone (batch_size 1: a request per record), queued without
        opening a batch; None when the sticky partition is not known or has an open batch. Lock held."""
        n = self._nparts.get(topic)
        if n is not None:
            acc = self._acc
            p = self._sticky.partition(topic, n)
            if (topic, p) not in acc.open:
                acc.used += size
                b = acc.add_alone(topic, p, value, ts, size)
                self._sticky.on_new_batch(topic, p, n)
                return RecordFuture(b, 0)
        return None

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
                    raise InvalidRequest(
                        f"partitioner returned {partition} for topic {topic!r} with {n} partitions"
                    )
            elif key is not None:
                partition = (crc32c(key) & 0x7FFFFFFF) % n
            else:
                sticky = True
        elif not 0 <= partition < n:
            raise UnknownTopicOrPartition(f"topic {topic!r} has no partition {partition} (it has {n})")
        size = (
            (len(value) if value is not None else 0) + (len(key) if key is not None else 0) + RECORD_OVERHEAD
        )
        if headers:
            headers = _as_headers(headers)
            size += sum(len(k) + (len(v) if v else 0) + 8 for k, v in headers)
        ts = _time_ns() // 1_000_000 if timestamp_ms is None else int(timestamp_ms)
        acc = self._acc
        with acc.lock:
            if acc.closed:
                raise ClientClosed("producer is closed")
            if sticky:
                partition = self._sticky.partition(topic, n)
            if acc.used + size > acc.buffer_memory and acc.used:
                acc.reserve(size)
            else:
                acc.used += size
            b = acc.open.get((topic, partition))
            if b is None:
                b = acc.new_batch(topic, partition)
            idx = -1
            if b.buf is not None:  # the compiled accumulator's C buffer: keys and nulls, no headers
                if not headers:
                    try:
                        idx = b.buf.add(value, key, ts)
                    except (
                        OverflowError
                    ):  # a timestamp outside int64: the lists keep it, the encode refuses it
                        pass
                if idx < 0:
                    b.spill()
            if idx < 0:
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
            if b.keys is None and b.headers is None:
                if sticky:
                    acc.sticky[topic] = b
            elif acc.sticky.get(topic) is b:  # send()'s fast path appends no key or header
                del acc.sticky[topic]
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
        like ``send()`` (explicit partition, else key hash, else the sticky
        partition, which moves on every ``batch_size`` bytes) and grouped
        with vectorised Arrow/numpy operations. Each future resolves to
        ``(partition, base_offset, last_offset)``.
        """
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if not isinstance(table, pa.Table):
            raise InvalidRequest(
                f"send_arrow needs a pyarrow Table or RecordBatch, got {type(table).__name__}"
            )
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
                            (self._partitioner(topic, k, n) for k in keys.to_pylist()),
                            dtype=np.int64,
                            count=len(keys),
                        )
                    else:
                        hashed = hash_partitions(keys, n)
                if parts is None:
                    parts = hashed if hashed is not None else np.full(table.num_rows, -1, dtype=np.int64)
                elif hashed is not None:
                    parts = np.where(parts < 0, hashed, parts)
                free = np.flatnonzero(parts < 0)
                if len(free):
                    # keyless rows: the sticky partition per batch_size bytes, then the next, as send() does
                    sizes = (
                        pc.binary_length(table.column("value")).fill_null(0).to_numpy(zero_copy_only=False)
                    )
                    sizes = sizes.astype(np.int64)[free] + RECORD_OVERHEAD
                    with self._acc.lock:
                        parts[free] = self._sticky.spread(topic, sizes, n, self.batch_size)
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
            groups = [
                (int(sorted_parts[s]), table.slice(s, e - s)) for s, e in zip(starts, ends, strict=True)
            ]
        futures = []
        for p, sub in groups:
            for chunk in self._chunks(sub):
                data = self._sender.in_broker_layout(encode_arrow(chunk, codec=self.codec))
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
            # Oldest first, a chunk at a time, each let go once answered: the answered batches are freed
            # while the rest are on their way, not all at once after the last answer (a flush of 200k
            # one-record batches otherwise spent 0.16 s freeing them after everything was acknowledged).
            pending.reverse()
            while pending:
                chunk = pending[-_FLUSH_CHUNK:]  # the oldest, newest first: answered last as a rule
                del pending[-_FLUSH_CHUNK:]
                for b in chunk:
                    if b.outcome is not None:  # answered already: no future to make and wait on
                        continue
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    try:
                        b.future.exception(left)
                    except Exception:
                        raise RequestTimedOut(f"flush did not complete within {timeout} s") from None
                chunk = b = None  # type: ignore[assignment]
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
            self._sender.join(5.0)
            with acc.lock:
                leftover = list(acc.incomplete)
            for b in leftover:
                acc.complete(b, error=ClientClosed("producer closed before the record was sent"))
            self._client.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metrics(self) -> dict[str, float]:
        """Kafka's producer metrics: ``record-send-total``, ``byte-total`` (acknowledged batches),
        ``request-latency-avg``/``-max`` (ms), ``produce-throttle-time-avg``/``-max`` (ms), ``request-total``;
        and the buffered bytes and batches not yet acknowledged."""
        out = self._stats.snapshot("record-send-total", "byte-total", "produce")
        with self._acc.lock:
            out["buffer_used"], out["incomplete_batches"] = self._acc.used, len(self._acc.incomplete)
        return out

    # ------------------------------------------------------------------ internals: metadata

    def _refresh_metadata(self, topics: list[str]) -> None:
        """Refresh ``topics``' leaders (the sender's retries after a leader moved)."""
        with self._meta_lock:
            self._client.refresh_metadata(topics)

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
        sizes = (
            pc.binary_length(rb.column("value")).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        )
        if "key" in rb.schema.names:
            ksz = (
                pc.binary_length(rb.column("key"))
                .fill_null(0)
                .to_numpy(zero_copy_only=False)
                .astype(np.int64)
            )
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


def _codec(name: str | None) -> int:
    try:
        return compression.codec_id(name if name != "none" else None)
    except LogSourceError as e:
        raise ConfigError(str(e)) from None
