"""A partition log's append end (``broker/log/log_end.py``, issue 25): the compiled ``_cseg.LogEnd``
against its pure-Python reference ``LogEndPy``, and the log using it.

Both twins get the same random sequence of calls (plain appends of every kind of run and epoch, config
changes, rolls by age, size, full index and offset, epoch changes from outside, flush rule changes,
closing), each with its own real segment file, indexes, epoch cache and flush rule; after every call they
must hold the same numbers, have written the same bytes, index entries and epoch checkpoint, have
flushed at the same appends and have returned (or raised) the same thing.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.logdata import make_batch, open_log
from test_format_compiled_body import one_batch

from pyspark_logsource.broker.log import LogConfig, log_end, segment_tail
from pyspark_logsource.broker.log import append as append_mod
from pyspark_logsource.broker.log import segment as segment_mod
from pyspark_logsource.broker.log.append import AppendInfo, AppendValidator
from pyspark_logsource.broker.log.config import LONG_MAX
from pyspark_logsource.broker.log.epochs import LeaderEpochCache
from pyspark_logsource.broker.log.flush import FlushState
from pyspark_logsource.broker.log.index import OffsetIndex, TimeIndex
from pyspark_logsource.broker.log.producer_state import ProducerStateManager
from pyspark_logsource.broker.log.segment import LogSegment
from pyspark_logsource.errors import StorageError
from pyspark_logsource.format import encode as fmt_encode
from pyspark_logsource.format import plain_run

try:
    from pyspark_logsource.broker.log import _cseg
except ImportError:  # not built: `python scripts/build_ext.py` builds it in place
    _cseg = None
    if os.environ.get("CI"):
        raise

needs_cseg = pytest.mark.skipif(_cseg is None, reason="broker/log/_cseg is not built: pure-Python path only")
PROPS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TAIL_FIELDS = ("size", "next_offset", "max_timestamp", "offset_of_max_timestamp", "bytes_since_index")
TAIL_FIELDS += ("holds_arrow", "roll_size", "roll_offset")

configs = st.builds(
    LogConfig,
    segment_bytes=st.sampled_from([300, 1500, 1 << 20, 1 << 20]),
    segment_ms=st.sampled_from([1000, LONG_MAX]),
    index_interval_bytes=st.sampled_from([0, 100, 4096]),
    segment_index_bytes=st.sampled_from([24, 1 << 20, 1 << 20]),  # 24: an index fills after 2-3 entries
    flush_messages=st.sampled_from([1, 5, LONG_MAX]),
    flush_ms=st.sampled_from([1000, LONG_MAX, LONG_MAX]),  # 1000: due at every append (last flush at 0)
    message_timestamp_type=st.sampled_from(["CreateTime"] * 4 + ["LogAppendTime"]),
    cleanup_policy=st.sampled_from(["delete", "compact"]),
)


def _run(draw) -> bytearray:
    """What a produce may carry: one batch of any kind, a bigger one, two plain batches, or a cut one."""
    kind = draw(st.sampled_from(["one"] * 4 + ["plain"] * 4 + ["big", "two", "cut"]))
    if kind == "one":
        return bytearray(draw(one_batch()))
    if kind == "plain":
        return make_batch(0, draw(st.integers(1, 3)), timestamps=draw(st.integers(0, 2**41)))
    if kind == "big":
        return make_batch(0, draw(st.integers(1, 12)), size=200)
    if kind == "two":
        return make_batch(0, 2) + make_batch(2, 1)
    return make_batch(0, 3)[: draw(st.integers(0, 60))]


@st.composite
def calls(draw):
    kind = draw(
        st.sampled_from(
            ["append"] * 16 + ["runs"] * 4 + ["config", "leo", "epoch", "truncate", "scheduled"] * 2
        )
    )
    if kind == "append":
        return kind, (
            _run(draw),
            draw(st.sampled_from([None] * 5 + [0, 7, 2**31 - 1, -1, 2**31, "7"])),  # 2**31, "7": refused
            draw(
                st.sampled_from([2**62, 2**62, 0])
            ),  # the segment's creation (0: past segment.ms; set: no clock)
        )
    if kind == "runs":  # several produces' runs of one read (append_runs)
        runs = [_run(draw) for _ in range(draw(st.integers(1, 4)))]
        return kind, (runs, draw(st.sampled_from([2**62, 2**62, 0])))
    if kind == "config":
        return kind, (draw(configs),)
    if kind == "leo":  # the log end moved by a general path
        return kind, (draw(st.sampled_from([0, 1, 1000])),)
    if kind == "epoch":
        return kind, (draw(st.integers(-1, 40)),)
    if kind == "truncate":
        return kind, (draw(st.integers(0, 2**40)),)
    return kind, (draw(st.booleans()),)


#: the parts a side is built with (its segment's tail and index appends, its validator's format steps)
PURE_PARTS = (
    (segment_mod, "SegmentTail", segment_tail.SegmentTailPy),
    (OffsetIndex, "append", OffsetIndex.append_py),
    (TimeIndex, "maybe_append", TimeIndex.maybe_append_py),
    (append_mod, "check_and_stamp", plain_run.check_and_stamp_py),
    (append_mod, "write_plain_batch", plain_run.write_plain_batch_py),
)
COMPILED_PARTS = (
    ()
    if _cseg is None
    else (
        (segment_mod, "SegmentTail", _cseg.SegmentTail),
        (OffsetIndex, "append", _cseg.offset_index_append),
        (TimeIndex, "maybe_append", _cseg.time_index_maybe_append),
        (append_mod, "check_and_stamp", plain_run.check_and_stamp),
        (append_mod, "write_plain_batch", plain_run.write_plain_batch),
    )
)


@contextlib.contextmanager
def _parts(parts):
    saved = [getattr(owner, name) for owner, name, _ in parts]
    for owner, name, value in parts:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for (owner, name, _), value in zip(parts, saved, strict=True):
            setattr(owner, name, value)


class _Side:
    """One twin: its append end with its own real segment (file, indexes, tail), epoch cache, producer
    state, append checks and flush rule, all of the same path (pure or compiled)."""

    def __init__(self, end_cls, parts, directory: Path, leo: int, config) -> None:
        self.directory = directory
        self.parts = parts
        with _parts(parts):
            self.segment = LogSegment(directory, leo, config)
        self.epochs = LeaderEpochCache(directory)
        self.producers = ProducerStateManager(directory)
        self.flushes: list[tuple[int, bool]] = []
        self.lock = threading.RLock()
        self.rolls: list[int] = []
        self.old: list[LogSegment] = []
        self.end = end_cls(leo, self.lock, self.epochs.assign, self.flush, self.roll, self.producers, "t-0")
        self.rule = FlushState(config, leo, 0)
        self.set_config(config)
        self.end.set_segment(self.segment)
        self.epochs.tell_latest(self.end.set_latest_epoch)
        self.rule.tell_due(self.end.set_flush_due)

    def flush(self) -> None:  # the log's flush, as far as the rule sees it
        self.flushes.append((self.end.leo, self.lock._is_owned()))  # noqa: SLF001 - never under the lock
        self.rule.flushed(self.end.leo, 0)

    def roll(self, now: int) -> None:  # the log's roll, as far as its append end sees it
        assert self.lock._is_owned()  # noqa: SLF001 - under the partition lock
        self.rolls.append(self.end.leo)
        self.old.append(self.segment)
        with _parts(self.parts):
            self.segment = LogSegment(self.directory, self.end.leo, self.config)
        self.end.set_segment(self.segment)  # as the segment list tells it

    def set_config(self, config) -> None:
        self.config = config
        self.segment.set_config(config)
        self.rule.set_config(config)
        with _parts(self.parts):
            self.end.set_config(config, AppendValidator("t-0", "t", config))

    def call(self, kind: str, args: tuple):
        end = self.end
        if kind == "append":
            records, epoch, created = args
            self.segment.tail.set_created(created)
            records = bytearray(records)
            return end.append(records, epoch), bytes(records)
        if kind == "runs":
            if self.config.log_append_time:  # stamped with the wall clock: the twins' would differ
                return "skipped"  # (the log's tests check LogAppendTime runs)
            runs, created = args
            self.segment.tail.set_created(created)
            runs = [bytearray(r) for r in runs]
            out: list = [None] * len(runs)
            took = end.append_runs(runs, out)
            answers = [(type(a), str(a) if isinstance(a, Exception) else a) for a in out]
            return took, answers, [bytes(r) for r in runs]
        if kind == "config":
            return self.set_config(*args)
        if kind == "leo":
            return end.set_leo(end.leo + args[0])
        if kind == "epoch":
            return self.epochs.assign(args[0], end.leo)
        if kind == "truncate":
            return self.epochs.truncate_from_end(*args)
        if kind == "scheduled":
            return self.rule.set_scheduled(*args)
        return end.set_closed()

    def state(self) -> tuple:
        seg = self.segment
        tail = seg.tail
        return (
            (self.end.leo, self.end.latest_epoch, self.end.closed),
            tuple(
                getattr(tail, f) for f in TAIL_FIELDS
            ),  # created_ms: a rolled segment's first append's clock
            [s.tail.created_ms for s in self.old],
            [list(c) for c in (seg.offset_index._keys, seg.offset_index._values)],  # noqa: SLF001
            [list(c) for c in (seg.time_index._keys, seg.time_index._values)],  # noqa: SLF001
            self.epochs.entries(),
            (self.epochs.path.read_bytes() if self.epochs.path.exists() else None),
            sorted(
                (e.producer_id, e.epoch, list(e.batches), e.last_timestamp)
                for e in self.producers.producers.values()
            ),
            (self.rule.recovery_point, self.flushes, self.rolls),
            [s.log_path.read_bytes() for s in (*self.old, seg)],
        )

    def close(self) -> None:
        for seg in (*self.old, self.segment):
            with contextlib.suppress(OSError):
                seg.close()


def _outcome(side: _Side, kind: str, args: tuple):
    try:
        got = side.call(kind, args)
    except Exception as e:  # noqa: BLE001 - the reference's error, whatever it is, must be the same
        return ("error", type(e), str(e).replace(str(side.directory), "DIR"))
    if kind == "append":  # the answer's type too: an AppendInfo, not just an equal tuple
        return ("ok", type(got[0]), got)
    return ("ok", got)


@contextlib.contextmanager
def _twins(leo: int, config: LogConfig):
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "py").mkdir()
        (Path(d) / "c").mkdir()
        py = _Side(log_end.LogEndPy, PURE_PARTS, Path(d) / "py", leo, config)
        co = _Side(_cseg.LogEnd, COMPILED_PARTS, Path(d) / "c", leo, config)
        try:
            yield py, co
        finally:
            py.close()
            co.close()


@needs_cseg
@PROPS
@given(st.integers(0, 2**40), configs, st.lists(calls(), max_size=30))
def test_the_compiled_append_end_agrees_with_the_reference(leo, config, sequence):
    with _twins(leo, config) as (py, co):
        assert co.state() == py.state()
        for kind, args in sequence + [("close", ()), *sequence[-2:]]:  # then closed: nothing is taken
            assert _outcome(co, kind, args) == _outcome(py, kind, args), kind
            assert co.state() == py.state(), kind


def _ends():
    return [(log_end.LogEndPy, PURE_PARTS)] + ([(_cseg.LogEnd, COMPILED_PARTS)] if _cseg else [])


@pytest.mark.parametrize("twins", _ends())
def test_a_plain_append_answers_writes_and_moves_the_log_end(twins, tmp_path):
    side = _Side(*twins, tmp_path, 40, LogConfig(flush_messages=LONG_MAX))
    batch = make_batch(0, 3)
    info = side.end.append(batch)
    assert type(info) is AppendInfo and info == (40, 42, -1, 3, False)
    assert info.base_offset == 40 and info.last_offset == 42 and info.record_count == 3 and not info.duplicate
    assert side.end.leo == 43 and side.segment.tail.next_offset == 43
    assert side.segment.log_path.read_bytes() == bytes(batch)  # stamped in place: what was written
    assert side.epochs.entries() == [(0, 40)]  # epoch 0 on a single broker, from the first append on
    assert side.end.append(make_batch(0, 1), 5) == (43, 43, -1, 1, False)
    assert side.epochs.entries() == [(0, 40), (5, 43)] and side.end.latest_epoch == 5
    last = make_batch(0, 1)
    assert side.end.append(last) == (44, 44, -1, 1, False)
    assert last[12:16] == (5).to_bytes(4, "big")  # stamped with the cache's latest epoch
    assert side.segment.size == len(side.segment.log_path.read_bytes()) == len(batch) + 2 * len(last)
    side.close()


@pytest.mark.parametrize("twins", _ends())
def test_what_the_append_end_does_not_take_is_left_untouched(twins, tmp_path):
    side = _Side(*twins, tmp_path, 0, LogConfig(segment_bytes=200))
    first = make_batch(0, 2)
    assert side.end.append(first) is not None
    before = side.state()
    idempotent = fmt_encode([b"v"], None, 5, producer_id=3, producer_epoch=0, base_sequence=0)
    for run in (bytearray(b"junk"), make_batch(0, 3)[:-1], idempotent):
        assert side.end.append(run) is None  # not a batch; a cut one; an idempotent producer's
    assert side.end.append(make_batch(0, 1), 2**31) is None  # an epoch past int32
    side.set_config(LogConfig(segment_bytes=200, message_timestamp_type="LogAppendTime"))
    assert side.end.append(make_batch(0, 1)) is None  # the log's own time stamps it: the general path
    side.set_config(LogConfig(segment_bytes=200))
    side.end.set_closed()
    assert side.end.append(make_batch(0, 1)) is None
    assert side.state()[:2] == (before[0][:2] + (True,), before[1])
    assert side.segment.log_path.read_bytes() == before[-1][-1]
    side.close()


@pytest.mark.parametrize("twins", _ends())
def test_a_run_past_the_segments_bounds_rolls_it_first(twins, tmp_path):
    side = _Side(*twins, tmp_path, 0, LogConfig(segment_bytes=200))
    assert side.end.append(make_batch(0, 2)) is not None
    assert side.end.append(make_batch(0, 9, size=40)) == (2, 10, -1, 9, False)  # past segment.bytes
    assert side.end.append(make_batch(0, 2) + make_batch(2, 5)) == (11, 17, -1, 7, False)  # a run of two
    assert side.rolls == [2, 11] and side.segment.base_offset == 11 and side.end.leo == 18
    side.segment.tail.set_created(0)  # past segment.ms: the next append rolls by age
    side.set_config(LogConfig(segment_bytes=1 << 20, segment_ms=1000))
    assert side.end.append(make_batch(0, 1)) == (18, 18, -1, 1, False)
    assert side.rolls == [2, 11, 18]
    side.close()


@pytest.mark.parametrize("twins", _ends())
def test_a_failed_write_is_a_storage_error_with_the_file_cut_back(twins, tmp_path):
    side = _Side(*twins, tmp_path, 0, LogConfig(index_interval_bytes=0))
    assert side.end.append(make_batch(0, 3)) is not None
    before = side.state()
    os.close(side.segment.file.fileno())  # the segment's file is gone: the write fails
    for run in (make_batch(0, 2), make_batch(0, 2) + make_batch(2, 1)):  # one batch; a run of two
        with pytest.raises(StorageError, match=r"append to .*\.log failed: .*Bad file descriptor") as e:
            side.end.append(run)
        assert isinstance(e.value.__cause__, OSError)
        assert side.state() == before  # nothing recorded, the log end unmoved
    side.close()


@pytest.mark.parametrize("twins", _ends())
def test_the_flush_rule_is_kept_and_a_flush_runs_outside_the_lock(twins, tmp_path):
    side = _Side(*twins, tmp_path, 0, LogConfig(flush_messages=5, flush_ms=LONG_MAX))
    end = side.end
    for _ in range(4):
        end.append(make_batch(0, 2))
    # due at offset 5: flushed after the append that reached it (to 6), outside the partition lock
    assert side.flushes == [(6, False)]
    assert side.rule.recovery_point == 6
    end.append(make_batch(0, 1))
    assert side.flushes == [(6, False)]
    end.append(make_batch(0, 4))  # 9 to 13: past 6 + 5
    assert side.flushes == [(6, False), (13, False)]
    side.rule.set_scheduled(True)  # a thread flushes by time: the rule's thresholds reach the end anew
    side.rule.set_config(LogConfig(flush_messages=LONG_MAX, flush_ms=0))
    end.append(make_batch(0, 1))  # flush.messages past int64 (never), flush.ms the thread's
    assert side.flushes == [(6, False), (13, False)]
    side.rule.set_scheduled(False)  # flush.ms=0, no thread: every append flushes
    end.append(make_batch(0, 1))
    assert side.flushes[-1] == (15, False)
    side.close()


def test_the_append_end_holds_the_flush_weakly(tmp_path):
    """The log's flush and the epoch cache's assign are held by weak references: a log and its epoch cache
    are freed by their reference counts (no cycle)."""
    import gc
    import weakref

    gc.disable()
    try:
        log = open_log(tmp_path)
        log.append(make_batch(0, 1))
        gone = weakref.ref(log)
        epochs_gone = weakref.ref(log.epochs)
        log.close()
        del log
        assert gone() is None
        # nor does the epoch cache (it tells the end its latest epoch; the end assigns through it)
        assert epochs_gone() is None
    finally:
        gc.enable()


def test_the_log_uses_the_compiled_append_end_when_built(tmp_path):
    log = open_log(tmp_path)
    if _cseg is None or os.environ.get("LOGSOURCE_NO_EXTENSIONS"):
        assert type(log._end) is log_end.LogEndPy  # noqa: SLF001
    else:  # a failing import of _cseg would fall back quietly: this says it did not
        assert type(log._end) is _cseg.LogEnd  # noqa: SLF001
        assert type(log.active_segment.tail) is _cseg.SegmentTail
    # the log's own append is its append end's, which goes on to the general path for what it does not take
    assert log.append.__self__ is log._end  # noqa: SLF001
    assert log.append(make_batch(0, 2)) == (0, 1, -1, 2, False)
    idempotent = fmt_encode([b"v"], None, 5, producer_id=3, producer_epoch=0, base_sequence=0)
    assert log.append(idempotent) == (2, 2, -1, 1, False)  # the general path's answer
    assert log.append(bytearray(idempotent)).duplicate  # a retry: the producer state's answer
    log.close()


@pytest.mark.parametrize("twins", _ends())
def test_a_run_that_just_fills_the_segment_goes_in_and_one_byte_more_rolls_it(twins, tmp_path):
    first, run = make_batch(0, 2), make_batch(0, 2) + make_batch(2, 1)
    for extra, rolls in ((0, []), (-1, [2])):
        (tmp_path / str(extra)).mkdir()
        side = _Side(*twins, tmp_path / str(extra), 0, LogConfig(segment_bytes=len(first) + len(run) + extra))
        assert side.end.append(first) is not None
        assert side.end.append(bytearray(run)) == (2, 4, -1, 3, False)
        assert side.rolls == rolls
        side.close()


@needs_cseg
@PROPS
@given(
    st.integers(0, 2**40),
    st.sampled_from([12, 24, 1 << 20]),
    st.lists(
        st.tuples(
            st.sampled_from(["offset", "offset", "truncate"]),
            st.one_of(
                st.integers(0, 50), st.sampled_from([-1, 2**32 - 1, 2**32]), st.integers(-(2**41), 2**41)
            ),
            st.one_of(st.integers(0, 5000), st.sampled_from([-1, 2**32 - 1, 2**32, 2**62])),
        ),
        max_size=40,
    ),
)
def test_the_tails_c_call_of_the_offset_index_append_agrees_with_the_reference(base, max_bytes, sequence):
    """``_cseg``'s C call of the offset index append (what a compiled tail uses) against ``append_py``."""
    with tempfile.TemporaryDirectory() as d:
        ref = OffsetIndex(Path(d) / "py.index", base, max_bytes)
        got = OffsetIndex(Path(d) / "c.index", base, max_bytes)

        def outcome(index, append, kind, a, b):
            try:
                if kind == "offset":
                    return ("ok", append(index, base + a, b))
                index.truncate_to(base + abs(a))
                return ("ok", None)
            except Exception as e:  # noqa: BLE001 - the reference's error, whatever it is, must be the same
                return ("error", type(e), str(e))

        for kind, a, b in sequence:
            c = outcome(got, _cseg.offset_index_append_from_c, kind, a, b)
            assert c == outcome(ref, OffsetIndex.append_py, kind, a, b), kind
            assert [list(got._keys), list(got._values)] == [list(ref._keys), list(ref._values)]  # noqa: SLF001
        ref.close()
        got.close()
