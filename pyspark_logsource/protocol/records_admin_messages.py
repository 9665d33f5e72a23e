"""Typed messages of DeleteRecords, DescribeLogDirs, DeleteGroups and OffsetDelete, and their adapters to
the schemas of :mod:`.records_admin_schemas` (flat per-partition lists here, nested by topic on the wire)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey

#: DeleteRecords' offset meaning "up to the high watermark" (Kafka's DeleteRecordsRequest.HIGH_WATERMARK)
HIGH_WATERMARK = -1

# ------------------------------------------------------------------ DeleteRecords (21)


@dataclass(slots=True)
class DeleteRecordsPartition:
    """Delete the records of a partition below ``offset`` (-1: below the high watermark)."""

    topic: str
    partition: int
    offset: int


@dataclass(slots=True)
class DeleteRecordsRequest:
    """Move log start offsets forward."""

    API_KEY = ApiKey.DELETE_RECORDS
    partitions: list[DeleteRecordsPartition] = field(default_factory=list)
    timeout_ms: int = 30000


@dataclass(slots=True)
class DeleteRecordsPartitionResult:
    """The partition's new log start offset (``low_watermark``), or -1 with an error."""

    topic: str
    partition: int
    low_watermark: int = -1
    error_code: int = 0


@dataclass(slots=True)
class DeleteRecordsResponse:
    partitions: list[DeleteRecordsPartitionResult] = field(default_factory=list)
    throttle_time_ms: int = 0


def _by_topic(items: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for x in items:
        out.setdefault(x.topic, []).append(x)
    return out


def delete_records_req_to(r: DeleteRecordsRequest, v: int) -> dict:
    return {
        "topics": [
            {"name": t, "partitions": [{"partition_index": p.partition, "offset": p.offset} for p in ps]}
            for t, ps in _by_topic(r.partitions).items()
        ],
        "timeout_ms": r.timeout_ms,
    }


def delete_records_req_from(d: dict, v: int) -> DeleteRecordsRequest:
    parts = [
        DeleteRecordsPartition(t["name"], p["partition_index"], p["offset"])
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return DeleteRecordsRequest(parts, d["timeout_ms"])


def delete_records_resp_to(r: DeleteRecordsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "topics": [
            {
                "name": t,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "low_watermark": p.low_watermark,
                        "error_code": p.error_code,
                    }
                    for p in ps
                ],
            }
            for t, ps in _by_topic(r.partitions).items()
        ],
    }


def delete_records_resp_from(d: dict, v: int) -> DeleteRecordsResponse:
    parts = [
        DeleteRecordsPartitionResult(t["name"], p["partition_index"], p["low_watermark"], p["error_code"])
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return DeleteRecordsResponse(parts, d["throttle_time_ms"])


# ------------------------------------------------------------------ DescribeLogDirs (35)


@dataclass(slots=True)
class DescribeLogDirsRequest:
    """Describe the log dirs of these ``(topic, partitions)``; None: every partition."""

    API_KEY = ApiKey.DESCRIBE_LOG_DIRS
    topics: dict[str, list[int]] | None = None


@dataclass(slots=True)
class LogDirPartition:
    """A replica in a log dir: its bytes and how far it is behind its leader's log end (0 on a leader)."""

    topic: str
    partition: int
    size: int
    offset_lag: int = 0
    is_future: bool = False


@dataclass(slots=True)
class LogDirResult:
    """One log dir: its partitions, and (v4+) its file system's total and usable bytes (-1: unknown)."""

    log_dir: str
    error_code: int = 0
    partitions: list[LogDirPartition] = field(default_factory=list)
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(slots=True)
class DescribeLogDirsResponse:
    results: list[LogDirResult] = field(default_factory=list)
    error_code: int = 0
    throttle_time_ms: int = 0


def describe_log_dirs_req_to(r: DescribeLogDirsRequest, v: int) -> dict:
    if r.topics is None:
        return {"topics": None}
    return {"topics": [{"topic": t, "partitions": list(ps)} for t, ps in r.topics.items()]}


def describe_log_dirs_req_from(d: dict, v: int) -> DescribeLogDirsRequest:
    if d["topics"] is None:
        return DescribeLogDirsRequest(None)
    topics: dict[str, list[int]] = {}
    for t in d["topics"]:
        topics.setdefault(t["topic"], []).extend(t["partitions"])
    return DescribeLogDirsRequest(topics)


def describe_log_dirs_resp_to(r: DescribeLogDirsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "results": [
            {
                "error_code": d.error_code,
                "log_dir": d.log_dir,
                "topics": [
                    {
                        "name": t,
                        "partitions": [
                            {
                                "partition_index": p.partition,
                                "partition_size": p.size,
                                "offset_lag": p.offset_lag,
                                "is_future_key": p.is_future,
                            }
                            for p in ps
                        ],
                    }
                    for t, ps in _by_topic(d.partitions).items()
                ],
                "total_bytes": d.total_bytes,
                "usable_bytes": d.usable_bytes,
                "is_cordoned": False,  # no cordoning of log dirs here (KIP-1066)
            }
            for d in r.results
        ],
    }


def describe_log_dirs_resp_from(d: dict, v: int) -> DescribeLogDirsResponse:
    results = [
        LogDirResult(
            x["log_dir"],
            x["error_code"],
            [
                LogDirPartition(
                    t["name"], p["partition_index"], p["partition_size"], p["offset_lag"], p["is_future_key"]
                )
                for t in x["topics"]
                for p in t["partitions"]
            ],
            x["total_bytes"],
            x["usable_bytes"],
        )
        for x in d["results"]
    ]
    return DescribeLogDirsResponse(results, d["error_code"], d["throttle_time_ms"])


# ------------------------------------------------------------------ DeleteGroups (42)


@dataclass(slots=True)
class DeleteGroupsRequest:
    """Delete these (empty) groups and their committed offsets."""

    API_KEY = ApiKey.DELETE_GROUPS
    groups: list[str] = field(default_factory=list)


@dataclass(slots=True)
class DeleteGroupsResponse:
    """``(group id, error code)`` per group asked."""

    results: list[tuple[str, int]] = field(default_factory=list)
    throttle_time_ms: int = 0


def delete_groups_req_to(r: DeleteGroupsRequest, v: int) -> dict:
    return {"groups_names": list(r.groups)}


def delete_groups_req_from(d: dict, v: int) -> DeleteGroupsRequest:
    return DeleteGroupsRequest(list(d["groups_names"]))


def delete_groups_resp_to(r: DeleteGroupsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "results": [{"group_id": gid, "error_code": code} for gid, code in r.results],
    }


def delete_groups_resp_from(d: dict, v: int) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(
        [(x["group_id"], x["error_code"]) for x in d["results"]], d["throttle_time_ms"]
    )


# ------------------------------------------------------------------ OffsetDelete (47)


@dataclass(slots=True)
class OffsetDeleteRequest:
    """Delete the group's committed offsets of these ``(topic, partition)``."""

    API_KEY = ApiKey.OFFSET_DELETE
    group_id: str = ""
    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass(slots=True)
class OffsetDeleteResponse:
    """A group-level error, else ``(topic, partition, error code)`` per partition asked."""

    error_code: int = 0
    partitions: list[tuple[str, int, int]] = field(default_factory=list)
    throttle_time_ms: int = 0


def offset_delete_req_to(r: OffsetDeleteRequest, v: int) -> dict:
    topics: dict[str, list[int]] = {}
    for t, p in r.partitions:
        topics.setdefault(t, []).append(p)
    return {
        "group_id": r.group_id,
        "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in topics.items()
        ],
    }


def offset_delete_req_from(d: dict, v: int) -> OffsetDeleteRequest:
    parts = [(t["name"], p["partition_index"]) for t in d["topics"] for p in t["partitions"]]
    return OffsetDeleteRequest(d["group_id"], parts)


def offset_delete_resp_to(r: OffsetDeleteResponse, v: int) -> dict:
    topics: dict[str, list[tuple[int, int]]] = {}
    for t, p, code in r.partitions:
        topics.setdefault(t, []).append((p, code))
    return {
        "error_code": r.error_code,
        "throttle_time_ms": r.throttle_time_ms,
        "topics": [
            {"name": t, "partitions": [{"partition_index": p, "error_code": c} for p, c in ps]}
            for t, ps in topics.items()
        ],
    }


def offset_delete_resp_from(d: dict, v: int) -> OffsetDeleteResponse:
    parts = [(t["name"], p["partition_index"], p["error_code"]) for t in d["topics"] for p in t["partitions"]]
    return OffsetDeleteResponse(d["error_code"], parts, d["throttle_time_ms"])
