"""Authorization end to end (issue 22): Kafka's EndToEndAuthorizationTest cases, ported, with
confluent-kafka against a broker with ``authorizer.class.name`` set, each case run four ways as Kafka runs
its subclasses (SaslScramSslEndToEndAuthorizationTest, SaslPlainSslEndToEndAuthorizationTest,
SslEndToEndAuthorizationTest): SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, and SSL with client
certificates, whose principal is ``User:`` + the certificate's subject (Kafka's default principal mapping).
ACLs are made with confluent-kafka's AdminClient (CreateAcls/DescribeAcls/DeleteAcls) by a super user
after the broker started, taking effect without a restart; one audit line per denied request."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.brokers import broker_process
from support.secure import (
    USERS,
    Pki,
    add_users_offline,
    broker_properties,
    ck_config,
    make_pki,
    write_properties,
)

from pyspark_logsource.broker import users

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

pytestmark = pytest.mark.kafka_clients

#: users of this module besides support.secure's alice and admin (admin is the super user)
MORE_USERS = {"bob": "bob-secret-pw-3", "carol": "carol-secret-pw-4"}
PASSWORDS = {**USERS, **MORE_USERS}
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"), users=tuple(PASSWORDS))


@pytest.fixture(scope="module")
def secured(tmp_path_factory, pki):
    d = tmp_path_factory.mktemp("acl-broker")
    props = broker_properties(
        d,
        pki,
        listeners="SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
            "connection.failed.authentication.delay.ms": "0",
            "ssl.client.auth": "requested",  # SASL_SSL clients need no certificate; SSL ones present one
        },
    )
    cfg = write_properties(d / "server.properties", props)
    add_users_offline(cfg, d)
    for user, password in MORE_USERS.items():
        pw = d / f"{user}.pw"
        pw.write_text(password + "\n")
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            args = ["set", user, "--mechanism", mech, "--password-file", str(pw), "--config", str(cfg)]
            assert users.main(args) == 0
    props.pop("log.dirs")
    with broker_process(d, config=props) as b:
        yield b


def conf(b, pki, user: str, mechanism: str = "SCRAM-SHA-512") -> dict:
    c = ck_config(b.bootstrap_on("SASL_SSL"), pki, "SASL_SSL", mechanism, "alice")
    c["sasl.username"], c["sasl.password"] = user, PASSWORDS[user]
    return c


@dataclass(frozen=True)
class Client:
    """How a matrix row's clients connect and the principal each user gets."""

    mechanism: str  # SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, or mTLS (SSL with a client certificate)
    broker: Any
    pki: Pki

    def conf(self, user: str) -> dict:
        if self.mechanism != "mTLS":
            return conf(self.broker, self.pki, user, self.mechanism)
        c = ck_config(self.broker.bootstrap_on("SSL"), self.pki, "SSL")
        c["ssl.certificate.location"] = c["ssl.key.location"] = str(self.pki.user_certs[user])
        return c

    def principal(self, user: str) -> str:
        if self.mechanism == "mTLS":
            return f"User:CN={user},OU=eng,O=example"
        return f"User:{user}"


@pytest.fixture(scope="module", params=["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "mTLS"])
def client(request, secured, pki) -> Client:
    """The authorization matrix's rows: each EndToEnd case runs once per row."""
    return Client(request.param, secured, pki)


@pytest.fixture(scope="module")
def admin(secured, pki):
    return AdminClient(conf(secured, pki, "admin"))


def grant(admin, *bindings) -> None:
    for f in admin.create_acls(list(bindings)).values():
        f.result(timeout=30)


def acl(rtype, name, user, op, perm=ALLOW, pattern=LIT) -> AclBinding:
    """An ACL for ``user`` (a user name, or a principal ``User:...``)."""
    principal = user if user.startswith("User:") else f"User:{user}"
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def new_topic(admin, prefix: str = "acl") -> str:
    t = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(t, 1, 1)])[t].result(timeout=30)
    return t


def produce(c: dict, topic: str, n: int = 3) -> list:
    """Delivery errors (None each when delivered)."""
    errors: list = []
    p = ck.Producer({**c, "message.timeout.ms": 10000})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    return errors


def consume(
    c: dict, topic: str, group: str, n: int, assign: bool = False, seconds: float = 20
) -> tuple[list, list]:
    """(values, errors) polled until ``n`` values or the first error or ``seconds``."""
    cons = ck.Consumer({**c, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    if assign:
        cons.assign([TopicPartition(topic, 0, 0)])
    else:
        cons.subscribe([topic])
    values, errors = [], []
    deadline = time.monotonic() + seconds
    while len(values) < n and not errors and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            if m.error().code() != KafkaError._PARTITION_EOF:
                errors.append(m.error())
            continue
        values.append(m.value())
    if values and not assign:
        cons.commit(asynchronous=False)
    cons.close()
    return values, errors


def produce_consume_acls(user: str, topic: str, group: str) -> list:
    return [
        acl(TOPIC, topic, user, AclOperation.WRITE),
        acl(TOPIC, topic, user, AclOperation.READ),
        acl(GROUP, group, user, AclOperation.READ),
    ]


@pytest.mark.parametrize("assign", [False, True], ids=["subscribe", "assign"])
def test_produce_consume_with_acls(client, admin, assign):
    topic, group = new_topic(admin), f"g-{uuid.uuid4().hex[:8]}"
    c = client.conf("alice")
    assert {e.code() for e in produce(c, topic, n=1)} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    # after the broker started: no restart
    grant(admin, *produce_consume_acls(client.principal("alice"), topic, group))
    assert produce(c, topic) == [None] * 3
    values, errors = consume(c, topic, group, 3, assign=assign)
    assert (values, errors) == ([b"v0", b"v1", b"v2"], [])


def test_wildcard_acls(client, admin):
    topic, group = new_topic(admin, "wild"), f"wild-{uuid.uuid4().hex[:8]}"
    bob = client.principal("bob")
    grant(
        admin,
        acl(TOPIC, "*", bob, AclOperation.WRITE),
        acl(TOPIC, "*", bob, AclOperation.READ),
        acl(GROUP, "*", bob, AclOperation.READ),
    )
    c = client.conf("bob")
    assert produce(c, topic) == [None] * 3
    assert consume(c, topic, group, 3) == ([b"v0", b"v1", b"v2"], [])


def test_prefixed_acls(client, admin):
    prefix = f"pre{uuid.uuid4().hex[:6]}"
    topic = new_topic(admin, prefix)
    alice = client.principal("alice")
    grant(
        admin,
        acl(TOPIC, prefix, alice, AclOperation.ALL, pattern=PRE),
        acl(GROUP, prefix, alice, AclOperation.READ, pattern=PRE),
    )
    c = client.conf("alice")
    assert produce(c, topic) == [None] * 3
    assert consume(c, topic, f"{prefix}-group", 3) == ([b"v0", b"v1", b"v2"], [])
    other = new_topic(admin, "elsewhere")
    assert {e.code() for e in produce(c, other)} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}


def test_no_write_acl_produce_fails_naming_the_topic(client, secured, admin):
    topic = new_topic(admin, "nowrite")
    grant(admin, acl(TOPIC, topic, client.principal("alice"), AclOperation.DESCRIBE))
    errors = produce(client.conf("alice"), topic)
    assert {e.code() for e in errors} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    log = secured.log_file.read_text()
    assert (
        f"request denied: principal={client.principal('alice')} client=127.0.0.1 api=PRODUCE "
        f"resources=TOPIC:{topic}(WRITE)" in log
    )
    assert PASSWORDS["alice"] not in log


def test_no_describe_acl_produce_fails(client, secured, admin):
    topic = new_topic(admin, "nodescribe")
    errors = produce(client.conf("alice"), topic, n=1)
    assert {e.code() for e in errors} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert f"api=METADATA resources=TOPIC:{topic}(DESCRIBE)" in secured.log_file.read_text()


def test_no_read_acl_consume_fails(client, secured, pki, admin):
    topic, group = new_topic(admin, "noread"), f"g-{uuid.uuid4().hex[:8]}"
    assert produce(conf(secured, pki, "admin"), topic) == [None] * 3
    grant(
        admin,
        acl(TOPIC, topic, client.principal("alice"), AclOperation.DESCRIBE),
        acl(GROUP, group, client.principal("alice"), AclOperation.READ),
    )
    values, errors = consume(client.conf("alice"), topic, group, 3, assign=True)
    assert values == [] and errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_no_group_acl_consume_fails(client, secured, pki, admin):
    topic, group = new_topic(admin, "nogroup"), f"g-{uuid.uuid4().hex[:8]}"
    assert produce(conf(secured, pki, "admin"), topic) == [None] * 3
    grant(admin, acl(TOPIC, topic, client.principal("alice"), AclOperation.READ))
    values, errors = consume(client.conf("alice"), topic, group, 3)
    assert values == [] and errors and errors[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert f"api=FIND_COORDINATOR resources=GROUP:{group}(DESCRIBE)" in secured.log_file.read_text()


def test_auto_create_needs_create(client, admin):
    topic = f"auto-{uuid.uuid4().hex[:8]}"
    alice = client.principal("alice")
    grant(admin, acl(TOPIC, topic, alice, AclOperation.WRITE))  # WRITE (so DESCRIBE) but no CREATE
    c = client.conf("alice")
    errors = produce(c, topic, n=1)
    assert {e.code() for e in errors} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert topic not in admin.list_topics(timeout=30).topics
    grant(admin, acl(TOPIC, topic, alice, AclOperation.CREATE))
    assert produce(c, topic, n=1) == [None]
    assert topic in admin.list_topics(timeout=30).topics


def test_metadata_lists_only_describable_topics(secured, pki, admin):
    mine, hidden = new_topic(admin, "listed"), new_topic(admin, "hidden")
    grant(admin, acl(TOPIC, mine, "carol", AclOperation.DESCRIBE))
    topics = AdminClient(conf(secured, pki, "carol")).list_topics(timeout=30).topics
    assert mine in topics and hidden not in topics
    assert hidden in admin.list_topics(timeout=30).topics


def test_super_user_bypasses_acls(secured, pki, admin):
    topic, group = new_topic(admin, "super"), f"g-{uuid.uuid4().hex[:8]}"
    grant(admin, acl(TOPIC, topic, "admin", AclOperation.ALL, DENY))  # a super user is not even denied
    c = conf(secured, pki, "admin")
    assert produce(c, topic) == [None] * 3
    assert consume(c, topic, group, 3) == ([b"v0", b"v1", b"v2"], [])


def test_deny_wins_over_allow(secured, pki, admin):
    topic, group = new_topic(admin, "deny"), f"g-{uuid.uuid4().hex[:8]}"
    grant(
        admin,
        acl(TOPIC, topic, "carol", AclOperation.ALL),
        acl(GROUP, group, "carol", AclOperation.ALL),
        acl(TOPIC, topic, "carol", AclOperation.READ, DENY),
    )
    c = conf(secured, pki, "carol")
    assert produce(c, topic) == [None] * 3  # the deny names READ only
    values, errors = consume(c, topic, group, 3, assign=True)
    assert values == [] and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_admin_client_acl_round_trip(secured, pki, admin):
    name = f"rt-{uuid.uuid4().hex[:8]}"
    bindings = [
        acl(TOPIC, name, "alice", AclOperation.READ),
        acl(TOPIC, name, "alice", AclOperation.WRITE, DENY),
        acl(GROUP, name, "bob", AclOperation.READ, pattern=PRE),
        AclBinding(
            ResourceType.TRANSACTIONAL_ID, name, LIT, "User:alice", "10.0.0.1", AclOperation.WRITE, ALLOW
        ),
    ]
    grant(admin, *bindings)
    every = AclBindingFilter(
        ResourceType.ANY, name, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    found = admin.describe_acls(every).result(timeout=30)
    assert sorted(map(str, found)) == sorted(map(str, bindings))
    topic_only = AclBindingFilter(
        TOPIC, name, ResourcePatternType.MATCH, "User:alice", None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert len(admin.describe_acls(topic_only).result(timeout=30)) == 2
    deleted = admin.delete_acls(
        [AclBindingFilter(GROUP, None, PRE, None, None, AclOperation.ANY, AclPermissionType.ANY)]
    )
    assert [str(b) for f in deleted.values() for b in f.result(timeout=30) if b.name == name] == [
        str(bindings[2])
    ]
    assert len(admin.describe_acls(every).result(timeout=30)) == 3
    # CreateAcls needs ALTER on the cluster (librdkafka reports a DescribeAcls' top-level error as no ACLs)
    alice = AdminClient(conf(secured, pki, "alice"))
    with pytest.raises(ck.KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        grant(alice, acl(TOPIC, name, "alice", AclOperation.ALL))
    assert "api=CREATE_ACLS resources=CLUSTER:kafka-cluster(ALTER)" in secured.log_file.read_text()


def test_bad_acl_creation_is_invalid_request(secured, pki, admin):
    # confluent-kafka names Kafka's CLUSTER resource type (4) BROKER; its one name is kafka-cluster
    bad = AclBinding(
        ResourceType.BROKER, "not-kafka-cluster", LIT, "User:alice", "*", AclOperation.ALTER, ALLOW
    )
    with pytest.raises(ck.KafkaException, match="kafka-cluster"):
        grant(admin, bad)


def test_cli_acls_add_list_remove(secured, pki, admin, tmp_path, capsys):
    from pyspark_logsource.cli import main as cli_main

    topic, prefix = new_topic(admin, "cli"), f"cligroup{uuid.uuid4().hex[:6]}"
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\n"
        f"sasl.password={PASSWORDS['admin']}\nssl.ca.location={pki.ca}\n"
    )
    common = ["--bootstrap-server", secured.bootstrap_on("SASL_SSL"), "--command-config", str(props)]
    add = ["acls", "add", "--allow-principal", "User:carol", "--operation", "Write", "--operation", "Read"]
    assert cli_main([*add, "--topic", topic, *common]) == 0
    assert (
        cli_main(
            [
                "acls",
                "add",
                "--allow-principal",
                "User:carol",
                "--operation",
                "read",
                "--group",
                prefix,
                "--resource-pattern-type",
                "prefixed",
                *common,
            ]
        )
        == 0
    )
    assert "added 2 ACL(s)" in capsys.readouterr().out
    c = conf(secured, pki, "carol")
    assert produce(c, topic) == [None] * 3
    assert consume(c, topic, f"{prefix}-1", 3) == ([b"v0", b"v1", b"v2"], [])
    assert cli_main(["acls", "list", "--topic", topic, *common]) == 0
    out = capsys.readouterr().out
    assert "Topic" in out and "User:carol" in out and "Write" in out and "Read" in out and "Literal" in out
    assert (
        cli_main(
            [
                "acls",
                "remove",
                "--allow-principal",
                "User:carol",
                "--operation",
                "Write",
                "--topic",
                topic,
                *common,
            ]
        )
        == 0
    )
    assert "removed 1 ACL(s)" in capsys.readouterr().out
    assert {e.code() for e in produce(c, topic, n=1)} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    # bad input: a clear error and exit status 1
    assert cli_main(["acls", "add", "--allow-principal", "carol", "--topic", topic, *common]) == 1
    assert "TYPE:NAME" in capsys.readouterr().err
    assert cli_main(["acls", "add", "--allow-principal", "User:carol", *common]) == 1
    assert "name a resource" in capsys.readouterr().err
    assert (
        cli_main(
            ["acls", "add", "--allow-principal", "User:c", "--operation", "Fly", "--topic", "t", *common]
        )
        == 1
    )
    assert "unknown Operation" in capsys.readouterr().err
    carol = ["--command-config", str(props).replace("client", "carol")]
    Path(carol[1]).write_text(
        props.read_text()
        .replace("username=admin", "username=carol")
        .replace(PASSWORDS["admin"], PASSWORDS["carol"])
    )
    assert (
        cli_main([*add, "--topic", topic, "--bootstrap-server", secured.bootstrap_on("SASL_SSL"), *carol])
        == 1
    )
    assert "not authorized" in capsys.readouterr().err
