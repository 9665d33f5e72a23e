"""Typed messages of the group coordinator's offset APIs: FindCoordinator, OffsetCommit, OffsetFetch.

Every field has Kafka's default for versions that lack it (see :mod:`.messages`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey

# ------------------------------------------------------------------ FindCoordinator


@dataclass(slots=True)
class FindCoordinatorRequest:
    """Which broker coordinates a group (key_type 0) or a transactional id (1)."""

    API_KEY = ApiKey.FIND_COORDINATOR
    key: str = ""
    key_type: int = 0


@dataclass(slots=True)
class FindCoordinatorResponse:
    """The coordinator's node and address."""

    error_code: int = 0
    error_message: str | None = None
    node_id: int = -1
    host: str = ""
    port: int = -1
    throttle_time_ms: int = 0
    key: str = ""


# ------------------------------------------------------------------ OffsetCommit / OffsetFetch


@dataclass(slots=True)
class OffsetCommitPartition:
    """The next offset to consume for a partition, plus free-form metadata."""

    topic: str
    partition: int
    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


@dataclass(slots=True)
class OffsetCommitRequest:
    """Store offsets for a named group."""

    API_KEY = ApiKey.OFFSET_COMMIT
    group_id: str = ""
    partitions: list[OffsetCommitPartition] = field(default_factory=list)
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(slots=True)
class OffsetCommitPartitionResponse:
    """Outcome of committing one partition."""

    topic: str
    partition: int
    error_code: int = 0


@dataclass(slots=True)
class OffsetCommitResponse:
    """Per-partition outcomes."""

    partitions: list[OffsetCommitPartitionResponse] = field(default_factory=list)
    throttle_time_ms: int = 0


@dataclass(slots=True)
class OffsetFetchRequest:
    """Read a group's committed offsets; ``partitions=None`` means all of them."""

    API_KEY = ApiKey.OFFSET_FETCH
    group_id: str = ""
    partitions: list[tuple[str, int]] | None = None
    require_stable: bool = False


@dataclass(slots=True)
class OffsetFetchPartitionResponse:
    """A committed offset (-1: none) and its metadata."""

    topic: str
    partition: int
    offset: int = -1
    metadata: str | None = None
    error_code: int = 0
    leader_epoch: int = -1


@dataclass(slots=True)
class OffsetFetchResponse:
    """Per-partition committed offsets, and a group-level error (v2+)."""

    partitions: list[OffsetFetchPartitionResponse] = field(default_factory=list)
    error_code: int = 0
    throttle_time_ms: int = 0
    error_message: str | None = None  # not on the wire; for raise_for_response
