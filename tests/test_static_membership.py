"""Static group membership (KIP-345, ``group.instance.id``): the coordinator's rules without sockets,
the wire (FENCED_INSTANCE_ID, LeaveGroup by instance id, DescribeGroups), and confluent-kafka consumers
restarting with the same instance id against a broker process."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from support.brokers import WireClient, broker_process

from pyspark_logsource.broker.groups.coordinator import GroupCoordinator, GroupSettings, GroupState
from pyspark_logsource.broker.groups.membership import decode_record
from pyspark_logsource.errors import FencedInstanceId, IllegalGeneration, NotCoordinator, UnknownMemberId
from pyspark_logsource.protocol import coordinator_messages as cm
from pyspark_logsource.protocol import group_messages as g
from pyspark_logsource.protocol.primitives import ProtocolError

# ------------------------------------------------------------------ coordinator (no sockets)


def _join(
    member: str = "",
    instance: str | None = None,
    version: int = 5,
    session: int = 1000,
    topics: tuple[str, ...] = ("t",),
    protocol: str = "range",
) -> g.JoinGroupRequest:
    sub = g.encode_subscription(g.Subscription(list(topics)))
    return g.JoinGroupRequest(
        "g",
        session,
        1000,
        member,
        "consumer",
        [g.JoinGroupProtocol(protocol, sub)],
        instance,
        api_version=version,
    )


async def _stable_pair(c: GroupCoordinator) -> tuple[g.JoinGroupResponse, g.JoinGroupResponse]:
    """Static members a (instance "ia") and b (instance "ib") in a Stable generation 1; a leads."""
    # no MEMBER_ID_REQUIRED round for static members: their first join is parked like a known member's
    ra, rb = await asyncio.gather(c.join(_join(instance="ia"), 5), c.join(_join(instance="ib"), 5))
    assert ra.error_code == rb.error_code == 0 and ra.member_id.startswith("ia-") and ra.generation_id == 1
    leader, follower = (ra, rb) if ra.leader == ra.member_id else (rb, ra)
    assert {m.group_instance_id for m in leader.members} == {"ia", "ib"}
    plan = {
        ra.member_id: g.encode_assignment(g.Assignment([("t", 0)])),
        rb.member_id: g.encode_assignment(g.Assignment([("t", 1)])),
    }
    await asyncio.gather(
        c.sync(g.SyncGroupRequest("g", 1, leader.member_id, plan, leader_instance(leader, ra))),
        c.sync(g.SyncGroupRequest("g", 1, follower.member_id, {}, leader_instance(follower, ra))),
    )
    assert c.state_of("g") == GroupState.STABLE
    return ra, rb


def leader_instance(r: g.JoinGroupResponse, ra: g.JoinGroupResponse) -> str:
    return "ia" if r.member_id == ra.member_id else "ib"


def test_static_rejoin_in_stable_group_gets_old_assignment_without_rebalance():
    records: dict[str, bytes | None] = {}

    def persist(gid: str, value: bytes | None) -> None:
        records[gid] = value

    async def run() -> None:
        c = GroupCoordinator(
            GroupSettings(initial_rebalance_delay_ms=50, min_session_timeout_ms=100), persist
        )
        ra, rb = await _stable_pair(c)
        old_b = rb.member_id
        # b restarts: a new member id, the same generation, no rebalance, b's assignment back
        nb = await c.join(_join(instance="ib"), 5)
        assert nb.error_code == 0 and nb.member_id != old_b and nb.generation_id == 1
        assert c.state_of("g") == GroupState.STABLE
        s = await c.sync(g.SyncGroupRequest("g", 1, nb.member_id, {}, "ib"))
        assert g.decode_assignment(s.assignment).partitions == [("t", 1)]
        assert c.heartbeat(g.HeartbeatRequest("g", 1, ra.member_id, "ia")).error_code == 0  # a sees nothing
        # the old member id is fenced wherever it shows up with the instance id
        with pytest.raises(FencedInstanceId):
            c.heartbeat(g.HeartbeatRequest("g", 1, old_b, "ib"))
        with pytest.raises(FencedInstanceId):
            await c.sync(g.SyncGroupRequest("g", 1, old_b, {}, "ib"))
        with pytest.raises(FencedInstanceId):
            c.validate_commit("g", 1, old_b, "ib")
        with pytest.raises(FencedInstanceId):
            await c.join(_join(old_b, "ib"), 5)
        with pytest.raises(UnknownMemberId):  # without the instance id it is just an unknown member
            c.heartbeat(g.HeartbeatRequest("g", 1, old_b))
        with pytest.raises(UnknownMemberId):  # an instance id the group does not know
            c.heartbeat(g.HeartbeatRequest("g", 1, ra.member_id, "nobody"))
        c.validate_commit("g", 1, nb.member_id, "ib")
        # the stored record has the new member id and the instance ids, and restores the mapping
        grp = decode_record("g", records["g"])
        assert grp.static == {"ia": ra.member_id, "ib": nb.member_id}
        d = c.describe("g")
        assert d is not None and {m.group_instance_id: m.member_id for m in d.members} == grp.static
        c.close()

    asyncio.run(run())


def test_static_leader_rejoin_answers_per_version():
    """Before JoinGroup v9 the restarted leader is told the old leader id (so it does not assign);
    v9+ tells it it leads but must skip the assignment (KIP-814)."""

    async def run() -> None:
        c = GroupCoordinator(GroupSettings(initial_rebalance_delay_ms=50, min_session_timeout_ms=100))
        ra, rb = await _stable_pair(c)
        leader = ra if ra.leader == ra.member_id else rb
        inst = leader_instance(leader, ra)
        r5 = await c.join(_join(instance=inst), 5)
        assert r5.leader == leader.member_id != r5.member_id and r5.members == [] and not r5.skip_assignment
        r9 = await c.join(_join(instance=inst, version=9), 9)
        assert r9.leader == r9.member_id and r9.skip_assignment and len(r9.members) == 2
        assert r9.generation_id == 1 and c.state_of("g") == GroupState.STABLE
        # r5's member id was fenced by r9's
        with pytest.raises(FencedInstanceId):
            c.heartbeat(g.HeartbeatRequest("g", 1, r5.member_id, inst))
        c.close()

    asyncio.run(run())


def test_static_rejoin_rebalances_only_if_the_selected_protocol_changes():
    """Kafka's rule: a rejoin in a Stable group that leaves the selected protocol as it is keeps the
    generation (even with a new subscription: the leader notices topic changes itself); one that
    changes it starts a rebalance."""

    async def run() -> None:
        c = GroupCoordinator(GroupSettings(initial_rebalance_delay_ms=50, min_session_timeout_ms=100))
        first = await c.join(_join(instance="solo"), 5)
        await c.sync(g.SyncGroupRequest("g", 1, first.member_id, {first.member_id: b""}, "solo"))
        same = await c.join(_join(instance="solo", topics=("t", "u")), 5)
        assert same.generation_id == 1 and c.state_of("g") == GroupState.STABLE
        sub = g.encode_subscription(g.Subscription(["t"]))
        req = g.JoinGroupRequest(
            "g",
            1000,
            1000,
            "",
            "consumer",
            [g.JoinGroupProtocol("roundrobin", sub), g.JoinGroupProtocol("range", sub)],
            "solo",
            api_version=5,
        )
        changed = await c.join(req, 5)
        assert changed.generation_id == 2 and changed.protocol_name == "roundrobin"
        assert changed.leader == changed.member_id and [m.group_instance_id for m in changed.members] == [
            "solo"
        ]
        with pytest.raises(FencedInstanceId):
            c.heartbeat(g.HeartbeatRequest("g", 1, same.member_id, "solo"))
        c.close()

    asyncio.run(run())


def test_absent_static_member_stays_through_rebalance_until_its_session_expires():
    async def run() -> None:
        loop = asyncio.get_running_loop()
        c = GroupCoordinator(GroupSettings(initial_rebalance_delay_ms=50, min_session_timeout_ms=100))
        ra, rb = await _stable_pair(c)
        # a dynamic newcomer starts a rebalance; a rejoins, b (static) is told to but never does
        newcomer = asyncio.ensure_future(
            c.join(g.JoinGroupRequest("g", 5000, 1000, "", "consumer", _join().protocols, api_version=3), 3)
        )
        await asyncio.sleep(0.05)
        assert c.state_of("g") == GroupState.PREPARING_REBALANCE
        assert c.heartbeat(g.HeartbeatRequest("g", 1, ra.member_id, "ia")).error_code == 27
        assert c.heartbeat(g.HeartbeatRequest("g", 1, rb.member_id, "ib")).error_code == 27
        t0 = loop.time()
        new, ja = await asyncio.gather(newcomer, c.join(_join(ra.member_id, "ia"), 5))
        # the join waited for b until the rebalance timeout (1 s), then completed with b kept (Kafka
        # removes only dynamic members that did not rejoin), and a joined member leads
        assert loop.time() - t0 >= 0.9 and new.generation_id == ja.generation_id == 2
        leader = new if new.leader == new.member_id else ja
        assert leader.leader in (new.member_id, ja.member_id)
        assert {m.group_instance_id for m in leader.members} == {"ia", "ib", None}
        with pytest.raises(IllegalGeneration):
            c.heartbeat(g.HeartbeatRequest("g", 1, rb.member_id, "ib"))
        # b's session (1 s, re-armed when the generation completed) expires: removed, a rebalance starts
        await asyncio.sleep(1.5)
        d = c.describe("g")
        assert d is not None and "ib" not in {m.group_instance_id for m in d.members}
        assert c.state_of("g") == GroupState.PREPARING_REBALANCE
        c.close()

    asyncio.run(run())


def test_static_rejoin_waits_for_the_replicated_record_and_is_undone_if_it_fails():
    """Cluster mode: the rejoin is answered once the record with the new member id is in the ISR; if
    that write fails the replacement is undone (the old member id works again), as Kafka's storeGroup."""
    writes: list[asyncio.Future] = []

    def persist(gid: str, value: bytes | None) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        writes.append(fut)
        return fut

    async def run() -> None:
        c = GroupCoordinator(
            GroupSettings(initial_rebalance_delay_ms=50, min_session_timeout_ms=100), persist
        )
        ra, rb = await asyncio.gather(c.join(_join(instance="ia"), 5), c.join(_join(instance="ib"), 5))
        leader, follower = (ra, rb) if ra.leader == ra.member_id else (rb, ra)
        fi = "ia" if follower is ra else "ib"
        syncs = asyncio.gather(
            c.sync(g.SyncGroupRequest("g", 1, leader.member_id, {}, None)),
            c.sync(g.SyncGroupRequest("g", 1, follower.member_id, {}, fi)),
        )
        await asyncio.sleep(0.01)
        writes[-1].set_result(None)
        await syncs
        assert c.state_of("g") == GroupState.STABLE
        ok = asyncio.ensure_future(c.join(_join(instance=fi), 5))
        await asyncio.sleep(0.05)
        assert not ok.done()  # not before the ISR has the new member id
        writes[-1].set_result(None)
        new = await ok
        assert new.error_code == 0 and new.generation_id == 1
        failed = asyncio.ensure_future(c.join(_join(instance=fi), 5))
        await asyncio.sleep(0.05)
        writes[-1].set_exception(NotCoordinator("lost leadership of the offsets partition"))
        r = await failed
        assert r.error_code == NotCoordinator.code and r.member_id == ""
        assert c.heartbeat(g.HeartbeatRequest("g", 1, new.member_id, fi)).error_code == 0  # undone
        assert c.state_of("g") == GroupState.STABLE
        c.close()

    asyncio.run(run())


def test_static_rejoin_while_completing_rebalance_starts_another():
    """Kafka: the leader may be assigning the old member id, so a static rejoin during
    CompletingRebalance rebalances; the old id's parked sync is fenced."""

    async def run() -> None:
        c = GroupCoordinator(GroupSettings(initial_rebalance_delay_ms=50, min_session_timeout_ms=100))
        ra, rb = await asyncio.gather(c.join(_join(instance="ia"), 5), c.join(_join(instance="ib"), 5))
        follower, fi = (rb, "ib") if ra.leader == ra.member_id else (ra, "ia")
        parked = asyncio.ensure_future(c.sync(g.SyncGroupRequest("g", 1, follower.member_id, {}, fi)))
        await asyncio.sleep(0.01)
        assert c.state_of("g") == GroupState.COMPLETING_REBALANCE
        rejoin = asyncio.ensure_future(c.join(_join(instance=fi), 5))
        assert (await parked).error_code == FencedInstanceId.code
        assert c.state_of("g") == GroupState.PREPARING_REBALANCE
        leader = ra if follower is rb else rb
        other = await c.join(_join(leader.member_id, "ib" if fi == "ia" else "ia"), 5)
        new = await rejoin
        assert new.generation_id == other.generation_id == 2 and new.member_id != follower.member_id
        c.close()

    asyncio.run(run())


def test_static_member_rejoins_a_restarted_coordinator_without_rebalance():
    """The membership record carries the instance ids: after a coordinator restart the returning
    static member (a new process, no member id) gets its assignment back in the restored generation."""
    records: dict[str, bytes] = {}

    async def first() -> tuple[str, str]:
        c = GroupCoordinator(
            GroupSettings(initial_rebalance_delay_ms=50, min_session_timeout_ms=100),
            lambda gid, v: records.__setitem__(gid, v),
        )
        ra, rb = await _stable_pair(c)
        c.close()
        return ra.member_id, rb.member_id

    a_id, b_id = asyncio.run(first())

    async def second() -> None:
        c = GroupCoordinator(
            GroupSettings(initial_rebalance_delay_ms=50, min_session_timeout_ms=100), restored=records
        )
        nb = await c.join(_join(instance="ib"), 5)
        assert nb.generation_id == 1 and nb.member_id != b_id and c.state_of("g") == GroupState.STABLE
        s = await c.sync(g.SyncGroupRequest("g", 1, nb.member_id, {}, "ib"))
        assert g.decode_assignment(s.assignment).partitions == [("t", 1)]
        assert c.heartbeat(g.HeartbeatRequest("g", 1, a_id, "ia")).error_code == 0
        with pytest.raises(FencedInstanceId):
            c.heartbeat(g.HeartbeatRequest("g", 1, b_id, "ib"))
        c.close()

    asyncio.run(second())


def test_leave_request_with_mismatched_instance_ids_is_refused():
    req = g.LeaveGroupRequest("g", ["a", "b"], None, ["x"])
    with pytest.raises(ProtocolError, match="2 members but 1 instance ids"):
        req.identities()

    async def run() -> None:
        c = GroupCoordinator()
        with pytest.raises(ProtocolError):
            c.leave(req)

    asyncio.run(run())


# ------------------------------------------------------------------ the wire (our codecs, a broker process)


def _at(w: WireClient, req: Any, version: int) -> Any:
    """``req`` sent at ``version`` (not the negotiated newest)."""
    _, data = w.conn.request_bytes(req, version)
    w.sock.sendall(data)
    return w.receive()


def test_fenced_instance_id_and_leave_by_instance_id_on_the_wire():
    with broker_process() as b, WireClient(b.bootstrap) as w:
        assert w.create_topic("t", 2) == 0
        sub = g.encode_subscription(g.Subscription(["t"]))

        def join(member: str = "", instance: str | None = "x", version: int = 5) -> g.JoinGroupResponse:
            return _at(
                w,
                g.JoinGroupRequest(
                    "sg", 6000, 6000, member, "consumer", [g.JoinGroupProtocol("range", sub)], instance
                ),
                version,
            )

        first = join()
        assert first.error_code == 0 and first.generation_id == 1 and first.leader == first.member_id
        plan = {first.member_id: g.encode_assignment(g.Assignment([("t", 0), ("t", 1)]))}
        assert _at(w, g.SyncGroupRequest("sg", 1, first.member_id, plan, "x"), 3).error_code == 0
        again = join()  # the same instance restarted: a new member id, generation 1, its assignment back
        assert again.error_code == 0 and again.member_id != first.member_id and again.generation_id == 1
        s = _at(w, g.SyncGroupRequest("sg", 1, again.member_id, {}, "x"), 3)
        assert s.error_code == 0 and g.decode_assignment(s.assignment).partitions == [("t", 0), ("t", 1)]
        old = first.member_id
        assert _at(w, g.HeartbeatRequest("sg", 1, old, "x"), 3).error_code == 82  # FENCED_INSTANCE_ID
        assert _at(w, g.SyncGroupRequest("sg", 1, old, {}, "x"), 3).error_code == 82
        assert join(old).error_code == 82
        commit = cm.OffsetCommitRequest("sg", [cm.OffsetCommitPartition("t", 0, 5)], 1, old, "x")
        assert [p.error_code for p in _at(w, commit, 7).partitions] == [82]
        commit.member_id = again.member_id
        assert [p.error_code for p in _at(w, commit, 7).partitions] == [0]
        left = _at(w, g.LeaveGroupRequest("sg", [old], None, ["x"]), 3)
        assert left.error_code == 0 and [(m.member_id, m.error_code) for m in left.members] == [(old, 82)]
        # DescribeGroups v4+ shows the instance id; v3 has no such field
        d = _at(w, g.DescribeGroupsRequest(["sg"]), 4).groups[0]
        assert [(m.member_id, m.group_instance_id) for m in d.members] == [(again.member_id, "x")]
        assert _at(w, g.DescribeGroupsRequest(["sg"]), 3).groups[0].members[0].group_instance_id is None
        # LeaveGroup v3+: a batch by instance id alone, UNKNOWN_MEMBER_ID for the unknown one
        left = _at(w, g.LeaveGroupRequest("sg", ["", ""], None, ["x", "nope"]), 4)
        assert left.error_code == 0
        assert [(m.group_instance_id, m.error_code) for m in left.members] == [("x", 0), ("nope", 25)]
        assert _at(w, g.DescribeGroupsRequest(["sg"]), 4).groups[0].state == "Empty"
        # before v3 the one member's error is the top-level error
        assert _at(w, g.LeaveGroupRequest("sg", ["ghost"]), 1).error_code == 25
        with pytest.raises(ProtocolError, match="no instance id"):  # v0-2 cannot carry an instance id
            w.conn.request_bytes(g.LeaveGroupRequest("sg", ["m"], None, ["x"]), 2)


# ------------------------------------------------------------------ confluent-kafka (librdkafka) consumers

SESSION_MS = 6000


class _Static:
    """A confluent-kafka consumer with a ``group.instance.id``, recording its rebalance callbacks."""

    def __init__(self, bootstrap: str, instance: str) -> None:
        from confluent_kafka import Consumer

        self.events: list[tuple[str, float, list[int]]] = []
        self.c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "static",
                "group.instance.id": instance,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 300,
                "partition.assignment.strategy": "range",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.c.subscribe(["st"], on_assign=self._on("assign"), on_revoke=self._on("revoke"))

    def _on(self, what: str) -> Any:
        def cb(consumer: Any, parts: list) -> None:
            self.events.append((what, time.monotonic(), sorted(p.partition for p in parts)))

        return cb

    def assigned(self) -> list[int] | None:
        """The partitions of the last assign callback, or None before one (or after a revoke)."""
        last = self.events[-1] if self.events else None
        return last[2] if last is not None and last[0] == "assign" else None


def _poll_until(consumers: list[_Static], cond: Any, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        for s in consumers:
            s.c.poll(0.05)
        if cond():
            return time.monotonic() - t0
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_confluent_static_member_restarts_without_rebalance_and_expires_when_gone():
    with broker_process() as b:
        with WireClient(b.bootstrap) as w:
            assert w.create_topic("st", 4) == 0
        one, two = _Static(b.bootstrap, "one"), _Static(b.bootstrap, "two")
        both = lambda: one.assigned() is not None and two.assigned() is not None  # noqa: E731
        _poll_until(
            [one, two],
            lambda: both() and sorted(one.assigned() + two.assigned()) == [0, 1, 2, 3],
            30,
            "both static members assigned",
        )
        before = one.assigned()
        seen_by_two = len(two.events)
        # librdkafka sends no LeaveGroup for a static member: the group keeps "one" through the restart
        one.c.close()
        again = _Static(b.bootstrap, "one")
        took = _poll_until(
            [again, two], lambda: again.assigned() is not None, 15, "the restarted member's assignment"
        )
        assert again.assigned() == before
        assert took < SESSION_MS / 1000 / 2, (
            f"the restarted static member waited {took:.1f}s for its partitions"
        )
        for _ in range(20):  # a second for a late rebalance to show up at the other member
            two.c.poll(0.05)
            again.c.poll(0.0)
        assert two.events[seen_by_two:] == [], "the other member saw a rebalance"
        with WireClient(b.bootstrap) as w:
            d = _at(w, g.DescribeGroupsRequest(["static"]), 5).groups[0]
        assert d.state == "Stable" and sorted(m.group_instance_id for m in d.members) == ["one", "two"]
        print(
            f"static member restart: partitions {before} back {took:.2f}s after the new consumer started "
            f"(session {SESSION_MS} ms)"
        )
        # now it goes for good: after its session timeout its partitions move to "two"
        again.c.close()
        t1 = time.monotonic()
        moved = _poll_until(
            [two],
            lambda: two.assigned() == [0, 1, 2, 3],
            SESSION_MS / 1000 + 15,
            "the absent static member's partitions moving",
        )
        assert moved >= SESSION_MS / 1000 - 1.5, (
            f"partitions moved after {moved:.1f}s, before the session ended"
        )
        assert any(e[0] == "revoke" and e[1] > t1 for e in two.events)
        print(f"absent static member: its partitions moved after {moved:.2f}s")
        two.c.close()
