"""Security in cluster mode (issue 22): SCRAM credentials in ZooKeeper (``/config/users/<user>``), made
offline before the first start and online through one broker, seen by every broker within a second;
Metadata answers each broker's address on the listener the client came in on."""

from __future__ import annotations

import json
import time

import pytest
from support.cluster import Cluster
from support.secure import USERS, write_properties

from pyspark_logsource.broker import users
from pyspark_logsource.client import Admin
from pyspark_logsource.errors import SaslAuthenticationFailed
from pyspark_logsource.protocol.messages import MetadataRequest

pytestmark = pytest.mark.cluster

LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "inter.broker.listener.name": "PLAINTEXT",
}


def _sasl(user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


def test_credentials_in_zookeeper_reach_every_broker(zk_connect, tmp_path):
    pw = tmp_path / "alice.pw"
    pw.write_text(USERS["alice"] + "\n")
    cfg = write_properties(tmp_path / "server.properties", {"zookeeper.connect": zk_connect})
    assert (
        users.main(
            ["set", "alice", "--mechanism", "SCRAM-SHA-512", "--password-file", str(pw), "--config", str(cfg)]
        )
        == 0
    )
    with Cluster(zk_connect, tmp_path, brokers=2, config=LISTENERS) as c:
        doc = json.loads(c.zk.get("/config/users/alice")[0])
        assert doc["version"] == 1 and "iterations=4096" in doc["config"]["SCRAM-SHA-512"]
        assert USERS["alice"] not in json.dumps(doc)
        sasl = {bid: f"127.0.0.1:{b.listener_ports['SASL_PLAINTEXT']}" for bid, b in c.brokers.items()}
        plain = {bid: f"127.0.0.1:{b.listener_ports['PLAINTEXT']}" for bid, b in c.brokers.items()}
        for bid in c.brokers:  # made before the first start: every broker knows alice
            with Admin(sasl[bid], **_sasl("alice", USERS["alice"])) as a:
                got = sorted(
                    (b.node_id, f"{b.host}:{b.port}")
                    for b in a._client.request(MetadataRequest(None)).brokers
                )
                assert got == sorted(sasl.items())  # the SASL listener's addresses of both brokers
            with Admin(plain[bid]) as a:
                got = sorted(
                    (b.node_id, f"{b.host}:{b.port}")
                    for b in a._client.request(MetadataRequest(None)).brokers
                )
                assert got == sorted(plain.items())
        # a user made online through broker 1 logs in on broker 2 within a second
        with Admin(sasl[1], **_sasl("alice", USERS["alice"])) as a:
            a.set_scram_credential("carol", "SCRAM-SHA-256", "carol-pw-4")
        t0 = time.monotonic()
        while True:
            try:
                with Admin(sasl[2], **_sasl("carol", "carol-pw-4", "SCRAM-SHA-256")) as a:
                    assert "carol" in a.scram_credentials()
                break
            except SaslAuthenticationFailed:
                assert time.monotonic() - t0 < 1.0, "broker 2 did not see carol's credential within a second"
                time.sleep(0.05)
        # and a deletion through broker 2 reaches broker 1
        with Admin(sasl[2], **_sasl("alice", USERS["alice"])) as a:
            a.delete_scram_credential("carol", "SCRAM-SHA-256")
        deadline = time.monotonic() + 1.0
        while True:
            try:
                with Admin(sasl[1], **_sasl("carol", "carol-pw-4", "SCRAM-SHA-256")) as a:
                    a.list_topics()
            except SaslAuthenticationFailed:
                break
            assert time.monotonic() < deadline, "broker 1 still accepts carol a second after the deletion"
            time.sleep(0.05)


def _sasl_ssl_inter_broker(zk_connect: str, tmp_path) -> dict:
    """Broker settings for replication over an inter-broker SASL_SSL listener as ``User:broker`` (its SCRAM
    credential made offline in ZooKeeper first), clients on PLAINTEXT."""
    from support.secure import make_pki

    pki = make_pki(tmp_path / "pki")
    pw = tmp_path / "broker.pw"
    pw.write_text("broker-secret-pw\n")
    cfg = write_properties(tmp_path / "server.properties", {"zookeeper.connect": zk_connect})
    assert (
        users.main(
            [
                "set",
                "broker",
                "--mechanism",
                "SCRAM-SHA-512",
                "--password-file",
                str(pw),
                "--config",
                str(cfg),
            ]
        )
        == 0
    )
    config = {
        "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="broker" password="broker-secret-pw";'
        ),
        "ssl.keystore.location": str(pki.keystore),
        "ssl.truststore.location": str(pki.ca),
    }
    return config


def test_replication_over_a_sasl_ssl_inter_broker_listener(zk_connect, tmp_path):
    """Followers fetch from leaders on the inter-broker SASL_SSL listener as the broker principal."""
    from pyspark_logsource.client import Producer

    config = _sasl_ssl_inter_broker(zk_connect, tmp_path)
    with Cluster(zk_connect, tmp_path, brokers=2, config=config) as c:
        c.create_topic("replicated", partitions=2, replication_factor=2)
        c.wait_full_isr("replicated")
        p = Producer(c.bootstrap, acks="all")
        for i in range(200):
            p.send("replicated", f"r{i}".encode(), partition=i % 2)
        p.flush()
        p.close()
        c.wait_full_isr("replicated")
        c.assert_replicas_identical("replicated")
        logs = "".join(c.broker_log(b) for b in c.brokers)
        assert "authenticated as User:broker with SCRAM-SHA-512 on listener INTERNAL" in logs
        assert "broker-secret-pw" not in logs  # the jaas config is hidden in the startup summary


@pytest.mark.timeout(300)
def test_a_leader_killed_9_under_acks_all_loses_nothing_over_sasl_ssl_replication(zk_connect, tmp_path):
    """Three brokers replicating over SASL_SSL: the leader is killed -9 while an idempotent acks=all producer
    runs; every acknowledged message is consumed where it was acknowledged, and the old leader rejoins."""
    from support.cluster import Traffic

    config = {**_sasl_ssl_inter_broker(zk_connect, tmp_path), "replica.lag.time.max.ms": "5000"}
    with Cluster(zk_connect, tmp_path, brokers=3, config=config) as c:
        c.create_topic("guarded", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
        c.wait_full_isr("guarded")
        traffic = Traffic(c.bootstrap, "guarded", partitions=1, rate=200).start()
        try:
            traffic.wait_acked(200)
            old = c.leader("guarded", 0)
            c.kill(old)
            new = c.wait_leader("guarded", 0, not_in={old}, timeout=60)
            traffic.wait_acked(300)
            traffic.stop_producing()
            hw = c.high_watermark("guarded", 0)
            traffic.wait_consumed({0: hw})
            traffic.check()  # every acknowledged message consumed at its acknowledged offset
        finally:
            traffic.close()
        assert len(traffic.acked) >= 500 and new != old
        c.start(old)
        c.wait_full_isr("guarded", timeout=90)
        c.assert_replicas_identical("guarded")
        logs = "".join(c.broker_log(b) for b in c.brokers)
        assert "authenticated as User:broker with SCRAM-SHA-512 on listener INTERNAL" in logs
        assert "broker-secret-pw" not in logs
