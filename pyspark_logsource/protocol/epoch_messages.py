"""OffsetForLeaderEpoch (API 23): where a leader epoch ends on the leader (KIP-101, KIP-279, KIP-320).

A returning follower, or a consumer after a leader change, names the epoch of
the last record it has; the leader answers the largest epoch it holds at or
below it and the offset where that epoch ends in its log, and the asker
truncates (a follower) or detects truncation (a consumer) there. Our
followers get the same answer inside Fetch v12 (``diverging_epoch``); this
API serves Kafka's clients and tools. Typed messages and their adapters to the
schemas (:data:`.schemas.OFFSET_FOR_LEADER_EPOCH_REQUEST`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey

OFFSET_FOR_LEADER_EPOCH_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
#: replica_id of a consumer (a follower sends its broker id; Kafka's default -2 is a debugging consumer)
CONSUMER_REPLICA_ID = -1


@dataclass(slots=True)
class OffsetForLeaderEpochPartition:
    """Look up where ``leader_epoch`` ends; ``current_leader_epoch`` fences stale askers (-1: no check)."""

    topic: str
    partition: int
    leader_epoch: int
    current_leader_epoch: int = -1


@dataclass(slots=True)
class OffsetForLeaderEpochRequest:
    """Per partition, the end offset of an epoch on the leader."""

    API_KEY = OFFSET_FOR_LEADER_EPOCH_KEY
    partitions: list[OffsetForLeaderEpochPartition] = field(default_factory=list)
    replica_id: int = CONSUMER_REPLICA_ID


@dataclass(slots=True)
class EpochEndOffset:
    """The largest epoch <= the one asked and where it ends (-1, -1 when the leader holds none)."""

    topic: str
    partition: int
    error_code: int = 0
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass(slots=True)
class OffsetForLeaderEpochResponse:
    """Per-partition answers."""

    partitions: list[EpochEndOffset] = field(default_factory=list)
    throttle_time_ms: int = 0


def _group(items: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for x in items:
        out.setdefault(x.topic, []).append(x)
    return out


def offset_for_leader_epoch_req_to(r: OffsetForLeaderEpochRequest, v: int) -> dict:
    return {
        "replica_id": r.replica_id,
        "topics": [
            {
                "topic": t,
                "partitions": [
                    {
                        "partition": p.partition,
                        "current_leader_epoch": p.current_leader_epoch,
                        "leader_epoch": p.leader_epoch,
                    }
                    for p in ps
                ],
            }
            for t, ps in _group(r.partitions).items()
        ],
    }


def offset_for_leader_epoch_req_from(d: dict, v: int) -> OffsetForLeaderEpochRequest:
    parts = [
        OffsetForLeaderEpochPartition(
            t["topic"], p["partition"], p["leader_epoch"], p["current_leader_epoch"]
        )
        for t in d["topics"]
        for p in t["partitions"]
    ]
    # before v3 only followers sent it (Kafka's rule: an absent replica id is a follower's, -2 by default)
    return OffsetForLeaderEpochRequest(parts, d["replica_id"])


def offset_for_leader_epoch_resp_to(r: OffsetForLeaderEpochResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "topics": [
            {
                "topic": t,
                "partitions": [
                    {
                        "error_code": p.error_code,
                        "partition": p.partition,
                        "leader_epoch": p.leader_epoch,
                        "end_offset": p.end_offset,
                    }
                    for p in ps
                ],
            }
            for t, ps in _group(r.partitions).items()
        ],
    }


def offset_for_leader_epoch_resp_from(d: dict, v: int) -> OffsetForLeaderEpochResponse:
    parts = [
        EpochEndOffset(t["topic"], p["partition"], p["error_code"], p["leader_epoch"], p["end_offset"])
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return OffsetForLeaderEpochResponse(parts, d["throttle_time_ms"])
