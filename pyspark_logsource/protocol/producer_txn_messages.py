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
class TxnPartitions:
    """One transaction of a batched (v4, broker to coordinator) AddPartitionsToTxn."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]] = field(default_factory=list)
    #: only check that the partitions are in the ongoing transaction (a leader's KIP-890 verification)
    verify_only: bool = False


@dataclass(slots=True)
class AddPartitionsToTxnRequest:
    """Add partitions to producers' ongoing transactions: one transaction from a client (v0-3), several
    from a partition leader (v4, with ``verify_only``)."""

    API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
    transactions: list[TxnPartitions] = field(default_factory=list)

    @classmethod
    def single(
        cls, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
    ) -> AddPartitionsToTxnRequest:
        """A client's request (what v0-3 carry)."""
        return cls([TxnPartitions(transactional_id, producer_id, producer_epoch, partitions)])


@dataclass(slots=True)
class AddPartitionsToTxnResponse:
    """An error code per transactional id and partition (v0-3 carry one transaction, without its id)."""

    results: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    throttle_time_ms: int = 0
    #: v4: an error of the whole request
    top_error_code: int = 0

    @property
    def errors(self) -> dict[tuple[str, int], int]:
        """Every partition's code (a client's request has one transaction)."""
        return {tp: c for r in self.results.values() for tp, c in r.items()}

    @property
    def error_code(self) -> int:  # for raise_for_response: the top-level error only (per partition: errors)
        return self.top_error_code


def _topics(parts: list[tuple[str, int]]) -> list[dict]:
    return [{"name": t, "partitions": ps} for t, ps in _by_topic(parts).items()]


def _partition_results(errors: dict[tuple[str, int], int]) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for (t, p), code in errors.items():
        topics.setdefault(t, []).append({"partition_index": p, "partition_error_code": code})
    return [{"name": t, "results_by_partition": ps} for t, ps in topics.items()]


def _errors_of(topics: list[dict]) -> dict[tuple[str, int], int]:
    return {
        (t["name"], p["partition_index"]): p["partition_error_code"]
        for t in topics
        for p in t["results_by_partition"]
    }


def add_partitions_req_to(r: AddPartitionsToTxnRequest, v: int) -> dict:
    first = r.transactions[0] if r.transactions else TxnPartitions("", -1, -1)
    return {
        "transactions": [
            {
                "transactional_id": x.transactional_id,
                "producer_id": x.producer_id,
                "producer_epoch": x.producer_epoch,
                "verify_only": x.verify_only,
                "topics": _topics(x.partitions),
            }
            for x in r.transactions
        ],
        "v3_and_below_transactional_id": first.transactional_id,
        "v3_and_below_producer_id": first.producer_id,
        "v3_and_below_producer_epoch": first.producer_epoch,
        "v3_and_below_topics": _topics(first.partitions),
    }


def add_partitions_req_from(d: dict, v: int) -> AddPartitionsToTxnRequest:
    def parts(topics: list[dict]) -> list[tuple[str, int]]:
        return [(t["name"], p) for t in topics for p in t["partitions"]]

    if v < 4:
        return AddPartitionsToTxnRequest.single(
            d["v3_and_below_transactional_id"],
            d["v3_and_below_producer_id"],
            d["v3_and_below_producer_epoch"],
            parts(d["v3_and_below_topics"]),
        )
    return AddPartitionsToTxnRequest(
        [
            TxnPartitions(
                x["transactional_id"],
                x["producer_id"],
                x["producer_epoch"],
                parts(x["topics"]),
                x["verify_only"],
            )
            for x in d["transactions"]
        ]
    )


def add_partitions_resp_to(r: AddPartitionsToTxnResponse, v: int) -> dict:
    first = next(iter(r.results.values()), {})
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.top_error_code,
        "results_by_transaction": [
            {"transactional_id": tid, "topic_results": _partition_results(errors)}
            for tid, errors in r.results.items()
        ],
        "results_by_topic_v3_and_below": _partition_results(first),
    }


def add_partitions_resp_from(d: dict, v: int) -> AddPartitionsToTxnResponse:
    if v < 4:
        return AddPartitionsToTxnResponse(
            {"": _errors_of(d["results_by_topic_v3_and_below"])}, d["throttle_time_ms"]
        )
    return AddPartitionsToTxnResponse(
        {x["transactional_id"]: _errors_of(x["topic_results"]) for x in d["results_by_transaction"]},
        d["throttle_time_ms"],
        d["error_code"],
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
