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
        {
            "log.segment.bytes": "1000",
            "flush.messages": 5,
            "log.retention.hours": "1",
            "message.max.bytes": "5000",
            "listeners": "PLAINTEXT://:9092",
            "log.message.timestamp.type": "LogAppendTime",
        }
    )
    assert (c.segment_bytes, c.flush_messages, c.retention_ms, c.max_message_bytes) == (
        1000,
        5,
        3600_000,
        5000,
    )
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
    assert c.to_properties({"segment.bytes": 1, "retention.bytes": 1}) == {
        "segment.bytes": "4096",
        "retention.bytes": "100",
    }
    assert LogConfig.from_properties(c.to_properties()) == c
    with pytest.raises(InvalidConfig, match="unknown"):
        base.with_overrides({"segment.bytez": "1"})


@pytest.mark.parametrize(
    "props",
    [
        {"segment.bytes": "abc"},
        {"segment.bytes": "10"},
        {"segment.bytes": str(1 << 31)},
        {"flush.messages": 0},
        {"retention.ms": -2},
        {"message.timestamp.type": "Wallclock"},
        {"max.message.bytes": True},
    ],
)
def test_invalid_values_raise_invalid_config(props):
    with pytest.raises(InvalidConfig) as e:
        LogConfig.from_properties(props)
    assert e.value.code == 40


#: every topic config of Kafka 3.9's TopicConfig (with those removed in 4.0 that clients still send:
#: message.format.version, message.timestamp.difference.max.ms, message.downconversion.enable) and the two
#: replication throttles of QuotaConfig, each with a valid value other than its default
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "lz4",
    "compression.gzip.level": "6",
    "compression.lz4.level": "10",
    "compression.zstd.level": "-5",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "1",
    "flush.messages": "10",
    "flush.ms": "10",
    "index.interval.bytes": "100",
    "local.retention.bytes": "1000",
    "local.retention.ms": "1000",
    "max.compaction.lag.ms": "100000",
    "max.message.bytes": "2000000",
    "message.downconversion.enable": "false",
    "message.format.version": "2.8",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "3600000",
    "message.timestamp.difference.max.ms": "60000",
    "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.25",
    "min.compaction.lag.ms": "10",
    "min.insync.replicas": "2",
    "preallocate": "true",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
    "remote.storage.enable": "false",
    "retention.bytes": "1000000",
    "retention.ms": "100000",
    "segment.bytes": "1048576",
    "segment.index.bytes": "4096",
    "segment.jitter.ms": "100",
    "segment.ms": "100000",
    "unclean.leader.election.enable": "true",
    "leader.replication.throttled.replicas": "0:1,1:2",
    "follower.replication.throttled.replicas": "*",
}


def test_every_kafka_topic_config_is_accepted_stored_and_read_back():
    base = LogConfig()
    c = base.with_overrides(KAFKA_TOPIC_CONFIGS)
    assert c.to_properties(KAFKA_TOPIC_CONFIGS) == KAFKA_TOPIC_CONFIGS
    assert set(KAFKA_TOPIC_CONFIGS) <= set(base.to_properties())  # every one described, defaults included
    assert LogConfig().with_overrides(c.to_properties()) == c  # as a restart reads the stored properties
    assert (c.compression_type, c.unclean_leader_election_enable, c.message_downconversion_enable) == (
        "lz4",
        True,
        False,
    )
    d = base.to_properties()
    assert (
        d["compression.type"],
        d["unclean.leader.election.enable"],
        d["message.downconversion.enable"],
        d["remote.storage.enable"],
        d["compression.zstd.level"],
    ) == ("producer", "false", "true", "false", "3")


def test_broker_spellings_of_the_stored_configs():
    c = LogConfig.from_properties(
        {
            "log.roll.jitter.ms": "5",
            "log.preallocate": "true",
            "unclean.leader.election.enable": "true",
            "log.message.downconversion.enable": "false",
            "compression.type": "zstd",
        }
    )
    assert (c.segment_jitter_ms, c.preallocate, c.unclean_leader_election_enable) == (5, True, True)
    assert (c.message_downconversion_enable, c.compression_type) == (False, "zstd")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("compression.type", "brotli"),
        ("compression.type", "GZIP"),
        ("compression.gzip.level", "0"),
        ("compression.gzip.level", "10"),
        ("compression.lz4.level", "18"),
        ("compression.zstd.level", "23"),
        ("compression.zstd.level", "x"),
        ("unclean.leader.election.enable", "yes"),
        ("message.downconversion.enable", "2"),
        ("preallocate", ""),
        ("message.format.version", "latest"),
        ("message.timestamp.after.max.ms", "-1"),
        ("message.timestamp.before.max.ms", "-5"),
        ("message.timestamp.difference.max.ms", "-1"),
        ("segment.jitter.ms", "-1"),
        ("local.retention.ms", "-3"),
        ("local.retention.bytes", "-3"),
        ("remote.storage.enable", "true"),
        ("remote.log.copy.disable", "maybe"),
        ("leader.replication.throttled.replicas", "0:a"),
        ("follower.replication.throttled.replicas", "1,2"),
    ],
)
def test_bad_values_of_kafka_topic_configs_name_the_key(key, value):
    with pytest.raises(InvalidConfig) as e:
        LogConfig().with_overrides({key: value})
    assert e.value.code == 40 and key in str(e.value)


@pytest.mark.parametrize("key", ["compression.codec", "retention.msec", "unclean.leader.election", "log.foo"])
def test_unknown_topic_config_names_are_refused_naming_the_key(key):
    with pytest.raises(InvalidConfig, match="unknown") as e:
        LogConfig().with_overrides({key: "1"})
    assert e.value.code == 40 and key in str(e.value)
