"""The compiled core (issue 25) against the pure-Python path, each row both ways in the same run.

One broker process; librdkafka (confluent-kafka) writes ``--messages`` 200-byte
messages into topic ``rd`` (Kafka's varint record layout, batches of up to 1 MB
as librdkafka makes them) and our Producer writes the same into ``ours``
(Arrow bodies). Rows, each with the pure-Python path (the modules' ``ckafka``
set to None in this process) and the compiled one, alternated, best of
``--repeat``:

* ``format``: ``to_arrow()`` of 1 MB fetch answers cut from ``rd``'s log
  segment (what poll_arrow() and a Spark task do with what the broker sends),
  and ``walk(check_crc=True)`` over a whole fetch answer of 500 batches of 50
  (our Producer's batch 50, as a Spark task's fetch holds them);
* ``format`` also: ``to_kafka()`` of 1 MB fetches of ``ours`` (the broker's conversion of
  Arrow-bodied batches into Kafka's varint layout for Kafka clients), and
  ``messages_from_arrow()`` of 1000-row tables (poll()'s batch-to-messages step);
* ``consumer``: ``Consumer.poll_arrow(1000)`` over the whole topic with 4 MB fetches, ``rd`` and ``ours``,
  and with 200 KB (~1000-message) fetches over ``p1000``; and
  ``Consumer.poll()`` per message with 200 KB (~1000-message) fetches over ``rd``, ``ours`` and
  ``p1000`` (our Producer, batches of 1000), with confluent-kafka's ``consume(10000)`` of ``rd``
  in the same run;
* ``spark`` (``--spark``): ``sum(length(value))`` over ``--spark-rows`` rows of a
  librdkafka-written topic and of our Producer's, in two child processes, one
  with ``LOGSOURCE_NO_EXTENSIONS=1`` (its Python workers inherit it).
* ``log`` (``--log``; ``--log-only``: these rows alone, no broker): the Arrow-body encode of a
  producer batch (``arrow_body.encode_records``, batches of 1, 50 and 1000, 200-byte values), and
  ``PartitionLog.append`` of 50-message batches against a plain ``write()`` of the same bytes
  (benchmarks/paper.py's "log append / write()" row, log_store.bench_append), on each path.

    .venv/bin/python benchmarks/compiled.py [--messages 1000000] [--spark --spark-rows 2000000]
    .venv/bin/python benchmarks/compiled.py --log-only --messages 1000000
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kafka_clients  # noqa: E402  (librdkafka's producer as that benchmark runs it)
import paper  # noqa: E402

from pyspark_logsource import Admin, Consumer, Producer  # noqa: E402
from pyspark_logsource import format as F  # noqa: E402
from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402
from pyspark_logsource.broker.log import append as log_append  # noqa: E402
from pyspark_logsource.broker.log import index as log_index  # noqa: E402
from pyspark_logsource.broker.log import log as log_module  # noqa: E402
from pyspark_logsource.broker.log import log_end, segment_tail  # noqa: E402
from pyspark_logsource.broker.log import segment as log_segment  # noqa: E402
from pyspark_logsource.client import fetched  # noqa: E402
from pyspark_logsource.client import producer as producer_module  # noqa: E402
from pyspark_logsource.format import (  # noqa: E402
    _speedups,
    arrow_body,
    header,
    kafka_decode,
    kafka_encode,
    plain_run,
)

#: (module, attribute, the compiled module) each set to None for the pure-Python path
_SWITCHES = (
    (header, "ckafka", _speedups.ckafka),
    (kafka_decode, "ckafka", _speedups.ckafka),
    (kafka_encode, "crecords", _speedups.crecords),
    (fetched, "crecords", _speedups.crecords),
    (arrow_body, "cbody", _speedups.cbody),
    (producer_module, "_caccum", producer_module._caccum),  # the C accumulator (buffers, send, encode)
)
#: (module, attribute, pure-Python value, compiled value) where the pure path is a function, not None
_TWINS = (
    # bound when a PartitionLog is made (AppendValidator)
    (log_append, "check_and_stamp", plain_run.check_and_stamp_py, plain_run.check_and_stamp),
    (log_append, "write_plain_batch", plain_run.write_plain_batch_py, plain_run.write_plain_batch),
    # bound when a segment is made (its append end)
    (log_segment, "SegmentTail", segment_tail.SegmentTailPy, segment_tail.SegmentTail),
    # bound when a PartitionLog is made (its append end: the plain produce's one call)
    (log_module, "LogEnd", log_end.LogEndPy, log_end.LogEnd),
    (log_index.OffsetIndex, "append", log_index.OffsetIndex.append_py, log_index.OffsetIndex.append),
    (
        log_index.TimeIndex,
        "maybe_append",
        log_index.TimeIndex.maybe_append_py,
        log_index.TimeIndex.maybe_append,
    ),
)


@contextlib.contextmanager
def path(compiled: bool):
    """Run the hot paths compiled or pure-Python in this process."""
    saved = [getattr(m, a) for m, a, _ in _SWITCHES]
    saved_twins = [getattr(m, a) for m, a, _, _ in _TWINS]
    for m, a, c in _SWITCHES:
        setattr(m, a, c if compiled else None)
    for m, a, py, c in _TWINS:
        setattr(m, a, c if compiled else py)
    try:
        yield
    finally:
        for (m, a, _), s in zip(_SWITCHES, saved, strict=True):
            setattr(m, a, s)
        for (m, a, _, _), s in zip(_TWINS, saved_twins, strict=True):
            setattr(m, a, s)


def both(fn, repeat: int) -> tuple[float, float]:
    """Best seconds of ``fn()`` on the pure-Python path and on the compiled one, runs alternated."""
    best = {False: float("inf"), True: float("inf")}
    for _ in range(repeat):
        for compiled in (False, True):
            with path(compiled):
                t0 = time.perf_counter()
                fn()
                best[compiled] = min(best[compiled], time.perf_counter() - t0)
    return best[False], best[True]


ROWS: list[tuple] = []


def row(name: str, n: int, unit: str, py: float, co: float, target: str = "") -> None:
    ROWS.append((name, n, unit, py, co, target))
    print(f"  {name}: {n / py:,.0f} -> {n / co:,.0f} {unit}/s ({py / co:.2f}x)", file=sys.stderr, flush=True)


def fetches(log: bytes, max_bytes: int) -> list[bytes]:
    """The log cut into fetch answers of at most ``max_bytes`` (whole batches; a bigger batch alone)."""
    out, start, pos = [], 0, 0
    for p, h in F.walk(log):
        if p + h.size - start > max_bytes and p > start:
            out.append(log[start:p])
            start = p
        pos = p + h.size
    out.append(log[start:pos])
    return out


def format_rows(log_dir: str, repeat: int) -> None:
    segs = sorted(glob.glob(os.path.join(log_dir, "**", "rd-0", "*.log"), recursive=True))
    log = b"".join(Path(s).read_bytes() for s in segs)
    walked = F.walk(log)
    n = sum(h.record_count for _, h in walked)
    answers = fetches(log, 1 << 20)
    print(f"rd: {len(walked)} batches, {n:,} records, {len(log) / 1e6:.0f} MB", file=sys.stderr)

    def decode() -> None:
        for a in answers:
            F.to_arrow(a)

    row("to_arrow(), librdkafka-written topic, 1 MB fetches", n, "msg", *both(decode, repeat), ">= 5,000,000")
    small = fetches(log, 200 << 10)

    def decode_small() -> None:
        for a in small:
            F.to_arrow(a)

    row("to_arrow(), librdkafka-written topic, 200 KB fetches", n, "msg", *both(decode_small, repeat))
    msgs = paper.values(50)
    ours = b"".join(bytes(F.encode(msgs, base_offset=50 * i)) for i in range(500))
    row(
        "walk(check_crc=True), one fetch of 500 batches of 50",
        500,
        "batch",
        *both(lambda: [F.walk(ours, check_crc=True) for _ in range(20)], repeat),
    )
    ROWS[-1] = (*ROWS[-1][:1], 500 * 20, *ROWS[-1][2:])
    # Kafka's varint record encode: what the broker does to Arrow-bodied batches for Kafka clients
    osegs = sorted(glob.glob(os.path.join(log_dir, "**", "p1000-0", "*.log"), recursive=True))
    olog = b"".join(Path(s).read_bytes() for s in osegs)
    oanswers = fetches(olog, 1 << 20)
    on = sum(h.record_count for _, h in F.walk(olog))
    py, co = both(lambda: [F.to_kafka(a) for a in oanswers], repeat)
    assert _both_same(lambda: F.to_kafka(oanswers[0]))
    row("to_kafka(): Arrow-body 1 MB fetches to Kafka's layout", on, "msg", py, co)
    # poll()'s batch-to-messages step, on the 1000-record tables of p1000
    tables = [F.to_arrow(a) for a in fetches(olog, 200 << 10)]
    tn = sum(t.num_rows for t in tables)
    py, co = both(lambda: [fetched.messages_from_arrow("p1000", 0, t) for t in tables], repeat)
    row("messages_from_arrow(), ~1000-row tables", tn, "msg", py, co)


def log_rows(n: int, repeat: int) -> None:
    """The Arrow-body encode of producer batches, and the log append vs write() (paper.py's row), both paths."""
    from log_store import bench_append

    values = paper.values(1000)
    now = int(time.time() * 1000)
    for size in (1, 50, 1000):
        batch, stamps = values[:size], [now + i % 7 for i in range(size)]
        count = max(1, n // size)

        def encode(batch=batch, stamps=stamps, count=count) -> None:
            enc = arrow_body.encode_records
            for _ in range(count):
                enc(batch, None, stamps, None, codec=0, producer_id=-1, producer_epoch=-1, base_sequence=-1)

        assert _both_same(
            lambda batch=batch, stamps=stamps: bytes(
                arrow_body.encode_records(
                    batch, None, stamps, None, codec=0, producer_id=-1, producer_epoch=-1, base_sequence=-1
                )
            )
        )
        row(f"encode_records(), Arrow body, batches of {size}", count * size, "msg", *both(encode, repeat))
    # PartitionLog.append of 50-message batches vs os.write() of the same bytes, each path in turn
    rates: dict = {False: (0.0, 0.0), True: (0.0, 0.0)}
    size = 0
    with tempfile.TemporaryDirectory() as d:
        for r in range(repeat):
            for compiled in (False, True):
                root = Path(d) / f"{compiled}-{r}"
                root.mkdir()
                with path(compiled):
                    log_mb, plain_mb, size = bench_append(root, 50, n * 216, 3)
                best = rates[compiled]
                rates[compiled] = (max(best[0], log_mb), max(best[1], plain_mb))
    per_mb = 50 / size * (1 << 20)  # messages per MB
    (py_log, py_plain), (co_log, co_plain) = rates[False], rates[True]
    row("PartitionLog.append, batches of 50", n, "msg", n / (py_log * per_mb), n / (co_log * per_mb))
    row("  baseline: plain write(), same bytes", n, "msg", n / (py_plain * per_mb), n / (co_plain * per_mb))
    LOG_WRITE.update({False: py_log / py_plain, True: co_log / co_plain})
    print(
        f"  log append / write(), batches of 50: pure-Python {LOG_WRITE[False]:.2f}, compiled "
        f"{LOG_WRITE[True]:.2f} (target >= 0.85)",
        file=sys.stderr,
    )


LOG_WRITE: dict = {}


def _both_same(fn) -> bool:
    with path(False):
        a = fn()
    with path(True):
        b = fn()
    return a == b


def consume_all(bs: str, topic: str, n: int) -> None:
    c = Consumer(bs, max_partition_fetch_bytes=4 << 20, fetch_max_bytes=50 << 20, fetch_max_wait_ms=100)
    c.assign([(topic, 0)])
    c.seek((topic, 0), 0)
    got = 0
    while got < n:
        for t in c.poll_arrow(1000).values():
            got += t.num_rows
    c.close()


def consumer_rows(bs: str, n: int, repeat: int) -> None:
    for name, topic in (("librdkafka-written topic", "rd"), ("Arrow-body topic (our Producer)", "ours")):
        py, co = both(lambda topic=topic: consume_all(bs, topic, n + 1), repeat)
        row(
            f"Consumer.poll_arrow(1000), 4 MB fetches, {name}",
            n,
            "msg",
            py,
            co,
            ">= 5,000,000" if topic == "rd" else "",
        )
    # issue 25's Arrow-body row is at ~1000-message fetches (paper.py's "consumer 1000-msg batches"): 200 KB
    # fetches of p1000, one 1000-record batch per fetch
    py, co = both(lambda: paper.consume(bs, "p1000", n, arrow=True), repeat)
    row("Consumer.poll_arrow(1000), 200 KB fetches, p1000", n, "msg", py, co, ">= 8,000,000")
    # poll() per message, fetches of 200 KB (~1000 messages), as benchmarks/paper.py's consumer rows
    for name, topic in (("p1000", "p1000"), ("ours", "ours"), ("rd (librdkafka)", "rd")):
        py, co = both(lambda topic=topic: paper.consume(bs, topic, n, arrow=False), repeat)
        row(f"Consumer.poll() per message, 200 KB fetches, {name}", n, "msg", py, co, ">= 3,000,000")
    rd = min(sum(kafka_clients.rd_consume(bs, "rd", n)[1:2]) for _ in range(repeat))
    RD_CONSUME.append(n / rd)
    print(f"  confluent-kafka consume(10000) of rd: {n / rd:,.0f} msg/s", file=sys.stderr, flush=True)


RD_CONSUME: list = []


def producer_rows(bs: str, msgs: list[bytes], repeat: int) -> None:
    """send(): the caller's cost at batch 50 and the throughput with librdkafka's batching (1 MB, linger
    5 ms) against confluent-kafka's produce() in the same run. The compiled path is client/_caccum: send()
    into per-partition C record buffers (keyless, keyed or explicit partition) and the batch encode from them."""
    n = len(msgs)
    caller: dict = {False: [], True: []}

    def send50(compiled: bool) -> None:
        paper.produce_send(bs, "s50", msgs, 50, 5, 1, caller=caller[compiled])

    for _ in range(repeat):
        for compiled in (False, True):
            with path(compiled):
                send50(compiled)
    py, co = min(caller[False]), min(caller[True])
    row("Producer.send() caller cost, batch 50 (as msg/s)", n, "msg", py, co, "<= 0.4 us")
    print(f"  send() caller cost: {1e6 * py / n:.2f} -> {1e6 * co / n:.2f} us", file=sys.stderr)
    py, co = both(lambda: kafka_clients.our_produce(bs, "s1m", msgs, "none"), repeat)
    row("Producer.send(), 1 MB batches, linger 5 ms", n, "msg", py, co)
    rd = min(kafka_clients.rd_produce(bs, "srd1m", msgs, "none") for _ in range(repeat))
    RD_PRODUCE.append(n / rd)
    print(f"  confluent-kafka produce() of the same: {n / rd:,.0f} msg/s", file=sys.stderr, flush=True)


RD_PRODUCE: list = []


SPARK_CHILD = r"""
import json, os, sys, time
os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
from pyspark.sql import SparkSession, functions as F
from pyspark_logsource import register
from pyspark_logsource.format import _speedups
bs, repeat = sys.argv[1], int(sys.argv[2])
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "4g").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
register(spark)
src = spark.read.format("logsource").option("bootstrap.servers", bs).option("minPartitions", "4")
out = {"implementation": _speedups.IMPLEMENTATION}
best = {"srd": float("inf"), "sours": float("inf")}
# round 0 warms the workers and the JVM up (not counted); then the order alternates, so neither topic is
# always the one read first after the warm-up (measured: the first read after it ran ~0.25 s slower)
for r in range(1 + 2 * repeat):
    for topic in ("srd", "sours") if r % 2 == 0 else ("sours", "srd"):
        t0 = time.perf_counter()
        total = src.option("subscribe", topic).load().select(F.sum(F.length("value"))).collect()[0][0]
        if r:
            best[topic] = min(best[topic], time.perf_counter() - t0)
        out[topic] = (best[topic], total)
spark.stop()
print("RESULT " + json.dumps(out))
"""


def spark_rows(bs: str, rows: int, repeat: int) -> None:
    got = {}
    for compiled in (False, True):
        env = dict(os.environ)
        env.pop("LOGSOURCE_NO_EXTENSIONS", None)
        if not compiled:
            env["LOGSOURCE_NO_EXTENSIONS"] = "1"
        p = subprocess.run(
            [sys.executable, "-c", SPARK_CHILD, bs, str(repeat)], env=env, capture_output=True, text=True
        )
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if not line:
            raise RuntimeError(p.stderr[-3000:])
        got[compiled] = json.loads(line[0][7:])
        assert got[compiled]["implementation"] == ("compiled" if compiled else "python")
    assert got[False]["srd"][1] == got[True]["srd"][1] == got[True]["sours"][1]
    for topic, name in (("srd", "librdkafka-written topic"), ("sours", "our Producer's topic")):
        row(f"Spark sum(length(value)), {name}", rows, "row", got[False][topic][0], got[True][topic][0])
    for compiled in (False, True):
        g = got[compiled]
        label = "compiled" if compiled else "pure-Python"
        print(
            f"  Spark {label}: librdkafka-written {g['srd'][0]:.2f} s / ours {g['sours'][0]:.2f} s = "
            f"{g['srd'][0] / g['sours'][0]:.2f}x (target <= 1.1x)",
            file=sys.stderr,
        )
    ROWS.append(("Spark librdkafka / ours, seconds ratio", 0, "", 0, 0, "<= 1.1x"))
    SPARK_RATIO.update({c: got[c]["srd"][0] / got[c]["sours"][0] for c in (False, True)})


SPARK_RATIO: dict = {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spark", action="store_true", help="also the Spark rows (two child Spark sessions)")
    ap.add_argument("--spark-rows", type=int, default=2_000_000)
    ap.add_argument("--producer", action="store_true", help="also the send() rows and confluent's produce()")
    ap.add_argument("--no-read", action="store_true", help="without the format and consumer rows")
    ap.add_argument("--log", action="store_true", help="also the Arrow-body encode and log append rows")
    ap.add_argument("--log-only", action="store_true", help="only those rows (no broker)")
    args = ap.parse_args(argv)
    if _speedups.ckafka is None:
        print("the compiled core is not built (or LOGSOURCE_NO_EXTENSIONS is set): nothing to compare")
        return 1
    n = args.messages
    if args.log or args.log_only:
        log_rows(n, args.repeat)
    if args.log_only:
        _print_log_rows(args.repeat)
        return 0
    msgs = paper.values(n)
    with tempfile.TemporaryDirectory() as d, EmbeddedBroker(Path(d), mode="process") as broker:
        bs = broker.bootstrap
        admin = Admin(bs)
        for t in ("rd", "ours", "p1000"):
            admin.create_topic(t, 1)
        kafka_clients.rd_produce(bs, "rd", msgs, "none")
        p = Producer(bs, linger_ms=5, batch_size=1_000_000, buffer_memory=512 << 20, max_in_flight=64)
        for v in msgs:
            p.send("ours", v, partition=0)
        p.send("ours", b"warm-up", partition=0)  # as rd_produce's, so both topics hold n + 1
        p.flush()
        p.close()
        # batches of 1000 records (200-byte values + 16 bytes accounted each)
        p = Producer(bs, linger_ms=50, batch_size=216_000, buffer_memory=512 << 20, max_in_flight=64)
        for v in msgs:
            p.send("p1000", v, partition=0)
        p.flush()
        p.close()
        if not args.no_read:
            format_rows(d, args.repeat)
            consumer_rows(bs, n, args.repeat)
        if args.producer:
            for t in ("s50", "s1m", "srd1m"):
                admin.create_topic(t, 1)
            producer_rows(bs, msgs, args.repeat)
        if args.spark:
            sm = paper.values(args.spark_rows)
            admin.create_topic("srd", 4)
            admin.create_topic("sours", 4)
            rd = kafka_clients.RdProducer(
                {
                    "bootstrap.servers": bs,
                    "linger.ms": 5,
                    "batch.size": 1_000_000,
                    "acks": 1,
                    "queue.buffering.max.messages": 2_000_000,
                    "queue.buffering.max.kbytes": 1_048_576,
                }
            )
            ours = Producer(bs, linger_ms=5, batch_size=1_000_000, buffer_memory=512 << 20, max_in_flight=64)
            for i, v in enumerate(sm):
                while True:
                    try:
                        rd.produce("srd", v, partition=i % 4)
                        break
                    except BufferError:
                        rd.poll(0.01)
                ours.send("sours", v, partition=i % 4)
            rd.flush(300)
            ours.flush()
            ours.close()
            spark_rows(bs, args.spark_rows, 2)
        admin.close()
    print()
    print(f"{'row':58} {'count':>10} {'pure Python/s':>14} {'compiled/s':>12} {'ratio':>6} {'target':>14}")
    for name, cnt, _unit, py, co, target in ROWS:
        if not cnt:
            print(
                f"{name:58} {'':>10} {SPARK_RATIO[False]:>13.2f}x {SPARK_RATIO[True]:>11.2f}x {'':>6} {target:>14}"
            )
            continue
        print(f"{name:58} {cnt:>10,} {cnt / py:>14,.0f} {cnt / co:>12,.0f} {py / co:>5.2f}x {target:>14}")
    for rate in RD_PRODUCE:
        print(f"{'confluent-kafka Producer.produce(), 1 MB batches':58} {n:>10,} {rate:>14,.0f} (same run)")
        for name, cnt, _unit, py, co, _t in ROWS:
            if name.startswith("Producer.send(), 1 MB"):
                print(
                    f"{'  ours send() / confluent produce()':58} {'':>10} "
                    f"{cnt / py / rate:>13.2f}x {cnt / co / rate:>11.2f}x {'':>6} {'>= 1.5x':>14}"
                )
    for rate in RD_CONSUME:
        print(f"{'confluent-kafka Consumer.consume(10000), rd':58} {n:>10,} {rate:>14,.0f} (same run)")
        for name, cnt, _unit, py, co, _t in ROWS:
            if name.startswith("Consumer.poll() per message") and name.endswith("rd (librdkafka)"):
                print(
                    f"{'  ours poll() / confluent consume(10000), rd':58} {'':>10} "
                    f"{cnt / py / rate:>13.2f}x {cnt / co / rate:>11.2f}x {'':>6} {'>= 3.0x':>14}"
                )
    print(
        f"\nbest of {args.repeat}, alternated; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    return 0


def _print_log_rows(repeat: int) -> None:
    print(f"\n{'row':58} {'count':>10} {'pure Python/s':>14} {'compiled/s':>12} {'ratio':>6}")
    for name, cnt, _unit, py, co, _target in ROWS:
        print(f"{name:58} {cnt:>10,} {cnt / py:>14,.0f} {cnt / co:>12,.0f} {py / co:>5.2f}x")
    print(
        f"{'log append / write(), batches of 50 (target >= 0.85)':58} {'':>10} {LOG_WRITE[False]:>14.2f} "
        f"{LOG_WRITE[True]:>12.2f}"
    )
    print(f"\nbest of {repeat}, alternated; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    sys.exit(main())
