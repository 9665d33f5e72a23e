"""Adapters of the group APIs: typed messages (:mod:`.group_messages`) <-> schema dicts."""

from __future__ import annotations

from . import group_messages as g
from .primitives import ProtocolError

# ------------------------------------------------------------------ JoinGroup


def join_group_req_to(r: g.JoinGroupRequest, v: int) -> dict:
    return {
        "group_id": r.group_id,
        "session_timeout_ms": r.session_timeout_ms,
        "rebalance_timeout_ms": r.rebalance_timeout_ms,
        "member_id": r.member_id,
        "group_instance_id": r.group_instance_id,
        "protocol_type": r.protocol_type,
        "protocols": [{"name": p.name, "metadata": p.metadata} for p in r.protocols],
        "reason": r.reason,
    }


def join_group_req_from(d: dict, v: int) -> g.JoinGroupRequest:
    # v0 has no rebalance timeout: Kafka uses the session timeout
    rebalance = d["rebalance_timeout_ms"] if v >= 1 else d["session_timeout_ms"]
    return g.JoinGroupRequest(
        d["group_id"],
        d["session_timeout_ms"],
        rebalance,
        d["member_id"],
        d["protocol_type"],
        [g.JoinGroupProtocol(p["name"], bytes(p["metadata"])) for p in d["protocols"]],
        d["group_instance_id"],
        d["reason"],
        v,
    )


def join_group_resp_to(r: g.JoinGroupResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "generation_id": r.generation_id,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name if v >= 7 else r.protocol_name or "",
        "leader": r.leader,
        "skip_assignment": r.skip_assignment,
        "member_id": r.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in r.members
        ],
    }


def join_group_resp_from(d: dict, v: int) -> g.JoinGroupResponse:
    return g.JoinGroupResponse(
        d["error_code"],
        d["generation_id"],
        d["protocol_name"],
        d["leader"],
        d["member_id"],
        [
            g.JoinGroupMember(m["member_id"], bytes(m["metadata"]), m["group_instance_id"])
            for m in d["members"]
        ],
        d["protocol_type"],
        d["skip_assignment"],
        d["throttle_time_ms"],
    )


# ------------------------------------------------------------------ SyncGroup


def sync_group_req_to(r: g.SyncGroupRequest, v: int) -> dict:
    return {
        "group_id": r.group_id,
        "generation_id": r.generation_id,
        "member_id": r.member_id,
        "group_instance_id": r.group_instance_id,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name,
        "assignments": [{"member_id": k, "assignment": b} for k, b in r.assignments.items()],
    }


def sync_group_req_from(d: dict, v: int) -> g.SyncGroupRequest:
    assignments: dict[str, bytes] = {}
    for a in d["assignments"]:
        if a["member_id"] in assignments:
            raise ProtocolError(f"SyncGroup assigns member {a['member_id']!r} twice")
        assignments[a["member_id"]] = bytes(a["assignment"])
    return g.SyncGroupRequest(
        d["group_id"],
        d["generation_id"],
        d["member_id"],
        assignments,
        d["group_instance_id"],
        d["protocol_type"],
        d["protocol_name"],
    )


def sync_group_resp_to(r: g.SyncGroupResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name,
        "assignment": r.assignment,
    }


def sync_group_resp_from(d: dict, v: int) -> g.SyncGroupResponse:
    return g.SyncGroupResponse(
        d["error_code"], bytes(d["assignment"]), d["protocol_type"], d["protocol_name"], d["throttle_time_ms"]
    )


# ------------------------------------------------------------------ Heartbeat


def heartbeat_req_to(r: g.HeartbeatRequest, v: int) -> dict:
    return {
        "group_id": r.group_id,
        "generation_id": r.generation_id,
        "member_id": r.member_id,
        "group_instance_id": r.group_instance_id,
    }


def heartbeat_req_from(d: dict, v: int) -> g.HeartbeatRequest:
    return g.HeartbeatRequest(d["group_id"], d["generation_id"], d["member_id"], d["group_instance_id"])


def heartbeat_resp_to(r: g.HeartbeatResponse, v: int) -> dict:
    return {"throttle_time_ms": r.throttle_time_ms, "error_code": r.error_code}


def heartbeat_resp_from(d: dict, v: int) -> g.HeartbeatResponse:
    return g.HeartbeatResponse(d["error_code"], d["throttle_time_ms"])


# ------------------------------------------------------------------ LeaveGroup


def leave_group_req_to(r: g.LeaveGroupRequest, v: int) -> dict:
    ids = r.identities()
    if v < 3 and (len(ids) != 1 or ids[0][1] is not None):
        raise ValueError(f"LeaveGroup v{v} carries exactly one member and no instance id, got {ids}")
    return {
        "group_id": r.group_id,
        "member_id": r.members[0] if v < 3 else "",
        "members": [{"member_id": m, "group_instance_id": i, "reason": r.reason} for m, i in ids],
    }


def leave_group_req_from(d: dict, v: int) -> g.LeaveGroupRequest:
    if v < 3:
        return g.LeaveGroupRequest(d["group_id"], [d["member_id"]])
    members = d["members"]
    reason = members[0]["reason"] if members else None
    instances = [m["group_instance_id"] for m in members]
    return g.LeaveGroupRequest(
        d["group_id"],
        [m["member_id"] for m in members],
        reason,
        instances if any(i is not None for i in instances) else [],
    )


def leave_group_resp_to(r: g.LeaveGroupResponse, v: int) -> dict:
    # v3+ answers per member; before, the one member's error is the top-level error (as Kafka's response)
    top = r.error_code or (r.members[0].error_code if v < 3 and r.members else 0)
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": top,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": m.error_code}
            for m in r.members
        ],
    }


def leave_group_resp_from(d: dict, v: int) -> g.LeaveGroupResponse:
    return g.LeaveGroupResponse(
        d["error_code"],
        [
            g.LeaveGroupMemberResponse(m["member_id"], m["error_code"], m["group_instance_id"])
            for m in d["members"] or ()
        ],
        d["throttle_time_ms"],
    )


# ------------------------------------------------------------------ DescribeGroups / ListGroups


def describe_groups_req_to(r: g.DescribeGroupsRequest, v: int) -> dict:
    return {"groups": list(r.groups), "include_authorized_operations": r.include_authorized_operations}


def describe_groups_req_from(d: dict, v: int) -> g.DescribeGroupsRequest:
    return g.DescribeGroupsRequest(list(d["groups"]), d["include_authorized_operations"])


_GROUP_ID_NOT_FOUND = 69


def describe_groups_resp_to(r: g.DescribeGroupsResponse, v: int) -> dict:
    # before v6 Kafka answers an unknown group with no error and state Dead (v6 added GROUP_ID_NOT_FOUND)
    old = [x.error_code == _GROUP_ID_NOT_FOUND and v < 6 for x in r.groups]
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "groups": [
            {
                "error_code": 0 if o else x.error_code,
                "error_message": None if o else x.error_message,
                "group_id": x.group_id,
                "group_state": x.state,
                "protocol_type": x.protocol_type,
                "protocol_data": x.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in x.members
                ],
                "authorized_operations": x.authorized_operations,
            }
            for x, o in zip(r.groups, old, strict=True)
        ],
    }


def describe_groups_resp_from(d: dict, v: int) -> g.DescribeGroupsResponse:
    return g.DescribeGroupsResponse(
        [
            g.DescribedGroup(
                x["group_id"],
                x["error_code"],
                x["group_state"],
                x["protocol_type"],
                x["protocol_data"],
                [
                    g.DescribedMember(
                        m["member_id"],
                        m["client_id"],
                        m["client_host"],
                        bytes(m["member_metadata"]),
                        bytes(m["member_assignment"]),
                        m["group_instance_id"],
                    )
                    for m in x["members"]
                ],
                x["error_message"],
                x["authorized_operations"] if v >= 3 else -(1 << 31),
            )
            for x in d["groups"]
        ],
        d["throttle_time_ms"],
    )


def list_groups_req_to(r: g.ListGroupsRequest, v: int) -> dict:
    return {"states_filter": list(r.states_filter), "types_filter": list(r.types_filter)}


def list_groups_req_from(d: dict, v: int) -> g.ListGroupsRequest:
    return g.ListGroupsRequest(list(d["states_filter"] or ()), list(d["types_filter"] or ()))


def list_groups_resp_to(r: g.ListGroupsResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "groups": [
            {
                "group_id": x.group_id,
                "protocol_type": x.protocol_type,
                "group_state": x.state,
                "group_type": x.group_type,
            }
            for x in r.groups
        ],
    }


def list_groups_resp_from(d: dict, v: int) -> g.ListGroupsResponse:
    return g.ListGroupsResponse(
        d["error_code"],
        [
            g.ListedGroup(x["group_id"], x["protocol_type"], x["group_state"], x["group_type"])
            for x in d["groups"]
        ],
        d["throttle_time_ms"],
    )
