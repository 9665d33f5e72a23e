"""AlterConfigs (33), IncrementalAlterConfigs (44) and DescribeConfigs with the dynamic values' sources,
against one broker process and a three-broker cluster.

Each change is checked for its effect on the live logs, without a restart: a lowered ``segment.bytes`` rolls
segments, a lowered ``retention.ms`` deletes old ones, ``max.message.bytes`` refuses a larger batch with
MESSAGE_TOO_LARGE (nothing appended, the broker serving on), and the values survive a restart. In a cluster
a change made through one broker applies on the others within about a second (ZooKeeper's
``/config/changes`` notifications). Every bad input gets Kafka's code: INVALID_CONFIG naming the key,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for a resource type other than topic and broker.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from support.brokers import WireClient
from support.cluster import Cluster, wait_for

from pyspark_logsource.client import Admin
from pyspark_logsource.format import batch as fmt
from pyspark_logsource.format.header import EARLIEST_TIMESTAMP
from pyspark_logsource.protocol.admin_config_messages import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pyspark_logsource.protocol.admin_messages import ConfigResource as ConfigResource_
from pyspark_logsource.protocol.admin_messages import DescribeConfigsRequest

pytestmark = [
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning"),
]

MESSAGE_TOO_LARGE, UNKNOWN_TOPIC, NOT_ENOUGH_REPLICAS, INVALID_CONFIG, INVALID_REQUEST = 10, 3, 19, 40, 42
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5


@pytest.fixture(scope="module")
def broker_config():
    # retention is checked often, so a lowered retention.ms acts within the test
    return {"log.retention.check.interval.ms": "200"}


def _set(name: str, kind: str = "topic", **values: str) -> ConfigResource:
    return ConfigResource(
        kind,
        name,
        incremental_configs=[
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
            for k, v in values.items()
        ],
    )


def _alter(a: AdminClient, res: ConfigResource) -> None:
    assert a.incremental_alter_configs([res])[res].result(30) is None


def _error(fut) -> tuple[int, str]:
    with pytest.raises(KafkaException) as e:
        fut.result(30)
    return e.value.args[0].code(), e.value.args[0].str()


def _describe(a: AdminClient, kind: str, name: str) -> dict:
    res = ConfigResource(kind, name)
    return a.describe_configs([res])[res].result(30)  # librdkafka asks for synonyms


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0, acks: str = "1") -> list:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "batch.num.messages": 1})
    errors: list = []
    for v in values:
        p.produce(topic, v, partition=partition, on_delivery=lambda e, m: errors.append(e))
        p.poll(0)
    assert p.flush(30) == 0
    return errors


def _segments(broker, topic: str, partition: int = 0) -> list[str]:
    d = broker.data_dir / "logs" / f"{topic}-{partition}"
    return sorted(f.name for f in d.glob("*.log"))


def test_max_message_bytes_refuses_a_larger_batch(broker, topic_name):
    topic = topic_name("maxmsg")
    Admin(broker.bootstrap).create_topic(topic, 1)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _produce(broker.bootstrap, topic, [b"x" * 5000]) == [None]
    _alter(a, _set(topic, max_message_bytes="1000"))
    entry = _describe(a, "topic", topic)["max.message.bytes"]
    assert (entry.value, entry.source) == ("1000", DYNAMIC_TOPIC)
    errors = _produce(broker.bootstrap, topic, [b"x" * 5000])
    assert [e.code() for e in errors] == [MESSAGE_TOO_LARGE]
    assert _produce(broker.bootstrap, topic, [b"small"]) == [None]  # still serving
    with WireClient(broker.bootstrap) as w:
        r = w.produce(topic, 0, fmt.encode([b"y" * 3000]))
        assert r.error_code == MESSAGE_TOO_LARGE
        assert w.list_offset(topic, 0, -1).offset == 2  # nothing of the refused batch was appended


def test_lowered_segment_bytes_rolls_segments(broker, topic_name):
    topic = topic_name("segbytes")
    Admin(broker.bootstrap).create_topic(topic, 1)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _produce(broker.bootstrap, topic, [b"v" * 500] * 10) == [None] * 10
    assert len(_segments(broker, topic)) == 1
    _alter(a, _set(topic, segment_bytes="2000"))
    assert _produce(broker.bootstrap, topic, [b"v" * 500] * 10) == [None] * 10
    assert len(_segments(broker, topic)) >= 4  # ~3 batches of ~570 bytes per segment from now on


def test_lowered_retention_deletes_old_segments(broker, topic_name):
    topic = topic_name("retention")
    Admin(broker.bootstrap).create_topic(topic, 1, {"segment.bytes": "1000"})
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _produce(broker.bootstrap, topic, [b"r" * 400] * 12) == [None] * 12
    before = len(_segments(broker, topic))
    assert before >= 4
    with WireClient(broker.bootstrap) as w:
        assert w.list_offset(topic, 0, EARLIEST_TIMESTAMP).offset == 0
        _alter(a, _set(topic, retention_ms="1"))
        # every record expired: the active segment goes too (rolled first), as in Kafka
        wait_for(lambda: w.list_offset(topic, 0, EARLIEST_TIMESTAMP).offset == 12, timeout=10)
    assert len(_segments(broker, topic)) == 1  # the new, empty active segment


def test_an_idempotent_producer_goes_on_after_retention_took_its_whole_log(broker, topic_name):
    """The active segment expired too (Kafka's rule): the log is empty from its end, and a librdkafka
    idempotent producer that wrote all of it goes on with its next sequence numbers, no error."""
    topic = topic_name("expired-all")
    Admin(broker.bootstrap).create_topic(topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    done: list = []

    def produce(n: int) -> None:
        for i in range(n):
            p.produce(topic, b"i%d" % i, partition=0, on_delivery=lambda e, m: done.append((e, m.offset())))
        assert p.flush(30) == 0

    produce(12)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    with WireClient(broker.bootstrap) as w:
        _alter(a, _set(topic, retention_ms="1"))
        wait_for(lambda: w.list_offset(topic, 0, EARLIEST_TIMESTAMP).offset == 12, timeout=10)
        produce(5)
        assert w.list_offset(topic, 0, -1).offset == 17
    assert done == [(None, i) for i in range(17)]


def test_alter_configs_replaces_and_incremental_ops(broker, topic_name):
    topic = topic_name("alter")
    Admin(broker.bootstrap).create_topic(topic, 1, {"retention.ms": "100000"})
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    # legacy AlterConfigs: the given set is the whole new set (retention.ms goes back to its default)
    res = ConfigResource("topic", topic, set_config={"segment.ms": "600000"})
    assert a.alter_configs([res])[res].result(30) is None
    got = _describe(a, "topic", topic)
    assert (got["segment.ms"].value, got["segment.ms"].source) == ("600000", DYNAMIC_TOPIC)
    assert (got["retention.ms"].value, got["retention.ms"].source) == ("604800000", DEFAULT)
    # APPEND and SUBTRACT on a list setting, DELETE back to the default
    ops = [
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ]
    res = ConfigResource("topic", topic, incremental_configs=ops)
    assert a.incremental_alter_configs([res])[res].result(30) is None
    got = _describe(a, "topic", topic)
    assert got["cleanup.policy"].value == "compact,delete"
    assert (got["segment.ms"].value, got["segment.ms"].source) == ("604800000", DEFAULT)
    ops = [ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)]
    res = ConfigResource("topic", topic, incremental_configs=ops)
    assert a.incremental_alter_configs([res])[res].result(30) is None
    assert _describe(a, "topic", topic)["cleanup.policy"].value == "compact"
    # validate_only changes nothing
    res = _set(topic, retention_ms="5000")
    assert a.incremental_alter_configs([res], validate_only=True)[res].result(30) is None
    assert _describe(a, "topic", topic)["retention.ms"].source == DEFAULT


def test_bad_config_changes(broker, topic_name):
    topic = topic_name("badcfg")
    Admin(broker.bootstrap).create_topic(topic, 1)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    code, msg = _error(a.incremental_alter_configs([r := _set(topic, no_such_key="1")])[r])
    assert code == INVALID_CONFIG and "no.such.key" in msg
    code, msg = _error(a.incremental_alter_configs([r := _set(topic, segment_bytes="10")])[r])
    assert code == INVALID_CONFIG and "segment.bytes" in msg
    code, msg = _error(a.incremental_alter_configs([r := _set(topic, retention_ms="soon")])[r])
    assert code == INVALID_CONFIG and "retention.ms" in msg
    append = [ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)]
    code, msg = _error(
        a.incremental_alter_configs([r := ConfigResource("topic", topic, incremental_configs=append)])[r]
    )
    assert code == INVALID_CONFIG and "retention.ms" in msg
    code, _ = _error(a.incremental_alter_configs([r := _set("no-such-topic-cfg", retention_ms="1")])[r])
    assert code == UNKNOWN_TOPIC
    code, msg = _error(a.incremental_alter_configs([r := _set("0", "broker", broker_id="7")])[r])
    assert code == INVALID_CONFIG and "broker.id" in msg and "dynamically" in msg
    code, msg = _error(a.incremental_alter_configs([r := _set("0", "broker", log_retention_ms="-5")])[r])
    assert code == INVALID_CONFIG and "retention.ms" in msg
    with WireClient(broker.bootstrap) as w:  # a group resource (3): not a config resource here
        res = AlterConfigsResource(3, "g", [AlterableConfig("x", "1")])
        r = w.request(IncrementalAlterConfigsRequest([res]), check=False)
        assert r.results[0].error_code == INVALID_REQUEST
    assert _describe(a, "topic", topic)["segment.bytes"].source == DEFAULT  # nothing changed
    assert _produce(broker.bootstrap, topic, [b"ok"]) == [None]


def test_dynamic_broker_configs_and_restart(broker_factory, topic_name):
    b = broker_factory({"log.retention.check.interval.ms": "200", "log.roll.ms": "3600000"})
    topic, kept = topic_name("brokercfg"), topic_name("brokercfg-own")
    with Admin(b.bootstrap) as admin:
        admin.create_topic(topic, 1)
        admin.create_topic(kept, 1, {"max.message.bytes": "100000"})
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    # the cluster default (librdkafka refuses an empty broker name: our Admin sends it), then this
    # broker's own value over it
    Admin(b.bootstrap).incremental_alter_configs(4, "", {"message.max.bytes": "3000"})
    got = _describe(a, "broker", "0")["message.max.bytes"]
    assert (got.value, got.source) == ("3000", DYNAMIC_DEFAULT)
    _alter(a, _set("0", "broker", message_max_bytes="2000", log_segment_bytes="5000"))
    got = _describe(a, "broker", "0")["message.max.bytes"]
    assert (got.value, got.source) == ("2000", DYNAMIC_BROKER)
    with WireClient(b.bootstrap) as w:  # every source in precedence order (librdkafka keeps one per name)
        req = DescribeConfigsRequest([ConfigResource_(4, "0", ["message.max.bytes"])], include_synonyms=True)
        (entry,) = w.request(req).results[0].configs
        assert [(v, src) for _, v, src in entry.synonyms] == [
            ("2000", DYNAMIC_BROKER),
            ("3000", DYNAMIC_DEFAULT),
            ("1048588", DEFAULT),
        ]
    topic_entry = _describe(a, "topic", topic)["max.message.bytes"]
    assert (topic_entry.value, topic_entry.source) == ("2000", DYNAMIC_BROKER)
    static = _describe(a, "broker", "0")
    assert static["broker.id"].is_read_only
    assert (static["log.roll.ms"].value, static["log.roll.ms"].source) == ("3600000", STATIC)
    assert static["log.retention.check.interval.ms"].source == STATIC
    assert (static["log.retention.ms"].value, static["log.retention.ms"].source) == ("604800000", DEFAULT)
    segment_ms = _describe(a, "topic", topic)["segment.ms"]
    assert (segment_ms.value, segment_ms.source) == ("3600000", STATIC)
    # applied to the live logs without a topic override of their own
    assert [e.code() for e in _produce(b.bootstrap, topic, [b"x" * 4000])] == [MESSAGE_TOO_LARGE]
    assert _produce(b.bootstrap, kept, [b"x" * 4000]) == [None]
    # a topic override, and every dynamic value, survive a restart
    _alter(a, _set(kept, retention_bytes="123456"))
    b.restart()
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    got = _describe(a, "broker", "0")
    assert (got["message.max.bytes"].value, got["log.segment.bytes"].value) == ("2000", "5000")
    assert _describe(a, "topic", kept)["retention.bytes"].value == "123456"
    assert [e.code() for e in _produce(b.bootstrap, topic, [b"x" * 4000])] == [MESSAGE_TOO_LARGE]
    # DELETE the broker's own value: the cluster default applies again
    res = ConfigResource(
        "broker",
        "0",
        incremental_configs=[
            ConfigEntry("message.max.bytes", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    assert a.incremental_alter_configs([res])[res].result(30) is None
    got = _describe(a, "broker", "0")["message.max.bytes"]
    assert (got.value, got.source) == ("3000", DYNAMIC_DEFAULT)
    assert _produce(b.bootstrap, topic, [b"x" * 2500]) == [None]


def test_dynamic_sasl_broker_config_as_librdkafka_sets_it(broker_factory):
    """librdkafka's 0081 sets ``sasl.kerberos.min.time.before.relogin`` on a broker with AlterConfigs and
    IncrementalAlterConfigs: Kafka takes it (a dynamic listener setting); an unknown key stays refused."""
    b = broker_factory({})
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    key = "sasl.kerberos.min.time.before.relogin"
    assert (_describe(a, "broker", "0")[key].value, _describe(a, "broker", "0")[key].source) == (
        "60000",
        DEFAULT,
    )
    _alter(
        a,
        ConfigResource(
            "broker",
            "0",
            incremental_configs=[ConfigEntry(key, "58000", incremental_operation=AlterConfigOpType.SET)],
        ),
    )
    got = _describe(a, "broker", "0")[key]
    assert (got.value, got.source, got.is_read_only) == ("58000", DYNAMIC_BROKER, False)
    res = ConfigResource("broker", "0", set_config={key: "57000"})
    assert a.alter_configs([res])[res].result(30) is None
    assert _describe(a, "broker", "0")[key].value == "57000"
    bad = ConfigResource("broker", "0", set_config={"sasl.kerberos.nope": "1"})
    code, msg = _error(a.alter_configs([bad])[bad])
    assert code == INVALID_CONFIG and "sasl.kerberos.nope" in msg
    b.restart()
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    assert _describe(a, "broker", "0")[key].value == "57000"


def test_kafka_python_and_our_admin(broker, topic_name):
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    topic = topic_name("kpcfg")
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, 1)
        admin.incremental_alter_configs(2, topic, {"retention.ms": "7777"})
        assert admin.topic_configs(topic) == {"retention.ms": "7777"}
        admin.alter_configs(2, topic, {"segment.ms": "8888"})
        assert admin.topic_configs(topic) == {"segment.ms": "8888"}
        kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            # kafka-python sends IncrementalAlterConfigs (SET, then DELETE for a reset) to a broker that has it
            kp.alter_configs([KpResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "9999"})])
            assert admin.topic_configs(topic) == {"segment.ms": "8888", "retention.ms": "9999"}
            kp.reset_configs([KpResource(ConfigResourceType.TOPIC, topic, configs={"segment.ms": None})])
            got = kp.describe_configs([KpResource(ConfigResourceType.TOPIC, topic)])
        finally:
            kp.close()
        assert admin.topic_configs(topic) == {"retention.ms": "9999"}
        assert "9999" in repr(got)


def test_cli_alter_config(broker, topic_name):
    topic = topic_name("clicfg")
    Admin(broker.bootstrap).create_topic(topic, 1, {"segment.ms": "600000"})
    cli = [sys.executable, "-m", "pyspark_logsource.cli", "topics", "alter", topic, "-b", broker.bootstrap]
    r = subprocess.run(
        [*cli, "--config", "retention.ms=4242", "--delete-config", "segment.ms"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "retention.ms=4242" in r.stdout
    assert Admin(broker.bootstrap).topic_configs(topic) == {"retention.ms": "4242"}
    r = subprocess.run([*cli, "--config", "segment.bytes=1"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "segment.bytes" in r.stderr + r.stdout
    r = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "nothing to alter" in r.stderr + r.stdout


@pytest.mark.cluster
def test_cluster_config_change_applies_everywhere(zk_connect, tmp_path):
    with Cluster(zk_connect, tmp_path, brokers=3) as c:
        c.create_topic("cfg", partitions=3, replication_factor=3)
        c.wait_full_isr("cfg")
        assert sorted(c.leaders("cfg").values()) == [1, 2, 3]  # one leader per broker
        via = AdminClient({"bootstrap.servers": c.brokers[1].bootstrap})
        _alter(via, _set("cfg", max_message_bytes="1000"))
        t0 = time.monotonic()
        stored = c._json("/config/topics/cfg")
        assert stored["config"] == {"max.message.bytes": "1000"}
        assert c.zk.get_children("/config/changes")
        for bid in (2, 3):  # every broker reports it and its leaders refuse a larger batch
            a = AdminClient({"bootstrap.servers": c.brokers[bid].bootstrap})
            wait_for(lambda a=a: _describe(a, "topic", "cfg")["max.message.bytes"].value == "1000", timeout=2)
        for p in range(3):
            wait_for(
                lambda p=p: (
                    [e.code() for e in _produce(c.bootstrap, "cfg", [b"x" * 3000], p)] == [MESSAGE_TOO_LARGE]
                ),
                timeout=3,
            )
        assert time.monotonic() - t0 < 5
        # a broker's default through one broker, applied by all of them
        Admin(c.brokers[1].bootstrap).incremental_alter_configs(4, "", {"min.insync.replicas": "2"})
        assert c._json("/config/brokers/<default>")["config"] == {"min.insync.replicas": "2"}
        for bid in (1, 2, 3):
            a = AdminClient({"bootstrap.servers": c.brokers[bid].bootstrap})
            wait_for(
                lambda a=a, bid=bid: (
                    _describe(a, "broker", str(bid))["min.insync.replicas"].source == DYNAMIC_DEFAULT
                ),
                timeout=2,
            )
        assert _produce(c.bootstrap, "cfg", [b"ok"], 0, acks="all") == [None]
        # min.insync.replicas above the replicas: the leaders refuse acks=all at once
        _alter(via, _set("cfg", min_insync_replicas="4"))
        for p in range(3):  # (librdkafka retries NOT_ENOUGH_REPLICAS: ask the leader directly)
            with WireClient(c.brokers[c.leader("cfg", p)].bootstrap) as w:
                wait_for(
                    lambda w=w, p=p: (
                        w.produce("cfg", p, fmt.encode([b"x"]), acks=-1).error_code == NOT_ENOUGH_REPLICAS
                    ),
                    timeout=3,
                )
        assert _produce(c.bootstrap, "cfg", [b"acks=1 goes on"], 0) == [None]
        # a change made while a broker is down reaches its logs when it is back
        c.stop(3)
        _alter(via, _set("cfg", max_message_bytes="2000"))
        c.start(3)
        props = c.log_dir(3) / "cfg-0" / "config.properties"
        wait_for(lambda: "max.message.bytes=2000" in props.read_text(), timeout=10)
        # bad input through a cluster broker
        code, msg = _error(via.incremental_alter_configs([r := _set("cfg", segment_bytes="1")])[r])
        assert code == INVALID_CONFIG and "segment.bytes" in msg
        code, _ = _error(via.incremental_alter_configs([r := _set("nope", retention_ms="1")])[r])
        assert code == UNKNOWN_TOPIC
