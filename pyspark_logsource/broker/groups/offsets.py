"""Durable group offsets: the internal topic ``__consumer_offsets``.

On a single broker the topic is the broker's own log. In a cluster it is a
replicated topic and each partition's groups live on its leader (see
:mod:`.ownership`): they are loaded when the broker becomes the leader and
dropped when it stops, and a commit counts once the ISR has it.

Why a topic and not a file: it is how Kafka does it, it reuses the log's
durability (CRC, recovery, flush policy) instead of inventing a second one,
and one commit is one appended batch (O(partitions in the commit), not
O(all groups) as rewriting a snapshot file would be). The state is a map
``(group, topic, partition) -> (offset, metadata, leader epoch)`` rebuilt on start by
replaying the topic in order; the last record for a key wins (what log
compaction would keep), a record without a value is a tombstone (written when
a topic is deleted).

The topic follows the broker's flush policy, like the data the offsets point
into: a process crash (``kill -9``) loses no acknowledged commit (the page
cache survives it), a machine crash loses at most ``log.flush.interval.ms`` of
commits, which is safe (consumers re-read a little) and never leaves a commit
pointing past data that was lost with it. An fsync per commit would stall the
event loop for milliseconds. ``retention.ms`` = ``offsets.retention.minutes``:
like Kafka, offsets of a group that has not committed for that long expire.
"""

from __future__ import annotations

import logging
import struct
import time
import zlib
from typing import TYPE_CHECKING, NamedTuple

from ... import format as fmt
from ...errors import LogSourceError, TopicAlreadyExists
from ...format.control import COMMIT, set_transactional
from ...topics import OFFSETS_TOPIC
from ..log import LogManager

if TYPE_CHECKING:
    from ..log.log import PartitionLog

log = logging.getLogger(__name__)

_KEY_VERSION = 1
#: key version of a group's membership record (Kafka's GroupMetadataKey is version 2 too); the
#: value is the coordinator's own encoding, the last one per group wins (compaction keeps it)
_GROUP_KEY_VERSION = 2
_VALUE = struct.Struct(">hqq")  # version 0: version, offset, commit timestamp ms; then metadata utf-8
#: version 1 adds the committed leader epoch (Kafka's OffsetCommitValue v3 ``leader_epoch``); a version 0
#: value (written before it) reads as epoch -1, "unknown", as Kafka reads its v1/v2 values
_VALUE_V1 = struct.Struct(">hqqi")


class CommittedOffset(NamedTuple):
    """A committed position of a group in one partition."""

    offset: int
    metadata: str | None
    commit_timestamp: int
    #: the leader epoch of the record before ``offset`` as the consumer saw it (-1: unknown); a consumer
    #: resuming from the offset validates it against the log (KIP-320) to detect truncation
    leader_epoch: int = -1


#: one committed position as a handler hands it in: (topic, partition, offset, metadata, leader epoch)
OffsetEntry = tuple[str, int, int, str | None, int]


def _encode_key(group: str, topic: str, partition: int) -> bytes:
    g, t = group.encode(), topic.encode()
    return struct.pack(f">hH{len(g)}sH{len(t)}si", _KEY_VERSION, len(g), g, len(t), t, partition)


def _decode_key(key: bytes) -> tuple[str, str, int] | None:
    try:
        version, glen = struct.unpack_from(">hH", key, 0)
        if version != _KEY_VERSION:
            return None
        g = key[4 : 4 + glen].decode()
        (tlen,) = struct.unpack_from(">H", key, 4 + glen)
        pos = 6 + glen
        t = key[pos : pos + tlen].decode()
        (partition,) = struct.unpack_from(">i", key, pos + tlen)
        return g, t, partition
    except (struct.error, UnicodeDecodeError):
        return None


def _encode_group_key(group: str) -> bytes:
    g = group.encode()
    return struct.pack(f">hH{len(g)}s", _GROUP_KEY_VERSION, len(g), g)


def _decode_group_key(key: bytes) -> str | None:
    try:
        version, glen = struct.unpack_from(">hH", key, 0)
        return key[4 : 4 + glen].decode() if version == _GROUP_KEY_VERSION and len(key) == 4 + glen else None
    except (struct.error, UnicodeDecodeError):
        return None


def _encode_value(offset: int, metadata: str | None, ts: int, leader_epoch: int = -1) -> bytes:
    meta = b"\xff" if metadata is None else b"\x00" + metadata.encode()
    return _VALUE_V1.pack(1, offset, ts, leader_epoch) + meta


def _decode_value(value: bytes) -> CommittedOffset | None:
    try:
        version, offset, ts = _VALUE.unpack_from(value, 0)
        if version == 0:
            epoch, rest = -1, value[_VALUE.size :]
        elif version == 1:
            epoch, rest = _VALUE_V1.unpack_from(value, 0)[3], value[_VALUE_V1.size :]
        else:
            return None
        meta = None if rest[:1] == b"\xff" else rest[1:].decode()
        return CommittedOffset(offset, meta, ts, epoch)
    except (struct.error, UnicodeDecodeError):
        return None


class OffsetWrite(NamedTuple):
    """Offsets appended to ``__consumer_offsets`` and not yet applied to the in-memory map (see
    :meth:`GroupOffsetStore.append_commit`): ``end_offset`` is what must reach the ISR first."""

    group: str
    partition: int
    base_offset: int
    end_offset: int
    entries: list[OffsetEntry]
    timestamp: int


class GroupOffsetStore:
    """Committed offsets per group, persisted in ``__consumer_offsets``; used from one event loop.

    On a single broker (``replicated=False``) the topic is this broker's own log, made if missing,
    and every partition is loaded at once. In a cluster (``replicated=True``) it is a replicated
    topic: nothing is loaded until this broker leads a partition (:meth:`load_partition`), and a
    partition's groups are dropped when it stops leading it (:meth:`unload_partition`); the map
    holds the groups of the loaded partitions only.
    """

    def __init__(
        self,
        logs: LogManager,
        num_partitions: int = 1,
        retention_ms: int = 7 * 24 * 3600 * 1000,
        max_message_bytes: int = 100 * 1024 * 1024,
        replicated: bool = False,
    ) -> None:
        self.logs = logs
        self.replicated = replicated
        self.offsets: dict[tuple[str, str, int], CommittedOffset] = {}
        #: group -> its last membership record (see :mod:`.coordinator`)
        self.group_meta: dict[str, bytes] = {}
        #: the topic's overrides (where the cluster creates it, :mod:`.ownership` uses them too)
        self.topic_config = {"retention.ms": str(retention_ms), "max.message.bytes": str(max_message_bytes)}
        #: partitions whose groups are in the maps
        self.loaded: set[int] = set()
        #: replicated: the log offset of the record each applied key comes from (a late write never wins)
        self._applied_at: dict[tuple[str, str, int], int] = {}
        self.num_partitions = num_partitions
        #: producer id -> offsets of its open transaction (TxnOffsetCommit), applied by its COMMIT marker
        self.pending: dict[int, dict[tuple[str, str, int], CommittedOffset]] = {}
        self._pending_loaded: dict[int, dict[int, dict[tuple[str, str, int], CommittedOffset]]] = {}
        if replicated:
            return
        if OFFSETS_TOPIC not in logs.topics():
            try:
                logs.create_topic(OFFSETS_TOPIC, num_partitions, dict(self.topic_config))
                log.info("created internal topic %s with %d partitions", OFFSETS_TOPIC, num_partitions)
            except TopicAlreadyExists:
                pass
        self.num_partitions = logs.topics()[OFFSETS_TOPIC]
        t0 = time.monotonic()
        records = sum(self._replay(p) for p in range(self.num_partitions))
        log.info(
            "loaded %d committed offsets from %d records of %s in %.1f ms",
            len(self.offsets),
            records,
            OFFSETS_TOPIC,
            (time.monotonic() - t0) * 1000,
        )

    def _replay(self, partition: int) -> int:
        """Read one partition into the maps; returns how many records it read."""
        offsets, meta, records = self.read_partition(partition)
        self.install_partition(partition, offsets, meta)
        return records

    def read_partition(
        self, partition: int
    ) -> tuple[dict[tuple[str, str, int], CommittedOffset], dict[str, bytes], int]:
        """A partition's offsets and membership records as its log has them, and how many records it read.
        Touches none of the maps: a leader loads a partition on a worker thread (nothing appends to it
        until it is installed)."""
        offsets: dict[tuple[str, str, int], CommittedOffset] = {}
        group_meta: dict[str, bytes] = {}
        records = 0
        lg = self.logs.get_log(OFFSETS_TOPIC, partition)
        # last value per raw key wins, as compaction would keep it; dict.update over
        # Arrow columns does that in C, so only the surviving keys are decoded in Python
        latest: dict[bytes | None, bytes | None] = {}
        # a transaction's offsets (TxnOffsetCommit) count from its COMMIT marker on, at the marker's place
        open_txns: dict[int, dict[bytes | None, bytes | None]] = {}
        offset, end = lg.log_start_offset, lg.log_end_offset
        while offset < end:
            data = lg.read_checked(offset, 8 << 20)
            batches = fmt.decode_all(data, check_crc=False)  # read_checked verified every CRC
            if not batches:
                break
            for rb in batches:
                t = rb.to_arrow()
                records += t.num_rows
                h = rb.header
                pairs = zip(t.column("key").to_pylist(), t.column("value").to_pylist(), strict=True)
                if h.is_control:
                    done = open_txns.pop(h.producer_id, {})
                    key = t.column("key")[0].as_py()
                    if key is not None and len(key) >= 4 and struct.unpack_from(">h", key, 2)[0] == COMMIT:
                        latest.update(done)
                elif h.is_transactional:
                    open_txns.setdefault(h.producer_id, {}).update(pairs)
                else:
                    latest.update(pairs)
            offset = batches[-1].header.next_offset
        self._pending_loaded[partition] = {
            pid: {
                k: v
                for k, v in ((_decode_key(rk), _decode_value(rv)) for rk, rv in kv.items() if rk and rv)
                if k and v
            }
            for pid, kv in open_txns.items()
        }
        for raw_key, raw_value in latest.items():
            if raw_key is None:
                continue
            gkey = _decode_group_key(raw_key)
            if gkey is not None:
                if raw_value is not None:
                    group_meta[gkey] = raw_value
                continue
            key = _decode_key(raw_key)
            if key is None:
                continue
            value = _decode_value(raw_value) if raw_value is not None else None
            if value is not None:  # a tombstone: the key's last record says it is gone
                offsets[key] = value
        return offsets, group_meta, records

    def install_partition(
        self,
        partition: int,
        offsets: dict[tuple[str, str, int], CommittedOffset],
        group_meta: dict[str, bytes],
    ) -> None:
        """Make a partition's groups (from :meth:`read_partition`) the ones the maps hold for it."""
        self.unload_partition(partition)
        self.offsets.update(offsets)
        self.group_meta.update(group_meta)
        for pid, kv in self._pending_loaded.pop(partition, {}).items():
            self.pending.setdefault(pid, {}).update(kv)
        self.loaded.add(partition)

    def load_partition(self, partition: int, num_partitions: int) -> dict[str, bytes]:
        """Replicated: this broker now leads ``partition`` of a ``num_partitions`` topic; read its offsets and
        membership records (the log is what the ISR has: a leader is elected from it). Returns the
        membership records of its groups, for the coordinator."""
        self.num_partitions = num_partitions
        offsets, meta, _ = self.read_partition(partition)
        self.install_partition(partition, offsets, meta)
        return meta

    def unload_partition(self, partition: int) -> set[str]:
        """Forget the groups of ``partition`` (this broker stopped leading it); returns their ids."""
        self.loaded.discard(partition)
        gone = {g for g, _, _ in self.offsets if self.partition_for(g) == partition}
        gone.update(g for g in self.group_meta if self.partition_for(g) == partition)
        if gone:
            for key in [k for k in self.offsets if k[0] in gone]:
                del self.offsets[key]
                self._applied_at.pop(key, None)
            for g in gone:
                self.group_meta.pop(g, None)
            for kv in self.pending.values():
                for key in [k for k in kv if k[0] in gone]:
                    del kv[key]
        return gone

    def is_loaded(self, group: str) -> bool:
        """Whether the group's partition is loaded (always on a single broker)."""
        return self.partition_for(group) in self.loaded

    def partition_for(self, group: str) -> int:
        """The offsets-topic partition holding ``group`` (stable across runs)."""
        return zlib.crc32(group.encode()) % self.num_partitions

    def _log(self, group: str) -> PartitionLog:
        return self.logs.get_log(OFFSETS_TOPIC, self.partition_for(group))

    def commit(self, group: str, entries: list[OffsetEntry]) -> None:
        """Durably store ``(topic, partition, offset, metadata, leader epoch)`` entries for ``group``, all or nothing
        (a single broker: the append is the commit)."""
        if entries:
            self.apply(self.append_commit(group, entries))

    def append_commit(self, group: str, entries: list[OffsetEntry]) -> OffsetWrite:
        """Append the entries as one batch without applying them: in a cluster they count once replicated."""
        now = int(time.time() * 1000)
        keys = [_encode_key(group, t, p) for t, p, _, _, _ in entries]
        values = [_encode_value(o, m, now, e) for _, _, o, m, e in entries]
        info = self._log(group).append(fmt.encode(values, keys))
        return OffsetWrite(
            group, self.partition_for(group), info.base_offset, info.last_offset + 1, entries, now
        )

    def apply(self, w: OffsetWrite) -> None:
        """Make an appended commit visible (replicated: once it is on the ISR, and only while its partition is
        still loaded; a key already applied from a later record keeps that one)."""
        if not self.replicated:
            for t, p, o, m, e in w.entries:
                self.offsets[(w.group, t, p)] = CommittedOffset(o, m, w.timestamp, e)
            return
        if w.partition not in self.loaded:
            return
        for t, p, o, m, e in w.entries:
            key = (w.group, t, p)
            if self._applied_at.get(key, -1) <= w.base_offset:
                self._applied_at[key] = w.base_offset
                self.offsets[key] = CommittedOffset(o, m, w.timestamp, e)

    # ------------------------------------------------------------ transactional offsets (TxnOffsetCommit)

    def append_txn_offsets(
        self,
        group: str,
        producer_id: int,
        producer_epoch: int,
        entries: list[OffsetEntry],
    ) -> OffsetWrite:
        """Append offsets as a transactional batch of the producer; they stay pending (invisible to
        OffsetFetch) until :meth:`complete_txn` sees the transaction's COMMIT marker, and are dropped on ABORT.
        The log's producer state checks the epoch (an older one is InvalidProducerEpoch)."""
        lg = self._log(group)
        entry = lg.producer_state.producers.get(producer_id)
        seq = 0 if entry is None or entry.epoch != producer_epoch else (entry.last_seq + 1) & 0x7FFFFFFF
        now = int(time.time() * 1000)
        keys = [_encode_key(group, t, p) for t, p, _, _, _ in entries]
        values = [_encode_value(o, m, now, e) for _, _, o, m, e in entries]
        batch = fmt.encode(
            values, keys, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=seq
        )
        set_transactional(batch)
        info = lg.append(batch)
        pending = self.pending.setdefault(producer_id, {})
        for t, p, o, m, e in entries:
            pending[(group, t, p)] = CommittedOffset(o, m, now, e)
        return OffsetWrite(
            group, self.partition_for(group), info.base_offset, info.last_offset + 1, entries, now
        )

    def complete_txn(self, partition: int, producer_id: int, commit: bool, marker_offset: int) -> int:
        """A COMMIT / ABORT marker of ``producer_id`` was written to ``partition``: its pending offsets there
        become the groups' committed offsets (COMMIT) or are dropped; returns how many were committed."""
        pending = self.pending.get(producer_id)
        if not pending:
            return 0
        mine = [k for k in pending if self.partition_for(k[0]) == partition]
        n = 0
        for key in mine:
            value = pending.pop(key)
            if commit and self._applied_at.get(key, -1) <= marker_offset:
                self._applied_at[key] = marker_offset
                self.offsets[key] = value
                n += 1
        if not pending:
            del self.pending[producer_id]
        return n

    def store_group(self, group: str, value: bytes | None) -> int:
        """Append the group's membership record (``None``: a tombstone, the group is gone); returns the log end
        offset after it (in a cluster the record counts once the ISR has it)."""
        data = fmt.encode([value], [_encode_group_key(group)])
        info = self._log(group).append(data)
        if value is None:
            self.group_meta.pop(group, None)
        else:
            self.group_meta[group] = value
        return info.last_offset + 1

    def delete(self, group: str, partitions: list[tuple[str, int]] | None) -> int:
        """Write tombstones for the group's committed offsets of ``partitions`` (None: every one, and its
        membership record: the group is deleted) in one batch, and forget them; returns the log end offset
        after the batch (in a cluster the deletion counts once the ISR has it), -1 if nothing was written."""
        if partitions is None:
            keys = [k for k in self.offsets if k[0] == group]
        else:
            keys = [(group, t, p) for t, p in partitions if (group, t, p) in self.offsets]
        raw_keys = [_encode_key(*k) for k in keys]
        if partitions is None:
            raw_keys.append(_encode_group_key(group))
        if not raw_keys:
            return -1
        info = self._log(group).append(fmt.encode([None] * len(raw_keys), raw_keys))
        for k in keys:
            self.offsets.pop(k, None)
            self._applied_at[k] = info.base_offset  # a commit appended before the tombstone never wins
        if partitions is None:
            self.group_meta.pop(group, None)
        return info.last_offset + 1

    def fetch(
        self, group: str, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], CommittedOffset]:
        """Committed offsets of ``group``; with ``partitions=None`` every partition it committed."""
        if partitions is None:
            return {(t, p): v for (g, t, p), v in self.offsets.items() if g == group}
        out = {}
        for t, p in partitions:
            v = self.offsets.get((group, t, p))
            if v is not None:
                out[(t, p)] = v
        return out

    def committed(self) -> list[tuple[tuple[str, str, int], CommittedOffset]]:
        """Every ((group, topic, partition), committed offset) of the loaded groups (read-only: the metrics)."""
        return list(self.offsets.items())

    def groups(self) -> set[str]:
        """Every group with at least one committed offset."""
        return {g for g, _, _ in self.offsets}

    def forget_topic(self, topic: str) -> None:
        """Write tombstones for every offset committed on ``topic`` (it was deleted). In a cluster the
        tombstones go to the partitions this broker leads (only theirs are loaded), without waiting for
        the ISR: a lost tombstone leaves an offset of a topic that is gone, as before the deletion."""
        by_group: dict[str, list[tuple[str, str, int]]] = {}
        for key in self.offsets:
            if key[1] == topic:
                by_group.setdefault(key[0], []).append(key)
        for group, keys in by_group.items():
            data = fmt.encode([None] * len(keys), [_encode_key(*k) for k in keys])
            try:
                self._log(group).append(data)
            except LogSourceError as e:
                log.warning("group %s: cannot forget the offsets of deleted topic %s: %s", group, topic, e)
                continue
            for k in keys:
                self.offsets.pop(k, None)
                self._applied_at.pop(k, None)
