"""The Spark source and ``logsource etl`` against Apache Kafka over SASL_SSL with SCRAM-SHA-512 (issue 24,
after issue 22): the session's Kafka (``real_kafka``, tests/conftest.py) has a SASL_SSL listener beside
PLAINTEXT, its users made by ``kafka-storage format --add-scram``. The options are those of Spark's Kafka
connector, unchanged; the helpers are test_security_spark's."""

from __future__ import annotations

import uuid

import pytest
from test_security_spark import WRONG, assert_no_secret, jaas

from pyspark_logsource.client import Admin, Producer
from pyspark_logsource.client.kafka_security import client_options

pytestmark = [pytest.mark.real_kafka, pytest.mark.spark]


def kafka_spark_options(k) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": k.sasl_ssl_bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas("admin"),
        "kafka.ssl.truststore.location": str(k.ca),
        "kafka.ssl.truststore.type": "PEM",
    }


def kafka_topic(k, n: int, partitions: int = 2) -> str:
    opts = client_options({key[len("kafka.") :]: v for key, v in kafka_spark_options(k).items()})
    topic = f"sk-{uuid.uuid4().hex[:8]}"
    with Admin(k.sasl_ssl_bootstrap, **opts) as a:
        a.create_topic(topic, partitions)
    with Producer(k.sasl_ssl_bootstrap, **opts) as p:
        for i in range(n):
            p.send(topic, f"v{i}".encode())
        p.flush()
    return topic


def test_spark_read_from_apache_kafka_over_sasl_ssl(real_kafka, spark):
    """The options of Spark's Kafka connector, unchanged, read the same rows with format("logsource") and,
    when it is on the session, with Spark's own connector."""
    from pyspark_logsource.datasource import register

    register(spark)
    topic = kafka_topic(real_kafka, 40)
    want = sorted(f"v{i}".encode() for i in range(40))
    formats = ["logsource"]
    if "spark-sql-kafka" in spark.sparkContext.getConf().get("spark.jars", ""):
        formats.append("kafka")
    for fmt in formats:
        df = (
            spark.read.format(fmt)
            .options(**kafka_spark_options(real_kafka))
            .option("subscribe", topic)
            .load()
        )
        assert sorted(r.value for r in df.select("value").collect()) == want, fmt
    wrong = {**kafka_spark_options(real_kafka), "kafka.sasl.jaas.config": jaas("admin", WRONG)}
    with pytest.raises(Exception) as e:
        spark.read.format("logsource").options(**wrong).option("subscribe", topic).load().count()
    assert "SaslAuthenticationFailed" in str(e.value)
    assert_no_secret(str(e.value), "the error")


def test_etl_from_apache_kafka_over_sasl_ssl_loads_each_offset_once(real_kafka, spark, tmp_path):
    from test_etl_failures import assert_exactly_committed

    from pyspark_logsource import etl

    topic = kafka_topic(real_kafka, 30)
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={jaas('admin')}\nssl.truststore.location={real_kafka.ca}\n"
    )
    out = tmp_path / "out"
    argv = ["--bootstrap-servers", real_kafka.sasl_ssl_bootstrap, "--subscribe", topic, "--output", str(out),
            "--command-config", str(props)]  # fmt: skip
    said: list[str] = []
    assert etl.run_load(spark, etl.parse_args(argv), log=said.append).rows == 30
    opts = client_options({key[len("kafka.") :]: v for key, v in kafka_spark_options(real_kafka).items()})
    with Producer(real_kafka.sasl_ssl_bootstrap, **opts) as p:
        for i in range(30, 50):
            p.send(topic, f"v{i}".encode())
        p.flush()
    assert etl.run_load(spark, etl.parse_args(argv), log=said.append).rows == 20
    assert sum(assert_exactly_committed(out).values()) == 50
    assert_no_secret("\n".join(said), "the job's messages")
    for f in out.rglob("*"):
        if f.is_file() and not f.name.endswith(".parquet"):
            assert_no_secret(f.read_bytes().decode("latin-1"), str(f))
