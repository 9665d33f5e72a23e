"""Between the typed messages (:mod:`.messages`) and the schema dicts (:mod:`.schemas`).

Kafka nests per-partition entries by topic; the typed messages keep them
flat with the topic on each entry. One pair of functions per direction and
API: ``to_wire(message, version) -> dict`` and ``from_wire(dict, version)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import admin_messages as am
from . import coordinator_messages as cm
from . import messages as m
from .primitives import ProtocolError

Group = dict[str, list]


def _group(entries: list, topic_of: Callable[[Any], str] = lambda e: e.topic) -> Group:
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
        topics_w = [{"name": t, "topic_id": None} for t in topics]
    return {"topics": topics_w, "allow_auto_topic_creation": r.allow_auto_topic_creation}


def metadata_req_from(d: dict, v: int) -> m.MetadataRequest:
    topics = d["topics"]
    if topics is not None:
        names = [t["name"] for t in topics]
        if v < 12 and None in names:
            # Kafka: "Topic name can not be null for version 10/11" (an InvalidRequest); answering would
            # need a null name in a response version where names are not nullable
            raise ProtocolError(f"MetadataRequest v{v}: topic name can not be null before v12")
        topics = None if v == 0 and not names else names
    auto = d["allow_auto_topic_creation"] if v >= 4 else True
    return m.MetadataRequest(topics, auto)


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
                "topic_id": None,
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
                "topic_authorized_operations": -(1 << 31),
            }
            for t in r.topics
        ],
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
        )
        for t in d["topics"]
    ]
    brokers = [m.BrokerMetadata(b["node_id"], b["host"], b["port"], b["rack"]) for b in d["brokers"]]
    return m.MetadataResponse(brokers, d["cluster_id"], d["controller_id"], topics, d["throttle_time_ms"])


# ------------------------------------------------------------------ Produce


def produce_req_to(r: m.ProduceRequest, v: int) -> dict:
    return {
        "transactional_id": r.transactional_id,
        "acks": r.acks,
        "timeout_ms": r.timeout_ms,
        "topic_data": [
            {"name": t, "partition_data": [{"index": p.partition, "records": p.records} for p in ps]}
            for t, ps in _group(r.partitions).items()
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
                        "record_errors": [],
                        "error_message": p.error_message,
                    }
                    for p in ps
                ],
            }
            for t, ps in _group(r.partitions).items()
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
        "forgotten_topics_data": [],
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
            for t, ps in _group(r.partitions).items()
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
            for t, ps in _group(r.partitions).items()
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
            for t, ps in _group(r.partitions).items()
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
            for t, ps in _group(r.partitions).items()
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
            for t, ps in _group(r.partitions).items()
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
            for t, ps in _group(r.partitions).items()
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
            for t, tps in _group(r.partitions, lambda tp: tp[0]).items()
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
            for t, ps in _group(r.partitions).items()
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


# ------------------------------------------------------------------ CreateTopics / DeleteTopics


def create_topics_req_to(r: am.CreateTopicsRequest, v: int) -> dict:
    return {
        "topics": [
            {
                "name": t.name,
                "num_partitions": t.num_partitions,
                "replication_factor": t.replication_factor,
                "assignments": [{"partition_index": p, "broker_ids": b} for p, b in t.assignments.items()],
                "configs": [{"name": k, "value": val} for k, val in t.config.items()],
            }
            for t in r.topics
        ],
        "timeout_ms": r.timeout_ms,
        "validate_only": r.validate_only,
    }


def create_topics_req_from(d: dict, v: int) -> am.CreateTopicsRequest:
    topics = [
        am.CreatableTopic(
            t["name"],
            t["num_partitions"],
            t["replication_factor"],
            {c["name"]: c["value"] for c in t["configs"]},
            {a["partition_index"]: a["broker_ids"] for a in t["assignments"]},
        )
        for t in d["topics"]
    ]
    return am.CreateTopicsRequest(topics, d["timeout_ms"], d["validate_only"])


def create_topics_resp_to(r: am.CreateTopicsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "topics": [
            {
                "name": t.name,
                "topic_id": None,
                "error_code": t.error_code,
                "error_message": t.error_message,
                "num_partitions": t.num_partitions,
                "replication_factor": t.replication_factor,
                "configs": None if t.error_code else [],
            }
            for t in r.topics
        ],
    }


def create_topics_resp_from(d: dict, v: int) -> am.CreateTopicsResponse:
    topics = [
        am.CreateTopicResult(
            t["name"], t["error_code"], t["error_message"], t["num_partitions"], t["replication_factor"]
        )
        for t in d["topics"]
    ]
    return am.CreateTopicsResponse(topics, d["throttle_time_ms"])


def delete_topics_req_to(r: am.DeleteTopicsRequest, v: int) -> dict:
    return {
        "topics": [{"name": t, "topic_id": None} for t in r.topics],
        "topic_names": r.topics,
        "timeout_ms": r.timeout_ms,
    }


def delete_topics_req_from(d: dict, v: int) -> am.DeleteTopicsRequest:
    names = [t["name"] for t in d["topics"]] if v >= 6 else d["topic_names"]
    return am.DeleteTopicsRequest([n if n is not None else "" for n in names], d["timeout_ms"])


def delete_topics_resp_to(r: am.DeleteTopicsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "responses": [
            {"name": t.name, "topic_id": None, "error_code": t.error_code, "error_message": t.error_message}
            for t in r.topics
        ],
    }


def delete_topics_resp_from(d: dict, v: int) -> am.DeleteTopicsResponse:
    return am.DeleteTopicsResponse(
        [am.DeleteTopicResult(t["name"], t["error_code"], t["error_message"]) for t in d["responses"]],
        d["throttle_time_ms"],
    )


# ------------------------------------------------------------------ DescribeConfigs / DescribeCluster


def describe_configs_req_to(r: am.DescribeConfigsRequest, v: int) -> dict:
    return {
        "resources": [
            {"resource_type": x.resource_type, "resource_name": x.resource_name, "configuration_keys": x.keys}
            for x in r.resources
        ],
        "include_synonyms": r.include_synonyms,
        "include_documentation": r.include_documentation,
    }


def describe_configs_req_from(d: dict, v: int) -> am.DescribeConfigsRequest:
    res = [
        am.ConfigResource(x["resource_type"], x["resource_name"], x["configuration_keys"])
        for x in d["resources"]
    ]
    return am.DescribeConfigsRequest(res, d["include_synonyms"], d["include_documentation"])


def describe_configs_resp_to(r: am.DescribeConfigsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "results": [
            {
                "error_code": x.error_code,
                "error_message": x.error_message,
                "resource_type": x.resource_type,
                "resource_name": x.resource_name,
                "configs": [
                    {
                        "name": c.name,
                        "value": c.value,
                        "read_only": c.read_only,
                        "is_default": c.source == 5,
                        "config_source": c.source,
                        "is_sensitive": c.is_sensitive,
                        "synonyms": [],
                        "config_type": c.config_type,
                        "documentation": c.documentation,
                    }
                    for c in x.configs
                ],
            }
            for x in r.results
        ],
    }


def describe_configs_resp_from(d: dict, v: int) -> am.DescribeConfigsResponse:
    results = [
        am.DescribeConfigsResult(
            x["resource_type"],
            x["resource_name"],
            x["error_code"],
            x["error_message"],
            [
                am.ConfigEntry(
                    c["name"],
                    c["value"],
                    c["read_only"],
                    c["config_source"] if v >= 1 else (5 if c["is_default"] else 1),
                    c["is_sensitive"],
                    c["config_type"],
                    c["documentation"],
                )
                for c in x["configs"]
            ],
        )
        for x in d["results"]
    ]
    return am.DescribeConfigsResponse(results, d["throttle_time_ms"])


def describe_cluster_req_to(r: m.DescribeClusterRequest, v: int) -> dict:
    return {
        "include_cluster_authorized_operations": r.include_cluster_authorized_operations,
        "endpoint_type": r.endpoint_type,
    }


def describe_cluster_req_from(d: dict, v: int) -> m.DescribeClusterRequest:
    return m.DescribeClusterRequest(d["include_cluster_authorized_operations"], d["endpoint_type"])


def describe_cluster_resp_to(r: m.DescribeClusterResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "error_message": r.error_message,
        "endpoint_type": r.endpoint_type,
        "cluster_id": r.cluster_id,
        "controller_id": r.controller_id,
        "brokers": [
            {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in r.brokers
        ],
        "cluster_authorized_operations": -(1 << 31),
    }


def describe_cluster_resp_from(d: dict, v: int) -> m.DescribeClusterResponse:
    return m.DescribeClusterResponse(
        d["error_code"],
        d["error_message"],
        d["cluster_id"],
        d["controller_id"],
        [m.BrokerMetadata(b["broker_id"], b["host"], b["port"], b["rack"]) for b in d["brokers"]],
        d["throttle_time_ms"],
        d["endpoint_type"],
    )
