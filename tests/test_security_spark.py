"""The Spark source and sink and ``logsource etl`` over SASL_SSL (issue 22), with the options users of
Spark's Kafka connector write (``kafka.security.protocol``, ``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.*``), against a broker with SCRAM users and ACLs (the super user ``admin`` reads
and writes; ``alice`` has no ACL). The password never shows: not in ``df.explain``, a streaming query's
progress, the ETL's output and checkpoint files, logs, nor a failed login's error. Our Producer, Consumer
and Admin over SASL_SSL with SCRAM-SHA-512 are in test_security_sasl.py; the same Spark read and ETL
against Apache Kafka in test_security_real_kafka.py.

The translator (client/kafka_security.py) is tested here without Spark: PEM and PKCS12 stores, JKS's
error, the jaas.config, redaction.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support.secure import USERS, make_pki, sasl_ssl_acl_broker

from pyspark_logsource.client import Admin, Consumer, Producer
from pyspark_logsource.client.kafka_security import REDACTED, KafkaSecurity, client_options, redact
from pyspark_logsource.errors import ConfigError, SaslAuthenticationFailed

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
WRONG = "wrong-secret-pw-9"
SECRETS = (*USERS.values(), WRONG, "store-secret-pw-7")


def jaas(user: str = "admin", password: str | None = None, module: str = SCRAM) -> str:
    return f'{module} required username="{user}" password="{USERS[user] if password is None else password}";'


def spark_options(b, pki, user: str = "admin", password: str | None = None) -> dict[str, str]:
    """What a user of Spark's Kafka connector writes for SASL_SSL with SCRAM-SHA-512."""
    return {
        "kafka.bootstrap.servers": b.bootstrap_on("SASL_SSL"),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas(user, password),
        "kafka.ssl.truststore.location": str(pki.ca),
        "kafka.ssl.truststore.type": "PEM",
    }


def ours(pki, user: str = "admin", password: str | None = None) -> dict:
    """Our clients' options (kafka-python's names) through the same translator."""
    return client_options(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": jaas(user, password),
            "ssl.truststore.location": str(pki.ca),
        }
    )


def assert_no_secret(text: str, where: str) -> None:
    for s in SECRETS:
        assert s not in text, f"a password is in {where}"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory, pki):
    """SASL_SSL only, ACLs on, ``admin`` the super user, ``alice`` without any ACL."""
    with sasl_ssl_acl_broker(tmp_path_factory.mktemp("spark-secure-broker"), pki) as b:
        yield b


def new_topic(b, pki, partitions: int = 2, n: int = 0) -> str:
    topic = f"sp-{uuid.uuid4().hex[:8]}"
    with Admin(b.bootstrap_on("SASL_SSL"), **ours(pki)) as a:
        a.create_topic(topic, partitions)
    if n:
        produce(b, pki, topic, range(n))
    return topic


def produce(b, pki, topic: str, values) -> None:
    with Producer(b.bootstrap_on("SASL_SSL"), **ours(pki)) as p:
        for i in values:
            p.send(topic, f"v{i}".encode())
        p.flush()


def consume_all(b, pki, topic: str, n: int) -> list[bytes]:
    c = Consumer(
        b.bootstrap_on("SASL_SSL"),
        group_id=f"g-{uuid.uuid4().hex[:6]}",
        auto_offset_reset="earliest",
        **ours(pki),
    )
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        got += [m.value for m in c.poll(0.5)]
    time.sleep(0.5)
    got += [m.value for m in c.poll(0.2)]
    c.close()
    return got


# ---------------------------------------------------------------------------
# The translator (no broker)


def test_spark_kafka_options_translate_to_our_clients_options(pki):
    s = KafkaSecurity.from_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "kafka.security.protocol": "sasl_ssl",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": jaas("alice", module=PLAIN),
            "kafka.ssl.truststore.location": str(pki.ca),
            "kafka.ssl.endpoint.identification.algorithm": "",
            "kafka.group.id": "not-security",
        }
    )
    assert s.options() == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": USERS["alice"],
        "ssl_cafile": str(pki.ca),
        "ssl_check_hostname": False,
    }
    assert s.client_security().ssl_check_hostname is False
    assert "kafka.sasl.jaas.config" not in repr(s) and REDACTED in repr(s)
    assert_no_secret(repr(s) + str(s) + repr(s.client_security()), "repr")
    assert KafkaSecurity.from_options({}).options() == {}


def _p12(path: Path, key, cert, extra, password: str | None) -> Path:
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, NoEncryption, pkcs12

    enc = BestAvailableEncryption(password.encode()) if password else NoEncryption()
    path.write_bytes(pkcs12.serialize_key_and_certificates(b"x", key, cert, extra, enc))
    return path


def _pem_parts(path: Path):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    data = path.read_bytes()
    certs = x509.load_pem_x509_certificates(data)
    key = load_pem_private_key(data, None) if b"PRIVATE KEY" in data else None
    return key, certs


def test_pkcs12_stores_are_read_and_the_key_never_lands_in_the_clear(pki, tmp_path):
    _, ca = _pem_parts(pki.ca)
    trust = _p12(tmp_path / "trust.p12", None, None, ca, "store-secret-pw-7")
    key, chain = _pem_parts(pki.alice_cert)
    keystore = _p12(tmp_path / "alice.p12", key, chain[0], chain[1:], "store-secret-pw-7")
    opts = client_options(
        {
            "security.protocol": "SSL",
            "ssl.truststore.location": str(trust),
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.password": "store-secret-pw-7",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": "store-secret-pw-7",
        }
    )
    cafile, certfile = Path(opts["ssl_cafile"]), Path(opts["ssl_certfile"])
    assert cafile.read_bytes().count(b"BEGIN CERTIFICATE") == 1
    assert b"ENCRYPTED PRIVATE KEY" in certfile.read_bytes()
    assert (
        oct(certfile.stat().st_mode & 0o777) == "0o600"
        and oct(certfile.parent.stat().st_mode & 0o777) == "0o700"
    )
    from pyspark_logsource.client.security import ClientSecurity

    ClientSecurity.from_options(opts).context()  # the converted key and chain load with the password
    # the type is found from the file when not given
    assert client_options(
        {"ssl.truststore.location": str(trust), "ssl.truststore.password": "store-secret-pw-7"}
    )
    with pytest.raises(ConfigError, match="wrong or missing ssl.truststore.password") as e:
        client_options({"ssl.truststore.location": str(trust), "ssl.truststore.password": WRONG})
    assert_no_secret(str(e.value), "the error")


def test_jks_store_is_a_clear_error_that_says_how_to_convert(pki, tmp_path):
    jks = tmp_path / "trust.jks"
    if os.path.exists("/usr/bin/keytool"):
        subprocess.run(
            ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(pki.ca), "-keystore", str(jks),
             "-storetype", "JKS", "-storepass", "store-secret-pw-7"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    else:
        jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")
    for declared in ("JKS", None):
        props = {"ssl.truststore.location": str(jks), "ssl.truststore.password": "store-secret-pw-7"}
        if declared:
            props["ssl.truststore.type"] = declared
        with pytest.raises(ConfigError, match="keytool -importkeystore -srckeystore .*trust.jks") as e:
            client_options(props)
        assert "-deststoretype PKCS12" in str(e.value)
        assert_no_secret(str(e.value), "the error")


@pytest.mark.parametrize(
    ("props", "match"),
    [
        (
            {"sasl.jaas.config": f'{SCRAM} optional username="u" password="{WRONG}";'},
            "sasl.jaas.config must be",
        ),
        ({"sasl.jaas.config": f'{SCRAM} required password="{WRONG}";'}, 'needs username="..."'),
        ({"ssl.truststore.location": "/nonexistent/ts.pem"}, "cannot read ssl.truststore.location"),
        ({"ssl.truststore.location": __file__, "ssl.truststore.type": "BKS"}, "must be PEM or PKCS12"),
        ({"ssl.endpoint.identification.algorithm": "ldap"}, "https or empty"),
        ({"security.protocol": "SASL_TLS"}, "security_protocol must be one of"),
    ],
)
def test_bad_security_options_are_config_errors_without_the_secret(props, match):
    with pytest.raises(ConfigError, match=match) as e:
        KafkaSecurity.from_options({f"kafka.{k}": v for k, v in props.items()})
    assert_no_secret(str(e.value), "the error")


def test_options_reprs_and_the_etl_command_line_redact_secrets(pki, tmp_path):
    from pyspark_logsource import etl
    from pyspark_logsource.spark.options import parse_read_options, parse_write_options

    opts = {**spark_options_static(pki), "subscribe": "t", "topic": "t"}
    read, write = parse_read_options(opts, streaming=True), parse_write_options(opts)
    assert read.security.options()["sasl_plain_password"] == USERS["admin"]
    assert_no_secret(repr(read) + repr(write), "the options' repr")
    assert redact({"kafka.ssl.key.password": "x", "subscribe": "t"}) == {
        "kafka.ssl.key.password": REDACTED,
        "subscribe": "t",
    }
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM} required \\\n  username="admin" password="{USERS["admin"]}";\n'
        f"ssl.truststore.location={pki.ca}\n"
    )
    cfg = etl.parse_args(
        ["--output", str(tmp_path / "o"), "--subscribe", "t", "--command-config", str(props),
         "--option", f"kafka.ssl.key.password={WRONG}"]
    )  # fmt: skip
    ro = cfg.reader_options()
    assert ro["kafka.sasl.jaas.config"].endswith(f'password="{USERS["admin"]}";')
    assert ro["kafka.ssl.truststore.location"] == str(pki.ca)
    assert parse_read_options(ro, streaming=False).security.options()["sasl_plain_username"] == "admin"
    assert_no_secret(repr(cfg) + " ".join(cfg.to_argv()), "the etl configuration's repr and command line")
    assert "--command-config" in cfg.to_argv()
    # etl.properties takes Spark's kafka.* options as they are
    conf = tmp_path / "etl.properties"
    conf.write_text(f"output={tmp_path / 'o'}\nsubscribe=t\nkafka.security.protocol=SASL_SSL\n")
    assert etl.parse_args(["--config", str(conf)]).reader_options()["kafka.security.protocol"] == "SASL_SSL"


def spark_options_static(pki) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas("admin"),
        "kafka.ssl.truststore.location": str(pki.ca),
    }


# ---------------------------------------------------------------------------
# Our clients through the translator


def test_our_clients_with_kafka_properties_and_a_pkcs12_truststore(secured, pki, tmp_path):
    _, ca = _pem_parts(pki.ca)
    trust = _p12(tmp_path / "trust.p12", None, None, ca, "store-secret-pw-7")
    opts = client_options(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": jaas("admin"),
            "ssl.truststore.location": str(trust),
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.password": "store-secret-pw-7",
        }
    )
    with Admin(secured.bootstrap_on("SASL_SSL"), **opts) as a:
        topic = f"p12-{uuid.uuid4().hex[:6]}"
        a.create_topic(topic, 1)
        assert topic in a.list_topics()


def test_wrong_password_is_sasl_authentication_failed_without_the_password(secured, pki, caplog):
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SaslAuthenticationFailed) as e:
        with Admin(secured.bootstrap_on("SASL_SSL"), **ours(pki, "admin", WRONG)) as a:
            a.list_topics()
    assert_no_secret(str(e.value) + repr(e.value), "the error")
    assert_no_secret(caplog.text, "the client's log records")


# ---------------------------------------------------------------------------
# Spark


@pytest.mark.spark
def test_spark_batch_read_over_sasl_ssl_and_explain_shows_no_secret(secured, pki, spark, capsys):
    from pyspark_logsource.datasource import register

    register(spark)
    topic = new_topic(secured, pki, n=50)
    r = spark.read.format("logsource").options(**spark_options(secured, pki)).option("subscribe", topic)
    df = r.load()
    assert sorted(x.value for x in df.select("value").collect()) == sorted(
        f"v{i}".encode() for i in range(50)
    )
    df.where("partition = 0").explain(True)
    plans = capsys.readouterr().out + df._jdf.queryExecution().toString()
    assert "logsource" in plans
    assert_no_secret(plans, "the plans")


@pytest.mark.spark
def test_spark_writes_over_sasl_ssl_plain_and_exactly_once(secured, pki, spark):
    topic = new_topic(secured, pki)
    for exactly_once, lo in (("false", 0), ("true", 20)):
        df = spark.createDataFrame([(f"v{i}",) for i in range(lo, lo + 20)], "value STRING")
        (
            df.write.format("logsource")
            .options(**spark_options(secured, pki))
            .option("topic", topic)
            .option("exactlyOnce", exactly_once)
            .mode("append")
            .save()
        )
    assert sorted(consume_all(secured, pki, topic, 40)) == sorted(f"v{i}".encode() for i in range(40))


@pytest.mark.spark
def test_spark_streaming_over_sasl_ssl_restarts_from_its_checkpoint(secured, pki, spark, tmp_path):
    topic = new_topic(secured, pki, n=30)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    progress = []
    for batch in range(2):
        q = (
            spark.readStream.format("logsource")
            .options(**spark_options(secured, pki))
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "20")
            .load()
            .selectExpr("CAST(value AS STRING) AS v")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .queryName(f"secure_stream_{batch}")
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(180)
        assert q.exception() is None
        progress += [p.json if hasattr(p, "json") else json.dumps(p) for p in q.recentProgress]
        progress.append(str(q.status) + q.name)
        if batch == 0:
            produce(secured, pki, topic, range(30, 45))
    got = sorted(r.v for r in spark.read.parquet(str(out)).collect())
    assert got == sorted(f"v{i}" for i in range(45))
    assert any('"numInputRows"' in p for p in progress)
    assert_no_secret("\n".join(progress), "the streaming progress")
    for f in [*ckpt.rglob("*"), *out.rglob("*")]:
        if f.is_file():
            assert_no_secret(f.read_bytes().decode("latin-1"), str(f))


@pytest.mark.spark
def test_spark_stream_to_stream_exactly_once_over_sasl_ssl(secured, pki, spark, tmp_path, capsys):
    """readStream -> writeStream, both logsource on the secured broker: the driver's StagedTxns commit of
    each micro-batch and the tasks' staged writes go over SASL_SSL too. The streaming plan lists the
    options, the jaas.config redacted."""
    src, dst = new_topic(secured, pki, n=30), new_topic(secured, pki)
    stream = (
        spark.readStream.format("logsource")
        .options(**spark_options(secured, pki))
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "12")
        .load()
        .select("value")
    )
    stream.explain(True)
    plans = capsys.readouterr().out
    assert "kafka.sasl.jaas.config=" in plans
    assert_no_secret(plans, "the streaming plan")
    q = (
        stream.writeStream.format("logsource")
        .options(**spark_options(secured, pki))
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180)
    assert q.exception() is None
    assert len(q.recentProgress) >= 3  # 30 rows, 12 per micro-batch
    assert sorted(consume_all(secured, pki, dst, 30)) == sorted(f"v{i}".encode() for i in range(30))


@pytest.mark.spark
def test_spark_read_with_a_wrong_password_fails_clearly_without_it(secured, pki, spark):
    topic = new_topic(secured, pki)
    df = (
        spark.read.format("logsource")
        .options(**spark_options(secured, pki, "admin", WRONG))
        .option("subscribe", topic)
    )
    with pytest.raises(Exception) as e:
        df.load().count()
    text = str(e.value)
    assert "SaslAuthenticationFailed" in text
    assert_no_secret(text, "the error")


@pytest.mark.spark
def test_spark_read_without_read_acl_is_topic_authorization_failed(secured, pki, spark):
    topic = new_topic(secured, pki, n=3)
    df = (
        spark.read.format("logsource")
        .options(**spark_options(secured, pki, "alice"))
        .option("subscribe", topic)
    )
    with pytest.raises(Exception) as e:
        df.load().count()
    assert "TopicAuthorizationFailed" in str(e.value) and topic in str(e.value)


# ---------------------------------------------------------------------------
# logsource etl, killed -9 in the middle


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.kill9
@pytest.mark.timeout(900)
def test_etl_over_sasl_ssl_killed_9_under_a_producer_is_exactly_once(secured, pki, tmp_path):
    from test_etl_failures import HELPERS, Job, assert_exactly_committed, stop_producer

    topic = new_topic(secured, pki, partitions=3)
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={jaas('admin')}\nssl.truststore.location={pki.ca}\nssl.truststore.type=PEM\n"
    )
    bootstrap = secured.bootstrap_on("SASL_SSL")
    out = tmp_path / "out"
    argv = ["--bootstrap-servers", bootstrap, "--subscribe", topic, "--output", str(out), "--master", "local[1]",
            "--no-progress", "--command-config", str(props)]  # fmt: skip
    producer = subprocess.Popen(
        [sys.executable, str(HELPERS / "etl_fill_topic.py"), bootstrap, topic, "--rate", "400",
         "--command-config", str(props)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    outputs = []
    try:
        time.sleep(2)
        job = Job([*argv, "--max-offsets-per-load", "2000"])
        assert job.wait_for("loading "), job.output
        time.sleep(1.0)
        assert job.kill9(), job.output  # killed in the middle of its load
        outputs.append(job.output)
        assert_exactly_committed(out)
        job = Job([*argv, "--max-offsets-per-load", "2000"])
        assert job.finish() == 0, job.output
        outputs.append(job.output)
    finally:
        stop_producer(producer)
    job = Job(argv)  # the last run loads everything up to the log end
    assert job.finish() == 0, job.output
    outputs.append(job.output)
    with Admin(bootstrap, **ours(pki)) as a:
        ends = a.list_offsets([(topic, p) for p in range(3)], "latest")
    committed = assert_exactly_committed(out)
    assert committed == {tuple(k): v for k, v in ends.items()} and sum(ends.values()) > 500
    assert_no_secret("\n".join(outputs), "the job's output")
    for f in out.rglob("*"):
        if f.is_file() and not f.name.endswith(".parquet"):
            assert_no_secret(f.read_bytes().decode("latin-1"), str(f))  # manifests, state


def test_no_password_in_the_broker_log(secured):
    assert_no_secret(secured.log_file.read_text(), "the broker's log")


@pytest.mark.spark
def test_etl_with_a_wrong_password_is_one_line_without_it(secured, pki, spark, tmp_path, capsys):
    from pyspark_logsource import etl

    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={jaas('admin', WRONG)}\nssl.truststore.location={pki.ca}\n"
    )
    argv = ["--bootstrap-servers", secured.bootstrap_on("SASL_SSL"), "--subscribe", "t", "--output",
            str(tmp_path / "out"), "--command-config", str(props), "--no-progress"]  # fmt: skip
    assert etl.main(argv) == 2
    err = capsys.readouterr().err
    assert "etl: SaslAuthenticationFailed" in err
    assert_no_secret(err, "the job's error")
