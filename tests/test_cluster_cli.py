"""``logsource cluster start|status|stop`` and the topic commands against the cluster it starts."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from support.brokers import broker_thread

from pyspark_logsource.broker.cluster.zookeeper import pid_alive
from pyspark_logsource.client import Admin
from pyspark_logsource.errors import ConfigError, InvalidReplicationFactor, UnknownTopicOrPartition

CLI = [sys.executable, "-m", "pyspark_logsource.cli"]


def run(*args: str, stdin: bytes | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("LOGSOURCE_BOOTSTRAP", None)
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, timeout=timeout, env=env)


def ok(*args: str, stdin: bytes | None = None) -> str:
    p = run(*args, stdin=stdin)
    assert p.returncode == 0, (
        f"logsource {' '.join(args)} failed ({p.returncode}):\n{p.stdout.decode()}\n{p.stderr.decode()}"
    )
    return p.stdout.decode()


def _describe(out: str) -> dict[int, dict[str, str]]:
    rows = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        if "Partition" in fields:
            rows[int(fields["Partition"])] = fields
    return rows


def here(capsys, *args: str) -> tuple[int, str, str]:
    """Run ``logsource ARGS`` in this process (the same entry point, without an interpreter start)."""
    from pyspark_logsource.cli import main

    capsys.readouterr()
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_cluster_start_topics_produce_consume_stop(tmp_path, capsys):
    d = tmp_path / "lsc"
    out = ok("cluster", "start", "--brokers", "3", "--data-dir", str(d))
    bootstrap = re.search(r"^bootstrap\.servers=(\S+)$", out, re.M).group(1)
    assert len(bootstrap.split(",")) == 3
    state = json.loads((d / "cluster.json").read_text())
    pids = [state["zookeeper"]["pid"]] + [b["pid"] for b in state["brokers"]]
    try:
        assert all(pid_alive(p) for p in pids)
        rc, out, _ = here(capsys, "cluster", "status", "--data-dir", str(d))
        assert rc == 0 and out.count("running") == 4 and f"bootstrap.servers={bootstrap}" in out
        # a second start on a running cluster starts nothing and leaves it running; another size is refused
        rc, out, err = here(capsys, "cluster", "start", "--brokers", "3", "--data-dir", str(d))
        assert rc == 0 and "nothing to start" in err and f"bootstrap.servers={bootstrap}" in out
        rc, _, err = here(capsys, "cluster", "start", "--brokers", "4", "--data-dir", str(d))
        assert rc == 1 and "has 3 broker(s), not 4" in err
        assert all(pid_alive(p) for p in pids)
        state = json.loads((d / "cluster.json").read_text())
        assert [state["zookeeper"]["pid"]] + [b["pid"] for b in state["brokers"]] == pids

        rc, out, err = here(
            capsys,
            "topics",
            "create",
            "events",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=2",
            "-b",
            bootstrap,
        )
        assert rc == 0, err
        # any one broker of the list is enough to bootstrap (the others come from Metadata)
        rc, desc, err = here(capsys, "topics", "describe", "events", "-b", bootstrap.split(",")[-1])
        assert rc == 0, err
        assert "PartitionCount: 3\tReplicationFactor: 3\tConfigs: min.insync.replicas=2" in desc
        rows = _describe(desc)
        assert sorted(rows) == [0, 1, 2]
        for r in rows.values():
            assert sorted(r["Replicas"].split(",")) == ["1", "2", "3"]
            assert r["Leader"] in r["Isr"].split(",") and len(r["Isr"].split(",")) >= 2
        # leaders are spread: each broker leads one of the three partitions
        assert sorted(r["Leader"] for r in rows.values()) == ["1", "2", "3"]
        rc, _, err = here(
            capsys, "topics", "create", "too-many", "--replication-factor", "4", "-b", bootstrap
        )
        assert rc == 1 and "InvalidReplicationFactor" in err

        lines = b"".join(b"k%d\tv%d\n" % (i, i) for i in range(300))
        ok("produce", "events", "--acks", "all", "--key-separator", "\t", "-b", bootstrap, stdin=lines)
        got = ok(
            "consume",
            "events",
            "--from-beginning",
            "--max-messages",
            "300",
            "--timeout-ms",
            "20000",
            "--print-key",
            "-b",
            bootstrap,
        )
        assert sorted(got.splitlines()) == sorted(f"k{i}\tv{i}" for i in range(300))
    finally:
        stopped = ok("cluster", "stop", "--data-dir", str(d))
    assert "broker-1" in stopped and "zookeeper" in stopped
    assert not any(pid_alive(p) for p in pids)
    rc, out, _ = here(capsys, "cluster", "status", "--data-dir", str(d))
    assert out.count("stopped") == 4

    # start again on the same dir: same ports, the data is still there
    rc, out, err = here(capsys, "cluster", "start", "--brokers", "3", "--data-dir", str(d))
    try:
        assert rc == 0, err
        assert re.search(r"^bootstrap\.servers=(\S+)$", out, re.M).group(1) == bootstrap
        rc, out, err = here(
            capsys,
            "consume",
            "events",
            "--from-beginning",
            "--max-messages",
            "300",
            "--timeout-ms",
            "30000",
            "-b",
            bootstrap,
        )
        assert rc == 0, err
        assert len(out.splitlines()) == 300
    finally:
        rc, out, _ = here(capsys, "cluster", "stop", "--data-dir", str(d))
    assert rc == 0 and "zookeeper" in out


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_cluster_start_brings_back_a_broker_killed_9_and_only_it(tmp_path):
    d = tmp_path / "lsc"
    bootstrap = re.search(
        r"^bootstrap\.servers=(\S+)$", ok("cluster", "start", "--data-dir", str(d)), re.M
    ).group(1)
    try:
        ok("topics", "create", "kept", "--partitions", "3", "--replication-factor", "3", "-b", bootstrap)
        ok(
            "produce",
            "kept",
            "--acks",
            "all",
            "-b",
            bootstrap,
            stdin=b"".join(b"m%d\n" % i for i in range(300)),
        )
        before = json.loads((d / "cluster.json").read_text())
        victim = before["brokers"][1]
        os.kill(victim["pid"], signal.SIGKILL)
        for _ in range(100):  # not our child (a daemon): wait until it is gone
            if not pid_alive(victim["pid"]):
                break
            time.sleep(0.05)
        assert not pid_alive(victim["pid"])
        status = ok("cluster", "status", "--data-dir", str(d)).splitlines()
        assert [ln.split("\t")[-1] for ln in status[:4]] == ["running", "running", "stopped", "running"], (
            status
        )

        p = run("cluster", "start", "--data-dir", str(d))  # as a user would: no --brokers
        assert p.returncode == 0, p.stderr.decode()
        assert "Started broker-2 in" in p.stderr.decode()
        assert f"bootstrap.servers={bootstrap}" in p.stdout.decode()
        after = json.loads((d / "cluster.json").read_text())
        assert after["zookeeper"]["pid"] == before["zookeeper"]["pid"]  # the others untouched
        assert [b["pid"] for b in after["brokers"]][::2] == [b["pid"] for b in before["brokers"]][::2]
        assert after["brokers"][1]["pid"] != victim["pid"] and after["brokers"][1]["port"] == victim["port"]
        assert ok("cluster", "status", "--data-dir", str(d)).count("running") == 4
        # the restarted broker is back in the ISR of every partition, and nothing was lost
        for _ in range(300):
            rows = _describe(ok("topics", "describe", "kept", "-b", bootstrap))
            if all(sorted(r["Isr"].split(",")) == ["1", "2", "3"] for r in rows.values()):
                break
            time.sleep(0.1)
        assert all(sorted(r["Isr"].split(",")) == ["1", "2", "3"] for r in rows.values()), rows
        got = ok(
            "consume",
            "kept",
            "--from-beginning",
            "--max-messages",
            "300",
            "--timeout-ms",
            "20000",
            "-b",
            bootstrap,
        )
        assert sorted(got.split()) == sorted(f"m{i}" for i in range(300))
    finally:
        ok("cluster", "stop", "--data-dir", str(d))


@pytest.mark.cluster
def test_cluster_start_waits_for_a_live_leader_of_every_partition(zk_connect, tmp_path):
    # what `cluster start` waits for after the brokers registered: each partition's state names a live leader
    from kazoo.client import KazooClient

    from pyspark_logsource.broker.cluster import paths
    from pyspark_logsource.broker.cluster.local import LocalCluster, _leaderless
    from pyspark_logsource.errors import LeaderNotAvailable

    zk = KazooClient(zk_connect, timeout=10.0)
    zk.start(timeout=15)
    try:
        zk.create(
            paths.topic_path("t"),
            paths.encode_assignment({0: [1, 2], 1: [2, 1], 2: [1, 2]}, paths.new_topic_id()),
            makepath=True,
        )
        zk.create(
            paths.partition_state_path("t", 0),
            paths.encode_state(paths.LeaderAndIsr(1, 3, [1, 2], 1)),
            makepath=True,
        )
        zk.create(
            paths.partition_state_path("t", 1),
            paths.encode_state(paths.LeaderAndIsr(2, 3, [2], 1)),
            makepath=True,
        )
        # partition 2 has no state yet (being created); partition 1's leader 2 is not registered
        assert _leaderless(zk, {1}) == ["t-1", "t-2"]
        zk.create(paths.topic_path("gone"), paths.encode_assignment({0: [2]}, paths.new_topic_id()))
        zk.create(paths.delete_topic_path("gone"), makepath=True)  # being deleted: nobody leads it again
        assert _leaderless(zk, {1}) == ["t-1", "t-2"]
        c = LocalCluster(tmp_path, 2, startup_timeout=0.5)
        with pytest.raises(LeaderNotAvailable, match=r"partition\(s\) t-1, t-2 have no leader after"):
            c._wait_leaders(zk_connect, {1})
        zk.create(
            paths.partition_state_path("t", 2),
            paths.encode_state(paths.LeaderAndIsr(1, 0, [1], 1)),
            makepath=True,
        )
        assert _leaderless(zk, {1, 2}) == []
        c._wait_leaders(zk_connect, {1, 2})  # returns at once
    finally:
        zk.stop()
        zk.close()


def test_cluster_stop_without_a_cluster(tmp_path, capsys):
    rc, _, err = here(capsys, "cluster", "stop", "--data-dir", str(tmp_path / "none"))
    assert rc == 1 and "no cluster" in err
    rc, _, err = here(capsys, "cluster", "start", "--brokers", "0", "--data-dir", str(tmp_path / "none"))
    assert rc == 1 and "ConfigError" in err


def test_replication_factor_on_a_single_broker(tmp_path, capsys):
    # the embedded single broker holds one copy: more is a typed error, and nothing is created
    with broker_thread(tmp_path) as b, Admin(b.bootstrap) as admin:
        with pytest.raises(InvalidReplicationFactor):
            admin.create_topic("two", 1, replication_factor=2)
        for bad in (0, -3, 1.5, True):
            with pytest.raises(ConfigError):
                admin.create_topic("bad", 1, replication_factor=bad)
        assert "two" not in admin.list_topics() and "bad" not in admin.list_topics()
        admin.create_topic("one", 2, replication_factor=1, config={"retention.ms": "3600000"})
        d = admin.describe_topic("one")
        assert [p.replicas for p in d.partitions] == [[0], [0]]
        assert admin.topic_configs("one") == {"retention.ms": "3600000"}
        assert admin.topic_configs("one", overrides_only=False)["min.insync.replicas"] == "1"
        with pytest.raises(UnknownTopicOrPartition):
            admin.topic_configs("nope")
        rc, out, _ = here(capsys, "topics", "describe", "one", "-b", b.bootstrap)
        assert rc == 0 and "ReplicationFactor: 1\tConfigs: retention.ms=3600000" in out
        rc, _, err = here(capsys, "topics", "create", "three", "--replication-factor", "3", "-b", b.bootstrap)
        assert rc == 1 and "InvalidReplicationFactor" in err


def test_conf_cluster_files_describe_three_brokers():
    from pathlib import Path

    from pyspark_logsource.broker.config import BrokerConfig, parse_properties

    conf = Path(__file__).resolve().parent.parent / "conf" / "cluster"
    ports = set()
    for i in (1, 2, 3):
        text = (conf / f"server-{i}.properties").read_text()
        props = parse_properties(text)
        for key in (
            "broker.id",
            "zookeeper.connect",
            "zookeeper.session.timeout.ms",
            "default.replication.factor",
            "min.insync.replicas",
            "replica.lag.time.max.ms",
            "unclean.leader.election.enable",
        ):
            assert key in props, f"server-{i}.properties lacks {key}"
            assert f"\n{key}=" in text and text.split(f"\n{key}=")[0].rstrip().splitlines()[-1].startswith(
                "#"
            ), f"no explanation above {key} in server-{i}.properties"
        cfg = BrokerConfig.load(conf / f"server-{i}.properties")
        assert cfg.broker_id == i
        ports.add(cfg.port)
        assert props["zookeeper.connect"].startswith("127.0.0.1:2181")
    assert len(ports) == 3
    zoo = parse_properties((conf / "zoo.cfg").read_text())
    assert zoo["clientPort"] == "2181" and zoo["admin.enableServer"] == "false"
