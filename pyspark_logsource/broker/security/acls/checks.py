"""What every API needs to be allowed, in one table (Kafka's ``KafkaApis`` checks, as its
``AuthorizerIntegrationTest`` lists them), and the step of the request pipeline that applies it.

:meth:`Enforcer.install` wraps each handler of ``Handlers.by_key`` with its rule from :data:`RULES`.
A rule sees the request and a :class:`Check` (the session's principal and host against the
:class:`~.model.Authorizer`) and either

- raises a typed authorization error: the whole request is denied and the server answers it with the
  API's error response (CLUSTER/GROUP/TRANSACTIONAL_ID checks, Kafka's top-level codes); or
- returns a :class:`Split`: the request with only the allowed entries (handed to the handler), the
  denied entries' answers, and how to put them into the handler's response (per-topic and
  per-partition codes: TOPIC_AUTHORIZATION_FAILED on the partitions of a topic the principal may not
  use, as Kafka answers); or
- returns None: allowed as is.

An API key with no rule is refused to everyone but super users (fail closed): a new API must add
its line here. Every denied request gets one line on the ``pyspark_logsource.broker.audit`` logger:
principal, client address, API and the denied resources with the operation; never a secret.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ....errors import (
    ClusterAuthorizationFailed,
    GroupAuthorizationFailed,
    TopicAuthorizationFailed,
    TransactionalIdAuthorizationFailed,
)
from ....protocol import ApiKey
from ....protocol import group_messages as g
from ....protocol import messages as m
from ....protocol.coordinator_messages import OffsetCommitPartitionResponse, OffsetFetchPartitionResponse
from ....protocol.epoch_messages import EpochEndOffset
from ....protocol.local_read_messages import LOCAL_READ_GRANT_KEY
from ....protocol.txn_messages import STAGED_TXNS_KEY
from ...session import Session
from .model import CLUSTER_NAME, Authorizer, Operation, ResourceType

audit = logging.getLogger("pyspark_logsource.broker.audit")
log = logging.getLogger(__name__)

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
Op = Operation
TOPIC_DENIED = TopicAuthorizationFailed.code


@dataclass(slots=True)
class Check:
    """One request's authorization questions; remembers what was denied (for the audit line)."""

    authorizer: Authorizer
    session: Session
    #: topic name -> partition count of the existing topics (Metadata's and CreateTopics' questions)
    topics: Callable[[], dict[str, int]]
    denied: list[str] = field(default_factory=list)

    def allowed(self, op: Operation, rtype: ResourceType, name: str, audit_denial: bool = True) -> bool:
        ok = self.authorizer.authorize(
            str(self.session.principal), self.session.client_address, op, rtype, name
        )
        if not ok and audit_denial:
            self.denied.append(f"{rtype.name}:{name}({op.name})")
        return ok

    def cluster(self, op: Operation) -> None:
        if not self.allowed(op, C, CLUSTER_NAME):
            raise ClusterAuthorizationFailed(
                f"{self.session.principal} is not authorized for {op.name} on the cluster"
            )

    def group(self, op: Operation, group_id: str) -> None:
        if not self.allowed(op, G, group_id):
            raise GroupAuthorizationFailed(f"not authorized to access group: {group_id}")

    def txn_id(self, op: Operation, txn_id: str) -> None:
        if not self.allowed(op, X, txn_id):
            raise TransactionalIdAuthorizationFailed(f"not authorized to use transactional id: {txn_id}")

    def topic_ok(self) -> Callable[[Operation, str], bool]:
        """``ok(op, topic)`` with one answer per (op, topic) of the request (cached)."""
        seen: dict[tuple[Operation, str], bool] = {}

        def ok(op: Operation, topic: str) -> bool:
            key = (op, topic)
            if key not in seen:
                seen[key] = self.allowed(op, T, topic)
            return seen[key]

        return ok


@dataclass(slots=True)
class Split:
    """The allowed part of a request and how to add the denied entries' answers to its response."""

    request: Any
    merge: Callable[[Any], Any]
    #: no entry is allowed: answer with ``merge(None)`` without calling the handler
    nothing_allowed: bool = False


def _msg(topic: str) -> str:
    return f"not authorized to access topics: [{topic}]"


def _partitions_split(
    req: Any, attr: str, op: Operation, check: Check, make: Callable, resp_attr: str
) -> Split | None:
    """Per-partition entries ``req.<attr>`` with ``.topic``: the denied ones answered by ``make(entry)``."""
    ok = check.topic_ok()
    items = getattr(req, attr)
    allowed = [x for x in items if ok(op, x.topic)]
    if len(allowed) == len(items):
        return None
    denied = [make(x) for x in items if not ok(op, x.topic)]

    def merge(resp: Any) -> Any:
        if resp is None:
            return _empty_response(req, resp_attr, denied)
        getattr(resp, resp_attr).extend(denied)
        return resp

    return Split(dataclasses.replace(req, **{attr: allowed}), merge, not allowed)


# ------------------------------------------------------------------ the rules, one per API


def produce(req: m.ProduceRequest, c: Check) -> Split | None:
    if req.transactional_id is not None:
        c.txn_id(Op.WRITE, req.transactional_id)
    s = _partitions_split(
        req,
        "partitions",
        Op.WRITE,
        c,
        lambda x: m.ProducePartitionResponse(x.topic, x.partition, TOPIC_DENIED, error_message=_msg(x.topic)),
        "partitions",
    )
    if s is not None and req.acks == 0:
        s.merge = lambda resp: None
    return s


def fetch(req: m.FetchRequest, c: Check) -> Split | None:
    if req.replica_id >= 0:
        c.cluster(Op.CLUSTER_ACTION)
        return None
    return _partitions_split(
        req,
        "partitions",
        Op.READ,
        c,
        lambda x: m.FetchPartitionResponse(x.topic, x.partition, TOPIC_DENIED),
        "partitions",
    )


def list_offsets(req: m.ListOffsetsRequest, c: Check) -> Split | None:
    if req.replica_id >= 0:
        c.cluster(Op.CLUSTER_ACTION)
        return None
    return _partitions_split(
        req,
        "partitions",
        Op.DESCRIBE,
        c,
        lambda x: m.ListOffsetsPartitionResponse(x.topic, x.partition, TOPIC_DENIED),
        "partitions",
    )


def offset_for_leader_epoch(req: Any, c: Check) -> Split | None:
    if req.replica_id >= 0:
        c.cluster(Op.CLUSTER_ACTION)
        return None
    return _partitions_split(
        req,
        "partitions",
        Op.DESCRIBE,
        c,
        lambda x: EpochEndOffset(x.topic, x.partition, TOPIC_DENIED),
        "partitions",
    )


def metadata(req: m.MetadataRequest, c: Check) -> Split | None:
    """Only the topics the principal may DESCRIBE; a topic auto-created needs CREATE on it or the cluster."""
    ok = c.topic_ok()
    if req.topics is None:  # every topic: the others are left out, not refused (Kafka's rule; no audit)

        def keep(resp: Any) -> Any:
            resp.topics = [t for t in resp.topics if c.allowed(Op.DESCRIBE, T, t.name, audit_denial=False)]
            return resp

        return Split(req, keep)
    existing = c.topics()
    creatable = None
    denied, allowed = [], []
    for name in req.topics:
        if not ok(Op.DESCRIBE, name):
            denied.append(name)
        elif name not in existing and req.allow_auto_topic_creation:
            if creatable is None:
                creatable = c.allowed(Op.CREATE, C, CLUSTER_NAME, audit_denial=False)
            if creatable or ok(Op.CREATE, name):
                allowed.append(name)
            else:
                denied.append(name)
        else:
            allowed.append(name)
    if not denied:
        return None

    def merge(resp: Any) -> Any:
        if resp is None:
            resp = m.MetadataResponse()
        resp.topics.extend(m.TopicMetadata(t, error_code=TOPIC_DENIED) for t in denied)
        return resp

    # an empty topic list would mean "no topics", which is what Kafka answers too
    return Split(dataclasses.replace(req, topics=allowed), merge)


def create_topics(req: Any, c: Check) -> Split | None:
    cluster_ok = c.allowed(Op.CREATE, C, CLUSTER_NAME, audit_denial=False)
    if cluster_ok:
        return None
    ok = c.topic_ok()
    from ....protocol.admin_messages import CreateTopicResult

    return _entries_split(
        req,
        "topics",
        lambda t: ok(Op.CREATE, t.name),
        lambda t: CreateTopicResult(t.name, TOPIC_DENIED, _msg(t.name)),
        "topics",
    )


def delete_topics(req: Any, c: Check) -> Split | None:
    ok = c.topic_ok()
    from ....protocol.admin_messages import DeleteTopicResult

    return _entries_split(
        req,
        "topics",
        lambda t: ok(Op.DELETE, t),
        lambda t: DeleteTopicResult(t, TOPIC_DENIED, _msg(t)),
        "topics",
    )


def describe_configs(req: Any, c: Check) -> Split | None:
    from ....protocol import RESOURCE_TOPIC
    from ....protocol.admin_messages import DescribeConfigsResult

    ok = c.topic_ok()

    def allowed(r: Any) -> bool:
        if r.resource_type == RESOURCE_TOPIC:
            return ok(Op.DESCRIBE_CONFIGS, r.resource_name)
        return c.allowed(Op.DESCRIBE_CONFIGS, C, CLUSTER_NAME)

    def denied(r: Any) -> Any:
        code = TOPIC_DENIED if r.resource_type == RESOURCE_TOPIC else ClusterAuthorizationFailed.code
        return DescribeConfigsResult(r.resource_type, r.resource_name, code, "not authorized")

    return _entries_split(req, "resources", allowed, denied, "results")


def _entries_split(req: Any, attr: str, allowed: Callable, make: Callable, resp_attr: str) -> Split | None:
    items = getattr(req, attr)
    keep = [x for x in items if allowed(x)]
    if len(keep) == len(items):
        return None
    denied = [make(x) for x in items if x not in keep]

    def merge(resp: Any) -> Any:
        if resp is None:
            return _empty_response(req, resp_attr, denied)
        getattr(resp, resp_attr).extend(denied)
        return resp

    return Split(dataclasses.replace(req, **{attr: keep}), merge, not keep)


def _empty_response(req: Any, resp_attr: str, entries: list) -> Any:
    from ....protocol.codecs import APIS

    return APIS[req.API_KEY].response(**{resp_attr: entries})


def offset_commit(req: Any, c: Check) -> Split | None:
    c.group(Op.READ, req.group_id)
    return _partitions_split(
        req,
        "partitions",
        Op.READ,
        c,
        lambda x: OffsetCommitPartitionResponse(x.topic, x.partition, TOPIC_DENIED),
        "partitions",
    )


def offset_fetch(req: Any, c: Check) -> Split | None:
    c.group(Op.DESCRIBE, req.group_id)
    ok = c.topic_ok()
    if (
        req.partitions is None
    ):  # every committed offset of the group: those of undescribable topics are left out

        def keep(resp: Any) -> Any:
            resp.partitions = [
                p for p in resp.partitions if c.allowed(Op.DESCRIBE, T, p.topic, audit_denial=False)
            ]
            return resp

        return Split(req, keep)
    allowed = [(t, p) for t, p in req.partitions if ok(Op.DESCRIBE, t)]
    if len(allowed) == len(req.partitions):
        return None
    denied = [
        OffsetFetchPartitionResponse(t, p, error_code=TOPIC_DENIED)
        for t, p in req.partitions
        if not ok(Op.DESCRIBE, t)
    ]

    def merge(resp: Any) -> Any:
        resp.partitions.extend(denied)
        return resp

    return Split(dataclasses.replace(req, partitions=allowed), merge)


def group_read(req: Any, c: Check) -> None:
    c.group(Op.READ, req.group_id)


def describe_groups(req: g.DescribeGroupsRequest, c: Check) -> Split | None:
    return _entries_split(
        req,
        "groups",
        lambda gid: c.allowed(Op.DESCRIBE, G, gid),
        lambda gid: g.DescribedGroup(gid, GroupAuthorizationFailed.code),
        "groups",
    )


def list_groups(req: Any, c: Check) -> Split | None:
    if c.allowed(Op.DESCRIBE, C, CLUSTER_NAME, audit_denial=False):
        return None

    def keep(resp: Any) -> Any:
        resp.groups = [x for x in resp.groups if c.allowed(Op.DESCRIBE, G, x.group_id, audit_denial=False)]
        return resp

    return Split(req, keep)


def find_coordinator(req: Any, c: Check) -> None:
    if req.key_type == 0:
        c.group(Op.DESCRIBE, req.key)
    elif req.key_type == 1:
        c.txn_id(Op.DESCRIBE, req.key)


def init_producer_id(req: Any, c: Check) -> None:
    if req.transactional_id is not None:
        c.txn_id(Op.WRITE, req.transactional_id)
        return
    p, host = str(c.session.principal), c.session.client_address
    if c.allowed(Op.IDEMPOTENT_WRITE, C, CLUSTER_NAME, audit_denial=False) or c.authorizer.any_allowed(
        p, host, Op.WRITE, T
    ):
        return
    c.denied.append(f"CLUSTER:{CLUSTER_NAME}(IDEMPOTENT_WRITE)")
    raise ClusterAuthorizationFailed(
        f"{p} may neither IDEMPOTENT_WRITE on the cluster nor WRITE on any topic"
    )


def staged_txns(req: Any, c: Check) -> None:
    """Our Spark write extension: its write id is a transactional id; its producers write their topics."""
    c.txn_id(Op.WRITE, req.write_id)
    ok = c.topic_ok()
    for prod in req.producers:
        for topic, _ in prod.partitions:
            if not ok(Op.WRITE, topic):
                raise TopicAuthorizationFailed(_msg(topic))


def local_read_grant(req: Any, c: Check) -> None:
    """Our local short-circuit read: what a Fetch of the partition needs (Read on the topic)."""
    if not c.allowed(Op.READ, T, req.topic):
        raise TopicAuthorizationFailed(_msg(req.topic))


def cluster_rule(op: Operation) -> Callable[[Any, Check], None]:
    return lambda req, c: c.cluster(op)


def no_check(req: Any, c: Check) -> None:
    return None


#: api key -> rule. What Kafka checks for each API (KafkaApis; AuthorizerIntegrationTest's table).
RULES: dict[int, Callable[[Any, Check], Split | None]] = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.METADATA: metadata,
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.JOIN_GROUP: group_read,
    ApiKey.HEARTBEAT: group_read,
    ApiKey.LEAVE_GROUP: group_read,
    ApiKey.SYNC_GROUP: group_read,
    ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.LIST_GROUPS: list_groups,
    ApiKey.SASL_HANDSHAKE: no_check,
    ApiKey.API_VERSIONS: no_check,
    ApiKey.SASL_AUTHENTICATE: no_check,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    ApiKey.WRITE_TXN_MARKERS: cluster_rule(Op.CLUSTER_ACTION),
    ApiKey.DESCRIBE_ACLS: cluster_rule(Op.DESCRIBE),
    ApiKey.CREATE_ACLS: cluster_rule(Op.ALTER),
    ApiKey.DELETE_ACLS: cluster_rule(Op.ALTER),
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: cluster_rule(Op.DESCRIBE),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: cluster_rule(Op.ALTER),
    ApiKey.DESCRIBE_CLUSTER: no_check,  # Kafka answers it to everyone (authorized operations aside)
    STAGED_TXNS_KEY: staged_txns,
    LOCAL_READ_GRANT_KEY: local_read_grant,
}


def _unlisted(key: int) -> Callable[[Any, Check], None]:
    def refuse(req: Any, c: Check) -> None:
        if str(c.session.principal) in c.authorizer.super_users:
            return
        log.error("api key %d has no authorization rule (broker/security/acls/checks.py RULES): refused", key)
        c.denied.append(f"api key {key} (no rule)")
        raise ClusterAuthorizationFailed(f"api key {key} has no authorization rule on this broker")

    return refuse


class Enforcer:
    """Applies :data:`RULES` in front of the handlers, with the audit line for each denial."""

    def __init__(
        self,
        authorizer: Authorizer,
        topics: Callable[[], dict[str, int]],
        rules: dict[int, Callable[[Any, Check], Split | None]] | None = None,
    ) -> None:
        self.authorizer = authorizer
        self.topics = topics
        self.rules = RULES if rules is None else rules

    def install(self, handlers: Any) -> None:
        """Wrap every handler of ``handlers.by_key`` (and the produce-run path) with its rule."""
        for key, handler in list(handlers.by_key.items()):
            handlers.by_key[key] = self.wrap(key, handler)
        runs = handlers.produce_runs

        def produce_runs(reqs: list, session: Session) -> list:
            # a run is one partition of one topic, no transactional id: one question
            first = reqs[0]
            c = Check(self.authorizer, session, self.topics)
            if produce(dataclasses.replace(first, partitions=first.partitions[:1]), c) is None:
                return runs(reqs, session)
            self._audit(c, ApiKey.PRODUCE)
            p = first.partitions[0]
            return [
                None
                if r.acks == 0
                else m.ProduceResponse(
                    [
                        m.ProducePartitionResponse(
                            p.topic, p.partition, TOPIC_DENIED, error_message=_msg(p.topic)
                        )
                    ]
                )
                for r in reqs
            ]

        handlers.produce_runs = produce_runs

    def wrap(self, key: int, handler: Callable[[Any, Session], Any]) -> Callable[[Any, Session], Any]:
        rule = self.rules.get(key) or _unlisted(key)
        if rule is no_check:
            return handler

        def checked(req: Any, session: Session) -> Any:
            c = Check(self.authorizer, session, self.topics)
            try:
                split = rule(req, c)
            except AUTHORIZATION_ERRORS as e:
                return denied_response(key, req, e)
            finally:
                self._audit(c, key)
            if split is None:
                return handler(req, session)
            if split.nothing_allowed:
                return split.merge(None)
            result = handler(split.request, session)
            if asyncio.iscoroutine(result):
                return _merged(result, split.merge)
            return split.merge(result)

        return checked

    def _audit(self, c: Check, key: int) -> None:
        if c.denied:
            try:
                api = ApiKey(key).name
            except ValueError:
                api = str(key)
            audit.warning(
                "request denied: principal=%s client=%s api=%s resources=%s",
                c.session.principal,
                c.session.client_address,
                api,
                ",".join(dict.fromkeys(c.denied)),
            )


AUTHORIZATION_ERRORS = (
    ClusterAuthorizationFailed,
    GroupAuthorizationFailed,
    TopicAuthorizationFailed,
    TransactionalIdAuthorizationFailed,
)


def denied_response(key: int, req: Any, e: Exception) -> Any:
    """The API's answer to a request denied as a whole: its error response (error_responses.py) or,
    for the APIs that has no shape for, the top-level code here."""
    from ....protocol import acl_messages as aclm
    from ....protocol import sasl_messages as sm
    from ....protocol import txn_messages as tm
    from ...error_responses import error_fields, error_response

    code, message = error_fields(e)
    try:
        return error_response(key, req, code, message)
    except ValueError:
        pass
    if key == ApiKey.DESCRIBE_ACLS:
        return aclm.DescribeAclsResponse(code, message)
    if key == ApiKey.CREATE_ACLS:
        return aclm.CreateAclsResponse([(code, message)] * len(req.creations))
    if key == ApiKey.DELETE_ACLS:
        return aclm.DeleteAclsResponse([aclm.DeleteAclsFilterResult(code, message) for _ in req.filters])
    if key == ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:
        return sm.DescribeUserScramCredentialsResponse(error_code=code, error_message=message)
    if key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        names = dict.fromkeys([n for n, _ in req.deletions] + [u.name for u in req.upsertions])
        return sm.AlterUserScramCredentialsResponse([(n, code, message) for n in names])
    if key == ApiKey.WRITE_TXN_MARKERS:
        return tm.WriteTxnMarkersResponse(
            [tm.TxnMarkerResult(x.producer_id, {tp: code for tp in x.partitions}) for x in req.markers], code
        )
    if key == STAGED_TXNS_KEY:
        return tm.StagedTxnsResponse(code, message)
    if key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
        from ....protocol.epoch_messages import OffsetForLeaderEpochResponse

        return OffsetForLeaderEpochResponse(
            [EpochEndOffset(x.topic, x.partition, code) for x in req.partitions]
        )
    raise e


async def _merged(coro: Any, merge: Callable[[Any], Any]) -> Any:
    return merge(await coro)


def check_rules_cover(keys: list[int]) -> list[int]:
    """The api keys among ``keys`` without a rule (a test keeps this empty)."""
    return [k for k in keys if k not in RULES]
