"""The ``logsource`` command line against a broker process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from brokers import broker_process

pytestmark = pytest.mark.timeout(180)

CLI = [sys.executable, "-m", "pyspark_logsource.cli"]


def run(*args: str, stdin: bytes | None = None, bootstrap: str | None = None, check: bool = True):
    env = dict(os.environ)
    if bootstrap:
        env["LOGSOURCE_BOOTSTRAP"] = bootstrap
    p = subprocess.run([*CLI, *args], input=stdin, capture_output=True, timeout=120, env=env)
    if check and p.returncode != 0:
        raise AssertionError(f"logsource {' '.join(args)} -> {p.returncode}\n{p.stderr.decode()}")
    return p


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with broker_process(tmp_path_factory.mktemp("cli-broker")) as b:
        yield b


@pytest.mark.parametrize(
    "cmd",
    [[], ["topics"], ["topics", "create"], ["topics", "list"], ["topics", "describe"], ["topics", "delete"],
     ["produce"], ["consume"], ["groups"], ["groups", "describe"], ["broker"]],
)  # fmt: skip
def test_help_on_every_command(cmd):
    p = run(*cmd, "--help")
    out = p.stdout.decode()
    assert "usage:" in out
    leaf = cmd in (["produce"], ["consume"]) or (len(cmd) == 2 and cmd[0] in ("topics", "groups"))
    if leaf:
        assert "--bootstrap-servers" in out


def test_topics_produce_consume_groups(broker):
    bs = broker.bootstrap
    assert "Created topic clicks" in run("topics", "create", "clicks", "--partitions", "3", "--bootstrap-servers", bs).stdout.decode()
    # the environment variable is the default bootstrap
    assert run("topics", "list", bootstrap=bs).stdout.decode().split() == ["clicks"]
    desc = run("topics", "describe", "clicks", bootstrap=bs).stdout.decode()
    assert "PartitionCount: 3" in desc and desc.count("Leader: ") == 3

    lines = b"".join(b"user-%d\tclick %d\n" % (i % 5, i) for i in range(300))
    p = run("produce", "clicks", "--key-separator", "\t", stdin=lines, bootstrap=bs)
    assert "Produced 300" in p.stderr.decode()

    out = run("consume", "clicks", "--from-beginning", "--max-messages", "300", "--print-key", bootstrap=bs).stdout
    got = out.decode().splitlines()
    assert sorted(got) == sorted(f"user-{i % 5}\tclick {i}" for i in range(300))
    # same key -> same partition -> in order within the key
    for k in range(5):
        mine = [g for g in got if g.startswith(f"user-{k}\t")]
        assert mine == [f"user-{k}\tclick {i}" for i in range(k, 300, 5)]

    part0 = run("consume", "clicks", "--partition", "0", "--offset", "2", "--max-messages", "1", "--print-offset", bootstrap=bs)
    assert part0.stdout.decode().startswith("0:2\t")

    run("consume", "clicks", "--from-beginning", "--group", "g1", "--max-messages", "300", bootstrap=bs)
    table = run("groups", "describe", "g1", bootstrap=bs).stdout.decode()
    rows = [line.split() for line in table.splitlines()[2:]]
    assert len(rows) == 3 and all(r[0] == "clicks" and r[4] == "0" and r[2] == r[3] for r in rows)
    assert sum(int(r[2]) for r in rows) == 300

    run("produce", "clicks", "--partition", "1", stdin=b"late\n", bootstrap=bs)
    lag = run("groups", "describe", "g1", bootstrap=bs).stdout.decode()
    assert [r.split()[4] for r in lag.splitlines()[2:]] == ["0", "1", "0"]
    # the group resumes where it committed: only the new message
    out = run("consume", "clicks", "--group", "g1", "--timeout-ms", "1500", bootstrap=bs).stdout
    assert out == b"late\n"

    assert "Deleted topic clicks" in run("topics", "delete", "clicks", bootstrap=bs).stdout.decode()
    assert run("topics", "list", bootstrap=bs).stdout.decode().split() == []


def test_cli_errors_are_typed_and_lose_nothing(broker):
    bs = broker.bootstrap
    p = run("topics", "create", "bad/name", bootstrap=bs, check=False)
    assert p.returncode == 1 and "InvalidTopic" in p.stderr.decode()
    p = run("topics", "describe", "missing-topic", bootstrap=bs, check=False)
    assert p.returncode == 1 and "UnknownTopicOrPartition" in p.stderr.decode()
    run("topics", "create", "kv", bootstrap=bs)
    p = run("produce", "kv", "--key-separator", ":", stdin=b"a:1\nb:2\nno separator\nc:3\n", bootstrap=bs, check=False)
    assert p.returncode == 1 and "line 3" in p.stderr.decode()
    out = run("consume", "kv", "--from-beginning", "--max-messages", "2", "--print-key", "--key-separator", ":", bootstrap=bs)
    assert out.stdout == b"a:1\nb:2\n"
    p = run("topics", "list", "--bootstrap-servers", "127.0.0.1:1", check=False)
    assert p.returncode == 1 and "NetworkError" in p.stderr.decode()


def test_groups_list_describe_and_reset_offsets(broker, tmp_path):
    """`consume --group` processes share the partitions; describe shows members and lag; reset-offsets needs
    an empty group (NonEmptyGroup while a member is in it) and moves the committed offsets."""
    bs = broker.bootstrap
    run("topics", "create", "gt", "--partitions", "2", bootstrap=bs)
    for part in ("0", "1"):
        run("produce", "gt", "--partition", part, stdin=b"".join(b"m%d\n" % i for i in range(20)), bootstrap=bs)
    p = run("groups", "describe", "nobody", bootstrap=bs, check=False)
    assert p.returncode == 1 and "GroupIdNotFound" in p.stderr.decode()
    # a long-running member of group gg, in the background
    env = dict(os.environ, LOGSOURCE_BOOTSTRAP=bs)
    member = subprocess.Popen([*CLI, "consume", "gt", "--group", "gg", "--from-beginning", "--quiet"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)  # fmt: skip
    try:
        table, rows = "", []
        for _ in range(100):
            table = run("groups", "describe", "gg", bootstrap=bs, check=False).stdout.decode()  # joining
            rows = [ln.split() for ln in table.split("\n\n")[0].splitlines()[2:]]
            if "STATE Stable" in table and [r[2] for r in rows] == ["20", "20"]:
                break
            time.sleep(0.2)
        assert "STATE Stable" in table and "MEMBERS 1" in table, table
        assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [("gt", "0", "20", "20", "0"), ("gt", "1", "20", "20", "0")]
        assert rows[0][5] != "-" and rows[0][5] == rows[1][5] and rows[0][6] == "/127.0.0.1"
        members = table.split("\n\n")[1]
        assert "gt-0,gt-1" in members and "/127.0.0.1" in members
        listed = run("groups", "list", bootstrap=bs).stdout.decode()
        assert any(ln.split()[:3] == ["gg", "Stable", "consumer"] for ln in listed.splitlines())
        p = run("groups", "reset-offsets", "gg", "--topic", "gt", "--to-earliest", bootstrap=bs, check=False)
        assert p.returncode == 1 and "NonEmptyGroup" in p.stderr.decode()
    finally:
        member.terminate()  # SIGTERM: the member leaves the group
        member.wait(20)
    assert len(member.stdout.read().splitlines()) == 40
    for _ in range(50):
        if "STATE Empty" in run("groups", "describe", "gg", bootstrap=bs).stdout.decode():
            break
        time.sleep(0.2)
    out = run("groups", "reset-offsets", "gg", "--topic", "gt", "--to-earliest", bootstrap=bs).stdout.decode()
    assert [ln.split() for ln in out.splitlines()[2:]] == [["gt", "0", "0"], ["gt", "1", "0"]]
    table = run("groups", "describe", "gg", bootstrap=bs).stdout.decode()
    assert "STATE Empty" in table and [ln.split()[4] for ln in table.splitlines()[2:]] == ["20", "20"]
    # --to-datetime: before everything -> 0; in the future -> the log end
    out = run("groups", "reset-offsets", "gg", "--topic", "gt", "--to-datetime", "2000-01-01T00:00:00+00:00",
              bootstrap=bs).stdout.decode()  # fmt: skip
    assert [ln.split()[2] for ln in out.splitlines()[2:]] == ["0", "0"]
    out = run("groups", "reset-offsets", "gg", "--topic", "gt", "--to-datetime", "2999-01-01T00:00:00",
              "--partition", "1", bootstrap=bs).stdout.decode()  # fmt: skip
    assert [ln.split() for ln in out.splitlines()[2:]] == [["gt", "1", "20"]]
    out = run("groups", "reset-offsets", "gg", "--topic", "gt", "--to-latest", bootstrap=bs).stdout.decode()
    assert [ln.split()[2] for ln in out.splitlines()[2:]] == ["20", "20"]
    # the group resumes from the reset offsets: nothing new
    assert run("consume", "gt", "--group", "gg", "--timeout-ms", "1500", bootstrap=bs).stdout == b""
