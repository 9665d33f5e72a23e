"""Broker configuration: properties parsing, overrides, validation, the entry point, producer ids."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyspark_logsource.broker.config import (
    DEFAULTS,
    BrokerConfig,
    parse_listener,
    parse_overrides,
    parse_properties,
)
from pyspark_logsource.broker.log import LogConfig
from pyspark_logsource.broker.process import main
from pyspark_logsource.broker.producer_ids import ProducerIdManager
from pyspark_logsource.errors import ConfigError, InvalidProducerEpoch, UnknownProducerId

ROOT = Path(__file__).resolve().parent.parent


def test_parse_properties_java_syntax():
    text = "# comment\n! also\n a = 1 \nb: two\nc=x\\\n   y\nempty=\nflag\n\n"
    assert parse_properties(text) == {"a": "1", "b": "two", "c": "xy", "empty": "", "flag": ""}


def test_shipped_server_properties_documents_every_default():
    text = (ROOT / "conf" / "server.properties").read_text()
    props = parse_properties(text)
    # the shipped file turns the metrics endpoint on (the default, and the embedded broker, have none)
    shipped = {"metrics.listener": "http://127.0.0.1:9404"}
    for key, value in DEFAULTS.items():
        assert key in props, f"{key} missing from conf/server.properties"
        value = shipped.get(key, value)
        assert props[key] == value, f"{key}: file says {props[key]!r}, default is {value!r}"
    # every setting has a comment line just above it explaining why
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith("#") and "=" in line:
            above = [ln for ln in lines[max(0, i - 3) : i] if ln.startswith("#")]
            assert above, f"no explanation above {line!r}"
    assert (
        BrokerConfig.load(ROOT / "conf" / "server.properties").log == BrokerConfig.load().log == LogConfig()
    )


def test_overrides_win_and_log_settings_reach_log_config(tmp_path):
    f = tmp_path / "s.properties"
    f.write_text("num.partitions=3\nlog.segment.bytes=1000000\nlisteners=PLAINTEXT://127.0.0.1:9999\n")
    cfg = BrokerConfig.load(
        f,
        parse_overrides(
            ["num.partitions=5", "log.retention.hours=1", "log.flush.interval.messages=1", "log.dirs=/a,/b"]
        ),
    )
    assert cfg.num_partitions == 5 and cfg.port == 9999 and cfg.host == "127.0.0.1"
    assert (
        cfg.log.segment_bytes == 1_000_000
        and cfg.log.retention_ms == 3_600_000
        and cfg.log.flush_messages == 1
    )
    assert [str(d) for d in cfg.log_dirs] == ["/a", "/b"]


@pytest.mark.parametrize(
    "props, match",
    [
        ({"num.partitions": "0"}, "num.partitions"),
        ({"num.partitions": "many"}, "integer"),
        ({"auto.create.topics.enable": "yes"}, "true or false"),
        ({"listeners": "FOO://h:1"}, "no entry in listener.security.protocol.map"),
        ({"listeners": "SSL://h:1"}, "set ssl.keystore.location"),
        ({"listeners": "PLAINTEXT://h:1", "inter.broker.listener.name": "X"}, "not one of the listeners"),
        ({"listeners": "PLAINTEXT://h:1", "advertised.listeners": "SSL://h:2"}, "not in listeners"),
        ({"listeners": "PLAINTEXT://h"}, "no port"),
        ({"listeners": "PLAINTEXT://h:70000"}, "out of range"),
        ({"default.replication.factor": "3"}, "replication"),
        ({"log.segment.bytes": "ten"}, "integer"),
        ({"log.dirs": " , "}, "empty"),
        ({"transaction.max.timeout.ms": "0"}, "transaction.max.timeout.ms"),
        ({"transaction.max.timeout.ms": "15min"}, "integer"),
    ],
)
def test_bad_values_raise_config_error(props, match):
    with pytest.raises(ConfigError, match=match):
        BrokerConfig.from_properties(props)


def test_transaction_max_timeout_is_read_from_the_file_and_overridable(tmp_path):
    assert BrokerConfig.load().transaction_max_timeout_ms == 900_000  # Kafka's default
    f = tmp_path / "s.properties"
    f.write_text("transaction.max.timeout.ms=5000\n")
    assert BrokerConfig.load(f).transaction_max_timeout_ms == 5000
    assert BrokerConfig.load(f, {"transaction.max.timeout.ms": "7000"}).transaction_max_timeout_ms == 7000


def test_override_syntax_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["nonsense"])
    with pytest.raises(ConfigError, match="cannot read"):
        BrokerConfig.load(tmp_path / "missing.properties")
    assert parse_listener("127.0.0.1:0") == ("127.0.0.1", 0)


def test_main_rejects_bad_config_with_status_2(capsys):
    assert main(["--override", "num.partitions=-1"]) == 2
    assert "num.partitions" in capsys.readouterr().err


def test_module_entry_point_prints_bound_address_and_stops_on_sigterm(tmp_path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pyspark_logsource.broker",
            "--config",
            str(ROOT / "conf" / "server.properties"),
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            "metrics.listener=http://127.0.0.1:0",  # the shipped 9404 may be taken on a shared machine
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:") and int(line.rsplit(":", 1)[1]) > 0
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert "starting broker 0 with config" in err and "logs flushed and closed" in err
        assert (tmp_path / "meta.properties").exists()
    finally:
        proc.kill()


def test_producer_ids_are_reserved_in_blocks(tmp_path):
    m = ProducerIdManager(tmp_path, block_size=3)
    ids = [m.init_producer_id()[0] for _ in range(4)]
    assert ids == [0, 1, 2, 3]
    # a new manager (a restart, clean or not) starts after the reserved block
    m2 = ProducerIdManager(tmp_path, block_size=3)
    assert m2.init_producer_id() == (6, 0)
    assert m2.init_producer_id(6, 0) == (6, 1)
    with pytest.raises(InvalidProducerEpoch):
        m2.init_producer_id(6, 0)
    with pytest.raises(UnknownProducerId):
        m2.init_producer_id(10**9, 0)
