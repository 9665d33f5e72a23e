"""The log cleaner's throughput beside a plain sequential read of the same segments.

    .venv/bin/python benchmarks/compaction.py [--records 400000] [--keys 1000] [--value-bytes 100]

Builds a compacted log (``segment.bytes`` 1 MiB) of ``--records`` keyed
updates over ``--keys`` keys, then measures, best of ``--repeat`` fresh copies:

- *read*: every segment read sequentially, whole batches, CRC-checked and
  decoded to Arrow (what the cleaner must do at least once);
- *clean*: one cleaning pass (offset map + recopy + swap, fsyncs included).

MB/s are of segment bytes read; the ratio is clean / read.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from pyspark_logsource.broker.log import LogConfig, LogManager
from pyspark_logsource.broker.log.cleaner import read_chunks
from pyspark_logsource.format import encode

TOPIC = {"cleanup.policy": "compact", "segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0"}


def build(d: Path, records: int, keys: int, value_bytes: int) -> int:
    rng = np.random.default_rng(1)
    ks = rng.integers(0, keys, records)
    m = LogManager([d], LogConfig(), background=False)
    lg = m.create_topic("bench", 1, TOPIC)[0]
    pad = b"x" * value_bytes
    for i in range(0, records, 500):
        lg.append(encode([pad] * len(ks[i : i + 500]), [b"key-%d" % k for k in ks[i : i + 500]]))
    lg.roll()
    size = lg.size_bytes
    m.close()
    return size


def read_all(d: Path) -> float:
    m = LogManager([d], LogConfig(), background=False)
    lg = m.get_log("bench", 0)
    t0 = time.perf_counter()
    n = 0
    for seg in lg.segments[:-1]:
        for _, run in read_chunks(seg):
            n += run.table.num_rows
    dt = time.perf_counter() - t0
    m.close()
    return dt


def clean(d: Path) -> tuple[float, int, int]:
    m = LogManager([d], LogConfig(), background=False)
    t0 = time.perf_counter()
    stats = m.clean_logs(force=True)[0]
    dt = time.perf_counter() - t0
    m.close()
    return dt, stats.records_in, stats.records_out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="compaction-bench-"))
    try:
        src = root / "src"
        size = build(src, a.records, a.keys, a.value_bytes)
        clean(_copy(src, root / "warm"))  # imports and first-call costs out of the measurement
        reads, cleans, kept = [], [], (0, 0)
        for i in range(a.repeat):
            reads.append(read_all(_copy(src, root / f"r{i}")))
            dt, rin, rout = clean(_copy(src, root / f"c{i}"))
            cleans.append(dt)
            kept = (rin, rout)
        mb = size / (1 << 20)
        r, c = mb / min(reads), mb / min(cleans)
        print(
            f"{a.records} records, {a.keys} keys, {a.value_bytes} B values: {mb:.1f} MiB in segments; "
            f"cleaning keeps {kept[1]} of {kept[0]} records"
        )
        print(f"{'pass':<34}{'seconds':>10}{'MB/s':>10}")
        print(f"{'sequential read (CRC + Arrow)':<34}{min(reads):>10.3f}{r:>10.1f}")
        print(f"{'cleaner pass (map+recopy+swap)':<34}{min(cleans):>10.3f}{c:>10.1f}")
        print(f"{'ratio clean / read':<34}{'':>10}{c / r:>10.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


if __name__ == "__main__":
    main()
