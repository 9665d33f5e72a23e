"""DescribeClientQuotas (48) and AlterClientQuotas (49): the quota table read and changed through its store.

Describe answers from the broker's :class:`~.model.QuotaTable` (the table enforcement reads), with
Kafka's filter semantics (its ClientQuotasImage.describe): a component per entity type matching an exact
name, the default or any name; ``strict`` keeps only entities of exactly the filter's types; an empty
entity type, a type named twice or a malformed match is INVALID_REQUEST, an unknown type
UNSUPPORTED_VERSION. Alter validates each entry as Kafka's ZooKeeper mode did (ZkAdminManager): an entity
of ``user`` and/or ``client-id`` (null name: the default; INVALID_REQUEST for an empty entity, an empty
name, a duplicate or unknown type), known keys only, byte rates whole numbers; and as this broker's
enforcement needs, every value positive and finite. Each entry has its own result; ``validate_only``
changes nothing. The store (a file on a single broker, ZooKeeper in a cluster: the broker that gets the
request writes, every broker applies the notification) is ``state.quota_store``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import InvalidRequest, LogSourceError, UnsupportedVersion
from ...protocol import quota_messages as qm
from ..error_responses import error_fields
from ..session import Session
from .model import DEFAULT, PRODUCER_BYTE_RATE, QUOTA_KEYS, QuotaEntity
from .store import QuotaStore

if TYPE_CHECKING:
    from ..state import BrokerState

#: byte rates are Kafka LONG configs; the request percentage a DOUBLE
LONG_KEYS = frozenset({PRODUCER_BYTE_RATE, "consumer_byte_rate"})
_LONG_MAX = float(2**63 - 1)
_TYPES = (qm.USER, qm.CLIENT_ID, qm.IP)


def _wire_name(name: str | None) -> str | None:
    return None if name == DEFAULT else name


def wire_entity(entity: QuotaEntity) -> qm.Entity:
    """A table entity as the wire has it (user first, a default's name null)."""
    out: list[tuple[str, str | None]] = []
    if entity.user is not None:
        out.append((qm.USER, _wire_name(entity.user)))
    if entity.client_id is not None:
        out.append((qm.CLIENT_ID, _wire_name(entity.client_id)))
    return tuple(out)


def parse_entity(entity: qm.Entity) -> QuotaEntity:
    """The table's entity for a wire entity; InvalidRequest naming what is wrong."""
    if not entity:
        raise InvalidRequest("Invalid empty client quota entity")
    parts: dict[str, str | None] = {}
    for kind, name in entity:
        if kind in parts:
            raise InvalidRequest(f"Invalid client quota entity: duplicate entity type {kind}")
        if kind not in _TYPES:
            raise InvalidRequest(f"Unhandled client quota entity type: {kind}")
        if name is not None and name == "":
            raise InvalidRequest(f"Empty {kind} not supported")
        if name == DEFAULT:
            raise InvalidRequest(f"{kind} name {DEFAULT} is reserved: the default {kind} has a null name")
        parts[kind] = name
    if qm.IP in parts:
        if len(parts) > 1:
            raise InvalidRequest(
                "Invalid quota entity combination, IP entity should not be used with user/client ID entity."
            )
        raise InvalidRequest("ip quotas (connection_creation_rate) are not supported by this broker")
    user = (parts[qm.USER] or DEFAULT) if qm.USER in parts else None
    client = (parts[qm.CLIENT_ID] or DEFAULT) if qm.CLIENT_ID in parts else None
    return QuotaEntity(user, client)


def parse_ops(ops: list[qm.QuotaOp]) -> dict[str, float | None]:
    """key -> new value (None: remove); InvalidRequest naming the key for a bad key or value."""
    out: dict[str, float | None] = {}
    for op in ops:
        if op.key in out:
            raise InvalidRequest(f"Duplicate quota key {op.key}")
        if op.remove:
            out[op.key] = None
            continue
        out[op.key] = check_value(op.key, op.value)
    return out


def check_value(key: str, value: float) -> float:
    """``value`` for quota ``key``, or InvalidRequest naming the key."""
    if key not in QUOTA_KEYS:
        raise InvalidRequest(f"Invalid configuration key {key}")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InvalidRequest(f"Configuration {key} must be a number, not {value!r}")
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise InvalidRequest(f"Configuration {key} must be a positive number, not {value}")
    if key in LONG_KEYS:
        rounded = float(int(value + 1e-6)) if value < _LONG_MAX else math.inf
        if abs(rounded - value) > 1e-6:
            raise InvalidRequest(f"Configuration {key} must be a LONG value, not {value}")
        return rounded
    return float(value)


def describe(
    entities: dict[QuotaEntity, dict[str, float]], components: list[qm.QuotaFilterComponent], strict: bool
) -> list[qm.QuotaEntry]:
    """The entries the filter matches (Kafka's ClientQuotasImage.describe); typed errors for a bad filter."""
    exact: dict[str, str | None] = {}
    any_of: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise InvalidRequest("Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in any_of:
            raise InvalidRequest(f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in _TYPES:
            raise UnsupportedVersion(f"Unsupported entity type {c.entity_type}")
        if c.match_type == qm.MATCH_EXACT:
            if c.match is None:
                raise InvalidRequest("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == qm.MATCH_DEFAULT:
            if c.match is not None:
                raise InvalidRequest(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                )
            exact[c.entity_type] = None
        elif c.match_type == qm.MATCH_ANY:
            if c.match is not None:
                raise InvalidRequest(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                )
            any_of.add(c.entity_type)
        else:
            raise InvalidRequest(f"Unknown match type {c.match_type}")
    named = set(exact) | any_of
    if qm.IP in named and (qm.USER in named or qm.CLIENT_ID in named):
        raise InvalidRequest(
            "Invalid entity filter component combination. IP filter component should not be used with "
            "user or clientId filter component."
        )
    if not named and strict:
        return []
    out = []
    for entity, values in sorted(entities.items(), key=lambda x: (x[0].user or "", x[0].client_id or "")):
        wire = dict(wire_entity(entity))
        if any(kind not in wire or wire[kind] != name for kind, name in exact.items()):
            continue
        if any(kind not in wire for kind in any_of):
            continue
        if strict and len(wire) != len(named):
            continue
        out.append(qm.QuotaEntry(wire_entity(entity), dict(sorted(values.items()))))
    return out


class QuotaHandlers:
    """The client-quota APIs over the broker's quota table and its store."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state

    def by_key(self) -> dict[int, Callable[[Any, Session], Any]]:
        return {
            qm.DESCRIBE_CLIENT_QUOTAS_KEY: self.describe_client_quotas,
            qm.ALTER_CLIENT_QUOTAS_KEY: self.alter_client_quotas,
        }

    def describe_client_quotas(
        self, req: qm.DescribeClientQuotasRequest, session: Session
    ) -> qm.DescribeClientQuotasResponse:
        try:
            entries = describe(self.state.quotas.entities(), req.components, req.strict)
        except LogSourceError as e:
            return qm.DescribeClientQuotasResponse(*error_fields(e), entries=None)
        return qm.DescribeClientQuotasResponse(entries=entries)

    def alter_client_quotas(self, req: qm.AlterClientQuotasRequest, session: Session) -> Any:
        """Validated on the loop; the writes (a file's fsync, ZooKeeper round trips) in a worker thread."""
        results: list[qm.QuotaAlterResult] = []
        todo: list[tuple[int, QuotaEntity, dict[str, float | None]]] = []
        seen: set[QuotaEntity] = set()
        for entry in req.entries:
            try:
                entity = parse_entity(entry.entity)
                if entity in seen:
                    raise InvalidRequest(f"Ignoring duplicate entity {entity}")
                seen.add(entity)
                changes = parse_ops(entry.ops)
            except LogSourceError as e:
                results.append(qm.QuotaAlterResult(entry.entity, *error_fields(e)))
                continue
            results.append(qm.QuotaAlterResult(entry.entity))
            if not req.validate_only:
                todo.append((len(results) - 1, entity, changes))
        if not todo:
            return qm.AlterClientQuotasResponse(results)
        store = self._store()
        return self._write(store, todo, results)

    def _store(self) -> QuotaStore:
        store = getattr(self.state, "quota_store", None)
        if store is None:
            raise LogSourceError("the client quota store is not open")
        return store

    async def _write(
        self,
        store: QuotaStore,
        todo: list[tuple[int, QuotaEntity, dict[str, float | None]]],
        results: list[qm.QuotaAlterResult],
    ) -> qm.AlterClientQuotasResponse:
        import asyncio

        def run() -> None:
            for i, entity, changes in todo:
                try:
                    store.alter(entity, changes)
                except Exception as e:  # one entity's failure is its own result
                    results[i].error_code, results[i].error_message = error_fields(e)

        await asyncio.get_running_loop().run_in_executor(None, run)
        return qm.AlterClientQuotasResponse(results)
