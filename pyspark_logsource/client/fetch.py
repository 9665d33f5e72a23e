"""``read_range``: how a Spark task reads one planned offset range.

No consumer group, no background thread, one connection in the caller's
thread: fetch ``[start, end)`` in order and yield Arrow record batches
trimmed to the range. Decompression and decoding happen here, in the task.
Offsets of a compacted topic have gaps: a range yields the records it holds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ..errors import (
    CorruptRecord,
    InvalidRequest,
    LeaderNotAvailable,
    LogSourceError,
    NetworkError,
    OffsetOutOfRange,
    error_for_code,
)
from ..format import decode, iter_headers, read_header, to_arrow
from ..protocol.messages import READ_COMMITTED, READ_UNCOMMITTED, FetchPartition, FetchRequest
from .committed import CommittedFilter, committed_only
from .connection import BrokerConnection, PendingResponse
from .local_read import MODES, read_local_first
from .malloc_tuning import tune_for_fetches
from .network import ROUTING_ERRORS, NetworkClient, Retry
from .security import ClientSecurity

#: Upper bound when a single batch is larger than the requested max_bytes.
_MAX_FETCH_GROWTH = 256 * 1024 * 1024


def read_range(
    bootstrap: str,
    topic: str,
    partition: int,
    start_offset: int,
    end_offset: int,
    *,
    max_bytes: int = 8 * 1024 * 1024,
    client_id: str | None = None,
    request_timeout_ms: float = 30000,
    check_crc: bool = True,
    read_committed: bool = True,
    whole_fetches: bool = False,
    security: ClientSecurity | None = None,
    local_read: str = "auto",
) -> Iterator[pa.RecordBatch]:
    """Yield ``ARROW_SCHEMA`` record batches holding exactly offsets ``[start_offset, end_offset)``.

    One record batch per stored batch, zero-copy views of the fetched bytes;
    with ``whole_fetches`` one record batch per fetch response instead (up to
    ``max_bytes``), its columns contiguous (what a Spark task hands Spark).

    Raises OffsetOutOfRange when ``start_offset`` is before the log start
    offset (the caller decides, per failOnDataLoss) or ``end_offset`` is past
    the log end offset. In a cluster the partition's leader is asked; when
    it moves (NotLeaderOrFollower, a lost connection) the new one is found
    through the metadata and the read continues from where it was, and a
    new leader's high watermark is waited for (up to the request timeout)
    while it trails the planned end. ``security``: TLS and SASL of the connections (client/security.py).

    ``local_read`` (with ``whole_fetches``): ``auto`` reads the segment files directly when the leader
    is on this host and grants it (client/local_read.py), every batch checked again, and reads on over
    the network from wherever that stops; ``true`` the same, warning when it cannot; ``false`` never.
    """
    start, end = int(start_offset), int(end_offset)
    if start < 0 or end < start:
        raise InvalidRequest(f"invalid offset range [{start}, {end}) for {topic}-{partition}")
    if start == end:
        return
    if local_read not in MODES:
        raise InvalidRequest(f"local_read must be one of {', '.join(MODES)}, got {local_read!r}")
    tune_for_fetches()  # fetch-sized blocks stay in the process: no page faults per answer
    client = NetworkClient(
        bootstrap,
        client_id=client_id or "logsource-reader",
        request_timeout_ms=request_timeout_ms,
        threaded=False,
        security=security,
    )
    retry: Retry | None = None
    conn: BrokerConnection | None = None
    replicated = False
    isolation = READ_COMMITTED if read_committed else READ_UNCOMMITTED
    # whole_fetches: the next fetch is sent before this one's answer is decoded and handed on, so the
    # broker reads and sends it while the task converts (as Kafka's consumer and librdkafka prefetch)
    ahead: tuple[int, int, PendingResponse] | None = None

    def fetch(at: int, size: int) -> FetchRequest:
        return FetchRequest(
            [FetchPartition(topic, partition, at, size)],
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=size,
            isolation_level=isolation,
        )

    try:
        pos = start
        size = max(int(max_bytes), 1024)
        if whole_fetches and local_read != "false":
            reached = [pos]
            yield from read_local_first(
                client, topic, partition, pos, end, size, read_committed, check_crc, local_read, reached
            )
            pos = reached[0]
        while pos < end:
            failure: LogSourceError | None = None
            sent, ahead = ahead, None
            try:
                if conn is None or conn.closed:
                    sent = None
                    conn = client.node_connection(client.leader_for(topic, partition))
                    replicated = _replicated(client, topic, partition)
                if sent is not None and sent[:2] == (pos, size):
                    resp = sent[2].result()
                else:
                    resp = conn.request(fetch(pos, size))
            except (NetworkError, LeaderNotAvailable) as e:
                failure = e
            else:
                p = next((x for x in resp.partitions if x.topic == topic and x.partition == partition), None)
                if p is None and resp.throttle_time_ms > 0:
                    continue  # over a fetch quota: no data; the connection waits out the throttle (KIP-219)
                if p is None:
                    raise CorruptRecord(f"fetch response has no data for {topic}-{partition}")
                if p.error_code in ROUTING_ERRORS:
                    failure = error_for_code(p.error_code, f"fetch {topic}-{partition} at offset {pos}")
                elif (
                    not p.error_code
                    and end > p.high_watermark >= 0
                    and pos >= p.high_watermark
                    and replicated
                ):
                    # a new leader's high watermark trails the old one's until its followers fetch again
                    failure = OffsetOutOfRange(
                        f"range end {end} of {topic}-{partition} is past the high watermark {p.high_watermark}"
                    )
            if failure is not None:
                # the leader moved or is being elected: ask the metadata for the new one and retry
                retry = retry or Retry(request_timeout_ms / 1000.0)
                retry.wait(failure)
                conn = None
                client.refresh_quietly([topic])
                continue
            if p.error_code:
                err = error_for_code(p.error_code, "")
                if isinstance(err, OffsetOutOfRange):
                    raise OffsetOutOfRange(
                        f"offset {pos} of {topic}-{partition} is out of range: log start {p.log_start_offset}, "
                        f"log end {p.high_watermark}"
                    )
                raise error_for_code(p.error_code, f"fetch {topic}-{partition} at offset {pos}")
            # read_committed: the planned end is at most the last stable offset the planner saw
            stable = (
                p.last_stable_offset if read_committed and p.last_stable_offset >= 0 else p.high_watermark
            )
            if end > stable >= 0 and not replicated:
                raise OffsetOutOfRange(
                    f"range end {end} of {topic}-{partition} is past the log end offset {p.high_watermark}"
                    + (f" (last stable offset {stable})" if stable != p.high_watermark else "")
                )
            data = p.records
            progressed = False
            if data and whole_fetches:
                headers = iter_headers(data, check_crc=check_crc)
                after = headers[-1][1].next_offset if headers else pos
                # not while a fetch quota throttles the connection (KIP-219): submit() would wait out the
                # throttle before this answer's rows are handed on; the next fetch then goes out after them
                if pos < after < end and not conn.closed and conn.throttled_until <= time.monotonic():
                    ahead = (after, size, conn.submit(fetch(after, size)))
                rb, pos, progressed = _decode_whole(
                    data,
                    pos,
                    end,
                    p.aborted_transactions if read_committed else None,
                    read_committed,
                    headers,
                    check_crc,
                )
                if rb is not None and rb.num_rows:
                    yield rb
            elif data:
                committed = CommittedFilter(p.aborted_transactions) if read_committed else None
                for bpos, h in iter_headers(data):
                    if h.next_offset <= pos:
                        continue
                    if h.is_control or (committed is not None and committed.drop(data, bpos, h)):
                        # a transaction marker holds no records; an aborted transaction's are dropped
                        pos = h.next_offset
                        progressed = True
                        if pos >= end:
                            break
                        continue
                    rb = decode(data, bpos, check_crc=check_crc).to_arrow()
                    if h.last_offset_delta + 1 == h.record_count:  # consecutive offsets: base + i
                        lo = max(0, pos - h.base_offset)
                        hi = min(h.record_count, end - h.base_offset)
                    else:  # a compacted batch: offsets with gaps, found by search
                        offs = rb.column(2).to_numpy()
                        lo, hi = (int(x) for x in np.searchsorted(offs, [pos, end]))
                    if lo or hi < h.record_count:
                        rb = rb.slice(lo, hi - lo)
                    pos = h.next_offset
                    progressed = True
                    if rb.num_rows:
                        yield rb
                    if pos >= end:
                        break
            if pos >= end:
                break
            if progressed:
                retry = None  # a fresh budget for the next leader change
            if not data and p.error_code == 0:
                # nothing at or after ``pos`` below the high watermark: compaction removed the
                # rest of the range (a gap up to the log end), which is not data loss
                break
            if not progressed:
                if data:
                    need = read_header(data, 0).size
                    if need > size and need <= _MAX_FETCH_GROWTH:
                        size = need  # one batch larger than max_bytes: ask for all of it
                        continue
                raise OffsetOutOfRange(
                    f"no records at offset {pos} of {topic}-{partition} although the log ends at {p.high_watermark}"
                )
    finally:
        client.close()


def _decode_whole(
    data: bytes | bytearray | memoryview,
    pos: int,
    end: int,
    aborted: object,
    read_committed: bool,
    headers: list,
    check_crc: bool,
) -> tuple[pa.RecordBatch | None, int, bool]:
    """(records of ``data`` in ``[pos, end)`` as one batch, the next position, whether it moved).

    The response is decoded as one run (format.to_arrow: a handful of
    vectorised calls and one copy of the keys and values, instead of a few
    dozen pyarrow objects per stored batch and a later concatenation).
    """
    # one walk of the headers (with the CRC check, by the caller) serves the range check, the
    # read_committed filter and the decoding: it was three, a third of a Spark read's Python CPU
    if not headers or headers[-1][1].next_offset <= pos:
        return None, pos, False
    clean = committed_only(data, aborted, headers) if read_committed else data
    t = to_arrow(clean, pos, end, check_crc=check_crc, fast=True, walked=headers if clean is data else None)
    rb = t.combine_chunks().to_batches()[0] if t.num_rows else None
    return rb, headers[-1][1].next_offset, True


def _replicated(client: NetworkClient, topic: str, partition: int) -> bool:
    """True if the partition has more than one replica (its high watermark may trail after a failover)."""
    t = client.cluster.topics.get(topic)
    return t is not None and any(p.partition == partition and len(p.replicas) > 1 for p in t.partitions)
