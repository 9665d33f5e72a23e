"""Test harness: a cluster of broker processes against the session's real ZooKeeper.

Usage in a test module (tests/ is on sys.path; support/ is a package in it)::

    from support.cluster import Cluster

    def test_x(zk_connect, tmp_path):
        with Cluster(zk_connect, tmp_path, brokers=3) as c:    # broker ids 1..3, each its own process
            c.create_topic("t", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
            c.wait_full_isr("t")
            leader = c.leader("t", 0)
            c.kill(leader)                                     # kill -9
            c.wait_leader("t", 0, not_in={leader})
            c.start(leader)                                    # same port, same data
            c.wait_full_isr("t")
            c.assert_replicas_identical("t")

Brokers are ``python -m pyspark_logsource.broker --override ...`` processes (EmbeddedBroker in
process mode, which keeps each broker's port across restarts). Roles are read from ZooKeeper
itself, in Kafka's layout (``/controller``, ``/brokers/ids``, ``/brokers/topics/<t>`` and
``.../partitions/<p>/state``), so the harness checks what the brokers wrote, not what they say.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

from pyspark_logsource.broker.embedded import EmbeddedBroker
from pyspark_logsource.format.header import iter_headers

#: Broker settings that keep failover fast in tests (the harness default; a test may override).
FAST_CLUSTER = {
    "zookeeper.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "1500",
    "replica.fetch.wait.max.ms": "100",
    "log.flush.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
}


def wait_for(
    cond: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05, what: str = "condition"
) -> Any:
    """Poll ``cond`` until it returns something truthy; AssertionError with ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # a transient error while a broker or ZooKeeper restarts
            last_exc = e
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}"
                + (f" (last error: {last_exc!r})" if last_exc else "")
            )
        time.sleep(interval)


def expire_session(zk_connect: str, client: KazooClient) -> None:
    """Expire ``client``'s session on the server, as kazoo's test harness does: a second client
    attaches to it (its id and password) and closes it; wait until ``client`` sees LOST.

    The second client connects without the chroot: kazoo checks a chroot with a request, which fails
    with ConnectionLoss when the first client takes the session back first. If the two clients'
    reconnections race that way, try again."""
    lost = []
    client.add_listener(lambda s: lost.append(s) if s == KazooState.LOST else None)
    hosts = zk_connect.split("/", 1)[0]
    for _ in range(10):
        other = KazooClient(hosts, client_id=client.client_id, timeout=5.0)
        try:
            other.start(timeout=5)
            other.stop()  # closing the session deletes its ephemeral nodes (/brokers/ids/<id>, /controller)
        except Exception:  # the session moved back to the first client meanwhile: try again
            pass
        finally:
            other.close()
        try:
            wait_for(lambda: lost, 3, what="the session LOST")
            return
        except AssertionError:
            continue
    raise AssertionError("could not expire the session")


class Cluster:
    """N broker processes (ids 1..N) sharing ``zk_connect`` (a chroot of the session's ZooKeeper)."""

    def __init__(
        self,
        zk_connect: str,
        base_dir: str | Path,
        brokers: int = 3,
        config: Mapping[str, object] | None = None,
        broker_config: Mapping[int, Mapping[str, object]] | None = None,
        thread_brokers: Iterable[int] = (),
    ) -> None:
        """``thread_brokers``: ids run in a thread of this process instead (a test can then reach
        the broker's objects, e.g. its ZooKeeper session; kill() is a clean stop for them)."""
        self.zk_connect = zk_connect
        self.base_dir = Path(base_dir)
        # the internal topics' replication factor is Kafka's 3; a smaller cluster holds what it can
        fits = {
            "offsets.topic.replication.factor": str(min(3, brokers)),
            "transaction.state.log.replication.factor": str(min(3, brokers)),
            "transaction.state.log.min.isr": "2" if brokers >= 3 else "1",
        }
        self.config = {**FAST_CLUSTER, **fits, **{str(k): str(v) for k, v in (config or {}).items()}}
        self.brokers: dict[int, EmbeddedBroker] = {}
        in_thread = set(thread_brokers)
        for bid in range(1, brokers + 1):
            props = dict(self.config)
            props.update({str(k): str(v) for k, v in (broker_config or {}).get(bid, {}).items()})
            props["broker.id"] = str(bid)
            props["zookeeper.connect"] = zk_connect
            mode = "thread" if bid in in_thread else "process"
            self.brokers[bid] = EmbeddedBroker(self.base_dir / f"broker-{bid}", mode=mode, config=props)
        self.zk = KazooClient(zk_connect, timeout=10.0)

    # ------------------------------------------------------------ lifecycle

    def start_all(self) -> Cluster:
        """Start every broker (in parallel) and wait until all are registered in ZooKeeper."""
        self.zk.start(timeout=15)
        with ThreadPoolExecutor(len(self.brokers)) as ex:
            list(ex.map(lambda b: b.start(), self.brokers.values()))
        self.wait_registered(self.brokers)
        wait_for(lambda: self.controller() is not None, what="a controller")
        return self

    def close(self) -> None:
        """Stop every broker cleanly (kill those that hang) and the ZooKeeper client."""
        with ThreadPoolExecutor(max(1, len(self.brokers))) as ex:
            list(ex.map(lambda b: b.stop(timeout=20), self.brokers.values()))
        for b in self.brokers.values():
            b.close()
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:
            pass

    def __enter__(self) -> Cluster:
        try:
            return self.start_all()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of the running brokers."""
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running)

    def running(self) -> list[int]:
        """Ids of the brokers whose process is alive."""
        return [bid for bid, b in self.brokers.items() if b.running]

    def pid(self, broker_id: int) -> int | None:
        return self.brokers[broker_id].pid

    def kill(self, broker_id: int, wait_deregistered: bool = True) -> None:
        """kill -9 one broker; by default wait until ZooKeeper expired its session (its /brokers/ids node is gone)."""
        self.brokers[broker_id].kill()
        if wait_deregistered:
            self.wait_deregistered(broker_id)

    def stop(self, broker_id: int, timeout: float = 30.0) -> None:
        """Clean shutdown (SIGTERM) of one broker; returns once the process exited and it is deregistered."""
        self.brokers[broker_id].stop(timeout)
        self.wait_deregistered(broker_id)

    def start(self, broker_id: int, wait_registered: bool = True) -> None:
        """(Re)start one broker on its port and data dir."""
        self.brokers[broker_id].start()
        if wait_registered:
            self.wait_registered([broker_id])

    def restart(self, broker_id: int, clean: bool = True) -> None:
        """A bounce: clean stop or kill -9, then start again."""
        self.stop(broker_id) if clean else self.kill(broker_id)
        self.start(broker_id)

    def log_dir(self, broker_id: int) -> Path:
        return self.brokers[broker_id].data_dir / "logs"

    def broker_log(self, broker_id: int) -> str:
        """The broker process's log (stderr), for assertion messages."""
        try:
            return self.brokers[broker_id].log_file.read_text(errors="replace")
        except OSError:
            return ""

    # ------------------------------------------------------------ ZooKeeper views

    def _json(self, path: str) -> Any:
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        return json.loads(data.decode()) if data else None

    def registered(self) -> list[int]:
        """Broker ids under /brokers/ids (live sessions)."""
        try:
            return sorted(int(x) for x in self.zk.get_children("/brokers/ids"))
        except NoNodeError:
            return []

    def wait_registered(self, ids: Iterable[int], timeout: float = 30.0) -> None:
        want = set(ids)
        wait_for(lambda: want <= set(self.registered()), timeout, what=f"brokers {sorted(want)} registered")

    def wait_deregistered(self, broker_id: int, timeout: float = 30.0) -> None:
        wait_for(lambda: broker_id not in self.registered(), timeout, what=f"broker {broker_id} deregistered")

    def controller(self) -> int | None:
        """The broker id in /controller (None while there is none)."""
        d = self._json("/controller")
        return None if d is None else int(d["brokerid"])

    def controller_epoch(self) -> int | None:
        try:
            data, _ = self.zk.get("/controller_epoch")
        except NoNodeError:
            return None
        return int(data.decode())

    def assignment(self, topic: str) -> dict[int, list[int]]:
        """Replica assignment from /brokers/topics/<t>: partition -> replicas."""
        d = self._json(f"/brokers/topics/{topic}")
        return {} if d is None else {int(p): list(r) for p, r in d["partitions"].items()}

    def partition_state(self, topic: str, partition: int) -> dict | None:
        """The JSON at /brokers/topics/<t>/partitions/<p>/state (leader, leader_epoch, isr, controller_epoch)."""
        return self._json(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def leader(self, topic: str, partition: int) -> int | None:
        """The leader named in ZooKeeper (None when the partition has none: -1)."""
        s = self.partition_state(topic, partition)
        return None if s is None or s["leader"] < 0 else int(s["leader"])

    def isr(self, topic: str, partition: int) -> list[int]:
        s = self.partition_state(topic, partition)
        return [] if s is None else sorted(s["isr"])

    def leaders(self, topic: str) -> dict[int, int | None]:
        return {p: self.leader(topic, p) for p in self.assignment(topic)}

    # ------------------------------------------------------------ waits

    def wait_topic(self, topic: str, partitions: int | None = None, timeout: float = 30.0) -> None:
        """Until every partition of ``topic`` has a state znode with a live leader."""

        def ready() -> bool:
            a = self.assignment(topic)
            if not a or (partitions is not None and len(a) != partitions):
                return False
            live = set(self.registered())
            return all(self.leader(topic, p) in live for p in a)

        wait_for(ready, timeout, what=f"topic {topic} with leaders")

    def wait_leader(
        self, topic: str, partition: int, not_in: Iterable[int] = (), timeout: float = 30.0
    ) -> int:
        """Until the partition has a live leader not in ``not_in``; returns it."""
        bad = set(not_in)

        def leader() -> int | None:
            lead = self.leader(topic, partition)
            return lead if lead is not None and lead not in bad and lead in self.registered() else None

        return wait_for(leader, timeout, what=f"a new leader of {topic}-{partition} (not {sorted(bad)})")

    def wait_full_isr(self, topic: str, timeout: float = 60.0, min_size: int | None = None) -> None:
        """Until every partition's ISR holds all its replicas (or at least ``min_size`` of them)."""

        def full() -> bool:
            a = self.assignment(topic)
            if not a:
                return False
            for p, replicas in a.items():
                isr = self.isr(topic, p)
                if (len(isr) < min_size) if min_size is not None else (sorted(replicas) != isr):
                    return False
            return True

        wait_for(
            full,
            timeout,
            what=f"ISR of {topic} {'full' if min_size is None else f'>= {min_size}'}: "
            + str({p: self.isr(topic, p) for p in self.assignment(topic)}),
        )

    # ------------------------------------------------------------ admin

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, config: Mapping[str, str] | None = None
    ) -> None:
        """Create a topic through the Admin client and wait until all its partitions have leaders."""
        from pyspark_logsource.client import Admin

        with Admin(self.bootstrap) as admin:
            admin.create_topic(
                name, partitions, replication_factor=replication_factor, config=dict(config or {})
            )
        self.wait_topic(name, partitions)

    # ------------------------------------------------------------ logs on disk

    def partition_bytes(
        self, broker_id: int, topic: str, partition: int, below: int | None = None
    ) -> tuple[bytes, int]:
        """The record batches of one replica, from its segment files, in offset order: (bytes, end offset).

        ``below``: only the whole batches that end at or before this offset (e.g. the high watermark)."""
        d = self.log_dir(broker_id) / f"{topic}-{partition}"
        segments = sorted(d.glob("*.log"), key=lambda f: int(f.stem))
        out = bytearray()
        end = 0
        for seg in segments:
            data = seg.read_bytes()
            for pos, h in iter_headers(data, check_crc=True):
                if below is not None and h.next_offset > below:
                    return bytes(out), end
                out += data[pos : pos + h.size]
                end = h.next_offset
        return bytes(out), end

    def high_watermark(self, topic: str, partition: int) -> int:
        """The leader's high watermark, as ListOffsets(latest) answers a consumer."""
        from pyspark_logsource.client import Admin

        with Admin(self.bootstrap) as admin:
            return admin.list_offsets([(topic, partition)], "latest")[(topic, partition)]

    def assert_replicas_identical(self, topic: str, timeout: float = 30.0) -> dict[int, int]:
        """Every replica of every partition holds the same bytes as the leader below the high watermark,
        once they have caught up (each replica's log reaches the HW). Returns partition -> HW."""
        hws = {}
        for p, replicas in sorted(self.assignment(topic).items()):
            hw = self.high_watermark(topic, p)
            hws[p] = hw
            leader = self.leader(topic, p)
            assert leader is not None, f"{topic}-{p} has no leader"

            def caught_up(p: int = p, hw: int = hw, replicas: list[int] = replicas) -> bool:
                return all(self.partition_bytes(r, topic, p, below=hw)[1] >= hw or hw == 0 for r in replicas)

            wait_for(caught_up, timeout, what=f"every replica of {topic}-{p} holding offsets below HW {hw}")
            ref, ref_end = self.partition_bytes(leader, topic, p, below=hw)
            for r in replicas:
                if r == leader:
                    continue
                got, end = self.partition_bytes(r, topic, p, below=hw)
                assert end == ref_end, (
                    f"{topic}-{p}: replica {r} ends at {end}, leader {leader} at {ref_end} (HW {hw})"
                )
                if got != ref:
                    i = next(
                        (k for k in range(min(len(got), len(ref))) if got[k] != ref[k]),
                        min(len(got), len(ref)),
                    )
                    raise AssertionError(
                        f"{topic}-{p}: replica {r} diverges from leader {leader} at byte {i} below HW {hw} "
                        f"({len(got)} vs {len(ref)} bytes)"
                    )
        return hws


def confluent_read_to_eof(consumer: Any, partitions: int, timeout: float = 60.0) -> Iterator[Any]:
    """Yield a confluent-kafka consumer's messages (assigned, ``enable.partition.eof``) until every one of its
    ``partitions`` reported the end; AssertionError if some did not within ``timeout``."""
    from confluent_kafka import KafkaError

    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(eof) < partitions and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            eof.add(m.partition())
            continue
        yield m
    assert len(eof) == partitions, f"confluent-kafka reached the end of {sorted(eof)} only"


def env_flag(name: str, default: str = "") -> str:
    """An environment knob for soak runs (e.g. LOGSOURCE_MATRIX_SECONDS)."""
    return os.environ.get(name, default)


class Traffic:
    """An idempotent ``acks=all`` producer and a consumer running in the background on one topic.

    The producer sends unique values (``b"<n>"``, about ``rate`` per second, round-robin over the
    partitions) and records which were acknowledged and where; the consumer reads every partition
    from the beginning. :meth:`check` then asserts Kafka's replication_test properties."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 200.0) -> None:
        import threading

        from pyspark_logsource.client import Consumer, Producer

        self.topic = topic
        self.partitions = partitions
        self.interval = 1.0 / rate
        self.producer = Producer(
            bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=2,
            delivery_timeout_ms=120000,
            request_timeout_ms=10000,
            retry_backoff_ms=50,
        )
        self.consumer = Consumer(
            bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=200, request_timeout_ms=10000
        )
        self.acked: dict[bytes, tuple[int, int]] = {}  # value -> (partition, offset)
        self.failed: dict[bytes, BaseException] = {}
        self.sent = 0
        self.consumed: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._producing = threading.Event()
        self._consuming = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, daemon=True, name="traffic-producer"),
            threading.Thread(target=self._consume, daemon=True, name="traffic-consumer"),
        ]

    def start(self) -> Traffic:
        self._producing.set()
        self._consuming.set()
        for t in self._threads:
            t.start()
        return self

    def _done(self, value: bytes, fut: Any) -> None:
        try:
            where = fut.result(0)
        except BaseException as e:  # not acknowledged: it may or may not be in the log
            with self._lock:
                self.failed[value] = e
            return
        with self._lock:
            self.acked[value] = where

    def _produce(self) -> None:
        n = 0
        try:
            while self._producing.is_set():
                value = str(n).encode()
                fut = self.producer.send(self.topic, value, partition=n % self.partitions)
                fut.add_done_callback(lambda f, v=value: self._done(v, f))
                n += 1
                self.sent = n
                time.sleep(self.interval)
        except BaseException as e:
            self.errors.append(e)

    def _consume(self) -> None:
        try:
            self.consumer.assign([(self.topic, p) for p in range(self.partitions)])
            self.consumer.seek_to_beginning()
            while self._consuming.is_set():
                for m in self.consumer.poll(timeout_ms=200, max_records=2000):
                    self.consumed[m.partition].append((m.offset, m.value))
        except BaseException as e:
            self.errors.append(e)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_acked(self, more: int, timeout: float = 60.0) -> None:
        """Until ``more`` further messages have been acknowledged."""
        target = self.acked_count() + more
        wait_for(lambda: self.acked_count() >= target, timeout, what=f"{target} acknowledged messages")

    def stop_producing(self, timeout: float = 120.0) -> None:
        """Stop sending and wait until every sent message is acknowledged or failed."""
        self._producing.clear()
        self._threads[0].join(30)
        self.producer.flush(timeout)
        wait_for(lambda: len(self.acked) + len(self.failed) >= self.sent, 30, what="every send completed")

    def wait_consumed(self, high_watermarks: Mapping[int, int], timeout: float = 60.0) -> None:
        """Until the consumer has read up to each partition's high watermark."""

        def done() -> bool:
            return all(
                (self.consumed[p][-1][0] + 1 if self.consumed[p] else 0) >= hw
                for p, hw in high_watermarks.items()
            )

        wait_for(done, timeout, what=f"consumer at the high watermarks {dict(high_watermarks)}")

    def close(self) -> None:
        self._producing.clear()
        self._consuming.clear()
        for t in self._threads:
            t.join(10)
        self.producer.close(10)
        self.consumer.close()

    def check(self) -> None:
        """Every acknowledged message consumed at its acknowledged offset; no duplicate; no offset gap."""
        assert not self.errors, f"background clients failed: {self.errors!r}"
        seen: dict[bytes, tuple[int, int]] = {}
        for p, recs in self.consumed.items():
            offsets = [o for o, _ in recs]
            assert offsets == list(range(len(offsets))), (
                f"partition {p}: offsets not dense from 0 (first gap/repeat near "
                f"{next((i for i, o in enumerate(offsets) if o != i), None)})"
            )
            for o, v in recs:
                assert v not in seen, f"duplicate {v!r} at {p}:{o} and {seen[v]}"
                seen[v] = (p, o)
        missing = {v: w for v, w in self.acked.items() if seen.get(v) != w}
        assert not missing, (
            f"{len(missing)} of {len(self.acked)} acknowledged messages were not consumed where acknowledged, e.g. "
            + ", ".join(
                f"{v!r} acked at {w}, consumed at {seen.get(v)}" for v, w in list(missing.items())[:5]
            )
        )
