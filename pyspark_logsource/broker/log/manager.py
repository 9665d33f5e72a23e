"""The log manager: every partition log of a broker, and their background work.

It opens (and so recovers) every ``<topic>-<partition>`` directory found in
its log dirs, places new partitions in the log dir with the fewest, persists
per-topic overrides in each partition's ``config.properties``, and runs one
background thread that flushes logs per ``flush.ms``, applies retention every
``log.retention.check.interval.ms`` and finishes delayed deletions. With that
thread, appends never fsync for time in the appending thread (an event loop,
say); ``flush.messages`` is still enforced inline, as in Kafka.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from ...errors import (
    InvalidConfig,
    InvalidPartitions,
    LogSourceError,
    StorageError,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from ...topics import OFFSETS_TOPIC, validate_topic_name
from .cleaner import CleanStats, LogCleaner
from .config import LogConfig
from .hw_checkpoint import read_high_watermarks, write_high_watermarks
from .log import PartitionLog

log = logging.getLogger(__name__)

TOPIC_CONFIG_FILE = "config.properties"
DELETE_DIR_SUFFIX = "-delete"
#: topic-level defaults of internal topics (Kafka compacts its offsets topic; keys are group/topic/partition)
INTERNAL_TOPIC_DEFAULTS: dict[str, dict[str, str]] = {OFFSETS_TOPIC: {"cleanup.policy": "compact"}}


def _with_internal_defaults(topic: str, overrides: Mapping[str, str]) -> dict[str, str]:
    return {**INTERNAL_TOPIC_DEFAULTS.get(topic, {}), **overrides}


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``topic-3`` -> ("topic", 3); None for anything that is not a partition directory."""
    topic, sep, part = name.rpartition("-")
    if not sep or not part.isdigit() or not topic:
        return None
    try:
        return validate_topic_name(topic), int(part)
    except LogSourceError:
        return None


def _read_properties(path: Path) -> dict[str, str]:
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "!")) and "=" in line:
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
    return out


def _write_properties(path: Path, props: Mapping[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(f"{k}={v}\n" for k, v in sorted(props.items())))
    tmp.replace(path)


def _delete_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<p>.<uuid>-delete``, with the topic cut so the name fits a file name (255 bytes), as
    Kafka's LocalLog.logDeleteDirName does: topic names may be 249 characters long."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[: max(0, 255 - len(suffix))] + suffix


class LogManager:
    """Owns the partition logs in ``log_dirs``; thread-safe."""

    def __init__(self, log_dirs: list[Path], default_config: LogConfig, *, background: bool = True) -> None:
        if not log_dirs:
            raise InvalidConfig("log.dirs is empty")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._overrides: dict[str, dict[str, str]] = {}
        self._lock = threading.RLock()
        self._doomed: list[tuple[float, PartitionLog]] = []
        self._stop = threading.Event()
        self._last_retention = time.monotonic()
        self._closed = False
        self._background = background
        self.cleaner = LogCleaner(default_config.cleaner_dedupe_buffer_size)
        #: set by the replica manager (cluster mode): high watermarks are checkpointed per log dir
        self.hw_checkpoint_enabled = False
        self.hw_checkpoint_interval_ms = 5000  # Kafka's replica.high.watermark.checkpoint.interval.ms
        self._recovered_hws: dict[tuple[str, int], int] = {}
        self._written_hws: dict[Path, dict[tuple[str, int], int]] = {}
        self._last_hw_checkpoint = time.monotonic()
        self._load_logs()
        self._thread: threading.Thread | None = None
        self._cleaner_thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._run, name="log-manager", daemon=True)
            self._thread.start()
            if default_config.cleaner_enable:
                # its own thread: a long cleaning pass must not delay flushes and retention
                self._cleaner_thread = threading.Thread(
                    target=self._run_cleaner, name="log-cleaner", daemon=True
                )
                self._cleaner_thread.start()

    # ------------------------------------------------------------ loading

    def _load_logs(self) -> None:
        t0 = time.monotonic()
        for d in self.log_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
                children = sorted(d.iterdir())
            except OSError as e:
                raise StorageError(f"log dir {d} is not usable: {e}") from e
            self._recovered_hws.update(read_high_watermarks(d))
            for child in children:
                if not child.is_dir():
                    continue
                if child.name.endswith(DELETE_DIR_SUFFIX):
                    shutil.rmtree(child, ignore_errors=True)  # a topic deletion a restart interrupted
                    continue
                parsed = parse_partition_dir(child.name)
                if parsed is None:
                    log.warning("ignoring %s: not a <topic>-<partition> directory", child)
                    continue
                topic, partition = parsed
                if (topic, partition) in self._logs:
                    raise StorageError(f"partition {topic}-{partition} exists in two log dirs ({child})")
                overrides = _with_internal_defaults(topic, _read_properties(child / TOPIC_CONFIG_FILE))
                try:
                    config = self.default_config.with_overrides(overrides)
                except InvalidConfig as e:
                    log.warning("%s: ignoring invalid topic config (%s)", child, e)
                    overrides, config = {}, self.default_config
                self._overrides.setdefault(topic, overrides)
                lg = PartitionLog(child, config, topic, partition)
                lg.scheduled_flush = self._background
                self._logs[(topic, partition)] = lg
        log.info(
            "log manager loaded %d logs from %s in %.1f ms",
            len(self._logs),
            ", ".join(map(str, self.log_dirs)),
            (time.monotonic() - t0) * 1000,
        )

    # ------------------------------------------------------------ topics and logs

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("log manager is closed")

    def _pick_dir(self) -> Path:
        counts = {d: 0 for d in self.log_dirs}
        for lg in self._logs.values():
            for d in counts:
                if lg.directory.parent == d:
                    counts[d] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def create_log(
        self, topic: str, partition: int, config_overrides: Mapping[str, object] | None = None
    ) -> PartitionLog:
        """Return the log of ``topic``/``partition``, creating it if needed."""
        validate_topic_name(topic)
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise InvalidPartitions(f"partition must be a non-negative integer, got {partition!r}")
        with self._lock:
            self._check_open()
            existing = self._logs.get((topic, partition))
            if existing is not None:
                return existing
            if config_overrides is None:
                overrides = self._overrides.get(topic, {})
            else:
                overrides = {str(k): str(v) for k, v in config_overrides.items()}
            overrides = _with_internal_defaults(topic, overrides)
            config = self.default_config.with_overrides(overrides)
            directory = self._pick_dir() / f"{topic}-{partition}"
            try:
                directory.mkdir(parents=True, exist_ok=True)
                if overrides:
                    _write_properties(directory / TOPIC_CONFIG_FILE, config.to_properties(overrides))
            except OSError as e:
                raise StorageError(f"cannot create {directory}: {e}") from e
            lg = PartitionLog(directory, config, topic, partition)
            lg.scheduled_flush = self._background
            self._logs[(topic, partition)] = lg
            self._overrides.setdefault(topic, overrides)
            return lg

    def create_topic(
        self, topic: str, partitions: int, config_overrides: Mapping[str, object] | None = None
    ) -> list[PartitionLog]:
        """Create a topic with ``partitions`` partitions; TopicAlreadyExists if it exists."""
        validate_topic_name(topic)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise InvalidPartitions(f"a topic needs at least one partition, got {partitions!r}")
        with self._lock:
            self._check_open()
            if topic in self.topics():
                raise TopicAlreadyExists(f"topic {topic!r} already exists")
            self.default_config.with_overrides(config_overrides)  # InvalidConfig before any directory
            self._overrides.pop(topic, None)
            return [self.create_log(topic, p, config_overrides or {}) for p in range(partitions)]

    def get_log(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition; UnknownTopicOrPartition if there is none."""
        lg = self._logs.get((topic, partition))
        if lg is None:
            raise UnknownTopicOrPartition(f"unknown topic or partition {topic}-{partition}")
        return lg

    def logs(self) -> list[PartitionLog]:
        """Every open log."""
        with self._lock:
            return list(self._logs.values())

    def topics(self) -> dict[str, int]:
        """Topic name -> number of partitions."""
        with self._lock:
            out: dict[str, int] = {}
            for topic, _ in self._logs:
                out[topic] = out.get(topic, 0) + 1
            return out

    def topic_config(self, topic: str) -> LogConfig:
        """The effective config of a topic."""
        with self._lock:
            if topic not in self.topics():
                raise UnknownTopicOrPartition(f"unknown topic {topic!r}")
            return self.default_config.with_overrides(self._overrides.get(topic, {}))

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The topic-level settings set for a topic (canonical names), without the defaults."""
        with self._lock:
            overrides = self._overrides.get(topic, {})
            return self.default_config.with_overrides(overrides).to_properties(overrides) if overrides else {}

    def alter_topic_config(
        self, topic: str, overrides: Mapping[str, object], validate_only: bool = False
    ) -> None:
        """Replace a topic's overrides (AlterConfigs): validated (InvalidConfig naming the key), written to
        each of its partitions' ``config.properties`` (so it survives a restart) and applied to its live logs.
        A topic without a log here keeps them for the logs made later (cluster mode: a replica to come)."""
        new = _with_internal_defaults(topic, {str(k): str(v) for k, v in overrides.items()})
        config = self.default_config.with_overrides(new)
        if validate_only:
            return
        with self._lock:
            self._check_open()
            self._overrides[topic] = new
            for (t, _), lg in self._logs.items():
                if t != topic:
                    continue
                path = lg.directory / TOPIC_CONFIG_FILE
                try:
                    if new:
                        _write_properties(path, config.to_properties(new))
                    else:
                        path.unlink(missing_ok=True)
                except OSError as e:
                    raise StorageError(f"cannot write {path}: {e}") from e
                lg.set_config(config)
        log.info("topic %s: config overrides now %s", topic, new)

    def set_default_config(self, config: LogConfig) -> None:
        """A dynamic broker config change (``log.retention.ms`` ...): every log without its own override of a
        setting takes the new default at once."""
        with self._lock:
            self.default_config = config
            for (t, _), lg in self._logs.items():
                try:
                    lg.set_config(config.with_overrides(self._overrides.get(t, {})))
                except InvalidConfig as e:  # an override the new default makes invalid: keep the old config
                    log.warning("%s keeps its config: %s", lg.name, e)

    def delete_log(self, topic: str, partition: int) -> None:
        """Remove one partition's log (a replica moved away or its topic was deleted in the cluster);
        its files go after ``file.delete.delay.ms``. Absent is fine."""
        with self._lock:
            self._check_open()
            lg = self._logs.pop((topic, partition), None)
            if lg is None:
                return
            due = time.monotonic() + lg.config.file_delete_delay_ms / 1000
            lg.retire(lg.directory.with_name(_delete_dir_name(topic, partition)))
            self._doomed.append((due, lg))
            if not any(k[0] == topic for k in self._logs):
                self._overrides.pop(topic, None)
        log.info("deleted log %s-%d", topic, partition)
        self._finish_deletes()

    def set_aside_log(self, topic: str, partition: int) -> Path | None:
        """Close a log this broker should not have and rename its directory ``<topic>-<p>.<uuid>-stray``
        (Kafka's stray logs): never loaded or served again, but kept for an operator to look at.
        Returns the new directory (None if there was no such log)."""
        with self._lock:
            self._check_open()
            lg = self._logs.pop((topic, partition), None)
            if lg is None:
                return None
            lg.close()
            target = lg.directory.with_name(
                _delete_dir_name(topic, partition)[: -len(DELETE_DIR_SUFFIX)] + "-stray"
            )
            try:
                lg.directory.replace(target)
            except OSError as e:
                raise StorageError(f"cannot set aside {lg.directory}: {e}") from e
            if not any(k[0] == topic for k in self._logs):
                self._overrides.pop(topic, None)
        log.warning("set aside stray log %s-%d as %s", topic, partition, target)
        return target

    def delete_topic(self, topic: str) -> None:
        """Remove a topic now; its files go after ``file.delete.delay.ms`` (served regions stay valid)."""
        with self._lock:
            self._check_open()
            keys = [k for k in self._logs if k[0] == topic]
            if not keys:
                raise UnknownTopicOrPartition(f"unknown topic {topic!r}")
            due = time.monotonic() + self.topic_config(topic).file_delete_delay_ms / 1000
            for key in keys:
                lg = self._logs.pop(key)
                lg.retire(lg.directory.with_name(_delete_dir_name(topic, lg.partition)))
                self._doomed.append((due, lg))
            self._overrides.pop(topic, None)
        log.info("deleted topic %s (%d partitions)", topic, len(keys))
        self._finish_deletes()

    def _finish_deletes(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            ready = [lg for t, lg in self._doomed if force or t <= now]
            self._doomed = [(t, lg) for t, lg in self._doomed if not (force or t <= now)]
        for lg in ready:
            lg.delete()

    # ------------------------------------------------------------ high watermarks

    def checkpointed_high_watermark(self, topic: str, partition: int) -> int | None:
        """The high watermark of a partition in the checkpoint read at start (None: none there)."""
        return self._recovered_hws.get((topic, partition))

    def checkpoint_high_watermarks(self) -> None:
        """Write each log dir's ``replication-offset-checkpoint`` if its high watermarks changed."""
        if not self.hw_checkpoint_enabled:
            return
        per_dir: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.log_dirs}
        for lg in self.logs():
            if not lg.closed and lg.directory.parent in per_dir:
                per_dir[lg.directory.parent][(lg.topic, lg.partition)] = lg.high_watermark
        for d, hws in per_dir.items():
            if self._written_hws.get(d) != hws:
                write_high_watermarks(d, hws)
                self._written_hws[d] = hws
        self._last_hw_checkpoint = time.monotonic()

    # ------------------------------------------------------------ background work

    def run_background_tasks(self, force_retention: bool = False) -> None:
        """One round of the background work: due flushes, retention, delayed deletes."""
        now_ms = int(time.time() * 1000)
        retention = force_retention or (
            time.monotonic() - self._last_retention >= self.default_config.retention_check_interval_ms / 1000
        )
        if retention:
            self._last_retention = time.monotonic()
        for lg in self.logs():
            try:
                if lg.time_flush_due(now_ms):
                    lg.flush()
                if retention:
                    lg.delete_old_segments()
                else:
                    lg.run_pending_deletes()
            except StorageError as e:
                if not lg.closed:
                    log.error("background work on %s failed: %s", lg.name, e)
        if time.monotonic() - self._last_hw_checkpoint >= self.hw_checkpoint_interval_ms / 1000:
            try:
                self.checkpoint_high_watermarks()
            except StorageError as e:
                log.error("high watermark checkpoint failed: %s", e)
        self._finish_deletes()

    def _tick_seconds(self) -> float:
        ms = min(
            [self.default_config.flush_scheduler_interval_ms, self.default_config.retention_check_interval_ms]
            + [lg.config.flush_ms for lg in self.logs()]
        )
        return max(0.01, ms / 1000 / 2)

    def _run(self) -> None:
        while not self._stop.wait(self._tick_seconds()):
            try:
                self.run_background_tasks()
            except Exception:  # the thread must outlive any one failure
                log.exception("log manager background task failed")

    def clean_logs(self, *, force: bool = False, now_ms: int | None = None) -> list[CleanStats]:
        """One cleaning pass over every compacted log that needs one (``force``: every compacted log)."""
        out = []
        for lg in self.logs():
            if lg.config.compact and not lg.closed:
                try:
                    stats = self.cleaner.clean(lg, force=force, now_ms=now_ms)
                except StorageError as e:
                    if not lg.closed:
                        log.error("cleaning %s failed: %s", lg.name, e)
                    continue
                if stats is not None:
                    out.append(stats)
        return out

    def _run_cleaner(self) -> None:
        while not self._stop.wait(self.default_config.cleaner_backoff_ms / 1000):
            try:
                self.clean_logs()
            except Exception:  # the thread must outlive any one failure; the log stays as it was
                log.exception("log cleaner pass failed")

    def close(self) -> None:
        """Stop the background threads, flush and close every log (each marked clean)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._cleaner_thread is not None:
            self._cleaner_thread.join()
        try:
            self.checkpoint_high_watermarks()
        except StorageError as e:
            log.error("high watermark checkpoint at shutdown failed: %s", e)
        for lg in self.logs():
            lg.close()
        self._finish_deletes(force=True)

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
