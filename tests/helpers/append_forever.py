"""Child process for the kill -9 test: append to a partition log until killed.

Usage: append_forever.py LOG_PARENT_DIR FLUSH_MESSAGES SEED

Record i holds ``value_for(i)`` (see tests/support/logdata.py), padded to a random size, in
batches of random length from idempotent producer 1 (sequence == offset).
After every append the child prints ``flushed <recovery point>`` so the parent
knows what was on disk before the kill.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the support package

from support.logdata import value_for  # noqa: E402

from pyspark_logsource.broker.log import LogConfig, PartitionLog  # noqa: E402
from pyspark_logsource.format import batch as fmt  # noqa: E402


def main() -> None:
    parent, flush_messages, seed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    config = LogConfig(
        segment_bytes=64 * 1024, index_interval_bytes=1024, flush_messages=flush_messages, flush_ms=10**9
    )
    log = PartitionLog(parent / "t-0", config, "t", 0)
    print(f"start {log.log_end_offset} {log.flushed_offset}", flush=True)
    while True:
        start = log.log_end_offset
        n = rng.randint(1, 40)
        size = rng.randint(12, 300)
        batch = fmt.encode(
            [value_for(start + i, size) for i in range(n)],
            producer_id=1,
            producer_epoch=0,
            base_sequence=start,
        )
        log.append(batch)
        print(f"flushed {log.flushed_offset}", flush=True)


if __name__ == "__main__":
    main()
