"""Topic name validation: the only gate between a user-supplied name and a path.

Names follow Kafka's rule: 1..249 characters from ``[a-zA-Z0-9._-]`` and not
``.`` or ``..``. Checking the characters before any path is built is what
keeps ``../x`` or ``a/b`` from ever reaching the file system.
"""

from __future__ import annotations

import re

from .errors import InvalidRequest, InvalidTopic, TopicDeletionDisabled

MAX_TOPIC_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_PREFIX = "__"

#: a partition of a topic, ``(topic, partition)``: the key of every per-partition map of the package
TopicPartition = tuple[str, int]

#: the internal topic of the groups' committed offsets and membership (Kafka's name)
OFFSETS_TOPIC = "__consumer_offsets"
#: the internal topic of the transaction coordinator's state (Kafka's name)
TRANSACTION_STATE_TOPIC = "__transaction_state"


def validate_topic_name(name: object) -> str:
    """Return ``name`` if it is a legal topic name; raise InvalidTopic otherwise."""
    if not isinstance(name, str):
        raise InvalidTopic(f"topic name must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidTopic("topic name is empty")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopic(f"topic name is {len(name)} characters long, the limit is {MAX_TOPIC_LENGTH}")
    if name in (".", ".."):
        raise InvalidTopic(f"topic name cannot be {name!r}")
    if not _LEGAL.fullmatch(name):
        bad = sorted({c for c in name if not _LEGAL.fullmatch(c)})
        raise InvalidTopic(
            f"topic name {name!r} contains illegal characters {bad!r}; legal are ASCII letters, digits, '.', '_' and '-'"
        )
    return name


def is_internal(name: str) -> bool:
    """Internal topics (consumer offsets and the like) start with ``__``."""
    return name.startswith(INTERNAL_PREFIX)


def check_deletable(name: object, deletion_enabled: bool) -> str:
    """Return ``name`` if a DeleteTopics request may delete it (Kafka's checks, in Kafka's order)."""
    if not deletion_enabled:
        raise TopicDeletionDisabled("topic deletion is disabled (delete.topic.enable=false)")
    if isinstance(name, str) and is_internal(name):
        raise InvalidRequest(f"internal topic {name!r} cannot be deleted")
    return validate_topic_name(name)
