"""The quota table: which quota applies to a (user, client-id), by the seed's order of precedence.

The table is the one owner of the configured values on a broker. Stores (ZooKeeper in a cluster, a
file in the data directory on a single broker) load it and apply changes through ``set_entity``;
enforcement asks ``quotas_for`` and listens for changes with ``add_listener``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: Kafka's name for the default entity in ZooKeeper paths and in DescribeClientQuotas (a null name on
#: the wire, "<default>" in ZooKeeper).
DEFAULT = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)

#: The user of a connection that did not authenticate (PLAINTEXT, SSL without client auth), as in Kafka.
ANONYMOUS = "ANONYMOUS"


@dataclass(frozen=True)
class QuotaEntity:
    """One configured entity: a user, a client-id, or both; ``DEFAULT`` names the default at a level.

    ``user`` None means the entity has no user part (a client-id quota); ``client_id`` None means it
    has no client-id part (a user quota).
    """

    user: str | None = None
    client_id: str | None = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity names a user, a client-id, or both")


@dataclass(frozen=True)
class Quotas:
    """The quotas that apply to one (user, client-id); None means unlimited.

    ``entity`` is the configured entity each kind came from: connections that resolve to the same
    entity share one quota (the seed: "all connections of a quota group share the quota").
    """

    producer_byte_rate: float | None = None
    consumer_byte_rate: float | None = None
    request_percentage: float | None = None
    producer_entity: QuotaEntity | None = None
    consumer_entity: QuotaEntity | None = None
    request_entity: QuotaEntity | None = None


def precedence(user: str, client_id: str) -> tuple[QuotaEntity, ...]:
    """The entities to look up for a connection, most specific first (the seed's §4.9 order)."""
    return (
        QuotaEntity(user, client_id),
        QuotaEntity(user, DEFAULT),
        QuotaEntity(user, None),
        QuotaEntity(DEFAULT, client_id),
        QuotaEntity(DEFAULT, DEFAULT),
        QuotaEntity(DEFAULT, None),
        QuotaEntity(None, client_id),
        QuotaEntity(None, DEFAULT),
    )


def quota_group(entity: QuotaEntity, user: str, client_id: str) -> tuple[str, str]:
    """The (user, client-id) tags of the group that shares a quota, as Kafka's default callback forms them.

    A default entity stands for each user (or client-id) on its own: ``/config/users/<default>`` gives
    every user its own quota, not one shared by all. A part the entity does not name is "".
    """
    group_user = "" if entity.user is None else user
    group_client = "" if entity.client_id is None else client_id
    return group_user, group_client


Listener = Callable[[], None]


class QuotaTable:
    """The configured quotas of every entity on this broker, and the resolution of a connection's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entities: dict[QuotaEntity, dict[str, float]] = {}
        self._listeners: list[Listener] = []
        self._cache: dict[tuple[str, str], Quotas] = {}

    def set_entity(self, entity: QuotaEntity, values: Mapping[str, float]) -> None:
        """Replace an entity's quotas (an empty mapping removes it) and tell the listeners."""
        unknown = set(values) - set(QUOTA_KEYS)
        if unknown:
            raise ValueError(f"unknown quota key {sorted(unknown)[0]!r}")
        with self._lock:
            if values:
                self._entities[entity] = dict(values)
            else:
                self._entities.pop(entity, None)
            self._cache.clear()
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def entities(self) -> dict[QuotaEntity, dict[str, float]]:
        """A copy of every configured entity and its values."""
        with self._lock:
            return {entity: dict(values) for entity, values in self._entities.items()}

    def quotas_for(self, user: str, client_id: str) -> Quotas:
        """The quotas of a connection: for each kind, the most specific entity that sets it."""
        key = (user, client_id)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                return cached
            found: dict[str, tuple[float, QuotaEntity]] = {}
            for entity in precedence(user, client_id):
                values = self._entities.get(entity)
                if not values:
                    continue
                for name, value in values.items():
                    found.setdefault(name, (value, entity))
                if len(found) == len(QUOTA_KEYS):
                    break
            quotas = Quotas(
                producer_byte_rate=found.get(PRODUCER_BYTE_RATE, (None, None))[0],
                consumer_byte_rate=found.get(CONSUMER_BYTE_RATE, (None, None))[0],
                request_percentage=found.get(REQUEST_PERCENTAGE, (None, None))[0],
                producer_entity=found.get(PRODUCER_BYTE_RATE, (None, None))[1],
                consumer_entity=found.get(CONSUMER_BYTE_RATE, (None, None))[1],
                request_entity=found.get(REQUEST_PERCENTAGE, (None, None))[1],
            )
            if len(self._cache) > 100_000:
                self._cache.clear()
            self._cache[key] = quotas
            return quotas

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener()`` after every change (enforcement drops what it derived from the old values)."""
        with self._lock:
            self._listeners.append(listener)
