"""Child process for the consume-transform-produce kill test: Kafka's exactly-once loop with confluent-kafka.

Usage: ctp_worker.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID

It consumes INPUT in GROUP (a static member, so a restart gets its partitions back at once), writes
``b"<partition>:<offset>:<value>"`` for each input record to the same partition of OUTPUT inside a
transaction, and commits its input positions in that transaction with ``send_offsets_to_transaction``.
It prints ``STARTED`` once ``init_transactions`` fenced any previous instance, ``IN_TXN`` once a transaction's
records are produced, ``COMMITTED n`` after each commit, and runs until killed.
"""

from __future__ import annotations

import sys
import time

import confluent_kafka as ck


def main() -> None:
    bs, src, dst, group, txn_id = sys.argv[1:6]
    producer = ck.Producer(
        {
            "bootstrap.servers": bs,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 10000,
            "linger.ms": 2,
        }
    )
    producer.init_transactions(30)  # fences the killed instance and aborts what it left open
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "group.instance.id": f"{txn_id}-member",
            "session.timeout.ms": 6000,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([src])
    print("STARTED", flush=True)
    done = 0
    while True:
        msgs = [m for m in consumer.consume(50, 0.3) if not m.error()]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            out = f"{m.partition()}:{m.offset()}:".encode() + m.value()
            producer.produce(dst, value=out, partition=m.partition())
        producer.flush(30)  # the records are in the log before the offsets go: a kill from here aborts them
        print("IN_TXN", flush=True)  # the kill test aims some kills at the commit window
        time.sleep(
            0.05
        )  # the transform's own work (say, a lookup per batch): a transaction stays open a while
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        done += len(msgs)
        print(f"COMMITTED {done}", flush=True)


if __name__ == "__main__":
    main()
