"""The demo: the whole product on an embedded broker (``logsource demo``, ``make demo``)."""

from __future__ import annotations

from .events import EVENT_SCHEMA, VALUE_DDL, EventGenerator, generate

__all__ = ["EVENT_SCHEMA", "VALUE_DDL", "EventGenerator", "generate", "main"]


def main(argv: list[str] | None = None) -> int:
    """Run the demo (see :mod:`pyspark_logsource.demo.run`); returns the exit code."""
    from .run import main as _main

    return _main(argv)
