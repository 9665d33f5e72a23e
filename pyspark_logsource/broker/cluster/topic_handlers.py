"""CreateTopics and DeleteTopics in cluster mode: answered by the controller, as Kafka (ZooKeeper mode) does.

A broker that is not the controller answers NotController (clients ask Metadata for the controller and
retry). The controller validates, assigns replicas over the live brokers and writes the topic in one
fenced multi-op (:meth:`.controller.Controller.create_topic`), then the response waits (up to the
request's ``timeout_ms``) until its own metadata shows every partition with a leader, so a client may
produce at once. Deletion writes ``/admin/delete_topics/<t>`` and waits until the topic is gone.
The ZooKeeper calls block, so they run in the loop's default executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import (
    InvalidPartitions,
    InvalidReplicationFactor,
    InvalidRequest,
    InvalidTopic,
    LogSourceError,
    RequestTimedOut,
)
from ...protocol import (
    ApiKey,
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from ...topics import check_deletable, is_internal, validate_topic_name
from ..error_responses import error_fields
from ..session import Session

if TYPE_CHECKING:
    from ..state import BrokerState
    from .member import ClusterMember


class ClusterTopicHandlers:
    """The topic administration APIs of a broker in a cluster."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.config = state.config

    @property
    def member(self) -> ClusterMember:
        return self.state.cluster  # type: ignore[return-value]

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {ApiKey.CREATE_TOPICS: self.create_topics, ApiKey.DELETE_TOPICS: self.delete_topics}

    def _validate(self, t: Any) -> tuple[int, int, dict[str, str], dict[int, list[int]] | None]:
        validate_topic_name(t.name)
        if is_internal(t.name):
            raise InvalidTopic(f"topic names starting with '__' are reserved for the broker: {t.name!r}")
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise InvalidRequest("give either replica assignments or partitions and replication factor")
            if sorted(t.assignments) != list(range(len(t.assignments))):
                raise InvalidRequest("replica assignments must name partitions 0..n-1")
            n, rf = len(t.assignments), len(next(iter(t.assignments.values())))
        else:
            n = self.config.num_partitions if t.num_partitions == -1 else t.num_partitions
            rf = (
                self.config.default_replication_factor if t.replication_factor == -1 else t.replication_factor
            )
        if not 1 <= n <= self.config.max_partitions_per_topic:
            raise InvalidPartitions(
                f"{n} partitions is not in [1, {self.config.max_partitions_per_topic}] "
                "(max.partitions.per.topic)"
            )
        if rf < 1:
            raise InvalidReplicationFactor(f"replication factor must be at least 1, got {rf}")
        overrides = {k: v for k, v in t.config.items() if v is not None}
        self.state.logs.default_config.with_overrides(overrides)  # InvalidConfig before anything is written
        return n, rf, overrides, (dict(t.assignments) if t.assignments else None)

    async def create_topics(self, req: CreateTopicsRequest, session: Session) -> CreateTopicsResponse:
        """Create each topic through the controller; per-topic errors."""
        loop = asyncio.get_running_loop()
        seen: dict[str, int] = {}
        for t in req.topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        out, made = [], []
        for t in req.topics:
            r = CreateTopicResult(t.name)
            try:
                if seen[t.name] > 1:
                    raise InvalidRequest(f"topic {t.name!r} appears more than once in the request")
                n, rf, overrides, assignment = self._validate(t)
                plan = await loop.run_in_executor(
                    None, self.member.create_topic, t.name, n, rf, overrides, assignment, req.validate_only
                )
                r.num_partitions, r.replication_factor = len(plan), len(next(iter(plan.values())))
                if not req.validate_only:
                    made.append(r)
            except LogSourceError as e:
                r.error_code, r.error_message = error_fields(e)
            out.append(r)
        await self._wait(made, True, req.timeout_ms)
        return CreateTopicsResponse(topics=out)

    async def delete_topics(self, req: DeleteTopicsRequest, session: Session) -> DeleteTopicsResponse:
        """Mark each topic for deletion through the controller and wait until it is gone."""
        loop = asyncio.get_running_loop()
        out, asked = [], []
        for name in req.topics:
            r = DeleteTopicResult(name)
            try:
                check_deletable(name, self.config.delete_topic_enable)
                await loop.run_in_executor(None, self.member.delete_topic, name)
                asked.append(r)
            except LogSourceError as e:
                r.error_code, r.error_message = error_fields(e)
            out.append(r)
        await self._wait(asked, False, req.timeout_ms)
        return DeleteTopicsResponse(topics=out)

    async def _wait(self, results: list[Any], exists: bool, timeout_ms: int) -> None:
        """Wait until each result's topic exists (or is gone) everywhere; a timeout is that topic's error."""
        for r in results:
            try:
                await self.member.wait_topic(r.name, exists, max(timeout_ms, 0) / 1000)
            except RequestTimedOut as e:
                r.error_code, r.error_message = error_fields(e)
