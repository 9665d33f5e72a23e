"""Fetch sessions (KIP-227) over a real socket: our protocol codecs against a broker process.

Full fetch -> incremental fetches (only partitions with news come back) -> forgotten partitions -> a bad
epoch (71) -> an unknown session (70) -> closing a session; the cache's slot limit and eviction; and
librdkafka (which fetches sessionless: id 0, epoch -1) still reading. The cache's eviction order is
also checked on its own, with a clock the test moves.
"""

from __future__ import annotations

import pytest
from support.brokers import WireClient

from pyspark_logsource.broker.fetch_sessions import (
    FETCH_SESSION_ID_NOT_FOUND,
    INVALID_FETCH_SESSION_EPOCH,
    FetchSessionCache,
    next_epoch,
)
from pyspark_logsource.format import decode_all, encode_kafka
from pyspark_logsource.protocol import FetchPartition, FetchPartitionResponse, FetchRequest, FetchResponse

pytestmark = [pytest.mark.timeout(120)]


def fetch(
    w: WireClient,
    parts: list[tuple[str, int, int]],
    session_id: int,
    epoch: int,
    forgotten: list[tuple[str, int]] | None = None,
) -> FetchResponse:
    req = FetchRequest(
        [FetchPartition(t, p, o) for t, p, o in parts],
        max_wait_ms=0,
        min_bytes=1,
        session_id=session_id,
        session_epoch=epoch,
        forgotten=forgotten or [],
    )
    return w.request(req, check=False)


def by_partition(resp: FetchResponse) -> dict[int, FetchPartitionResponse]:
    return {p.partition: p for p in resp.partitions}


def values(p: FetchPartitionResponse) -> list[bytes]:
    return [r.value for b in decode_all(bytes(p.records)) for r in b.records()]


def test_full_incremental_forgotten_bad_epoch_unknown_session(broker, topic_name):
    t = topic_name("sessions")
    with WireClient(broker.bootstrap) as w:
        assert w.create_topic(t, 3) == 0
        assert w.api_versions is not None
        for p in (0, 1):
            assert w.produce(t, p, encode_kafka([f"p{p}-a".encode(), f"p{p}-b".encode()])).error_code == 0

        # a full fetch (epoch 0) opens a session and answers every partition
        full = fetch(w, [(t, 0, 0), (t, 1, 0), (t, 2, 0)], 0, 0)
        assert full.error_code == 0 and full.session_id != 0
        sid = full.session_id
        got = by_partition(full)
        assert sorted(got) == [0, 1, 2]
        assert values(got[0]) == [b"p0-a", b"p0-b"] and values(got[1]) == [b"p1-a", b"p1-b"]
        assert got[2].high_watermark == 0 and values(got[2]) == []

        # incremental (epoch 1): the consumer sends only the partitions whose position moved; nothing
        # changed anywhere, so nothing comes back
        inc = fetch(w, [(t, 0, 2), (t, 1, 2)], sid, 1)
        assert (inc.error_code, inc.session_id, inc.partitions) == (0, sid, [])

        # data on partition 2, which the request does not name: only it comes back
        assert w.produce(t, 2, encode_kafka([b"p2-a"])).error_code == 0
        inc = fetch(w, [], sid, 2)
        assert inc.error_code == 0 and inc.session_id == sid
        assert [p.partition for p in inc.partitions] == [2]
        assert values(inc.partitions[0]) == [b"p2-a"] and inc.partitions[0].high_watermark == 1

        # the session kept partition 2's position at 0 (the consumer did not move it): the records come
        # again, but once its position moves and nothing is new, it is left out
        inc = fetch(w, [(t, 2, 1)], sid, 3)
        assert inc.partitions == []

        # forget partition 2; new data on 0 and 2: only 0 comes back
        assert w.produce(t, 2, encode_kafka([b"p2-b"])).error_code == 0
        assert w.produce(t, 0, encode_kafka([b"p0-c"])).error_code == 0
        inc = fetch(w, [], sid, 4, forgotten=[(t, 2)])
        assert [p.partition for p in inc.partitions] == [0]
        assert values(inc.partitions[0]) == [b"p0-c"]
        # a forgotten partition stays out even when it moves again
        assert w.produce(t, 2, encode_kafka([b"p2-c"])).error_code == 0
        assert fetch(w, [(t, 0, 3)], sid, 5).partitions == []

        # a stale or future epoch: INVALID_FETCH_SESSION_EPOCH, no partitions, and the session stays
        for bad in (5, 7):
            r = fetch(w, [], sid, bad)
            assert (r.error_code, r.session_id, r.partitions) == (INVALID_FETCH_SESSION_EPOCH, 0, [])
        # the session still answers at its epoch; partition 2 comes back once the consumer adds it again
        r = fetch(w, [(t, 2, 1)], sid, 6)
        assert r.error_code == 0 and [p.partition for p in r.partitions] == [2]
        assert values(r.partitions[0]) == [b"p2-b", b"p2-c"]

        # an unknown session id: FETCH_SESSION_ID_NOT_FOUND; epoch > 0 without a session id too
        for bad_sid in (sid ^ 0x5A5A, 0):
            r = fetch(w, [(t, 0, 0)], bad_sid, 1)
            assert (r.error_code, r.session_id, r.partitions) == (FETCH_SESSION_ID_NOT_FOUND, 0, [])

        # epoch -1 with the id closes the session and answers sessionless (every partition, id 0)
        r = fetch(w, [(t, 0, 3), (t, 1, 2)], sid, -1)
        assert r.error_code == 0 and r.session_id == 0 and sorted(by_partition(r)) == [0, 1]
        assert fetch(w, [], sid, 7).error_code == FETCH_SESSION_ID_NOT_FOUND

        # sessionless (id 0, epoch -1, as librdkafka fetches): every partition each time, no session
        for _ in range(2):
            r = fetch(w, [(t, 0, 3), (t, 1, 2)], 0, -1)
            assert r.error_code == 0 and r.session_id == 0 and sorted(by_partition(r)) == [0, 1]


def test_a_full_fetch_naming_its_session_replaces_it(broker, topic_name):
    t = topic_name("reopen")
    with WireClient(broker.bootstrap) as w:
        assert w.create_topic(t, 1) == 0
        sid = fetch(w, [(t, 0, 0)], 0, 0).session_id
        assert sid != 0
        new = fetch(w, [(t, 0, 0)], sid, 0)  # epoch 0 with an id: that session closes, a new one opens
        assert new.session_id not in (0, sid)
        assert fetch(w, [], sid, 1).error_code == FETCH_SESSION_ID_NOT_FOUND
        assert fetch(w, [], new.session_id, 1).error_code == 0


@pytest.fixture(scope="module")
def two_slot_broker(broker_factory):
    return broker_factory({"max.incremental.fetch.session.cache.slots": 2})


@pytest.fixture(scope="module")
def evicting_broker(broker_factory):
    return broker_factory(
        {"max.incremental.fetch.session.cache.slots": 2, "min.incremental.fetch.session.eviction.ms": 0}
    )


def test_a_full_cache_answers_without_a_session(two_slot_broker, topic_name):
    t = topic_name("slots")
    with WireClient(two_slot_broker.bootstrap) as w:
        assert w.create_topic(t, 3) == 0
        ids = [fetch(w, [(t, p, 0) for p in range(n)], 0, 0).session_id for n in (1, 2)]
        assert 0 not in ids and ids[0] != ids[1]
        # the cache is full and both sessions are younger than min.incremental.fetch.session.eviction.ms:
        # a third full fetch is answered, without a session
        r = fetch(w, [(t, p, 0) for p in range(3)], 0, 0)
        assert r.error_code == 0 and r.session_id == 0 and len(r.partitions) == 3
        for sid in ids:
            assert fetch(w, [], sid, 1).error_code == 0


def test_a_full_cache_evicts_the_least_recently_used_idle_session(evicting_broker, topic_name):
    t = topic_name("evict")
    with WireClient(evicting_broker.bootstrap) as w:
        assert w.create_topic(t, 1) == 0
        a = fetch(w, [(t, 0, 0)], 0, 0).session_id
        b = fetch(w, [(t, 0, 0)], 0, 0).session_id
        assert fetch(w, [], a, 1).error_code == 0  # a is now the most recently used
        c = fetch(w, [(t, 0, 0)], 0, 0).session_id  # evicts b (idle longer than 0 ms)
        assert 0 not in (a, b, c)
        assert fetch(w, [], b, 1).error_code == FETCH_SESSION_ID_NOT_FOUND
        assert fetch(w, [], a, 2).error_code == 0
        assert fetch(w, [], c, 1).error_code == 0


@pytest.mark.kafka_clients
def test_librdkafka_fetches_sessionless_and_reads(broker, topic_name):
    from confluent_kafka import Consumer, Producer, TopicPartition

    t = topic_name("ck-sessions")
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        p.produce(t, f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": t, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(t, 0, 0)])
        got: list[bytes] = []
        for _ in range(100):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            if len(got) == 30:
                break
        assert got == [f"v{i}".encode() for i in range(30)]
    finally:
        c.close()


# ------------------------------------------------------------------ the cache on its own


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _open(cache: FetchSessionCache, n: int, privileged: bool = False) -> int:
    req = FetchRequest([FetchPartition("t", p, 0) for p in range(n)], session_id=0, session_epoch=0)
    ctx = cache.new_context(req, privileged)
    resp = FetchResponse([FetchPartitionResponse("t", p, records=b"") for p in range(n)])
    return ctx.respond(resp).session_id


def test_eviction_prefers_stale_then_smaller_old_sessions():
    clock = Clock()
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000, clock=clock)
    small, big = _open(cache, 1), _open(cache, 5)
    assert 0 not in (small, big)
    # both young: nothing may be evicted, however large the newcomer
    assert _open(cache, 50) == 0
    clock.now = 1500  # both idle for longer than eviction_ms: stale
    third = _open(cache, 1)
    assert third != 0 and len(cache) == 2 and cache.get(small) is None  # the least recently used
    # big is old; third is young. Used just now, nothing is stale: a newcomer must be larger than big
    clock.now = 1600
    cache.get(big).last_used_ms = cache.get(third).last_used_ms = 1600
    assert _open(cache, 5) == 0  # as large as big: not enough
    bigger = _open(cache, 6)
    assert bigger != 0 and cache.get(big) is None and cache.get(third) is not None
    assert cache.evictions == 2
    # a privileged (follower) newcomer may evict a young unprivileged session
    follower = _open(cache, 1, privileged=True)
    assert follower != 0 and len(cache) == 2 and cache.get(follower).privileged


def test_next_epoch_wraps_to_one():
    assert [next_epoch(e) for e in (0, 1, 0x7FFFFFFF, -1)] == [1, 2, 1, -1]


@pytest.mark.kafka_clients
@pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")
def test_kafka_python_uses_incremental_sessions_and_reads_everything_once(broker, topic_name, caplog):
    """kafka-python 3.0 keeps fetch sessions as Kafka's Java client does (FetchSessionHandler): a full
    fetch, then incremental ones; the broker's answers must satisfy its checks (no extra partitions, a
    full answer naming every partition) while it reads 20 partitions written in rounds."""
    import logging

    from kafka import KafkaConsumer, TopicPartition

    t, n = topic_name("kp-sessions"), 20
    with WireClient(broker.bootstrap) as w:
        assert w.create_topic(t, n) == 0
        c = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
        )
        caplog.set_level(logging.DEBUG, logger="kafka.consumer.fetcher")
        try:
            c.assign([TopicPartition(t, p) for p in range(n)])
            want: set[tuple[int, bytes]] = set()
            got: list[tuple[int, bytes]] = []
            for rnd in range(5):
                for p in range(rnd, n, 3):  # a different subset of partitions each round
                    v = f"r{rnd}-p{p}".encode()
                    assert w.produce(t, p, encode_kafka([v])).error_code == 0
                    want.add((p, v))
                for _ in range(40):
                    for recs in c.poll(timeout_ms=100).values():
                        got.extend((r.partition, r.value) for r in recs)
                    if len(got) >= len(want):
                        break
            assert sorted(got) == sorted(want)  # every record once
        finally:
            c.close()
    text = caplog.text
    assert "created a new incremental fetch session" in text
    assert "sent an incremental fetch response for session" in text
    for bad in ("unable to process the fetch request", "invalid full fetch response", "invalid incremental"):
        assert bad not in text
