"""Request handlers: one method per api key, turning a typed request into a typed response.

Handlers run on the broker's event loop. All but Fetch are synchronous (a
log append is a ``pwrite`` to the page cache); Fetch is a coroutine that
parks on per-partition waiters until ``min_bytes`` are available or
``max_wait_ms`` passed (the read and the wait are :mod:`.fetch`'s, shared with
followers' fetches). Errors become per-partition (or per-topic) codes from
:mod:`pyspark_logsource.errors`; nothing a client sends can raise out of here
except a bug, which the server answers with UnknownServerError.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from .. import format as fmt
from ..errors import (
    CoordinatorNotAvailable,
    CorruptRecord,
    InvalidGroupId,
    InvalidPartitions,
    InvalidReplicationFactor,
    InvalidRequest,
    InvalidRequiredAcks,
    InvalidTopic,
    LeaderNotAvailable,
    LogSourceError,
    OffsetNotAvailable,
    TopicAlreadyExists,
    UnknownTopicId,
    UnknownTopicOrPartition,
)
from ..protocol import (
    ARROW_BODY_FEATURE,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    SUPPORTED_VERSIONS,
    ApiKey,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BrokerMetadata,
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    SupportedFeature,
    TopicMetadata,
)
from ..protocol.codecs import new_produce_responses
from ..protocol.messages import EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP, MAX_TIMESTAMP
from ..topics import check_deletable, is_internal, validate_topic_name
from .admin.handlers import AdminHandlers
from .admin.records import RecordsAdminHandlers
from .cluster.handlers import EpochHandlers
from .cluster.replica_admin import ReplicaAdminHandlers
from .cluster.topic_handlers import ClusterTopicHandlers
from .error_responses import error_fields
from .fetch import FetchIsolation, long_poll, read_partitions
from .fetch_sessions import FetchSessionCache
from .groups.admin_handlers import GroupAdminHandlers
from .groups.consumer_handlers import ConsumerGroupHandlers
from .groups.handlers import GroupHandlers
from .groups.topic_ids import resolve_topic_ids, topic_id_of
from .local_read import LocalReadHandlers
from .quotas.handlers import QuotaHandlers
from .session import Session
from .state import topic_error
from .txn.handlers import TxnHandlers

if TYPE_CHECKING:
    from .log import LogManager
    from .state import BrokerState

log = logging.getLogger(__name__)


class Handlers:
    """The request handlers of one broker."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.config = state.config
        #: KIP-227's fetch sessions of this broker's consumers
        self.fetch_sessions = FetchSessionCache(
            state.config.fetch_session_cache_slots, state.config.fetch_session_eviction_ms
        )
        self.by_key: dict[int, Callable[[Any, Session], Any]] = {
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.METADATA: self.metadata,
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
        }
        self.by_key.update(GroupHandlers(state).by_key())
        self.by_key.update(ConsumerGroupHandlers(state).by_key())
        self.by_key.update(AdminHandlers(state).by_key())
        self.by_key.update(GroupAdminHandlers(state).by_key())
        self.by_key.update(RecordsAdminHandlers(state).by_key())
        self.by_key.update(EpochHandlers(state).by_key())
        self.by_key.update(ReplicaAdminHandlers(state).by_key())
        self.by_key.update(QuotaHandlers(state).by_key())
        if state.config.cluster_mode:
            self.by_key.update(ClusterTopicHandlers(state).by_key())
        self.txn = TxnHandlers(state)
        self.by_key.update(self.txn.by_key())
        #: local short-circuit reads: the grant API and the Unix socket that hands out descriptors
        self.local_read = LocalReadHandlers(state)
        self.by_key.update(self.local_read.by_key())

    @property
    def logs(self) -> LogManager:
        return self.state.logs

    def _get_log(self, topic: str, partition: int):
        try:
            return self.logs.get_log(topic, partition)
        except UnknownTopicOrPartition:
            raise topic_error(topic) from None

    # ------------------------------------------------------------ Produce

    def produce(self, req: ProduceRequest, session: Session) -> Any:
        """Append each partition's batches as received (validated, stamped, never re-encoded).

        In a cluster, acks=all (-1) needs min.insync.replicas in the ISR before the append
        (NotEnoughReplicas) and is answered once the high watermark passed the batches
        (a coroutine; RequestTimedOut after ``timeout_ms``). On a single broker acks=all is acks=1.
        """
        if req.transactional_id is not None:  # KIP-890's check first, in arrival order per transactional id
            return self.txn.producer.produce_in_order(req, self._produce)
        return self._produce(req, {})

    def _produce(self, req: ProduceRequest, refused: dict) -> Any:
        """Produce once the transactional partitions are checked: ``refused`` maps a partition to its error."""
        out = []
        repl = self.state.replication
        commits = []  # (response, topic, partition, end offset) awaiting the ISR (acks=all)
        for p in req.partitions:
            r = ProducePartitionResponse(p.topic, p.partition)
            try:
                if refused and (p.topic, p.partition) in refused:
                    raise refused[(p.topic, p.partition)]
                lg = self._produce_log(p.topic, p.partition, req.acks)
                self._check_records(p.records)
                if repl is not None and req.acks == -1:
                    repl.check_min_isr(p.topic, p.partition)
                info = lg.append(p.records)
                r.base_offset = info.base_offset
                r.log_append_time_ms = info.log_append_time
                r.log_start_offset = lg.log_start_offset
                if not info.duplicate:
                    self.state.notify(p.topic, p.partition)
                    if self.state.topic_stats is not None:
                        self.state.topic_stats.appended(p.topic, info.record_count, len(p.records))
                if repl is not None:
                    repl.after_append(p.topic, p.partition)
                    if req.acks == -1:
                        commits.append((r, p.topic, p.partition, info.last_offset + 1))
            except LogSourceError as e:
                r.error_code, r.error_message = error_fields(e)
                r.record_errors = getattr(e, "record_errors", ())
                log.debug("produce to %s-%d failed: %s", p.topic, p.partition, e)
            out.append(r)
        if req.acks == 0:
            return None
        if commits:
            return self._await_commits(commits, ProduceResponse(partitions=out), req.timeout_ms)
        return ProduceResponse(partitions=out)

    def _produce_log(self, topic: str, partition: int, acks: int) -> Any:
        """The log a produce appends to, after the checks of the request and the partition."""
        if acks not in (-1, 0, 1):
            raise InvalidRequiredAcks(f"acks={acks} is not supported (use 0, 1 or -1)")
        if is_internal(topic):
            raise InvalidTopic(f"cannot produce to internal topic {topic!r}")
        self.state.check_leader(topic, partition)
        return self._get_log(topic, partition)

    def _check_records(self, records: Any) -> None:
        if records is None or len(records) == 0:
            raise CorruptRecord("produce request without record batches")
        if not self.config.arrow_body_enable and _has_arrow_body(records):
            raise CorruptRecord(
                "Arrow-bodied batches are disabled on this broker (logsource.arrow.body.enable=false)"
            )

    def produce_runs(self, reqs: list[ProduceRequest], session: Session) -> list[ProduceResponse | None]:
        """Consecutive produce requests of one connection to one partition, each with one partition,
        acks 0 or 1 and no transactional id (the server groups them so): appended together
        (PartitionLog.append_runs: one lock, one write), each answered as :meth:`produce` answers it."""
        first = reqs[0].partitions[0]
        topic, partition, acks = first.topic, first.partition, reqs[0].acks
        answers, rs = new_produce_responses(topic, partition, len(reqs))
        try:
            lg = self._produce_log(topic, partition, acks)
        except LogSourceError as e:
            lg = None
            for r in rs:
                r.error_code, r.error_message = error_fields(e)
            log.debug("produce to %s-%d failed: %s", topic, partition, e)
        if lg is not None:
            runs = [req.partitions[0].records for req in reqs]
            which = rs
            # _check_records' conditions, for the whole run at once (all(): none None or empty); the
            # loop below finds the refused requests and raises their errors
            if not all(runs) or not self.config.arrow_body_enable:
                runs, which = [], []
                arrow_off = not self.config.arrow_body_enable
                for r, req in zip(rs, reqs, strict=True):
                    records = req.partitions[0].records
                    if records is None or not len(records) or (arrow_off and _has_arrow_body(records)):
                        try:
                            self._check_records(records)
                        except LogSourceError as e:
                            r.error_code, r.error_message = error_fields(e)
                            continue
                    runs.append(records)
                    which.append(r)
            try:
                infos = lg.append_runs(runs)
            except LogSourceError as e:  # the log itself failed (closed, a disk error): every run did
                infos = [e] * len(runs)
            appended = fresh = False
            n = size = 0  # appended records and bytes (duplicates append nothing)
            lso = None  # read once, after the first good append: the same for the whole run
            for r, info, records in zip(which, infos, runs, strict=True):
                if isinstance(info, LogSourceError):
                    r.error_code, r.error_message = error_fields(info)
                    r.record_errors = getattr(info, "record_errors", ())
                    log.debug("produce to %s-%d failed: %s", topic, partition, info)
                    continue
                if lso is None:
                    lso = lg.log_start_offset
                    appended = True
                r.base_offset, r.log_append_time_ms, r.log_start_offset = info[0], info[2], lso
                if not info[4]:  # AppendInfo: base, last, append time, count, duplicate
                    fresh = True
                    n += info[3]
                    size += len(records)
            if fresh:
                self.state.notify(topic, partition)
                if self.state.topic_stats is not None:
                    self.state.topic_stats.appended(topic, n, size)
            if appended and self.state.replication is not None:
                self.state.replication.after_append(topic, partition)
        if acks == 0:
            return [None] * len(reqs)
        return answers

    async def _await_commits(self, commits: list, resp: ProduceResponse, timeout_ms: int) -> ProduceResponse:
        """acks=all: wait for every partition's high watermark to pass its appended batches."""
        repl = self.state.replication
        results = await asyncio.gather(
            *(repl.wait_for_commit(t, p, end, timeout_ms) for _, t, p, end in commits), return_exceptions=True
        )
        for (r, t, p, _), res in zip(commits, results, strict=True):
            if isinstance(res, LogSourceError):
                r.error_code, r.error_message = error_fields(res)
                log.debug("acks=all produce to %s-%d failed: %s", t, p, res)
            elif isinstance(res, BaseException):
                raise res
        return resp

    # ------------------------------------------------------------ Fetch

    def _read(self, req: FetchRequest, session: Session) -> tuple[FetchResponse, int, bool]:
        # consumers read below the high watermark (committed data), read_committed below the LSO; only the
        # first non-empty partition may exceed the limits (to make progress)
        return read_partitions(
            req,
            self.config.fetch_max_bytes,
            FetchIsolation.for_consumer(req.isolation_level),
            self._resolve,
            None if session.arrow_body else _kafka_layout,
        )

    def _resolve(self, req: FetchRequest, fp: Any, r: FetchPartitionResponse) -> tuple[Any, int]:
        if req.replica_id < 0:
            self.state.check_leader(fp.topic, fp.partition, write=False)
        lg = self._get_log(fp.topic, fp.partition)
        return lg, self.state.high_watermark(fp.topic, fp.partition, lg)

    async def fetch(self, req: FetchRequest, session: Session) -> FetchResponse:
        """Long poll (:func:`.fetch.long_poll`): answer at once if min_bytes are there (or an error), else
        when an append brings them. A follower's fetch (``replica_id`` >= 0, in a cluster) goes to the
        replica manager. A consumer's fetch session (KIP-227) gives the partitions to read and shapes the
        answer (:mod:`.fetch_sessions`).

        A coroutine even when the answer is ready: the server writes what it queued before awaiting it,
        so the previous answer's last bytes leave at once. Answered directly (tried), they waited behind
        the handling of the next fetch of the same read, and the consumer for them to finish the frame.
        """
        if req.replica_id >= 0 and self.state.replication is not None:
            return await self.state.replication.follower_fetch(req)
        ctx = self.fetch_sessions.new_context(req)
        if ctx.error:
            return self.fetch_sessions.error_response(ctx)
        full = ctx.request
        return ctx.respond(await long_poll(full, lambda: self._read(full, session), self.state.waiters))

    # ------------------------------------------------------------ ListOffsets

    def list_offsets(self, req: ListOffsetsRequest, session: Session) -> ListOffsetsResponse:
        """Earliest (-2), latest (-1), first offset with timestamp >= T (-1 when none), the record with the
        largest timestamp (-3), the local log start (-4: the log start, no tiered storage) or the last
        tiered offset (-5: -1, none), as Kafka answers without remote storage."""
        out = []
        for p in req.partitions:
            r = ListOffsetsPartitionResponse(p.topic, p.partition)
            try:
                if req.replica_id < 0:
                    self.state.check_leader(p.topic, p.partition, write=False)
                lg = self._get_log(p.topic, p.partition)
                if p.timestamp == EARLIEST_TIMESTAMP:
                    r.offset = lg.log_start_offset
                elif p.timestamp == LATEST_TIMESTAMP:
                    r.offset = self.state.high_watermark(p.topic, p.partition, lg)
                    self._check_epoch_start(p.topic, p.partition, r.offset, req.replica_id)
                    if req.isolation_level:  # read_committed: latest is the last stable offset
                        r.offset = lg.txns.last_stable_offset(r.offset)
                elif p.timestamp == EARLIEST_LOCAL_TIMESTAMP:
                    r.offset = lg.log_start_offset
                elif p.timestamp == LATEST_TIERED_TIMESTAMP:
                    r.offset = -1
                elif p.timestamp == MAX_TIMESTAMP:
                    r.timestamp, r.offset = self._max_timestamp(p.topic, p.partition, lg, req.isolation_level)
                elif p.timestamp < 0:
                    raise InvalidRequest(f"timestamp {p.timestamp} is not one of -5..-1 nor a time in ms")
                else:
                    found = lg.offset_for_timestamp(p.timestamp)
                    if found is not None:
                        r.offset, r.timestamp = found, _timestamp_at(lg, found)
                role = self.state.role(p.topic, p.partition)
                r.leader_epoch = role.leader_epoch if role is not None else 0
            except LogSourceError as e:
                r.error_code = error_fields(e).code
            out.append(r)
        return ListOffsetsResponse(partitions=out)

    def _max_timestamp(self, topic: str, partition: int, lg: Any, isolation_level: int) -> tuple[int, int]:
        """KIP-734: (timestamp, offset) of the first record with the log's largest timestamp; (-1, -1) when
        none, or when that record is not yet readable (at or past the high watermark / LSO), as Kafka."""
        found = lg.max_timestamp()
        if found is None:
            return -1, -1
        ts, base = found
        offset = _offset_with_timestamp(lg, base, ts)
        bound = self.state.high_watermark(topic, partition, lg)
        if isolation_level:
            bound = lg.txns.last_stable_offset(bound)
        return (ts, offset) if 0 <= offset < bound else (-1, -1)

    def _check_epoch_start(self, topic: str, partition: int, hw: int, replica_id: int) -> None:
        """KIP-207: a new leader's high watermark may trail what it held when elected, until its
        followers fetch again; until it reaches the epoch's start its "latest" is unknown."""
        rep = self.state.replication
        epoch = rep.epoch_start(topic, partition) if rep is not None and replica_id < 0 else None
        if epoch is not None and hw < epoch[1]:
            raise OffsetNotAvailable(
                f"{topic}-{partition}: high watermark {hw} is below the start of leader epoch "
                f"{epoch[0]} at {epoch[1]}; retry"
            )

    # ------------------------------------------------------------ Metadata

    def _topic_metadata(self, topic: str, n: int, live: set[int]) -> TopicMetadata:
        parts = []
        for i, role in enumerate(self.state.partitions(topic, n)):
            if role is None:
                parts.append(PartitionMetadata(i, -1, -1, error_code=LeaderNotAvailable.code))
                continue
            offline = [b for b in role.replicas if b not in live]
            error = LeaderNotAvailable.code if role.leader not in live else 0
            parts.append(
                PartitionMetadata(
                    i,
                    role.leader if not error else -1,
                    role.leader_epoch,
                    list(role.replicas),
                    list(role.isr),
                    offline,
                    error,
                )
            )
        return TopicMetadata(topic, parts, is_internal(topic), topic_id=topic_id_of(topic))

    def metadata(self, req: MetadataRequest, session: Session) -> MetadataResponse:
        """The live brokers, the controller, and each topic with each partition's leader, replicas and ISR."""
        brokers = [
            BrokerMetadata(b, host, port) for b, host, port in self.state.brokers(session.listener_name)
        ]
        live = {b.node_id for b in brokers}
        topics = self.state.topics()
        out = []
        names = sorted(topics) if req.topics is None else req.topics
        if req.topics is not None and req.topic_ids and None in names:  # v12+: topics asked for by id
            names = resolve_topic_ids(names, req.topic_ids, topics)
        for name in names:
            if name is None:  # an id no topic has
                out.append(TopicMetadata(None, error_code=UnknownTopicId.code))  # type: ignore[arg-type]
                continue
            n = topics.get(name)
            if n is None and req.allow_auto_topic_creation and self.config.auto_create_topics:
                try:
                    validate_topic_name(name)
                    if not is_internal(name) and self.state.cluster is not None:
                        # Kafka's answer while the controller elects the new topic's leaders
                        self.state.auto_create_topic(name)
                        out.append(TopicMetadata(name, error_code=LeaderNotAvailable.code))
                        continue
                    if not is_internal(name):
                        self.state.create_topic(name, self.config.num_partitions)
                        n = self.config.num_partitions
                        log.info(
                            "auto-created topic %s with %d partition(s) for a client's Metadata request "
                            "(auto.create.topics.enable=true)",
                            name,
                            n,
                        )
                except LogSourceError as e:
                    out.append(TopicMetadata(name, error_code=error_fields(e).code))
                    continue
            if n is None:
                out.append(TopicMetadata(name, error_code=error_fields(topic_error(name)).code))
            else:
                out.append(self._topic_metadata(name, n, live))
        return MetadataResponse(
            brokers=brokers,
            cluster_id=self.state.cluster_id,
            controller_id=self.state.controller_id(),
            topics=out,
        )

    # ------------------------------------------------------------ Create / Delete topics

    def create_topics(self, req: CreateTopicsRequest, session: Session) -> CreateTopicsResponse:
        """Create each topic (or only validate); per-topic errors."""
        out = []
        seen: dict[str, int] = {}
        for t in req.topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        for t in req.topics:
            r = CreateTopicResult(t.name)
            try:
                if seen[t.name] > 1:
                    raise InvalidRequest(f"topic {t.name!r} appears more than once in the request")
                validate_topic_name(t.name)
                if is_internal(t.name):
                    raise InvalidTopic(
                        f"topic names starting with '__' are reserved for the broker: {t.name!r}"
                    )
                n = self.config.num_partitions if t.num_partitions == -1 else t.num_partitions
                if not 1 <= n <= self.config.max_partitions_per_topic:
                    raise InvalidPartitions(
                        f"{n} partitions is not in [1, {self.config.max_partitions_per_topic}] (max.partitions.per.topic)"
                    )
                if t.replication_factor not in (-1, 1):
                    raise InvalidReplicationFactor(
                        f"replication factor {t.replication_factor} is larger than the 1 available broker"
                    )
                if t.assignments:
                    me = self.config.broker_id
                    if t.num_partitions != -1 or t.replication_factor != -1:
                        raise InvalidRequest(
                            "give either replica assignments or partitions and replication factor"
                        )
                    if sorted(t.assignments) != list(range(len(t.assignments))) or any(
                        b != [me] for b in t.assignments.values()
                    ):
                        raise InvalidReplicationFactor(
                            f"replica assignments must be [{me}] for partitions 0..n-1"
                        )
                    n = len(t.assignments)
                overrides = {k: v for k, v in t.config.items() if v is not None}
                self.logs.default_config.with_overrides(overrides)  # InvalidConfig before anything is made
                if t.name in self.logs.topics():
                    raise TopicAlreadyExists(f"topic {t.name!r} already exists")
                if not req.validate_only:
                    self.state.create_topic(t.name, n, 1, overrides)
                r.num_partitions = n
                r.replication_factor = 1
            except LogSourceError as e:
                r.error_code, r.error_message = error_fields(e)
            out.append(r)
        return CreateTopicsResponse(topics=out)

    def delete_topics(self, req: DeleteTopicsRequest, session: Session) -> DeleteTopicsResponse:
        """Delete each topic, forget its group offsets, wake its fetchers."""
        out = []
        for name in req.topics:
            r = DeleteTopicResult(name)
            try:
                check_deletable(name, self.config.delete_topic_enable)
                if name not in self.logs.topics():
                    raise topic_error(name)
                self.state.delete_topic(name)
            except LogSourceError as e:
                r.error_code, r.error_message = error_fields(e)
            out.append(r)
        return DeleteTopicsResponse(topics=out)

    # ------------------------------------------------------------ misc

    def api_versions(self, req: ApiVersionsRequest, session: Session) -> ApiVersionsResponse:
        """Every api key this broker speaks with its version range, and our Arrow-body feature if enabled."""
        features = []
        if self.config.arrow_body_enable:
            features.append(SupportedFeature(ARROW_BODY_FEATURE, 1, 1))
            session.arrow_body = req.arrow_body
        return ApiVersionsResponse(
            api_keys=[ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())],
            supported_features=features,
        )

    def init_producer_id(self, req: InitProducerIdRequest, session: Session) -> InitProducerIdResponse:
        """A producer id unique across restarts, and its epoch (bumped when the id is passed back)."""
        if req.transactional_id is not None:
            return self.txn.producer.init_producer_id(
                req
            )  # a coroutine: the transaction coordinator's answer
        pid, epoch = self.state.producer_ids.init_producer_id(req.producer_id, req.producer_epoch)
        return InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)

    def find_coordinator(self, req: FindCoordinatorRequest, session: Session) -> FindCoordinatorResponse:
        """Groups: the leader of the group's ``__consumer_offsets`` partition (this broker when single);
        transactions: the leader of ``__transaction_state-0``."""
        if req.key_type == 1:
            return self.txn.find_coordinator(
                req, session.listener_name
            )  # a coroutine: the topic may be created
        if req.key_type != 0:
            raise InvalidRequest(f"unknown coordinator key type {req.key_type} (0 group, 1 transaction)")
        if not req.key:
            raise InvalidGroupId("group id is empty")
        if self.state.cluster is not None:
            # a coroutine: the offsets topic may have to be created
            return self._find_group_coordinator(req, session.listener_name)
        return self._coordinator_response(req, self.state.broker_id, session.listener_name)

    async def _find_group_coordinator(
        self, req: FindCoordinatorRequest, listener: str
    ) -> FindCoordinatorResponse:
        """The leader of the group's ``__consumer_offsets`` partition (created on first use)."""
        return self._coordinator_response(req, await self.state.group_ownership.find(req.key), listener)

    def _coordinator_response(
        self, req: FindCoordinatorRequest, node: int, listener: str
    ) -> FindCoordinatorResponse:
        addr = self.state.broker_address(node, listener)
        if addr is None:
            raise CoordinatorNotAvailable(f"coordinator broker {node} of {req.key!r} is not live")
        return FindCoordinatorResponse(node_id=node, host=addr[0], port=addr[1], key=req.key)

    def describe_cluster(self, req: DescribeClusterRequest, session: Session) -> DescribeClusterResponse:
        """The cluster id, the controller, and the live brokers."""
        brokers = [
            BrokerMetadata(b, host, port) for b, host, port in self.state.brokers(session.listener_name)
        ]
        return DescribeClusterResponse(
            cluster_id=self.state.cluster_id or "", controller_id=self.state.controller_id(), brokers=brokers
        )


def _timestamp_at(lg: Any, offset: int) -> int:
    """Timestamp of the record at ``offset`` (what Kafka reports with a by-time lookup); -1 if unreadable."""
    return _lookup(lg, offset, "offset", offset, "timestamp")


def _offset_with_timestamp(lg: Any, base: int, timestamp: int) -> int:
    """Offset of the first record with ``timestamp`` in the batch at ``base``; -1 if there is none."""
    return _lookup(lg, base, "timestamp", timestamp, "offset")


def _lookup(lg: Any, offset: int, column: str, value: int, want: str) -> int:
    """``want`` of the first record whose ``column`` is ``value`` in the batch holding ``offset``; -1 if none."""
    try:
        region = lg.read(offset, 1)
        table = fmt.to_arrow(os.pread(region.file.fileno(), region.length, region.position))
        hits = table.filter(pc.equal(table.column(column).cast(pa.int64()), value)).column(want)
        return hits.cast(pa.int64())[0].as_py() if len(hits) else -1
    except (LogSourceError, OSError, ValueError, IndexError):
        return -1


def _has_arrow_body(records: Any) -> bool:
    try:
        return any(fmt.is_arrow_body(h) for _, h in fmt.iter_headers(records))
    except LogSourceError:
        return False  # malformed: the log's own validation gives the precise error


def _kafka_layout(region: Any) -> Any:
    """The region as Kafka clients must see it: as stored, unless it holds Arrow-bodied batches,
    which are converted to Kafka's layout (a trailing partial batch is dropped, as clients allow)."""
    if region.length == 0 or region.may_hold_arrow is False:
        return region
    if region.may_hold_arrow is None:  # a segment from before this start: look at its headers only
        headers = fmt.file_headers(region.file.fileno(), region.position, region.length)
        if not any(h.is_arrow_body for h in headers):
            return region
    data = os.pread(region.file.fileno(), region.length, region.position)
    if len(data) != region.length:
        raise CorruptRecord(f"log region shrank while being read ({len(data)} of {region.length} bytes)")
    return fmt.to_kafka(data)
