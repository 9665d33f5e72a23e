"""A local read's CPU with large batches read in pieces vs read whole, by batch size, same run.

    .venv/bin/python benchmarks/local_read_pieces.py [--rows 400000] [--repeat 7]

One broker process; per batch size, a topic of ``--rows`` 200-byte values with short keys, sent as Arrow
tables of one batch each. Each read is ``read_range(..., local_read="true")`` over the whole topic in
8 MB chunks, as a Spark task reads; ``pieces`` sets ``client.local_read.PIECES_MIN_BATCH`` to 0 (every
batch read in pieces: header, arrays, then keys and values straight into the columns), ``whole`` past
every batch (read whole into a buffer, the values copied out). The two alternate; the median of
``--repeat`` reads after the first is printed, and the ratio pieces / whole (below 1: pieces cheaper).
``PIECES_MIN_BATCH`` is set from this table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark_logsource import Admin, Producer  # noqa: E402
from pyspark_logsource.broker.embedded import EmbeddedBroker  # noqa: E402
from pyspark_logsource.client import local_read as lr  # noqa: E402
from pyspark_logsource.client import read_range  # noqa: E402

ROWS_PER_BATCH = (40, 80, 160, 320, 640, 1280)
VALUE = 200


def fill(bs: str, topic: str, n: int, rows: int) -> None:
    """``n`` rows in batches of ``rows``: random lowercase values, keys k0..k999."""
    rng = np.random.default_rng(rows)
    with Admin(bs) as a:
        a.create_topic(topic, partitions=1)
    with Producer(bs, batch_size=8 << 20, linger_ms=5) as p:
        for s in range(0, n, rows):
            m = min(rows, n - s)
            values = rng.integers(97, 123, (m, VALUE), dtype=np.uint8)
            table = pa.table(
                {
                    "value": [v.tobytes() for v in values],
                    "key": [b"k%d" % (i % 1000) for i in range(s, s + m)],
                }
            )
            p.send_arrow(topic, table, partition=0)
        p.flush()


def read_cpu(bs: str, topic: str, n: int, min_batch: int) -> float:
    """CPU seconds of one local read of the whole topic with ``PIECES_MIN_BATCH = min_batch``."""
    lr.PIECES_MIN_BATCH = min_batch
    before = dict(lr.STATS)
    c0 = time.process_time()
    got = sum(
        rb.num_rows
        for rb in read_range(bs, topic, 0, 0, n, whole_fetches=True, local_read="true", max_bytes=8 << 20)
    )
    cpu = time.process_time() - c0
    if got != n or lr.STATS["fallbacks"] != before["fallbacks"]:
        raise SystemExit(
            f"{topic}: read {got} of {n} rows, fallbacks {lr.STATS['fallbacks'] - before['fallbacks']}"
        )
    if (lr.STATS["pieces"] > before["pieces"]) != (min_batch == 0):
        raise SystemExit(f"{topic}: the read did not take the path asked for")
    return cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    default = lr.PIECES_MIN_BATCH
    print(f"local read of {args.rows:,} rows ({VALUE}-byte values), median of {args.repeat - 1} reads")
    print(f"{'batch KiB':>9} {'rows':>6} {'pieces ms':>10} {'whole ms':>9} {'pieces/whole':>13}")
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(tmp, mode="process") as b:
        for rows in ROWS_PER_BATCH:
            topic = f"t{rows}"
            fill(b.bootstrap, topic, args.rows, rows)
            cpu: dict[str, list[float]] = {"pieces": [], "whole": []}
            for rep in range(args.repeat):
                for name, min_batch in (("pieces", 0), ("whole", 1 << 62)):
                    c = read_cpu(b.bootstrap, topic, args.rows, min_batch)
                    if rep:  # the first of each: the page cache and the allocator warming up
                        cpu[name].append(c)
            p, w = float(np.median(cpu["pieces"])) * 1e3, float(np.median(cpu["whole"])) * 1e3
            size = (rows * (VALUE + 16 + 4) + 61) / 1024  # values, arrays, keys of about 3 bytes, header
            print(f"{size:>9.1f} {rows:>6} {p:>10.1f} {w:>9.1f} {p / w:>12.2f}x", flush=True)
    lr.PIECES_MIN_BATCH = default
    print(f"PIECES_MIN_BATCH is {default >> 10} KiB: batches from it on are read in pieces")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
