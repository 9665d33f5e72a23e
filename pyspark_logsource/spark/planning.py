"""Offset range planning: pure functions over broker offset lookups.

Everything here takes the broker as two callables so that it can be unit
tested with a fake:

- ``lookup(tps, spec) -> {tp: offset}`` with ``spec`` "earliest", "latest" or
  an int timestamp in ms (first offset whose timestamp is >= T, log end when
  none), i.e. ``Admin.list_offsets``;
- ``partitions_for(topic) -> [int]`` and ``list_topics() -> [str]``.
"""

from __future__ import annotations

import datetime as _dt
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from ..errors import ConfigError, OffsetOutOfRange, UnknownTopicOrPartition
from ..topics import TopicPartition as TP
from .options import EARLIEST, LATEST, OffsetSpec, ReadOptions, TimestampSpec

log = logging.getLogger(__name__)

Spec = Union[str, int]
Lookup = Callable[[Sequence[TP], Spec], Mapping[TP, int]]

try:  # PySpark >= 4.0 always has InputPartition; the subclass keeps ranges picklable plain data.
    from pyspark.sql.datasource import InputPartition as _InputPartition
except Exception:  # pragma: no cover - pyspark is a dependency
    _InputPartition = object  # type: ignore[assignment,misc]


class OffsetRange(_InputPartition):  # type: ignore[misc,valid-type]
    """One Spark task's share of a topic-partition: offsets [start, end)."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.value = (topic, partition, start, end)

    @property
    def tp(self) -> TP:
        """The (topic, partition) this range reads."""
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        """Number of offsets in the range."""
        return max(0, self.end - self.start)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OffsetRange) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"OffsetRange({self.topic!r}, {self.partition}, {self.start}, {self.end})"


# ---------------------------------------------------------------------------
# Which topic-partitions


def select_partitions(
    opts: ReadOptions,
    partitions_for: Callable[[str], Sequence[int]],
    list_topics: Callable[[], Sequence[str]],
    *,
    topics_filter: set[str] | None = None,
    missing_ok: bool = False,
) -> list[TP]:
    """The topic-partitions the subscription covers right now, sorted.

    A subscribed topic that does not exist raises UnknownTopicOrPartition
    (Spark's Kafka source would silently read nothing) unless ``missing_ok``.
    """
    if opts.assign is not None:
        out: list[TP] = []
        for topic, parts in opts.assign.items():
            if topics_filter is not None and topic not in topics_filter:
                continue
            existing = set(_partitions(partitions_for, topic, missing_ok))
            missing = [p for p in parts if p not in existing]
            if missing and not missing_ok:
                raise UnknownTopicOrPartition(f"assign: partitions {missing} of topic {topic!r} do not exist")
            out.extend((topic, p) for p in parts if p in existing)
        return sorted(out)
    if opts.subscribe is not None:
        topics = list(opts.subscribe)
    else:
        rx = re.compile(opts.subscribe_pattern or "")
        topics = [t for t in list_topics() if rx.fullmatch(t)]
    if topics_filter is not None:
        topics = [t for t in topics if t in topics_filter]
    return sorted((t, p) for t in topics for p in _partitions(partitions_for, t, missing_ok))


def _partitions(partitions_for: Callable[[str], Sequence[int]], topic: str, missing_ok: bool) -> list[int]:
    try:
        return list(partitions_for(topic))
    except UnknownTopicOrPartition:
        if missing_ok:
            return []
        raise UnknownTopicOrPartition(f"topic {topic!r} does not exist") from None


# ---------------------------------------------------------------------------
# Resolving offset specs


def resolve(
    spec: OffsetSpec | TimestampSpec,
    tps: Sequence[TP],
    lookup: Lookup,
    *,
    name: str,
    default: str,
    strategy: str = "latest",
) -> dict[TP, int]:
    """Resolve a starting/ending spec into concrete offsets for ``tps``.

    ``default`` ("earliest"/"latest") applies to partitions the JSON forms do
    not name. ``strategy`` "error" raises when a timestamp matches no record
    (Kafka's startingOffsetsByTimestampStrategy), "latest" uses the log end.
    """
    tps = list(tps)
    if not tps:
        return {}
    if isinstance(spec, str):
        return {tp: int(o) for tp, o in lookup(tps, spec).items() if tp in set(tps)}
    if isinstance(spec, TimestampSpec):
        return _resolve_timestamps(spec, tps, lookup, name=name, default=default, strategy=strategy)
    _check_named(spec, tps, name)
    wanted: dict[TP, int] = {}
    for tp in tps:
        v = spec.get(tp[0], {}).get(tp[1])
        wanted[tp] = v if v is not None else (EARLIEST if default == "earliest" else LATEST)
    out = {tp: v for tp, v in wanted.items() if v >= 0}
    for special, word in ((EARLIEST, "earliest"), (LATEST, "latest")):
        need = [tp for tp, v in wanted.items() if v == special]
        if need:
            got = lookup(need, word)
            out.update({tp: int(got[tp]) for tp in need})
    return {tp: out[tp] for tp in tps}


def _check_named(per: Mapping[str, Mapping[int, int]], tps: Sequence[TP], name: str) -> None:
    known = set(tps)
    extra = sorted((t, p) for t, parts in per.items() for p in parts if (t, p) not in known)
    if extra:
        shown = ", ".join(f"{t}-{p}" for t, p in extra[:10])
        raise ConfigError(f"option '{name}' names partitions that are not part of the subscription: {shown}")


def _resolve_timestamps(
    spec: TimestampSpec, tps: list[TP], lookup: Lookup, *, name: str, default: str, strategy: str
) -> dict[TP, int]:
    by_ts: dict[int, list[TP]] = {}
    rest: list[TP] = []
    if spec.global_ts is not None:
        by_ts[spec.global_ts] = list(tps)
    else:
        per = spec.per_partition or {}
        _check_named(per, tps, name)
        for tp in tps:
            ts = per.get(tp[0], {}).get(tp[1])
            if ts is None:
                rest.append(tp)
            else:
                by_ts.setdefault(ts, []).append(tp)
    out: dict[TP, int] = {}
    if rest:
        out.update({tp: int(o) for tp, o in lookup(rest, default).items()})
    if by_ts:
        ends = (
            lookup([tp for group in by_ts.values() for tp in group], "latest") if strategy == "error" else {}
        )
        for ts, group in by_ts.items():
            got = lookup(group, ts)
            for tp in group:
                off = int(got[tp])
                if strategy == "error" and off >= int(ends[tp]):
                    raise OffsetOutOfRange(
                        f"option '{name}': no record of {tp[0]}-{tp[1]} has a timestamp >= {ts} "
                        "(set startingOffsetsByTimestampStrategy=latest to start at the log end instead)"
                    )
                out[tp] = off
    return {tp: out[tp] for tp in tps}


# ---------------------------------------------------------------------------
# Ranges


def plan_ranges(start: Mapping[TP, int], end: Mapping[TP, int]) -> list[OffsetRange]:
    """One range per topic-partition of ``end``; partitions with nothing to read are dropped.

    A start after the end is a user error in a batch query (Kafka does the same).
    """
    out = []
    for tp in sorted(end):
        s = start.get(tp)
        e = end[tp]
        if s is None:
            continue
        if s > e:
            raise ConfigError(f"starting offset {s} is after ending offset {e} for {tp[0]}-{tp[1]}")
        if e > s:
            out.append(OffsetRange(tp[0], tp[1], s, e))
    return out


def split_ranges(ranges: Sequence[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges so that there are at least ``min_partitions`` Spark tasks.

    As in Kafka's KafkaOffsetRangeCalculator: each range gets a number of parts
    proportional to its size (at least one), parts of one range differ by at
    most one offset.
    """
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or min_partitions <= len(ranges):
        return list(ranges)
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, round(r.size / total * min_partitions)))
        base, extra = divmod(r.size, parts)
        s = r.start
        for i in range(parts):
            e = s + base + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, s, e))
            s = e
    return out


# ---------------------------------------------------------------------------
# Filter pushdown


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def to_micros(value: Any) -> int:
    """Spark timestamp literal (datetime, naive = local time as PySpark does) to epoch microseconds."""
    if isinstance(value, _dt.datetime):
        aware = value if value.tzinfo is not None else value.astimezone()
        return (aware - _EPOCH) // _dt.timedelta(microseconds=1)
    if isinstance(value, _dt.date):
        return to_micros(_dt.datetime(value.year, value.month, value.day))
    raise TypeError(f"not a timestamp: {value!r}")


@dataclass
class Pushed:
    """What the pushed filters allow; None means unconstrained."""

    topics: set[str] | None = None
    partitions: set[int] | None = None
    offset_lo: int | None = None  # inclusive
    offset_hi: int | None = None  # exclusive
    ts_lo_us: int | None = None  # inclusive, microseconds
    ts_hi_us: int | None = None  # exclusive, microseconds
    empty: bool = False

    @property
    def ts_lo_ms(self) -> int | None:
        """Smallest millisecond timestamp that can pass (ceil of the microsecond bound)."""
        return None if self.ts_lo_us is None else -((-self.ts_lo_us) // 1000)


def _int_value(v: Any) -> int | None:
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


def push_filters(filters: Iterable[Any], pushed: Pushed | None = None) -> tuple[Pushed, list[Any]]:
    """Split Spark filters into what narrows the scan and what Spark must still evaluate.

    Handled exactly (not returned): ``topic = / IN``, ``partition = / IN``,
    ``offset`` and ``timestamp`` comparisons. Offsets and partitions narrow the
    planned ranges; timestamp lower bounds narrow them through the time index
    and both timestamp bounds are applied to the rows in the executor (CreateTime
    timestamps need not be monotonic, so an upper bound cannot cut a range).
    """
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

    p = pushed if pushed is not None else Pushed()
    rest: list[Any] = []
    for f in filters:
        attr = getattr(f, "attribute", None)
        col = attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None
        ok = False
        if col == "topic" and isinstance(f, (EqualTo, In)):
            vals = [f.value] if isinstance(f, EqualTo) else list(f.value)
            if all(isinstance(v, str) for v in vals):
                p.topics = set(vals) if p.topics is None else p.topics & set(vals)
                ok = True
        elif col == "partition" and isinstance(f, (EqualTo, In)):
            vals = [f.value] if isinstance(f, EqualTo) else list(f.value)
            ints = [_int_value(v) for v in vals]
            if all(v is not None for v in ints):
                s = {int(v) for v in ints if v is not None}
                p.partitions = s if p.partitions is None else p.partitions & s
                ok = True
        elif col == "offset" and isinstance(
            f, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)
        ):
            v = _int_value(f.value)
            if v is not None:
                lo, hi = {
                    EqualTo: (v, v + 1),
                    GreaterThan: (v + 1, None),
                    GreaterThanOrEqual: (v, None),
                    LessThan: (None, v),
                    LessThanOrEqual: (None, v + 1),
                }[type(f)]
                if lo is not None:
                    p.offset_lo = lo if p.offset_lo is None else max(p.offset_lo, lo)
                if hi is not None:
                    p.offset_hi = hi if p.offset_hi is None else min(p.offset_hi, hi)
                ok = True
        elif col == "timestamp" and isinstance(
            f, (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)
        ):
            try:
                us = to_micros(f.value)
            except TypeError:
                us = None
            if us is not None:
                if isinstance(f, (GreaterThan, GreaterThanOrEqual)):
                    lo = us + 1 if isinstance(f, GreaterThan) else us
                    p.ts_lo_us = lo if p.ts_lo_us is None else max(p.ts_lo_us, lo)
                else:
                    hi = us + 1 if isinstance(f, LessThanOrEqual) else us
                    p.ts_hi_us = hi if p.ts_hi_us is None else min(p.ts_hi_us, hi)
                ok = True
        if not ok:
            rest.append(f)
    if (p.topics is not None and not p.topics) or (p.partitions is not None and not p.partitions):
        p.empty = True
    if p.offset_lo is not None and p.offset_hi is not None and p.offset_lo >= p.offset_hi:
        p.empty = True
    if p.ts_lo_us is not None and p.ts_hi_us is not None and p.ts_lo_us >= p.ts_hi_us:
        p.empty = True
    return p, rest


def narrow(
    start: Mapping[TP, int], end: Mapping[TP, int], pushed: Pushed, lookup: Lookup
) -> tuple[dict[TP, int], dict[TP, int]]:
    """Apply pushed filters to the start/end offsets of each topic-partition."""
    if pushed.empty:
        return {}, {}
    keep = [
        tp
        for tp in end
        if (pushed.topics is None or tp[0] in pushed.topics)
        and (pushed.partitions is None or tp[1] in pushed.partitions)
    ]
    s = {tp: start[tp] for tp in keep if tp in start}
    e = {tp: end[tp] for tp in keep}
    if pushed.offset_lo is not None:
        s = {tp: max(o, pushed.offset_lo) for tp, o in s.items()}
    if pushed.offset_hi is not None:
        e = {tp: min(o, pushed.offset_hi) for tp, o in e.items()}
    ts_lo = pushed.ts_lo_ms
    if ts_lo is not None and s:
        # Every record before the first offset with timestamp >= T has a smaller timestamp.
        by_time = lookup(list(s), ts_lo)
        s = {tp: max(o, int(by_time[tp])) for tp, o in s.items()}
    # Narrowing may cross the ends: such a partition has nothing to read.
    s = {tp: min(o, e[tp]) if o > e[tp] else o for tp, o in s.items()}
    return s, e


# ---------------------------------------------------------------------------
# Streaming offsets


def to_json(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    """{(topic, p): off} -> {topic: {"p": off}} (JSON keys are strings)."""
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def from_json(obj: Mapping[str, Mapping[Any, Any]] | None) -> dict[TP, int]:
    """Inverse of :func:`to_json`."""
    if not obj:
        return {}
    return {(str(t), int(p)): int(o) for t, parts in obj.items() for p, o in parts.items()}


def rate_limit(start: Mapping[TP, int], latest: Mapping[TP, int], max_total: int | None) -> dict[TP, int]:
    """Cap the offsets to read in one trigger at ``max_total``, spread max-min fairly.

    Every partition with a backlog gets an equal share; a partition needing
    less than its share gives the rest to the others (water-filling), so one
    busy partition cannot starve the quiet ones and no capacity is wasted.
    Ties in the remainder go to partitions in sorted order, so the result is
    deterministic.
    """
    if max_total is None:
        return dict(latest)
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    if sum(backlog.values()) <= max_total:
        return dict(latest)
    grant = {tp: 0 for tp in latest}
    remaining = max_total
    active = sorted(tp for tp, b in backlog.items() if b > 0)
    while remaining > 0 and active:
        share, extra = divmod(remaining, len(active))
        nxt = []
        given = 0
        for i, tp in enumerate(active):
            want = backlog[tp] - grant[tp]
            g = min(want, share + (1 if i < extra else 0))
            grant[tp] += g
            given += g
            if grant[tp] < backlog[tp]:
                nxt.append(tp)
        remaining -= given
        if given == 0:
            break
        active = nxt
    return {tp: (start[tp] + grant[tp]) if tp in start else latest[tp] for tp in latest}


def advance_only(prev: Mapping[TP, int], now: Mapping[TP, int]) -> dict[TP, int]:
    """Merge offsets so that none goes below what was already advertised."""
    out = dict(now)
    for tp, o in prev.items():
        if tp in out and out[tp] < o:
            out[tp] = o
    return out
