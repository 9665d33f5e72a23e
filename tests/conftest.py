"""Shared fixtures: one SparkSession for the whole test session."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession shared by every test that needs Spark."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("pyspark-logsource-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def spark_class_data_dir(tmp_path_factory):
    """Where the tests' short-lived Spark drivers share one class-data archive (tests/support/spark_jvm.py):
    written in the background once the first driver asks, removed at the end (it is ~200 MB)."""
    from support.spark_jvm import ARCHIVE, CDS_DIR_ENV, stop_warm_up

    d = tmp_path_factory.mktemp("spark-cds")
    os.environ[CDS_DIR_ENV] = str(d)
    yield d
    os.environ.pop(CDS_DIR_ENV, None)
    stop_warm_up(d)
    for name in (ARCHIVE, ARCHIVE + ".tmp"):
        (d / name).unlink(missing_ok=True)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """One real ZooKeeper server (Debian's 3.8) for the whole test session, on a free loopback port.

    Tests share it and isolate themselves with a chroot each (the ``zk_connect`` fixture).
    A test that kills or restarts it must leave it running (``zookeeper.start()``)."""
    from pyspark_logsource.broker.cluster.zookeeper import ZOOKEEPER_JAR, ZooKeeperServer

    if not os.path.exists(ZOOKEEPER_JAR):
        pytest.fail(f"ZooKeeper is not installed ({ZOOKEEPER_JAR}): run 'bash scripts/ensure-zookeeper.sh' (make test does)")
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), tick_time_ms=200, fsync=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper, request) -> str:
    """``zookeeper.connect`` for one test: the session server plus a fresh chroot (created here)."""
    import re
    import uuid

    from kazoo.client import KazooClient

    if not zookeeper.running:  # a previous test killed it and failed before restarting it
        zookeeper.start()
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:60]
    chroot = f"/test-{name}-{uuid.uuid4().hex[:8]}"
    client = KazooClient(zookeeper.connect, timeout=10.0)
    client.start(timeout=15)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    return zookeeper.connect + chroot
