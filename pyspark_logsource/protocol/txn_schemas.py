"""Kafka's schemas of the transaction APIs this broker serves: InitProducerId, WriteTxnMarkers.

Typed messages: :mod:`.messages` (InitProducerId) and :mod:`.txn_messages`. Conventions as in
:mod:`.schemas`: field names are Kafka's JSON names in snake_case, ``valid`` is the range
this broker implements, the field version specs are Kafka's.
"""

from __future__ import annotations

from .schema import F, message

# ------------------------------------------------------------------ InitProducerId (22)

INIT_PRODUCER_ID_REQUEST = message(
    "InitProducerIdRequest",
    "0-4",
    "2+",
    F("transactional_id", "string", "0+", nullable="0+"),
    F("transaction_timeout_ms", "int32"),
    F("producer_id", "int64", "3+", default=-1),
    F("producer_epoch", "int16", "3+", default=-1),
)
INIT_PRODUCER_ID_RESPONSE = message(
    "InitProducerIdResponse",
    "0-4",
    "2+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64", default=-1),
    F("producer_epoch", "int16"),
)

# ------------------------------------------------------------------ WriteTxnMarkers (27)
#
# Sent by a transaction coordinator to the leaders of the partitions a transaction touched
# (v0 was removed in Kafka 4.0).

WRITE_TXN_MARKERS_REQUEST = message(
    "WriteTxnMarkersRequest",
    "1-2",
    "1+",
    F(
        "markers",
        "[]WritableTxnMarker",
        "0+",
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("transaction_result", "bool"),
        F("topics", "[]WritableTxnMarkerTopic", "0+", F("name", "string"), F("partition_indexes", "[]int32")),
        F("coordinator_epoch", "int32"),
        F("transaction_version", "int8", "2+", default=0),
    ),
)
WRITE_TXN_MARKERS_RESPONSE = message(
    "WriteTxnMarkersResponse",
    "1-2",
    "1+",
    F(
        "markers",
        "[]WritableTxnMarkerResult",
        "0+",
        F("producer_id", "int64"),
        F(
            "topics",
            "[]WritableTxnMarkerTopicResult",
            "0+",
            F("name", "string"),
            F(
                "partitions",
                "[]WritableTxnMarkerPartitionResult",
                "0+",
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ),
        ),
    ),
)
