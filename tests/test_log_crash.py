"""kill -9 of a process that is appending: the reopened log is a gap-free prefix holding all it flushed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.logdata import all_records, open_log, value_for

from pyspark_logsource.format import batch as fmt

HELPER = Path(__file__).parent / "helpers" / "append_forever.py"


def run_and_kill(parent: Path, flush_messages: int, seed: int, reports: int) -> tuple[int, int]:
    """Start the appender, kill -9 it after ``reports`` appends; return (start offset, last flushed offset)."""
    proc = subprocess.Popen(
        [sys.executable, str(HELPER), str(parent), str(flush_messages), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stdout.readline().split()
        assert first and first[0] == "start", (first, proc.stderr.read() if proc.poll() is not None else "")
        flushed = int(first[2])
        deadline = time.monotonic() + 60
        for _ in range(reports):
            line = proc.stdout.readline()
            if not line or time.monotonic() > deadline:
                break
            flushed = max(flushed, int(line.split()[1]))
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    for line in proc.stdout.read().splitlines():  # reports already in the pipe when it died
        if line.startswith("flushed "):
            flushed = max(flushed, int(line.split()[1]))
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
    return int(first[1]), flushed


@pytest.mark.slow
@pytest.mark.parametrize("flush_messages", [1, 50])
def test_kill_minus_nine_while_appending(tmp_path, flush_messages):
    reached = 0
    for round_ in range(4):
        start, flushed = run_and_kill(tmp_path, flush_messages, seed=round_, reports=150 + 97 * round_)
        assert start == reached  # the previous round's recovered end is where it resumed
        log = open_log(tmp_path, segment_bytes=64 * 1024, index_interval_bytes=1024)
        info = log.recovery_info
        assert info["clean"] is False and info["recovered_segments"] >= 1
        end = log.log_end_offset
        assert end >= flushed, f"round {round_}: flushed {flushed} but only {end} survived"
        assert end > reached
        # a prefix: every offset once, in order, holding what the child wrote there
        recs = all_records(log)
        assert [r.offset for r in recs] == list(range(end))
        assert all(r.value[:12] == value_for(r.offset)[:12] for r in recs)
        # every batch passes its CRC
        for seg in log.segments:
            data = os.pread(seg.file.fileno(), seg.size, 0)
            assert sum(h.size for _, h in fmt.iter_headers(data, check_crc=True)) == seg.size
        # producer state agrees with the log: the next sequence is accepted, a retry is a duplicate
        nxt = fmt.encode([value_for(end)], producer_id=1, producer_epoch=0, base_sequence=end)
        assert log.append(bytes(nxt)).base_offset == end
        assert log.append(bytes(nxt)).duplicate
        reached = end + 1
        log.flush()
        del log  # no close(): the next child finds no clean-shutdown marker
    assert len(list(tmp_path.glob("t-0/*.log"))) > 1  # it rolled segments on the way
