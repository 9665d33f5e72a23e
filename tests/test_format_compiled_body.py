"""format/_cbody.pyx against its pure-Python references (issue 25): the Arrow-body encode of a
producer batch and the log append's check-and-stamp.

The compiled module is imported directly, so these tests compare it with the
references on both test runs (with the extensions, and with
``LOGSOURCE_NO_EXTENSIONS=1``, when the package itself uses only the
references). Each compiled function returns None for input it does not take;
whenever it returns a result, that result is byte-identical to the reference's,
and the public function (compiled first, reference on None) gives the same
result or the same typed error as the reference alone. The last tests run the
log's append with and without the one-call path and compare the files.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_format_compiled import guarded  # a buffer ending at a PROT_NONE page

from pyspark_logsource.broker.log import LogConfig, PartitionLog
from pyspark_logsource.broker.log import append as log_append
from pyspark_logsource.broker.log.config import LONG_MAX
from pyspark_logsource.errors import LogSourceError
from pyspark_logsource.format import arrow_body, header, plain_run
from pyspark_logsource.format import encode as fmt_encode
from pyspark_logsource.format.crc import crc32c
from pyspark_logsource.format.kafka_encode import encode_kafka

try:
    from pyspark_logsource.format import _cbody as cb
except ImportError:  # not built: `python scripts/build_ext.py` builds it in place
    cb = None
    if os.environ.get("CI"):
        raise

needs_cbody = pytest.mark.skipif(cb is None, reason="format/_cbody is not built: pure-Python path only")
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT64 = st.integers(-(2**63), 2**63 - 1)


def _outcome(fn, *args, **kw):
    try:
        return ("ok", fn(*args, **kw))
    except Exception as e:  # noqa: BLE001 - the reference's error, whatever it is, must be the same
        return ("error", type(e), str(e))


def _reference_encode(*args, **kw):
    saved = arrow_body.cbody
    arrow_body.cbody = None
    try:
        return arrow_body.encode_records(*args, **kw)
    finally:
        arrow_body.cbody = saved


def _compiled_encode(*args, **kw):
    saved = arrow_body.cbody
    arrow_body.cbody = cb
    try:
        return arrow_body.encode_records(*args, **kw)
    finally:
        arrow_body.cbody = saved


# ---------------------------------------------------------------- encode_records

_value = st.one_of(st.binary(max_size=40), st.binary(max_size=300))


@st.composite
def producer_batch(draw, plain: bool = False):
    """encode_records' arguments: plain ones, or (without ``plain``) every kind the producer hands it."""
    n = draw(st.integers(1, 80))
    odd = st.one_of(st.none(), st.just(bytearray(b"ba")), st.just(memoryview(b"mv")), st.just("str"))
    item = _value if plain else st.one_of(_value, _value, _value, odd)
    values = draw(st.lists(item, min_size=n, max_size=n))
    keys = draw(st.one_of(st.none(), st.lists(_value if plain else item, min_size=n, max_size=n)))
    if not plain and keys is not None and draw(st.booleans()):
        keys = keys[:-1]  # a length mismatch
    base = draw(st.integers(0, 2**41) if plain else INT64)
    spread = st.integers(-5000, 5000) if plain else st.one_of(st.integers(-5000, 5000), INT64)
    timestamps = [base] + [
        base + d if plain else d for d in draw(st.lists(spread, min_size=n - 1, max_size=n - 1))
    ]
    headers = None
    if not plain and draw(st.integers(0, 4)) == 0:
        headers = [[("h", b"v")] if i % 2 else None for i in range(n)]
    codec = 0 if plain else draw(st.sampled_from([0, 0, 0, 1, "none"]))
    pid = draw(st.integers(-1, 2**40) if plain else st.one_of(st.integers(-1, 2**40), INT64, st.just(2**63)))
    epoch = draw(st.integers(-1, 32767) if plain else st.integers(-40000, 40000))
    seq = draw(st.integers(-1, 2**31 - 1) if plain else st.integers(-(2**32), 2**32))
    return (values, keys, timestamps, headers), {
        "codec": codec,
        "producer_id": pid,
        "producer_epoch": epoch,
        "base_sequence": seq,
    }


@needs_cbody
@PROPS
@given(producer_batch(plain=True))
def test_plain_batches_encode_byte_identically_in_c(batch):
    args, kw = batch
    out = cb.encode_records(*args, kw["codec"], kw["producer_id"], kw["producer_epoch"], kw["base_sequence"])
    assert out is not None  # a plain batch is the compiled encode's to take
    assert type(out) is bytearray
    assert out == _reference_encode(*args, **kw)
    header.validate(out)


@needs_cbody
@PROPS
@given(producer_batch())
def test_any_producer_batch_gives_the_same_batch_or_the_same_error(batch):
    args, kw = batch
    direct = cb.encode_records(
        *args, kw["codec"], kw["producer_id"], kw["producer_epoch"], kw["base_sequence"]
    )
    ref = _outcome(_reference_encode, *args, **kw)
    if direct is not None:
        assert ref == ("ok", direct)
    assert _outcome(_compiled_encode, *args, **kw) == ref


@needs_cbody
def test_encode_edges():
    kw = {"codec": 0, "producer_id": -1, "producer_epoch": -1, "base_sequence": -1}
    # the largest and smallest timestamps; deltas that do not fit int64 are the reference's to refuse
    for ts in ([2**63 - 1], [-(2**63)], [0, 2**63 - 1], [-1, 2**63 - 1], [1, -(2**63)], [True], [2**63]):
        values = [b"v"] * len(ts)
        assert _outcome(_compiled_encode, values, None, ts, None, **kw) == _outcome(
            _reference_encode, values, None, ts, None, **kw
        )
    assert cb.encode_records([b"v", b"w"], None, [-1, 2**63 - 1], None, 0, -1, -1, -1) is None  # delta 2**63
    assert cb.encode_records([b"v", b"w"], None, [1, -(2**63)], None, 0, -1, -1, -1) is None
    # not lists, bytes subclasses, empty: the reference's
    assert cb.encode_records((b"v",), None, [1], None, 0, -1, -1, -1) is None
    assert cb.encode_records([b"v"], None, (1,), None, 0, -1, -1, -1) is None
    assert cb.encode_records([], None, [], None, 0, -1, -1, -1) is None

    class B(bytes):
        pass

    assert cb.encode_records([B(b"v")], None, [1], None, 0, -1, -1, -1) is None
    # empty values and keys, a batch of one
    for keys in (None, [b""], [b"k"]):
        out = cb.encode_records([b""], keys, [7], None, 0, 5, 1, 0)
        assert out == _reference_encode(
            [b""], keys, [7], None, **{**kw, "producer_id": 5, "producer_epoch": 1, "base_sequence": 0}
        )


# ---------------------------------------------------------------- check_and_stamp


def _reseal(buf: bytearray, pos: int = 0) -> None:
    size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
    struct.pack_into(">I", buf, pos + 17, crc32c(memoryview(buf)[pos + 21 : pos + size]))


@st.composite
def one_batch(draw):
    n = draw(st.integers(1, 6))
    values = [draw(st.binary(max_size=30)) for _ in range(n)]
    keys = draw(st.one_of(st.none(), st.just([b"k%d" % i for i in range(n)])))
    kind = draw(
        st.sampled_from(
            ["plain", "plain", "plain", "idempotent", "kafka", "kafka", "transactional", "nullkey"]
            + ["kafka_nullkey", "kafka_headers", "kafka_gzip", "kafka_idempotent", "kafka_transactional"]
        )
    )
    ts = draw(st.integers(0, 2**41))
    if kind.startswith("kafka"):  # a Kafka client's batch: plain when uncompressed, neither idempotent nor
        kw: dict = {}  # transactional, whatever its keys and headers
        if kind == "kafka_nullkey":
            keys = [b"k%d" % i if draw(st.booleans()) else None for i in range(n)]
        elif kind == "kafka_headers":
            kw["headers"] = [[("h", draw(st.one_of(st.none(), st.binary(max_size=5))))] for _ in range(n)]
        elif kind == "kafka_gzip":
            kw["codec"] = "gzip"
        elif kind == "kafka_idempotent":
            kw.update(producer_id=draw(st.integers(0, 2**40)), producer_epoch=0, base_sequence=0)
        elif kind == "kafka_transactional":
            kw.update(producer_id=3, producer_epoch=0, base_sequence=0, transactional=True)
        return encode_kafka(values, keys, ts, **kw)
    if kind == "nullkey":
        keys = [None] + [b"k"] * (n - 1)
    pid, seq = (draw(st.integers(0, 2**40)), draw(st.integers(0, 1000))) if kind == "idempotent" else (-1, -1)
    if kind == "plain" and draw(st.booleans()):  # a producer id without a sequence is still plain
        pid = draw(st.integers(0, 2**40))
    out = fmt_encode(
        values, keys, ts, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq
    )
    if kind == "transactional":
        attrs = struct.unpack_from(">h", out, 21)[0] | header.TRANSACTIONAL_BIT
        struct.pack_into(">h", out, 21, attrs)
        _reseal(out)
    return out


@st.composite
def produced_run(draw):
    batches = draw(st.lists(one_batch(), min_size=1, max_size=4))
    buf = bytearray().join(batches)
    mutation = draw(
        st.sampled_from(["none", "none", "none", "byte", "resealed", "body_resealed", "truncate", "append"])
    )
    if mutation == "byte":
        i = draw(st.integers(0, len(buf) - 1))
        buf[i] ^= draw(st.integers(1, 255))
    elif mutation == "resealed":  # a header field changed, the CRC made to match it
        i = draw(st.integers(21, 60))
        buf[i] ^= draw(st.integers(1, 255))
        _reseal(buf)
    elif mutation == "body_resealed" and len(batches[0]) > 61:
        # a byte of the first batch's body changed (a Kafka record's varints, lengths, offset delta;
        # or our Arrow body), the CRC made to match it: only the record check can refuse it
        i = draw(st.integers(61, len(batches[0]) - 1))
        buf[i] ^= draw(st.sampled_from([1, 2, 0x40, 0x80, 0xFF]))
        _reseal(buf)
    elif mutation == "truncate":
        del buf[draw(st.integers(0, len(buf) - 1)) :]
    elif mutation == "append":
        buf += draw(st.binary(min_size=1, max_size=70))
    return buf


@st.composite
def kafka_run(draw):
    """A run a Kafka client writes (Kafka's record layout, uncompressed: the one-call path's to take),
    whole or damaged: null keys (a compacted topic's KIP-467 refusal), null values, headers; a corrupt
    CRC, a broken record varint or length (the CRC made to match), a record count that is not the
    records', a cut batch."""
    batches = []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 5))
        values = draw(st.lists(st.one_of(st.none(), st.binary(max_size=20)), min_size=n, max_size=n))
        keys = draw(
            st.one_of(
                st.none(), st.lists(st.one_of(st.none(), st.binary(max_size=8)), min_size=n, max_size=n)
            )
        )
        headers = draw(st.one_of(st.none(), st.just([[("h", b"x"), ("e", None)]] * n)))
        batches.append(encode_kafka(values, keys, draw(st.integers(0, 2**41)), headers))
    buf = bytearray().join(batches)
    first = len(batches[0])
    damage = draw(st.sampled_from(["none", "none", "none", "crc", "varint", "varint", "count", "cut"]))
    if damage == "crc":
        buf[draw(st.integers(21, first - 1))] ^= draw(st.integers(1, 255))
    elif damage == "varint":
        buf[draw(st.integers(61, first - 1))] ^= draw(st.sampled_from([1, 2, 0x40, 0x7F, 0x80, 0xFF]))
        _reseal(buf)
    elif damage == "count":  # the header's count and last offset delta agree, the records do not
        count = struct.unpack_from(">i", buf, 57)[0] + draw(st.sampled_from([-1, 1]))
        struct.pack_into(">i", buf, 23, count - 1)
        struct.pack_into(">i", buf, 57, count)
        _reseal(buf)
    elif damage == "cut":
        del buf[draw(st.integers(1, len(buf) - 1)) :]
    return buf


#: the runs the one-call path is checked on: any producer's (ours, Kafka's layout, ...) and Kafka clients'
any_run = st.one_of(produced_run(), kafka_run())


def _stamp_args(draw):
    return (
        draw(st.one_of(st.integers(61, 400), st.just(1 << 20))),
        draw(st.booleans()),
        draw(st.one_of(st.integers(0, 2**40), st.just(2**63 - 3), st.integers(-5, -1))),
        draw(st.one_of(st.integers(-1, 100), st.just(2**31), st.just(-(2**31) - 1))),
    )


@needs_cbody
@PROPS
@given(any_run, st.data())
def test_check_and_stamp_agrees_with_the_reference(buf, data):
    max_size, refuse_keyless, offset, epoch = _stamp_args(data.draw)
    a, b = bytearray(buf), bytearray(buf)
    got = cb.check_and_stamp(max_size, refuse_keyless, a, offset, epoch)
    want = plain_run.check_and_stamp_py(max_size, refuse_keyless, b, offset, epoch)
    assert got == want
    assert a == b  # stamped alike, or (None) both untouched
    if got is None:
        assert a == buf


@PROPS
@given(any_run, st.data())
def test_check_and_stamp_takes_exactly_the_runs_the_general_path_stamps_alike(buf, data):
    """Whatever path is in use: a run it takes passes every check of AppendValidator.check (header, CRC,
    a Kafka-layout batch's records, the null keys a compacted topic refuses) and is stamped as stamp_run
    stamps it, its Arrow flag the check's; a run it refuses is untouched, and is one the general path
    refuses with a typed error or must take itself (idempotent, transactional, compressed Kafka layout,
    offsets out of range)."""
    max_size, refuse_keyless, offset, epoch = _stamp_args(data.draw)
    mine = bytearray(buf)
    got = plain_run.check_and_stamp(max_size, refuse_keyless, mine, offset, epoch)
    config = LogConfig(max_message_bytes=max_size, cleanup_policy="compact" if refuse_keyless else "delete")
    ref = bytearray(buf)
    try:
        mv, batches, flags = log_append.AppendValidator("t-0", "t", config).check(ref, False)
    except LogSourceError:
        assert got is None
        assert mine == buf
        return
    if got is None:
        assert mine == buf
        assert (
            flags & (log_append.TRANSACTIONAL | log_append.IDEMPOTENT)
            or any(not h.is_arrow_body and h.attributes & header.CODEC_MASK for _, h in batches)
            or not 0 <= offset <= 2**63 - 1 - sum(h.record_count for _, h in batches)
            or not -(2**31) <= epoch < 2**31
        )
        return
    stamped: list = []
    nxt = log_append.stamp_run(mv, batches, offset, epoch, 0, False, None, stamped)
    assert (mine, got) == (ref, (bool(flags & log_append.ARROW), stamped))
    assert nxt == got[1][-1][1] + got[1][-1][4]
    for _, h in batches:
        assert not h.is_idempotent and not h.attributes & header.TXN_BITS
        assert h.is_arrow_body or not h.attributes & header.CODEC_MASK


@needs_cbody
@PROPS
@given(any_run, st.data())
def test_check_and_stamp_reads_nothing_past_the_buffer(buf, data):
    """Truncated runs and huge claimed lengths ending at a page's end (reading past it faults)."""
    b = bytearray(buf)
    if len(b) >= 12 and data.draw(st.booleans()):  # a batch length claiming far more than there is
        struct.pack_into(">i", b, 8, data.draw(st.sampled_from([2**31 - 1, len(b), len(b) - 11])))
    with guarded(bytes(b)) as mv:
        got = cb.check_and_stamp(1 << 40, False, mv, 0, 0)
        assert got == plain_run.check_and_stamp_py(1 << 40, False, bytearray(b), 0, 0)


@pytest.mark.parametrize("check", [plain_run.check_and_stamp_py] + ([cb.check_and_stamp] if cb else []))
def test_check_and_stamp_refuses_what_it_must_not_stamp(check):
    plain = fmt_encode([b"a", b"b"], None, 5)
    assert check(1 << 20, False, bytearray(plain), 10, 3) == (True, [(0, 10, len(plain), 5, 2)])
    assert check(1 << 20, True, bytearray(plain), 10, 3) is None  # keyless on a compacted topic
    assert check(len(plain) - 1, False, bytearray(plain), 10, 3) is None  # over max.message.bytes
    assert check(1 << 20, False, bytes(plain), 10, 3) is None  # read-only: the general path copies it
    assert check(1 << 20, False, memoryview(bytes(plain)), 10, 3) is None
    assert check(1 << 20, False, memoryview(bytearray(plain)).cast("b"), 10, 3) is None
    assert check(1 << 20, False, bytearray(), 10, 3) is None
    assert check(1 << 20, False, bytearray(plain), -1, 3) is None
    assert check(1 << 20, False, bytearray(plain), 10, 2**31) is None
    assert check(1 << 20, False, bytearray(plain), 2**63 - 2, 3) is None  # the last offset overflows
    assert check(1 << 20, False, bytearray(plain), True, 3) is None  # not an int
    whole = bytearray(plain + plain)
    view = memoryview(whole)[len(plain) :]
    assert check(1 << 20, False, view, 0, 0) == (True, [(0, 0, len(plain), 5, 2)])
    assert whole[: len(plain)] == plain  # only the view's batch was stamped
    idem = fmt_encode([b"a"], None, 5, producer_id=7, producer_epoch=0, base_sequence=0)
    assert check(1 << 20, False, bytearray(plain + idem), 0, 0) is None
    # Kafka's layout (a Java producer's, librdkafka's): taken uncompressed, its records checked
    kafka = encode_kafka([b"a"], [b"k"], 5)
    assert check(1 << 20, True, bytearray(kafka), 0, 0) == (False, [(0, 0, len(kafka), 5, 1)])
    assert check(1 << 20, False, bytearray(kafka + plain), 0, 0) == (
        True,
        [(0, 0, len(kafka), 5, 1), (len(kafka), 1, len(plain), 5, 2)],
    )
    keyless = encode_kafka([b"a", b"b"], [b"k", None], 5)
    assert check(1 << 20, False, bytearray(keyless), 0, 0) == (False, [(0, 0, len(keyless), 5, 2)])
    assert check(1 << 20, True, bytearray(keyless), 0, 0) is None  # KIP-467: the general path names it
    assert check(1 << 20, False, bytearray(encode_kafka([b"a" * 100], None, 5, codec="gzip")), 0, 0) is None
    kidem = encode_kafka([b"a"], None, 5, producer_id=7, producer_epoch=0, base_sequence=0)
    assert check(1 << 20, False, bytearray(kidem), 0, 0) is None
    bad = bytearray(kafka)
    bad[61] = 0x7F  # the record's length varint overruns the batch (the CRC made to match)
    _reseal(bad)
    assert check(1 << 20, False, bad, 0, 0) is None
    bad = bytearray(kafka)
    bad[-1] = 1  # the header count: one header that is not there
    _reseal(bad)
    assert check(1 << 20, False, bad, 0, 0) is None


# ---------------------------------------------------------------- the log, with and without the one-call path


def _runs() -> list[bytearray]:
    out = []
    seq = 0
    for i in range(40):
        n = 1 + i % 7
        keys = None if i % 3 else [b"k%d" % j for j in range(n)]
        if i % 5 == 4:  # an idempotent run between the plain ones takes the general path
            out.append(
                fmt_encode(
                    [b"i%d" % i] * n, keys, 1000 + i, producer_id=9, producer_epoch=0, base_sequence=seq
                )
            )
            seq += n
        elif i % 11 == 10:
            out.append(encode_kafka([b"x" * i] * n, keys, 1000 + i))
        else:
            out.append(fmt_encode([bytes([i]) * (50 * i)] * n, keys, 2000 - i))
    return out


def _append_all(directory: Path, runs: list[bytearray]) -> tuple[list, dict[str, bytes]]:
    cfg = LogConfig(segment_bytes=6000, index_interval_bytes=500, flush_ms=LONG_MAX, flush_messages=LONG_MAX)
    lg = PartitionLog(directory, cfg, "t", 0)
    infos = [lg.append(bytearray(r)) for r in runs]
    infos.append(lg.append(bytearray(runs[0]), leader_epoch=4))
    lg.close()
    files = {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}
    return infos, files


def test_the_log_writes_the_same_files_with_and_without_the_one_call_path(tmp_path, monkeypatch):
    runs = _runs()
    taken = []
    check, write = log_append.check_and_stamp, log_append.write_plain_batch
    monkeypatch.setattr(log_append, "check_and_stamp", lambda *a: taken.append(check(*a)) or taken[-1])
    monkeypatch.setattr(log_append, "write_plain_batch", lambda *a: taken.append(write(*a)) or taken[-1])
    fast = _append_all(tmp_path / "fast" / "t-0", runs)
    assert sum(t is not None for t in taken) > 25  # the plain runs took a one-call path
    monkeypatch.setattr(log_append, "check_and_stamp", lambda *a: None)
    monkeypatch.setattr(log_append, "write_plain_batch", lambda *a: None)
    general = _append_all(tmp_path / "general" / "t-0", runs)
    assert fast == general
    assert sum(1 for n in fast[1] if n.endswith(".log")) > 3  # it rolled: several segments, indexes


def test_a_refused_run_gets_the_general_paths_typed_error(tmp_path):
    from pyspark_logsource.errors import CorruptRecord, InvalidRecord

    lg = PartitionLog(tmp_path / "t-0", LogConfig(cleanup_policy="compact"), "t", 0)
    bad = fmt_encode([b"a"], [b"k"], 5)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecord, match="CRC mismatch"):
        lg.append(bad)
    with pytest.raises(InvalidRecord, match="refuses records without a key"):
        lg.append(fmt_encode([b"a"], None, 5))
    assert lg.log_end_offset == 0
    assert lg.append(fmt_encode([b"a"], [b"k"], 5))[:2] == (0, 0)
    lg.close()


@pytest.fixture
def crc_that_changes_the_run(monkeypatch):
    """The compiled CRC through its Python-level call (no C function), which lengthens the checked
    batch's length field while it runs, as another thread writing to the buffer then could: the returned
    list takes the buffer to change."""
    from pyspark_logsource.format import _speedups

    target: list[bytearray] = []

    def crc_and_change(data):
        value = crc32c(data)
        if target:
            struct.pack_into(">i", target[0], 8, len(target[0]))  # the batch now claims past the run
        return value

    cb.set_crc32c_function(0)
    monkeypatch.setattr(cb, "_py_crc32c", crc_and_change)
    yield target
    monkeypatch.undo()
    _speedups._wire_crc(cb)  # the hardware CRC back, as the module was loaded


@needs_cbody
def test_a_run_changed_while_its_crc_runs_is_a_corrupt_record(tmp_path, crc_that_changes_the_run):
    """check_and_stamp and write_plain_batch refuse a buffer that changed between their checks and the
    stamp (or write) with CorruptRecord (Kafka's CORRUPT_MESSAGE), nothing stamped or written; before,
    an untyped BufferError."""
    from pyspark_logsource.errors import CorruptRecord

    batch = fmt_encode([b"a", b"b"], None, 5)
    run = bytearray(batch)
    crc_that_changes_the_run.append(run)
    with pytest.raises(CorruptRecord, match="changed while it was checked"):
        cb.check_and_stamp(1 << 20, False, run, 10, 3)
    assert run[12:] == batch[12:] and run[:8] == batch[:8]  # not stamped
    run[:] = batch
    path = tmp_path / "seg.log"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        with pytest.raises(CorruptRecord, match="changed while it was checked"):
            cb.write_plain_batch(1 << 20, False, run, 10, 3, fd, 0, 1 << 30, 1 << 40)
    finally:
        os.close(fd)
    assert path.stat().st_size == 0 and run[:8] == batch[:8]
    # the broker's append: the partition answers CORRUPT_MESSAGE, the log unchanged (a run of one batch
    # takes write_plain_batch, of two check_and_stamp); with the extensions switched off the log does not
    # call them
    if log_append.check_and_stamp is not cb.check_and_stamp:
        return
    lg = PartitionLog(tmp_path / "t-0", LogConfig(), "t", 0)
    try:
        for records in (bytearray(batch), bytearray(batch + batch)):
            crc_that_changes_the_run[:] = [records]
            with pytest.raises(CorruptRecord) as e:
                lg.append(records)
            assert e.value.code == 2
            assert lg.log_end_offset == 0
        crc_that_changes_the_run.clear()
        assert lg.append(bytearray(batch))[:2] == (0, 1)
    finally:
        lg.close()
