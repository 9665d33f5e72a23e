"""Adapters of CreatePartitions, AlterConfigs and IncrementalAlterConfigs: typed messages
(:mod:`.admin_config_messages`) <-> schema dicts (:mod:`.admin_config_schemas`)."""

from __future__ import annotations

from . import admin_config_messages as acm

# ------------------------------------------------------------------ CreatePartitions


def create_partitions_req_to(r: acm.CreatePartitionsRequest, v: int) -> dict:
    return {
        "topics": [
            {
                "name": t.name,
                "count": t.count,
                "assignments": None
                if t.assignments is None
                else [{"broker_ids": list(b)} for b in t.assignments],
            }
            for t in r.topics
        ],
        "timeout_ms": r.timeout_ms,
        "validate_only": r.validate_only,
    }


def create_partitions_req_from(d: dict, v: int) -> acm.CreatePartitionsRequest:
    topics = [
        acm.CreatePartitionsTopic(
            t["name"],
            t["count"],
            None if t["assignments"] is None else [list(a["broker_ids"]) for a in t["assignments"]],
        )
        for t in d["topics"]
    ]
    return acm.CreatePartitionsRequest(topics, d["timeout_ms"], d["validate_only"])


def create_partitions_resp_to(r: acm.CreatePartitionsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "results": [
            {"name": x.name, "error_code": x.error_code, "error_message": x.error_message} for x in r.results
        ],
    }


def create_partitions_resp_from(d: dict, v: int) -> acm.CreatePartitionsResponse:
    return acm.CreatePartitionsResponse(
        [acm.CreatePartitionsResult(x["name"], x["error_code"], x["error_message"]) for x in d["results"]],
        d["throttle_time_ms"],
    )


# ------------------------------------------------------------------ AlterConfigs / IncrementalAlterConfigs


def _resources_to(resources: list[acm.AlterConfigsResource], incremental: bool) -> list[dict]:
    out = []
    for x in resources:
        configs = []
        for c in x.configs:
            entry = {"name": c.name, "value": c.value}
            if incremental:
                entry["config_operation"] = c.op
            configs.append(entry)
        out.append({"resource_type": x.resource_type, "resource_name": x.resource_name, "configs": configs})
    return out


def _resources_from(d: dict, incremental: bool) -> list[acm.AlterConfigsResource]:
    return [
        acm.AlterConfigsResource(
            x["resource_type"],
            x["resource_name"],
            [
                acm.AlterableConfig(
                    c["name"], c["value"], c["config_operation"] if incremental else acm.OP_SET
                )
                for c in x["configs"]
            ],
        )
        for x in d["resources"]
    ]


def _results_to(r: acm.AlterConfigsResponse | acm.IncrementalAlterConfigsResponse) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "responses": [
            {
                "error_code": x.error_code,
                "error_message": x.error_message,
                "resource_type": x.resource_type,
                "resource_name": x.resource_name,
            }
            for x in r.results
        ],
    }


def _results_from(d: dict) -> list[acm.AlterConfigsResult]:
    return [
        acm.AlterConfigsResult(x["resource_type"], x["resource_name"], x["error_code"], x["error_message"])
        for x in d["responses"]
    ]


def alter_configs_req_to(r: acm.AlterConfigsRequest, v: int) -> dict:
    return {"resources": _resources_to(r.resources, False), "validate_only": r.validate_only}


def alter_configs_req_from(d: dict, v: int) -> acm.AlterConfigsRequest:
    return acm.AlterConfigsRequest(_resources_from(d, False), d["validate_only"])


def alter_configs_resp_to(r: acm.AlterConfigsResponse, v: int) -> dict:
    return _results_to(r)


def alter_configs_resp_from(d: dict, v: int) -> acm.AlterConfigsResponse:
    return acm.AlterConfigsResponse(_results_from(d), d["throttle_time_ms"])


def incremental_alter_configs_req_to(r: acm.IncrementalAlterConfigsRequest, v: int) -> dict:
    return {"resources": _resources_to(r.resources, True), "validate_only": r.validate_only}


def incremental_alter_configs_req_from(d: dict, v: int) -> acm.IncrementalAlterConfigsRequest:
    return acm.IncrementalAlterConfigsRequest(_resources_from(d, True), d["validate_only"])


def incremental_alter_configs_resp_to(r: acm.IncrementalAlterConfigsResponse, v: int) -> dict:
    return _results_to(r)


def incremental_alter_configs_resp_from(d: dict, v: int) -> acm.IncrementalAlterConfigsResponse:
    return acm.IncrementalAlterConfigsResponse(_results_from(d), d["throttle_time_ms"])
