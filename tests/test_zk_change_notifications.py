"""Change notifications in ZooKeeper (ACLs, dynamic configs) are not lost when the connection drops while one is
being read: the watch has fired and listed the new notification, the read of it fails, and the listener reads
it once the session is back, as Kafka's ZkNodeChangeNotificationListener processes notifications again after
reconnecting. The connection is dropped by a real TCP proxy in front of the real ZooKeeper, right after the
watch recipe re-listed the children (support/zk_proxy.py). And the broker's watch recipe keeps watching when
the connection drops right as its listing is answered, where kazoo's ChildrenWatch went deaf."""

from __future__ import annotations

import threading
import time

import pytest
from support.zk_proxy import ZkProxy

from pyspark_logsource.broker.cluster.config_changes import (
    TOPICS,
    ConfigChangeListener,
    write_entity,
)
from pyspark_logsource.broker.cluster.zk import ZkClient
from pyspark_logsource.broker.security.acls.model import (
    AccessControlEntry,
    AclBinding,
    Operation,
    Permission,
    ResourcePattern,
    ResourceType,
)
from pyspark_logsource.broker.security.acls.store import ZkAclStore, decode_entries

pytestmark = pytest.mark.cluster

#: (the reader's session timeout, its retry object's deadline): the connection is lost and the session
#: survives, the read waiting for the reconnect; or the session expires while refused (ZooKeeper's least
#: timeout here, 400 ms), the read giving up, and the notification is read by the re-scan on reconnecting
#: (kazoo's ChildrenWatch does not call again when the children are the same as before)
SCENARIOS = [
    pytest.param(10_000, None, id="connection-lost-read-waits"),
    pytest.param(400, 0.3, id="session-expired-read-gives-up"),
]


@pytest.fixture
def proxied(zk_connect):
    """(a client straight to ZooKeeper, a factory of clients through a proxy that can cut them, the proxy)."""
    hostport, _, chroot = zk_connect.partition("/")
    host, port = hostport.rsplit(":", 1)
    proxy = ZkProxy((host, int(port)))
    clients = [ZkClient(zk_connect, session_timeout_ms=10_000)]
    clients[0].start()

    def through_proxy(session_timeout_ms: int, retry_deadline_s: float | None) -> ZkClient:
        c = ZkClient(
            proxy.connect_string("/" + chroot),
            session_timeout_ms=session_timeout_ms,
            retry_deadline_s=retry_deadline_s,
        )
        c.start()
        clients.append(c)
        return c

    try:
        yield clients[0], through_proxy, proxy
    finally:
        for c in clients:
            c.stop()
        proxy.close()


def _until(check, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def _binding(name: str) -> AclBinding:
    entry = AccessControlEntry("User:alice", "*", Operation.READ, Permission.ALLOW)
    return AclBinding(ResourcePattern(ResourceType.TOPIC, name), entry)


@pytest.mark.parametrize(("session_timeout_ms", "retry_deadline_s"), SCENARIOS)
def test_an_acl_change_whose_read_failed_is_read_on_reconnecting(
    proxied, session_timeout_ms, retry_deadline_s
):
    direct, through_proxy, proxy = proxied
    writer, reader = ZkAclStore(direct), ZkAclStore(through_proxy(session_timeout_ms, retry_deadline_s))
    writer.add([_binding("before")])
    assert _until(lambda: {b.pattern.name for b in reader.bindings()} == {"before"})
    proxy.cut_after_watch_read(refuse_s=1.5)
    writer.add([_binding("while-away")])
    assert _until(lambda: proxy.cuts == 1), "the proxy did not cut the reader's connection"
    assert _until(lambda: {b.pattern.name for b in reader.bindings()} == {"before", "while-away"}), (
        "the reader lost the ACL change whose notification it failed to read"
    )
    # and it goes on hearing of later changes (the watch is still set)
    writer.add([_binding("after")])
    assert _until(lambda: "after" in {b.pattern.name for b in reader.bindings()})


@pytest.mark.parametrize(("session_timeout_ms", "retry_deadline_s"), SCENARIOS)
def test_a_config_change_whose_read_failed_is_read_on_reconnecting(
    proxied, session_timeout_ms, retry_deadline_s
):
    direct, through_proxy, proxy = proxied
    heard: list[tuple[str, str]] = []
    lock = threading.Lock()

    def on_change(entity_type: str, name: str) -> None:
        with lock:
            heard.append((entity_type, name))

    listener = ConfigChangeListener(through_proxy(session_timeout_ms, retry_deadline_s), on_change)
    listener.start()
    try:
        write_entity(direct, TOPICS, "before", {"retention.ms": "1000"})
        assert _until(lambda: heard == [(TOPICS, "before")])
        proxy.cut_after_watch_read(refuse_s=1.5)
        write_entity(direct, TOPICS, "while-away", {"retention.ms": "2000"})
        assert _until(lambda: proxy.cuts == 1), "the proxy did not cut the listener's connection"
        assert _until(lambda: heard == [(TOPICS, "before"), (TOPICS, "while-away")]), heard
        write_entity(direct, TOPICS, "after", {"retention.ms": "3000"})
        assert _until(lambda: heard[-1:] == [(TOPICS, "after")]), heard
        assert heard == [(TOPICS, "before"), (TOPICS, "while-away"), (TOPICS, "after")]  # each once, in order
    finally:
        listener.stop()


def test_a_children_watch_keeps_watching_when_the_connection_drops_as_its_listing_is_answered(proxied):
    """kazoo's ChildrenWatch notes its watch as set after the listing returns; a connection dropped in between
    (SUSPENDED handled first) left it believing in a watch ZooKeeper had dropped with the connection, and
    no later change was reported (seen in 2 of 3 runs of this sequence). The broker's recipe
    (ZkClient.watch_children) lists again on every reconnect. Three rounds, each cut at the listing."""
    direct, through_proxy, proxy = proxied
    direct.ensure_path("/watched")
    seen: list[list[str]] = []
    watcher = through_proxy(10_000, None).watch_children("/watched", lambda c: seen.append(sorted(c)))
    assert seen == [[]]
    for i in range(3):
        proxy.cut_after_watch_read(refuse_s=0.5, at_reply=True)
        direct.create(f"/watched/cut-{i}")
        assert _until(lambda i=i: proxy.cuts == i + 1), "the proxy did not cut the watcher's connection"
        assert _until(lambda i=i: seen and f"cut-{i}" in seen[-1]), seen
        # after the reconnect: a new child is still reported
        direct.create(f"/watched/after-{i}")
        assert _until(lambda i=i: seen and f"after-{i}" in seen[-1]), (
            f"round {i}: the watch went deaf after the connection dropped at its listing: {seen[-3:]}"
        )
    watcher.stop()


def test_concurrent_acl_changes_to_one_resource_all_apply_each_with_one_notification(zk_connect):
    """Two brokers change the same resource's ACLs at once: each change is one multi-op conditioned on the
    version it read (the resource node and its notification together), so a conflict retries and nothing is
    lost or announced twice."""
    from pyspark_logsource.broker.security.acls.store import LITERAL_CHANGES, _node

    clients = [ZkClient(zk_connect, session_timeout_ms=10_000) for _ in range(2)]
    for c in clients:
        c.start()
    try:
        stores = [ZkAclStore(c) for c in clients]
        before = len(clients[0].children(LITERAL_CHANGES))

        def add(store: ZkAclStore, who: str) -> None:
            for i in range(15):
                entry = AccessControlEntry(f"User:{who}-{i}", "*", Operation.READ, Permission.ALLOW)
                store.add([AclBinding(ResourcePattern(ResourceType.TOPIC, "shared"), entry)])

        threads = [threading.Thread(target=add, args=(s, w)) for s, w in zip(stores, ("a", "b"), strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        want = {f"User:{w}-{i}" for w in "ab" for i in range(15)}
        data = clients[0].get(_node(ResourcePattern(ResourceType.TOPIC, "shared")))[0]
        assert {e.principal for e in decode_entries(data)} == want
        assert len(clients[0].children(LITERAL_CHANGES)) - before == 30  # one notification per change
        for s in stores:
            assert _until(lambda s=s: {b.entry.principal for b in s.bindings()} == want)
    finally:
        for c in clients:
            c.stop()


def test_a_children_watch_on_a_path_not_there_yet_reports_it_once_created_and_again_after_its_deletion(
    zk_connect,
):
    """kazoo's ChildrenWatch gave up for good on a missing path; the house recipe reports it as having no
    children and watches for its creation, and after the path is deleted, for its creation again."""
    direct = ZkClient(zk_connect, session_timeout_ms=10_000)
    direct.start()
    try:
        seen: list[list[str]] = []
        watcher = direct.watch_children("/later", lambda c: seen.append(sorted(c)))
        assert seen == [[]]  # not there: no children
        direct.create("/later/a", makepath=True)
        assert _until(lambda: seen[-1:] == [["a"]]), seen
        direct.delete("/later/a")
        direct.delete("/later")
        assert _until(lambda: seen[-1:] == [[]]), seen
        direct.create("/later/b", makepath=True)
        assert _until(lambda: seen[-1:] == [["b"]]), f"not reported after its re-creation: {seen}"
        watcher.stop()
    finally:
        direct.stop()


def test_a_stopped_children_watch_is_not_called_on_reconnects(proxied):
    """A stopped watch leaves no listener behind on its client (one was kept per watch before), and neither a
    change nor a reconnect calls it."""
    direct, through_proxy, proxy = proxied
    direct.ensure_path("/stopped")
    client = through_proxy(10_000, None)
    before = len(client._listeners)
    seen: list[list[str]] = []
    watcher = client.watch_children("/stopped", lambda c: seen.append(sorted(c)))
    assert seen == [[]] and len(client._listeners) == before + 1
    watcher.stop()
    assert len(client._listeners) == before
    states: list[str] = []
    client.add_listener(lambda state: states.append(str(state)))
    direct.create("/stopped/a")
    proxy.drop_connections()
    assert _until(lambda: "SUSPENDED" in states and states[-1] == "CONNECTED"), states
    direct.create("/stopped/b")
    time.sleep(0.5)  # a listing started by the reconnect, or a watch left set, would have called back by now
    assert seen == [[]]
