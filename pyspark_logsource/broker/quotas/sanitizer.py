"""User principals and client-ids as ZooKeeper node names, as Kafka's ``Sanitizer`` makes them: Java's
URLEncoder (letters, digits and ``-_.`` kept, every other byte of the UTF-8 form percent-encoded), with ``*``
and space percent-encoded too. SCRAM credentials and client quotas share ``/config/users/<sanitized user>``."""

from __future__ import annotations

from urllib.parse import quote, unquote_plus


def sanitize(name: str) -> str:
    """``name`` as a znode name (Kafka's ``Sanitizer.sanitize``)."""
    return quote(name, safe="-_.").replace("~", "%7E")


def desanitize(node: str) -> str:
    """The name a znode stands for (Kafka's ``Sanitizer.desanitize``: Java's URLDecoder, ``+`` a space)."""
    return unquote_plus(node)
