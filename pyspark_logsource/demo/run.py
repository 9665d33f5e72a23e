"""``logsource demo``: the whole product on an embedded broker, step by step.

1. check Java; start an embedded broker in a temporary (or given) data directory
2. create the topic and produce N web activity events (progress bar, rate)
3. exactly-once ETL into Parquet; again (nothing loaded twice); ``--verify``
4. a Spark batch query (top pages, events per minute) with a pushed-down timestamp filter
5. a streaming query that follows a live producer for a few seconds (progress, lag)
6. a summary table and a PNG (events per minute, streaming lag)

One SparkSession (configured from ``conf/``) serves every Spark step.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LogSourceError
from .events import VALUE_DDL, EventGenerator, live_chunk
from .spark import JavaMissing, check_java

DEFAULT_EVENTS = 1_000_000


class DemoFailed(RuntimeError):
    """A demo step did not produce what it should; the message says which and why."""


@dataclass
class Summary:
    """Rows of the final table: (step, result, seconds)."""

    rows: list[tuple[str, str, float | None]] = field(default_factory=list)

    def add(self, step: str, result: str, seconds: float | None = None) -> None:
        self.rows.append((step, result, seconds))

    def render(self) -> str:
        """The summary as a fixed-width text table."""
        w1 = max([len("step")] + [len(r[0]) for r in self.rows])
        w2 = max([len("result")] + [len(r[1]) for r in self.rows])
        line = f"+-{'-' * w1}-+-{'-' * w2}-+----------+"
        out = [line, f"| {'step':<{w1}} | {'result':<{w2}} | {'time (s)':>8} |", line]
        for step, result, secs in self.rows:
            t = f"{secs:8.2f}" if secs is not None else " " * 8
            out.append(f"| {step:<{w1}} | {result:<{w2}} | {t} |")
        out.append(line)
        return "\n".join(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The demo's command line."""
    p = argparse.ArgumentParser(
        prog="logsource demo",
        description="The whole product on an embedded broker: produce web activity events, load them into "
        "Parquet exactly once, query them with Spark in batch and streaming, print a summary, draw a PNG.",
    )
    p.add_argument(
        "--events", type=int, default=DEFAULT_EVENTS, help="events to produce (default %(default)s)"
    )
    p.add_argument("--topic", default="page_views", help="topic name (default %(default)s)")
    p.add_argument("--partitions", type=int, default=4, help="partitions of the topic (default %(default)s)")
    p.add_argument(
        "--compression",
        default="none",
        choices=["none", "lz4", "zstd", "gzip"],
        help="producer compression (default %(default)s)",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="broker and ETL data directory (default: a temporary one, removed at the end)",
    )
    p.add_argument(
        "--output-dir",
        type=Path,
        default=Path("demo-output"),
        help="where the PNG goes (default %(default)s)",
    )
    p.add_argument(
        "--stream-seconds",
        type=float,
        default=8.0,
        help="how long the live producer runs during the streaming step (default %(default)s)",
    )
    p.add_argument(
        "--stream-rate", type=int, default=10_000, help="live producer rate in events/s (default %(default)s)"
    )
    p.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=100_000,
        help="streaming rate limit per micro-batch (default %(default)s)",
    )
    p.add_argument(
        "--broker-mode",
        default="process",
        choices=["process", "thread"],
        help="embedded broker in a child process (default: its own interpreter, so it does not share "
        "the GIL with Spark's driver and the producers) or in a thread of this process",
    )
    p.add_argument("--seed", type=int, default=42, help="random seed of the event generator")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in logs)")
    args = p.parse_args(argv)
    if args.events < 1:
        p.error("--events must be >= 1")
    if args.partitions < 1:
        p.error("--partitions must be >= 1")
    if args.stream_seconds <= 0 or args.stream_rate < 1:
        p.error("--stream-seconds must be > 0 and --stream-rate >= 1")
    if args.data_dir is not None and args.data_dir.exists() and any(args.data_dir.iterdir()):
        # The demo checks exact counts (produced = loaded = read), which a log left by an earlier run breaks.
        p.error(f"--data-dir {args.data_dir} is not empty: give a new or empty directory")
    return args


def _say(msg: str = "") -> None:
    print(msg, flush=True)


def _step(n: int, total: int, title: str) -> None:
    _say(f"\n== [{n}/{total}] {title}")


def main(argv: list[str] | None = None) -> int:
    """Run the demo; 0 on success, 1 when a step fails, 2 when something is missing."""
    args = parse_args(argv)
    try:
        java = check_java()
    except JavaMissing as e:
        print(f"logsource demo: {e}", file=sys.stderr)
        return 2
    try:
        from ..broker.embedded import EmbeddedBroker  # noqa: F401 - fail early with a clear message
        from ..client import Admin, Producer  # noqa: F401
    except ImportError as e:
        print(f"logsource demo: this build lacks a part the demo needs ({e})", file=sys.stderr)
        return 2
    tmp = None
    data_dir = args.data_dir
    if data_dir is None:
        tmp = tempfile.mkdtemp(prefix="logsource-demo-")
        data_dir = Path(tmp)
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        return Demo(args, data_dir, java).run()
    except DemoFailed as e:
        print(f"\nlogsource demo: FAILED: {e}", file=sys.stderr)
        return 1
    except LogSourceError as e:
        print(f"\nlogsource demo: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nlogsource demo: interrupted", file=sys.stderr)
        return 130
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


class Demo:
    """The demo's steps, sharing one broker and one SparkSession."""

    STEPS = 7

    def __init__(self, args: argparse.Namespace, data_dir: Path, java: int) -> None:
        self.args = args
        self.data_dir = data_dir
        self.java = java
        self.summary = Summary()
        self.topic = args.topic
        self.per_minute: list[tuple[Any, int]] = []
        self.lag: list[tuple[float, int]] = []  # (s since the live producer started, records behind)
        self.rates: list[tuple[float, float]] = []  # (s, input rows/s of a micro-batch)
        self.latencies: list[int] = []
        self.produced = 0
        self.spark = None
        self.bootstrap = ""

    def run(self) -> int:
        from ..broker.embedded import EmbeddedBroker

        _step(1, self.STEPS, f"Embedded broker (Java {self.java} found for Spark)")
        t0 = time.perf_counter()
        with EmbeddedBroker(self.data_dir / "broker", mode=self.args.broker_mode) as broker:
            self.bootstrap = broker.bootstrap
            where = f"child process {broker.pid}" if broker.pid else "a thread of this process"
            _say(f"broker listening on {self.bootstrap} ({where}), data in {self.data_dir / 'broker'}")
            self.summary.add("broker", f"embedded at {self.bootstrap}", time.perf_counter() - t0)
            self.produce()
            self.start_spark()
            try:
                self.etl()
                self.batch_query()
                self.streaming()
            finally:
                if self.spark is not None:
                    self.spark.stop()
        png = self.plot()
        _step(7, self.STEPS, "Summary")
        _say(self.summary.render())
        _say(f"\npicture: {png.resolve()}")
        _say("demo finished OK")
        return 0

    # -- 2. produce ---------------------------------------------------------------

    def produce(self) -> None:
        from tqdm import tqdm

        from ..client import Admin, Producer

        a = self.args
        _step(
            2,
            self.STEPS,
            f"Create topic '{self.topic}' ({a.partitions} partitions) and produce {a.events:,} events",
        )
        with Admin(self.bootstrap) as admin:
            admin.create_topic(self.topic, partitions=a.partitions, exist_ok=True)
        gen = EventGenerator(seed=a.seed)
        sample = gen.chunk(1)
        _say(f"an event: key={sample['key'][0].as_py().decode()} value={sample['value'][0].as_py().decode()}")
        compression = None if a.compression == "none" else a.compression
        chunk = max(1000, min(50_000, a.events // 20 or 1))
        t0 = time.perf_counter()
        futures = []
        with (
            Producer(self.bootstrap, linger_ms=5, compression=compression) as producer,
            tqdm(
                total=a.events,
                unit="ev",
                unit_scale=True,
                desc="producing",
                disable=a.no_progress,
                file=sys.stdout,
            ) as bar,
        ):
            for table in gen.chunks(a.events, chunk):
                futures.extend(producer.send_arrow(self.topic, table))
                bar.update(table.num_rows)
            producer.flush(timeout=300)
        produced = 0
        for f in futures:
            _p, base, last = f.result(60)
            produced += last - base + 1
        secs = time.perf_counter() - t0
        if produced != a.events:
            raise DemoFailed(f"the broker acknowledged {produced:,} of {a.events:,} events")
        rate = produced / secs
        _say(
            f"produced {produced:,} events in {secs:.2f} s: {rate:,.0f} events/s (acks=1, every batch acknowledged)"
        )
        self.summary.add("produce", f"{produced:,} events, {rate:,.0f} ev/s", secs)
        self.produced = produced

    # -- Spark ----------------------------------------------------------------------

    def start_spark(self) -> None:
        from .spark import spark_session

        t0 = time.perf_counter()
        self.spark = spark_session("logsource-demo")
        _say(
            f"\nSparkSession {self.spark.version} ({self.spark.sparkContext.master}) started in "
            f"{time.perf_counter() - t0:.1f} s, configured from conf/"
        )

    def _reader(self, streaming: bool = False):
        r = self.spark.readStream if streaming else self.spark.read
        return (
            r.format("logsource").option("bootstrap.servers", self.bootstrap).option("subscribe", self.topic)
        )

    # -- 3. exactly-once ETL ----------------------------------------------------------

    def etl(self) -> None:
        from .. import etl

        _step(3, self.STEPS, "Exactly-once ETL into Parquet (load, load again, verify)")
        out = self.data_dir / "parquet" / self.topic
        cfg = etl.EtlConfig(
            output=str(out),
            bootstrap_servers=self.bootstrap,
            subscribe=self.topic,
            decode="json",
            value_schema=VALUE_DDL,
        )
        _say("same as: logsource etl " + " ".join(f"'{x}'" if " " in x else x for x in cfg.to_argv()))
        if self.args.data_dir is None:
            # the command names this run's broker and a temporary directory, both gone at the end
            _say(
                f"  (the embedded broker and {self.data_dir} are removed when the demo ends: "
                "run the demo with --data-dir DIR to keep the data, then `logsource broker "
                "--override log.dirs=DIR/broker/logs` and the command above with -b 127.0.0.1:9092)"
            )
        else:
            _say(
                f"  (the embedded broker stops when the demo ends; {self.data_dir} stays: `logsource broker "
                f"--override log.dirs={self.data_dir / 'broker' / 'logs'}` serves it again, on 127.0.0.1:9092)"
            )
        log = _indented_log
        loaded = []
        for attempt in (1, 2):
            _say(f"run {attempt}:")
            t0 = time.perf_counter()
            res = etl.run_load(self.spark, cfg, log=log)
            secs = time.perf_counter() - t0
            loaded.append(res.rows)
            what = (
                f"committed load {res.seq}: {res.rows:,} rows"
                if res.seq is not None
                else "nothing new: 0 rows"
            )
            self.summary.add(f"ETL run {attempt}", what, secs)
        if loaded[0] != self.produced:
            raise DemoFailed(
                f"the first ETL run loaded {loaded[0]:,} rows, the topic holds {self.produced:,}"
            )
        if loaded[1] != 0:
            raise DemoFailed(f"the second ETL run loaded {loaded[1]:,} rows again")
        rows = self.spark.read.parquet(str(out)).count()
        _say(f"the output holds {rows:,} rows: the second run loaded nothing twice")
        if rows != self.produced:
            raise DemoFailed(f"the Parquet output holds {rows:,} rows for {self.produced:,} events")
        _say("verify (re-count the output against the committed offsets):")
        t0 = time.perf_counter()
        report = etl.verify(self.spark, str(out), log=log)
        if not report.ok:
            raise DemoFailed("ETL --verify found differences: " + "; ".join(report.problems))
        self.summary.add("ETL --verify", f"OK: {rows:,} rows, no duplicate, no gap", time.perf_counter() - t0)
        self.spark.sparkContext.setLogLevel("ERROR")  # the job asks for WARN; keep the demo quiet

    # -- 4. batch query -------------------------------------------------------------

    def batch_query(self) -> None:
        from pyspark.sql import functions as F

        from ..client import Admin

        _step(
            4, self.STEPS, "Spark batch query: top pages, events per minute, a pushed-down timestamp filter"
        )
        t0 = time.perf_counter()
        raw = self._reader().option("startingOffsets", "earliest").load()
        events = raw.select(
            "partition",
            "offset",
            "timestamp",
            F.from_json(F.col("value").cast("string"), VALUE_DDL).alias("e"),
        )
        top = events.groupBy("e.page").count().orderBy(F.desc("count"), "page").limit(5).collect()
        _say("top pages:")
        for r in top:
            _say(f"  {r['page']:<32} {r['count']:>9,}")
        per_minute = (
            raw.groupBy(F.window("timestamp", "1 minute").start.alias("minute"))
            .count()
            .orderBy("minute")
            .collect()
        )
        self.per_minute = [(r["minute"], r["count"]) for r in per_minute]
        total = sum(c for _, c in self.per_minute)
        if total != self.produced:
            raise DemoFailed(f"the batch query saw {total:,} events, the topic holds {self.produced:,}")
        secs = time.perf_counter() - t0
        _say(
            f"events per minute over {len(self.per_minute)} minutes: min {min(c for _, c in self.per_minute):,}, "
            f"max {max(c for _, c in self.per_minute):,}"
        )
        self.summary.add("batch query", f"top page {top[0]['page']} ({top[0]['count']:,} views)", secs)

        # The last quarter of the window: the filter on `timestamp` is pushed to the
        # source, which starts each partition at the first offset with a timestamp
        # >= the bound (the broker's time index) instead of reading everything.
        first_ms, last_ms = _epoch_ms(self.per_minute[0][0]), _epoch_ms(self.per_minute[-1][0])
        cut_ms = last_ms - (last_ms - first_ms) // 4
        # Spark's session time zone is UTC (conf/spark-defaults.conf): naive UTC literals.
        cut = dt.datetime.fromtimestamp(cut_ms / 1000, tz=dt.timezone.utc).replace(tzinfo=None)
        # A DataFrame of its own: Spark caches the planned read of a Python data source
        # per DataFrame, pushed filters included, so `raw` must not see this filter.
        recent = (
            self._reader()
            .option("startingOffsets", "earliest")
            .load()
            .filter(F.col("timestamp") >= F.lit(cut))
        )
        _say(f"filter: timestamp >= {cut:%Y-%m-%d %H:%M:%S} UTC; Spark's optimized plan:")
        optimized = recent._jdf.queryExecution().optimizedPlan().toString()
        for ln in optimized.strip().splitlines():
            _say(f"  {ln[:150]}")
        # Spark drops from its own Filter what the source accepted in pushFilters.
        pushed = ">=" not in optimized
        if not pushed:
            _say(
                "the filter was NOT pushed down (is spark.sql.python.filterPushdown.enabled false?): "
                "Spark reads every offset and filters the rows"
            )
        t0 = time.perf_counter()
        n_all = raw.count()
        full_secs = time.perf_counter() - t0
        t0 = time.perf_counter()
        n_recent = recent.count()
        secs = time.perf_counter() - t0
        if n_all != self.produced:
            raise DemoFailed(f"count() saw {n_all:,} events, the topic holds {self.produced:,}")
        if pushed:
            with Admin(self.bootstrap) as admin:
                tps = [(self.topic, p) for p in admin.partitions_for(self.topic)]
                earliest = admin.list_offsets(tps, "earliest")
                by_time = admin.list_offsets(tps, cut_ms)
                latest = admin.list_offsets(tps, "latest")
            _say(
                "so the source starts each partition at the first offset with a timestamp >= the bound "
                "(the broker's time index):"
            )
            for tp in tps:
                _say(
                    f"  {tp[0]}-{tp[1]}: reads [{by_time[tp]:,}, {latest[tp]:,}) of [{earliest[tp]:,}, {latest[tp]:,})"
                )
            planned = sum(latest[tp] - by_time[tp] for tp in tps)
            if n_recent > planned:
                raise DemoFailed(
                    f"the filtered query returned {n_recent:,} rows, more than the {planned:,} in range"
                )
            skipped = 100 * (self.produced - planned) / self.produced
            result = f"{n_recent:,} rows; {skipped:.0f}% of the log not read"
        else:
            result = f"{n_recent:,} rows; filter not pushed down"
        _say(
            f"{n_recent:,} events since the bound, counted in {secs:.2f} s (all {n_all:,}: {full_secs:.2f} s)"
        )
        self.summary.add("pushdown", result, secs)

    # -- 5. streaming -------------------------------------------------------------

    def streaming(self) -> None:
        from pyspark.sql import functions as F

        from ..client import Admin, Producer

        a = self.args
        _step(
            5,
            self.STEPS,
            f"Streaming query following a live producer ({a.stream_rate:,} events/s for {a.stream_seconds:g} s)",
        )
        out = self.data_dir / "stream"
        stream = (
            self._reader(streaming=True)
            .option("startingOffsets", "latest")
            .option("maxOffsetsPerTrigger", str(a.max_offsets_per_trigger))
            .load()
            .select(
                "partition",
                "offset",
                "timestamp",
                F.from_json(F.col("value").cast("string"), VALUE_DDL).alias("e"),
            )
            .select("partition", "offset", "timestamp", "e.*")
        )
        query = (
            stream.writeStream.format("parquet")
            .option("checkpointLocation", str(out / "_checkpoint"))
            .trigger(processingTime="1 second")
            .start(str(out / "data"))
        )
        admin = Admin(self.bootstrap)
        tps = [(self.topic, p) for p in admin.partitions_for(self.topic)]
        stop = threading.Event()
        live = {"sent": 0, "error": None}

        def produce_live() -> None:
            gen = EventGenerator(seed=a.seed + 1)
            tick = 0.1
            per_tick = max(1, int(a.stream_rate * tick))
            try:
                with Producer(self.bootstrap, linger_ms=5) as p:
                    t_next = time.perf_counter()
                    end = t_next + a.stream_seconds
                    while not stop.is_set() and time.perf_counter() < end:
                        p.send_arrow(self.topic, live_chunk(gen, per_tick, spread_ms=int(tick * 1000)))
                        live["sent"] += per_tick
                        t_next += tick
                        time.sleep(max(0.0, t_next - time.perf_counter()))
                    p.flush(timeout=60)
            except Exception as e:  # reported by the main thread
                live["error"] = e

        try:
            self._wait_started(query)
            start_end = sum(admin.list_offsets(tps, "latest").values())
            producer = threading.Thread(target=produce_live, name="demo-live-producer", daemon=True)
            t0 = time.perf_counter()
            producer.start()
            seen = 0
            deadline = t0 + a.stream_seconds + 90
            caught_up_at = None
            while time.perf_counter() < deadline:
                time.sleep(0.5)
                if query.exception() is not None:
                    raise DemoFailed(f"the streaming query failed: {query.exception()}")
                progress = query.recentProgress
                log_end = sum(admin.list_offsets(tps, "latest").values())
                t = time.perf_counter() - t0
                for pr in progress[seen:]:
                    self._report(pr, t, log_end)
                seen = len(progress)
                consumed = self._consumed(progress)
                lag = max(0, log_end - consumed) if consumed is not None else log_end - start_end
                self.lag.append((t, lag))
                if not producer.is_alive() and lag == 0:
                    caught_up_at = t
                    break
            producer.join(5)
            if live["error"] is not None:
                raise DemoFailed(f"the live producer failed: {live['error']}")
            if caught_up_at is None:
                raise DemoFailed("the streaming query did not catch up with the live producer within 90 s")
        finally:
            stop.set()
            query.stop()
            admin.close()
        rows = self.spark.read.parquet(str(out / "data")).count()
        live_total = live["sent"]
        rates = [r for _, r in self.rates if r > 0]
        lat = self.latencies
        _say(
            f"the stream wrote {rows:,} rows for {live_total:,} live events; caught up {caught_up_at:.1f} s after the producer started"
        )
        if rows != live_total:
            raise DemoFailed(
                f"the stream wrote {rows:,} rows for {live_total:,} events produced while it ran"
            )
        self.summary.add(
            "streaming",
            f"{rows:,} live events, avg {sum(rates) / max(len(rates), 1):,.0f} rows/s in, "
            f"max batch {max(lat or [0]):,} ms, lag 0 at end",
            caught_up_at,
        )

    def _wait_started(self, query, timeout: float = 120.0) -> None:
        # The first trigger resolves "latest"; produce only after it so that the
        # live events are exactly what the stream reads.
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if query.exception() is not None:
                raise DemoFailed(f"the streaming query failed: {query.exception()}")
            if query.recentProgress:
                return
            time.sleep(0.2)
        raise DemoFailed("the streaming query did not start within 120 s")

    @staticmethod
    def _consumed(progress: list[dict]) -> int | None:
        for pr in reversed(progress):
            for src in pr.get("sources", []):
                end = src.get("endOffset")
                if isinstance(end, str):
                    try:
                        end = json.loads(end)
                    except ValueError:
                        end = None
                if isinstance(end, dict):
                    return sum(
                        int(o) for parts in end.values() if isinstance(parts, dict) for o in parts.values()
                    )
        return None

    def _report(self, pr: dict, t: float, log_end: int) -> None:
        rows = int(pr.get("numInputRows", 0))
        in_rate = float(pr.get("inputRowsPerSecond") or 0.0)
        proc_rate = float(pr.get("processedRowsPerSecond") or 0.0)
        ms = int((pr.get("durationMs") or {}).get("triggerExecution", 0))
        self.latencies.append(ms)
        consumed = self._consumed([pr]) or 0
        lag = max(0, log_end - consumed)
        if rows:
            self.rates.append((t, in_rate))
        _say(
            f"  t={t:5.1f}s batch {pr.get('batchId')}: {rows:>7,} rows, in {in_rate:>9,.0f} rows/s, "
            f"processed {proc_rate:>9,.0f} rows/s, batch latency {ms:>5,} ms, lag {lag:>7,} records"
        )

    # -- 6. picture ---------------------------------------------------------------

    def plot(self) -> Path:
        from .plot import plot_demo

        _step(6, self.STEPS, "Picture")
        path = plot_demo(
            self.per_minute, self.lag, self.args.output_dir / "demo.png", rates=self.rates, topic=self.topic
        )
        self.summary.add("picture", str(path), None)
        return path


def _epoch_ms(minute: dt.datetime) -> int:
    aware = minute if minute.tzinfo else minute.replace(tzinfo=dt.timezone.utc)
    return int(aware.timestamp() * 1000)


def _indented_log(text: str) -> None:
    for ln in str(text).splitlines() or [""]:
        _say(f"  | {ln}")


def _explain(df) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain()
    return buf.getvalue()
