"""The exactly-once load: topics -> files on any Hadoop filesystem, or an Iceberg table.

One module per step: ``config`` (the frozen ``EtlConfig``), ``plan``, ``load``
(read + decode + drive a sink), ``audit``, ``commit`` (what every sink commits),
``verify``, ``streaming``; one per sink: ``directory`` and ``iceberg``;
``main`` is the entry point that ``jobs/etl.py`` (spark-submit) and
``logsource etl`` call.
"""

from __future__ import annotations

from ..offsets import open_store
from .audit import audit_files, check_audit
from .commit import LoadResult, Sink, VerifyReport, summary_lines
from .config import EtlConfig, parse_args
from .directory import DirectorySink
from .load import make_sink, read_plan, run_load, transform
from .main import get_spark, main, status
from .plan import LoadPlan, plan_load
from .streaming import clean_checkpoint_leftovers, run_streaming
from .verify import verify_streaming

__all__ = [
    "DirectorySink",
    "EtlConfig",
    "LoadPlan",
    "LoadResult",
    "Sink",
    "VerifyReport",
    "audit_files",
    "check_audit",
    "clean_checkpoint_leftovers",
    "get_spark",
    "main",
    "make_sink",
    "open_store",
    "parse_args",
    "plan_load",
    "read_plan",
    "run_load",
    "run_streaming",
    "status",
    "summary_lines",
    "transform",
    "verify",
    "verify_streaming",
]


def verify(spark: object, output: str, log: object = print) -> VerifyReport:
    """Verify a directory output (``logsource etl --verify --output OUTPUT``)."""
    from .verify import verify_directory

    return verify_directory(spark, open_store(output, spark), log)  # type: ignore[arg-type]
