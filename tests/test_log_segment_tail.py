"""A segment's append end (``broker/log/segment_tail.py``, issue 25): the compiled ``_cseg.SegmentTail``
against its pure-Python reference ``SegmentTailPy``.

Both twins get the same random sequence of calls (opening, recovery tracking, truncation, config changes,
the general path's records and the plain one-call append through the real format step and real files),
each with its own real offset and time indexes; after every call they must hold the same numbers, have
given their indexes the same entries, have written the same file bytes and have returned (or raised)
the same thing.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_format_compiled_body import one_batch

from pyspark_logsource.broker.log import LogConfig, segment_tail
from pyspark_logsource.broker.log.config import LONG_MAX
from pyspark_logsource.broker.log.index import OffsetIndex, TimeIndex
from pyspark_logsource.format import plain_run

try:
    from pyspark_logsource.broker.log import _cseg
except ImportError:  # not built: `python scripts/build_ext.py` builds it in place
    _cseg = None
    if os.environ.get("CI"):
        raise

needs_cseg = pytest.mark.skipif(_cseg is None, reason="broker/log/_cseg is not built: pure-Python path only")
PROPS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FIELDS = (
    "fd",
    "base_offset",
    "size",
    "next_offset",
    "max_timestamp",
    "offset_of_max_timestamp",
    "bytes_since_index",
    "holds_arrow",
    "roll_size",
    "roll_offset",
    "roll_ms",
    "created_ms",
)
WRITES = [plain_run.write_plain_batch_py, plain_run.write_plain_batch]

configs = st.builds(
    LogConfig,
    segment_bytes=st.sampled_from([300, 1500, 1 << 20]),
    segment_ms=st.sampled_from([1, 1000, LONG_MAX]),
    index_interval_bytes=st.sampled_from([0, 100, 4096]),
    segment_index_bytes=st.sampled_from([24, 1 << 20]),  # 24: an index fills after 2-3 entries
)
offsets = st.integers(0, 2**40)
timestamps = st.integers(-1, 2**41)


def _big_batch(n: int) -> bytearray:
    """A plain batch of ``n`` 200-byte records (up to 2.5 KB: past the index intervals and roll sizes)."""
    from support.logdata import make_batch

    return make_batch(0, n, size=200)


@st.composite
def calls(draw):
    """One call on a tail (its arguments drawn; the tail's own state where an argument must follow it)."""
    kind = draw(
        st.sampled_from(
            ["append_plain"] * 6
            + ["record"] * 2
            + [
                "track",
                "restart",
                "set_size",
                "set_config",
                "set_created",
                "set_index_full",
                "set_holds_arrow",
            ]
        )
    )
    if kind == "append_plain":
        return kind, (
            draw(st.one_of(one_batch(), st.integers(1, 12).map(_big_batch))),
            draw(st.sampled_from([None, 0, 7, 2**31 - 1])),  # the epoch (None: refused)
            draw(st.sampled_from([0, 10**12, 2**62])),  # now
            draw(st.integers(0, 1)),  # which write step
        )
    if kind == "record":
        batches = draw(
            st.lists(st.tuples(st.integers(1, 300), timestamps, st.integers(1, 9)), min_size=1, max_size=4)
        )
        return kind, (batches, draw(st.booleans()), draw(st.sampled_from([0, 10**12])))
    if kind == "track":
        return kind, (
            draw(offsets),
            draw(st.integers(0, 5000)),
            draw(st.integers(1, 500)),
            draw(timestamps),
            draw(offsets),
            draw(st.booleans()),
            draw(st.booleans()),
        )
    if kind == "restart":
        return kind, (draw(offsets), draw(timestamps), draw(offsets))
    if kind == "set_size":
        return kind, (draw(st.integers(0, 5000)),)
    if kind == "set_config":
        return kind, (draw(configs),)
    if kind == "set_created":
        return kind, (draw(st.one_of(st.none(), st.integers(0, 2**42))),)
    if kind == "set_index_full":
        return kind, (draw(st.booleans()),)
    return kind, (draw(st.sampled_from([None, False, True])),)


class _Side:
    """One twin with its own file and indexes."""

    def __init__(self, cls, directory: Path, base: int, size: int, config: LogConfig) -> None:
        self.fd = os.open(directory / "segment.log", os.O_RDWR | os.O_CREAT, 0o644)
        os.write(self.fd, b"\0" * size)
        self.offsets = OffsetIndex(directory / "segment.index", base, config.segment_index_bytes)
        self.times = TimeIndex(directory / "segment.timeindex", base, config.segment_index_bytes)
        self.tail = cls(self.fd, base, size, config, self.offsets.append, self.times.maybe_append)
        self.path = directory / "segment.log"

    def call(self, kind: str, args: tuple):
        tail = self.tail
        if kind == "append_plain":
            records, epoch, now, which = args
            return tail.append_plain(
                segment_tail_write(which), bytearray(records), tail.next_offset, epoch, now
            )
        if kind == "record":
            batches, arrow, now = args
            out, rel, base = [], 0, tail.next_offset
            for size, ts, count in batches:
                out.append((rel, base, size, ts, count))
                rel, base = rel + size, base + count
            os.pwrite(self.fd, b"\1" * rel, tail.size)
            return tail.record(tail.size, rel, out, arrow, now)
        return getattr(tail, kind)(*args)

    def state(self) -> tuple:
        return (
            tuple(getattr(self.tail, f) if f != "fd" else 0 for f in FIELDS),
            list(self.offsets._keys),  # noqa: SLF001 - compared, not changed
            list(self.offsets._values),  # noqa: SLF001
            list(self.times._keys),  # noqa: SLF001
            list(self.times._values),  # noqa: SLF001
            self.path.read_bytes(),
        )

    def close(self) -> None:
        self.offsets.close()
        self.times.close()
        os.close(self.fd)


def segment_tail_write(which: int):
    """The format's one-call step as the log binds it (AppendValidator.write_plain): pure or compiled."""
    write = WRITES[which]
    return lambda records, *rest: write(1 << 20, False, records, *rest)


def _outcome(side: _Side, kind: str, args: tuple):
    try:
        return ("ok", side.call(kind, args))
    except Exception as e:  # noqa: BLE001 - the reference's error, whatever it is, must be the same
        return ("error", type(e), str(e))


@contextlib.contextmanager
def _twins(base: int, size: int, config: LogConfig):
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "py").mkdir()
        (Path(d) / "c").mkdir()
        py = _Side(segment_tail.SegmentTailPy, Path(d) / "py", base, size, config)
        co = _Side(_cseg.SegmentTail, Path(d) / "c", base, size, config)
        try:
            yield py, co
        finally:
            py.close()
            co.close()


@needs_cseg
@PROPS
@given(offsets, st.sampled_from([0, 0, 61, 1000]), configs, st.lists(calls(), max_size=30))
def test_the_compiled_tail_agrees_with_the_reference(base, size, config, sequence):
    with _twins(base, size, config) as (py, co):
        assert co.state() == py.state()
        for kind, args in sequence:
            assert _outcome(co, kind, args) == _outcome(py, kind, args), kind
            assert co.state() == py.state(), kind


@needs_cseg
def test_now_ms_agrees_with_the_reference():
    before = segment_tail.now_ms_py()
    now = _cseg.now_ms()
    assert before - 1 <= now <= segment_tail.now_ms_py() + 1


@pytest.mark.parametrize("cls", [segment_tail.SegmentTailPy] + ([_cseg.SegmentTail] if _cseg else []))
def test_a_failed_write_leaves_the_tail_as_it_was(cls, tmp_path):
    """The format step's OSError passes through with nothing recorded (the log turns it into StorageError)."""
    config = LogConfig(index_interval_bytes=0)
    side = _Side(cls, tmp_path, 0, 0, config)
    assert side.tail.append_plain(segment_tail_write(1), bytearray(one_batch_bytes()), 0, 0, 5) == 3
    before = side.state()
    os.close(side.fd)
    with pytest.raises(OSError):
        side.tail.append_plain(segment_tail_write(1), bytearray(one_batch_bytes()), 3, 0, 5)
    side.fd = os.open(side.path, os.O_RDWR)  # for close()
    assert side.state() == before
    side.close()


def one_batch_bytes() -> bytearray:
    from support.logdata import make_batch

    return make_batch(0, 3)


@pytest.mark.parametrize("cls", [segment_tail.SegmentTailPy] + ([_cseg.SegmentTail] if _cseg else []))
def test_the_tail_indexes_every_interval_and_hands_the_time_index_each_new_largest_timestamp(cls, tmp_path):
    from support.logdata import make_batch

    side = _Side(cls, tmp_path, 100, 0, LogConfig(index_interval_bytes=0))
    write = segment_tail_write(1)
    for i, ts in enumerate([5, 5, 9, 9, 7, 12]):
        assert side.tail.append_plain(write, make_batch(i, 1, timestamps=ts), 100 + i, 0, 1) == 101 + i
    # an offset index entry per batch after the first; a time index entry per new largest timestamp
    assert list(side.offsets._keys) == [1, 2, 3, 4, 5]  # noqa: SLF001
    assert list(side.times._keys) == [5, 9, 12]  # noqa: SLF001
    assert list(side.times._values) == [0, 2, 5]  # noqa: SLF001
    assert (side.tail.max_timestamp, side.tail.offset_of_max_timestamp) == (12, 105)
    side.close()


# ---------------------------------------------------------------- the index appends the tail calls

#: what an index append may be handed: usual increasing numbers, and the edges of its 32-bit columns
index_numbers = st.one_of(
    st.integers(0, 5000), st.sampled_from([-1, 2**32 - 1, 2**32, 2**63, -(2**63) - 1]), st.integers()
)


@needs_cseg
@PROPS
@given(
    st.integers(0, 2**40),
    st.sampled_from([12, 24, 1 << 20]),
    st.lists(
        st.tuples(st.sampled_from(["offset", "time", "truncate"]), index_numbers, index_numbers), max_size=40
    ),
)
def test_the_compiled_index_appends_agree_with_the_reference(base, max_bytes, sequence):
    """``_cseg.offset_index_append`` / ``time_index_maybe_append`` against ``OffsetIndex.append_py`` /
    ``TimeIndex.maybe_append_py``: the same result or error, the same entries, from the same entries."""
    with tempfile.TemporaryDirectory() as d:
        sides = []
        for name, offset_append, time_append in (
            ("py", OffsetIndex.append_py, TimeIndex.maybe_append_py),
            ("c", _cseg.offset_index_append, _cseg.time_index_maybe_append),
        ):
            oi = OffsetIndex(Path(d) / f"{name}.index", base, max_bytes)
            ti = TimeIndex(Path(d) / f"{name}.timeindex", base, max_bytes)
            sides.append((oi, ti, offset_append, time_append))

        def outcome(side, kind, a, b):
            oi, ti, offset_append, time_append = side
            try:
                if kind == "offset":
                    return ("ok", offset_append(oi, base + a, b))
                if kind == "time":
                    return ("ok", time_append(ti, a, base + b))
                oi.truncate_to(base + abs(a))
                ti.truncate_to(base + abs(a))
                return ("ok", None)
            except Exception as e:  # noqa: BLE001 - the reference's error, whatever it is, must be the same
                return ("error", type(e), str(e))

        def entries(side):
            oi, ti = side[0], side[1]
            return [list(c) for c in (oi._keys, oi._values, ti._keys, ti._values)]  # noqa: SLF001

        for kind, a, b in sequence:
            assert outcome(sides[1], kind, a, b) == outcome(sides[0], kind, a, b), kind
            assert entries(sides[1]) == entries(sides[0]), kind
        for oi, ti, _, _ in sides:
            oi.close()
            ti.close()


def test_the_indexes_append_with_the_compiled_twins_when_built():
    if _cseg is None or os.environ.get("LOGSOURCE_NO_EXTENSIONS"):
        assert OffsetIndex.append is OffsetIndex.append_py
        assert TimeIndex.maybe_append is TimeIndex.maybe_append_py
    else:
        assert OffsetIndex.append is _cseg.offset_index_append
        assert TimeIndex.maybe_append is _cseg.time_index_maybe_append


@pytest.mark.parametrize("layout", ["arrow-body", "kafka"])
@pytest.mark.parametrize("path", ["one-call", "general"])
def test_batches_without_timestamps_add_no_time_index_entry(tmp_path, monkeypatch, layout, path):
    """A batch whose timestamps are all -1 (Kafka's NO_TIMESTAMP) adds no time-index entry, even with
    an index entry per batch (index.interval.bytes 0): on the one-call append (write_plain_batch for one
    batch, check_and_stamp for a run) and on the general path, compiled and pure (the tail's and the
    index's twins); the first batch with a timestamp adds one."""
    from pyspark_logsource.broker.log import PartitionLog
    from pyspark_logsource.broker.log import append as log_append
    from pyspark_logsource.format import encode as fmt_encode
    from pyspark_logsource.format.kafka_encode import encode_kafka

    taken = []
    if path == "general":
        monkeypatch.setattr(log_append, "check_and_stamp", lambda *a: None)
        monkeypatch.setattr(log_append, "write_plain_batch", lambda *a: None)
    else:
        check, write = log_append.check_and_stamp, log_append.write_plain_batch
        monkeypatch.setattr(log_append, "check_and_stamp", lambda *a: taken.append(check(*a)) or taken[-1])
        monkeypatch.setattr(log_append, "write_plain_batch", lambda *a: taken.append(write(*a)) or taken[-1])
    encode = fmt_encode if layout == "arrow-body" else encode_kafka

    def batch(ts: int) -> bytearray:
        return bytearray(encode([b"a", b"b"], None, ts))

    lg = PartitionLog(tmp_path / "t-0", LogConfig(index_interval_bytes=0), "t", 0)
    try:
        for _ in range(3):
            lg.append(batch(-1))
        lg.append(batch(-1) + batch(-1))
        seg = lg.active_segment
        assert lg.log_end_offset == 10 and seg.max_timestamp == -1
        assert seg.offset_index.last_entry is not None  # indexed: the time index could have had entries
        assert seg.time_index.last_entry is None
        lg.append(batch(1000))
        assert seg.time_index.last_entry == (1000, 10)
        lg.append(batch(-1))
        assert seg.time_index.last_entry == (1000, 10)
    finally:
        lg.close()
    if path == "one-call":
        assert sum(t is not None for t in taken) == 6  # the one-call append took every append
