"""Producer, Consumer and Admin clients, and ``read_range`` for Spark tasks.

All clients take ``bootstrap`` as ``"host:port[,host:port]"``, are blocking
APIs with background I/O threads, and close with ``close()`` or ``with``.
"""

from __future__ import annotations

from .accumulator import RecordFuture
from .admin import Admin, GroupLag, offset_spec
from .consumer import Consumer
from .fetch import read_range
from .fetched import Message, messages_from_arrow, records_to_arrow
from .metadata import PartitionInfo, TopicDescription, parse_bootstrap
from .partitioner import hash_partition, hash_partitions
from .producer import Producer

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
