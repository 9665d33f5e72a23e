"""Shared fixtures: one SparkSession for the whole test session; brokers (a factory, one broker per
module, one per stored layout); unique topic names; the session's ZooKeeper.

Importable helpers are in tests/support/ (``from support.brokers import WireClient``)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.brokers import broker_process, unique_topic

#: ``logsource.arrow.body.enable`` for each way the broker stores (and serves) record batches: Arrow
#: bodies as we use it, or Kafka's layout only (a plain Kafka broker; our clients then speak that layout)
LAYOUTS = {"arrow-body": "true", "kafka-only": "false"}


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession shared by every test that needs Spark."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    connector = _spark_kafka_connector_jars()
    if connector:  # Spark's own Kafka connector (format("kafka")), when make peers fetched it
        builder = builder.config("spark.jars", ",".join(connector))
    session = (
        builder.master("local[2]")
        .appName("pyspark-logsource-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _spark_kafka_connector_jars() -> list[str]:
    """Spark's Kafka connector and the jars it needs that pyspark does not ship (kafka-clients,
    commons-pool2, spark-token-provider), from .cache/peers/; empty when they are not fetched."""
    import pyspark
    from support.kafka_peer import peers

    return peers().spark_kafka_jars(os.path.join(os.path.dirname(pyspark.__file__), "jars"))


@pytest.fixture(scope="session")
def real_kafka(tmp_path_factory):
    """One single-node Apache Kafka (KRaft, the fetched jars) for the whole test session, on free loopback
    ports; fails (with its last log lines) when the jars are missing or it does not start in time. Beside
    PLAINTEXT (``bootstrap``) a SASL_SSL listener with SCRAM-SHA-512 (``sasl_ssl_bootstrap``, CA ``ca``) whose
    users are support.secure's USERS (tests/test_security_spark.py)."""
    from support.kafka_peer import KafkaServer, KafkaStartError
    from support.secure import USERS, kafka_pem_keystore

    ca, keystore = kafka_pem_keystore(tmp_path_factory.mktemp("apache-kafka-tls"))
    try:
        server = KafkaServer(
            tmp_path_factory.mktemp("apache-kafka"),
            start_timeout=90.0,
            sasl_ssl_keystore=keystore,
            scram_users=USERS,
        ).start()
        server.ca = ca
    except (KafkaStartError, RuntimeError) as e:
        pytest.fail(str(e), pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def hdfs(tmp_path_factory):
    """One MiniDFSCluster (the fetched hadoop-client-minicluster) for the test session: ``hdfs.url``."""
    from support.hdfs_peer import HdfsServer, HdfsStartError

    try:
        server = HdfsServer(tmp_path_factory.mktemp("minidfs")).start()
    except HdfsStartError as e:
        pytest.fail(str(e), pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory):
    """A Spark Connect server (pyspark's own, tests/support/connect_peer.py) for the test session, and a
    client session on it (``SparkSession.builder.remote``)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    # Connect's own builder: pyspark.sql.SparkSession.builder.remote refuses while the classic session of
    # the `spark` fixture runs in this process (SESSION_ALREADY_EXIST); a client session needs no such rule
    from pyspark.sql.connect.session import SparkSession
    from support.connect_peer import ConnectServer, ConnectStartError

    try:
        server = ConnectServer(tmp_path_factory.mktemp("spark-connect")).start()
    except ConnectStartError as e:
        pytest.fail(str(e), pytrace=False)
    session = SparkSession.builder.remote(server.url).getOrCreate()
    yield session
    session.stop()
    server.stop()


#: the markers of the tests that start many short-lived Spark drivers (the kill -9 schedules)
MANY_DRIVERS = ("kill9", "eos_kill")


@pytest.fixture(scope="session", autouse=True)
def spark_class_data_dir(tmp_path_factory, request):
    """Where the tests' short-lived Spark drivers share one class-data archive (tests/support/spark_jvm.py):
    written in the background from the session's start when it holds kill -9 tests (else once the first
    driver asks), removed at the end (it is ~200 MB)."""
    from support.spark_jvm import ARCHIVE, CDS_DIR_ENV, start_warm_up, stop_warm_up

    d = tmp_path_factory.mktemp("spark-cds")
    os.environ[CDS_DIR_ENV] = str(d)
    request.config.stash[_CDS_DIR] = d
    # in a full run the first kill test comes well into the run: by then the archive is ready for all its
    # drivers, rather than written (~65 s of CPU) while the first of them start without it
    if any(i.get_closest_marker(m) for i in request.session.items for m in MANY_DRIVERS):
        start_warm_up(d)
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
        pytest.fail(
            f"ZooKeeper is not installed ({ZOOKEEPER_JAR}): run 'bash scripts/ensure-zookeeper.sh' (make test does)"
        )
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


# ------------------------------------------------------------------ brokers


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    """Config overrides (Kafka's property names) for this module's ``broker``, ``plain_broker`` and
    ``layout_broker``: none here; a module that needs some defines its own ``broker_config`` fixture."""
    return {}


@pytest.fixture(scope="module")
def broker_factory(tmp_path_factory) -> Iterator[Callable[..., Any]]:
    """``broker_factory(overrides=None, *, layout="arrow-body")`` starts a broker process with those config
    overrides in a fresh data dir and returns the running EmbeddedBroker; every broker it started stops
    after the module's last test. For a broker that lives one test, use ``support.brokers.broker_process``
    (or ``broker_thread``) as a context manager."""
    with contextlib.ExitStack() as stack:

        def start(overrides: dict[str, Any] | None = None, *, layout: str = "arrow-body") -> Any:
            config = {**(overrides or {}), "logsource.arrow.body.enable": LAYOUTS[layout]}
            return stack.enter_context(
                broker_process(tmp_path_factory.mktemp(f"broker-{layout}"), config=config)
            )

        yield start


@pytest.fixture(scope="module")
def broker(broker_factory, broker_config) -> Any:
    """One broker process for the module, Arrow bodies on (the default), with the module's ``broker_config``."""
    return broker_factory(broker_config)


@pytest.fixture(scope="module")
def plain_broker(broker_factory, broker_config) -> Any:
    """One broker process for the module that stores Kafka's layout only: a plain Kafka broker."""
    return broker_factory(broker_config, layout="kafka-only")


@pytest.fixture(scope="module", params=list(LAYOUTS))
def layout_broker(request) -> Any:
    """Each stored layout in turn (ids ``arrow-body``, ``kafka-only``): ``broker``, then ``plain_broker``,
    for the tests that must hold on both."""
    return request.getfixturevalue("broker" if request.param == "arrow-body" else "plain_broker")


@pytest.fixture
def topic_name() -> Callable[..., str]:
    """``topic_name(prefix="t")``: a topic name no other test of the session uses, ``<prefix>-<n>``."""
    return unique_topic


_CDS_DIR = pytest.StashKey[Any]()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
    """How many Spark drivers started before the class-data archive was ready (they ran without it)."""
    from support.spark_jvm import FAILED, drivers_without_archive

    d = config.stash.get(_CDS_DIR, None)
    n = drivers_without_archive(d) if d is not None else 0
    if n:
        failed = " (its warm-up failed)" if (d / FAILED).exists() else ""
        terminalreporter.write_line(f"spark drivers started without the class-data archive: {n}{failed}")
