"""Kafka's transaction admin APIs: DescribeProducers (61), DescribeTransactions (65), ListTransactions (66).

Schemas (Kafka's JSON, field names in snake_case; every version flexible): DescribeProducers v0 (to a
partition's leader), DescribeTransactions v0 and ListTransactions v0-2 (to the transaction coordinator;
v1 adds ``duration_filter``, KIP-994; v2 ``transactional_id_pattern``, KIP-1152). Typed messages and
their adapters live here together, as in :mod:`.reassign_messages`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey
from .schema import F, message

# ------------------------------------------------------------------ schemas

DESCRIBE_PRODUCERS_REQUEST = message(
    "DescribeProducersRequest",
    "0",
    "0+",
    F("topics", "[]TopicRequest", "0+", F("name", "string"), F("partition_indexes", "[]int32")),
)
DESCRIBE_PRODUCERS_RESPONSE = message(
    "DescribeProducersResponse",
    "0",
    "0+",
    F("throttle_time_ms", "int32"),
    F(
        "topics",
        "[]TopicResponse",
        "0+",
        F("name", "string"),
        F(
            "partitions",
            "[]PartitionResponse",
            "0+",
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", "0+", nullable="0+", default="null"),
            F(
                "active_producers",
                "[]ProducerState",
                "0+",
                F("producer_id", "int64"),
                F("producer_epoch", "int32"),
                F("last_sequence", "int32", default=-1),
                F("last_timestamp", "int64", default=-1),
                F("coordinator_epoch", "int32"),
                F("current_txn_start_offset", "int64", default=-1),
            ),
        ),
    ),
)

DESCRIBE_TRANSACTIONS_REQUEST = message(
    "DescribeTransactionsRequest", "0", "0+", F("transactional_ids", "[]string")
)
DESCRIBE_TRANSACTIONS_RESPONSE = message(
    "DescribeTransactionsResponse",
    "0",
    "0+",
    F("throttle_time_ms", "int32"),
    F(
        "transaction_states",
        "[]TransactionState",
        "0+",
        F("error_code", "int16"),
        F("transactional_id", "string"),
        F("transaction_state", "string"),
        F("transaction_timeout_ms", "int32"),
        F("transaction_start_time_ms", "int64"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("topics", "[]TopicData", "0+", F("topic", "string"), F("partitions", "[]int32")),
    ),
)

LIST_TRANSACTIONS_REQUEST = message(
    "ListTransactionsRequest",
    "0-2",
    "0+",
    F("state_filters", "[]string"),
    F("producer_id_filters", "[]int64"),
    F("duration_filter", "int64", "1+", default=-1),
    F("transactional_id_pattern", "string", "2+", nullable="2+", default="null"),
)
LIST_TRANSACTIONS_RESPONSE = message(
    "ListTransactionsResponse",
    "0-2",
    "0+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("unknown_state_filters", "[]string"),
    F(
        "transaction_states",
        "[]TransactionState",
        "0+",
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("transaction_state", "string"),
    ),
)

# ------------------------------------------------------------------ typed messages


@dataclass(slots=True)
class DescribeProducersRequest:
    """The active producers of ``partitions`` ((topic, partition) pairs), asked of their leader."""

    API_KEY = ApiKey.DESCRIBE_PRODUCERS

    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass(slots=True)
class ProducerInfo:
    """One producer id as a partition's producer state knows it (Kafka's ProducerState)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int = -1
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1


@dataclass(slots=True)
class PartitionProducers:
    """A partition's active producers, or its error (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION)."""

    topic: str
    partition: int
    error_code: int = 0
    error_message: str | None = None
    producers: list[ProducerInfo] = field(default_factory=list)


@dataclass(slots=True)
class DescribeProducersResponse:
    partitions: list[PartitionProducers] = field(default_factory=list)
    throttle_time_ms: int = 0


@dataclass(slots=True)
class DescribeTransactionsRequest:
    """The coordinator's state of each transactional id."""

    API_KEY = ApiKey.DESCRIBE_TRANSACTIONS

    transactional_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TransactionDescription:
    """One transactional id's state (error TRANSACTIONAL_ID_NOT_FOUND, COORDINATOR_NOT_AVAILABLE, ...)."""

    transactional_id: str
    error_code: int = 0
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass(slots=True)
class DescribeTransactionsResponse:
    transactions: list[TransactionDescription] = field(default_factory=list)
    throttle_time_ms: int = 0


@dataclass(slots=True)
class ListTransactionsRequest:
    """Filters (empty / negative / None: no filter): states, producer ids, running longer than ms, id regex."""

    API_KEY = ApiKey.LIST_TRANSACTIONS

    state_filters: list[str] = field(default_factory=list)
    producer_id_filters: list[int] = field(default_factory=list)
    duration_filter_ms: int = -1
    transactional_id_pattern: str | None = None


@dataclass(slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(slots=True)
class ListTransactionsResponse:
    transactions: list[TransactionListing] = field(default_factory=list)
    unknown_state_filters: list[str] = field(default_factory=list)
    error_code: int = 0
    throttle_time_ms: int = 0


# ------------------------------------------------------------------ adapters


def _by_topic(pairs: list[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in pairs:
        out.setdefault(t, []).append(p)
    return out


def describe_producers_req_to(r: DescribeProducersRequest, v: int) -> dict:
    return {"topics": [{"name": t, "partition_indexes": ps} for t, ps in _by_topic(r.partitions).items()]}


def describe_producers_req_from(d: dict, v: int) -> DescribeProducersRequest:
    return DescribeProducersRequest([(t["name"], p) for t in d["topics"] for p in t["partition_indexes"]])


def describe_producers_resp_to(r: DescribeProducersResponse, v: int) -> dict:
    topics: dict[str, list[dict]] = {}
    for pp in r.partitions:
        topics.setdefault(pp.topic, []).append(
            {
                "partition_index": pp.partition,
                "error_code": pp.error_code,
                "error_message": pp.error_message,
                "active_producers": [
                    {
                        "producer_id": p.producer_id,
                        "producer_epoch": p.producer_epoch,
                        "last_sequence": p.last_sequence,
                        "last_timestamp": p.last_timestamp,
                        "coordinator_epoch": p.coordinator_epoch,
                        "current_txn_start_offset": p.current_txn_start_offset,
                    }
                    for p in pp.producers
                ],
            }
        )
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


def describe_producers_resp_from(d: dict, v: int) -> DescribeProducersResponse:
    parts = [
        PartitionProducers(
            t["name"],
            p["partition_index"],
            p["error_code"],
            p["error_message"],
            [
                ProducerInfo(
                    a["producer_id"],
                    a["producer_epoch"],
                    a["last_sequence"],
                    a["last_timestamp"],
                    a["coordinator_epoch"],
                    a["current_txn_start_offset"],
                )
                for a in p["active_producers"]
            ],
        )
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return DescribeProducersResponse(parts, d["throttle_time_ms"])


def describe_transactions_req_to(r: DescribeTransactionsRequest, v: int) -> dict:
    return {"transactional_ids": list(r.transactional_ids)}


def describe_transactions_req_from(d: dict, v: int) -> DescribeTransactionsRequest:
    return DescribeTransactionsRequest(list(d["transactional_ids"]))


def describe_transactions_resp_to(r: DescribeTransactionsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "transaction_states": [
            {
                "error_code": t.error_code,
                "transactional_id": t.transactional_id,
                "transaction_state": t.state,
                "transaction_timeout_ms": t.timeout_ms,
                "transaction_start_time_ms": t.start_time_ms,
                "producer_id": t.producer_id,
                "producer_epoch": t.producer_epoch,
                "topics": [{"topic": n, "partitions": ps} for n, ps in _by_topic(t.partitions).items()],
            }
            for t in r.transactions
        ],
    }


def describe_transactions_resp_from(d: dict, v: int) -> DescribeTransactionsResponse:
    txns = [
        TransactionDescription(
            t["transactional_id"],
            t["error_code"],
            t["transaction_state"],
            t["transaction_timeout_ms"],
            t["transaction_start_time_ms"],
            t["producer_id"],
            t["producer_epoch"],
            [(x["topic"], p) for x in t["topics"] for p in x["partitions"]],
        )
        for t in d["transaction_states"]
    ]
    return DescribeTransactionsResponse(txns, d["throttle_time_ms"])


def list_transactions_req_to(r: ListTransactionsRequest, v: int) -> dict:
    return {
        "state_filters": list(r.state_filters),
        "producer_id_filters": list(r.producer_id_filters),
        "duration_filter": r.duration_filter_ms,
        "transactional_id_pattern": r.transactional_id_pattern,
    }


def list_transactions_req_from(d: dict, v: int) -> ListTransactionsRequest:
    return ListTransactionsRequest(
        list(d["state_filters"]),
        list(d["producer_id_filters"]),
        d.get("duration_filter", -1) if v >= 1 else -1,
        d.get("transactional_id_pattern") if v >= 2 else None,
    )


def list_transactions_resp_to(r: ListTransactionsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "unknown_state_filters": list(r.unknown_state_filters),
        "transaction_states": [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.state,
            }
            for t in r.transactions
        ],
    }


def list_transactions_resp_from(d: dict, v: int) -> ListTransactionsResponse:
    return ListTransactionsResponse(
        [
            TransactionListing(t["transactional_id"], t["producer_id"], t["transaction_state"])
            for t in d["transaction_states"]
        ],
        list(d["unknown_state_filters"]),
        d["error_code"],
        d["throttle_time_ms"],
    )
