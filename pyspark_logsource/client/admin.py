"""The Admin client: topics, offsets by time, group offsets and lag, leader elections and reassignments."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..errors import ConfigError, LogSourceError, TopicAlreadyExists, UnknownTopicOrPartition, error_for_code
from ..protocol import acl_messages as aclm
from ..protocol import records_admin_messages as ra
from ..protocol import sasl_messages as sm
from ..protocol.admin_config_messages import (
    OP_DELETE,
    OP_SET,
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    IncrementalAlterConfigsRequest,
)
from ..protocol.admin_messages import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ConfigResource,
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
)
from ..protocol.coordinator_messages import OffsetCommitPartition, OffsetCommitRequest, OffsetFetchRequest
from ..protocol.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    MetadataRequest,
)
from ..protocol.reassign_messages import (
    PREFERRED,
    UNCLEAN,
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
    OngoingReassignment,
)
from ..topics import TopicPartition, is_internal
from .group_admin import GroupAdmin
from .metadata import Bootstrap, TopicDescription
from .network import NetworkClient
from .quota_admin import QuotaAdmin
from .security import ClientSecurity
from .txn_admin import TxnAdmin


class GroupLag(NamedTuple):
    """Committed offset, log end offset and their difference for one partition."""

    topic: str
    partition: int
    committed: int
    log_end: int
    lag: int


def offset_spec(spec: str | int) -> int:
    """ListOffsets timestamp for ``"earliest"``, ``"latest"`` or a ms timestamp."""
    if isinstance(spec, str):
        s = spec.strip().lower()
        if s == "earliest":
            return EARLIEST_TIMESTAMP
        if s == "latest":
            return LATEST_TIMESTAMP
        try:
            return offset_spec(int(s))
        except (ValueError, ConfigError):
            raise ConfigError(
                f"offset spec must be 'earliest', 'latest' or a timestamp in ms, got {spec!r}"
            ) from None
    if not isinstance(spec, bool):
        try:
            v = operator.index(spec)
        except TypeError:
            v = None
        if v is not None and (v >= 0 or v in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP)):
            return v
    raise ConfigError(f"offset spec must be 'earliest', 'latest' or a timestamp in ms >= 0, got {spec!r}")


class Admin(GroupAdmin, TxnAdmin, QuotaAdmin):
    """Manage topics, offsets and consumer groups; every call is blocking."""

    def __init__(
        self,
        bootstrap: Bootstrap | None = None,
        *,
        client_id: str | None = None,
        request_timeout_ms: float = 30000,
        **security: Any,
    ) -> None:
        """``security``: kafka-python's TLS/SASL options (see client/security.py)."""
        self._client = NetworkClient(
            bootstrap,
            client_id=client_id or "logsource-admin",
            request_timeout_ms=request_timeout_ms,
            security=ClientSecurity.from_options(security),
        )
        self.request_timeout_ms = int(request_timeout_ms)

    # ------------------------------------------------------------------ topics

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        config: dict[str, str] | None = None,
        exist_ok: bool = False,
        *,
        replication_factor: int | None = None,
    ) -> None:
        """Create a topic with ``partitions`` partitions, ``replication_factor`` copies of each
        (None: the brokers' ``default.replication.factor``) and topic-level ``config`` overrides
        (e.g. ``min.insync.replicas``). The controller places the replicas and spreads the leaders;
        more copies than live brokers raises InvalidReplicationFactor."""
        if replication_factor is None:
            rf = -1
        elif (
            isinstance(replication_factor, bool)
            or not isinstance(replication_factor, int)
            or replication_factor < 1
        ):
            raise ConfigError(f"replication_factor must be a positive integer, got {replication_factor!r}")
        else:
            rf = replication_factor
        cfg = {str(k): (None if v is None else str(v)) for k, v in (config or {}).items()}
        req = CreateTopicsRequest(
            [CreatableTopic(name, int(partitions), rf, cfg)], timeout_ms=self.request_timeout_ms
        )
        resp = self._client.controller_request(req)
        for r in resp.topics:
            if r.error_code:
                err = error_for_code(r.error_code, r.error_message or f"cannot create topic {name!r}")
                if isinstance(err, TopicAlreadyExists) and exist_ok:
                    continue
                raise err
        self._client.cluster.topics.pop(name, None)

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its data."""
        resp = self._client.controller_request(DeleteTopicsRequest([name], self.request_timeout_ms))
        for r in resp.topics:
            if r.error_code:
                raise error_for_code(r.error_code, r.error_message or f"cannot delete topic {name!r}")
        self._client.cluster.topics.pop(name, None)

    def list_topics(self, include_internal: bool = False) -> list[str]:
        """Topic names, sorted (internal ``__`` topics only when asked)."""
        resp = self._client.request(MetadataRequest(None, False))
        names = [t.name for t in resp.topics if not t.error_code]
        if not include_internal:
            names = [
                n
                for n in names
                if not is_internal(n) and not any(t.is_internal for t in resp.topics if t.name == n)
            ]
        return sorted(names)

    def describe_topic(self, name: str, allow_auto_create: bool = False) -> TopicDescription:
        """Partitions of ``name`` with leader, leader epoch, replicas and ISR (as ``kafka-topics --describe``
        shows them; the leader is -1 while a partition has none). ``allow_auto_create``: a missing topic is
        created as a producer's first Metadata request would (if the broker's ``auto.create.topics.enable``)."""
        return self._client.topic(name, allow_auto_create=allow_auto_create, refresh=True)

    def topic_configs(self, name: str, overrides_only: bool = True) -> dict[str, str | None]:
        """The topic's settings (DescribeConfigs): only those set for the topic, as ``kafka-topics
        --describe`` prints them, or with ``overrides_only=False`` every effective value."""
        resp = self._client.request(DescribeConfigsRequest([ConfigResource(RESOURCE_TOPIC, name)]))
        out: dict[str, str | None] = {}
        for r in resp.results:
            if r.error_code:
                raise error_for_code(
                    r.error_code, r.error_message or f"cannot describe the configs of {name!r}"
                )
            out.update((c.name, c.value) for c in r.configs if not overrides_only or c.source == 1)
        return out

    def create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        """Grow ``name`` to ``count`` partitions (CreatePartitions, through the controller); ``assignments``:
        the new partitions' replicas (default: placed as Kafka places them). InvalidPartitions when
        ``count`` is not larger than the partitions it has."""
        req = CreatePartitionsRequest(
            [CreatePartitionsTopic(name, int(count), assignments)], self.request_timeout_ms, validate_only
        )
        resp = self._client.controller_request(req)
        for r in resp.results:
            if r.error_code:
                raise error_for_code(r.error_code, r.error_message or f"cannot add partitions to {name!r}")
        self._client.cluster.topics.pop(name, None)

    def alter_configs(
        self, resource_type: int, name: str, config: dict[str, str], *, validate_only: bool = False
    ) -> None:
        """Replace every dynamic config of a topic (2) or broker (4; name "" for the cluster default) with
        ``config`` (AlterConfigs; a key left out goes back to its default)."""
        res = AlterConfigsResource(
            resource_type, name, [AlterableConfig(str(k), str(v)) for k, v in config.items()]
        )
        self._alter(AlterConfigsRequest([res], validate_only), resource_type, name)

    def incremental_alter_configs(
        self,
        resource_type: int,
        name: str,
        set_: dict[str, str] | None = None,
        delete: Iterable[str] = (),
        *,
        ops: list[tuple[str, int, str | None]] | None = None,
        validate_only: bool = False,
    ) -> None:
        """Set the keys of ``set_`` and delete those of ``delete`` (IncrementalAlterConfigs); ``ops``: more
        (key, operation, value) changes (operations 0 set, 1 delete, 2 append, 3 subtract)."""
        changes = [AlterableConfig(str(k), str(v), OP_SET) for k, v in (set_ or {}).items()]
        changes += [AlterableConfig(str(k), None, OP_DELETE) for k in delete]
        changes += [AlterableConfig(k, v, op) for k, op, v in ops or []]
        res = AlterConfigsResource(resource_type, name, changes)
        self._alter(IncrementalAlterConfigsRequest([res], validate_only), resource_type, name)

    def _alter(self, req: object, resource_type: int, name: str) -> None:
        # a broker's own configs go to that broker (Kafka's clients do the same); the rest to any broker
        if resource_type == RESOURCE_BROKER and name:
            resp = self._client.request(req, node_id=int(name))
        else:
            resp = self._client.request(req)
        for r in resp.results:
            if r.error_code:
                raise error_for_code(r.error_code, r.error_message or f"cannot alter the configs of {name!r}")

    def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of ``topic``; raises UnknownTopicOrPartition."""
        return [p.partition for p in self.describe_topic(topic).partitions]

    def cluster(self):
        """The cluster metadata (brokers, controller, topics) after a refresh."""
        self._client.refresh_metadata(None)
        return self._client.cluster

    # ------------------------------------------------------------------ offsets

    def list_offsets(
        self, tps: Iterable[tuple[str, int]], spec: str | int, *, read_committed: bool = False
    ) -> dict[TopicPartition, int]:
        """Offsets per partition: ``"earliest"``, ``"latest"`` or, for a ms timestamp,
        the first offset with timestamp >= T (the log end offset when there is none).
        ``read_committed``: latest is the last stable offset (no staged transactional data)."""
        tps = [(str(t), int(p)) for t, p in tps]
        if not tps:
            return {}
        ts = offset_spec(spec)
        out = self._list(tps, ts, read_committed)
        missing = [tp for tp, off in out.items() if off < 0]
        if missing:
            out.update(self._list(missing, LATEST_TIMESTAMP, read_committed))
        return out

    def _list(
        self, tps: list[TopicPartition], ts: int, read_committed: bool = False
    ) -> dict[TopicPartition, int]:
        # each partition's leader answers (its latest is the high watermark); a leader change is retried
        answers = self._client.for_leaders(
            tps,
            lambda items: ListOffsetsRequest(
                [ListOffsetsPartition(t, p, ts) for t, p in items], int(read_committed)
            ),
        )
        out: dict[TopicPartition, int] = {}
        for (t, p), r in answers.items():
            if r.error_code:
                raise error_for_code(r.error_code, f"list offsets for {t}-{p}")
            out[(t, p)] = r.offset
        for tp in tps:
            if tp not in out:
                raise UnknownTopicOrPartition(f"broker did not answer for {tp[0]}-{tp[1]}")
        return out

    def delete_records(self, offsets: dict[tuple[str, int], int]) -> dict[TopicPartition, int]:
        """Delete the records below each offset (-1: below the high watermark) with DeleteRecords; returns each
        partition's new log start offset. OffsetOutOfRange beyond the high watermark."""
        want = {(str(t), int(p)): int(o) for (t, p), o in offsets.items()}
        answers = self._client.for_leaders(
            list(want),
            lambda items: ra.DeleteRecordsRequest(
                [ra.DeleteRecordsPartition(t, p, want[(t, p)]) for t, p in items], self.request_timeout_ms
            ),
        )
        out: dict[TopicPartition, int] = {}
        for (t, p), r in answers.items():
            if r.error_code:
                raise error_for_code(r.error_code, f"cannot delete records of {t}-{p} before {want[(t, p)]}")
            out[(t, p)] = r.low_watermark
        for tp in want:
            if tp not in out:
                raise UnknownTopicOrPartition(f"broker did not answer for {tp[0]}-{tp[1]}")
        return dict(sorted(out.items()))

    # ------------------------------------------------------------------ groups

    def group_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every committed offset of ``group``."""
        if not group:
            raise ConfigError("group id must not be empty")
        resp = self._client.coordinator_request(group, OffsetFetchRequest(group, None))
        out = {}
        for r in resp.partitions:
            if r.error_code:
                raise error_for_code(r.error_code, f"offset fetch for {r.topic}-{r.partition}")
            if r.offset >= 0:
                out[(r.topic, r.partition)] = r.offset
        return dict(sorted(out.items()))

    def commit_group_offsets(
        self, group: str, offsets: dict[tuple[str, int], int], metadata: str = ""
    ) -> None:
        """Store offsets for ``group`` (as a consumer's commit would)."""
        if not group:
            raise ConfigError("group id must not be empty")
        items = [OffsetCommitPartition(t, int(p), int(o), metadata) for (t, p), o in offsets.items()]
        if not items:
            return
        resp = self._client.coordinator_request(group, OffsetCommitRequest(group, items))
        for r in resp.partitions:
            if r.error_code:
                raise error_for_code(r.error_code, f"offset commit for {r.topic}-{r.partition}")

    def group_lag(self, group: str) -> list[GroupLag]:
        """Per committed partition: committed offset, log end offset and lag."""
        committed = self.group_offsets(group)
        if not committed:
            return []
        ends = self.list_offsets(list(committed), "latest")
        return [
            GroupLag(t, p, off, ends[(t, p)], max(0, ends[(t, p)] - off)) for (t, p), off in committed.items()
        ]

    # ------------------------------------------------------------------ replicas (sent to the controller)

    def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None = None, election_type: str | int = "preferred"
    ) -> dict[tuple[str, int], LogSourceError | None]:
        """Elect leaders (ElectLeaders): ``"preferred"`` gives each partition back to its preferred replica
        (the first of its assignment), ``"unclean"`` gives a leaderless partition a live replica even out of
        the ISR. ``partitions`` None: all of them (then only those elected, or failed, are in the answer).
        Per partition: None (elected) or the typed error (ElectionNotNeeded, PreferredLeaderNotAvailable...)."""
        kind = {"preferred": PREFERRED, "unclean": UNCLEAN}.get(str(election_type).lower(), election_type)
        if kind not in (PREFERRED, UNCLEAN):
            raise ConfigError(f"election type must be 'preferred' or 'unclean', got {election_type!r}")
        asked: dict[str, list[int]] | None = None
        if partitions is not None:
            asked = {}
            for t, p in partitions:
                asked.setdefault(t, []).append(int(p))
        resp = self._client.controller_request(ElectLeadersRequest(int(kind), asked, self.request_timeout_ms))
        return {
            (r.topic, r.partition): error_for_code(r.error_code, r.error_message or "")
            if r.error_code
            else None
            for r in resp.results
        }

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[tuple[str, int], Sequence[int] | None],
        allow_replication_factor_change: bool = True,
    ) -> dict[tuple[str, int], LogSourceError | None]:
        """Move partitions to new replicas: (topic, partition) -> target broker ids (the first one the
        preferred leader), or None to cancel the reassignment in progress. The brokers copy the data; the
        old replicas go once the new ones are in sync (see :meth:`list_partition_reassignments`).
        Per partition: None (started) or the typed error (InvalidReplicaAssignment,
        NoReassignmentInProgress, UnknownTopicOrPartition...)."""
        req = AlterPartitionReassignmentsRequest(
            {
                (t, int(p)): (None if r is None else [int(b) for b in r])
                for (t, p), r in reassignments.items()
            },
            self.request_timeout_ms,
            allow_replication_factor_change,
        )
        resp = self._client.controller_request(req)
        return {
            (r.topic, r.partition): error_for_code(r.error_code, r.error_message or "")
            if r.error_code
            else None
            for r in resp.results
        }

    def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], OngoingReassignment]:
        """The reassignments in progress (of ``partitions``, or all): replicas, adding and removing."""
        asked: dict[str, list[int]] | None = None
        if partitions is not None:
            asked = {}
            for t, p in partitions:
                asked.setdefault(t, []).append(int(p))
        resp = self._client.controller_request(
            ListPartitionReassignmentsRequest(asked, self.request_timeout_ms)
        )
        return {(o.topic, o.partition): o for o in resp.reassignments}

    # ------------------------------------------------------------------ SCRAM credentials (APIs 50, 51)

    def scram_credentials(self, users: list[str] | None = None) -> dict[str, list[tuple[str, int]]]:
        """Each user's SCRAM credentials as (mechanism, iterations); every user when ``users`` is None.
        A named user without credentials raises ResourceNotFound."""
        resp = self._client.request(sm.DescribeUserScramCredentialsRequest(users))
        out = {}
        for r in resp.results:
            if r.error_code:
                raise error_for_code(r.error_code, r.error_message or f"cannot describe user {r.user!r}")
            out[r.user] = r.credentials
        return out

    def set_scram_credential(self, user: str, mechanism: str, password: str, iterations: int = 4096) -> None:
        """Create or replace ``user``'s credential for ``mechanism``; only the salted password is sent."""
        import hashlib
        import os

        hf = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}.get(mechanism)
        if hf is None:
            raise ConfigError(f"mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512, got {mechanism!r}")
        salt = os.urandom(32)
        salted = hashlib.pbkdf2_hmac(hf, password.encode("utf-8"), salt, iterations)
        self._alter_scram(
            sm.AlterUserScramCredentialsRequest(
                [], [sm.ScramUpsertion(user, mechanism, iterations, salt, salted)]
            )
        )

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        """Delete ``user``'s credential for ``mechanism`` (ResourceNotFound if it has none)."""
        self._alter_scram(sm.AlterUserScramCredentialsRequest([(user, mechanism)], []))

    def _alter_scram(self, req: sm.AlterUserScramCredentialsRequest) -> None:
        resp = self._client.controller_request(req)
        for user, code, message in resp.results:
            if code:
                raise error_for_code(code, message or f"cannot change the credentials of {user!r}")

    # ------------------------------------------------------------------ ACLs (APIs 29, 30, 31)

    def create_acls(self, acls: list[aclm.Acl]) -> None:
        """Create ACL bindings; the first refused one raises its typed error (others may be created)."""
        resp = self._client.request(aclm.CreateAclsRequest(list(acls)))
        for code, message in resp.results:
            if code:
                raise error_for_code(code, message or "cannot create the ACL")

    def describe_acls(self, acl_filter: aclm.AclFilter) -> list[aclm.Acl]:
        """The ACL bindings the filter matches."""
        resp = self._client.request(aclm.DescribeAclsRequest(acl_filter))
        if resp.error_code:
            raise error_for_code(resp.error_code, resp.error_message or "cannot describe ACLs")
        return resp.acls

    def delete_acls(self, filters: list[aclm.AclFilter]) -> list[list[aclm.Acl]]:
        """Delete the bindings each filter matches; per filter, the deleted bindings."""
        resp = self._client.request(aclm.DeleteAclsRequest(list(filters)))
        for r in resp.results:
            if r.error_code:
                raise error_for_code(r.error_code, r.error_message or "cannot delete ACLs")
        return [r.matching for r in resp.results]

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connections."""
        self._client.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
