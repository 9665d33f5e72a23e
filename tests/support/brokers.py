"""Test helpers: brokers in a child process or a thread, and a tiny synchronous wire client.

Usage in a test module (tests/ is on sys.path; support/ is a package in it)::

    from support.brokers import WireClient, broker_process

    with broker_process(tmp_path) as b:            # python -m pyspark_logsource.broker
        with WireClient(b.bootstrap) as c:
            c.create_topic("t", 3)
            c.produce("t", 0, fmt.encode([b"v"]))

``WireClient`` speaks through the sans-IO ClientConnection, so the tests
exercise the same codec the real clients use, with nothing else in between.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark_logsource.broker.embedded import EmbeddedBroker
from pyspark_logsource.errors import error_for_code
from pyspark_logsource.format import batch as fmt
from pyspark_logsource.protocol import (
    ClientConnection,
    CreatableTopic,
    CreateTopicsRequest,
    FetchPartition,
    FetchRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProducePartitionData,
    ProduceRequest,
)
from pyspark_logsource.protocol.messages import ApiVersionsRequest

#: The base of the record timestamps tests write to a broker (ours or Apache Kafka): a whole hour a day
#: ago. Retention goes by a segment's largest record timestamp (7 days by default, the active segment
#: included, as in Kafka), so records dated years back are deleted at the broker's next retention check,
#: between a test's produce and its read (CI stop 37 lost a real-Kafka test's records that way).
RECENT_TS = (int(time.time()) // 3600 - 24) * 3_600_000


def _broker(mode: str, data_dir: str | Path | None, config: dict[str, Any]) -> EmbeddedBroker:
    extra = config.pop("config", {})
    props = {k.replace("_", "."): v for k, v in config.items()}
    props.update(extra)
    return EmbeddedBroker(data_dir, mode=mode, config=props)


@contextlib.contextmanager
def broker_process(data_dir: str | Path | None = None, **config: Any) -> Iterator[EmbeddedBroker]:
    """A broker in a child process (``kill()`` is a real SIGKILL); config keys with dots via ``config={...}``."""
    with _broker("process", data_dir, config) as b:
        yield b


@contextlib.contextmanager
def broker_thread(data_dir: str | Path | None = None, **config: Any) -> Iterator[EmbeddedBroker]:
    """A broker on a daemon thread of this process."""
    with _broker("thread", data_dir, config) as b:
        yield b


_topic_numbers = itertools.count()


def unique_topic(prefix: str = "t") -> str:
    """A topic name no other caller in this test session gets: ``<prefix>-<n>``."""
    return f"{prefix}-{next(_topic_numbers)}"


class BrokerError(Exception):
    """A top-level or partition error code in a response, with the typed error attached."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(f"error {code}: {message}")
        self.code = code
        self.error = error_for_code(code, message or "")


class WireClient:
    """A blocking, one-connection client on top of the sans-IO codec (tests only)."""

    def __init__(
        self,
        bootstrap: str,
        timeout: float = 15.0,
        client_id: str = "wire-test",
        arrow_body: bool | None = True,
    ) -> None:
        """``arrow_body``: ask for Arrow-bodied fetches (True), Kafka's layout (False), or send no
        ApiVersions at all (None: the raw first request a fuzzer or old client would send)."""
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection(client_id)
        self._ready: list = []
        if arrow_body is not None:
            self.api_versions = self.request(ApiVersionsRequest(arrow_body=arrow_body))
            self.conn.negotiated(self.api_versions)

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ raw

    def send(self, request: Any) -> int:
        """Send a request; return its correlation id."""
        cid, data = self.conn.request_bytes(request)
        self.sock.sendall(data)
        return cid

    def receive(self) -> Any:
        """Block for the next response."""
        while not self._ready:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("broker closed the connection")
            self._ready.extend(self.conn.receive_data(data))
        return self._ready.pop(0).response

    def request(self, request: Any, check: bool = True) -> Any:
        """Send and wait for the response; raise BrokerError on a top-level error if ``check``."""
        self.send(request)
        resp = self.receive()
        code = getattr(resp, "error_code", 0)
        if check and code:
            raise BrokerError(code, getattr(resp, "error_message", None))
        return resp

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are."""
        self.sock.sendall(data)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1 << 16) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    # ------------------------------------------------------------ helpers

    def create_topic(self, name: str, partitions: int = 1, config: dict | None = None) -> int:
        """Create a topic; return the error code (0 = created)."""
        resp = self.request(CreateTopicsRequest([CreatableTopic(name, partitions, -1, config or {})]))
        return resp.topics[0].error_code

    def metadata(self, topics: list[str] | None = None, auto_create: bool = False) -> Any:
        """The MetadataResponse."""
        return self.request(MetadataRequest(topics, auto_create))

    def produce(self, topic: str, partition: int, records: bytes | bytearray, acks: int = 1) -> Any:
        """Produce one partition's batches; return its ProducePartitionResponse (None for acks=0)."""
        req = ProduceRequest([ProducePartitionData(topic, partition, bytes(records))], acks=acks)
        if acks == 0:
            self.send(req)
            return None
        return self.request(req).partitions[0]

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
    ) -> Any:
        """Fetch one partition; return its FetchPartitionResponse."""
        req = FetchRequest([FetchPartition(topic, partition, offset, max_bytes)], max_wait_ms, min_bytes)
        return self.request(req).partitions[0]

    def fetch_all(self, topic: str, partition: int, offset: int = 0) -> list[fmt.Record]:
        """Every record from ``offset`` to the log end."""
        out: list[fmt.Record] = []
        while True:
            p = self.fetch(topic, partition, offset)
            if p.error_code:
                raise BrokerError(p.error_code, None)
            batches = fmt.decode_all(bytes(p.records))
            if not batches:
                return out
            for b in batches:
                out.extend(r for r in b.records() if r.offset >= offset)
            offset = batches[-1].header.next_offset

    def list_offset(self, topic: str, partition: int, timestamp: int) -> Any:
        """ListOffsets for one partition; return its entry."""
        return self.request(
            ListOffsetsRequest([ListOffsetsPartition(topic, partition, timestamp)])
        ).partitions[0]

    def commit(self, group: str, offsets: dict[tuple[str, int], int], metadata: str | None = None) -> Any:
        """OffsetCommit; return the response."""
        parts = [OffsetCommitPartition(t, p, o, metadata) for (t, p), o in offsets.items()]
        return self.request(OffsetCommitRequest(group, parts))

    def committed(
        self, group: str, partitions: list[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], Any]:
        """OffsetFetch -> {(topic, partition): OffsetFetchPartitionResponse}."""
        resp = self.request(OffsetFetchRequest(group, partitions))
        return {(p.topic, p.partition): p for p in resp.partitions}


def frame(body: bytes) -> bytes:
    """Prefix ``body`` with its int32 length."""
    return struct.pack(">i", len(body)) + body
