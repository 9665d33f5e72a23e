"""Consumer-group administration for :class:`~.admin.Admin`: list, describe (members, assignment, offsets,
lag) and reset the committed offsets of an empty group, as ``kafka-consumer-groups.sh`` does."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from ..errors import ConfigError, GroupIdNotFound, NonEmptyGroup, error_for_code
from ..protocol import group_messages as g
from ..protocol import records_admin_messages as ra
from ..protocol.primitives import ProtocolError
from ..topics import TopicPartition

if TYPE_CHECKING:
    from .network import NetworkClient


class GroupListing(NamedTuple):
    """A group as ListGroups shows it."""

    group_id: str
    protocol_type: str
    state: str


class MemberDescription(NamedTuple):
    """A member of a group and the partitions it was assigned."""

    member_id: str
    client_id: str
    host: str
    assignment: list[TopicPartition]


class PartitionOffsets(NamedTuple):
    """A partition of the group: committed offset (None if none), log end offset, lag and its owner."""

    topic: str
    partition: int
    committed: int | None
    log_end: int
    lag: int | None
    member_id: str | None


@dataclass
class GroupDescription:
    """A group's state, members and offsets (``logsource groups describe``)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription] = field(default_factory=list)
    offsets: list[PartitionOffsets] = field(default_factory=list)


class GroupAdmin:
    """The group methods of Admin (needs ``_client``, ``group_offsets``, ``list_offsets``, ``partitions_for``,
    ``commit_group_offsets`` from Admin)."""

    _client: NetworkClient

    def list_groups(self) -> list[GroupListing]:
        """Every group any broker coordinates, sorted by id."""
        self._client.refresh_metadata(None)
        out: dict[str, GroupListing] = {}
        for node in sorted(self._client.cluster.brokers) or [None]:
            resp = self._client.request(g.ListGroupsRequest(), node)
            if resp.error_code:
                raise error_for_code(resp.error_code, "list groups")
            for x in resp.groups:
                out[x.group_id] = GroupListing(x.group_id, x.protocol_type, x.state)
        return [out[k] for k in sorted(out)]

    def _coordinator(self, group: str) -> int:
        if not group:
            raise ConfigError("group id must not be empty")
        return self._client.coordinator(group, refresh=True)

    def _described(self, group: str) -> g.DescribedGroup:
        if not group:
            raise ConfigError("group id must not be empty")
        resp = self._client.coordinator_request(group, g.DescribeGroupsRequest([group]))
        d = resp.groups[0]
        if d.error_code and d.error_code != GroupIdNotFound.code:
            raise error_for_code(d.error_code, d.error_message or f"describe group {group!r}")
        if d.error_code:  # unknown to the coordinator (Kafka's v6 answer)
            return g.DescribedGroup(group, d.error_code, "Dead")
        return d

    def describe_group(self, group: str) -> GroupDescription:
        """State, members (client id, host, assignment), committed offsets, log end offsets and lag."""
        d = self._described(group)
        committed: dict[TopicPartition, int] = self.group_offsets(group)  # type: ignore[attr-defined]
        if d.state == "Dead" and not committed:
            raise GroupIdNotFound(f"group {group!r} does not exist")
        members, owner = [], {}
        for m in d.members:
            try:
                parts = g.decode_assignment(m.assignment).partitions if d.protocol_type == "consumer" else []
            except ProtocolError:  # another protocol's bytes: show the member without an assignment
                parts = []
            members.append(MemberDescription(m.member_id, m.client_id, m.client_host, sorted(parts)))
            owner.update({tp: m.member_id for tp in parts})
        tps = sorted(set(committed) | set(owner))
        ends = self.list_offsets(tps, "latest") if tps else {}  # type: ignore[attr-defined]
        rows = []
        for tp in tps:
            c = committed.get(tp)
            rows.append(
                PartitionOffsets(
                    tp[0], tp[1], c, ends[tp], None if c is None else max(0, ends[tp] - c), owner.get(tp)
                )
            )
        state = "Empty" if d.state == "Dead" else d.state  # offsets only: Kafka shows such a group as Empty
        return GroupDescription(group, state, d.protocol_type, d.protocol, members, rows)

    def reset_offsets(
        self,
        group: str,
        topic: str,
        to: str | int | datetime,
        partitions: list[int] | None = None,
        dry_run: bool = False,
    ) -> dict[TopicPartition, int]:
        """Set the group's committed offsets of ``topic`` to ``"earliest"``, ``"latest"``, a ms timestamp or a
        datetime (the first offset at or after it); only while the group has no members (else NonEmptyGroup).
        A group that does not exist yet gets the offsets, as with Kafka's tool. Returns the new offsets."""
        if isinstance(to, datetime):
            if to.tzinfo is None:
                to = to.astimezone()  # a naive time is local, as in kafka-consumer-groups.sh
            to = int(to.timestamp() * 1000)
        d = self._described(group)
        if d.state not in ("Empty", "Dead"):
            raise NonEmptyGroup(
                f"group {group!r} is {d.state} with {len(d.members)} member(s); "
                "stop its consumers before resetting offsets"
            )
        parts = self.partitions_for(topic)  # type: ignore[attr-defined]
        if partitions is not None:
            missing = sorted(set(partitions) - set(parts))
            if missing:
                raise ConfigError(f"topic {topic!r} has no partition(s) {missing}")
            parts = sorted(set(partitions))
        offsets = self.list_offsets([(topic, p) for p in parts], to)  # type: ignore[attr-defined]
        if not dry_run:
            self.commit_group_offsets(group, offsets)  # type: ignore[attr-defined]
        return offsets

    def delete_group(self, group: str) -> None:
        """Delete an empty group and its committed offsets (DeleteGroups): NonEmptyGroup while it has
        members, GroupIdNotFound when there is no such group."""
        self._coordinator(group)
        resp = self._client.coordinator_request(group, ra.DeleteGroupsRequest([group]))
        for gid, code in resp.results:
            if code:
                raise error_for_code(code, f"cannot delete group {gid!r}")

    def delete_group_offsets(
        self, group: str, topic: str, partitions: list[int] | None = None
    ) -> list[TopicPartition]:
        """Delete the group's committed offsets of ``topic`` (every partition, or ``partitions``) with
        OffsetDelete; GroupSubscribedToTopic while its members consume the topic. Returns the partitions
        that had an offset."""
        self._coordinator(group)
        parts = self.partitions_for(topic) if partitions is None else sorted(set(partitions))  # type: ignore[attr-defined]
        had = [tp for tp in self.group_offsets(group) if tp[0] == topic and tp[1] in parts]  # type: ignore[attr-defined]
        resp = self._client.coordinator_request(
            group, ra.OffsetDeleteRequest(group, [(topic, p) for p in parts])
        )
        if resp.error_code:
            raise error_for_code(resp.error_code, f"cannot delete the offsets of group {group!r}")
        for t, p, code in resp.partitions:
            if code:
                raise error_for_code(code, f"cannot delete the offset of group {group!r} in {t}-{p}")
        return had
