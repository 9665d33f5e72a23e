"""ACLs in cluster mode (issue 22): kept in ZooKeeper under Kafka's paths (``/kafka-acl/<Type>/<name>``,
``/kafka-acl-extended/prefixed/<Type>/<name>``) with change notifications (``/kafka-acl-changes``,
``/kafka-acl-extended-changes``); an ACL created or deleted through one broker applies on the other
within a second."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from support.cluster import Cluster
from support.secure import USERS, write_properties

from pyspark_logsource.broker import users
from pyspark_logsource.client import Admin
from pyspark_logsource.protocol.acl_messages import Acl, AclFilter

pytestmark = pytest.mark.cluster

CONFIG = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "inter.broker.listener.name": "PLAINTEXT",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # the inter-broker listener is PLAINTEXT here: its principal is ANONYMOUS, which brokers need as super user
    "super.users": "User:ANONYMOUS;User:admin",
}
TOPIC, GROUP, LITERAL, PREFIXED, DESCRIBE, READ, ALLOW = 2, 3, 3, 4, 8, 3, 3


def _sasl(user: str) -> dict:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
    }


def _visible(addr: str, topic: str) -> bool:
    with Admin(addr, **_sasl("alice")) as a:
        return topic in a.list_topics()


def _within_a_second(check) -> float:
    t0 = time.monotonic()
    while not check():
        assert time.monotonic() - t0 < 1.0, "the other broker did not apply the ACL change within a second"
        time.sleep(0.05)
    return time.monotonic() - t0


def test_acl_changes_reach_every_broker_within_a_second(zk_connect, tmp_path):
    cfg = write_properties(tmp_path / "server.properties", {"zookeeper.connect": zk_connect})
    for user in ("alice", "admin"):
        (tmp_path / f"{user}.pw").write_text(USERS[user] + "\n")
        args = ["set", user, "--mechanism", "SCRAM-SHA-512", "--password-file", str(tmp_path / f"{user}.pw")]
        assert users.main([*args, "--config", str(cfg)]) == 0
    topic, group = f"zk-{uuid.uuid4().hex[:8]}", f"grp-{uuid.uuid4().hex[:6]}"
    with Cluster(zk_connect, tmp_path, brokers=2, config=CONFIG) as c:
        sasl = {bid: f"127.0.0.1:{b.listener_ports['SASL_PLAINTEXT']}" for bid, b in c.brokers.items()}
        with Admin(sasl[1], **_sasl("admin")) as admin:
            admin.create_topic(topic, 1, replication_factor=2)
            assert not _visible(sasl[2], topic)  # no ACL: alice may not describe it
            admin.create_acls(
                [
                    Acl(TOPIC, topic, LITERAL, "User:alice", "*", DESCRIBE, ALLOW),
                    Acl(GROUP, group, PREFIXED, "User:alice", "*", READ, ALLOW),
                ]
            )
        took = _within_a_second(lambda: _visible(sasl[2], topic))
        print(f"broker 2 applied the ACL created through broker 1 after {took * 1000:.0f} ms")
        # Kafka's layout and JSON in ZooKeeper, and its change notifications
        doc = json.loads(c.zk.get(f"/kafka-acl/Topic/{topic}")[0])
        assert doc == {
            "version": 1,
            "acls": [
                {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe", "host": "*"}
            ],
        }
        assert (
            json.loads(c.zk.get(f"/kafka-acl-extended/prefixed/Group/{group}")[0])["acls"][0]["operation"]
            == "Read"
        )
        notes = [c.zk.get(f"/kafka-acl-changes/{n}")[0] for n in c.zk.get_children("/kafka-acl-changes")]
        assert f"Topic:{topic}".encode() in notes
        ext = [
            json.loads(c.zk.get(f"/kafka-acl-extended-changes/{n}")[0])
            for n in c.zk.get_children("/kafka-acl-extended-changes")
        ]
        assert {"version": 1, "resourceType": "Group", "name": group, "patternType": "Prefixed"} in ext
        # deleted through broker 2: broker 1 hides the topic again within a second
        with Admin(sasl[2], **_sasl("admin")) as admin:
            removed = admin.delete_acls([AclFilter(TOPIC, topic, LITERAL, None, None, 1, 1)])
            assert [a.principal for a in removed[0]] == ["User:alice"]
            assert [a.resource_name for a in admin.describe_acls(AclFilter(GROUP, None, PREFIXED))] == [group]
        _within_a_second(lambda: not _visible(sasl[1], topic))
        assert not c.zk.exists(f"/kafka-acl/Topic/{topic}")


def test_old_acl_change_notifications_are_purged(zk_connect):
    """As Kafka's ZkNodeChangeNotificationListener: a broker that processes a change deletes the change
    notifications older than the expiration (15 minutes by default; 1 s here), on both change roots, and
    keeps the new ones; the other broker still applies every change."""
    from pyspark_logsource.broker.cluster.zk import ZkClient
    from pyspark_logsource.broker.security.acls.model import (
        AccessControlEntry,
        AclBinding,
        Operation,
        PatternType,
        Permission,
        ResourcePattern,
        ResourceType,
    )
    from pyspark_logsource.broker.security.acls.store import (
        CHANGE_EXPIRATION_MS,
        EXTENDED_CHANGES,
        LITERAL_CHANGES,
        ZkAclStore,
    )

    assert CHANGE_EXPIRATION_MS == 15 * 60 * 1000  # Kafka's default

    def binding(name: str, pattern=PatternType.LITERAL) -> AclBinding:
        entry = AccessControlEntry("User:alice", "*", Operation.READ, Permission.ALLOW)
        return AclBinding(ResourcePattern(ResourceType.TOPIC, name, pattern), entry)

    clients = [ZkClient(zk_connect, session_timeout_ms=10_000) for _ in range(2)]
    for c in clients:
        c.start()
    try:
        one, two = (ZkAclStore(c, change_expiration_ms=1000) for c in clients)
        one.add([binding("old-literal"), binding("old-prefix", PatternType.PREFIXED)])
        zk = clients[0].client
        old = {root: zk.get_children(root) for root in (LITERAL_CHANGES, EXTENDED_CHANGES)}
        assert all(len(v) == 1 for v in old.values()), old
        time.sleep(1.5)
        assert {root: zk.get_children(root) for root in old} == old  # nothing purges without a change
        two.add([binding("new-literal"), binding("new-prefix", PatternType.PREFIXED)])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            now = {root: zk.get_children(root) for root in old}
            if all(len(v) == 1 and v != old[root] for root, v in now.items()):
                break
            time.sleep(0.05)
        assert all(len(v) == 1 and v != old[root] for root, v in now.items()), (old, now)
        names = {b.pattern.name for b in one.bindings()}
        assert names == {b.pattern.name for b in two.bindings()} == {
            "old-literal", "old-prefix", "new-literal", "new-prefix"
        }  # fmt: skip
    finally:
        for c in clients:
            c.stop()
