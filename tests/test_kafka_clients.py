"""Real Kafka clients against a real broker process: kcat, confluent-kafka (librdkafka), kafka-python.

Every client produces with every codec and reads back from the beginning; bytes, keys, timestamps and
headers must come back exactly. A topic written by all of them and by our own Producer reads back
identically through all of them and our Consumer, on a broker that stores our Arrow-bodied batches and
on one with ``logsource.arrow.body.enable=false`` (a plain Kafka broker). Idempotent producers write no
duplicates; a raw sans-IO test pins the broker's sequence checks (45, duplicate = success, 47). Spark
reads what Kafka clients wrote, and Kafka clients read what Spark wrote.

kcat is Debian's package; ``make test`` installs it (scripts/ensure-kcat.sh). A missing kcat fails the
kcat tests with that hint instead of skipping them.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any

import pytest
from support.brokers import RECENT_TS, WireClient

from pyspark_logsource.format import encode_kafka
from pyspark_logsource.protocol.messages import InitProducerIdRequest

pytestmark = [
    pytest.mark.kafka_clients,
    pytest.mark.timeout(300),
    # kafka-python 3.0 loads its schemas with importlib.resources' legacy API
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 40  # records per produce in the per-codec tests: enough for several batches with linger

#: one record as every client is compared: (key, value, timestamp ms, headers as a tuple of (str, bytes|None))
Rec = tuple[bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]


# ------------------------------------------------------------------ brokers


# conftest's broker (Arrow bodies on: the default), plain_broker (a plain Kafka broker) and layout_broker
# (each of them in turn, for the tests that must hold on both); topic names from conftest's topic_name
# (auto-created on first produce or assign)


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    with WireClient(bootstrap) as c:
        assert c.create_topic(topic, partitions) == 0


# ------------------------------------------------------------------ test data


def records(n: int = N, *, base_ts: int = RECENT_TS, tag: str = "r", null_headers: bool = True) -> list[Rec]:
    """Binary values (every byte value, a newline, an empty one, a null one), keys (empty and null too),
    explicit timestamps and headers (several, a repeated key, a null value unless ``null_headers`` is
    false (kafka-python refuses them), none at all)."""
    out: list[Rec] = []
    for i in range(n):
        value: bytes | None = (
            f"{tag}{i}:".encode() + bytes((i * 7 + j) % 256 for j in range(i % 50)) + b"\n\x00\xff"
        )
        key: bytes | None = f"k{i % 5}".encode()
        headers: tuple = (("h", f"{tag}{i}".encode()), ("n", str(i).encode()))
        if i % 11 == 3:
            value = b""
        if i % 13 == 5:
            value = None  # a tombstone
        if i % 7 == 2:
            key = None
        if i % 9 == 4:
            key = b""
        if i % 6 == 1:
            headers = ()
        if i % 10 == 7:
            headers = (("dup", b"1"), ("dup", b"2"), ("null", None if null_headers else b""))
        if key is None and value is None:
            value = b""
        out.append((key, value, base_ts + i * 3, headers))
    return out


def same(got: list[Rec], want: list[Rec]) -> None:
    """Record-by-record equality with a readable first difference."""
    assert len(got) == len(want), f"{len(got)} records, want {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"record {i}: got {g!r}, want {w!r}"


# ------------------------------------------------------------------ kcat

KCAT = shutil.which("kcat")
_KEY_DELIM = b"|:|"
_MSG_DELIM = b"|~|"


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 60) -> bytes:
    if KCAT is None:
        pytest.fail(
            "kcat is not on PATH: `make test` installs Debian's kcat (scripts/ensure-kcat.sh); "
            "or run `sudo apt-get install kcat`"
        )
    r = subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=timeout)
    assert r.returncode == 0, (
        f"kcat {' '.join(args)} exited {r.returncode}: {r.stderr.decode(errors='replace')}"
    )
    return r.stdout


def kcat_produce(
    bootstrap: str,
    topic: str,
    recs: list[tuple[bytes | None, bytes]],
    codec: str = "none",
    headers: tuple[tuple[str, bytes], ...] = (),
    partition: int = 0,
) -> None:
    """``kcat -P``: keys with -K, every message gets ``headers`` (-H); kcat sets CreateTime itself.

    A record without a key separator has a null key; values must not contain the delimiters."""
    data = bytearray()
    for key, value in recs:
        assert _MSG_DELIM not in value and _KEY_DELIM not in value and (key is None or _KEY_DELIM not in key)
        if key is not None:
            data += key + _KEY_DELIM
        data += value + _MSG_DELIM
    args = [
        "-b",
        bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        str(partition),
        "-D",
        _MSG_DELIM.decode(),
        "-K",
        _KEY_DELIM.decode(),
        "-X",
        f"compression.codec={codec}",
    ]
    for k, v in headers:
        args += ["-H", f"{k}={v.decode()}"]
    kcat(*args, stdin=bytes(data))


def kcat_consume(
    bootstrap: str,
    topic: str,
    partition: int = 0,
    offset: str = "beginning",
    *extra: str,
    timeout: float = 60,
) -> list[tuple[int, Rec]]:
    """``kcat -C -o beginning -e`` (or from ``offset``, with ``extra`` arguments) with a length-prefixed
    -f format, so any bytes parse exactly.

    Returns (offset, record) pairs. kcat prints headers as ``k=v,k=v`` (ASCII header values only)."""
    out = kcat(
        "-b",
        bootstrap,
        "-C",
        "-t",
        topic,
        "-p",
        str(partition),
        "-o",
        offset,
        "-e",
        *extra,
        "-f",
        "@%o|%K|%S|%T|%h\n%k%s\n",
        timeout=timeout,
    )
    recs: list[tuple[int, Rec]] = []
    pos = 0
    while pos < len(out):
        eol = out.index(b"\n", pos)
        line = out[pos:eol].decode()
        assert line.startswith("@"), f"unexpected kcat output at {pos}: {out[pos : pos + 80]!r}"
        offset, klen, vlen, ts, hdrs = line[1:].split("|", 4)
        pos = eol + 1
        key = None
        if int(klen) >= 0:
            key = out[pos : pos + int(klen)]
            pos += int(klen)
        value = None
        if int(vlen) >= 0:
            value = out[pos : pos + int(vlen)]
            pos += int(vlen)
        assert out[pos : pos + 1] == b"\n"
        pos += 1
        headers = tuple((k, v.encode()) for k, _, v in (h.partition("=") for h in hdrs.split(",") if h))
        recs.append((int(offset), (key, value, int(ts), headers)))
    return recs


# ------------------------------------------------------------------ confluent-kafka


def ck_produce(
    bootstrap: str,
    topic: str,
    recs: list[Rec],
    codec: str = "none",
    idempotent: bool = False,
    partition: int = 0,
    **conf: Any,
) -> list[int]:
    """confluent-kafka Producer; returns the offsets the broker assigned, in send order."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "enable.idempotence": idempotent,
            "linger.ms": 5,
            "batch.num.messages": 16,
            **conf,
        }
    )
    offsets: list[int | None] = [None] * len(recs)
    errors: list[Any] = []

    def on_delivery(i: int):
        def cb(err, msg):
            if err is not None:
                errors.append(err)
            else:
                offsets[i] = msg.offset()

        return cb

    for i, (key, value, ts, headers) in enumerate(recs):
        p.produce(
            topic,
            value=value,
            key=key,
            partition=partition,
            timestamp=ts,
            headers=list(headers),
            on_delivery=on_delivery(i),
        )
        p.poll(0)
    assert p.flush(60) == 0, "confluent-kafka producer did not deliver everything"
    assert not errors, errors
    return offsets  # type: ignore[return-value]


def _ck_consumer(bootstrap: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "interop-no-commit",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )


def ck_consume(
    bootstrap: str, topic: str, partition: int = 0, start: int | None = None, seek_to: int | None = None
) -> list[tuple[int, Rec]]:
    """confluent-kafka Consumer: assign (from the beginning, or ``start``), optionally seek, read to EOF."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    c = _ck_consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING if start is None else start)])
        if seek_to is not None:
            # seek needs the partition to be fetching: wait for the first message or EOF, then seek
            first = c.poll(30)
            assert first is not None
            c.seek(TopicPartition(topic, partition, seek_to))
        out: list[tuple[int, Rec]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = c.poll(5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(f"confluent-kafka consumer error: {m.error()}")
            out.append((m.offset(), (m.key(), m.value(), m.timestamp()[1], tuple(m.headers() or ()))))
        raise AssertionError("confluent-kafka consumer did not reach the end of the partition")
    finally:
        c.close()


# ------------------------------------------------------------------ kafka-python


def kp_produce(
    bootstrap: str,
    topic: str,
    recs: list[Rec],
    codec: str = "none",
    idempotent: bool = False,
    partition: int = 0,
) -> list[int]:
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        enable_idempotence=idempotent,
        linger_ms=5,
        batch_size=2048,
    )
    try:
        futs = [
            p.send(topic, value=v, key=k, headers=list(h), timestamp_ms=ts, partition=partition)
            for k, v, ts, h in recs
        ]
        p.flush(60)
        return [f.get(30).offset for f in futs]
    finally:
        p.close(10)


def kp_consume(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, Rec]]:
    """kafka-python KafkaConsumer: assign, seek_to_beginning, read up to the end offset."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, partition)
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        out: list[tuple[int, Rec]] = []
        deadline = time.monotonic() + 60
        while c.position(tp) < end:
            assert time.monotonic() < deadline, "kafka-python consumer did not reach the end offset"
            for batch in c.poll(timeout_ms=1000).values():
                for m in batch:
                    out.append((m.offset, (m.key, m.value, m.timestamp, tuple(m.headers or ()))))
        return out
    finally:
        c.close()


# ------------------------------------------------------------------ ours


def our_produce(
    bootstrap: str, topic: str, recs: list[Rec], codec: str = "none", partition: int = 0
) -> list[int]:
    from pyspark_logsource import Producer

    p = Producer(bootstrap, compression=None if codec == "none" else codec)
    try:
        futs = [
            p.send(topic, value=v, key=k, headers=list(h) or None, partition=partition, timestamp_ms=ts)
            for k, v, ts, h in recs
        ]
        p.flush(60)
        return [f.result(30)[1] for f in futs]
    finally:
        p.close(10)


def our_consume(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, Rec]]:
    from pyspark_logsource import Consumer

    c = Consumer(bootstrap)
    try:
        tp = (topic, partition)
        c.assign([tp])
        c.seek_to_beginning(tp)
        out: list[tuple[int, Rec]] = []
        deadline = time.monotonic() + 60
        while True:
            for m in c.poll(timeout_ms=500):
                out.append((m.offset, (m.key, m.value, m.timestamp, tuple((k, v) for k, v in m.headers))))
            end = c.highwater(tp)
            if end >= 0 and c.position(tp) >= end:
                return out
            assert time.monotonic() < deadline, "our consumer did not reach the end offset"
    finally:
        c.close()


READERS = {
    "kcat": kcat_consume,
    "confluent-kafka": ck_consume,
    "kafka-python": kp_consume,
    "ours": our_consume,
}


def without_offsets(rows: list[tuple[int, Rec]]) -> list[Rec]:
    offs = [o for o, _ in rows]
    assert offs == sorted(offs) and len(set(offs)) == len(offs), f"offsets out of order: {offs}"
    return [r for _, r in rows]


def kcat_view(recs: list[Rec]) -> list[Rec]:
    """What kcat's -f %h shows of ``recs``: a header with a null value prints as ``k=NULL``."""
    return [
        (k, v, ts, tuple((hk, hv if hv is not None else b"NULL") for hk, hv in h)) for k, v, ts, h in recs
    ]


# ================================================================== kcat


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produces_and_consumes_every_codec(broker, codec, topic_name):
    bs, topic = broker.bootstrap, topic_name(f"kcat-{codec}")
    plain = [
        (b"key-%d" % i if i % 4 else None, b"value %d \x00\x01\xfe\xff\n\t" % i + bytes(range(i % 64)))
        for i in range(N)
    ]
    plain[5] = (b"", b"")  # empty key and empty value
    hdrs = (("source", b"kcat"), ("codec", codec.encode()))
    before = int(time.time() * 1000)
    kcat_produce(bs, topic, plain, codec=codec, headers=hdrs)
    after = int(time.time() * 1000)
    got = kcat_consume(bs, topic)
    assert [o for o, _ in got] == list(range(N))
    for (key, value), (_, (gk, gv, ts, gh)) in zip(plain, got, strict=True):
        assert (gk, gv, gh) == (key, value, hdrs)
        assert before - 1000 <= ts <= after + 1000  # kcat stamps CreateTime itself
    # the other clients read kcat's batches the same way
    want = [r for _, r in got]
    assert without_offsets(ck_consume(bs, topic)) == want
    assert without_offsets(kp_consume(bs, topic)) == want


def test_an_offset_past_the_end_resets_to_earliest_in_kcat_and_confluent_kafka(layout_broker, topic_name):
    """Issue 21, bug 1: the OFFSET_OUT_OF_RANGE partition carried a null record set, which librdkafka
    refused as a parse failure ("invalid MessageSetSize -1"): it never applied auto.offset.reset and
    re-fetched in a tight loop, so ``kcat -o 1000 -X auto.offset.reset=earliest -e`` got nothing."""
    bs, topic = layout_broker.bootstrap, topic_name("reset-earliest")
    recs = records(10, tag="reset")
    assert ck_produce(bs, topic, recs) == list(range(10))
    try:
        got = kcat_consume(bs, topic, 0, "1000", "-X", "auto.offset.reset=earliest", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("kcat never reached the end of the partition: auto.offset.reset=earliest was not applied")
    assert [o for o, _ in got] == list(range(10))
    same(without_offsets(got), kcat_view(recs))
    # confluent-kafka assigning offset 1000 (its consumer has auto.offset.reset=earliest)
    got = ck_consume(bs, topic, start=1000)
    assert [o for o, _ in got] == list(range(10))
    same(without_offsets(got), recs)


def test_kcat_reads_what_kafka_python_wrote_with_every_codec(broker, topic_name):
    bs = broker.bootstrap
    for codec in CODECS:
        topic = topic_name(f"kcat-reads-kp-{codec}")
        recs = records(tag=codec, null_headers=False)
        kp_produce(bs, topic, recs, codec)
        same(without_offsets(kcat_consume(bs, topic)), kcat_view(recs))


# ================================================================== confluent-kafka


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_round_trip(broker, codec, idempotent, topic_name):
    bs, topic = broker.bootstrap, topic_name(f"ck-{codec}")
    recs = records(tag=codec)
    offsets = ck_produce(bs, topic, recs, codec, idempotent)
    assert offsets == list(range(len(recs)))
    got = ck_consume(bs, topic)
    assert [o for o, _ in got] == offsets
    same(without_offsets(got), recs)
    # assign + seek into the middle
    tail = ck_consume(bs, topic, seek_to=17)
    assert [o for o, _ in tail] == list(range(17, len(recs)))
    same(without_offsets(tail), recs[17:])
    # and starting the assignment at an offset
    same(without_offsets(ck_consume(bs, topic, start=30)), recs[30:])


def test_confluent_kafka_admin_create_describe_delete(broker, topic_name):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    name = topic_name("ck-admin")
    for f in admin.create_topics(
        [NewTopic(name, num_partitions=3, replication_factor=1, config={"retention.ms": "3600000"})]
    ).values():
        assert f.result(30) is None
    md = admin.list_topics(timeout=30)
    assert len(md.topics[name].partitions) == 3
    # an existing name is refused with TOPIC_ALREADY_EXISTS
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as exc:
        for f in admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)]).values():
            f.result(30)
    assert exc.value.args[0].code() == 36  # TOPIC_ALREADY_EXISTS
    # describe_configs: the topic's own override and the broker's defaults
    res = ConfigResource("topic", name)
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "3600000"
    assert "segment.bytes" in configs
    for f in admin.delete_topics([name]).values():
        assert f.result(30) is None
    deadline = time.monotonic() + 30
    while name in admin.list_topics(timeout=30).topics:
        assert time.monotonic() < deadline, "deleted topic still listed"
        time.sleep(0.2)


def test_confluent_kafka_admin_creates_topics_with_kafkas_topic_configs(broker, topic_name):
    """Issue 21, bug 3: CreateTopics refused compression.type, unclean.leader.election.enable and
    message.downconversion.enable (librdkafka's tests set them) with INVALID_CONFIG."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = topic_name("ck-topic-configs")
    config = {
        "compression.type": "lz4",
        "unclean.leader.election.enable": "true",
        "message.downconversion.enable": "false",
        "preallocate": "true",
        "segment.jitter.ms": "100",
        "message.timestamp.type": "LogAppendTime",
        "retention.ms": "3600000",
    }
    for f in admin.create_topics([NewTopic(name, 1, 1, config=config)]).values():
        assert f.result(30) is None
    res = ConfigResource("topic", name)
    described = admin.describe_configs([res])[res].result(30)
    assert {k: described[k].value for k in config} == config
    assert all(not described[k].is_default for k in config)
    assert described["compression.zstd.level"].value == "3" and described["compression.zstd.level"].is_default
    # an unknown name and a bad value: INVALID_CONFIG (40) naming the key, and nothing created
    for key, value in (
        ("compression.codec", "lz4"),
        ("compression.type", "brotli"),
        ("unclean.leader.election.enable", "yes"),
    ):
        bad = topic_name("ck-bad-config")
        with pytest.raises(KafkaException) as exc:
            for f in admin.create_topics([NewTopic(bad, 1, 1, config={key: value})]).values():
                f.result(30)
        err = exc.value.args[0]
        assert err.code() == 40 and key in err.str(), err
        assert bad not in admin.list_topics(timeout=30).topics


def test_confluent_kafka_idempotent_producer_writes_no_duplicates(broker, topic_name):
    """librdkafka idempotence with several in-flight requests over several partitions: every message
    exactly once, in order per partition."""
    from confluent_kafka import Producer

    bs, topic = broker.bootstrap, topic_name("ck-idem")
    create_topic(bs, topic, 3)
    p = Producer(
        {
            "bootstrap.servers": bs,
            "enable.idempotence": True,
            "linger.ms": 1,
            "batch.num.messages": 7,
            "max.in.flight.requests.per.connection": 5,
            "compression.type": "lz4",
        }
    )
    n = 3000
    for i in range(n):
        p.produce(topic, value=b"m%d" % i, partition=i % 3)
        if i % 100 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    for part in range(3):
        got = [r[1] for r in without_offsets(ck_consume(bs, topic, part))]
        assert got == [b"m%d" % i for i in range(part, n, 3)]


# ================================================================== kafka-python


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_round_trip(broker, codec, idempotent, topic_name):
    bs, topic = broker.bootstrap, topic_name(f"kp-{codec}")
    recs = records(tag=codec, null_headers=False)
    offsets = kp_produce(bs, topic, recs, codec, idempotent)
    assert offsets == list(range(len(recs)))
    got = kp_consume(bs, topic)
    assert [o for o, _ in got] == offsets
    same(without_offsets(got), recs)


def test_kafka_python_admin_create_delete(broker, topic_name):
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        name = topic_name("kp-admin")
        resp = admin.create_topics([NewTopic(name, 2, 1)])
        assert [(t["name"], t["error_code"]) for t in resp["topics"]] == [(name, 0)]
        assert name in admin.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(name, 2, 1)])
        resp = admin.delete_topics([name])
        assert [(t["name"], t["error_code"]) for t in resp["topics"]] == [(name, 0)]
        assert name not in admin.list_topics()
    finally:
        admin.close()


def test_kafka_python_idempotent_producer_writes_no_duplicates(broker, topic_name):
    from kafka import KafkaProducer

    bs, topic = broker.bootstrap, topic_name("kp-idem")
    create_topic(bs, topic, 2)
    p = KafkaProducer(
        bootstrap_servers=bs,
        enable_idempotence=True,
        linger_ms=1,
        batch_size=512,
        max_in_flight_requests_per_connection=5,
        compression_type="gzip",
    )
    n = 1000
    futs = [p.send(topic, value=b"m%d" % i, partition=i % 2) for i in range(n)]
    p.flush(60)
    p.close(10)
    assert all(f.get(10).offset >= 0 for f in futs)
    for part in range(2):
        got = [r[1] for r in without_offsets(kp_consume(bs, topic, part))]
        assert got == [b"m%d" % i for i in range(part, n, 2)]


# ================================================================== all clients on one topic


def test_mixed_topic_reads_back_identically_through_every_client(layout_broker, topic_name):
    """kcat, kafka-python, confluent-kafka and our Producer (Arrow-bodied batches) write one partition in
    turns; kcat, confluent-kafka, kafka-python and our Consumer read exactly the same records back.
    On the plain Kafka broker our Producer writes Kafka's layout."""
    bs, topic = layout_broker.bootstrap, topic_name("mixed")
    create_topic(bs, topic, 1)
    want: list[Rec] = []
    kcat_window: list[tuple[int, int, int]] = []  # (first index, last index, [before, after] ms)

    def by_kcat(tag: str, codec: str) -> None:
        plain = [(b"kc-%d" % i if i % 3 else None, f"{tag}-{i}".encode() + b"\x00\xff\n") for i in range(15)]
        before = int(time.time() * 1000)
        kcat_produce(bs, topic, plain, codec=codec, headers=(("via", b"kcat"),))
        after = int(time.time() * 1000)
        kcat_window.append((len(want), len(want) + len(plain), before, after))
        want.extend((k, v, -1, (("via", b"kcat"),)) for k, v in plain)  # timestamps checked below

    for round_, codec in enumerate(["gzip", "zstd"]):
        base = RECENT_TS + round_ * 1_000_000
        by_kcat(f"kcat{round_}", codec)
        recs = records(25, base_ts=base, tag=f"kp{round_}", null_headers=False)
        kp_produce(bs, topic, recs, "lz4")
        want.extend(recs)
        recs = records(25, base_ts=base + 100_000, tag=f"ck{round_}")
        ck_produce(bs, topic, recs, "snappy", idempotent=bool(round_))
        want.extend(recs)
        recs = records(25, base_ts=base + 200_000, tag=f"ours{round_}")
        our_produce(bs, topic, recs, "zstd" if round_ else "none")
        want.extend(recs)
    results = {name: read(bs, topic) for name, read in READERS.items()}
    reference = results["confluent-kafka"]
    assert [o for o, _ in reference] == list(range(len(want)))
    for first, last, before, after in kcat_window:
        for o, (_, _, ts, _) in reference[first:last]:
            assert before - 1000 <= ts <= after + 1000, (o, ts)
            want[o] = (*want[o][:2], ts, want[o][3])
    for name, got in results.items():
        assert [o for o, _ in got] == list(range(len(want))), name
        if name == "kcat":
            same(without_offsets(got), kcat_view(want))
        else:
            same(without_offsets(got), want)


def test_our_producer_writes_kafka_layout_to_a_plain_broker(plain_broker, topic_name):
    """Without the broker's Arrow-body feature our Producer encodes Kafka's layout; every client reads it."""
    bs, topic = plain_broker.bootstrap, topic_name("ours-on-plain")
    create_topic(bs, topic, 1)
    recs = records(20, tag="ours-plain")
    assert our_produce(bs, topic, recs, "lz4") == list(range(20))
    same(without_offsets(kp_consume(bs, topic)), recs)
    same(without_offsets(ck_consume(bs, topic)), recs)
    same(without_offsets(our_consume(bs, topic)), recs)


# ================================================================== idempotence on the wire


def _init_pid(c: WireClient, pid: int = -1, epoch: int = -1) -> tuple[int, int]:
    resp = c.request(InitProducerIdRequest(producer_id=pid, producer_epoch=epoch))
    assert resp.error_code == 0
    return resp.producer_id, resp.producer_epoch


def test_raw_idempotent_produce_sequence_checks(broker, topic_name):
    """A Kafka-layout batch with producer id/epoch/base sequence through the sans-IO client: the next
    sequence appends, a gap is OutOfOrderSequence (45), a retried batch is a duplicate answered as success
    with the original offset, and a fenced (stale) epoch is InvalidProducerEpoch (47)."""
    bs, topic = broker.bootstrap, topic_name("raw-idem")
    with WireClient(bs, arrow_body=False) as c:
        assert c.create_topic(topic, 1) == 0
        pid, epoch = _init_pid(c)
        assert pid >= 0 and epoch >= 0

        def batch(seq: int, n: int = 3, e: int = epoch, tag: str = "") -> bytes:
            return bytes(
                encode_kafka(
                    [f"{tag}{seq + i}".encode() for i in range(n)],
                    codec="lz4",
                    producer_id=pid,
                    producer_epoch=e,
                    base_sequence=seq,
                )
            )

        first = c.produce(topic, 0, batch(0))
        assert (first.error_code, first.base_offset) == (0, 0)
        second = c.produce(topic, 0, batch(3))
        assert (second.error_code, second.base_offset) == (0, 3)
        # a gap in the sequence
        gap = c.produce(topic, 0, batch(10))
        assert gap.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        # the retry of an appended batch: success with the offset it got the first time, nothing appended
        dup = c.produce(topic, 0, batch(3))
        assert (dup.error_code, dup.base_offset) == (0, 3)
        dup0 = c.produce(topic, 0, batch(0))
        assert (dup0.error_code, dup0.base_offset) == (0, 0)
        # a new epoch (InitProducerId with the current id and epoch; v3+) starts at sequence 0; once the
        # partition has seen it, the old epoch is fenced (as in Kafka, a partition learns an epoch from the
        # batches it appends)
        pid2, epoch2 = _init_pid(c, pid, epoch)
        assert (pid2, epoch2) == (pid, epoch + 1)
        fresh = c.produce(topic, 0, batch(0, e=epoch2, tag="e2-"))
        assert (fresh.error_code, fresh.base_offset) == (0, 6)
        stale = c.produce(topic, 0, batch(6))
        assert stale.error_code == 47  # INVALID_PRODUCER_EPOCH
        # and so is a duplicate of an old-epoch batch
        assert c.produce(topic, 0, batch(3)).error_code == 47
        values = [r.value for r in c.fetch_all(topic, 0)]
        assert values == [b"0", b"1", b"2", b"3", b"4", b"5", b"e2-0", b"e2-1", b"e2-2"]
    # and kafka-python reads the same 9 records (every error above appended nothing)
    assert [r[1] for r in without_offsets(kp_consume(bs, topic))] == values


def test_raw_produce_with_unknown_producer_id_is_refused(broker, topic_name):
    bs, topic = broker.bootstrap, topic_name("raw-unknown-pid")
    with WireClient(bs, arrow_body=False) as c:
        assert c.create_topic(topic, 1) == 0
        data = bytes(encode_kafka([b"x"], producer_id=987_654_321, producer_epoch=0, base_sequence=5))
        resp = c.produce(topic, 0, data)
        assert resp.error_code != 0
        assert c.fetch_all(topic, 0) == []


# ================================================================== Spark


@pytest.mark.spark
def test_spark_reads_a_topic_written_by_kafka_clients(spark, broker, topic_name):
    bs, topic = broker.bootstrap, topic_name("spark-reads")
    create_topic(bs, topic, 2)
    kp = records(30, tag="kp", null_headers=False)
    ck = records(30, base_ts=RECENT_TS + 500_000, tag="ck")
    kp_produce(bs, topic, kp, "gzip", partition=0)
    ck_produce(bs, topic, ck, "zstd", idempotent=True, partition=1)
    kcat_produce(bs, topic, [(b"kk", b"from kcat")], codec="lz4", headers=(("via", b"kcat"),), partition=1)
    df = (
        spark.read.format("logsource")
        .option("bootstrap.servers", bs)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset) for r in rows] == [(0, i) for i in range(30)] + [
        (1, i) for i in range(31)
    ]

    def rec(r) -> Rec:
        key = bytes(r.key) if r.key is not None else None
        value = bytes(r.value) if r.value is not None else None
        headers = tuple((h.key, bytes(h.value) if h.value is not None else None) for h in (r.headers or ()))
        return (key, value, int(r.timestamp.timestamp() * 1000 + 0.5), headers)

    got = [rec(r) for r in rows]
    same(got[:30], kp)
    same(got[30:60], ck)
    assert got[60][:2] == (b"kk", b"from kcat") and got[60][3] == (("via", b"kcat"),)
    assert {r.timestampType for r in rows} == {0}


@pytest.mark.spark
def test_kafka_clients_read_what_spark_wrote(spark, broker, topic_name):
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    bs, topic = broker.bootstrap, topic_name("spark-writes")
    create_topic(bs, topic, 1)
    base = 1_700_000_900_000
    data = [(f"k{i % 4}".encode() if i % 5 else None, b"spark %d \x00\xff" % i, base + i) for i in range(50)]
    schema = T.StructType(
        [
            T.StructField("key", T.BinaryType()),
            T.StructField("value", T.BinaryType()),
            T.StructField("ts_ms", T.LongType()),
        ]
    )
    df = (
        spark.createDataFrame(data, schema)
        .coalesce(1)
        .withColumn("timestamp", F.timestamp_millis("ts_ms"))
        .withColumn("headers", F.array(F.struct(F.lit("via").alias("key"), F.lit(b"spark").alias("value"))))
        .drop("ts_ms")
    )
    df.write.format("logsource").option("bootstrap.servers", bs).option("topic", topic).mode("append").save()
    want: list[Rec] = [(k, v, ts, (("via", b"spark"),)) for k, v, ts in data]
    got_kp = without_offsets(kp_consume(bs, topic))
    same(sorted(got_kp, key=lambda r: r[2]), want)
    got_kcat = without_offsets(kcat_consume(bs, topic))
    assert got_kcat == got_kp
