"""Typed messages of the admin APIs: CreateTopics, DeleteTopics, DescribeConfigs.

Every field has Kafka's default for versions that lack it (see :mod:`.messages`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey

# ------------------------------------------------------------------ CreateTopics / DeleteTopics


@dataclass(slots=True)
class CreatableTopic:
    """A topic to create; ``config`` uses Kafka's topic-level spellings."""

    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1
    config: dict[str, str | None] = field(default_factory=dict)
    assignments: dict[int, list[int]] = field(default_factory=dict)


@dataclass(slots=True)
class CreateTopicsRequest:
    """Create topics."""

    API_KEY = ApiKey.CREATE_TOPICS
    topics: list[CreatableTopic] = field(default_factory=list)
    timeout_ms: int = 30000
    validate_only: bool = False


@dataclass(slots=True)
class CreateTopicResult:
    """Outcome for one topic of a CreateTopics request."""

    name: str
    error_code: int = 0
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(slots=True)
class CreateTopicsResponse:
    """Per-topic outcomes."""

    topics: list[CreateTopicResult] = field(default_factory=list)
    throttle_time_ms: int = 0


@dataclass(slots=True)
class DeleteTopicsRequest:
    """Delete topics by name."""

    API_KEY = ApiKey.DELETE_TOPICS
    topics: list[str] = field(default_factory=list)
    timeout_ms: int = 30000


@dataclass(slots=True)
class DeleteTopicResult:
    """Outcome for one topic of a DeleteTopics request."""

    name: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class DeleteTopicsResponse:
    """Per-topic outcomes."""

    topics: list[DeleteTopicResult] = field(default_factory=list)
    throttle_time_ms: int = 0


# ------------------------------------------------------------------ DescribeConfigs

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


@dataclass(slots=True)
class ConfigResource:
    """A topic (2) or broker (4) whose configs to describe; ``keys=None`` means all."""

    resource_type: int
    resource_name: str
    keys: list[str] | None = None


@dataclass(slots=True)
class DescribeConfigsRequest:
    """Describe topic or broker configs."""

    API_KEY = ApiKey.DESCRIBE_CONFIGS
    resources: list[ConfigResource] = field(default_factory=list)
    include_synonyms: bool = False
    include_documentation: bool = False


@dataclass(slots=True)
class ConfigEntry:
    """One config value; ``source`` is Kafka's ConfigSource (1 topic, 4 static broker, 5 default)."""

    name: str
    value: str | None
    read_only: bool = False
    source: int = 5
    is_sensitive: bool = False
    config_type: int = 0
    documentation: str | None = None
    #: (name, value, source) of each setting that gives this one its value, highest precedence first
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)


@dataclass(slots=True)
class DescribeConfigsResult:
    """Configs of one resource, or its error."""

    resource_type: int
    resource_name: str
    error_code: int = 0
    error_message: str | None = None
    configs: list[ConfigEntry] = field(default_factory=list)


@dataclass(slots=True)
class DescribeConfigsResponse:
    """Per-resource configs."""

    results: list[DescribeConfigsResult] = field(default_factory=list)
    throttle_time_ms: int = 0
