"""The arithmetic of AlterConfigs and IncrementalAlterConfigs: a resource's dynamic configs after a request.

AlterConfigs replaces the whole set (a null value leaves the key out). IncrementalAlterConfigs changes keys
one by one (Kafka's KIP-339): SET, DELETE (back to the next source in precedence), APPEND and SUBTRACT
(list-valued settings only: ``cleanup.policy``, the replication throttles; the list starts from the current
effective value). Errors as Kafka's: a key twice in one resource or an unknown operation INVALID_REQUEST,
APPEND/SUBTRACT of a non-list setting INVALID_CONFIG naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...errors import InvalidConfig, InvalidRequest
from ...protocol.admin_config_messages import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, AlterableConfig

#: the list-valued settings APPEND and SUBTRACT apply to (topic and broker spellings)
LIST_KEYS = frozenset(
    {
        "cleanup.policy",
        "log.cleanup.policy",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    }
)


def altered(
    current: Mapping[str, str],
    changes: list[AlterableConfig],
    incremental: bool,
    effective: Mapping[str, str],
) -> dict[str, str]:
    """The dynamic configs after ``changes``; ``effective``: every setting's value now (for APPEND/SUBTRACT)."""
    names = [c.name for c in changes]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidRequest(f"Error due to duplicate config keys: {', '.join(dup)}")
    if not incremental:
        return {c.name: c.value for c in changes if c.value is not None}
    new = dict(current)
    for c in changes:
        if c.op == OP_SET:
            if c.value is None:
                raise InvalidRequest(f"Null value not supported for: {c.name}")
            new[c.name] = c.value
        elif c.op == OP_DELETE:
            new.pop(c.name, None)
        elif c.op in (OP_APPEND, OP_SUBTRACT):
            if c.name not in LIST_KEYS:
                verb = "append" if c.op == OP_APPEND else "subtract"
                raise InvalidConfig(f"Config value {verb} is not allowed for config key: {c.name}")
            items = _items(new.get(c.name, effective.get(c.name, "")))
            given = _items(c.value or "")
            if c.op == OP_APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            new[c.name] = ",".join(items)
        else:
            raise InvalidRequest(
                f"unknown config operation {c.op} for {c.name} (0 set, 1 delete, 2 append, 3 subtract)"
            )
    return new


def _items(value: str) -> list[str]:
    return [i.strip() for i in value.split(",") if i.strip()]
