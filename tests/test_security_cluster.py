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


def test_replication_over_a_sasl_ssl_inter_broker_listener(zk_connect, tmp_path):
    """Followers fetch from leaders on the inter-broker SASL_SSL listener as the broker principal."""
    from support.secure import make_pki

    from pyspark_logsource.client import Producer

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
