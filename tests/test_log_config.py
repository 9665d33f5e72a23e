"""LogConfig: Kafka names and defaults, broker and topic spellings, validation."""

from __future__ import annotations

import pytest

from pyspark_logsource.broker.log.config import LONG_MAX, LogConfig
from pyspark_logsource.errors import InvalidConfig


def test_defaults_are_kafkas():
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == 7 * 24 * 3600 * 1000
    assert c.segment_index_bytes == 10 << 20
    assert c.index_interval_bytes == 4096
    assert c.flush_messages == LONG_MAX
    assert c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.retention_bytes == -1
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"
    assert c.file_delete_delay_ms == 60000


def test_broker_and_topic_spellings():
    c = LogConfig.from_properties(
        {"log.segment.bytes": "1000", "flush.messages": 5, "log.retention.hours": "1", "message.max.bytes": "5000",
         "listeners": "PLAINTEXT://:9092", "log.message.timestamp.type": "LogAppendTime"}
    )  # fmt: skip
    assert (c.segment_bytes, c.flush_messages, c.retention_ms, c.max_message_bytes) == (1000, 5, 3600_000, 5000)
    assert c.log_append_time


def test_ms_wins_over_minutes_over_hours():
    c = LogConfig.from_properties({"log.retention.hours": 5, "log.retention.minutes": 2})
    assert c.retention_ms == 120_000
    c = LogConfig.from_properties({"log.retention.hours": 5, "log.retention.ms": 7})
    assert c.retention_ms == 7
    assert LogConfig.from_properties({"log.retention.hours": -1}).retention_ms == -1


def test_overrides_are_strict_and_round_trip():
    base = LogConfig()
    c = base.with_overrides({"segment.bytes": "4096", "retention.bytes": "100"})
    assert c.to_properties({"segment.bytes": 1, "retention.bytes": 1}) == {"segment.bytes": "4096", "retention.bytes": "100"}
    assert LogConfig.from_properties(c.to_properties()) == c
    with pytest.raises(InvalidConfig, match="unknown"):
        base.with_overrides({"segment.bytez": "1"})


@pytest.mark.parametrize(
    "props",
    [{"segment.bytes": "abc"}, {"segment.bytes": "10"}, {"segment.bytes": str(1 << 31)}, {"flush.messages": 0},
     {"retention.ms": -2}, {"message.timestamp.type": "Wallclock"}, {"max.message.bytes": True}],
)  # fmt: skip
def test_invalid_values_raise_invalid_config(props):
    with pytest.raises(InvalidConfig) as e:
        LogConfig.from_properties(props)
    assert e.value.code == 40
