"""The compiled producer accumulator (client/_caccum.pyx) against the pure-Python reference (issue 25).

* ``RecordBuffer.encode`` writes the batch ``format.arrow_body.encode_records`` writes from the
  same records (lists, as the pure-Python accumulator holds them), byte for byte: null and
  present values and keys in any mix, batches of 1 to past ``SMALL_BATCH`` records (both of the
  reference's encoders), any timestamps, every codec, producer id / epoch / sequence; and the
  records come back out of the buffer unchanged (``to_lists``, what a record with headers spills
  the buffer into);
* what it does not take gives the reference's typed error (an empty batch) or OverflowError (a
  timestamp outside int64: the producer keeps that record in lists, where the reference's
  encode answers for it);
* through a Producer: keyless, keyed, explicit-partition and null-value records all go into
  the C buffers from the compiled send() (a key to its hash's partition, as the Python path), a
  partition out of range and a closed producer give the Python path's typed errors, a send() while
  another thread holds the accumulator's lock waits for it, and a consumer reads every field back;
* the compiled ``add_alone`` (batch size 1: a batch per record, made in C) makes the batch
  ``RecordAccumulator.add_alone`` makes, slot by slot, untracked by the cyclic GC until it takes a
  future or an error, and a cycle through it is still collected.

Both implementations run in one process (the buffer beside the lists), so this module checks the
same thing under ``LOGSOURCE_NO_EXTENSIONS=1`` (the Producer test then runs the pure path).
"""

from __future__ import annotations

import gc
import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_logsource import Admin, Consumer, Producer
from pyspark_logsource.client.accumulator import CompiledAccumulator, ProducerBatch, RecordAccumulator
from pyspark_logsource.errors import ClientClosed, InvalidRequest, UnknownTopicOrPartition
from pyspark_logsource.format import compression, decode
from pyspark_logsource.format.arrow_body import SMALL_BATCH, encode_records

try:
    from pyspark_logsource.client import _caccum as ca
except ImportError:  # not built: `python scripts/build_ext.py` or `pip install -e .` builds it
    ca = None
    if os.environ.get("CI"):
        raise

needs_c = pytest.mark.skipif(ca is None, reason="the compiled accumulator (client/_caccum) is not built")
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_opt_bytes = st.one_of(st.none(), st.binary(max_size=200))
_ts = st.integers(-(2**62), 2**62)
_record = st.tuples(_opt_bytes, _opt_bytes, _ts)


def _reference(records: list, codec: int, pid: int, epoch: int, seq: int) -> bytearray:
    values = [v for v, _, _ in records]
    keys = [k for _, k, _ in records]
    return encode_records(
        values,
        keys if any(k is not None for k in keys) else None,  # the accumulator's has_keys
        [t for _, _, t in records],
        None,
        codec=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def _buffer(records: list):
    buf = ca.RecordBuffer()
    for i, (v, k, t) in enumerate(records):
        assert buf.add(v, k, t) == i
    return buf


@needs_c
@PROPS
@given(
    records=st.one_of(
        st.lists(_record, min_size=1, max_size=8),
        st.lists(_record, min_size=SMALL_BATCH - 2, max_size=SMALL_BATCH + 40),
        # the producer's common batches: bytes values, no key, timestamps a few ms apart
        st.lists(
            st.tuples(st.binary(max_size=300), st.none(), st.integers(1_700_000_000_000, 1_700_000_000_050))
        ),
    ).filter(bool),
    codec=st.sampled_from([compression.NONE, compression.GZIP, compression.LZ4, compression.ZSTD]),
    pid=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 2**15 - 1),
    seq=st.integers(-1, 2**31 - 1),
)
def test_buffer_encode_is_byte_identical_to_encode_records(records, codec, pid, epoch, seq):
    buf = _buffer(records)
    assert len(buf) == len(records)
    got = buf.encode(codec, pid, epoch, seq)
    assert type(got) is bytearray
    assert got == _reference(records, codec, pid, epoch, seq)
    values, keys, stamps = buf.to_lists()
    assert values == [v for v, _, _ in records]
    assert stamps == [t for _, _, t in records]
    want_keys = [k for _, k, _ in records]
    assert keys == (want_keys if any(k is not None for k in want_keys) else None)
    # and the batch reads back as what went in
    assert [(r.value, r.key, r.timestamp) for r in decode(bytes(got)).records()] == list(records)


@needs_c
@PROPS
@given(
    records=st.lists(_record, min_size=1, max_size=4),
    epoch=st.one_of(st.integers(2**15, 2**31 - 1), st.integers(-(2**31), -(2**15) - 1)),
)
def test_buffer_encode_refuses_an_epoch_outside_int16_as_the_reference(records, epoch):
    """The header is written in C (``_put_header``): a field out of range is the reference's InvalidRequest."""
    with pytest.raises(InvalidRequest, match="out of range"):
        _reference(records, compression.NONE, 7, epoch, 0)
    with pytest.raises(InvalidRequest, match="out of range"):
        _buffer(records).encode(compression.NONE, 7, epoch, 0)


@needs_c
def test_buffer_refuses_what_it_does_not_hold():
    buf = ca.RecordBuffer()
    with pytest.raises(InvalidRequest, match="at least one record"):
        buf.encode(0, -1, -1, -1)
    with pytest.raises(OverflowError):
        buf.add(b"v", None, 2**63)
    with pytest.raises(TypeError):
        buf.add("a str", None, 0)
    with pytest.raises(TypeError):
        buf.add(b"v", bytearray(b"k"), 0)
    assert len(buf) == 0  # nothing half-appended
    buf.add(b"v", None, -(2**63))
    assert buf.to_lists() == ([b"v"], None, [-(2**63)])


def test_compiled_send_takes_every_kind_of_record_into_the_buffers(broker):
    from pyspark_logsource.client import producer as producer_module

    Admin(broker.bootstrap).create_topic("cbuf", 2)
    with Producer(broker.bootstrap, linger_ms=60000, batch_size=1 << 20) as p:
        firsts = [p.send("cbuf", b"open", partition=q) for q in (0, 1)]  # the Python path opens the batches
        futs = [
            p.send("cbuf", b"a", partition=0),
            p.send("cbuf", None, key=b"k", partition=0),  # a tombstone
            p.send("cbuf", b"c", key=b"k2", partition=1),
            p.send("cbuf", b"d", partition=1, timestamp_ms=1234),
            p.send("cbuf", b"e", key=b"x" * 3),
        ]
        assert futs[2].partition == 1 and futs[4].partition == p.partition_for(
            "cbuf", b"xxx"
        )  # the key's hash
        with pytest.raises(UnknownTopicOrPartition):
            p.send("cbuf", b"z", partition=2)  # out of range: the Python method's typed error
        # the accumulator's lock held elsewhere: send() waits for it (the C path takes it only when free)
        held: list = []
        with p._acc.lock:
            t = threading.Thread(target=lambda: held.append(p.send("cbuf", b"f", partition=0)))
            t.start()
            t.join(0.2)
            assert t.is_alive() and not held
        t.join(10)
        futs.append(held[0])
        batches = {id(f._batch) for f in firsts + futs}
        if producer_module._caccum is not None:
            assert all(f._batch.buf is not None for f in firsts + futs)
            assert len(batches) == 2  # every record joined an open batch of its partition
        p.flush(30)
        offsets = [f.result(10) for f in firsts + futs]
    for kw in ({}, {"key": b"k"}, {"partition": 1}):  # closed: every path refuses
        with pytest.raises(ClientClosed):
            p.send("cbuf", b"late", **kw)
    parts = {q: [] for q in (0, 1)}
    with Consumer(broker.bootstrap) as c:
        c.assign([("cbuf", 0), ("cbuf", 1)])
        c.seek(("cbuf", 0), 0)
        c.seek(("cbuf", 1), 0)
        for _ in range(50):
            for m in c.poll(500):
                parts[m.partition].append((m.offset, m.key, m.value, m.timestamp))
            if sum(map(len, parts.values())) >= len(offsets):
                break
    got = {(q, o): (k, v, t) for q, rows in parts.items() for o, k, v, t in rows}
    sent = [(None, b"open"), (None, b"open"), (None, b"a"), (b"k", None), (b"k2", b"c"), (None, b"d")]
    sent += [(b"xxx", b"e"), (None, b"f")]
    for (q, o), (k, v) in zip(offsets, sent, strict=True):
        assert got[(q, o)][:2] == (k, v)
    assert got[offsets[5]][2] == 1234


#: the compiled accumulator as the producer uses it (None with LOGSOURCE_NO_EXTENSIONS=1)
needs_acc = pytest.mark.skipif(
    CompiledAccumulator is None,
    reason="the compiled accumulator is off (LOGSOURCE_NO_EXTENSIONS=1 or not built)",
)


def _accumulators():
    cfg = {"batch_size": 1, "linger_ms": 0, "buffer_memory": 1 << 20, "max_block_ms": 0}
    return RecordAccumulator(**cfg), CompiledAccumulator(**cfg)


@needs_acc
@PROPS
@given(
    records=st.lists(
        st.tuples(
            st.sampled_from(["t", "topic-ü", ""]),
            st.integers(0, 2**31 - 1),
            _opt_bytes,
            st.integers(-(2**63), 2**63 - 1),
            st.integers(0, 2**40),
        ),
        min_size=1,
        max_size=6,
    ),
    idle=st.booleans(),
)
def test_compiled_add_alone_makes_the_references_batch(records, idle):
    """The compiled add_alone (a one-record batch made in C, batch size 1) against RecordAccumulator.add_alone:
    every slot of the batch alike (its record in the C buffer, which holds what the lists hold), queued in
    the same place, and the sender woken the same way."""
    ref, comp = _accumulators()
    for acc in (ref, comp):
        acc.sender_idle = idle
    with ref.lock, comp.lock:
        for topic, partition, value, ts, size in records:
            want = ref.add_alone(topic, partition, value, ts, size)
            got = comp.add_alone(topic, partition, value, ts, size)
            for name in ProducerBatch.__slots__:
                if name in ("created", "values", "timestamps", "buf"):
                    continue
                assert getattr(got, name) == getattr(want, name), name
            assert abs(got.created - want.created) < 5.0 and isinstance(got.created, float)
            assert got.values is None and got.timestamps is None and want.buf is None
            assert (
                got.buf.to_lists()
                == ([value], None, [ts])
                == (list(want.values), None, list(want.timestamps))
            )
            assert isinstance(got, ProducerBatch) and got in comp.incomplete and comp.ready[got.tp][-1] is got
            assert got.tp is not want.tp and not gc.is_tracked(got)
    assert {tp: [b.buf.to_lists()[0] for b in q] for tp, q in comp.ready.items()} == {
        tp: [list(b.values) for b in q] for tp, q in ref.ready.items()
    }
    assert comp.used == ref.used == 0  # the caller accounts the memory, as for the reference


@needs_acc
def test_compiled_add_alone_refuses_what_the_reference_does_not_hold():
    """A value that is neither bytes nor None is the caller's to convert: a TypeError, nothing queued; a
    batch type whose slot defaults to a mutable value cannot be shared by every batch: bind_alone refuses."""
    _, comp = _accumulators()
    with pytest.raises(TypeError):
        comp.add_alone("t", 0, "text", 0, 4)
    assert not comp.incomplete and not comp.ready

    class Listy(ProducerBatch):
        __slots__ = ("extra",)

        def __init__(self, *args) -> None:
            super().__init__(*args)
            self.extra = []

    with pytest.raises(TypeError, match="extra"):
        comp.bind_alone(Listy, 77, [], list)


def _fail(batch, holder) -> None:
    from pyspark_logsource.errors import NetworkError

    raise NetworkError(f"lost {batch!r} of {holder!r}")


@needs_acc
def test_an_untracked_alone_batch_is_tracked_before_it_can_be_in_a_cycle():
    """The compiled add_alone's batch is left untracked by the cyclic GC; a future (with a callback that
    refers back to the batch) or an error tracks it again, so a cycle through it is still collected."""
    import weakref

    from pyspark_logsource.client.accumulator import RecordFuture
    from pyspark_logsource.errors import NetworkError

    class Holder:
        pass

    _, comp = _accumulators()
    for how in ("future", "error"):
        with comp.lock:
            b = comp.add_alone("t", 0, b"v", 1, 17)
        assert not gc.is_tracked(b)
        holder = Holder()
        holder.rf = RecordFuture(b, 0)
        if how == "future":
            b.future.add_done_callback(
                lambda _f, h=holder: h
            )  # batch -> future -> callback -> holder -> batch
        else:
            try:
                _fail(b, holder)
            except NetworkError as e:
                err = e  # its traceback holds _fail's frame, which holds b: batch -> error -> frame -> batch
            b.resolve(None, err)
            del err
        assert gc.is_tracked(b)
        comp.incomplete.clear()
        comp.ready.clear()
        dead = weakref.ref(holder)
        del holder, b
        gc.collect()
        assert dead() is None, how


@needs_c
@PROPS
@given(
    records=st.lists(st.tuples(_opt_bytes, _opt_bytes), min_size=1, max_size=5), seq=st.integers(0, 2**31 - 1)
)
def test_buffer_encode_gives_the_same_bytes_with_the_c_crc_and_the_python_crc(records, seq):
    """The batch CRC through _cbody's C choice (the fold, or the crc32c package's C function, wired by
    _speedups where it checks out) and through the Python-level crc32c(): the same batch."""
    from pyspark_logsource.format import _cbody as cb
    from pyspark_logsource.format import _speedups

    buf = ca.RecordBuffer(64)
    for v, k in records:
        buf.add(v, k, 1_700_000_000_000)
    try:
        cb.set_crc32c_function(0)
        cb.set_crc32c_fold(False)
        assert cb.crc32c_direct(b"123456789") is None
        python_crc = bytes(buf.encode(0, 7, 0, seq))
        _speedups._wire_crc(cb)
        cb.set_crc32c_fold(True)
        assert cb.crc32c_direct(b"123456789") in (None, 0xE3069283)  # None: no hardware CRC here
        assert bytes(buf.encode(0, 7, 0, seq)) == python_crc
    finally:
        cb.set_crc32c_function(0)
        cb.set_crc32c_fold(True)
        if not _speedups.DISABLED:  # as the import left it
            _speedups._wire_crc(cb)


@needs_c
def test_the_producers_batch_encode_takes_the_c_crc_where_the_package_has_it():
    import crc32c

    from pyspark_logsource.format import _cbody as cb
    from pyspark_logsource.format import _speedups

    if _speedups.DISABLED or not getattr(crc32c, "hardware_based", False):
        pytest.skip("extensions switched off or no hardware CRC-32C")
    # the producer's batch encode calls _cbody's batch_crc32c (a cimport): its C function is wired
    assert cb.crc32c_direct(b"123456789") == 0xE3069283
