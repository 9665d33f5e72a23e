"""Producer process for the ETL kill tests: keeps filling a topic until SIGTERM.

    python etl_fill_topic.py BOOTSTRAP TOPIC [--rate MSGS_PER_S] [--chunk N] [--command-config FILE]

Values are b"<seq>" (seq counts up from 0 over the whole run), round-robin
over the topic's partitions via send_arrow. Prints the acknowledged total on exit.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

import pyarrow as pa

from pyspark_logsource.client import Producer
from pyspark_logsource.errors import RequestTimedOut


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--chunk", type=int, default=200)
    ap.add_argument("--command-config", help="Kafka client properties of a secured broker")
    args = ap.parse_args()
    from pyspark_logsource.broker.config import command_config_options

    security = command_config_options(args.command_config)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    seq = 0
    with Producer(args.bootstrap, linger_ms=5, **security) as producer:
        parts = producer.partitions_for(args.topic)
        t0 = time.monotonic()
        while not stop:
            n = args.chunk
            values = pa.array([str(i).encode() for i in range(seq, seq + n)], pa.binary())
            for i, p in enumerate(parts):
                producer.send_arrow(args.topic, pa.table({"value": values[i :: len(parts)]}), partition=p)
            seq += n
            try:
                producer.flush(timeout=30)
            except RequestTimedOut:
                pass  # a slow broker on a busy machine: keep going, the log end is what counts
            ahead = seq / args.rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
        try:
            producer.flush(timeout=30)
        except RequestTimedOut:
            pass
    print(f"produced {seq}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
