"""CreatePartitions, AlterConfigs, IncrementalAlterConfigs and DescribeConfigs, on one broker or a cluster.

Single broker: new partitions are new logs; a topic's dynamic configs are its overrides in each partition's
``config.properties`` (:meth:`.log.LogManager.alter_topic_config`), a broker's in
:data:`..dynamic_config.LOCAL_FILE`; both apply to the live logs at once and survive a restart.

Cluster (Kafka's ZooKeeper mode): CreatePartitions is answered by the controller
(:mod:`..cluster.partition_adds`; NotController elsewhere) and waits, up to the request's timeout, until this
broker's metadata shows every new partition with a live leader. A config change is written to
``/config/topics/<t>`` or ``/config/brokers/<id|<default>>`` with a change notification
(:mod:`..cluster.config_changes`): every broker applies it within the watch's latency; the broker that wrote it
applies it before it answers. ZooKeeper calls block, so they run in the loop's default executor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import InvalidRequest, InvalidTopic, LogSourceError, RequestTimedOut
from ...protocol import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ApiKey,
    ConfigEntry,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from ...protocol.admin_config_messages import (
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResponse,
    AlterConfigsResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from ...topics import is_internal
from ..cluster import config_changes
from ..cluster.partition_adds import add_partitions, plan_new_partitions
from ..dynamic_config import BROKER_KEY_OF, SOURCE_DEFAULT, SOURCE_TOPIC, check_broker_keys
from ..error_responses import error_fields
from ..log.config import _ATTR, LogConfig
from ..session import Session
from ..state import topic_error
from .configs import altered

if TYPE_CHECKING:
    from ..cluster.member import ClusterMember
    from ..state import BrokerState

log = logging.getLogger(__name__)

_BUILT_IN = LogConfig()  # Kafka's defaults: the DEFAULT_CONFIG synonym


class AdminHandlers:
    """The config and partition administration APIs of one broker."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.config = state.config

    @property
    def member(self) -> ClusterMember | None:
        return self.state.cluster  # type: ignore[return-value]

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {
            ApiKey.CREATE_PARTITIONS: self.create_partitions,
            ApiKey.ALTER_CONFIGS: self.alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
        }

    # ------------------------------------------------------------ CreatePartitions

    async def create_partitions(
        self, req: CreatePartitionsRequest, session: Session
    ) -> CreatePartitionsResponse:
        """Grow each topic to its count (or only validate); per-topic errors."""
        names = [t.name for t in req.topics]
        out, made = [], []
        for t in req.topics:
            r = CreatePartitionsResult(t.name)
            try:
                if names.count(t.name) > 1:
                    raise InvalidRequest(f"topic {t.name!r} appears more than once in the request")
                if is_internal(t.name):
                    raise InvalidTopic(f"cannot add partitions to internal topic {t.name!r}")
                if self.member is None:
                    self._add_local(t, req.validate_only)
                else:
                    await asyncio.get_running_loop().run_in_executor(
                        None,
                        add_partitions,
                        self.member,
                        t.name,
                        t.count,
                        t.assignments,
                        self.config.max_partitions_per_topic,
                        req.validate_only,
                    )
                    if not req.validate_only and req.timeout_ms > 0:  # 0: answer without waiting, as Kafka
                        made.append((r, t.count))
            except LogSourceError as e:
                r.error_code, r.error_message = error_fields(e)
            out.append(r)
        for r, count in made:
            try:
                await self._wait_led(r.name, count, req.timeout_ms / 1000)
            except RequestTimedOut as e:
                r.error_code, r.error_message = error_fields(e)
        return CreatePartitionsResponse(out)

    def _add_local(self, t: CreatePartitionsTopic, validate_only: bool) -> None:
        have = self.state.logs.topics().get(t.name)
        if have is None:
            raise topic_error(t.name)
        me = self.config.broker_id
        plan = plan_new_partitions(
            {p: [me] for p in range(have)}, [me], t.count, t.assignments, self.config.max_partitions_per_topic
        )
        if validate_only:
            return
        for p in sorted(plan):
            self.state.logs.create_log(t.name, p)
        log.info("topic %s grew from %d to %d partitions", t.name, have, t.count)

    async def _wait_led(self, topic: str, count: int, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            live = {b for b, _, _ in self.state.brokers()}
            roles = self.state.partitions(topic)
            if len(roles) >= count and all(r is not None and r.leader in live for r in roles):
                return
            if loop.time() > deadline:
                raise RequestTimedOut(
                    f"topic {topic!r} grew to {count} partitions but this broker has not seen them all led "
                    f"within {timeout_s:.1f}s"
                )
            await asyncio.sleep(0.02)

    # ------------------------------------------------------------ AlterConfigs / IncrementalAlterConfigs

    async def alter_configs(self, req: AlterConfigsRequest, session: Session) -> AlterConfigsResponse:
        """Replace each resource's dynamic configs (or only validate)."""
        return AlterConfigsResponse(await self._alter(req.resources, False, req.validate_only))

    async def incremental_alter_configs(
        self, req: IncrementalAlterConfigsRequest, session: Session
    ) -> IncrementalAlterConfigsResponse:
        """Change some dynamic configs of each resource (or only validate)."""
        return IncrementalAlterConfigsResponse(await self._alter(req.resources, True, req.validate_only))

    async def _alter(
        self, resources: list[AlterConfigsResource], incremental: bool, validate_only: bool
    ) -> list[AlterConfigsResult]:
        out = []
        loop = asyncio.get_running_loop()
        for res in resources:
            r = AlterConfigsResult(res.resource_type, res.resource_name)
            try:
                if res.resource_type == RESOURCE_TOPIC:
                    change = self._alter_topic
                elif res.resource_type == RESOURCE_BROKER:
                    change = self._alter_broker
                else:
                    raise InvalidRequest(
                        f"resource type {res.resource_type} is not supported (2 topic, 4 broker)"
                    )
                if self.member is None:
                    change(res, incremental, validate_only)
                else:  # ZooKeeper reads and writes block
                    await loop.run_in_executor(None, change, res, incremental, validate_only)
            except LogSourceError as e:
                r.error_code, r.error_message = error_fields(e)
            out.append(r)
        return out

    def _alter_topic(self, res: AlterConfigsResource, incremental: bool, validate_only: bool) -> None:
        name = res.resource_name
        if name not in self.state.topics():
            raise topic_error(name)
        overrides, effective = self.state.topic_config(name)
        new = altered(overrides, res.configs, incremental, effective)
        self.state.logs.default_config.with_overrides(new)  # InvalidConfig naming the key
        if validate_only:
            return
        if self.member is None:
            self.state.logs.alter_topic_config(name, new)
            return
        config_changes.write_entity(self.member.zk, config_changes.TOPICS, name, new)
        self.member.topic_config_changed(name)

    def _alter_broker(self, res: AlterConfigsResource, incremental: bool, validate_only: bool) -> None:
        dyn = self.state.dynamic
        name = res.resource_name
        if name and not (name.isdigit() and int(name) == self.config.broker_id):
            if not name.isdigit():
                raise InvalidRequest(f"broker resource name must be a broker id or empty, got {name!r}")
            if self.member is None or int(name) not in {b for b, _, _ in self.state.brokers()}:
                raise InvalidRequest(f"unknown broker {name}")
        scope = name or config_changes.DEFAULT_BROKER
        if self.member is not None:
            current = config_changes.read_entity(self.member.zk, config_changes.BROKERS, scope)
        else:
            current = dyn.default if not name else dyn.mine
        effective = {k: v for k, v, *_ in dyn.describe()}
        new = altered(current, res.configs, incremental, effective)
        check_broker_keys(new)
        if name == "":
            dyn.log_config(new, dyn.mine)  # InvalidConfig for a value out of range with the others
        else:
            dyn.log_config(dyn.default, new)
        if validate_only:
            return
        if self.member is None:
            default, mine = (new, dyn.mine) if not name else (dyn.default, new)
            dyn.save_local(self.config.log_dirs[0], default, mine)
            dyn.apply(default, mine)
            return
        config_changes.write_entity(self.member.zk, config_changes.BROKERS, scope, new)
        self.member.broker_configs_changed()

    # ------------------------------------------------------------ DescribeConfigs

    def describe_configs(self, req: DescribeConfigsRequest, session: Session) -> DescribeConfigsResponse:
        """A topic's effective settings or a broker's, each with its source (Kafka's precedence: topic,
        dynamic broker, dynamic default, static, default) and, if asked, its synonyms."""
        out = []
        for res in req.resources:
            r = DescribeConfigsResult(res.resource_type, res.resource_name)
            try:
                if res.resource_type == RESOURCE_TOPIC:
                    entries = self._describe_topic(res.resource_name)
                elif res.resource_type == RESOURCE_BROKER:
                    if res.resource_name not in ("", str(self.config.broker_id)):
                        raise InvalidRequest(f"unknown broker {res.resource_name!r}")
                    entries = [
                        ConfigEntry(k, v, ro, src, synonyms=syn)
                        for k, v, src, ro, syn in self.state.dynamic.describe()
                    ]
                else:
                    raise InvalidRequest(
                        f"resource type {res.resource_type} is not supported (2 topic, 4 broker)"
                    )
                if res.keys is not None:
                    wanted = set(res.keys)
                    entries = [e for e in entries if e.name in wanted]
                if not req.include_synonyms:
                    for e in entries:
                        e.synonyms = []
                r.configs = entries
            except LogSourceError as e:
                r.error_code, r.error_message = error_fields(e)
            out.append(r)
        return DescribeConfigsResponse(out)

    def _describe_topic(self, name: str) -> list[ConfigEntry]:
        if name not in self.state.topics():
            raise topic_error(name)
        overrides, effective = self.state.topic_config(name)
        dyn = self.state.dynamic
        entries = []
        for k, v in sorted(effective.items()):
            syn = [(k, overrides[k], SOURCE_TOPIC)] if k in overrides else []
            syn += dyn.topic_synonyms(k)
            broker_key = BROKER_KEY_OF.get(_ATTR.get(k, ""), k)
            attr = _ATTR.get(k)
            if attr is not None:
                raw = getattr(_BUILT_IN, attr)
                syn.append(
                    (
                        broker_key,
                        ("true" if raw else "false") if isinstance(raw, bool) else str(raw),
                        SOURCE_DEFAULT,
                    )
                )
            entries.append(ConfigEntry(k, v, False, syn[0][2] if syn else SOURCE_DEFAULT, synonyms=syn))
        return entries
