"""Quotas key on the authenticated user: a SASL user's quota is shared by all its client ids, another user
is not held by it, and a PLAINTEXT connection is the user ``ANONYMOUS`` (as in Kafka)."""

from __future__ import annotations

import time

import pytest
from support.brokers import unique_topic
from support.quota_clients import Producing, rate
from support.secure import add_users_offline, broker_properties, ck_config, make_pki, write_properties

from pyspark_logsource.broker.embedded import EmbeddedBroker
from pyspark_logsource.broker.quotas.model import PRODUCER_BYTE_RATE, QuotaEntity
from pyspark_logsource.client.admin import Admin

MB = 1_000_000


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secure(tmp_path_factory, pki):
    """A broker in this process (its quota table in reach) with PLAINTEXT and SASL listeners."""
    d = tmp_path_factory.mktemp("quota-secure")
    props = broker_properties(d, pki)
    add_users_offline(write_properties(d / "server.properties", props), d)
    props.pop("log.dirs")
    with EmbeddedBroker(d, mode="thread", config=props) as b:
        yield b


def test_a_user_quota_is_shared_by_its_client_ids_and_plaintext_is_anonymous(secure, pki):
    quotas = secure._broker.state.quotas
    quotas.set_entity(QuotaEntity("alice", None), {PRODUCER_BYTE_RATE: MB})
    quotas.set_entity(QuotaEntity("ANONYMOUS", None), {PRODUCER_BYTE_RATE: 0.5 * MB})
    topic = unique_topic("qu")
    Admin(secure.bootstrap_on("PLAINTEXT")).create_topic(topic, partitions=1)
    sasl = ck_config(secure.bootstrap_on("SASL_PLAINTEXT"), pki, "SASL_PLAINTEXT", "SCRAM-SHA-256")
    sasl.pop("bootstrap.servers")
    admin_sasl = ck_config(
        secure.bootstrap_on("SASL_PLAINTEXT"), pki, "SASL_PLAINTEXT", "SCRAM-SHA-256", user="admin"
    )
    admin_sasl.pop("bootstrap.servers")
    bs_sasl = secure.bootstrap_on("SASL_PLAINTEXT")
    alice_1 = Producing(bs_sasl, topic, "u1", sasl).start()
    alice_2 = Producing(bs_sasl, topic, "u2", sasl).start()
    admin = Producing(bs_sasl, topic, "u1", admin_sasl).start()
    anonymous = Producing(secure.bootstrap_on("PLAINTEXT"), topic, "u1").start()
    time.sleep(9)
    for p in (alice_1, alice_2, admin, anonymous):
        p.finish()
    alice = rate(alice_1.acked + alice_2.acked, alice_1.t0, 2, 9)
    print(
        f"alice (2 client ids, 1 MB/s): {alice / MB:.3f} MB/s; ANONYMOUS (0.5 MB/s): "
        f"{rate(anonymous.acked, anonymous.t0, 2, 9) / MB:.3f} MB/s; admin: {rate(admin.acked, admin.t0, 2, 9) / MB:.1f} MB/s"
    )
    assert 0.9 * MB <= alice <= 1.1 * MB  # one quota for both of alice's client ids
    assert 0.45 * MB <= rate(anonymous.acked, anonymous.t0, 2, 9) <= 0.55 * MB
    assert rate(admin.acked, admin.t0, 2, 9) > 3 * MB and not admin.throttle_cb
    groups = {(s.user, s.client_id) for s in secure._broker.quotas.groups() if s.kind == "Produce"}
    assert {("alice", ""), ("ANONYMOUS", "")} <= groups
