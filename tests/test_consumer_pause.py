"""Consumer.pause/resume (Kafka's): a paused partition is neither fetched nor handed out, and keeps its position.

Against a broker process over real sockets, through ``poll()`` and ``poll_arrow()``.
"""

from __future__ import annotations

import time

import pytest

from pyspark_logsource import Admin, Consumer, Producer
from pyspark_logsource.errors import ConfigError

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def topic(broker):
    """A 2-partition topic with 30 records in each on conftest's broker; returns (bootstrap, topic)."""
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("paused", 2)
    with Producer(broker.bootstrap) as p:
        for part in (0, 1):
            for i in range(30):
                p.send("paused", b"%d-%d" % (part, i), partition=part)
        p.flush()
    return broker.bootstrap, "paused"


def drain(c: Consumer, arrow: bool, seconds: float) -> dict[int, list[int]]:
    """Offsets polled per partition for ``seconds``."""
    got: dict[int, list[int]] = {0: [], 1: []}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if arrow:
            for (_, part), t in c.poll_arrow(100).items():
                got[part] += t.column("offset").to_pylist()
        else:
            for m in c.poll(100, max_records=7):
                got[m.partition].append(m.offset)
    return got


@pytest.mark.parametrize("arrow", [False, True], ids=["poll", "poll_arrow"])
def test_a_paused_partition_is_held_back_until_resumed(topic, arrow):
    bootstrap, name = topic
    with Consumer(bootstrap, fetch_max_wait_ms=50) as c:
        c.assign([(name, 0), (name, 1)])
        c.seek((name, 0), 0)
        c.seek((name, 1), 5)
        c.pause((name, 1))
        assert c.paused() == [(name, 1)]
        got = drain(c, arrow, 1.5)
        assert got == {0: list(range(30)), 1: []}
        assert c.position((name, 1)) == 5
        c.resume((name, 1))
        assert c.paused() == []
        assert drain(c, arrow, 1.5) == {0: [], 1: list(range(5, 30))}


def test_pausing_after_data_was_fetched_keeps_it_for_after_resume(topic):
    bootstrap, name = topic
    with Consumer(bootstrap, fetch_max_wait_ms=50) as c:
        c.assign([(name, 0)])
        c.seek((name, 0), 0)
        first = c.poll(5000, max_records=3)  # the rest of the partition is fetched meanwhile
        assert [m.offset for m in first] == [0, 1, 2]
        c.pause((name, 0))
        assert c.poll(300) == []
        assert c.position((name, 0)) == 3
        c.resume((name, 0))
        assert drain(c, False, 1.0)[0] == list(range(3, 30))


def test_pause_and_resume_of_a_partition_not_assigned_is_a_config_error(topic):
    bootstrap, name = topic
    with Consumer(bootstrap) as c:
        c.assign([(name, 0)])
        with pytest.raises(ConfigError, match="not assigned"):
            c.pause((name, 1))
        with pytest.raises(ConfigError, match="not assigned"):
            c.resume((name, 0), ("other", 0))
        assert c.paused() == []  # a failed call pauses nothing
