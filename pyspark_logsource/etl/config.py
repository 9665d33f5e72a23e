"""The ETL job's configuration: one frozen, validated ``EtlConfig``, built from argv or directly.

``parse_args(argv)`` reads the command line and an optional properties file
(``conf/etl.properties``; command-line options win); code that already knows
what it wants (the demo, notebooks, benchmarks) builds ``EtlConfig(...)``
itself, and gets the same validation from ``__post_init__``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..offsets import MODES

FORMATS = ("parquet", "json", "csv", "orc")
DECODES = ("raw", "utf8", "json")
SINKS = ("directory", "iceberg")
PARTITION_COLUMNS = ("topic", "date", "hour")
ACTIONS = ("load", "status", "verify", "repair")

#: properties-file key -> EtlConfig field (conf/etl.properties documents each one)
PROPERTY_KEYS = {
    "bootstrap.servers": "bootstrap_servers",
    "subscribe": "subscribe",
    "subscribePattern": "subscribe_pattern",
    "assign": "assign",
    "output": "output",
    "output.format": "format",
    "output.sink": "sink",
    "output.partitionBy": "partition_by",
    "output.commitMode": "commit_mode",
    "iceberg.table": "table",
    "iceberg.catalog": "catalog",
    "startingOffsets": "starting_offsets",
    "maxOffsetsPerLoad": "max_offsets_per_load",
    "value.decode": "decode",
    "value.schema": "value_schema",
    "failOnDataLoss": "fail_on_data_loss",
    "checkpointLocation": "checkpoint",
    "trigger": "trigger",
    "spark.master": "master",
    "command.config": "command_config",
}
#: properties-file keys passed to the logsource reader as they are (Spark's Kafka connector's
#: ``kafka.security.protocol``, ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``, ...)
READER_PREFIX = "kafka."


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    v = str(value).strip().lower()
    if v not in ("true", "false"):
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    return v == "true"


@dataclass(frozen=True)
class EtlConfig:
    """Everything one run of the ETL job needs; validated on construction, never mutated."""

    output: str
    bootstrap_servers: str = ""
    subscribe: str | None = None
    subscribe_pattern: str | None = None
    assign: str | None = None
    action: str = "load"
    sink: str = "directory"
    format: str = "parquet"
    partition_by: tuple[str, ...] = ()
    commit_mode: str = "auto"
    table: str | None = None
    catalog: str | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_load: int | None = None
    decode: str = "raw"
    value_schema: str | None = None
    fail_on_data_loss: bool = True
    extra_options: Mapping[str, str] = field(default_factory=dict)
    master: str | None = None
    progress: bool = True
    streaming: bool = False
    checkpoint: str | None = None
    trigger: str = "availableNow"
    timeout: float | None = None
    #: Kafka's client properties file (``security.protocol``, ``sasl.jaas.config``, ``ssl.*``): the
    #: reader gets them as ``kafka.*`` options (Kafka's tools' ``--command-config``)
    command_config: str | None = None

    def __repr__(self) -> str:
        # the generated repr would show a password given with --option kafka.sasl.jaas.config=...
        from ..client.kafka_security import redact

        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields["extra_options"] = redact(self.extra_options)
        return f"EtlConfig({', '.join(f'{k}={v!r}' for k, v in fields.items())})"

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # normalise in place: the instance is frozen from here on
        if isinstance(self.partition_by, str):
            set_(self, "partition_by", tuple(c.strip() for c in self.partition_by.split(",") if c.strip()))
        set_(self, "partition_by", tuple(self.partition_by))
        set_(self, "fail_on_data_loss", _bool(self.fail_on_data_loss, "failOnDataLoss"))
        set_(self, "extra_options", dict(self.extra_options))
        if self.max_offsets_per_load is not None:
            try:
                set_(self, "max_offsets_per_load", int(self.max_offsets_per_load))
            except ValueError:
                raise ConfigError(
                    f"maxOffsetsPerLoad must be a number, got {self.max_offsets_per_load!r}"
                ) from None
            if self.max_offsets_per_load <= 0:
                raise ConfigError("maxOffsetsPerLoad must be a positive number of offsets")
        if not self.output and not (self.sink == "iceberg" and self.catalog):
            raise ConfigError("--output is required")
        if self.action not in ACTIONS:
            raise ConfigError(f"action must be one of {ACTIONS}, got {self.action!r}")
        if self.sink not in SINKS:
            raise ConfigError(f"--output-format must be one of {SINKS}, got {self.sink!r}")
        if self.sink == "iceberg":
            if not self.table or "." not in self.table:
                raise ConfigError("--output-format iceberg needs --table NAMESPACE.TABLE, e.g. db.events")
            if self.format != "parquet":
                raise ConfigError("the iceberg sink writes parquet data files (--format parquet)")
            if self.streaming:
                raise ConfigError("--streaming writes a directory (Spark's file sink), not an iceberg table")
        if self.format not in FORMATS:
            raise ConfigError(f"output format must be one of {FORMATS}, got {self.format!r}")
        if self.decode not in DECODES:
            raise ConfigError(f"value decode must be one of {DECODES}, got {self.decode!r}")
        if self.decode == "json" and not self.value_schema:
            raise ConfigError("--decode json needs --value-schema (Spark DDL, e.g. 'user STRING, n INT')")
        bad = [c for c in self.partition_by if c not in PARTITION_COLUMNS]
        if bad:
            raise ConfigError(f"--partition-by accepts {PARTITION_COLUMNS}, got {bad}")
        if self.commit_mode not in MODES:
            raise ConfigError(f"--commit-mode must be one of {MODES}, got {self.commit_mode!r}")
        if self.starting_offsets not in ("earliest", "latest"):
            raise ConfigError(
                "--starting-offsets must be earliest or latest (later loads start from the committed offsets)"
            )
        if self.action == "load":
            if not self.bootstrap_servers:
                # as every logsource command: $LOGSOURCE_BOOTSTRAP, else DEFAULT_BOOTSTRAP (127.0.0.1:9092)
                from ..client.metadata import DEFAULT_BOOTSTRAP

                set_(self, "bootstrap_servers", os.environ.get("LOGSOURCE_BOOTSTRAP", DEFAULT_BOOTSTRAP))
            if sum(x is not None for x in (self.subscribe, self.subscribe_pattern, self.assign)) != 1:
                raise ConfigError("give exactly one of --subscribe, --subscribe-pattern, --assign")

    def replace(self, **changes: Any) -> EtlConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def reader_options(self) -> dict[str, str]:
        """The logsource reader options for the subscription."""
        opts = {
            "bootstrap.servers": self.bootstrap_servers,
            "failOnDataLoss": str(self.fail_on_data_loss).lower(),
        }
        if self.subscribe is not None:
            opts["subscribe"] = self.subscribe
        elif self.subscribe_pattern is not None:
            opts["subscribePattern"] = self.subscribe_pattern
        else:
            opts["assign"] = self.assign  # type: ignore[assignment]
        if self.command_config:
            from ..broker.config import parse_properties
            from ..client.kafka_security import security_properties

            try:
                text = open(self.command_config, encoding="utf-8").read()  # noqa: SIM115
            except OSError as e:
                raise ConfigError(
                    f"cannot read --command-config {self.command_config}: {e.strerror or e}"
                ) from None
            props = security_properties(parse_properties(text), prefix="")
            opts.update({READER_PREFIX + k: v for k, v in props.items()})
        opts.update(self.extra_options)
        return opts

    def to_argv(self) -> list[str]:
        """The ``logsource etl`` command line that gives this configuration (for humans and logs)."""
        out: list[str] = []
        defaults = EtlConfig.__dataclass_fields__
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            d = defaults[f.name].default
            if f.name in ("action", "extra_options", "progress", "streaming") or v == d or v is None:
                continue
            flag = "--" + {"sink": "output-format"}.get(f.name, f.name.replace("_", "-"))
            out += [
                flag,
                ",".join(v) if isinstance(v, tuple) else str(v).lower() if isinstance(v, bool) else str(v),
            ]
        from ..client.kafka_security import redact

        for k, v in redact(self.extra_options).items():  # never a password on a printed command line
            out += ["--option", f"{k}={v}"]
        if self.action != "load":
            out.append("--" + self.action)
        if self.streaming:
            out.append("--streaming")
        if not self.progress:
            out.append("--no-progress")
        return out


def build_parser() -> argparse.ArgumentParser:
    """The job's command line."""
    from ..client.metadata import DEFAULT_BOOTSTRAP

    p = argparse.ArgumentParser(
        prog="logsource etl",
        description="Exactly-once load of topics into files or an Iceberg table, offsets committed with the output.",
    )
    p.add_argument("--config", help="a properties file (conf/etl.properties); command-line options win")
    p.add_argument(
        "--bootstrap-servers",
        "-b",
        help=f"broker HOST:PORT[,HOST:PORT] (default $LOGSOURCE_BOOTSTRAP, else {DEFAULT_BOOTSTRAP}, as every logsource command)",
    )
    g = p.add_argument_group("subscription (one of)")
    g.add_argument("--subscribe", help="comma-separated topic names")
    g.add_argument("--subscribe-pattern", help="regular expression over topic names")
    g.add_argument("--assign", help='JSON {"topic":[0,1]}')
    p.add_argument(
        "--output",
        help="output directory: a local path or any URI Spark's Hadoop can write (hdfs://, s3a://, ...)",
    )
    p.add_argument("--output-format", dest="sink", choices=SINKS, help="directory (default) or iceberg")
    p.add_argument("--table", help="iceberg: NAMESPACE.TABLE")
    p.add_argument(
        "--catalog",
        help="iceberg: a pyiceberg catalog name (.pyiceberg.yaml / env); default: SQLite in OUTPUT",
    )
    p.add_argument("--format", choices=FORMATS, help="directory: file format (default parquet)")
    p.add_argument(
        "--partition-by",
        help="directory: comma list of topic,date,hour: Hive-style directories (default none)",
    )
    p.add_argument(
        "--commit-mode", choices=MODES, help="directory: auto (default), rename or direct (see README)"
    )
    p.add_argument("--starting-offsets", help="first load of a partition: earliest (default) or latest")
    p.add_argument("--max-offsets-per-load", help="bound on offsets read by one load (all partitions)")
    p.add_argument("--decode", choices=DECODES, help="value decoding: raw bytes (default), utf8, json")
    p.add_argument("--value-schema", help="Spark DDL schema of JSON values, e.g. 'user STRING, n INT'")
    p.add_argument(
        "--fail-on-data-loss", help="true (default): fail if committed offsets were deleted by retention"
    )
    p.add_argument(
        "--option", action="append", default=[], metavar="K=V", help="extra logsource reader option"
    )
    p.add_argument(
        "--command-config",
        help="Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*) "
        "for a secured broker, as Kafka's tools take them",
    )
    p.add_argument("--master", help="Spark master when not set by spark-submit (default local[*])")
    p.add_argument("--no-progress", action="store_true", help="hide Spark's console progress bar")
    m = p.add_argument_group("modes")
    m.add_argument("--status", action="store_true", help="print the committed offsets and exit")
    m.add_argument("--verify", action="store_true", help="re-count committed output against the offsets")
    m.add_argument("--repair", action="store_true", help="withdraw a committed load whose files are missing")
    m.add_argument("--streaming", action="store_true", help="continuous flavour: readStream + file sink")
    m.add_argument("--checkpoint", help="streaming checkpoint (default OUTPUT/_checkpoint)")
    m.add_argument(
        "--trigger", help="streaming trigger: availableNow (default), once, or an interval like '10 seconds'"
    )
    m.add_argument("--timeout", type=float, help="streaming: stop after this many seconds")
    return p


def read_properties(path: str) -> dict[str, str]:
    """Parse a Java-style properties file (key=value, # comments)."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise ConfigError(f"{path}:{n}: expected key=value, got {line!r}")
            out[key.strip()] = value.strip()
    return out


def parse_args(argv: Sequence[str] | None) -> EtlConfig:
    """Parse the command line, fill from --config, validate: the job's EtlConfig."""
    ns = build_parser().parse_args(list(argv) if argv is not None else None)
    props = read_properties(ns.config) if ns.config else {}
    extra = {k: v for k, v in props.items() if k.startswith(READER_PREFIX)}
    unknown = sorted(set(props) - set(PROPERTY_KEYS) - set(extra))
    if unknown:
        raise ConfigError(f"{ns.config}: unknown key(s) {unknown}; known: {sorted(PROPERTY_KEYS)}")
    kw: dict[str, Any] = {}
    for key, name in PROPERTY_KEYS.items():
        v = getattr(ns, name, None)
        if v is None and props.get(key, "") != "":
            v = props[key]
        if v is not None:
            kw[name] = v
    for kv in ns.option:
        k, sep, v = kv.partition("=")
        if not sep:
            raise ConfigError(f"--option expects K=V, got {kv!r}")
        extra[k] = v
    flags = [a for a in ("status", "verify", "repair") if getattr(ns, a)]
    if len(flags) > 1:
        raise ConfigError(f"give at most one of --status, --verify, --repair (got {flags})")
    return EtlConfig(
        output=kw.pop("output", "") or "",
        action=flags[0] if flags else "load",
        extra_options=extra,
        progress=not ns.no_progress,
        streaming=ns.streaming,
        timeout=ns.timeout,
        **kw,
    )
