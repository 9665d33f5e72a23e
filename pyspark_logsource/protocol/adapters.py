"""Between the typed messages (:mod:`.messages`) and the schema dicts (:mod:`.schemas`).

Kafka nests per-partition entries by topic; the typed messages keep them
flat with the topic on each entry. One pair of functions per direction and
API: ``to_wire(message, version) -> dict`` and ``from_wire(dict, version)``.

This module holds the data-path APIs (ApiVersions, Metadata, Produce, Fetch,
ListOffsets) and InitProducerId; the other families are beside their typed
messages' modules: :mod:`.coordinator_adapters`, :mod:`.group_adapters`,
:mod:`.admin_adapters` (and :mod:`.epoch_messages`, :mod:`.txn_messages`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import messages as m
from .primitives import ProtocolError

Group = dict[str, list]


def by_topic(entries: list, topic_of: Callable[[Any], str] = lambda e: e.topic) -> Group:
    """The entries by topic (``topic_of``), in first-seen order: Kafka nests partitions by topic."""
    groups: Group = {}
    for e in entries:
        groups.setdefault(topic_of(e), []).append(e)
    return groups


# ------------------------------------------------------------------ ApiVersions


def api_versions_req_to(r: m.ApiVersionsRequest, v: int) -> dict:
    return {
        "client_software_name": r.client_software_name,
        "client_software_version": r.client_software_version,
        "logsource_arrow_body": r.arrow_body,
    }


def api_versions_req_from(d: dict, v: int) -> m.ApiVersionsRequest:
    return m.ApiVersionsRequest(
        d["client_software_name"], d["client_software_version"], bool(d.get("logsource_arrow_body"))
    )


def api_versions_resp_to(r: m.ApiVersionsResponse, v: int) -> dict:
    return {
        "error_code": r.error_code,
        "api_keys": [
            {"api_key": a.api_key, "min_version": a.min_version, "max_version": a.max_version}
            for a in r.api_keys
        ],
        "throttle_time_ms": r.throttle_time_ms,
        "supported_features": [
            {"name": f.name, "min_version": f.min_version, "max_version": f.max_version}
            for f in r.supported_features
        ]
        or None,
    }


def api_versions_resp_from(d: dict, v: int) -> m.ApiVersionsResponse:
    return m.ApiVersionsResponse(
        d["error_code"],
        [m.ApiVersion(a["api_key"], a["min_version"], a["max_version"]) for a in d["api_keys"]],
        d["throttle_time_ms"],
        [
            m.SupportedFeature(f["name"], f["min_version"], f["max_version"])
            for f in d["supported_features"] or ()
        ],
    )


# ------------------------------------------------------------------ Metadata


def metadata_req_to(r: m.MetadataRequest, v: int) -> dict:
    topics = r.topics
    if topics is None:
        topics_w = [] if v == 0 else None
    else:
        if v == 0 and not topics:
            raise ValueError("Metadata v0 cannot ask for no topics (an empty list means all)")
        ids = r.topic_ids or [None] * len(topics)
        topics_w = [{"name": t, "topic_id": i} for t, i in zip(topics, ids, strict=True)]
    return {
        "topics": topics_w,
        "allow_auto_topic_creation": r.allow_auto_topic_creation,
        "include_cluster_authorized_operations": r.include_cluster_authorized_operations,
        "include_topic_authorized_operations": r.include_topic_authorized_operations,
    }


def metadata_req_from(d: dict, v: int) -> m.MetadataRequest:
    topics = d["topics"]
    if topics is not None:
        names = [t["name"] for t in topics]
        if v < 12 and None in names:
            # Kafka: "Topic name can not be null for version 10/11" (an InvalidRequest); answering would
            # need a null name in a response version where names are not nullable
            raise ProtocolError(f"MetadataRequest v{v}: topic name can not be null before v12")
        ids = [bytes(t["topic_id"]) if v >= 10 and any(t["topic_id"]) else None for t in topics]
        ids = ids if any(i is not None for i in ids) else None  # the zero uuid: no id
        topics = None if v == 0 and not names else names
    else:
        ids = None
    auto = d["allow_auto_topic_creation"] if v >= 4 else True
    return m.MetadataRequest(
        topics,
        auto,
        ids if topics is not None else None,
        bool(d.get("include_cluster_authorized_operations")) and 8 <= v <= 10,
        bool(d.get("include_topic_authorized_operations")) and v >= 8,
    )


def metadata_resp_to(r: m.MetadataResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in r.brokers
        ],
        "cluster_id": r.cluster_id,
        "controller_id": r.controller_id,
        "topics": [
            {
                "error_code": t.error_code,
                "name": t.name,
                "topic_id": t.topic_id,
                "is_internal": t.is_internal,
                "partitions": [
                    {
                        "error_code": p.error_code,
                        "partition_index": p.partition,
                        "leader_id": p.leader_id,
                        "leader_epoch": p.leader_epoch,
                        "replica_nodes": p.replicas,
                        "isr_nodes": p.isr,
                        "offline_replicas": p.offline_replicas,
                    }
                    for p in t.partitions
                ],
                "topic_authorized_operations": t.authorized_operations,
            }
            for t in r.topics
        ],
        "cluster_authorized_operations": r.cluster_authorized_operations,
    }


def metadata_resp_from(d: dict, v: int) -> m.MetadataResponse:
    topics = [
        m.TopicMetadata(
            t["name"],
            [
                m.PartitionMetadata(
                    p["partition_index"],
                    p["leader_id"],
                    p["leader_epoch"],
                    p["replica_nodes"],
                    p["isr_nodes"],
                    p["offline_replicas"],
                    p["error_code"],
                )
                for p in t["partitions"]
            ],
            t["is_internal"],
            t["error_code"],
            bytes(t["topic_id"]) if v >= 10 and any(t["topic_id"]) else None,
            t.get("topic_authorized_operations", -(1 << 31)) if v >= 8 else -(1 << 31),
        )
        for t in d["topics"]
    ]
    brokers = [m.BrokerMetadata(b["node_id"], b["host"], b["port"], b["rack"]) for b in d["brokers"]]
    cluster_ops = d.get("cluster_authorized_operations", -(1 << 31)) if 8 <= v <= 10 else -(1 << 31)
    return m.MetadataResponse(
        brokers, d["cluster_id"], d["controller_id"], topics, d["throttle_time_ms"], cluster_ops
    )


# ------------------------------------------------------------------ Produce


def produce_req_to(r: m.ProduceRequest, v: int) -> dict:
    return {
        "transactional_id": r.transactional_id,
        "acks": r.acks,
        "timeout_ms": r.timeout_ms,
        "topic_data": [
            {"name": t, "partition_data": [{"index": p.partition, "records": p.records} for p in ps]}
            for t, ps in by_topic(r.partitions).items()
        ],
    }


def produce_req_from(d: dict, v: int) -> m.ProduceRequest:
    parts = [
        m.ProducePartitionData(t["name"], p["index"], p["records"])
        for t in d["topic_data"]
        for p in t["partition_data"]
    ]
    return m.ProduceRequest(parts, d["acks"], d["timeout_ms"], d["transactional_id"])


def produce_resp_to(r: m.ProduceResponse, v: int) -> dict:
    return {
        "responses": [
            {
                "name": t,
                "partition_responses": [
                    {
                        "index": p.partition,
                        "error_code": p.error_code,
                        "base_offset": p.base_offset,
                        "log_append_time_ms": p.log_append_time_ms,
                        "log_start_offset": p.log_start_offset,
                        "record_errors": [
                            {"batch_index": i, "batch_index_error_message": None} for i in p.record_errors
                        ],
                        "error_message": p.error_message,
                    }
                    for p in ps
                ],
            }
            for t, ps in by_topic(r.partitions).items()
        ],
        "throttle_time_ms": r.throttle_time_ms,
    }


def produce_resp_from(d: dict, v: int) -> m.ProduceResponse:
    parts = [
        m.ProducePartitionResponse(
            t["name"],
            p["index"],
            p["error_code"],
            p["base_offset"],
            p["log_append_time_ms"],
            p["log_start_offset"],
            p["error_message"],
            tuple(e["batch_index"] for e in p.get("record_errors") or ()),
        )
        for t in d["responses"]
        for p in t["partition_responses"]
    ]
    return m.ProduceResponse(parts, d["throttle_time_ms"])


# ------------------------------------------------------------------ Fetch


def fetch_req_to(r: m.FetchRequest, v: int) -> dict:
    return {
        "replica_id": r.replica_id,
        "max_wait_ms": r.max_wait_ms,
        "min_bytes": r.min_bytes,
        "max_bytes": r.max_bytes,
        "isolation_level": r.isolation_level,
        "session_id": r.session_id,
        "session_epoch": r.session_epoch,
        "forgotten_topics_data": [
            {"topic": t, "partitions": [p for _, p in ps]}
            for t, ps in by_topic(r.forgotten, lambda e: e[0]).items()
        ],
        "rack_id": r.rack_id,
        "topics": [
            {
                "topic": t,
                "partitions": [
                    {
                        "partition": p.partition,
                        "current_leader_epoch": p.current_leader_epoch,
                        "fetch_offset": p.fetch_offset,
                        "last_fetched_epoch": p.last_fetched_epoch,
                        "log_start_offset": p.log_start_offset,
                        "partition_max_bytes": p.max_bytes,
                    }
                    for p in ps
                ],
            }
            for t, ps in by_topic(r.partitions).items()
        ],
    }


def fetch_req_from(d: dict, v: int) -> m.FetchRequest:
    parts = [
        m.FetchPartition(
            t["topic"],
            p["partition"],
            p["fetch_offset"],
            p["partition_max_bytes"],
            p["log_start_offset"],
            p["current_leader_epoch"],
            p["last_fetched_epoch"],
        )
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return m.FetchRequest(
        parts,
        d["max_wait_ms"],
        d["min_bytes"],
        d["max_bytes"],
        d["isolation_level"],
        d["replica_id"],
        d["session_id"],
        d["session_epoch"],
        d["rack_id"],
        [(t["topic"], p) for t in d["forgotten_topics_data"] for p in t["partitions"]],
    )


def _aborted_to(a: list[m.AbortedTransaction] | None) -> list[dict] | None:
    if a is None:
        return None
    return [{"producer_id": x.producer_id, "first_offset": x.first_offset} for x in a]


def fetch_resp_to(r: m.FetchResponse, v: int) -> dict:
    # A partition without records (an error) gets an empty record set, never a null one, although the
    # schema allows null: Kafka writes MemoryRecords.EMPTY, and librdkafka fails the whole response on
    # a null ("invalid MessageSetSize -1"). Decoding still accepts a null, as Kafka's schema does.
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "session_id": r.session_id,
        "responses": [
            {
                "topic": t,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "error_code": p.error_code,
                        "high_watermark": p.high_watermark,
                        "last_stable_offset": p.last_stable_offset,
                        "log_start_offset": p.log_start_offset,
                        "aborted_transactions": _aborted_to(p.aborted_transactions),
                        "diverging_epoch": {"epoch": p.diverging_epoch, "end_offset": p.diverging_end_offset},
                        "preferred_read_replica": p.preferred_read_replica,
                        "records": b"" if p.records is None else p.records,
                    }
                    for p in ps
                ],
            }
            for t, ps in by_topic(r.partitions).items()
        ],
    }


def fetch_resp_from(d: dict, v: int) -> m.FetchResponse:
    parts = []
    for t in d["responses"]:
        for p in t["partitions"]:
            ab = p["aborted_transactions"]
            parts.append(
                m.FetchPartitionResponse(
                    t["topic"],
                    p["partition_index"],
                    p["error_code"],
                    p["high_watermark"],
                    p["last_stable_offset"],
                    p["log_start_offset"],
                    p["records"],
                    None
                    if ab is None
                    else [m.AbortedTransaction(a["producer_id"], a["first_offset"]) for a in ab],
                    p["preferred_read_replica"],
                    p["diverging_epoch"]["epoch"],
                    p["diverging_epoch"]["end_offset"],
                )
            )
    return m.FetchResponse(parts, d["throttle_time_ms"], d["error_code"], d["session_id"])


# ------------------------------------------------------------------ ListOffsets


def list_offsets_req_to(r: m.ListOffsetsRequest, v: int) -> dict:
    return {
        "replica_id": r.replica_id,
        "isolation_level": r.isolation_level,
        "topics": [
            {
                "name": t,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "current_leader_epoch": p.current_leader_epoch,
                        "timestamp": p.timestamp,
                        "max_num_offsets": 1,
                    }
                    for p in ps
                ],
            }
            for t, ps in by_topic(r.partitions).items()
        ],
    }


def list_offsets_req_from(d: dict, v: int) -> m.ListOffsetsRequest:
    parts = [
        m.ListOffsetsPartition(t["name"], p["partition_index"], p["timestamp"], p["current_leader_epoch"])
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return m.ListOffsetsRequest(parts, d["isolation_level"], d["replica_id"])


def list_offsets_resp_to(r: m.ListOffsetsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "topics": [
            {
                "name": t,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "error_code": p.error_code,
                        "old_style_offsets": [],
                        "timestamp": p.timestamp,
                        "offset": p.offset,
                        "leader_epoch": p.leader_epoch,
                    }
                    for p in ps
                ],
            }
            for t, ps in by_topic(r.partitions).items()
        ],
    }


def list_offsets_resp_from(d: dict, v: int) -> m.ListOffsetsResponse:
    parts = [
        m.ListOffsetsPartitionResponse(
            t["name"], p["partition_index"], p["error_code"], p["timestamp"], p["offset"], p["leader_epoch"]
        )
        for t in d["topics"]
        for p in t["partitions"]
    ]
    return m.ListOffsetsResponse(parts, d["throttle_time_ms"])


# ------------------------------------------------------------------ InitProducerId


def init_pid_req_to(r: m.InitProducerIdRequest, v: int) -> dict:
    return {
        "transactional_id": r.transactional_id,
        "transaction_timeout_ms": r.transaction_timeout_ms,
        "producer_id": r.producer_id,
        "producer_epoch": r.producer_epoch,
    }


def init_pid_req_from(d: dict, v: int) -> m.InitProducerIdRequest:
    return m.InitProducerIdRequest(
        d["transactional_id"], d["transaction_timeout_ms"], d["producer_id"], d["producer_epoch"]
    )


def init_pid_resp_to(r: m.InitProducerIdResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "producer_id": r.producer_id,
        "producer_epoch": r.producer_epoch,
    }


def init_pid_resp_from(d: dict, v: int) -> m.InitProducerIdResponse:
    return m.InitProducerIdResponse(
        d["error_code"], d["producer_id"], d["producer_epoch"], d["throttle_time_ms"]
    )
