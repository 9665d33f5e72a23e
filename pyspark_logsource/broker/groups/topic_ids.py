"""Topic ids (Metadata v10+, KIP-848's assignments): a topic's id derived from its name.

Kafka draws a random uuid when a topic is created and keeps it in the topic's metadata; this broker keeps
no topic id, so it derives one (uuid5 of the name): stable across restarts and the same on every broker,
but a topic deleted and created again under the same name gets the same id (Kafka's would differ).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

_NAMESPACE = uuid.UUID("6c6f6773-6f75-7263-652d-746f70696373")


def topic_id_of(topic: str) -> bytes:
    """The 16-byte id of ``topic``."""
    return uuid.uuid5(_NAMESPACE, topic).bytes


def resolve_topic_ids(
    names: list[str | None], ids: list[bytes | None], topics: Iterable[str]
) -> list[str | None]:
    """Metadata v12+: each null name replaced by the name of the topic with that id (None if none has)."""
    by_id = {topic_id_of(t): t for t in topics}
    return [
        n if n is not None else by_id.get(bytes(i)) if i else None for n, i in zip(names, ids, strict=False)
    ]
