"""The tools people already use, against our broker: Apache Kafka's command-line tools (run from the jars
``make peers`` fetched, as kafka-topics.sh etc. run them) and Spark's own Kafka connector
(``format("kafka")``, on the shared SparkSession's ``spark.jars``)."""

from __future__ import annotations

import json
import time

import pytest
from pyspark.sql import functions as F
from support.brokers import WireClient

from pyspark_logsource import Admin, Consumer, Producer
from pyspark_logsource.errors import MessageTooLarge, TopicAuthorizationFailed

pytestmark = pytest.mark.real_kafka


@pytest.fixture(scope="module")
def tools():
    """``tools(tool, *args, input=None, check=True)``: one of Kafka's tools (fails the test if not fetched)."""
    from support.kafka_peer import kafka_classpath, kafka_tool

    try:
        kafka_classpath()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    return kafka_tool


def produce(bs: str, topic: str, partitions: int, n: int, offset: int = 0) -> None:
    """n records per partition: value <topic>-p<part>-<i> for i in [offset, offset + n)."""
    with Producer(bs, linger_ms=2) as p:
        futs = [
            p.send(topic, value=f"{topic}-p{part}-{i}".encode(), key=f"k{i}".encode(), partition=part)
            for part in range(partitions)
            for i in range(offset, offset + n)
        ]
        p.flush()
        for f in futs:
            f.result(30)


# --------------------------------------------------------------------------- Kafka's command-line tools


def test_kafka_topics_create_list_describe(broker, tools, topic_name):
    bs = broker.bootstrap
    t = topic_name("kt")
    out = tools(
        "TopicCommand",
        "--bootstrap-server",
        bs,
        "--create",
        "--topic",
        t,
        "--partitions",
        "3",
        "--config",
        "retention.ms=86400000",
    ).stdout
    assert f"Created topic {t}." in out
    assert t in tools("TopicCommand", "--bootstrap-server", bs, "--list").stdout.split()
    desc = tools("TopicCommand", "--bootstrap-server", bs, "--describe", "--topic", t).stdout
    lines = [ln for ln in desc.splitlines() if ln.strip()]
    assert (
        f"Topic: {t}" in lines[0] and "PartitionCount: 3" in lines[0] and "retention.ms=86400000" in lines[0]
    )
    assert [ln.split("Partition: ")[1].split()[0] for ln in lines[1:]] == ["0", "1", "2"], desc
    again = tools("TopicCommand", "--bootstrap-server", bs, "--create", "--topic", t, check=False)
    assert again.returncode != 0 and "already exists" in (again.stdout + again.stderr)
    with Admin(bs) as admin:
        assert len(admin.describe_topic(t).partitions) == 3


def test_console_producer_and_consumer(broker, tools, topic_name):
    bs = broker.bootstrap
    t = topic_name("kcon")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=2)
    lines = [f"k{i}:line-{i}" for i in range(20)]
    tools(
        "ConsoleProducer",
        "--bootstrap-server",
        bs,
        "--topic",
        t,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        input="\n".join(lines) + "\n",
    )
    with Consumer(bs) as c:  # what the console producer sent, read back with our consumer
        c.assign([(t, 0), (t, 1)])
        got: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += [(m.key, m.value) for m in c.poll(500)]
    assert sorted(got) == sorted((f"k{i}".encode(), f"line-{i}".encode()) for i in range(20))
    out = tools(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "--bootstrap-server",
        bs,
        "--topic",
        t,
        "--from-beginning",
        "--max-messages",
        "20",
        "--timeout-ms",
        "30000",
        "--formatter-property",
        "print.key=true",
        "--group",
        f"console-{t}",
    ).stdout
    assert sorted(out.split("\n")[:-1]) == sorted(f"k{i}\tline-{i}" for i in range(20)), out


def test_kafka_consumer_groups_describe_reset_delete(broker, tools, topic_name):
    bs = broker.bootstrap
    t = topic_name("kgrp")
    group = f"g-{t}"
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=2)
        produce(bs, t, 2, 10)
        admin.commit_group_offsets(group, {(t, 0): 4, (t, 1): 10})
    groups = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    listed = tools(groups, "--bootstrap-server", bs, "--list").stdout.split()
    assert group in listed
    desc = tools(groups, "--bootstrap-server", bs, "--describe", "--group", group).stdout
    rows = sorted(ln.split()[:6] for ln in desc.splitlines() if ln.startswith(group))
    assert rows == [[group, t, "0", "4", "10", "6"], [group, t, "1", "10", "10", "0"]], desc
    out = tools(
        groups,
        "--bootstrap-server",
        bs,
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        t,
        "--to-earliest",
        "--execute",
    ).stdout
    assert sorted(ln.split()[:4] for ln in out.splitlines() if ln.startswith(group)) == [
        [group, t, "0", "0"],
        [group, t, "1", "0"],
    ], out
    with Admin(bs) as admin:
        assert admin.group_offsets(group) == {(t, 0): 0, (t, 1): 0}
    deleted = tools(groups, "--bootstrap-server", bs, "--delete", "--group", group, check=False)
    assert deleted.returncode == 0 and "successful" in deleted.stdout, deleted.stdout + deleted.stderr
    assert group not in tools(groups, "--bootstrap-server", bs, "--list").stdout.split()


def test_kafka_configs_describe(broker, tools, topic_name):
    bs = broker.bootstrap
    t = topic_name("kcfg")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=1, config={"retention.ms": "7200000", "cleanup.policy": "compact"})
    out = tools(
        "kafka.admin.ConfigCommand",
        "--bootstrap-server",
        bs,
        "--describe",
        "--entity-type",
        "topics",
        "--entity-name",
        t,
    ).stdout
    assert f"Dynamic configs for topic {t} are:" in out, out
    assert "retention.ms=7200000" in out and "cleanup.policy=compact" in out, out
    out = tools(
        "kafka.admin.ConfigCommand",
        "--bootstrap-server",
        bs,
        "--describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        "0",
        "--all",
    ).stdout
    assert "All configs for broker 0 are:" in out and "broker.id=0 sensitive=false" in out, out


def test_kafka_configs_alter(broker, tools, topic_name):
    """kafka-configs --alter (IncrementalAlterConfigs): set, describe back, see the effect, delete."""
    bs = broker.bootstrap
    t = topic_name("kcfa")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=1)
    cfg = (
        "kafka.admin.ConfigCommand",
        "--bootstrap-server",
        bs,
        "--entity-type",
        "topics",
        "--entity-name",
        t,
    )
    out = tools(*cfg, "--alter", "--add-config", "retention.ms=3600000,max.message.bytes=2000").stdout
    assert f"Completed updating config for topic {t}." in out, out
    desc = tools(*cfg, "--describe").stdout
    assert "retention.ms=3600000" in desc and "max.message.bytes=2000" in desc, desc
    with Admin(bs) as admin:
        assert admin.topic_configs(t).get("max.message.bytes") == "2000"
    # the effect: a record over the new max.message.bytes is refused, a small one is not
    with Producer(bs) as p:
        p.send(t, value=b"small", partition=0).result(30)
        with pytest.raises(MessageTooLarge, match="exceeds the limit of 2000 bytes"):
            p.send(t, value=b"x" * 5000, partition=0).result(30)
    out = tools(*cfg, "--alter", "--delete-config", "max.message.bytes").stdout
    assert f"Completed updating config for topic {t}." in out, out
    desc = tools(*cfg, "--describe").stdout
    assert "retention.ms=3600000" in desc and "max.message.bytes" not in desc, desc
    bad = tools(*cfg, "--alter", "--add-config", "retention.ms=notanumber", check=False)
    assert bad.returncode != 0 and "InvalidConfigurationException" in bad.stdout + bad.stderr, (
        bad.stdout + bad.stderr
    )


def test_kafka_topics_alter_partitions(broker, tools, topic_name):
    bs = broker.bootstrap
    t = topic_name("ktap")
    tools("TopicCommand", "--bootstrap-server", bs, "--create", "--topic", t, "--partitions", "1")
    tools("TopicCommand", "--bootstrap-server", bs, "--alter", "--topic", t, "--partitions", "3")
    desc = tools("TopicCommand", "--bootstrap-server", bs, "--describe", "--topic", t).stdout
    assert "PartitionCount: 3" in desc, desc
    with Admin(bs) as admin:
        assert len(admin.describe_topic(t).partitions) == 3
    produce(bs, t, 3, 2)  # the new partitions take writes
    fewer = tools(
        "TopicCommand", "--bootstrap-server", bs, "--alter", "--topic", t, "--partitions", "2", check=False
    )
    assert fewer.returncode != 0 and "InvalidPartitionsException" in fewer.stdout + fewer.stderr, (
        fewer.stdout + fewer.stderr
    )


def test_kafka_delete_records(broker, tools, topic_name, tmp_path):
    bs = broker.bootstrap
    t = topic_name("kdel")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=2)
    produce(bs, t, 2, 10)
    spec = tmp_path / "offsets.json"
    spec.write_text(
        f'{{"partitions": [{{"topic": "{t}", "partition": 0, "offset": 6}},'
        f' {{"topic": "{t}", "partition": 1, "offset": -1}}], "version": 1}}'
    )
    out = tools("DeleteRecordsCommand", "--bootstrap-server", bs, "--offset-json-file", str(spec)).stdout
    assert f"partition: {t}-0\tlow_watermark: 6" in out and f"partition: {t}-1\tlow_watermark: 10" in out, out
    with Consumer(bs) as c:  # what is left, read from the beginning
        c.assign([(t, 0), (t, 1)])
        c.seek_to_beginning()
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + 10
        while len(got) < 4 and time.monotonic() < deadline:
            got += [(m.partition, m.offset) for m in c.poll(500)]
    assert sorted(got) == [(0, 6), (0, 7), (0, 8), (0, 9)]


def test_kafka_leader_election(broker, tools, topic_name):
    bs = broker.bootstrap
    t = topic_name("kle")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=1)
    proc = tools(
        "LeaderElectionCommand",
        "--bootstrap-server",
        bs,
        "--election-type",
        "preferred",
        "--topic",
        t,
        "--partition",
        "0",
        check=False,
    )
    out = proc.stdout + proc.stderr
    # single broker: the preferred replica already leads, which Kafka's tool reports as a no-op
    assert proc.returncode == 0 and f"Valid replica already elected for partitions {t}-0" in out, out


def json_events(out: str) -> list[dict]:
    """The JSON lines a verifiable client printed (other lines, e.g. a warning, skipped)."""
    events = []
    for line in out.splitlines():
        if line.startswith("{"):
            events.append(json.loads(line))
    return events


def test_kafka_verifiable_producer_and_consumer_group(broker, tools, topic_name):
    """Kafka's Java producer (acks=all, idempotent by default) and Java consumer in a group (classic
    protocol, committing after each batch), as Kafka's system tests drive them: every message the
    producer saw acknowledged (keys 0..6: on all three partitions) is consumed, at the offset it was acknowledged at, and the group's committed
    offsets end at the log end."""
    bs = broker.bootstrap
    t = topic_name("kver")
    n = 300
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=3)
    out = tools(
        "VerifiableProducer",
        "--bootstrap-server", bs, "--topic", t, "--max-messages", str(n), "--acks", "-1",
        "--throughput", "-1", "--repeating-keys", "7",
    ).stdout  # fmt: skip
    sent = [e for e in json_events(out) if e["name"] == "producer_send_success"]
    assert not [e for e in json_events(out) if e["name"] == "producer_send_error"], out[-2000:]
    assert len(sent) == n and sorted(int(e["value"]) for e in sent) == list(range(n))
    acked = {(e["partition"], e["offset"]): e["value"] for e in sent}
    assert len(acked) == n  # no two acknowledgements share an offset
    group = f"g-{t}"
    out = tools(
        "VerifiableConsumer",
        "--bootstrap-server", bs, "--topic", t, "--group-id", group, "--group-protocol", "classic",
        "--max-messages", str(n), "--reset-policy", "earliest", "--verbose",
        timeout=120,
    ).stdout  # fmt: skip
    events = json_events(out)
    assert any(e["name"] == "partitions_assigned" for e in events), out[-2000:]
    got = {(e["partition"], e["offset"]): e["value"] for e in events if e["name"] == "record_data"}
    assert got == acked
    committed: dict[int, int] = {}
    for e in events:
        if e["name"] == "offsets_committed":
            assert e["success"], e
            for o in e["offsets"]:
                committed[o["partition"]] = max(committed.get(o["partition"], 0), o["offset"])
    with Admin(bs) as admin:
        ends = admin.list_offsets([(t, p) for p in range(3)], "latest")
        assert admin.group_offsets(group) == ends
    assert all(ends.values()) and committed == {p: end for (_t, p), end in ends.items()}


def test_kafka_transactions_list_describe_and_abort_a_hanging_one(broker, tools, topic_name):
    """kafka-transactions.sh finds a transaction left open (its producer gone) and aborts it on the partition:
    the last stable offset moves on, so read_committed consumers see what was written after it."""
    ck = pytest.importorskip("confluent_kafka")
    bs = broker.bootstrap
    t, tid = topic_name("ktxn"), topic_name("hanging")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=1)
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": tid, "transaction.timeout.ms": 600000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(t, value=b"hanging", partition=0)
    assert p.flush(10) == 0  # the transaction stays open: nothing ends it within the test
    produce(bs, t, 1, 1)  # a plain record after it, held back from read_committed readers

    def rows(*args: str) -> list[list[str]]:
        out = tools("TransactionsCommand", "--bootstrap-server", bs, *args).stdout
        return [ln.split() for ln in out.splitlines()[1:] if ln.strip()]

    listed = [r for r in rows("list") if r[0] == tid]  # TransactionalId Coordinator ProducerId State
    assert len(listed) == 1 and listed[0][3] == "Ongoing", listed
    (desc,) = rows("describe", "--transactional-id", tid)
    assert desc[2] == listed[0][2], (desc, listed)
    assert desc[1] == tid and desc[4] == "Ongoing" and desc[5] == "600000" and desc[-1] == f"{t}-0", desc
    # ProducerId ... CurrentTransactionStartOffset: the open transaction's first offset (the plain producer's
    # row has none)
    (prod,) = [r for r in rows("describe-producers", "--topic", t, "--partition", "0") if r[0] == desc[2]]
    assert prod[-1] == "0", prod
    assert _read_committed_values(ck, bs, t, 0.5) == []
    tools(
        "TransactionsCommand",
        "--bootstrap-server",
        bs,
        "abort",
        "--topic",
        t,
        "--partition",
        "0",
        "--start-offset",
        "0",
    )
    (prod,) = [r for r in rows("describe-producers", "--topic", t, "--partition", "0") if r[0] == desc[2]]
    assert prod[-1] == "None", prod
    assert _read_committed_values(ck, bs, t, 10) == [f"{t}-p0-0".encode()]
    unknown = tools(
        "TransactionsCommand", "--bootstrap-server", bs, "describe", "--transactional-id", "nope", check=False
    )
    assert unknown.returncode != 0 and "could not be found" in unknown.stdout + unknown.stderr
    p.abort_transaction(
        30
    )  # the coordinator still has it open (the tool aborts the partition only, as Kafka's)


def _read_committed_values(ck, bs: str, topic: str, wait_s: float) -> list[bytes]:
    c = ck.Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"rc-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
        }
    )
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        end = time.monotonic() + wait_s
        while time.monotonic() < end and not got:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
        return got
    finally:
        c.close()


def test_kafka_acls_add_list_remove(broker_factory, tools, topic_name):
    """kafka-acls.sh against a broker with ACLs on (allow.everyone.if.no.acl.found: a resource without ACLs is
    open): an ACL for alice makes the topic hers, so this anonymous client is refused it until it is removed."""
    acl_broker = broker_factory(
        {
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        }
    )
    bs = acl_broker.bootstrap
    t = topic_name("kacl")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=1)
    acls = ("AclCommand", "--bootstrap-server", bs)
    rule = ("--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--topic", t)
    out = tools(*acls, "--add", *rule, "--group", "g-alice").stdout
    assert "resourceType=TOPIC" in out and "resourceType=GROUP" in out, out
    listed = tools(*acls, "--list", "--topic", t).stdout
    for op in ("READ", "DESCRIBE"):
        assert f"(principal=User:alice, host=*, operation={op}, permissionType=ALLOW)" in listed, listed
    assert "name=g-alice" in tools(*acls, "--list").stdout
    with WireClient(bs) as w:  # Metadata: the topic now has ACLs and none lets ANONYMOUS describe it
        assert w.metadata([t]).topics[0].error_code == TopicAuthorizationFailed.code
    tools(*acls, "--remove", "--force", *rule)
    assert "User:alice" not in tools(*acls, "--list", "--topic", t).stdout
    with WireClient(bs) as w:
        assert w.metadata([t]).topics[0].error_code == 0
    bad = tools(
        *acls, "--add", "--allow-principal", "alice", "--operation", "Read", "--topic", t, check=False
    )
    assert bad.returncode != 0, bad.stdout


# --------------------------------------------------------------------------- Spark's Kafka connector


def kafka_read(spark, bs, **opts):
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bs)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


@pytest.fixture(scope="module")
def connector(spark):
    """Spark's Kafka connector on the shared session (conftest puts it on spark.jars when fetched)."""
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    if "spark-sql-kafka" not in jars:
        pytest.fail("Spark's Kafka connector is not on the SparkSession: run 'make peers' (make test does)")
    return spark


@pytest.mark.spark
def test_spark_kafka_connector_batch_read(connector, broker, topic_name):
    spark, bs = connector, broker.bootstrap
    t = topic_name("skr")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=3)
    produce(bs, t, 3, 40)
    df = kafka_read(spark, bs, subscribe=t)
    rows = df.select(F.col("value").cast("string").alias("v"), "partition", "offset", "topic").collect()
    assert sorted((r.partition, r.offset, r.v) for r in rows) == [
        (p, i, f"{t}-p{p}-{i}") for p in range(3) for i in range(40)
    ]
    assert {r.topic for r in rows} == {t}
    # the same offsets through our source give the same rows
    ours = spark.read.format("logsource").option("bootstrap.servers", bs).option("subscribe", t).load()
    assert (
        ours.select("partition", "offset", "value")
        .exceptAll(df.select("partition", "offset", "value"))
        .count()
        == 0
    )
    part = kafka_read(
        spark,
        bs,
        subscribe=t,
        startingOffsets=f'{{"{t}":{{"0":10,"1":-2,"2":-2}}}}',
        endingOffsets=f'{{"{t}":{{"0":15,"1":5,"2":-1}}}}',
    )
    assert part.count() == 5 + 5 + 40


@pytest.mark.spark
def test_spark_kafka_connector_stream_restarted_twice(connector, broker, topic_name, tmp_path):
    """A streaming query with a checkpoint, stopped and restarted twice with new records in between:
    every record once in the output (Parquet file sink: exactly-once output)."""
    spark, bs = connector, broker.bootstrap
    t = topic_name("sks")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=2)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    for run in range(3):
        produce(bs, t, 2, 15, offset=run * 15)
        q = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", t)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "12")
            .load()
            .select(F.col("value").cast("string").alias("v"), "partition", "offset")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()
        got = [r.v for r in spark.read.parquet(str(out)).collect()]
        want = [f"{t}-p{p}-{i}" for p in range(2) for i in range((run + 1) * 15)]
        assert sorted(got) == sorted(want), f"run {run}"  # no loss, no duplicate


@pytest.mark.spark
def test_spark_kafka_connector_write(connector, broker, topic_name):
    spark, bs = connector, broker.bootstrap
    t = topic_name("skw")
    with Admin(bs) as admin:
        admin.create_topic(t, partitions=2)
    df = spark.createDataFrame(
        [(f"k{i}", f"v{i}", i % 2) for i in range(50)], "key string, value string, partition int"
    )
    df.write.format("kafka").option("kafka.bootstrap.servers", bs).option("topic", t).save()
    with Consumer(bs) as c:
        c.assign([(t, 0), (t, 1)])
        got: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while len(got) < 50 and time.monotonic() < deadline:
            got += [(m.partition, m.key, m.value) for m in c.poll(500)]
    assert sorted(got) == sorted((i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(50))
