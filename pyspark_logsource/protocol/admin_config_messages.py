"""Typed messages of CreatePartitions, AlterConfigs and IncrementalAlterConfigs (schemas:
:mod:`.admin_config_schemas`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey

#: IncrementalAlterConfigs operations (Kafka's AlterConfigOp.OpType)
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

# ------------------------------------------------------------------ CreatePartitions


@dataclass(slots=True)
class CreatePartitionsTopic:
    """Grow ``name`` to ``count`` partitions; ``assignments``: the new partitions' replicas, or None."""

    name: str
    count: int
    assignments: list[list[int]] | None = None


@dataclass(slots=True)
class CreatePartitionsRequest:
    """Add partitions to existing topics."""

    API_KEY = ApiKey.CREATE_PARTITIONS
    topics: list[CreatePartitionsTopic] = field(default_factory=list)
    timeout_ms: int = 30000
    validate_only: bool = False


@dataclass(slots=True)
class CreatePartitionsResult:
    """Outcome for one topic."""

    name: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class CreatePartitionsResponse:
    """Per-topic outcomes."""

    results: list[CreatePartitionsResult] = field(default_factory=list)
    throttle_time_ms: int = 0


# ------------------------------------------------------------------ AlterConfigs / IncrementalAlterConfigs


@dataclass(slots=True)
class AlterableConfig:
    """One change: ``op`` is SET for AlterConfigs (which replaces every dynamic value of the resource)."""

    name: str
    value: str | None
    op: int = OP_SET


@dataclass(slots=True)
class AlterConfigsResource:
    """A topic (2) or broker (4: an id, or "" for the cluster-wide default) and its changes."""

    resource_type: int
    resource_name: str
    configs: list[AlterableConfig] = field(default_factory=list)


@dataclass(slots=True)
class AlterConfigsRequest:
    """Replace the dynamic configs of resources (AlterConfigs: the given set is the whole new set)."""

    API_KEY = ApiKey.ALTER_CONFIGS
    resources: list[AlterConfigsResource] = field(default_factory=list)
    validate_only: bool = False


@dataclass(slots=True)
class IncrementalAlterConfigsRequest:
    """Change some dynamic configs of resources (SET, DELETE, APPEND, SUBTRACT per key)."""

    API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
    resources: list[AlterConfigsResource] = field(default_factory=list)
    validate_only: bool = False


@dataclass(slots=True)
class AlterConfigsResult:
    """Outcome for one resource."""

    resource_type: int
    resource_name: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class AlterConfigsResponse:
    """Per-resource outcomes (AlterConfigs)."""

    results: list[AlterConfigsResult] = field(default_factory=list)
    throttle_time_ms: int = 0


@dataclass(slots=True)
class IncrementalAlterConfigsResponse:
    """Per-resource outcomes (IncrementalAlterConfigs)."""

    results: list[AlterConfigsResult] = field(default_factory=list)
    throttle_time_ms: int = 0
