"""A consumer-group member process for tests/test_groups.py and benchmarks/groups.py.

usage: group_member.py BOOTSTRAP GROUP TOPIC OUT_FILE [session_timeout_ms]

Appends ``R partition offset`` for each record, then commits and appends
``C partition offset`` per committed partition; ``A p,p,...`` on each assignment
(with a monotonic timestamp). Written before the commit, so a kill -9 loses no record line.
"""

from __future__ import annotations

import sys
import time

from pyspark_logsource.client.consumer import Consumer


def main() -> None:
    bootstrap, group, topic, out = sys.argv[1:5]
    session = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
    f = open(out, "a", buffering=1)  # noqa: SIM115 - kept open for the process's life

    def on_assign(tps: list) -> None:
        f.write(f"A {time.time():.3f} {','.join(str(p) for _, p in tps)}\n")

    c = Consumer(bootstrap, group_id=group, enable_auto_commit=False, session_timeout_ms=session,
                 heartbeat_interval_ms=max(100, session // 6), max_poll_interval_ms=30000,
                 client_id=f"member-{out.rsplit('/', 1)[-1]}")  # fmt: skip
    c.subscribe([topic], on_assign=on_assign)
    while True:
        msgs = c.poll(200)
        if msgs:
            f.write("".join(f"R {m.partition} {m.offset}\n" for m in msgs))
            nxt: dict = {}
            for m in msgs:
                nxt[(m.topic, m.partition)] = m.offset + 1
            try:
                c.commit(nxt)
                f.write("".join(f"C {p} {o}\n" for (_, p), o in nxt.items()))
            except Exception as e:  # a rebalance fenced the commit: the next owner re-reads
                f.write(f"E {type(e).__name__}\n")


if __name__ == "__main__":
    main()
