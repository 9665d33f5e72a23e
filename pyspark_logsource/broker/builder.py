"""Where a broker's parts are made and wired: the server calls this, :class:`~.state.BrokerState` only holds them.

:func:`open_state` fills a :class:`~.state.BrokerState`: the exclusive locks on
the log dirs (before anything reads them, Kafka's lockLogDirs), the logs
(opening them recovers them, :mod:`.log`), the cluster id (``meta.properties``),
the group offsets with their coordinator and placement
(:class:`~.groups.ownership.GroupOwnership`, in a cluster the leadership listener
of ``__consumer_offsets``) and the producer ids. ``BrokerState.close`` closes them.
Replication (cluster mode) is built by :func:`.cluster.replicas.build` when the
broker joins its cluster.
"""

from __future__ import annotations

from .dynamic_config import BrokerDynamicConfig
from .groups import GroupCoordinator, GroupOffsetStore
from .groups.consumer_groups import ConsumerGroups, ConsumerGroupSettings
from .groups.coordinator import GroupSettings
from .groups.ownership import GroupOwnership
from .groups.topic_ids import topic_id_of
from .internal_topics import OFFSETS_TOPIC
from .log import LogManager
from .log.dir_lock import lock_dirs, release_all
from .producer_ids import ProducerIdManager
from .quotas.store import FileQuotaStore
from .state import BrokerState


def open_state(state: BrokerState) -> None:
    """Open (and so recover) ``state``'s logs, group offsets and producer ids; on an error nothing stays
    open or locked (DirectoryInUse if another broker holds a log dir)."""
    c = state.config
    state.dir_locks = lock_dirs(c.log_dirs)
    try:
        state.logs = LogManager(c.log_dirs, c.log)
    except BaseException:
        release_all(state.dir_locks)
        state.dir_locks = []
        raise
    try:
        state.load_meta()
        state.dynamic = BrokerDynamicConfig(c.broker_id, c.properties, state.logs)
        if not c.cluster_mode:  # in a cluster they are in ZooKeeper (read when the broker joins)
            state.dynamic.load_local(c.log_dirs[0])
            state.quota_store = FileQuotaStore(c.log_dirs[0], state.quotas)
            state.quota_store.load()
        # in a cluster nothing is loaded here: a partition's groups load when this broker leads it
        state.groups = GroupOffsetStore(
            state.logs,
            c.offsets_topic_num_partitions,
            c.offsets_retention_ms,
            c.socket_request_max_bytes,
            replicated=c.cluster_mode,
        )
        settings = GroupSettings(
            c.group_initial_rebalance_delay_ms,
            c.group_min_session_timeout_ms,
            c.group_max_session_timeout_ms,
            c.group_max_size,
        )
        ownership = GroupOwnership(state)
        state.group_ownership = ownership
        state.coordinator = GroupCoordinator(settings, ownership.persist, state.groups.group_meta)
        state.consumer_groups = _consumer_groups(state)
        if c.cluster_mode:
            state.leadership_listeners[OFFSETS_TOPIC] = ownership
        state.producer_ids = ProducerIdManager(c.log_dirs[0])
    except BaseException:
        try:
            state.logs.close()
        finally:
            state.logs = None
            release_all(state.dir_locks)
            state.dir_locks = []
        raise


def _consumer_groups(state: BrokerState) -> ConsumerGroups:
    """KIP-848's groups, handed the broker's topics and the classic coordinator's membership."""
    c, coord = state.config, state.coordinator

    def classic_in_use(group_id: str) -> bool:
        grp = coord.groups.get(group_id)
        return grp is not None and bool(grp.members or grp.pending)

    settings = ConsumerGroupSettings(
        c.group_consumer_session_timeout_ms, c.group_consumer_heartbeat_interval_ms, c.group_max_size
    )
    return ConsumerGroups(settings, state.topics, topic_id_of, classic_in_use)
