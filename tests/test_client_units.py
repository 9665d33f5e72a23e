"""Client pieces that need no broker: the small-batch encoder, partitioning, parsing, futures."""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_logsource.client import hash_partition, hash_partitions, offset_spec, parse_bootstrap
from pyspark_logsource.client.accumulator import ProducerBatch, RecordAccumulator, RecordFuture
from pyspark_logsource.client.encoding import encode_records
from pyspark_logsource.client.partitioner import StickyPartitioner
from pyspark_logsource.errors import BufferFull, ConfigError, InvalidRequest, MessageTooLarge
from pyspark_logsource.format import batch as fmt

_vals = st.lists(st.binary(max_size=40), min_size=1, max_size=80)


@settings(max_examples=300, deadline=None)
@given(
    values=_vals,
    with_keys=st.booleans(),
    codec=st.sampled_from([0, 1, 3, 4]),
    ts0=st.integers(0, 2**40),
    jitter=st.lists(st.integers(-1000, 1000), min_size=80, max_size=80),
    pid=st.integers(-1, 2**40),
    seq=st.integers(-1, 2**31 - 1),
)
def test_small_batch_encoder_is_byte_identical(values, with_keys, codec, ts0, jitter, pid, seq):
    n = len(values)
    keys = [b"k%d" % i for i in range(n)] if with_keys else None
    ts = [ts0 + j for j in jitter[:n]]
    a = encode_records(
        values, keys, ts, None, codec=codec, producer_id=pid, producer_epoch=3, base_sequence=seq
    )
    b = fmt.encode(values, keys, ts, None, codec=codec, producer_id=pid, producer_epoch=3, base_sequence=seq)
    assert a == b
    rb = fmt.decode(a).to_arrow()
    assert rb.column("value").to_pylist() == values


@settings(max_examples=200, deadline=None)
@given(
    value=st.binary(max_size=300),
    key=st.one_of(st.none(), st.binary(max_size=30)),
    ts=st.integers(-(2**63), 2**63 - 1),
    pid=st.integers(-1, 2**40),
    epoch=st.integers(-1, 2**15 - 1),
    seq=st.integers(-1, 2**31 - 1),
)
def test_one_record_batch_is_byte_identical(value, key, ts, pid, epoch, seq):
    """The one-record path (batch_size 1: a batch per send) writes what format.encode writes."""
    keys = None if key is None else [key]
    a = encode_records(
        [value], keys, [ts], None, codec=0, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    b = fmt.encode(
        [value], keys, [ts], None, codec=0, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    assert a == b
    (rec,) = fmt.decode(a).records()
    assert (rec.key, rec.value, rec.timestamp) == (key, value, ts)


def test_encoder_falls_back_for_nulls_and_headers():
    vals = [b"a", None]
    assert encode_records(
        vals, None, [1, 2], None, codec=0, producer_id=-1, producer_epoch=-1, base_sequence=-1
    ) == fmt.encode(vals, None, [1, 2])
    hdrs = [[("h", b"1")], None]
    got = encode_records(
        [b"a", b"b"], [b"k", None], [1, 2], hdrs, codec=0, producer_id=-1, producer_epoch=-1, base_sequence=-1
    )
    assert fmt.decode(got).records()[0].headers == [("h", b"1")]


def test_hash_partition_is_stable_and_vectorised():
    # Fixed values: the partition of a key must never change between versions or processes.
    assert [hash_partition(k, 16) for k in (b"a", b"user-42", b"")] == [
        (0xC1D04330 & 0x7FFFFFFF) % 16,
        hash_partition(b"user-42", 16),
        0,
    ]
    keys = [b"k%d" % i for i in range(1000)] + [None]
    vec = hash_partitions(pa.array(keys, pa.binary()), 7)
    assert vec.tolist() == [hash_partition(k, 7) for k in keys[:-1]] + [-1]
    assert hash_partitions(pa.array(["x", "y"]), 5).tolist() == [
        hash_partition(b"x", 5),
        hash_partition(b"y", 5),
    ]
    with pytest.raises(InvalidRequest):
        hash_partitions(pa.array([1, 2]), 5)


def test_sticky_partitioner_moves_on_after_a_batch():
    s = StickyPartitioner()
    first = s.partition("t", 4)
    assert s.partition("t", 4) == first
    nxt = s.on_new_batch("t", first, 4)
    assert nxt != first and 0 <= nxt < 4
    assert s.partition("u", 1) == 0 and s.on_new_batch("u", 0, 1) == 0
    assert s.on_new_batch("t", 99, 4) == nxt  # a stale notice does not move it again


def test_sticky_spread_moves_on_every_batch_size_bytes_across_calls():
    s = StickyPartitioner()
    first = s.partition("t", 4)
    parts = s.spread("t", np.full(10, 100, dtype=np.int64), 4, 250)  # 3 records (300 bytes) fill a batch
    assert parts.tolist() == [(first + i) % 4 for i in (0, 0, 0, 1, 1, 2, 2, 2, 3, 3)]
    assert s.partition("t", 4) == (first + 4) % 4  # 1000 bytes: four batches done, the next call goes on
    counts = np.bincount(s.spread("t", np.full(100_000, 22, dtype=np.int64), 4, 16384), minlength=4)
    assert counts.max() - counts.min() <= 16384 // 22 + 1  # even to within one batch


def test_parse_bootstrap(monkeypatch):
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap("PLAINTEXT://h:9092") == [("h", 9092)]
    monkeypatch.setenv("LOGSOURCE_BOOTSTRAP", "e:7")
    assert parse_bootstrap(None) == [("e", 7)]
    for bad in ("", "host", "h:x", "h:70000", ":1"):
        with pytest.raises(ConfigError):
            parse_bootstrap(bad)


def test_offset_spec():
    assert offset_spec("earliest") == -2 and offset_spec("LATEST") == -1
    assert offset_spec(1_700_000_000_000) == 1_700_000_000_000 and offset_spec("123") == 123
    for bad in ("soon", -5, True, 1.5, None):
        with pytest.raises(ConfigError):
            offset_spec(bad)


def test_record_future_is_a_view_on_the_batch_future():
    b = ProducerBatch("t", 3, 0.0)
    f0, f1 = RecordFuture(b, 0), RecordFuture(b, 1)
    seen = []
    f1.add_done_callback(lambda f: seen.append(f.result()))
    assert not f0.done() and f0.running() and not f0.cancel()
    b.future.set_result((3, 100, 101))
    assert f0.result() == (3, 100) and f1.result(0) == (3, 101) and seen == [(3, 101)]
    b2 = ProducerBatch("t", 0, 0.0)
    b2.future.set_exception(MessageTooLarge("too big"))
    with pytest.raises(MessageTooLarge):
        RecordFuture(b2, 0).result()
    assert isinstance(RecordFuture(b2, 0).exception(), MessageTooLarge)
    assert isinstance(b.future, Future)


def test_accumulator_memory_bound():
    acc = RecordAccumulator(batch_size=100, linger_ms=0, buffer_memory=1000, max_block_ms=50)
    with acc.lock:
        acc.reserve(900)
        with pytest.raises(BufferFull):
            acc.reserve(200)
        assert acc.used == 900
    b = ProducerBatch("t", 0, 0.0)
    b.size = 900
    acc.incomplete[b] = None
    acc.complete(b, (0, 0, 0))
    with acc.lock:
        acc.reserve(200)  # freed memory is usable again
        assert acc.used == 200


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 400), min_size=1, max_size=12),
    used=st.integers(0, 3000),
    muted=st.sets(st.integers(0, 3)),
    with_future=st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_complete_many_is_complete_per_batch(sizes, used, muted, with_future):
    """The I/O thread's bulk completion (``complete_many``, one lock for a read's answers) leaves the
    accumulator and the batches as ``complete()`` one by one does: memory (never below 0), answered
    count, muted partitions, incomplete batches, outcomes and the futures already asked for."""
    states = []
    for bulk in (False, True):
        acc = RecordAccumulator(batch_size=100, linger_ms=0, buffer_memory=10_000, max_block_ms=50)
        acc.used = used
        acc.muted = {("t", p) for p in muted}
        batches = []
        for i, size in enumerate(sizes):
            b = ProducerBatch("t", i % 4, 0.0)
            b.size = size
            acc.incomplete[b] = None
            if with_future[i]:
                b.future  # noqa: B018 - made before the answer, as by a waiting flush()
            batches.append(b)
        done = [(b, (b.partition, 10 * i, 10 * i)) for i, b in enumerate(batches)]
        if bulk:
            acc.complete_many(done)
        else:
            for b, result in done:
                acc.complete(b, result)
        states.append(
            (
                acc.used,
                acc.answered,
                acc.muted,
                len(acc.incomplete),
                [b.outcome for b in batches],
                [b.future.result(0) for b in batches],
            )
        )
    assert states[0] == states[1]


@pytest.mark.parametrize("keyed", [False, True])
def test_small_batch_over_2_gib_is_message_too_large(keyed):
    big = bytes(3 << 29)  # 1.5 GiB of zero pages (calloc): two of them overflow int32 offsets
    values = [b"v", big, big] if not keyed else [b"v", b"w", b"x"]
    keys = None if not keyed else [b"k", big, big]
    with pytest.raises(MessageTooLarge):
        encode_records(
            values, keys, [1, 2, 3], None, codec=0, producer_id=-1, producer_epoch=-1, base_sequence=-1
        )


def test_one_batch_request_answer_routes_like_the_general_handler():
    """A request of one batch is answered through a one-object callback; an answer it cannot take
    (another partition, an error) goes to the general handler, which retries the batch."""
    from pyspark_logsource import Producer
    from pyspark_logsource.client.answers import OneBatchAnswer
    from pyspark_logsource.protocol.messages import ProducePartitionResponse, ProduceResponse

    p = Producer("127.0.0.1:1", enable_idempotence=False, retry_backoff_ms=60000)
    try:
        acc = p._acc
        ok, other, failed = (ProducerBatch("t", 0, 0.0) for _ in range(3))
        for b in (ok, other, failed):
            b.record_count = 2
            acc.incomplete[b] = None
        cb = p._sender._callback({ok.tp: [ok]})
        assert isinstance(cb, OneBatchAnswer)
        cb(ProduceResponse([ProducePartitionResponse("t", 0, 0, 41)]), None)
        assert ok.outcome == ((0, 41, 42), None)
        p._sender._callback({other.tp: [other]})(
            ProduceResponse([ProducePartitionResponse("t", 1, 0, 7)]), None
        )
        p._sender._callback({failed.tp: [failed]})(
            ProduceResponse([ProducePartitionResponse("t", 0, 6)]), None
        )  # retriable
        assert other.outcome is None and failed.outcome is None  # put back for a retry, as RunsAnswer does
        assert set(acc.ready[("t", 0)]) == {other, failed}
        two = p._sender._callback({("t", 0): [ProducerBatch("t", 0, 0.0), ProducerBatch("t", 0, 0.0)]})
        assert not isinstance(two, OneBatchAnswer)
    finally:
        with p._acc.lock:
            p._acc.ready.clear()
            p._acc.incomplete.clear()
        p.close(timeout=1)


@pytest.mark.parametrize("bulk", [False, True])
def test_a_future_cancelled_while_batches_complete_leaves_the_others_completed(bulk):
    """A caller may cancel a batch's future between the accumulator's bookkeeping and its completion
    (here: from the first future's callback). That future stays cancelled; every other one completes."""
    acc = RecordAccumulator(batch_size=100, linger_ms=0, buffer_memory=10_000, max_block_ms=50)
    batches = []
    for _ in range(3):
        b = ProducerBatch("t", 0, 0.0)
        b.size = 10
        acc.incomplete[b] = None
        batches.append(b)
    futures = [b.future for b in batches]
    futures[0].add_done_callback(lambda _: futures[1].cancel())
    done = [(b, (0, 10 * i, 10 * i)) for i, b in enumerate(batches)]
    if bulk:
        acc.complete_many(done)
    else:
        for b, result in done:
            acc.complete(b, result)
    assert futures[1].cancelled()
    assert futures[0].result(0) == (0, 0, 0) and futures[2].result(0) == (0, 20, 20)
    assert acc.used == 0 and not acc.incomplete


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 12),
    backoff_at=st.one_of(st.none(), st.integers(0, 11)),
    other=st.sampled_from(["none", "ready", "muted", "backoff", "open"]),
    most=st.integers(0, 14),
)
def test_drain_singles_takes_the_rounds_one_batch_drains_take(n, backoff_at, other, most):
    """The sender's rounds at batch size 1 in one call (drain_singles) against the drains of one batch each
    it replaces (drain(now, 1) per round): the same batches in the same order, a batch in its retry backoff
    ending the rounds; None (the drains then) when another partition has an open or a waiting batch."""
    import time

    now = time.monotonic()

    def build() -> RecordAccumulator:
        acc = RecordAccumulator(batch_size=1, linger_ms=60_000, buffer_memory=1 << 20, max_block_ms=0)
        with acc.lock:
            batches = [acc.add_alone("t", 0, b"%d" % i, 0, 10) for i in range(n)]
            if backoff_at is not None and backoff_at < n:
                batches[backoff_at].retry_at = now + 60
            if other == "open":
                acc.new_batch("t", 1)
            elif other != "none":
                o = acc.add_alone("t", 1, b"o", 0, 10)
                if other == "muted":
                    acc.muted.add(("t", 1))
                elif other == "backoff":
                    o.retry_at = now + 60
        return acc

    def left(acc: RecordAccumulator) -> dict:
        return {tp: [b.values[0] for b in q] for tp, q in acc.ready.items()}

    fast, reference = build(), build()
    with fast.lock:
        runs, _ = fast.drain(now, 1)
        got = fast.drain_singles(runs, now, most) if runs else None
    with reference.lock:
        rounds = [reference.drain(now, 1)[0]]
        for _ in range(most):
            more, _ = reference.drain(now, 1)
            if not more:
                break
            rounds.append(more)
    if got is None:
        assert not runs or other != "none"
        return
    assert all(len(r) == 1 and len(r[0]) == 1 for r in rounds)
    assert [b.values[0] for b in got] == [r[0][0].values[0] for r in rounds]
    assert left(fast) == left(reference)
