"""Adapters of the group coordinator's offset APIs: typed messages (:mod:`.coordinator_messages`) <-> schema dicts."""

from __future__ import annotations

from . import coordinator_messages as cm
from .adapters import by_topic

# ------------------------------------------------------------------ FindCoordinator


def find_coordinator_req_to(r: cm.FindCoordinatorRequest, v: int) -> dict:
    return {"key": r.key, "key_type": r.key_type, "coordinator_keys": [r.key]}


def find_coordinator_req_from(d: dict, v: int) -> cm.FindCoordinatorRequest:
    if v >= 4:
        keys = d["coordinator_keys"]
        if len(keys) != 1:
            # one key per request is what the clients send; batched lookups answer per key
            return cm.FindCoordinatorRequest(keys[0] if keys else "", d["key_type"])
        return cm.FindCoordinatorRequest(keys[0], d["key_type"])
    return cm.FindCoordinatorRequest(d["key"], d["key_type"])


def find_coordinator_resp_to(r: cm.FindCoordinatorResponse, v: int) -> dict:
    one = {
        "key": r.key,
        "node_id": r.node_id,
        "host": r.host,
        "port": r.port,
        "error_code": r.error_code,
        "error_message": r.error_message,
    }
    return {"throttle_time_ms": r.throttle_time_ms, **one, "coordinators": [one]}


def find_coordinator_resp_from(d: dict, v: int) -> cm.FindCoordinatorResponse:
    src = d["coordinators"][0] if v >= 4 and d["coordinators"] else d
    return cm.FindCoordinatorResponse(
        src["error_code"],
        src["error_message"],
        src["node_id"],
        src["host"],
        src["port"],
        d["throttle_time_ms"],
        src.get("key", ""),
    )


# ------------------------------------------------------------------ OffsetCommit / OffsetFetch


def offset_commit_req_to(r: cm.OffsetCommitRequest, v: int) -> dict:
    return {
        "group_id": r.group_id,
        "generation_id_or_member_epoch": r.generation_id,
        "member_id": r.member_id,
        "group_instance_id": r.group_instance_id,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": t,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "committed_offset": p.offset,
                        "committed_leader_epoch": p.leader_epoch,
                        "commit_timestamp": -1,
                        "committed_metadata": p.metadata,
                    }
                    for p in ps
                ],
            }
            for t, ps in by_topic(r.partitions).items()
        ],
    }


def offset_commit_req_from(d: dict, v: int) -> cm.OffsetCommitRequest:
    parts = [
        cm.OffsetCommitPartition(
            t["name"],
            p["partition_index"],
            p["committed_offset"],
            p["committed_metadata"],
            p["committed_leader_epoch"],
        )
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return cm.OffsetCommitRequest(
        d["group_id"], parts, d["generation_id_or_member_epoch"], d["member_id"], d["group_instance_id"]
    )


def offset_commit_resp_to(r: cm.OffsetCommitResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "topics": [
            {
                "name": t,
                "partitions": [{"partition_index": p.partition, "error_code": p.error_code} for p in ps],
            }
            for t, ps in by_topic(r.partitions).items()
        ],
    }


def offset_commit_resp_from(d: dict, v: int) -> cm.OffsetCommitResponse:
    parts = [
        cm.OffsetCommitPartitionResponse(t["name"], p["partition_index"], p["error_code"])
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return cm.OffsetCommitResponse(parts, d["throttle_time_ms"])


def offset_fetch_req_to(r: cm.OffsetFetchRequest, v: int) -> dict:
    if r.partitions is None:
        if v < 2:
            raise ValueError("OffsetFetch v0/v1 cannot ask for all partitions")
        topics = None
    else:
        topics = [
            {"name": t, "partition_indexes": [tp[1] for tp in tps]}
            for t, tps in by_topic(r.partitions, lambda tp: tp[0]).items()
        ]
    return {"group_id": r.group_id, "topics": topics, "require_stable": r.require_stable}


def offset_fetch_req_from(d: dict, v: int) -> cm.OffsetFetchRequest:
    topics = d["topics"]
    parts = None if topics is None else [(t["name"], p) for t in topics for p in t["partition_indexes"]]
    return cm.OffsetFetchRequest(d["group_id"], parts, d["require_stable"])


def offset_fetch_resp_to(r: cm.OffsetFetchResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "topics": [
            {
                "name": t,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "committed_offset": p.offset,
                        "committed_leader_epoch": p.leader_epoch,
                        "metadata": p.metadata,
                        "error_code": p.error_code,
                    }
                    for p in ps
                ],
            }
            for t, ps in by_topic(r.partitions).items()
        ],
    }


def offset_fetch_resp_from(d: dict, v: int) -> cm.OffsetFetchResponse:
    parts = [
        cm.OffsetFetchPartitionResponse(
            t["name"],
            p["partition_index"],
            p["committed_offset"],
            p["metadata"],
            p["error_code"],
            p["committed_leader_epoch"],
        )
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return cm.OffsetFetchResponse(parts, d["error_code"], d["throttle_time_ms"])
