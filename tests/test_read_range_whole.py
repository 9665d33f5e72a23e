"""read_range(whole_fetches=True), the Spark task's read: one contiguous batch per fetch response.

It must hold exactly what the batch-by-batch read holds: trimmed to the
range, in both broker layouts, and without aborted transactions or markers.
"""

from __future__ import annotations

import time

import pyarrow as pa
from support.brokers import broker_process

from pyspark_logsource.client import Admin, Producer, read_range
from pyspark_logsource.client.txn import StagedTxns, TransactionalProducer
from pyspark_logsource.protocol.txn_messages import StagedProducer

COLUMNS = ["key", "value", "offset", "timestamp", "timestamp_type", "headers"]


def _read(
    bs: str, topic: str, partition: int, start: int, end: int, whole: bool, **kw
) -> tuple[pa.Table, int]:
    batches = list(read_range(bs, topic, partition, start, end, whole_fetches=whole, **kw))
    return pa.Table.from_batches(batches).select(COLUMNS) if batches else None, len(batches)


def test_whole_fetches_hold_what_batch_by_batch_holds(layout_broker, topic_name):
    bs, topic = layout_broker.bootstrap, topic_name("whole")
    with Admin(bs) as a:
        a.create_topic(topic, partitions=1)
    with Producer(bs, batch_size=300, linger_ms=0) as p:
        for i in range(500):
            p.send(topic, b"%d" % i, key=b"k%d" % (i % 7), headers=[("h", b"%d" % i)] if i % 5 == 0 else None)
        p.flush()
    for start, end, max_bytes in [(0, 500, 1 << 20), (123, 456, 2048), (499, 500, 2048), (0, 1, 1024)]:
        whole, n_whole = _read(bs, topic, 0, start, end, True, max_bytes=max_bytes)
        each, n_each = _read(bs, topic, 0, start, end, False, max_bytes=max_bytes)
        assert whole.equals(each), (start, end)
        assert whole.column("offset").to_pylist() == list(range(start, end))
        assert n_whole < n_each or n_each == 1  # one batch per response, not per stored batch


def test_whole_fetches_drop_aborted_transactions_and_markers(tmp_path):
    with broker_process(tmp_path) as b:
        bs = b.bootstrap
        with Admin(bs) as a, StagedTxns(bs) as txns:
            a.create_topic("t", partitions=1)
            with Producer(bs) as p:
                for i in range(3):
                    p.send("t", b"plain-%d" % i, partition=0)
            staged = []
            for name in ("win", "lose"):
                tp = TransactionalProducer(bs, acks=-1)
                try:
                    pid, epoch = tp.producer_id_and_epoch()
                    txns.register("w", pid, epoch, [("t", 0)], 60000)
                    futures = [tp.send("t", b"%s-%d" % (name.encode(), i), partition=0) for i in range(4)]
                    tp.flush()
                    for f in futures:
                        f.result()
                    staged.append(StagedProducer(pid, epoch, {("t", 0): 4}))
                finally:
                    tp.close()
            assert txns.commit("w", 0, [staged[0]]).committed  # "lose" is aborted
            with Producer(bs) as p:
                p.send("t", b"after", partition=0).result()
            end = a.list_offsets([("t", 0)], "latest", read_committed=True)[("t", 0)]
        whole, _ = _read(bs, "t", 0, 0, end, True)
        each, _ = _read(bs, "t", 0, 0, end, False)
        assert whole.equals(each)
        assert whole.column("value").to_pylist() == [
            *[b"plain-%d" % i for i in range(3)],
            *[b"win-%d" % i for i in range(4)],
            b"after",
        ]


def _load(bs: str, topic: str, n: int) -> None:
    with Admin(bs) as a:
        a.create_topic(topic, partitions=1)
    with Producer(bs, batch_size=4096, linger_ms=5) as p:
        for i in range(n):
            p.send(topic, b"%06d" % i, partition=0)
        p.flush()


def test_a_prefetched_fetch_lost_with_a_killed_broker_is_sent_again(tmp_path):
    """The next fetch is sent before a whole fetch is handed on. The broker is killed -9 and restarted with
    that fetch sent (answered or not, as the race goes): the read goes on from where it was, on a new
    connection if it must. Every offset once, in order."""
    with broker_process(tmp_path) as b:
        bs = b.bootstrap
        _load(bs, "t", 3000)
        got: list[bytes] = []
        killed = False
        for rb in read_range(bs, "t", 0, 0, 3000, whole_fetches=True, max_bytes=4096):
            got.extend(rb.column("value").to_pylist())
            if not killed:  # the fetch after this one is already sent
                killed = True
                b.kill()
                b.start()
        assert killed and len(got) == 3000
        assert got == [b"%06d" % i for i in range(3000)]


def test_a_read_closed_early_with_a_fetch_in_flight_leaves_the_broker_serving(tmp_path):
    with broker_process(tmp_path) as b:
        bs = b.bootstrap
        _load(bs, "t", 2000)
        it = read_range(bs, "t", 0, 0, 2000, whole_fetches=True, max_bytes=4096)
        first = next(it)
        it.close()  # the prefetched answer is never read: its connection is closed
        assert first.column("offset")[0].as_py() == 0
        rest = sum(rb.num_rows for rb in read_range(bs, "t", 0, 0, 2000, whole_fetches=True, max_bytes=4096))
        assert rest == 2000


def test_a_throttled_read_hands_on_each_answer_before_it_waits_out_the_throttle(tmp_path):
    """A fetch answer can carry rows and a throttle (a request quota: KIP-219, answer at once, then wait).
    The next fetch is then not sent ahead: sending it would wait out that throttle before the rows in hand
    are handed on. Each batch comes out as soon as its answer is in; the waits come between batches."""
    from support.brokers import broker_thread

    from pyspark_logsource.broker.quotas.model import REQUEST_PERCENTAGE, QuotaEntity

    with broker_thread(tmp_path) as b:
        bs = b.bootstrap
        _load(bs, "t", 3000)
        b._broker.state.quotas.set_entity(QuotaEntity(None, "slow"), {REQUEST_PERCENTAGE: 0.01})
        it = read_range(bs, "t", 0, 0, 3000, whole_fetches=True, max_bytes=24 << 10, client_id="slow")
        t0 = time.monotonic()
        waits = []
        rows = 0
        for rb in it:
            waits.append(time.monotonic() - t0)
            rows += rb.num_rows
            t0 = time.monotonic()
    assert rows == 3000 and len(waits) >= 3
    # every answer carried a throttle (the connection's first requests too): one wait before each batch,
    # not the first answer's own throttle as well before its rows were handed on (twice as long)
    assert min(waits[1:-1]) >= 0.5, waits
    assert waits[0] < 1.5 * min(waits[1:-1]), waits
