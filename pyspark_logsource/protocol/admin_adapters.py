"""Adapters of the admin APIs: typed messages (:mod:`.admin_messages`, :mod:`.messages`) <-> schema dicts."""

from __future__ import annotations

from . import admin_messages as am
from . import messages as m

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
                        "synonyms": [{"name": n, "value": val, "source": src} for n, val, src in c.synonyms],
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
                    [(y["name"], y["value"], y["source"]) for y in c["synonyms"]],
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
        "cluster_authorized_operations": r.cluster_authorized_operations,
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
        d["cluster_authorized_operations"],
    )
