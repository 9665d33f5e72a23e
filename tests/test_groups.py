"""Consumer groups against real processes: a broker process, member processes (tests/support/group_member.py),
a producer running throughout, kill -9 of a member; and the coordinator and assignors without sockets."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from support.brokers import broker_process

from pyspark_logsource.broker.groups.coordinator import GroupCoordinator, GroupSettings, GroupState
from pyspark_logsource.client.admin import Admin
from pyspark_logsource.client.assignors import range_assign, roundrobin_assign
from pyspark_logsource.client.producer import Producer
from pyspark_logsource.errors import IllegalGeneration, InvalidGroupId, InvalidSessionTimeout, UnknownMemberId
from pyspark_logsource.protocol import group_messages as g

MEMBER = Path(__file__).parent / "support" / "group_member.py"
SESSION_MS = 2000

# ------------------------------------------------------------------ assignors


def test_range_is_algorithm_1():
    subs = {"b": ["t"], "a": ["t"], "c": ["t", "u"]}
    out = range_assign(subs, {"t": 7, "u": 2})
    assert out == {
        "a": [("t", 0), ("t", 1), ("t", 2)],
        "b": [("t", 3), ("t", 4)],
        "c": [("t", 5), ("t", 6), ("u", 0), ("u", 1)],
    }


def test_roundrobin_deals_in_turn_and_skips_unsubscribed():
    out = roundrobin_assign({"a": ["t", "u"], "b": ["t"]}, {"t": 3, "u": 2})
    assert sorted(out["a"] + out["b"]) == [("t", 0), ("t", 1), ("t", 2), ("u", 0), ("u", 1)]
    assert out["b"] == [("t", 1)] and ("u", 0) in out["a"]


# ------------------------------------------------------------------ coordinator state machine (no sockets)


def _join(gid: str, member: str = "", version: int = 5, session: int = 1000) -> g.JoinGroupRequest:
    sub = g.encode_subscription(g.Subscription(["t"]))
    return g.JoinGroupRequest(
        gid, session, 1000, member, "consumer", [g.JoinGroupProtocol("range", sub)], api_version=version
    )


def test_coordinator_states_and_errors():
    async def run() -> None:
        c = GroupCoordinator(GroupSettings(initial_rebalance_delay_ms=50, min_session_timeout_ms=100))
        with pytest.raises(InvalidGroupId):
            await c.join(_join(""), 5)
        with pytest.raises(InvalidSessionTimeout):
            await c.join(_join("g", session=10), 5)
        r = await c.join(_join("g"), 5)
        assert r.error_code == 79 and r.member_id  # MEMBER_ID_REQUIRED
        a, b = await asyncio.gather(c.join(_join("g", r.member_id), 5), c.join(_join("g", version=3), 3))
        assert a.generation_id == b.generation_id == 1 and c.state_of("g") == GroupState.COMPLETING_REBALANCE
        leader, follower = (a, b) if a.leader == a.member_id else (b, a)
        assert len(leader.members) == 2 and follower.members == []
        plan = {
            leader.member_id: g.encode_assignment(g.Assignment([("t", 0)])),
            follower.member_id: g.encode_assignment(g.Assignment([("t", 1)])),
        }
        s1, s2 = await asyncio.gather(
            c.sync(g.SyncGroupRequest("g", 1, leader.member_id, plan)),
            c.sync(g.SyncGroupRequest("g", 1, follower.member_id)),
        )
        assert (
            g.decode_assignment(s2.assignment).partitions == [("t", 1)]
            and c.state_of("g") == GroupState.STABLE
        )
        with pytest.raises(UnknownMemberId):
            c.heartbeat(g.HeartbeatRequest("g", 1, "nobody"))
        with pytest.raises(IllegalGeneration):
            c.heartbeat(g.HeartbeatRequest("g", 0, leader.member_id))
        with pytest.raises(IllegalGeneration):
            c.validate_commit("g", 7, leader.member_id)
        with pytest.raises(UnknownMemberId):  # a simple commit into a group with members: Kafka's answer
            c.validate_commit("g", -1, "")
        # the follower stops heartbeating: its session expires, the leader is told to rejoin
        for _ in range(8):
            await asyncio.sleep(0.15)
            hb = c.heartbeat(g.HeartbeatRequest("g", 1, leader.member_id))
            if hb.error_code:
                break
        assert (
            hb.error_code == 27 and c.state_of("g") == GroupState.PREPARING_REBALANCE
        )  # REBALANCE_IN_PROGRESS
        r = await c.join(_join("g", leader.member_id), 5)
        assert r.generation_id == 2 and [m.member_id for m in r.members] == [leader.member_id]
        with pytest.raises(UnknownMemberId):
            c.heartbeat(g.HeartbeatRequest("g", 2, follower.member_id))
        assert c.leave(g.LeaveGroupRequest("g", [leader.member_id])).error_code == 0
        await asyncio.sleep(0.05)
        assert c.state_of("g") == GroupState.EMPTY

    asyncio.run(run())


# ------------------------------------------------------------------ real processes


class _Member:
    def __init__(self, bootstrap: str, out: Path, kind: str = "ours") -> None:
        self.out, self.kind = out, kind
        self.proc = subprocess.Popen(
            [sys.executable, str(MEMBER), bootstrap, "grp", "t", str(out), str(SESSION_MS), kind],
            stderr=subprocess.DEVNULL,
        )

    def lines(self) -> list[list[str]]:
        return [ln.split() for ln in self.out.read_text().splitlines() if ln] if self.out.exists() else []

    def assignment(self) -> set[int]:
        a = [ln for ln in self.lines() if ln[0] == "A"]
        return {int(p) for p in a[-1][2].split(",") if p} if a and len(a[-1]) > 2 else set()


def _wait(cond, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return time.monotonic() - t0
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _owned_once(members: list[_Member]) -> bool:
    owned = [p for m in members for p in m.assignment()]
    return sorted(owned) == list(range(6))


@pytest.mark.slow
def test_group_of_processes_rebalances_and_survives_kill_9(tmp_path):
    _group_scenario(tmp_path, ["ours", "ours", "ours"])


@pytest.mark.slow
def test_group_with_a_confluent_kafka_member(tmp_path):
    """librdkafka (range assignor) and ours in one group: joins, shares, kill -9, every record consumed."""
    _group_scenario(tmp_path, ["confluent", "ours", "ours"])


@pytest.mark.slow
def test_group_with_a_kafka_python_member(tmp_path):
    _group_scenario(tmp_path, ["kafka-python", "ours", "confluent"])


def _group_scenario(tmp_path: Path, kinds: list[str]) -> None:
    """The issue's group test: 3 members with a producer running, a 4th (ours) joins, the member with the most
    partitions is killed with kill -9; each partition owned once throughout, every record consumed."""
    with broker_process(tmp_path / "broker") as b:
        Admin(b.bootstrap).create_topic("t", partitions=6)
        produced = Counter()
        stop = threading.Event()

        def produce() -> None:
            p = Producer(b.bootstrap, linger_ms=5)
            i = 0
            while not stop.is_set():
                p.send("t", value=str(i).encode(), partition=i % 6)
                produced[i % 6] += 1
                i += 1
                if i % 50 == 0:
                    p.flush()
                    time.sleep(0.05)
            p.flush()
            p.close()

        prod = threading.Thread(target=produce)
        prod.start()
        members = [_Member(b.bootstrap, tmp_path / f"m{i}", kind) for i, kind in enumerate(kinds)]
        try:
            _wait(
                lambda: _owned_once(members) and all(len(m.assignment()) == 2 for m in members),
                20,
                "3 members",
            )
            members.append(_Member(b.bootstrap, tmp_path / "m3"))
            _wait(lambda: _owned_once(members) and members[3].assignment(), 20, "the 4th member's share")
            assert sorted(len(m.assignment()) for m in members) == [1, 1, 2, 2]
            victim = max(members, key=lambda m: len(m.assignment()))
            lost = victim.assignment()
            os.kill(victim.proc.pid, signal.SIGKILL)
            victim.proc.wait()
            alive = [m for m in members if m is not victim]
            took = _wait(lambda: _owned_once(alive), SESSION_MS / 1000 + 10, "the dead member's partitions")
            assert lost <= {p for m in alive for p in m.assignment()}
            print(
                f"partitions of the killed {victim.kind} member owned again after {took:.2f}s "
                f"(session {SESSION_MS} ms)"
            )
            time.sleep(1.0)
            stop.set()
            prod.join()

            def consumed() -> dict[int, Counter]:
                seen: dict[int, Counter] = defaultdict(Counter)
                for m in members:
                    for ln in m.lines():
                        if ln[0] == "R":
                            seen[int(ln[1])][int(ln[2])] += 1
                return seen

            _wait(
                lambda: all(len(consumed()[p]) == produced[p] for p in range(6)), 30, "every record consumed"
            )
        finally:
            stop.set()
            for m in members:
                if m.proc.poll() is None:
                    m.proc.terminate()
                    m.proc.wait(10)
        seen = consumed()
        for p in range(6):
            assert set(seen[p]) == set(range(produced[p])), f"partition {p} lost records"
        dups = _check_redeliveries({m.out.name: m.lines() for m in members})
        print(f"{sum(produced.values())} records, {dups} duplicates (none of a committed delivery)")


def _deliveries(lines: list[list[str]]) -> list[tuple[int, int, bool, float, float]]:
    """A member file's deliveries: (partition, offset, committed, start, end of the assignment it came in).

    A delivery is committed if the member then committed past it before its next assignment. It is not
    when the commit was rejected (E: the member had lost its membership: a kill, or a session that lapsed
    while it stalled) or the member was killed before it committed."""
    out: list[list] = []
    start, open_ = 0.0, []  # deliveries of the current assignment not yet committed
    for ln in lines:
        if ln[0] == "A":
            for d in out:
                if d[4] == float("inf") and d[3] == start:
                    d[4] = float(ln[1])
            start, open_ = float(ln[1]), []
        elif ln[0] == "R":
            d = [int(ln[1]), int(ln[2]), False, start, float("inf")]
            out.append(d)
            open_.append(d)
        elif ln[0] == "C":
            p, upto = int(ln[1]), int(ln[2])
            for d in open_:
                if d[0] == p and d[1] < upto:
                    d[2] = True
            open_ = [d for d in open_ if not d[2]]
    return [tuple(d) for d in out]


def _check_redeliveries(files: dict[str, list[list[str]]]) -> int:
    """At-least-once across rebalances: a record is delivered again only if no delivery of it was committed
    before. Each record has at most one committed delivery, and no delivery in an assignment that began after
    the assignment of its committed delivery ended. Returns the number of redeliveries."""
    by_record: dict[tuple[int, int], list[tuple[str, bool, float, float]]] = defaultdict(list)
    for name, lines in files.items():
        for p, off, committed, start, end in _deliveries(lines):
            by_record[(p, off)].append((name, committed, start, end))
    dups = 0
    for (p, off), ds in by_record.items():
        if len(ds) == 1:
            continue
        dups += len(ds) - 1
        committed = [d for d in ds if d[1]]
        assert len(committed) <= 1, f"{p}@{off} committed by {len(committed)} deliveries: {ds}"
        for name, _, _, end in committed:
            later = [d for d in ds if d[2] >= end]
            assert not later, f"{p}@{off} delivered again after {name} committed it: {later}"
    return dups


def test_redelivery_check_tells_a_committed_record_from_an_uncommitted_one():
    """The check above: redelivery after a rejected commit (E) or a kill passes; of a committed record fails."""
    a0 = [
        ["A", "1.0", "0,1"],
        ["R", "0", "0"],
        ["R", "0", "1"],
        ["E", "UnknownMemberId"],
        ["A", "3.0", "0,1"],
        ["R", "0", "0"],
        ["R", "0", "1"],
        ["C", "0", "2"],
    ]
    b_after_kill = [["A", "4.0", "0"], ["R", "0", "1"], ["C", "0", "2"]]
    killed = [["A", "1.0", "0"], ["R", "0", "0"], ["C", "0", "1"], ["R", "0", "1"]]
    assert _check_redeliveries({"a": a0}) == 2
    assert _check_redeliveries({"k": killed, "b": b_after_kill}) == 1
    with pytest.raises(AssertionError, match="committed by 2 deliveries"):
        _check_redeliveries({"a": a0, "b": [["A", "5.0", "0"], ["R", "0", "0"], ["C", "0", "1"]]})
    reread = [["A", "1.0", "0"], ["R", "0", "0"], ["C", "0", "1"], ["A", "2.0", "1"]]
    with pytest.raises(AssertionError, match="delivered again after r committed it"):
        _check_redeliveries({"r": reread, "b": [["A", "2.5", "0"], ["R", "0", "0"], ["E", "X"]]})


def test_pattern_subscription_picks_up_a_new_topic_and_more_partitions(tmp_path):
    from pyspark_logsource.client.consumer import Consumer

    with (
        broker_process(tmp_path, config={"group.initial.rebalance.delay.ms": "0"}) as b,
        Admin(b.bootstrap) as admin,
    ):
        admin.create_topic("pat-a", partitions=1)
        with Consumer(
            b.bootstrap,
            group_id="pat-group",
            auto_offset_reset="earliest",
            session_timeout_ms=3000,
            heartbeat_interval_ms=300,
            metadata_max_age_ms=300,
        ) as c:
            c.subscribe(pattern=r"pat-.*")
            _wait(lambda: (c.poll(100), c.assignment() == [("pat-a", 0)])[1], 20, "the first assignment")
            admin.create_topic("pat-b", partitions=2)
            with Producer(b.bootstrap) as p:
                p.send("pat-b", value=b"late", partition=1).result(10)
            seen: list = []
            _wait(
                lambda: seen.extend(m.value for m in c.poll(100)) or b"late" in seen,
                30,
                "the new topic's record",
            )
            assert sorted(c.assignment()) == [("pat-a", 0), ("pat-b", 0), ("pat-b", 1)]
