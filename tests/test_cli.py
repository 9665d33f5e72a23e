"""The ``logsource`` command line against a broker process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.brokers import broker_process
from support.interactive import as_from_a_terminal

from pyspark_logsource.client import Admin

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


@pytest.mark.parametrize(
    "cmd",
    [
        [],
        ["topics"],
        ["topics", "create"],
        ["topics", "list"],
        ["topics", "describe"],
        ["topics", "delete"],
        ["produce"],
        ["consume"],
        ["groups"],
        ["groups", "describe"],
        ["broker"],
    ],
)
def test_help_on_every_command(cmd):
    p = run(*cmd, "--help")
    out = p.stdout.decode()
    assert "usage:" in out
    leaf = cmd in (["produce"], ["consume"]) or (len(cmd) == 2 and cmd[0] in ("topics", "groups"))
    if leaf:
        assert "--bootstrap-servers" in out


def test_topics_produce_consume_groups(broker):
    bs = broker.bootstrap
    assert (
        "Created topic clicks"
        in run("topics", "create", "clicks", "--partitions", "3", "--bootstrap-servers", bs).stdout.decode()
    )
    # the environment variable is the default bootstrap
    assert run("topics", "list", bootstrap=bs).stdout.decode().split() == ["clicks"]
    desc = run("topics", "describe", "clicks", bootstrap=bs).stdout.decode()
    assert "PartitionCount: 3" in desc and desc.count("Leader: ") == 3

    lines = b"".join(b"user-%d\tclick %d\n" % (i % 5, i) for i in range(300))
    p = run("produce", "clicks", "--key-separator", "\t", stdin=lines, bootstrap=bs)
    assert "Produced 300" in p.stderr.decode()

    out = run(
        "consume", "clicks", "--from-beginning", "--max-messages", "300", "--print-key", bootstrap=bs
    ).stdout
    got = out.decode().splitlines()
    assert sorted(got) == sorted(f"user-{i % 5}\tclick {i}" for i in range(300))
    # same key -> same partition -> in order within the key
    for k in range(5):
        mine = [g for g in got if g.startswith(f"user-{k}\t")]
        assert mine == [f"user-{k}\tclick {i}" for i in range(k, 300, 5)]

    part0 = run(
        "consume",
        "clicks",
        "--partition",
        "0",
        "--offset",
        "2",
        "--max-messages",
        "1",
        "--print-offset",
        bootstrap=bs,
    )
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
    p = run(
        "produce",
        "kv",
        "--key-separator",
        ":",
        stdin=b"a:1\nb:2\nno separator\nc:3\n",
        bootstrap=bs,
        check=False,
    )
    assert p.returncode == 1 and "line 3" in p.stderr.decode()
    out = run(
        "consume",
        "kv",
        "--from-beginning",
        "--max-messages",
        "2",
        "--print-key",
        "--key-separator",
        ":",
        bootstrap=bs,
    )
    assert out.stdout == b"a:1\nb:2\n"
    p = run("topics", "list", "--bootstrap-servers", "127.0.0.1:1", check=False)
    assert p.returncode == 1 and "NetworkError" in p.stderr.decode()


def test_groups_list_describe_and_reset_offsets(broker, tmp_path):
    """`consume --group` processes share the partitions; describe shows members and lag; reset-offsets needs
    an empty group (NonEmptyGroup while a member is in it) and moves the committed offsets."""
    bs = broker.bootstrap
    run("topics", "create", "gt", "--partitions", "2", bootstrap=bs)
    for part in ("0", "1"):
        run(
            "produce",
            "gt",
            "--partition",
            part,
            stdin=b"".join(b"m%d\n" % i for i in range(20)),
            bootstrap=bs,
        )
    p = run("groups", "describe", "nobody", bootstrap=bs, check=False)
    assert p.returncode == 1 and "GroupIdNotFound" in p.stderr.decode()
    # a long-running member of group gg, in the background
    env = dict(os.environ, LOGSOURCE_BOOTSTRAP=bs)
    member = subprocess.Popen(
        [*CLI, "consume", "gt", "--group", "gg", "--from-beginning", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        table, rows = "", []
        for _ in range(100):
            table = run("groups", "describe", "gg", bootstrap=bs, check=False).stdout.decode()  # joining
            rows = [ln.split() for ln in table.split("\n\n")[0].splitlines()[2:]]
            if "STATE Stable" in table and [r[2] for r in rows] == ["20", "20"]:
                break
            time.sleep(0.2)
        assert "STATE Stable" in table and "MEMBERS 1" in table, table
        assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [
            ("gt", "0", "20", "20", "0"),
            ("gt", "1", "20", "20", "0"),
        ]
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
    out = run(
        "groups",
        "reset-offsets",
        "gg",
        "--topic",
        "gt",
        "--to-datetime",
        "2000-01-01T00:00:00+00:00",
        bootstrap=bs,
    ).stdout.decode()
    assert [ln.split()[2] for ln in out.splitlines()[2:]] == ["0", "0"]
    out = run(
        "groups",
        "reset-offsets",
        "gg",
        "--topic",
        "gt",
        "--to-datetime",
        "2999-01-01T00:00:00",
        "--partition",
        "1",
        bootstrap=bs,
    ).stdout.decode()
    assert [ln.split() for ln in out.splitlines()[2:]] == [["gt", "1", "20"]]
    out = run("groups", "reset-offsets", "gg", "--topic", "gt", "--to-latest", bootstrap=bs).stdout.decode()
    assert [ln.split()[2] for ln in out.splitlines()[2:]] == ["20", "20"]
    # the group resumes from the reset offsets: nothing new
    assert run("consume", "gt", "--group", "gg", "--timeout-ms", "1500", bootstrap=bs).stdout == b""


# ---------------------------------------------------------------- issue 26: what a new user meets

LOGSOURCE = str(Path(sys.executable).parent / "logsource")  # the installed script, as a user runs it


def _ends(bs: str, topic: str) -> list[int]:
    with Admin(bs) as admin:
        parts = admin.partitions_for(topic)
        ends = admin.list_offsets([(topic, p) for p in parts], "latest")
    return [ends[(topic, p)] for p in parts]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_produce_spreads_keyless_lines_over_the_partitions(broker):
    bs = broker.bootstrap
    run("topics", "create", "spread", "--partitions", "4", bootstrap=bs)
    p = subprocess.run(
        f"seq 1 100000 | {LOGSOURCE} produce spread -b {bs}", shell=True, capture_output=True, timeout=120
    )
    assert p.returncode == 0, p.stderr.decode()
    assert "Produced 100000 message(s) to spread." in p.stderr.decode()
    ends = _ends(bs, "spread")
    assert sum(ends) == 100_000
    assert all(22_500 <= n <= 27_500 for n in ends), ends  # within 10% of 25,000 each
    # keyed lines still follow their key, and --partition still pins every line
    run("topics", "create", "pinned", "--partitions", "4", bootstrap=bs)
    run(
        "produce",
        "pinned",
        "--partition",
        "2",
        stdin=b"".join(b"%d\n" % i for i in range(5000)),
        bootstrap=bs,
    )
    assert _ends(bs, "pinned") == [0, 0, 5000, 0]


@pytest.mark.parametrize("command", ["produce", "consume"])
def test_produce_and_consume_fail_within_their_timeout_naming_the_broker(command, tmp_path):
    refused = f"127.0.0.1:{_free_port()}"  # nothing listens: refused at once
    t0 = time.monotonic()
    p = subprocess.run(
        [LOGSOURCE, command, "t", "-b", refused], input=b"x\n", capture_output=True, timeout=60
    )
    took = time.monotonic() - t0
    err = p.stderr.decode().strip()
    assert p.returncode == 1 and refused in err and "\n" not in err, err
    assert took < 10, took  # was 60 s (the producer's max_block_ms) before the CLI asked first
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        addr = f"127.0.0.1:{silent.getsockname()[1]}"
        t0 = time.monotonic()
        p = subprocess.run(
            [LOGSOURCE, command, "t", "-b", addr, "--timeout", "3"],
            input=b"x\n",
            capture_output=True,
            timeout=60,
        )
        took = time.monotonic() - t0
    err = p.stderr.decode().strip()
    assert p.returncode == 1 and addr in err and "timed out" in err and "\n" not in err, err
    assert 3 <= took < 3 + 6, took  # the timeout plus an interpreter's start
    p = run(command, "t", "--timeout", "0", check=False)
    assert p.returncode == 2 and "a positive number of seconds" in p.stderr.decode()


def test_produce_and_consume_count_on_ctrl_c_and_at_the_end(broker):
    bs = broker.bootstrap
    run("topics", "create", "counted", "--partitions", "2", bootstrap=bs)
    prod = subprocess.Popen(
        as_from_a_terminal([LOGSOURCE, "produce", "counted", "-b", bs]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    prod.stdin.write(b"".join(b"line %d\n" % i for i in range(150)))
    prod.stdin.flush()
    deadline = time.monotonic() + 30
    while sum(_ends(bs, "counted")) < 150 and time.monotonic() < deadline:
        time.sleep(0.1)
    prod.send_signal(signal.SIGINT)  # stdin still open: Ctrl-C ends it
    out, err = prod.communicate(timeout=30)
    assert prod.returncode == 130 and out == b""  # stdout stays the data
    assert "Produced 150 message(s) to counted (interrupted)." in err.decode(), err.decode()
    assert sum(_ends(bs, "counted")) == 150

    cons = subprocess.Popen(
        as_from_a_terminal([LOGSOURCE, "consume", "counted", "--from-beginning", "-b", bs]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines = [cons.stdout.readline() for _ in range(150)]
    assert sorted(lines) == sorted(b"line %d\n" % i for i in range(150))
    cons.send_signal(signal.SIGINT)
    out, err = cons.communicate(timeout=30)
    assert cons.returncode == 130 and out == b""
    assert "Processed a total of 150 messages (interrupted)" in err.decode(), err.decode()
    p = run("consume", "counted", "--from-beginning", "--timeout-ms", "1000", bootstrap=bs)
    assert len(p.stdout.splitlines()) == 150 and "Processed a total of 150 messages" in p.stderr.decode()


def test_topics_create_tells_what_happened(broker):
    bs = broker.bootstrap
    assert run("topics", "create", "made", "--partitions", "3", bootstrap=bs).stdout.decode().strip() == (
        "Created topic made with 3 partition(s)."
    )
    p = run("topics", "create", "made", "--if-not-exists", bootstrap=bs)
    assert p.stdout.decode().strip() == "Topic made exists already, with 3 partition(s); nothing changed."
    p = run("topics", "create", "made", bootstrap=bs, check=False)
    assert p.returncode == 1 and "TopicAlreadyExists" in p.stderr.decode()
    for bad in ("-1", "0"):
        p = run("topics", "create", "pm", "--partitions", bad, bootstrap=bs, check=False)
        assert p.returncode == 1 and f"--partitions must be 1 or more, got {bad}" in p.stderr.decode()
        assert p.stdout == b""
    assert "pm" not in run("topics", "list", bootstrap=bs).stdout.decode().split()


def test_auto_creation_is_visible_or_refused(broker, tmp_path):
    bs = broker.bootstrap
    p = run("produce", "born", stdin=b"a\nb\n", bootstrap=bs)
    assert (
        "Created topic born with 1 partition(s)" in p.stderr.decode()
        and "auto.create.topics.enable=true" in p.stderr.decode()
    )
    assert "auto-created topic born with 1 partition(s)" in broker.log_file.read_text()
    assert (
        run("produce", "born", stdin=b"c\n", bootstrap=bs).stderr.decode().strip()
        == "Produced 1 message(s) to born."
    )
    with broker_process(tmp_path / "strict", config={"auto.create.topics.enable": "false"}) as strict:
        t0 = time.monotonic()
        p = run("produce", "unborn", stdin=b"a\n", bootstrap=strict.bootstrap, check=False)
        assert time.monotonic() - t0 < 15
        err = p.stderr.decode()
        assert (
            p.returncode == 1
            and "auto.create.topics.enable=false" in err
            and "logsource topics create unborn" in err
        )
        assert run("topics", "list", bootstrap=strict.bootstrap).stdout == b""
        assert "auto-created" not in strict.log_file.read_text()


def _group_state(bs: str, group: str) -> str:
    return run("groups", "describe", group, bootstrap=bs, check=False).stdout.decode()


def test_consume_group_member_leaves_on_sigterm(broker):
    """A member ended with SIGTERM leaves as on Ctrl-C: the other one gets its partitions at once,
    not after the session timeout (10 s) of a member that vanished without a word."""
    bs = broker.bootstrap
    run("topics", "create", "shared", "--partitions", "4", bootstrap=bs)
    members = [
        subprocess.Popen(
            [LOGSOURCE, "consume", "shared", "--group", "gs", "-b", bs],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    try:
        table = ""
        for _ in range(150):
            table = _group_state(bs, "gs")
            if "STATE Stable" in table and "MEMBERS 2" in table:
                break
            time.sleep(0.2)
        assert "STATE Stable" in table and "MEMBERS 2" in table, table
        members[0].send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        _, err = members[0].communicate(timeout=20)
        assert members[0].returncode == 128 + signal.SIGTERM
        assert "Processed a total of 0 messages (interrupted)" in err.decode()
        while time.monotonic() - t0 < 20:
            table = _group_state(bs, "gs")
            if "STATE Stable" in table and "MEMBERS 1" in table:
                break
            time.sleep(0.1)
        took = time.monotonic() - t0
        assert "MEMBERS 1" in table and "shared-0,shared-1,shared-2,shared-3" in table, table
        assert took < 7.0, took  # the survivor's next heartbeat (3 s) tells it; the session timeout is 10 s
    finally:
        for m in members:
            if m.poll() is None:
                m.terminate()
                m.wait(20)


def test_readme_and_help_agree_on_defaults_and_required_options():
    from pyspark_logsource.client.metadata import DEFAULT_BOOTSTRAP

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    cli_section = readme[readme.index("## CLI") :]
    assert f"(default `$LOGSOURCE_BOOTSTRAP`, else `{DEFAULT_BOOTSTRAP}`)" in cli_section
    for cmd in (["produce"], ["consume"], ["topics", "list"], ["etl"]):
        out = " ".join(run(*cmd, "--help").stdout.decode().split())  # argparse wraps lines
        assert f"else {DEFAULT_BOOTSTRAP}" in out, (cmd, out)
        assert "embedded default" not in out
    # every cluster action needs --data-dir, and the README's table says so for each of them
    for action in ("start", "status", "stop"):
        p = run("cluster", action, check=False)
        assert p.returncode == 2 and "--data-dir" in p.stderr.decode()
    assert "`status --data-dir D` / `stop --data-dir D`" in cli_section
    assert "--timeout SECONDS" in " ".join(run("produce", "--help").stdout.decode().split())
