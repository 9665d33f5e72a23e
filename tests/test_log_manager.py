"""LogManager: topics on disk, reopening with recovery, background flush and retention, deletion."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from support.logdata import all_records, make_batch, region_bytes

from pyspark_logsource.broker.log import LogConfig, LogManager
from pyspark_logsource.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from pyspark_logsource.format import batch as fmt


def wait_for(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def test_topics_on_disk_and_reopen(tmp_path, caplog):
    m = LogManager([tmp_path], LogConfig(), background=False)
    logs = m.create_topic("clicks", 3, {"segment.bytes": "2000", "retention.ms": 1000})
    m.create_topic("__offsets", 1)
    assert m.topics() == {"clicks": 3, "__offsets": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["__offsets-0", "clicks-0", "clicks-1", "clicks-2"]
    assert (
        tmp_path / "clicks-1" / "config.properties"
    ).read_text() == "retention.ms=1000\nsegment.bytes=2000\n"
    assert not (tmp_path / "__offsets-0" / "config.properties").exists()
    for i in range(10):
        logs[1].append(make_batch(i * 10, 10))
    assert len(logs[1].segments) > 1
    assert m.get_log("clicks", 1) is logs[1]
    m.close()
    assert (tmp_path / "clicks-1" / ".clean_shutdown").exists()
    with caplog.at_level(logging.INFO, logger="pyspark_logsource.broker.log"):
        m = LogManager([tmp_path], LogConfig(), background=False)
    assert m.topics() == {"clicks": 3, "__offsets": 1}
    assert sum("loaded log clicks-" in r.getMessage() for r in caplog.records) == 3
    lg = m.get_log("clicks", 1)
    assert lg.recovery_info["clean"] and lg.log_end_offset == 100
    assert (
        m.topic_config("clicks").segment_bytes == 2000
        and m.topic_config("__offsets").segment_bytes == 1 << 30
    )
    assert [r.offset for r in all_records(lg)] == list(range(100))
    m.close()


def test_errors_leave_nothing_on_disk(tmp_path):
    m = LogManager([tmp_path], LogConfig(), background=False)
    for bad in ["../x", "a/b", "", ".", "..", "x" * 250]:
        with pytest.raises(InvalidTopic):
            m.create_topic(bad, 1)
        with pytest.raises(InvalidTopic):
            m.create_log(bad, 0)
    with pytest.raises(InvalidConfig):
        m.create_topic("t", 1, {"segment.bytes": "-5"})
    with pytest.raises(InvalidConfig):
        m.create_topic("t", 1, {"no.such.setting": "1"})
    for n in (0, -1, "2"):
        with pytest.raises(InvalidPartitions):
            m.create_topic("t", n)
    assert list(tmp_path.iterdir()) == [] and not (tmp_path.parent / "x-0").exists()
    m.create_topic("t", 2)
    with pytest.raises(TopicAlreadyExists) as e:
        m.create_topic("t", 5)
    assert e.value.code == 36
    with pytest.raises(UnknownTopicOrPartition) as e:
        m.get_log("t", 2)
    assert e.value.code == 3
    with pytest.raises(UnknownTopicOrPartition):
        m.get_log("nope", 0)
    with pytest.raises(UnknownTopicOrPartition):
        m.delete_topic("nope")
    with pytest.raises(UnknownTopicOrPartition):
        m.topic_config("nope")
    assert m.create_log("t", 1) is m.get_log("t", 1)  # get-or-create
    m.close()


def test_stray_directories_are_ignored(tmp_path):
    (tmp_path / "lost+found").mkdir()
    (tmp_path / "no_partition").mkdir()
    (tmp_path / "bad name-0").mkdir()
    (tmp_path / "old-0.abc-delete").mkdir()  # an interrupted topic deletion
    m = LogManager([tmp_path], LogConfig(), background=False)
    assert m.topics() == {}
    assert not (tmp_path / "old-0.abc-delete").exists()
    m.close()


def test_partitions_spread_over_log_dirs(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = LogManager(dirs, LogConfig(), background=False)
    m.create_topic("t", 4)
    assert sorted(p.name for p in dirs[0].iterdir()) == ["t-0", "t-2"]
    assert sorted(p.name for p in dirs[1].iterdir()) == ["t-1", "t-3"]
    m.close()
    m = LogManager(dirs, LogConfig(), background=False)
    assert m.topics() == {"t": 4}
    m.close()


def test_delete_topic_keeps_served_regions_valid_until_the_delay(tmp_path):
    m = LogManager([tmp_path], LogConfig(file_delete_delay_ms=300), background=False)
    (lg,) = m.create_topic("gone", 1)
    lg.append(make_batch(0, 10))
    region = lg.read(0, 1000)
    m.delete_topic("gone")
    assert m.topics() == {}
    with pytest.raises(UnknownTopicOrPartition):
        m.get_log("gone", 0)
    assert not (tmp_path / "gone-0").exists()
    assert [p.name.endswith("-delete") for p in tmp_path.iterdir()] == [True]
    assert fmt.decode(region_bytes(region)).base_offset == 0
    m.run_background_tasks()
    assert list(tmp_path.iterdir())  # not yet
    time.sleep(0.35)
    m.run_background_tasks()
    assert list(tmp_path.iterdir()) == []
    m.create_topic("gone", 2)  # the name is free again
    assert m.topics() == {"gone": 2}
    m.close()


def test_background_flush_by_ms_and_retention(tmp_path):
    config = LogConfig(flush_ms=100, retention_check_interval_ms=50, file_delete_delay_ms=0)
    m = LogManager([tmp_path], config, background=True)
    (lg,) = m.create_topic("t", 1, {"segment.bytes": 2000, "retention.bytes": 4000})
    stop = threading.Event()

    def produce():  # appends from another thread while the manager works in its own
        while not stop.is_set():
            lg.append(make_batch(lg.log_end_offset, 10))
            time.sleep(0.001)

    t = threading.Thread(target=produce)
    t.start()
    try:
        assert wait_for(lambda: lg.log_start_offset > 0)
        assert wait_for(lambda: lg.flushed_offset > 0)
    finally:
        stop.set()
        t.join()
    end = lg.log_end_offset
    assert wait_for(lambda: lg.flushed_offset == end)  # the idle log is flushed by time alone
    assert wait_for(lambda: lg.size_bytes - lg.segments[0].size < 4000)
    recs = all_records(lg)
    assert [r.offset for r in recs] == list(range(lg.log_start_offset, end))
    m.close()
    m.close()  # idempotent
