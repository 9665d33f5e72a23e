"""``logsource topics delete-records``, ``logsource groups delete`` and ``logsource groups delete-offsets``
against a broker process, with their errors."""

from __future__ import annotations

import os
import subprocess
import sys

from support.brokers import WireClient
from support.logdata import make_batch

from pyspark_logsource.client import Admin

CLI = [sys.executable, "-m", "pyspark_logsource.cli"]


def run(*args: str, bootstrap: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "LOGSOURCE_BOOTSTRAP": bootstrap}
    p = subprocess.run([*CLI, *args], capture_output=True, timeout=120, env=env, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"logsource {' '.join(args)} -> {p.returncode}\n{p.stderr}")
    return p


def test_topics_delete_records(broker, topic_name):
    topic = topic_name("cli-dr")
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, 2)
    with WireClient(broker.bootstrap) as w:
        for p in (0, 1):
            w.produce(topic, p, make_batch(0, 20))
    out = run(
        "topics", "delete-records", topic, "--partition", "1", "--before", "12", bootstrap=broker.bootstrap
    )
    assert out.stdout.split()[-3:] == [topic, "1", "12"]
    with Admin(broker.bootstrap) as admin:
        assert admin.list_offsets([(topic, 0), (topic, 1)], "earliest") == {(topic, 0): 0, (topic, 1): 12}
    out = run(
        "topics", "delete-records", topic, "--before", "-1", bootstrap=broker.bootstrap
    )  # all partitions
    rows = [line.split() for line in out.stdout.strip().splitlines()[1:]]
    assert rows == [[topic, "0", "20"], [topic, "1", "20"]]
    bad = run("topics", "delete-records", topic, "--before", "99", bootstrap=broker.bootstrap, check=False)
    assert bad.returncode == 1 and "OffsetOutOfRange" in bad.stderr
    bad = run(
        "topics", "delete-records", "cli-dr-none", "--before", "1", bootstrap=broker.bootstrap, check=False
    )
    assert bad.returncode == 1 and "UnknownTopicOrPartition" in bad.stderr
    assert (
        run("topics", "describe", topic, bootstrap=broker.bootstrap).stdout.count("LogStartOffset: 20") == 2
    )


def test_groups_delete_and_delete_offsets(broker, topic_name):
    topic = topic_name("cli-dg")
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, 2)
        admin.commit_group_offsets("cli-g1", {(topic, 0): 3, (topic, 1): 4})
        admin.commit_group_offsets("cli-g2", {(topic, 0): 5})
    out = run(
        "groups", "delete-offsets", "cli-g1", "--topic", topic, "--partition", "0", bootstrap=broker.bootstrap
    )
    assert [line.split() for line in out.stdout.strip().splitlines()[2:]] == [[topic, "0"]]
    with Admin(broker.bootstrap) as admin:
        assert admin.group_offsets("cli-g1") == {(topic, 1): 4}
    out = run("groups", "delete", "cli-g1", "cli-g2", bootstrap=broker.bootstrap)
    assert out.stdout.splitlines() == ["Deleted group cli-g1.", "Deleted group cli-g2."]
    with Admin(broker.bootstrap) as admin:
        assert admin.group_offsets("cli-g1") == {} and admin.group_offsets("cli-g2") == {}
    bad = run("groups", "delete", "cli-g1", bootstrap=broker.bootstrap, check=False)
    assert bad.returncode == 1 and "GroupIdNotFound" in bad.stderr
    bad = run(
        "groups", "delete-offsets", "cli-none", "--topic", topic, bootstrap=broker.bootstrap, check=False
    )
    assert bad.returncode == 1 and "GroupIdNotFound" in bad.stderr
