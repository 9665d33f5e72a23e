"""Producer, Consumer and Admin clients, and ``read_range`` for Spark tasks.

All clients take ``bootstrap`` as ``"host:port[,host:port]"``, are blocking
APIs with background I/O threads, and close with ``close()`` or ``with``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .accumulator import RecordFuture
    from .admin import Admin, GroupLag, offset_spec
    from .consumer import Consumer
    from .fetch import read_range
    from .fetched import Message, messages_from_arrow, records_to_arrow
    from .metadata import PartitionInfo, TopicDescription, parse_bootstrap
    from .partitioner import hash_partition, hash_partitions
    from .producer import Producer

# Each name is imported from its module on first use: a Spark task that only reads a range
# (read_range) then loads neither the producer nor the consumer nor the group clients, which
# are on the path to a stream's first micro-batch otherwise.
_MODULE_OF = {
    "RecordFuture": "accumulator",
    "Admin": "admin",
    "GroupLag": "admin",
    "offset_spec": "admin",
    "Consumer": "consumer",
    "read_range": "fetch",
    "Message": "fetched",
    "messages_from_arrow": "fetched",
    "records_to_arrow": "fetched",
    "PartitionInfo": "metadata",
    "TopicDescription": "metadata",
    "parse_bootstrap": "metadata",
    "hash_partition": "partitioner",
    "hash_partitions": "partitioner",
    "Producer": "producer",
}

__all__ = [
    "Admin",
    "Consumer",
    "GroupLag",
    "Message",
    "PartitionInfo",
    "Producer",
    "RecordFuture",
    "TopicDescription",
    "hash_partition",
    "hash_partitions",
    "messages_from_arrow",
    "offset_spec",
    "parse_bootstrap",
    "read_range",
    "records_to_arrow",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))
