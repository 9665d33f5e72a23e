"""Typed messages of the transactional producer's APIs and their adapters (schemas: :mod:`.producer_txn_schemas`).

AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26) go to the transaction coordinator,
TxnOffsetCommit (28) to the group's coordinator. Partitions are ``(topic, partition)`` pairs,
grouped by topic only on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey


def _by_topic(items: dict[tuple[str, int], int] | list[tuple[str, int]]) -> dict[str, list]:
    out: dict[str, list] = {}
    for t, p in items:
        out.setdefault(t, []).append(p)
    return out


# ------------------------------------------------------------------ AddPartitionsToTxn (24)


@dataclass(slots=True)
class AddPartitionsToTxnRequest:
    """Add partitions to the producer's ongoing transaction (v0-3: one transaction per request)."""

    API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass(slots=True)
class AddPartitionsToTxnResponse:
    """An error code per partition."""

    errors: dict[tuple[str, int], int] = field(default_factory=dict)
    throttle_time_ms: int = 0

    @property
    def error_code(self) -> int:  # for raise_for_response: the first partition's error
        return next((c for c in self.errors.values() if c), 0)


def add_partitions_req_to(r: AddPartitionsToTxnRequest, v: int) -> dict:
    return {
        "transactions": [],
        "v3_and_below_transactional_id": r.transactional_id,
        "v3_and_below_producer_id": r.producer_id,
        "v3_and_below_producer_epoch": r.producer_epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in _by_topic(r.partitions).items()],
    }


def add_partitions_req_from(d: dict, v: int) -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(
        d["v3_and_below_transactional_id"],
        d["v3_and_below_producer_id"],
        d["v3_and_below_producer_epoch"],
        [(t["name"], p) for t in d["v3_and_below_topics"] for p in t["partitions"]],
    )


def add_partitions_resp_to(r: AddPartitionsToTxnResponse, v: int) -> dict:
    topics: dict[str, list[dict]] = {}
    for (t, p), code in r.errors.items():
        topics.setdefault(t, []).append({"partition_index": p, "partition_error_code": code})
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": 0,
        "results_by_transaction": [],
        "results_by_topic_v3_and_below": [
            {"name": t, "results_by_partition": ps} for t, ps in topics.items()
        ],
    }


def add_partitions_resp_from(d: dict, v: int) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(
        {
            (t["name"], p["partition_index"]): p["partition_error_code"]
            for t in d["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]
        },
        d["throttle_time_ms"],
    )


# ------------------------------------------------------------------ AddOffsetsToTxn (25)


@dataclass(slots=True)
class AddOffsetsToTxnRequest:
    """Add the group's offsets partition to the transaction (offsets follow as TxnOffsetCommit)."""

    API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass(slots=True)
class AddOffsetsToTxnResponse:
    """The outcome."""

    error_code: int = 0
    throttle_time_ms: int = 0


def add_offsets_req_to(r: AddOffsetsToTxnRequest, v: int) -> dict:
    return {
        "transactional_id": r.transactional_id,
        "producer_id": r.producer_id,
        "producer_epoch": r.producer_epoch,
        "group_id": r.group_id,
    }


def add_offsets_req_from(d: dict, v: int) -> AddOffsetsToTxnRequest:
    return AddOffsetsToTxnRequest(d["transactional_id"], d["producer_id"], d["producer_epoch"], d["group_id"])


def add_offsets_resp_to(r: AddOffsetsToTxnResponse, v: int) -> dict:
    return {"throttle_time_ms": r.throttle_time_ms, "error_code": r.error_code}


def add_offsets_resp_from(d: dict, v: int) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(d["error_code"], d["throttle_time_ms"])


# ------------------------------------------------------------------ EndTxn (26)


@dataclass(slots=True)
class EndTxnRequest:
    """Commit (``committed``) or abort the producer's transaction."""

    API_KEY = ApiKey.END_TXN
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass(slots=True)
class EndTxnResponse:
    """The outcome (v5+, Transactions V2, would also carry the bumped producer id and epoch)."""

    error_code: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    throttle_time_ms: int = 0


def end_txn_req_to(r: EndTxnRequest, v: int) -> dict:
    return {
        "transactional_id": r.transactional_id,
        "producer_id": r.producer_id,
        "producer_epoch": r.producer_epoch,
        "committed": r.committed,
    }


def end_txn_req_from(d: dict, v: int) -> EndTxnRequest:
    return EndTxnRequest(d["transactional_id"], d["producer_id"], d["producer_epoch"], d["committed"])


def end_txn_resp_to(r: EndTxnResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "producer_id": r.producer_id,
        "producer_epoch": r.producer_epoch,
    }


def end_txn_resp_from(d: dict, v: int) -> EndTxnResponse:
    return EndTxnResponse(d["error_code"], d["producer_id"], d["producer_epoch"], d["throttle_time_ms"])


# ------------------------------------------------------------------ TxnOffsetCommit (28)


@dataclass(slots=True)
class TxnOffset:
    """One partition's offset committed inside a transaction."""

    topic: str
    partition: int
    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


@dataclass(slots=True)
class TxnOffsetCommitRequest:
    """Offsets of ``group_id`` that become visible when the producer's transaction commits."""

    API_KEY = ApiKey.TXN_OFFSET_COMMIT
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: list[TxnOffset] = field(default_factory=list)
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(slots=True)
class TxnOffsetCommitResponse:
    """An error code per partition."""

    errors: dict[tuple[str, int], int] = field(default_factory=dict)
    throttle_time_ms: int = 0

    @property
    def error_code(self) -> int:
        return next((c for c in self.errors.values() if c), 0)


def txn_offset_commit_req_to(r: TxnOffsetCommitRequest, v: int) -> dict:
    topics: dict[str, list[dict]] = {}
    for o in r.offsets:
        topics.setdefault(o.topic, []).append(
            {
                "partition_index": o.partition,
                "committed_offset": o.offset,
                "committed_leader_epoch": o.leader_epoch,
                "committed_metadata": o.metadata,
            }
        )
    return {
        "transactional_id": r.transactional_id,
        "group_id": r.group_id,
        "producer_id": r.producer_id,
        "producer_epoch": r.producer_epoch,
        "generation_id": r.generation_id,
        "member_id": r.member_id,
        "group_instance_id": r.group_instance_id,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


def txn_offset_commit_req_from(d: dict, v: int) -> TxnOffsetCommitRequest:
    offsets = [
        TxnOffset(
            t["name"],
            p["partition_index"],
            p["committed_offset"],
            p["committed_metadata"],
            p["committed_leader_epoch"],
        )
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return TxnOffsetCommitRequest(
        d["transactional_id"],
        d["group_id"],
        d["producer_id"],
        d["producer_epoch"],
        offsets,
        d["generation_id"],
        d["member_id"],
        d["group_instance_id"],
    )


def txn_offset_commit_resp_to(r: TxnOffsetCommitResponse, v: int) -> dict:
    topics: dict[str, list[dict]] = {}
    for (t, p), code in r.errors.items():
        topics.setdefault(t, []).append({"partition_index": p, "error_code": code})
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


def txn_offset_commit_resp_from(d: dict, v: int) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        {(t["name"], p["partition_index"]): p["error_code"] for t in d["topics"] for p in t["partitions"]},
        d["throttle_time_ms"],
    )
