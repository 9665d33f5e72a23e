"""Our extension API ``StagedTxns``: stage, commit or abort the transactions of a Spark write.

Kafka commits one producer's transaction at a time (EndTxn). A Spark write
has one producer per task attempt, and its driver must publish the winners
of every task at once, together with the query's batch id, so that a
repeated commit of the same batch is a no-op. One request does that::

    StagedTxnsRequest (api key 10100, version 0, not flexible)
      action         int8    0 = REGISTER (a task attempt names its partitions before it writes),
                             1 = COMMIT (the driver), 2 = ABORT (the driver, or a failing task)
      write_id       string  the query id (streaming) or the job's write id (batch)
      batch_id       int64   the micro-batch id (0 for a batch job)
      timeout_ms     int32   staged data of an undecided attempt is aborted after this
      producers      []      producer_id int64, producer_epoch int16,
                             partitions [] (topic string, partition int32, record_count int64)
    StagedTxnsResponse
      throttle_time_ms int32, error_code int16, error_message string (nullable),
      last_committed_batch_id int64, committed bool (false: the batch was committed before: no-op)

The key is outside Kafka's range; Kafka clients never send it and skip it in
ApiVersions. Schema and typed messages live here, beside their adapters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .api_keys import ApiKey
from .schema import F, message

STAGED_TXNS_KEY = ApiKey.STAGED_TXNS

REGISTER, COMMIT, ABORT = 0, 1, 2

STAGED_TXNS_REQUEST = message(
    "StagedTxnsRequest",
    "0",
    "none",
    F("action", "int8"),
    F("write_id", "string"),
    F("batch_id", "int64"),
    F("timeout_ms", "int32"),
    F(
        "producers",
        "[]StagedProducer",
        "0+",
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F(
            "partitions",
            "[]StagedPartition",
            "0+",
            F("topic", "string"),
            F("partition", "int32"),
            F("record_count", "int64"),
        ),
    ),
)
STAGED_TXNS_RESPONSE = message(
    "StagedTxnsResponse",
    "0",
    "none",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+", default="null"),
    F("last_committed_batch_id", "int64", default=-1),
    F("committed", "bool"),
)


@dataclass(slots=True)
class StagedProducer:
    """One task attempt's producer and the records it staged per partition."""

    producer_id: int
    producer_epoch: int
    #: (topic, partition) -> staged record count (-1 when only registered)
    partitions: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(slots=True)
class StagedTxnsRequest:
    """Register, commit or abort the staged transactions of a write (see the module docstring)."""

    API_KEY = STAGED_TXNS_KEY
    action: int
    write_id: str
    batch_id: int = 0
    timeout_ms: int = 60000
    producers: list[StagedProducer] = field(default_factory=list)


@dataclass(slots=True)
class StagedTxnsResponse:
    """The outcome; ``committed`` is False when the batch id was committed before (nothing changed)."""

    error_code: int = 0
    error_message: str | None = None
    last_committed_batch_id: int = -1
    committed: bool = False
    throttle_time_ms: int = 0


def staged_txns_req_to(r: StagedTxnsRequest, v: int) -> dict:
    return {
        "action": r.action,
        "write_id": r.write_id,
        "batch_id": r.batch_id,
        "timeout_ms": r.timeout_ms,
        "producers": [
            {
                "producer_id": p.producer_id,
                "producer_epoch": p.producer_epoch,
                "partitions": [
                    {"topic": t, "partition": q, "record_count": n} for (t, q), n in p.partitions.items()
                ],
            }
            for p in r.producers
        ],
    }


def staged_txns_req_from(d: dict, v: int) -> StagedTxnsRequest:
    producers = [
        StagedProducer(
            p["producer_id"],
            p["producer_epoch"],
            {(x["topic"], x["partition"]): x["record_count"] for x in p["partitions"]},
        )
        for p in d["producers"]
    ]
    return StagedTxnsRequest(d["action"], d["write_id"], d["batch_id"], d["timeout_ms"], producers)


def staged_txns_resp_to(r: StagedTxnsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "error_message": r.error_message,
        "last_committed_batch_id": r.last_committed_batch_id,
        "committed": r.committed,
    }


def staged_txns_resp_from(d: dict, v: int) -> StagedTxnsResponse:
    return StagedTxnsResponse(
        d["error_code"],
        d["error_message"],
        d["last_committed_batch_id"],
        d["committed"],
        d["throttle_time_ms"],
    )


# ------------------------------------------------------------------ WriteTxnMarkers (Kafka's API 27)


@dataclass(slots=True)
class TxnMarker:
    """One marker to write: end ``producer_id``'s transaction in ``partitions`` (COMMIT if ``committed``)."""

    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: list[tuple[str, int]] = field(default_factory=list)
    coordinator_epoch: int = 0


@dataclass(slots=True)
class WriteTxnMarkersRequest:
    """A coordinator asks a partition leader to append transaction markers."""

    API_KEY = ApiKey.WRITE_TXN_MARKERS
    markers: list[TxnMarker] = field(default_factory=list)


@dataclass(slots=True)
class TxnMarkerResult:
    """Per producer: the error code of each partition's marker."""

    producer_id: int
    errors: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(slots=True)
class WriteTxnMarkersResponse:
    """The outcome per producer and partition."""

    markers: list[TxnMarkerResult] = field(default_factory=list)
    error_code: int = 0  # not on the wire; for raise_for_response


def _by_topic(parts: list[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in parts:
        out.setdefault(t, []).append(p)
    return out


def write_txn_markers_req_to(r: WriteTxnMarkersRequest, v: int) -> dict:
    return {
        "markers": [
            {
                "producer_id": m.producer_id,
                "producer_epoch": m.producer_epoch,
                "transaction_result": m.committed,
                "coordinator_epoch": m.coordinator_epoch,
                "transaction_version": 0,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in _by_topic(m.partitions).items()],
            }
            for m in r.markers
        ]
    }


def write_txn_markers_req_from(d: dict, v: int) -> WriteTxnMarkersRequest:
    return WriteTxnMarkersRequest(
        [
            TxnMarker(
                m["producer_id"],
                m["producer_epoch"],
                m["transaction_result"],
                [(t["name"], p) for t in m["topics"] for p in t["partition_indexes"]],
                m["coordinator_epoch"],
            )
            for m in d["markers"]
        ]
    )


def write_txn_markers_resp_to(r: WriteTxnMarkersResponse, v: int) -> dict:
    out = []
    for m in r.markers:
        topics: dict[str, list[dict]] = {}
        for (t, p), code in m.errors.items():
            topics.setdefault(t, []).append({"partition_index": p, "error_code": code})
        out.append(
            {
                "producer_id": m.producer_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }
        )
    return {"markers": out}


def write_txn_markers_resp_from(d: dict, v: int) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(
        [
            TxnMarkerResult(
                m["producer_id"],
                {
                    (t["name"], p["partition_index"]): p["error_code"]
                    for t in m["topics"]
                    for p in t["partitions"]
                },
            )
            for m in d["markers"]
        ]
    )
