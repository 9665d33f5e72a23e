"""The Admin client: topics, offsets by time, group offsets and lag."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any, NamedTuple

from ..errors import ConfigError, TopicAlreadyExists, UnknownTopicOrPartition, error_for_code
from ..protocol import acl_messages as aclm
from ..protocol import sasl_messages as sm
from ..protocol.admin_messages import (
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
from ..topics import TopicPartition, is_internal
from .group_admin import GroupAdmin
from .metadata import Bootstrap, TopicDescription
from .network import NetworkClient
from .security import ClientSecurity


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


class Admin(GroupAdmin):
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
        self._alter(
            sm.AlterUserScramCredentialsRequest(
                [], [sm.ScramUpsertion(user, mechanism, iterations, salt, salted)]
            )
        )

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        """Delete ``user``'s credential for ``mechanism`` (ResourceNotFound if it has none)."""
        self._alter(sm.AlterUserScramCredentialsRequest([(user, mechanism)], []))

    def _alter(self, req: sm.AlterUserScramCredentialsRequest) -> None:
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
