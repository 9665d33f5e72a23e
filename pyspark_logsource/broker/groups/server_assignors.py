"""KIP-848's server-side assignors: "uniform" (Kafka's default) and "range".

An assignor maps the members' subscriptions and the topics' partition counts to a target assignment. Both
are sticky where Kafka's are: a partition stays with its current owner while that keeps the spread even,
so a membership change moves as few partitions as it can (fewer revocations to reconcile).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

#: member id -> topic -> partitions
Target = dict[str, dict[str, set[int]]]
Assignor = Callable[[Mapping[str, set[str]], Mapping[str, int], Target], Target]


def uniform(subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int], current: Target) -> Target:
    """Spread every subscribed partition evenly over the members subscribed to its topic, keeping each
    member's current partitions up to its share (Kafka's UniformAssignor, its sticky optimized form when
    the subscriptions are the same; a best effort for heterogeneous ones)."""
    out: Target = {m: {} for m in subscriptions}
    loads = dict.fromkeys(subscriptions, 0)
    all_tps = sorted(
        (t, p)
        for t in {t for s in subscriptions.values() for t in s}
        if t in partitions
        for p in range(partitions[t])
    )
    eligible = {tp: sorted(m for m, s in subscriptions.items() if tp[0] in s) for tp in all_tps}
    n_members = max(len(subscriptions), 1)
    quota = -(-len(all_tps) // n_members)  # the ceiling: no member keeps more than its share
    unassigned = []
    for tp in all_tps:  # stickiness: keep the current owner while it is under its quota
        owner = next((m for m, a in current.items() if tp[1] in a.get(tp[0], ())), None)
        if owner in loads and owner in eligible[tp] and loads[owner] < quota:
            out[owner].setdefault(tp[0], set()).add(tp[1])
            loads[owner] += 1
        else:
            unassigned.append(tp)
    for tp in unassigned:
        if not eligible[tp]:
            continue
        m = min(eligible[tp], key=lambda x: (loads[x], x))
        out[m].setdefault(tp[0], set()).add(tp[1])
        loads[m] += 1
    _even_out(out, loads, eligible)
    return out


def _even_out(out: Target, loads: dict[str, int], eligible: dict[tuple[str, int], list[str]]) -> None:
    """Move partitions from the most to the least loaded member until they differ by at most one."""
    while loads:
        hi = max(loads, key=lambda m: (loads[m], m))
        lo = min(loads, key=lambda m: (loads[m], m))
        if loads[hi] - loads[lo] <= 1:
            return
        movable = sorted((t, p) for t, ps in out[hi].items() for p in ps if lo in eligible.get((t, p), ()))
        if not movable:
            return
        t, p = movable[-1]
        out[hi][t].discard(p)
        out[lo].setdefault(t, set()).add(p)
        loads[hi] -= 1
        loads[lo] += 1


def range_(subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int], current: Target) -> Target:
    """Per topic, contiguous ranges of partitions to its subscribers in member order (Kafka's RangeAssignor:
    the first ``n % members`` members get one partition more)."""
    out: Target = {m: {} for m in subscriptions}
    for t in sorted({t for s in subscriptions.values() for t in s}):
        if t not in partitions:
            continue
        members = sorted(m for m, s in subscriptions.items() if t in s)
        n = partitions[t]
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            count = per + (1 if i < extra else 0)
            if count:
                out[m][t] = set(range(start, start + count))
            start += count
    return out


#: name -> assignor; the first is the default (Kafka's group.consumer.assignors)
ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"
