"""Kafka's schemas of the transactional producer's APIs: AddPartitionsToTxn (24), AddOffsetsToTxn (25),
EndTxn (26), TxnOffsetCommit (28).

Transcribed from Kafka's message JSON (clients/src/main/resources/common/message), field for
field; conventions as in :mod:`.schemas`. ``valid`` is the range this broker serves:

* AddPartitionsToTxn 0-4: v0-3 are the versions clients send; v4 batches transactions and carries
  VerifyOnly, which a partition leader sends the coordinator (KIP-890 part 1); Kafka's clients cap at 3.
  v5 differs only in an error code of Transactions V2.
* EndTxn 0-4: v5 is Transactions V2 (KIP-890 part 2), which a client only uses when the
  broker finalizes the ``transaction.version`` feature; this broker does not (V1 for everyone).
* AddOffsetsToTxn 0-4 and TxnOffsetCommit 0-4 (TxnOffsetCommit v5 is V2's, as EndTxn v5).

Typed messages and adapters: :mod:`.producer_txn_messages`.
"""

from __future__ import annotations

from .schema import F, message

ADD_PARTITIONS_TO_TXN_REQUEST = message(
    "AddPartitionsToTxnRequest",
    "0-4",
    "3+",
    F(
        "transactions",
        "[]AddPartitionsToTxnTransaction",
        "4+",
        F("transactional_id", "string", "4+"),
        F("producer_id", "int64", "4+"),
        F("producer_epoch", "int16", "4+"),
        F("verify_only", "bool", "4+", default=False),
        F("topics", "[]AddPartitionsToTxnTopic", "4+", F("name", "string"), F("partitions", "[]int32")),
    ),
    F("v3_and_below_transactional_id", "string", "0-3"),
    F("v3_and_below_producer_id", "int64", "0-3"),
    F("v3_and_below_producer_epoch", "int16", "0-3"),
    F(
        "v3_and_below_topics",
        "[]AddPartitionsToTxnTopic",
        "0-3",
        F("name", "string"),
        F("partitions", "[]int32"),
    ),
)

_PARTITION_RESULTS = (
    F("name", "string"),
    F(
        "results_by_partition",
        "[]AddPartitionsToTxnPartitionResult",
        "0+",
        F("partition_index", "int32"),
        F("partition_error_code", "int16"),
    ),
)

ADD_PARTITIONS_TO_TXN_RESPONSE = message(
    "AddPartitionsToTxnResponse",
    "0-4",
    "3+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "4+"),
    F(
        "results_by_transaction",
        "[]AddPartitionsToTxnResult",
        "4+",
        F("transactional_id", "string", "4+"),
        F("topic_results", "[]AddPartitionsToTxnTopicResult", "4+", *_PARTITION_RESULTS),
    ),
    F("results_by_topic_v3_and_below", "[]AddPartitionsToTxnTopicResult", "0-3", *_PARTITION_RESULTS),
)

ADD_OFFSETS_TO_TXN_REQUEST = message(
    "AddOffsetsToTxnRequest",
    "0-4",
    "3+",
    F("transactional_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("group_id", "string"),
)
ADD_OFFSETS_TO_TXN_RESPONSE = message(
    "AddOffsetsToTxnResponse", "0-4", "3+", F("throttle_time_ms", "int32"), F("error_code", "int16")
)

END_TXN_REQUEST = message(
    "EndTxnRequest",
    "0-4",
    "3+",
    F("transactional_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("committed", "bool"),
)
END_TXN_RESPONSE = message(
    "EndTxnResponse",
    "0-4",
    "3+",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64", "5+", default=-1),
    F("producer_epoch", "int16", "5+", default=-1),
)

TXN_OFFSET_COMMIT_REQUEST = message(
    "TxnOffsetCommitRequest",
    "0-4",
    "3+",
    F("transactional_id", "string"),
    F("group_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("generation_id", "int32", "3+", default=-1),
    F("member_id", "string", "3+", default=""),
    F("group_instance_id", "string", "3+", nullable="3+", default="null"),
    F(
        "topics",
        "[]TxnOffsetCommitRequestTopic",
        "0+",
        F("name", "string"),
        F(
            "partitions",
            "[]TxnOffsetCommitRequestPartition",
            "0+",
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "2+", default=-1),
            F("committed_metadata", "string", "0+", nullable="0+"),
        ),
    ),
)
TXN_OFFSET_COMMIT_RESPONSE = message(
    "TxnOffsetCommitResponse",
    "0-4",
    "3+",
    F("throttle_time_ms", "int32"),
    F(
        "topics",
        "[]TxnOffsetCommitResponseTopic",
        "0+",
        F("name", "string"),
        F(
            "partitions",
            "[]TxnOffsetCommitResponsePartition",
            "0+",
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ),
    ),
)
