"""The reader's side of a local short-circuit read: ``read_range`` on the broker's host reads the
segment files through descriptors the broker hands over (see ``broker/local_read.py``).

The grant is asked for on the reader's own Kafka connection (so the broker checks its principal as
for a Fetch), then redeemed on the broker's Unix socket for one descriptor per file region. Every
batch read from a file is checked again before its rows are used: whole batches (the walk with
CRC-32C), the first batch of a region at the offset the broker named, offsets in order with no
overlap, no leader epoch past the grant's, records as the decode checks them, and nothing past the
grant's end. Anything else (a file truncated or rewritten after the grant, a short read, a refused
grant) ends the local read at the offset reached: :func:`read_local` returns it and ``read_range``
reads on from there over the network. Rows are never taken from a batch that failed a check.
"""

from __future__ import annotations

import array
import logging
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import CorruptRecord, LogSourceError
from ..format import direct, iter_headers, read_header, to_arrow
from ..format._speedups import crecords
from ..format.header import HAS_KEY_NULLS, HEADER_SIZE, TXN_BITS, BatchHeader
from ..protocol import local_read_messages as lrm
from ..protocol.messages import AbortedTransaction
from .committed import CommittedFilter

log = logging.getLogger(__name__)

#: ``localRead``: auto (when the broker offers it), true (the same, with a warning when it cannot),
#: false (never)
MODES = ("auto", "true", "false")

_CLOEXEC = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
_stats_lock = threading.Lock()
#: counts of this process's local reads: granted (descriptors received), unavailable (no grant or no
#: descriptors: network read), fallbacks (a check failed mid-read: network read from there),
#: batches and bytes read from files, and of those batches the ones read in pieces (``format.direct``)
STATS = {"granted": 0, "unavailable": 0, "fallbacks": 0, "batches": 0, "bytes": 0, "pieces": 0}


def _count(name: str, n: int = 1) -> None:
    with _stats_lock:
        STATS[name] += n


class LocalReadFailed(Exception):
    """A check failed on a file's bytes: the local read ends at the offset reached (not a user error)."""


@dataclass
class LocalGrant:
    """A redeemed grant: the bounds the broker gave and one open descriptor per region (owned)."""

    end: int
    leader_epoch: int
    aborted: list[AbortedTransaction]
    regions: list[tuple[int, lrm.LocalReadRegion]] = field(default_factory=list)
    #: offsets may have gaps between batches (a compacted topic); otherwise a gap ends the local read
    compacted: bool = False

    def close(self) -> None:
        for fd, _ in self.regions:
            try:
                os.close(fd)
            except OSError:
                pass
        self.regions = []


def redeem(path: str, token: bytes, count: int, timeout_s: float = 5.0) -> list[int] | None:
    """The ``count`` descriptors of ``token`` from the broker's socket at ``path``; None if refused."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(path)
        s.sendall(lrm.MAGIC + bytes(token))
        msg, fds = _recv_fds(s, max(count, 1))
    if len(msg) == lrm.ANSWER.size:
        status, n = lrm.ANSWER.unpack(msg)
        if status == lrm.OK and n == count == len(fds):
            return list(fds)
    for fd in fds:
        os.close(fd)
    return None


def _recv_fds(s: socket.socket, maxfds: int) -> tuple[bytes, list[int]]:
    """socket.recv_fds, close-on-exec (a process the task starts meanwhile does not inherit the broker's
    files; Python 3.11's recv_fds drops its ``flags``)."""
    size = array.array("i").itemsize
    msg, anc, _, _ = s.recvmsg(lrm.ANSWER.size, socket.CMSG_LEN(maxfds * size), _CLOEXEC)
    fds = array.array("i")
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % size)])
    return msg, list(fds)


def request_grant(
    conn: Any, topic: str, partition: int, start: int, read_committed: bool
) -> LocalGrant | None:
    """A grant for ``[start, ...)`` of the partition on this connection's broker, its descriptors
    received; None when there is none (an older broker, another host, no socket, a refusal: the
    network read then answers, with the same error if the broker refused)."""
    if not conn.supports(lrm.LOCAL_READ_GRANT_KEY):
        return None
    try:
        resp = conn.request(lrm.LocalReadGrantRequest(topic, partition, start, 1 if read_committed else 0))
    except LogSourceError as e:
        log.debug("local read of %s-%d refused: %s", topic, partition, e)
        return None
    if not resp.token or not resp.regions or resp.host_id != lrm.host_id():
        return None
    try:
        fds = redeem(resp.socket_path, resp.token, len(resp.regions))
    except OSError as e:
        log.debug("local read socket %s: %s", resp.socket_path, e)
        return None
    if fds is None:
        return None
    return LocalGrant(
        resp.end_offset,
        resp.leader_epoch,
        [AbortedTransaction(pid, first) for pid, first in resp.aborted_transactions],
        list(zip(fds, resp.regions, strict=True)),
        resp.compacted,
    )


def _pread_exact(fd: int, n: int, position: int) -> bytes:
    try:
        data = os.pread(fd, n, position)
    except OSError as e:  # EIO, a bad descriptor: the network read answers instead
        raise LocalReadFailed(f"read at {position} failed: {e}") from e
    if len(data) != n:
        raise LocalReadFailed(f"short read: {len(data)} of {n} bytes at {position}")
    return data


def _pread_into(fd: int, buf: bytearray, n: int, position: int) -> memoryview:
    """``n`` bytes at ``position`` read into ``buf`` (reused: no fresh pages to fault in per chunk)."""
    view = memoryview(buf)[:n]
    try:
        got = os.preadv(fd, [view], position)
    except OSError as e:
        raise LocalReadFailed(f"read at {position} failed: {e}") from e
    if got != n:
        raise LocalReadFailed(f"short read: {got} of {n} bytes at {position}")
    return view


def _preadv_exact(fd: int, views: list, position: int) -> None:
    """Fill ``views`` from the file's bytes at ``position`` on, end to end."""
    n = sum(len(v) for v in views)
    try:
        got = os.preadv(fd, views, position) if n else 0
    except OSError as e:
        raise LocalReadFailed(f"read at {position} failed: {e}") from e
    if got != n:
        raise LocalReadFailed(f"short read: {got} of {n} bytes at {position}")


#: batches from this size on are read in pieces (three reads each, to save copying their values once):
#: ``benchmarks/local_read_pieces.py`` measured pieces 1.16x the whole read's CPU at 68 KiB batches,
#: 0.99x at 135 KiB and 0.87x at 270 KiB
PIECES_MIN_BATCH = 128 << 10

#: a buffer every byte of which is read into before it is used (no zero-fill of a fetch's size)
_unfilled = bytearray if crecords is None else crecords.unfilled_bytearray


class _Scratch:
    """The read buffer one local read reuses from chunk to chunk, while no decoded batch points into it
    (the compiled Arrow decode copies the rows out; a decode that keeps views of it gets a new one)."""

    def __init__(self) -> None:
        self.buf: bytearray | None = None

    def get(self, n: int) -> bytearray:
        """A buffer of at least ``n`` bytes (a small region does not zero-fill a whole fetch's size)."""
        if self.buf is None or len(self.buf) < n:
            self.buf = bytearray(n)
        return self.buf

    def release_if_referenced(self, rb: pa.RecordBatch | None) -> None:
        """Give up the buffer when ``rb`` holds memory of it (the next chunk then reads into a new one)."""
        if self.buf is None or rb is None:
            return
        lo = pa.py_buffer(self.buf).address
        hi = lo + len(self.buf)
        for col in rb.columns:
            for b in col.buffers():
                if b is not None and b.address < hi and lo < b.address + b.size:
                    self.buf = None
                    return


@dataclass
class _Pieces:
    """Whole batches read in pieces (``format.direct``): their heads, and their keys and values end to
    end; ``walked`` holds each head's position in ``heads``."""

    heads: bytearray
    walked: list
    keys: Any
    values: Any
    key_ends: list[int]
    value_ends: list[int]
    nbytes: int  # of the file read

    def cut(self, i: int) -> _Pieces:
        """The first ``i`` (>= 1) batches."""
        k, v = self.key_ends[i - 1], self.value_ends[i - 1]
        return _Pieces(
            self.heads,
            self.walked[:i],
            memoryview(self.keys)[:k],
            memoryview(self.values)[:v],
            self.key_ends[:i],
            self.value_ends[:i],
            sum(h.size for _, h in self.walked[:i]),
        )


def _read_pieces(fd: int, cur: int, limit: int, size: int, check_crc: bool, txn_ok: bool) -> _Pieces | None:
    """The batches a direct read takes from ``cur`` on (about ``size`` bytes, at least one, up to the
    first it does not take), read in pieces; None when the batch at ``cur`` is not one of them (the
    caller reads it whole). LocalReadFailed on a short read or a bad CRC."""
    found: list[tuple[int, bytes, BatchHeader, int]] = []  # position, header bytes, header, arrays size
    pos, total, keyless = cur, 0, None
    while pos + HEADER_SIZE <= limit and total < size:
        raw = _pread_exact(fd, HEADER_SIZE, pos)
        try:
            h = read_header(raw)
        except CorruptRecord as e:
            raise LocalReadFailed(str(e)) from e
        a = direct.arrays_size(h)
        kn = bool(h.attributes & HAS_KEY_NULLS)
        if (
            a < 0
            or h.size < PIECES_MIN_BATCH
            or kn != (kn if keyless is None else keyless)
            or (not txn_ok and h.attributes & TXN_BITS)
        ):
            break
        if pos + h.size > limit or (found and total + h.size > size):
            break  # past the region's end: the whole read reports it
        found.append((pos, raw, h, a))
        keyless = kn
        pos += h.size
        total += h.size
    if not found:
        return None
    heads = _unfilled(sum(HEADER_SIZE + a for _, _, _, a in found))
    hv = memoryview(heads)
    walked, at = [], 0
    for p, raw, h, a in found:
        hv[at : at + HEADER_SIZE] = raw
        _preadv_exact(fd, [hv[at + HEADER_SIZE : at + HEADER_SIZE + a]], p + HEADER_SIZE)
        walked.append((at, h))
        at += HEADER_SIZE + a
    sizes = [
        direct.key_value_sizes(h, hv[q + HEADER_SIZE : q + HEADER_SIZE + a])
        for (q, h), (_, _, _, a) in zip(walked, found, strict=True)
    ]
    if any(k < 0 for k, _ in sizes):
        raise LocalReadFailed(f"a batch's offsets do not fill it, at or after position {cur}")
    keys = _unfilled(sum(k for k, _ in sizes))
    values = _unfilled(sum(v for _, v in sizes))
    kv, vv = memoryview(keys), memoryview(values)
    key_ends: list[int] = []
    value_ends: list[int] = []
    k0 = v0 = 0
    for (q, h), (p, _, _, a), (k, v) in zip(walked, found, sizes, strict=True):
        kp, vp = kv[k0 : k0 + k], vv[v0 : v0 + v]
        _preadv_exact(fd, [kp, vp], p + HEADER_SIZE + a)
        if check_crc and not direct.crc_matches(h, hv[q : q + HEADER_SIZE + a], kp, vp):
            raise LocalReadFailed(f"CRC mismatch in batch at offset {h.base_offset} (position {p})")
        k0, v0 = k0 + k, v0 + v
        key_ends.append(k0)
        value_ends.append(v0)
    return _Pieces(heads, walked, keys, values, key_ends, value_ends, total)


def _chunks(
    fd: int,
    region: lrm.LocalReadRegion,
    size: int,
    check_crc: bool,
    scratch: _Scratch | None = None,
    txn_ok: bool | None = None,
) -> Iterator[tuple[Any, list]]:
    """(bytes, walked headers) of whole batches of ``region``, about ``size`` bytes each; the region's
    bytes exactly (a batch crossing its end, a short read or a bad CRC: LocalReadFailed). With
    ``scratch``, chunks are views of its buffer, valid until the next one is read. With ``txn_ok`` set
    (False: transactional batches are read whole), large plain Arrow-body batches come in pieces
    (:class:`_Pieces` for the bytes, ``format.direct``), their keys and values read straight into
    their columns' buffers."""
    cur, limit = region.position, region.position + region.length
    while cur < limit:
        if txn_ok is not None:
            pieces = _read_pieces(fd, cur, limit, size, check_crc, txn_ok)
            if pieces is not None:
                yield pieces, pieces.walked
                cur += pieces.nbytes
                continue
        want = min(size, limit - cur)
        data = (
            _pread_exact(fd, want, cur) if scratch is None else _pread_into(fd, scratch.get(want), want, cur)
        )
        try:
            headers = iter_headers(data, check_crc=check_crc)
            if not headers:  # one batch larger than ``size``: read all of it
                if want < HEADER_SIZE:
                    raise LocalReadFailed(f"a batch crosses the region's end at {cur}")
                need = read_header(data, 0).size
                if need <= want or cur + need > limit:
                    raise LocalReadFailed(f"a batch of {need} bytes crosses the region's end at {cur}")
                data = _pread_exact(fd, need, cur)
                headers = iter_headers(data, check_crc=check_crc)
                if not headers:
                    raise LocalReadFailed(f"no whole batch at {cur}")
        except CorruptRecord as e:
            raise LocalReadFailed(str(e)) from e
        last_pos, last = headers[-1]
        used = last_pos + last.size
        yield (data if used == len(data) else memoryview(data)[:used]), headers
        cur += used


def read_local(
    grant: LocalGrant, pos: int, end: int, size: int, read_committed: bool, check_crc: bool, out: list
) -> Iterator[pa.RecordBatch]:
    """Record batches of ``[pos, min(end, grant.end))`` from the granted files; ``out[0]`` is set to the
    offset reached (the caller reads on from it over the network, after a failed check too)."""
    stop = min(end, grant.end)
    committed = CommittedFilter(grant.aborted) if read_committed else None
    after = None  # the next offset after the last batch checked (offsets in order, no overlap)
    out[0] = pos
    scratch = _Scratch()
    try:
        for fd, region in grant.regions:
            if pos >= stop:
                break
            first = True
            for data, headers in _chunks(fd, region, size, check_crc, scratch, committed is None):
                bad = None
                for i, (_, h) in enumerate(headers):
                    bad = _mismatch(h, region.first_offset if first else None, after, grant)
                    if bad is not None:
                        headers = headers[:i]  # the batches before it passed: their rows are used
                        break
                    first, after = False, h.next_offset
                if headers and headers[0][1].base_offset < stop:
                    last_pos, last = headers[-1]
                    if bad is not None:
                        data = (
                            data.cut(len(headers))
                            if type(data) is _Pieces
                            else memoryview(data)[: last_pos + last.size]
                        )
                    try:
                        rb = _decode(data, headers, pos, stop, committed, check_crc)
                    except CorruptRecord as e:  # records the network path would refuse too: it says so
                        raise LocalReadFailed(str(e)) from e
                    scratch.release_if_referenced(rb)
                    _count("batches", len(headers))
                    if type(data) is _Pieces:
                        _count("pieces", len(headers))
                    _count("bytes", data.nbytes if type(data) is _Pieces else len(data))
                    pos = out[0] = min(last.next_offset, stop)  # rows past ``stop`` were cut
                    if rb is not None and rb.num_rows:
                        yield rb
                if bad is not None:
                    raise LocalReadFailed(bad)
                if pos >= stop or headers[0][1].base_offset >= stop:
                    return
    except LocalReadFailed as e:
        _count("fallbacks")
        log.info("local read stops at offset %d (reading on over the network): %s", out[0], e)


def _mismatch(h: Any, first: int | None, after: int | None, grant: LocalGrant) -> str | None:
    """Why batch ``h`` is not what the grant's file held (None: it is): the region's first batch at the
    offset the broker named, no overlap, no gap unless compacted, no leader epoch past the grant's."""
    if first is not None and h.base_offset != first:
        return f"the region starts at offset {h.base_offset}, not {first}"
    if after is not None and (h.base_offset < after or (h.base_offset > after and not grant.compacted)):
        return f"batch at offset {h.base_offset} where {after} was next"
    if h.leader_epoch > grant.leader_epoch:
        return f"batch of leader epoch {h.leader_epoch} after the grant's {grant.leader_epoch}"
    return None


def _decode(
    data: Any, headers: list, pos: int, stop: int, committed: CommittedFilter | None, check_crc: bool
) -> pa.RecordBatch | None:
    """The records of ``data`` in ``[pos, stop)`` as one batch (read_range's whole-fetch decode), the
    read_committed filter applied with one filter across the whole read, as a consumer does."""
    if type(data) is _Pieces:  # read with ``txn_ok``: no batch for the read_committed filter to drop
        try:
            t = direct.direct_to_arrow(data.heads, data.walked, data.keys, data.values, pos, stop)
        except CorruptRecord as e:
            raise LocalReadFailed(str(e)) from e
        return t.combine_chunks().to_batches()[0] if t.num_rows else None
    clean = data
    if committed is not None and any(h.attributes & TXN_BITS for _, h in headers):
        keep = bytearray()
        for bpos, h in headers:
            if not committed.drop(data, bpos, h):
                keep += data[bpos : bpos + h.size]
        clean = memoryview(bytes(keep))
    if not len(clean):
        return None
    try:
        t = to_arrow(
            clean, pos, stop, check_crc=check_crc, fast=True, walked=headers if clean is data else None
        )
    except CorruptRecord as e:
        raise LocalReadFailed(str(e)) from e
    return t.combine_chunks().to_batches()[0] if t.num_rows else None


def read_local_first(
    client: Any,
    topic: str,
    partition: int,
    pos: int,
    end: int,
    size: int,
    read_committed: bool,
    check_crc: bool,
    mode: str,
    out: list,
) -> Iterator[pa.RecordBatch]:
    """``read_range``'s local part: a grant from the partition's leader and :func:`read_local` on it;
    ``out[0]`` is the offset reached (``pos`` when there was no grant)."""
    out[0] = pos
    grant = None
    try:
        conn = client.node_connection(client.leader_for(topic, partition))
        grant = request_grant(conn, topic, partition, pos, read_committed)
    except LogSourceError as e:
        log.debug("local read of %s-%d: no grant: %s", topic, partition, e)
    if grant is None:
        _count("unavailable")
        if mode == "true":
            log.warning("localRead=true: %s-%d is read over the network (no local grant)", topic, partition)
        return
    _count("granted")
    try:
        yield from read_local(grant, pos, end, size, read_committed, check_crc, out)
    finally:
        grant.close()
