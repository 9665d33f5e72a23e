"""The log append's one-call step for one plain batch (issue 25): check, CRC, offset/epoch stamp and the
segment file's write in one format call, ``plain_run.write_plain_batch`` (compiled: ``_cbody``).

The compiled function is compared with its pure-Python reference on random and
malformed runs (same result, same stamped buffer, same file, same OSError on a
failed write); whatever path is in use, a batch it takes is stamped as the
general path stamps it. Then whole logs, appended with the step and without it
(the general path alone), must write the same files and indexes and answer the
same offsets and typed errors, and a write that fails half-way (a file size limit:
a real short write, then EFBIG) must leave the log as it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.logdata import all_records, make_batch, open_log, value_for
from test_format_compiled import guarded  # a buffer ending at a PROT_NONE page
from test_format_compiled_body import _stamp_args, any_run, one_batch

from pyspark_logsource.broker.log import LogConfig, PartitionLog
from pyspark_logsource.broker.log import append as log_append
from pyspark_logsource.broker.log.config import LONG_MAX
from pyspark_logsource.errors import LogSourceError, StorageError
from pyspark_logsource.format import encode as fmt_encode
from pyspark_logsource.format import plain_run
from pyspark_logsource.format.kafka_encode import encode_kafka

try:
    from pyspark_logsource.format import _cbody as cb
except ImportError:  # not built: `python scripts/build_ext.py` builds it in place
    cb = None
    if os.environ.get("CI"):
        raise

needs_cbody = pytest.mark.skipif(cb is None, reason="format/_cbody is not built: pure-Python path only")
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: the twins: the reference always, the compiled one when built
WRITERS = [plain_run.write_plain_batch_py] + ([cb.write_plain_batch] if cb else [])


def _write_args(draw, size: int) -> tuple[int, int, int]:
    """position, roll_size, roll_offset: sometimes the start of a file, sometimes a roll bound hit."""
    position = draw(st.sampled_from([0, 0, 1, 100, 4096]))
    roll_size = draw(st.one_of(st.just(LONG_MAX), st.just(-1), st.integers(0, position + size + 2)))
    roll_offset = draw(st.one_of(st.just(LONG_MAX), st.integers(-2, 2**40 + 100)))
    return position, roll_size, roll_offset


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - the reference's error, whatever it is, must be the same
        return ("error", type(e), str(e))


@contextlib.contextmanager
def _file(prefix: bytes):
    """A read-write file holding ``prefix``; yields its fd and a reader of its whole content."""
    fd, name = tempfile.mkstemp(prefix="plain-append-")
    try:
        os.write(fd, prefix)
        yield fd, lambda: Path(name).read_bytes()
    finally:
        os.close(fd)
        os.unlink(name)


def _single_or_run(draw):
    """Mostly one batch (what the step takes), sometimes a run or a damaged one (what it must refuse)."""
    if draw(st.integers(0, 3)):
        return draw(one_batch())
    return draw(any_run)


@st.composite
def single_or_run(draw):
    return _single_or_run(draw)


# ---------------------------------------------------------------- the step, compiled vs reference


@needs_cbody
@PROPS
@given(single_or_run(), st.data())
def test_write_plain_batch_agrees_with_the_reference(buf, data):
    max_size, refuse_keyless, offset, epoch = _stamp_args(data.draw)
    position, roll_size, roll_offset = _write_args(data.draw, len(buf))
    prefix = bytes(range(256)) * 20
    a, b = bytearray(buf), bytearray(buf)
    with _file(prefix[:position]) as (fa, read_a), _file(prefix[:position]) as (fb, read_b):
        args = (fa, position, roll_size, roll_offset)
        got = _outcome(cb.write_plain_batch, max_size, refuse_keyless, a, offset, epoch, *args)
        args = (fb, position, roll_size, roll_offset)
        want = _outcome(plain_run.write_plain_batch_py, max_size, refuse_keyless, b, offset, epoch, *args)
        assert got == want
        assert a == b  # stamped alike, or (None) both untouched
        assert read_a() == read_b()
        if want == ("ok", None):
            assert a == buf and read_a() == prefix[:position]


@PROPS
@given(single_or_run(), st.data())
def test_a_batch_the_step_takes_is_the_one_the_general_path_stamps(buf, data):
    """Whatever path is in use: it takes exactly one plain batch within the roll bounds, stamped as
    check_and_stamp stamps it and written after ``position``; otherwise nothing changes."""
    max_size, refuse_keyless, offset, epoch = _stamp_args(data.draw)
    position, roll_size, roll_offset = _write_args(data.draw, len(buf))
    mine = bytearray(buf)
    with _file(b"p" * position) as (fd, read):
        got = plain_run.write_plain_batch(
            max_size, refuse_keyless, mine, offset, epoch, fd, position, roll_size, roll_offset
        )
        ref = bytearray(buf)
        stamped = plain_run.check_and_stamp_py(max_size, refuse_keyless, ref, offset, epoch)
        if got is None:
            assert mine == buf and read() == b"p" * position
            fits = position == 0 or (
                position + len(buf) <= roll_size and stamped and offset + stamped[1][0][4] - 1 <= roll_offset
            )
            assert (
                stamped is None or len(stamped[1]) > 1 or not fits
            )  # refused: not one plain batch, or a roll
            return
        arrow, batches = stamped
        assert len(batches) == 1
        _, base, size, max_ts, count = batches[0]
        assert got == (size, base + count, max_ts, arrow) and mine == ref
        assert read() == b"p" * position + bytes(ref)


@needs_cbody
@PROPS
@given(any_run, st.data())
def test_write_plain_batch_reads_nothing_past_the_buffer(buf, data):
    import struct

    b = bytearray(buf)
    if len(b) >= 12 and data.draw(st.booleans()):  # a batch length claiming far more than there is
        struct.pack_into(">i", b, 8, data.draw(st.sampled_from([2**31 - 1, len(b), len(b) - 11])))
    with guarded(bytes(b)) as mv, _file(b"") as (fd, read):
        got = cb.write_plain_batch(1 << 40, False, mv, 0, 0, fd, 0, LONG_MAX, LONG_MAX)
        assert got == plain_run.write_plain_batch_py(
            1 << 40, False, bytearray(b), 0, 0, fd, 0, LONG_MAX, LONG_MAX
        )


@pytest.mark.parametrize("write", WRITERS)
def test_write_plain_batch_edges(write, tmp_path):
    plain = fmt_encode([b"a", b"b"], None, 5)
    n = len(plain)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        assert write(1 << 20, False, bytearray(plain), 10, 3, fd, 0, -1, 0) == (
            n,
            12,
            5,
            True,
        )  # empty: no roll
        assert write(1 << 20, False, bytearray(plain), 12, 3, fd, n, 2 * n, 13) == (n, 14, 5, True)
        assert write(1 << 20, False, bytearray(plain), 14, 3, fd, 2 * n, 3 * n - 1, LONG_MAX) is None  # size
        assert write(1 << 20, False, bytearray(plain), 14, 3, fd, 2 * n, LONG_MAX, 14) is None  # offsets
        assert write(1 << 20, False, bytearray(plain + plain), 14, 3, fd, 2 * n, LONG_MAX, LONG_MAX) is None
        assert write(1 << 20, True, bytearray(plain), 14, 3, fd, 2 * n, LONG_MAX, LONG_MAX) is None  # keyless
        assert write(1 << 20, False, bytes(plain), 14, 3, fd, 2 * n, LONG_MAX, LONG_MAX) is None  # read-only
        assert os.path.getsize(tmp_path / "f") == 2 * n
        # Kafka's layout, uncompressed: taken, and said not to have our Arrow body; a null key only where
        # the topic allows it (compacted: the general path's KIP-467 error)
        kafka = encode_kafka([b"a", b"b"], [b"k", None], 7)
        k = len(kafka)
        assert write(1 << 20, True, bytearray(kafka), 14, 3, fd, 2 * n, LONG_MAX, LONG_MAX) is None
        assert write(1 << 20, False, bytearray(kafka), 14, 3, fd, 2 * n, LONG_MAX, LONG_MAX) == (
            k,
            16,
            7,
            False,
        )
        gzipped = encode_kafka([b"a" * 100], None, 7, codec="gzip")
        assert write(1 << 20, False, gzipped, 16, 3, fd, 2 * n + k, LONG_MAX, LONG_MAX) is None
        assert os.path.getsize(tmp_path / "f") == 2 * n + k
    finally:
        os.close(fd)
    data = (tmp_path / "f").read_bytes()
    assert [int.from_bytes(data[i : i + 8], "big") for i in (0, n, 2 * n)] == [10, 12, 14]
    assert [int.from_bytes(data[i + 12 : i + 16], "big") for i in (0, n, 2 * n)] == [3, 3, 3]


@pytest.mark.parametrize("write", WRITERS)
def test_a_failed_write_cuts_the_file_back_and_raises_the_oserror(write, tmp_path):
    plain = fmt_encode([b"x" * 100] * 40, None, 5)
    path = tmp_path / "f"
    path.write_bytes(b"head")
    with _fsize_limit(4 + len(plain) // 2):  # a real short write, then EFBIG
        fd = os.open(path, os.O_RDWR)
        try:
            with pytest.raises(OSError) as e:
                write(1 << 20, False, bytearray(plain), 0, 0, fd, 4, LONG_MAX, LONG_MAX)
        finally:
            os.close(fd)
    assert e.value.errno == errno.EFBIG
    assert path.read_bytes() == b"head"
    fd = os.open(path, os.O_RDONLY)  # a file it cannot write at all: EBADF, the file as it was
    try:
        with pytest.raises(OSError) as e:
            write(1 << 20, False, bytearray(plain), 0, 0, fd, 4, LONG_MAX, LONG_MAX)
    finally:
        os.close(fd)
    assert e.value.errno == errno.EBADF and path.read_bytes() == b"head"


@contextlib.contextmanager
def _fsize_limit(limit: int):
    """RLIMIT_FSIZE at ``limit`` bytes (SIGXFSZ ignored, so a write past it fails with EFBIG)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


# ---------------------------------------------------------------- whole logs, with and without the step


def _append_all(directory: Path, runs: list[bytearray], cfg: LogConfig) -> tuple[list, dict, list]:
    lg = PartitionLog(directory, cfg, "t", 0)
    out = []
    for r, epoch in runs:
        try:
            out.append(tuple(lg.append(bytearray(r), leader_epoch=epoch)))
        except LogSourceError as e:
            out.append((type(e), str(e), e.code))
        out.append((lg.log_end_offset, lg.size_bytes, lg.active_segment.next_offset))
    indexes = [
        (s.base_offset, s.size, s.max_timestamp, s.offset_of_max_timestamp, s.roll_size, s.holds_arrow)
        + (list(s.offset_index._keys), list(s.offset_index._values))  # noqa: SLF001 - compared, not changed
        + (list(s.time_index._keys), list(s.time_index._values))  # noqa: SLF001
        for s in lg.segments
    ]
    lg.close()
    files = {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}
    return out, files, indexes


@st.composite
def log_runs(draw):
    runs = draw(st.lists(st.tuples(single_or_run(), st.sampled_from([None, None, None, 0, 3])), max_size=25))
    cfg = LogConfig(
        segment_bytes=draw(st.sampled_from([300, 1500, 6000, 1 << 20])),
        index_interval_bytes=draw(st.sampled_from([0, 100, 500, 4096])),
        segment_index_bytes=draw(
            st.sampled_from([24, 1 << 20])
        ),  # 24: an index fills (the next append rolls)
        cleanup_policy=draw(st.sampled_from(["delete", "delete", "compact"])),
        max_message_bytes=draw(st.sampled_from([400, 1 << 20])),
        flush_ms=LONG_MAX,
        flush_messages=draw(st.sampled_from([LONG_MAX, 7])),
    )
    return runs, cfg


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log_runs())
def test_the_log_with_the_step_writes_what_the_general_path_writes(case):
    runs, cfg = case
    with tempfile.TemporaryDirectory() as d:
        fast = _append_all(Path(d) / "fast" / "t-0", runs, cfg)
        saved = log_append.write_plain_batch, log_append.check_and_stamp
        # the one-call steps refuse everything: the general path
        log_append.write_plain_batch = log_append.check_and_stamp = lambda *a: None
        try:
            general = _append_all(Path(d) / "general" / "t-0", runs, cfg)
        finally:
            log_append.write_plain_batch, log_append.check_and_stamp = saved
    assert fast == general


def test_the_step_is_what_appends_one_plain_batch(tmp_path, monkeypatch):
    taken = []
    write = log_append.write_plain_batch
    monkeypatch.setattr(log_append, "write_plain_batch", lambda *a: taken.append(write(*a)) or taken[-1])
    log = open_log(tmp_path, index_interval_bytes=100)
    for i in range(20):
        assert log.append(make_batch(i * 5, 5))[:2] == (i * 5, i * 5 + 4)
    assert len(taken) == 20 and None not in taken
    assert len(log.active_segment.offset_index) == 19  # every batch after the first is indexed
    log.close()
    log = open_log(tmp_path)
    assert [r.value for r in all_records(log)] == [value_for(i) for i in range(100)]


def test_a_failed_write_raises_storage_error_before_the_log_end_moves(tmp_path):
    """The one-call step's write fails half-way (a real short write, then EFBIG): StorageError, the
    half-written batch cut off, nothing recorded; the next append and a reopen see the log as before."""
    log = open_log(tmp_path)
    log.append(make_batch(0, 4))
    size, leo = log.size_bytes, log.log_end_offset
    segment = log.active_segment
    state = (segment.size, segment.next_offset, segment.max_timestamp, len(segment.offset_index))
    with _fsize_limit(size + 300), pytest.raises(StorageError, match="File too large"):
        log.append(make_batch(4, 50))
    assert (log.size_bytes, log.log_end_offset) == (size, leo)
    assert (segment.size, segment.next_offset, segment.max_timestamp, len(segment.offset_index)) == state
    assert os.path.getsize(segment.log_path) == size  # the half-written batch is cut off
    assert log.append(make_batch(4, 3)).base_offset == leo
    log.close()
    log = open_log(tmp_path)
    assert [r.value for r in all_records(log)] == [value_for(i) for i in range(7)]
    log.close()
