"""Our extension API ``LocalReadGrant``: a local short-circuit read of one partition (as HDFS's
``dfs.client.read.shortcircuit``).

A reader on the broker's host asks, over its normal authenticated Kafka connection, for the right to
read ``[start_offset, end)`` of a partition straight from the segment files. The broker checks what a
Fetch checks (the topic's Read ACL, existence, leadership, the leader epoch) and answers with the
bounds a Fetch would use, the file regions holding them and a one-time token. The reader then redeems
the token on the broker's Unix socket (``socket_path``, in the broker's data dir) and receives one open
file descriptor per region (SCM_RIGHTS)::

    LocalReadGrantRequest (api key 10101, version 0, not flexible)
      topic string, partition int32, start_offset int64,
      isolation_level int8 (0 read_uncommitted: up to the high watermark; 1 read_committed: the LSO),
      current_leader_epoch int32 (-1: not checked)
    LocalReadGrantResponse
      throttle_time_ms int32, error_code int16, error_message string (nullable),
      high_watermark int64, last_stable_offset int64, log_start_offset int64,
      end_offset int64 (exclusive: what a Fetch at this isolation may read), leader_epoch int32,
      aborted_transactions [] (producer_id int64, first_offset int64): those in [start_offset, end_offset),
      regions [] (first_offset int64: the first batch's base offset, position int64, length int64):
        whole batches, in offset order, one descriptor each,
      compacted bool (the topic's cleanup.policy compacts: offsets may have gaps between batches),
      host_id string (the broker host's boot id: a reader elsewhere skips the socket),
      socket_path string, token bytes (empty: no local read offered)

The key is outside Kafka's range; Kafka clients never send it and skip it in ApiVersions.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

from .api_keys import ApiKey
from .schema import F, message

LOCAL_READ_GRANT_KEY = ApiKey.LOCAL_READ_GRANT

# the Unix socket's exchange: the reader sends MAGIC + the token; the broker answers one ANSWER message
# (status, descriptor count) carrying the descriptors (SCM_RIGHTS) when the status is OK
MAGIC = b"LSLR0"
TOKEN_BYTES = 16
ANSWER = struct.Struct(">bi")
#: statuses: OK, unknown / used / expired token, peer refused (another user)
OK, REFUSED_TOKEN, REFUSED_PEER = 0, 1, 2


def host_id() -> str:
    """This host's boot id (a reader with another one is on another host, or in another boot)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return socket.gethostname()


LOCAL_READ_GRANT_REQUEST = message(
    "LocalReadGrantRequest",
    "0",
    "none",
    F("topic", "string"),
    F("partition", "int32"),
    F("start_offset", "int64"),
    F("isolation_level", "int8"),
    F("current_leader_epoch", "int32", default=-1),
)
LOCAL_READ_GRANT_RESPONSE = message(
    "LocalReadGrantResponse",
    "0",
    "none",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+", default="null"),
    F("high_watermark", "int64", default=-1),
    F("last_stable_offset", "int64", default=-1),
    F("log_start_offset", "int64", default=-1),
    F("end_offset", "int64", default=-1),
    F("leader_epoch", "int32", default=-1),
    F(
        "aborted_transactions",
        "[]LocalReadAborted",
        "0+",
        F("producer_id", "int64"),
        F("first_offset", "int64"),
    ),
    F(
        "regions",
        "[]LocalReadRegion",
        "0+",
        F("first_offset", "int64"),
        F("position", "int64"),
        F("length", "int64"),
    ),
    F("compacted", "bool"),
    F("host_id", "string"),
    F("socket_path", "string"),
    F("token", "bytes"),
)


@dataclass(slots=True)
class LocalReadRegion:
    """Whole batches of one segment file: its first batch's base offset, byte position and length."""

    first_offset: int
    position: int
    length: int


@dataclass(slots=True)
class LocalReadGrantRequest:
    """Ask for a local read of ``topic``-``partition`` from ``start_offset`` (see the module docstring)."""

    API_KEY = LOCAL_READ_GRANT_KEY
    topic: str
    partition: int
    start_offset: int
    isolation_level: int = 0
    current_leader_epoch: int = -1


@dataclass(slots=True)
class LocalReadGrantResponse:
    """The Fetch bounds, the regions and the token (empty: no local read, read over the network)."""

    error_code: int = 0
    error_message: str | None = None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    end_offset: int = -1
    leader_epoch: int = -1
    #: (producer_id, first_offset) of the aborted transactions in [start_offset, end_offset)
    aborted_transactions: list[tuple[int, int]] = field(default_factory=list)
    regions: list[LocalReadRegion] = field(default_factory=list)
    compacted: bool = False
    host_id: str = ""
    socket_path: str = ""
    #: redeemable for the descriptors: kept out of the repr, so no log line or error message shows it
    token: bytes = field(default=b"", repr=False)
    throttle_time_ms: int = 0


def local_read_grant_req_to(r: LocalReadGrantRequest, v: int) -> dict:
    return {
        "topic": r.topic,
        "partition": r.partition,
        "start_offset": r.start_offset,
        "isolation_level": r.isolation_level,
        "current_leader_epoch": r.current_leader_epoch,
    }


def local_read_grant_req_from(d: dict, v: int) -> LocalReadGrantRequest:
    return LocalReadGrantRequest(
        d["topic"], d["partition"], d["start_offset"], d["isolation_level"], d["current_leader_epoch"]
    )


def local_read_grant_resp_to(r: LocalReadGrantResponse, v: int) -> dict:
    return {
        "throttle_time_ms": r.throttle_time_ms,
        "error_code": r.error_code,
        "error_message": r.error_message,
        "high_watermark": r.high_watermark,
        "last_stable_offset": r.last_stable_offset,
        "log_start_offset": r.log_start_offset,
        "end_offset": r.end_offset,
        "leader_epoch": r.leader_epoch,
        "aborted_transactions": [
            {"producer_id": pid, "first_offset": first} for pid, first in r.aborted_transactions
        ],
        "regions": [
            {"first_offset": x.first_offset, "position": x.position, "length": x.length} for x in r.regions
        ],
        "compacted": r.compacted,
        "host_id": r.host_id,
        "socket_path": r.socket_path,
        "token": bytes(r.token),
    }


def local_read_grant_resp_from(d: dict, v: int) -> LocalReadGrantResponse:
    return LocalReadGrantResponse(
        d["error_code"],
        d["error_message"],
        d["high_watermark"],
        d["last_stable_offset"],
        d["log_start_offset"],
        d["end_offset"],
        d["leader_epoch"],
        [(a["producer_id"], a["first_offset"]) for a in d["aborted_transactions"]],
        [LocalReadRegion(x["first_offset"], x["position"], x["length"]) for x in d["regions"]],
        d["compacted"],
        d["host_id"],
        d["socket_path"],
        bytes(d["token"]),
        d["throttle_time_ms"],
    )
