"""The broker's request trace (LOGSOURCE_LOG_LEVEL=DEBUG): each request a connection sends and the bytes
its answers took, so a client's "request timed out" can be told from answers lost in the client (as
librdkafka's 0077 was: see README, "librdkafka's own test suite")."""

from __future__ import annotations

import logging
import re

from support.brokers import WireClient, broker_thread

from pyspark_logsource.protocol import ApiKey, ApiVersionsRequest, MetadataRequest


def test_debug_log_has_each_request_and_its_answer(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="pyspark_logsource.broker")
    with broker_thread(tmp_path) as b, WireClient(b.bootstrap) as c:  # WireClient sends ApiVersions first
        port = c.sock.getsockname()[1]
        corr = c.send(MetadataRequest(topics=[]))
        c.receive()
    lines = [r.getMessage() for r in caplog.records if r.name == "pyspark_logsource.broker"]
    mine = [m for m in lines if m.startswith(f"127.0.0.1:{port}: ")]
    want = [
        rf"request key {int(ApiKey.API_VERSIONS)} v\d+ corr \d+",
        r"answered with \d+ bytes",
        rf"request key {int(ApiKey.METADATA)} v\d+ corr {corr}",
        r"answered with \d+ bytes",
    ]
    got = [m.split(": ", 1)[1] for m in mine]
    assert len(got) == len(want), got
    for pattern, line in zip(want, got, strict=True):
        assert re.fullmatch(pattern, line), (pattern, line)


def test_no_request_trace_at_info(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pyspark_logsource.broker")
    with broker_thread(tmp_path) as b, WireClient(b.bootstrap) as c:
        c.request(ApiVersionsRequest())
    assert not [r for r in caplog.records if "request key" in r.getMessage()]
