"""The exactly-once sink: tasks stage, the driver's commit publishes a batch once.

Each Spark task attempt gets its own producer id, registers the partitions of
the topics it writes under the write's id (the streaming query id, which
survives restarts from the checkpoint, or a batch job's own id) and sends
its rows as transactional batches: invisible to ``read_committed`` readers
(the default of our Consumer, the Spark source and Kafka clients configured
so). Its commit message tells the driver (producer id, epoch, records per
partition). The driver's ``commit(messages, batchId)`` sends one StagedTxns
COMMIT: the broker checks the staged counts, records the decision with the
batch id, writes COMMIT markers for the winners and ABORT markers for every
other attempt registered under the write (failed, speculative or zombie
attempts, and those of a run killed before its commit). A batch id committed
before is a no-op, so a query restarted from its checkpoint after a driver
kill between the broker's commit and Spark's commit log publishes nothing twice.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from ..errors import ConfigError
from ..protocol.txn_messages import StagedProducer
from . import arrow as sarrow
from .write import SINK_BATCH_BYTES, split_by_topic

log = logging.getLogger(__name__)


@dataclass
class StagedCommitMessage(WriterCommitMessage):
    """What one task attempt staged: its producer and the records per partition."""

    rows: int = 0
    write_id: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    counts: dict = field(default_factory=dict)


def new_batch_write_id() -> str:
    """The write id of one batch job (``df.write``)."""
    return f"spark-write-{uuid.uuid4().hex}"


def streaming_write_id() -> str:
    """The write id of the running streaming query: its id, kept in the checkpoint across restarts."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    qid = tc.getLocalProperty("sql.streaming.queryId") if tc is not None else None
    if not qid:
        raise ConfigError(
            "exactly-once streaming writes need Spark's query id (sql.streaming.queryId); "
            "set exactlyOnce=false to write at-least-once"
        )
    return f"spark-query-{qid}"


def require_staged_commits(opts: Any) -> None:
    """Refuse (before any task runs) an exactly-once write to a broker without our staged commits."""
    from ..client.txn import StagedTxns

    with StagedTxns(opts.bootstrap, opts.client_id, security=opts.security.client_security()) as t:
        if t.offered():
            return
    raise ConfigError(
        "exactlyOnce=true needs the logsource broker's staged commits (its StagedTxns API, which "
        f"publishes each batch once), and the broker at {opts.bootstrap} does not offer them (Apache Kafka "
        "has no such API); set exactlyOnce=false to write at-least-once, or use 'logsource etl' for "
        "exactly-once output from any Kafka broker"
    )


def write_staged(opts: Any, batches: Iterator[pa.RecordBatch], write_id: str) -> StagedCommitMessage:
    """Stage Spark Arrow batches under a fresh transactional producer (the work of one write task)."""
    from ..client import Admin
    from ..client.txn import StagedTxns, TransactionalProducer

    producer = TransactionalProducer(
        opts.bootstrap,
        acks=-1,
        linger_ms=opts.linger_ms,
        compression=opts.compression,
        batch_size=opts.batch_size or SINK_BATCH_BYTES,
        **opts.security.options(),
    )
    txns = StagedTxns(opts.bootstrap, opts.client_id, security=opts.security.client_security())
    admin: Admin | None = None
    msg = StagedCommitMessage(write_id=write_id)
    registered: set[str] = set()
    sent: list[tuple[str, Any]] = []
    try:
        pid, epoch = producer.producer_id_and_epoch()
        msg.producer_id, msg.producer_epoch = pid, epoch
        for rb in batches:
            if rb.num_rows == 0:
                continue
            t = sarrow.to_producer_table(rb)
            msg.rows += t.num_rows
            for topic, sub in split_by_topic(t, opts.topic):
                if topic not in registered:
                    admin = admin or Admin(opts.bootstrap, **opts.security.options())
                    parts = admin.partitions_for(topic)
                    txns.register(
                        write_id, pid, epoch, [(topic, p) for p in parts], opts.transaction_timeout_ms
                    )
                    registered.add(topic)
                sent.extend((topic, f) for f in producer.send_arrow(topic, sub))
        producer.flush()
        counts: dict[tuple[str, int], int] = {}
        for topic, f in sent:
            partition, base, last = f.result()
            counts[(topic, partition)] = counts.get((topic, partition), 0) + (last - base + 1)
        msg.counts = counts
    finally:
        producer.close()
        txns.close()
        if admin is not None:
            admin.close()
    return msg


def _producers(messages: list[Any]) -> tuple[str | None, list[StagedProducer]]:
    staged = [m for m in messages if isinstance(m, StagedCommitMessage)]
    write_id = staged[0].write_id if staged else None
    return write_id, [StagedProducer(m.producer_id, m.producer_epoch, dict(m.counts)) for m in staged]


def commit(opts: Any, messages: list[Any], batch_id: int, write_id: str | None = None) -> bool:
    """Publish the winners' staged rows as ``batch_id``; False when it was committed before (no-op)."""
    from ..client.txn import StagedTxns

    found, producers = _producers(messages)
    write_id = write_id or found
    if write_id is None:
        return False  # no task ran: nothing was staged
    with StagedTxns(opts.bootstrap, opts.client_id, security=opts.security.client_security()) as t:
        resp = t.commit(write_id, batch_id, producers)
    rows = sum(m.rows for m in messages if isinstance(m, StagedCommitMessage))
    if resp.committed:
        log.info("logsource: %s batch %d committed exactly once (%d rows)", write_id, batch_id, rows)
    else:
        log.warning(
            "logsource: %s batch %d was already committed (last %d); this run's %d rows were aborted",
            write_id,
            batch_id,
            resp.last_committed_batch_id,
            rows,
        )
    return resp.committed


def abort(opts: Any, messages: list[Any], write_id: str | None = None) -> None:
    """Abort every attempt of the write (the job or micro-batch failed)."""
    from ..client.txn import StagedTxns

    found, producers = _producers(messages)
    write_id = write_id or found
    if write_id is None:
        return
    with StagedTxns(opts.bootstrap, opts.client_id, security=opts.security.client_security()) as t:
        t.abort(write_id, producers)
