"""Java properties text (``server.properties``, a client's ``client.properties``), read as Kafka reads it."""

from __future__ import annotations


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text: ``k=v`` or ``k: v``, ``#``/``!`` comments, ``\\`` continuations."""
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        sep = min((i for i in (logical.find("="), logical.find(":")) if i >= 0), default=-1)
        if sep < 0:
            key, value = logical.strip(), ""
        else:
            key, value = logical[:sep].strip(), logical[sep + 1 :].strip()
        if key:
            out[key] = value
        logical = ""
    return out
