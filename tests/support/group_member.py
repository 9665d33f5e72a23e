"""A consumer-group member process for tests/test_groups.py and benchmarks/groups.py.

usage: group_member.py BOOTSTRAP GROUP TOPIC OUT_FILE [session_timeout_ms] [ours|confluent|kafka-python]

Appends ``R partition offset`` for each record, then commits and appends
``C partition offset`` per committed partition; ``A time p,p,...`` on each assignment
and (ours) ``S time`` just before subscribing, with wall-clock timestamps. Written before the commit, so a kill -9 loses no record line.
The member is our Consumer, a confluent-kafka (librdkafka) or a kafka-python consumer:
all use the ``consumer`` protocol type and the ``range`` assignor, so they share a group.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


def _record(f: TextIO, records: list[tuple[int, int]], commit: Callable[[dict[int, int]], None]) -> None:
    if not records:
        return
    f.write("".join(f"R {p} {o}\n" for p, o in records))
    nxt: dict[int, int] = {}
    for p, o in records:
        nxt[p] = o + 1
    try:
        commit(nxt)
        f.write("".join(f"C {p} {o}\n" for p, o in nxt.items()))
    except Exception as e:  # a rebalance fenced the commit: the next owner re-reads
        f.write(f"E {type(e).__name__}\n")


def _assigned(f: TextIO, partitions: list[int]) -> None:
    f.write(f"A {time.time():.3f} {','.join(str(p) for p in sorted(partitions))}\n")


def run_ours(bootstrap: str, group: str, topic: str, f: TextIO, session: int, name: str) -> None:
    from pyspark_logsource.client.consumer import Consumer

    c = Consumer(
        bootstrap,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=session,
        heartbeat_interval_ms=max(100, session // 6),
        max_poll_interval_ms=30000,
        client_id=f"member-{name}",
    )
    f.write(f"S {time.time():.3f}\n")  # benchmarks/groups.py: a join's rebalance is timed from here
    c.subscribe([topic], on_assign=lambda tps: _assigned(f, [p for _, p in tps]))
    while True:
        msgs = c.poll(200)
        _record(
            f,
            [(m.partition, m.offset) for m in msgs or ()],
            lambda nxt: c.commit({(topic, p): o for p, o in nxt.items()}),
        )


def run_confluent(bootstrap: str, group: str, topic: str, f: TextIO, session: int, name: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": f"member-{name}",
            "session.timeout.ms": session,
            "heartbeat.interval.ms": max(100, session // 6),
            "partition.assignment.strategy": "range",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "max.poll.interval.ms": 30000,
        }
    )
    c.subscribe([topic], on_assign=lambda _c, tps: _assigned(f, [tp.partition for tp in tps]))
    while True:
        msgs = [m for m in c.consume(500, 0.2) if m.error() is None]
        _record(
            f,
            [(m.partition(), m.offset()) for m in msgs],
            lambda nxt: c.commit(
                offsets=[TopicPartition(topic, p, o) for p, o in nxt.items()], asynchronous=False
            ),
        )


def run_kafka_python(bootstrap: str, group: str, topic: str, f: TextIO, session: int, name: str) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: object) -> None:
            pass

        def on_partitions_assigned(self, assigned: list) -> None:
            _assigned(f, [tp.partition for tp in c.assignment()])

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=f"member-{name}",
        session_timeout_ms=session,
        heartbeat_interval_ms=max(100, session // 6),
        partition_assignment_strategy=[RangePartitionAssignor],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_interval_ms=30000,
    )
    c.subscribe([topic], listener=Listener())
    while True:
        # long polls: kafka-python 3.0.12 drops a join that completes while no poll() is waiting
        # (README, "Kafka clients in a group"), so the member keeps a poll() open almost always
        batches = c.poll(timeout_ms=1000)
        recs = [(r.partition, r.offset) for rs in batches.values() for r in rs]
        _record(
            f,
            recs,
            lambda nxt: c.commit(
                {TopicPartition(topic, p): OffsetAndMetadata(o, None, -1) for p, o in nxt.items()}
            ),
        )


KINDS = {"ours": run_ours, "confluent": run_confluent, "kafka-python": run_kafka_python}


def main() -> None:
    bootstrap, group, topic, out = sys.argv[1:5]
    session = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
    kind = sys.argv[6] if len(sys.argv) > 6 else "ours"
    f = open(out, "a", buffering=1)  # noqa: SIM115 - kept open for the process's life
    KINDS[kind](bootstrap, group, topic, f, session, out.rsplit("/", 1)[-1])


if __name__ == "__main__":
    main()
