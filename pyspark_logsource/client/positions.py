"""Where a consumer's positions come from and go to: ListOffsets, and the group's committed offsets.

A partition's position is unknown until it is resolved: from the group's
committed offset, else by ``auto_offset_reset`` (the leader's log start or
end, through ListOffsets). :class:`OffsetRequests` sends those requests (and
OffsetCommit); the positions themselves are held by
:class:`~.subscription_state.SubscriptionState`, and the consumer decides when
to ask.
"""

from __future__ import annotations

from ..errors import ConfigError, error_for_code
from ..protocol.coordinator_messages import OffsetCommitPartition, OffsetCommitRequest, OffsetFetchRequest
from ..protocol.messages import ListOffsetsPartition, ListOffsetsRequest
from ..topics import TopicPartition
from .network import NetworkClient


class OffsetRequests:
    """A consumer's offset requests: ListOffsets to partition leaders, OffsetFetch/OffsetCommit to its group."""

    __slots__ = ("_client", "group_id", "isolation")

    def __init__(self, client: NetworkClient, group_id: str | None, isolation: int) -> None:
        self._client = client
        self.group_id = group_id
        #: ListOffsets' isolation level: read_committed's latest offset is the last stable offset
        self.isolation = isolation

    def group(self) -> str:
        """The group id (ConfigError without one: committed offsets need a group)."""
        if not self.group_id:
            raise ConfigError("this consumer has no group_id; committed offsets need one")
        return self.group_id

    def list_offsets(self, tps: list[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        """Each partition's offset for ``spec`` (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP or a time)."""
        # each partition's leader answers (its latest is the high watermark); a leader change is retried
        answers = self._client.for_leaders(
            tps,
            lambda items: ListOffsetsRequest(
                [ListOffsetsPartition(t, p, spec) for t, p in items], self.isolation
            ),
        )
        out = {}
        for (t, p), r in answers.items():
            if r.error_code:
                raise error_for_code(r.error_code, f"list offsets for {t}-{p}")
            out[(t, p)] = r.offset
        return out

    def fetch_committed(self, tps: list[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None when there is none)."""
        group = self.group()
        resp = self._client.coordinator_request(group, OffsetFetchRequest(group, list(tps)))
        out: dict[TopicPartition, int | None] = dict.fromkeys(tps)
        for r in resp.partitions:
            if r.error_code:
                raise error_for_code(r.error_code, f"offset fetch for {r.topic}-{r.partition}")
            out[(r.topic, r.partition)] = r.offset if r.offset >= 0 else None
        return out

    def commit(
        self, offsets: dict[tuple[str, int], int | tuple[int, str]], generation: int, member_id: str
    ) -> None:
        """Store offsets (an offset, or (offset, metadata)) for the group, as this member of this generation."""
        group = self.group()
        items = []
        for (t, p), v in offsets.items():
            off, meta = v if isinstance(v, tuple) else (v, None)
            items.append(OffsetCommitPartition(t, p, int(off), meta))
        if not items:
            return
        resp = self._client.coordinator_request(
            group, OffsetCommitRequest(group, items, generation, member_id)
        )
        for r in resp.partitions:
            if r.error_code:
                raise error_for_code(r.error_code, f"offset commit for {r.topic}-{r.partition}")
