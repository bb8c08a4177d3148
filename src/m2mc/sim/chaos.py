"""Chaos: fault timelines drawn from the run's seed (Jepsen's nemesis, TigerBeetle's VOPR).

A scenario's ``[[chaos]]`` entries say which faults may strike which nodes, how often
and for how long; each run draws a concrete timeline from its seed and writes it into
the scenario as ordinary ``[[faults.crash]]`` and ``[[faults.partition]]`` entries (a
sleep becomes ``waypoints`` mobility that leaves every cell and comes back), which are
then checked and run like any other. So every seed strikes at other moments, other
nodes, in other patterns, and one seed always gives the same run.

Each entry is its own timeline with its own random stream (``chaos:<index>``): its
episodes follow one another (the next starts ``every`` after the last one ended),
while episodes of different entries may overlap. Down intervals of one node drawn by
several entries are merged, so the timeline written is exactly what happens.

Reference: docs/simulator.md, "[[chaos]]".
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from m2mc.kinds import PartitionKind
from m2mc.sim.schema import Table, number_or_range

FAULTS = ("crash", "partition", "sleep")
PATTERNS = ("one", "some", "all", "rolling")  # who a crash (or sleep) episode strikes
_DEFAULT_PATTERN = {"one": 1.0}


@dataclass(frozen=True, slots=True)
class ChaosSpec:
    """One ``[[chaos]]`` entry (times in seconds of virtual time)."""

    fault: str  # crash | partition | sleep
    nodes: tuple[str, ...]
    start: float  # no episode starts before
    until: float  # ... nor at or after
    every: tuple[float, float]  # pause before each episode (after the previous one ended)
    length: tuple[float, float]  # down time of a node / length of a partition or sleep
    gap: tuple[float, float]  # rolling: from one node's restart to the next one's crash
    pattern: tuple[tuple[str, float], ...]  # (pattern, weight), weights > 0
    domains: tuple[str, ...]  # partition: the domains it cuts (empty: every domain)
    one_way: float = 0.0  # partition: share that drop only what the cut-off side sends


def parse_chaos(top: Table, may_sleep: Mapping[str, bool], domains: set[str],
                chaos: float) -> tuple[ChaosSpec, ...]:
    """The ``[[chaos]]`` entries of the scenario table ``top``, checked. ``may_sleep``
    holds every node's id and whether a sleep can strike it, which the scenario decides
    from the node's interfaces and mobility (scenario imports this module, so this one
    takes plain names rather than its NodeSpec: no import cycle)."""
    specs = []
    for t in top.tables("chaos"):
        fault = t.string("fault", choices=FAULTS)
        names = tuple(t.string_list("nodes"))
        if not names:
            raise t.fail("nodes", "must name at least one node")
        for n in names:
            if n not in may_sleep:
                raise t.fail("nodes", f"no node {n!r}")
            if fault == "sleep" and not may_sleep[n]:
                raise t.fail("nodes", f"node {n!r} cannot sleep: a sleep needs an interface "
                                      "on \"@cells\" and static mobility")
        start = t.number("from", 0.0, low=0.0)
        until = t.number("until", chaos, above=start)
        if until > chaos:
            raise t.fail("until", f"must be inside the chaos phase (<= {chaos})")
        every = _range(t, "every", None, low=0.0)
        if every[1] <= 0:
            raise t.fail("every", "episodes would never end: high must be > 0")
        length = _range(t, "length", None, low=0.001)
        gap = _range(t, "gap", [0.0, 2.0], low=0.0) if fault == "crash" else (0.0, 0.0)
        pattern: tuple[tuple[str, float], ...] = ()
        if fault != "partition":
            weights = t.raw("pattern", _DEFAULT_PATTERN)
            p = Table(weights, t.key("pattern"))
            allowed = PATTERNS if fault == "crash" else PATTERNS[:3]
            pattern = tuple((name, p.number(name, low=0.0)) for name in allowed if p.has(name))
            p.expect(*allowed)
            p.finish()
            if sum(w for _, w in pattern) <= 0:
                raise t.fail("pattern", "needs a weight > 0")
        doms: tuple[str, ...] = ()
        one_way = 0.0
        if fault == "partition":
            doms = tuple(t.string_list("domains", []))
            for d in doms:
                if d not in domains:
                    raise t.fail("domains", f"no domain {d!r}")
            one_way = t.probability("one_way", 0.0)
        t.finish()
        specs.append(ChaosSpec(fault, names, start, until, every, length, gap, pattern, doms,
                               one_way))
    return tuple(specs)


def _range(t: Table, name: str, default: Any, *, low: float) -> tuple[float, float]:
    value = t.raw(name, default)
    if value is None:
        raise t.fail(name, "missing (required): a number or [low, high]")
    lo, hi = number_or_range(value, t.key(name))
    if lo < low:
        raise t.fail(name, f"must be >= {low}, got {lo}")
    return lo, hi


# ------------------------------------------------------------------ drawing
def _t(x: float) -> float:
    return round(x, 3)


def _who(spec: ChaosSpec, rng: random.Random) -> tuple[str, list[str]]:
    names, weights = zip(*spec.pattern, strict=True)
    pattern = rng.choices(names, weights)[0]
    nodes = list(spec.nodes)
    if pattern == "one":
        return pattern, [rng.choice(nodes)]
    if pattern == "some":  # at least two, not all (unless there are too few)
        k = rng.randint(min(2, len(nodes)), max(min(2, len(nodes)), len(nodes) - 1))
        chosen = set(rng.sample(nodes, k))
        return pattern, [n for n in nodes if n in chosen]
    if pattern == "rolling":
        rng.shuffle(nodes)
    return pattern, nodes


def draw_episodes(spec: ChaosSpec, rng: random.Random, chaos: float
                  ) -> list[dict[str, Any]]:
    """One entry's timeline: episodes with their ``at``, ``end``, ``nodes`` and, per
    struck node, ``[down, up]`` intervals (``up`` may pass the chaos phase: the node
    comes back when the heal phase starts)."""
    episodes: list[dict[str, Any]] = []
    t = spec.start
    while True:
        t = _t(t + rng.uniform(*spec.every))
        if t >= spec.until:
            return episodes
        if spec.fault == "partition":
            k = rng.randint(1, max(1, len(spec.nodes) - 1))
            chosen = set(rng.sample(spec.nodes, k))
            side = [n for n in spec.nodes if n in chosen]
            end = max(_t(t + rng.uniform(*spec.length)), t + 0.001)
            kind = (PartitionKind.ONE_WAY if spec.one_way and rng.random() < spec.one_way
                    else PartitionKind.SYMMETRIC)
            episodes.append({"fault": "partition", "kind": kind, "at": t, "end": end,
                             "nodes": side, "domains": list(spec.domains)})
            t = end
            continue
        pattern, nodes = _who(spec, rng)
        spans: list[list[Any]] = []
        at = t
        for n in nodes:
            up = max(_t(at + rng.uniform(*spec.length)), _t(at + 0.001))
            spans.append([n, at, up])
            if pattern == "rolling":
                at = _t(up + rng.uniform(*spec.gap))
                if at >= chaos:
                    break
        end = max(up for _, _, up in spans)
        episodes.append({"fault": spec.fault, "pattern": pattern, "at": t, "end": end,
                         "nodes": [n for n, _, _ in spans], "spans": spans})
        t = end


def _merge(spans: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def expand_chaos(raw: Mapping[str, Any], specs: Sequence[ChaosSpec], seed_streams: Any,
                 chaos: float, positions: Mapping[str, tuple[float, float]],
                 away: tuple[float, float]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the scenario with every drawn fault written in, the episodes in time order).

    ``seed_streams.get(name)`` gives the run's named random streams; ``positions``
    the start position of every node (in scenario order; a sleep starts from it);
    ``away`` a point no cell covers."""
    node_ids = list(positions)
    out = copy.deepcopy(dict(raw))
    del out["chaos"]  # drawn: what is left is a plain scenario that runs the same faults
    episodes: list[dict[str, Any]] = []
    down: dict[str, list[tuple[float, float]]] = {}
    asleep: dict[str, list[tuple[float, float]]] = {}
    partitions: list[dict[str, Any]] = []
    for index, spec in enumerate(specs):
        for ep in draw_episodes(spec, seed_streams.get(f"chaos:{index}"), chaos):
            episodes.append({"entry": index, **ep})
            if ep["fault"] == "partition":
                cut: dict[str, Any] = {"kind": ep["kind"], "at": ep["at"]}
                if ep["kind"] == PartitionKind.SYMMETRIC:
                    cut["sides"] = [ep["nodes"]]
                else:  # what the cut-off side sends is lost; it still hears the others
                    cut["from"] = ep["nodes"]
                    cut["to"] = [n for n in node_ids if n not in ep["nodes"]]
                if ep["end"] < chaos:
                    cut["until"] = ep["end"]
                if ep["domains"]:
                    cut["domains"] = ep["domains"]
                partitions.append(cut)
                continue
            book = down if ep["fault"] == "crash" else asleep
            for n, a, b in ep["spans"]:
                if a < chaos:
                    book.setdefault(n, []).append((a, b))
    faults = out.setdefault("faults", {})
    crashes = faults.setdefault("crash", [])
    for n in sorted(down):
        for a, b in _merge(down[n]):
            crashes.append({"node": n, "at": a, "restart": b})
    faults.setdefault("partition", []).extend(partitions)
    if asleep:
        _write_sleeps(out, asleep, positions, away)
    episodes.sort(key=lambda e: (e["at"], e["entry"]))
    for ep in episodes:
        ep.pop("spans", None)
    return out, episodes


def _write_sleeps(out: dict[str, Any], asleep: Mapping[str, list[tuple[float, float]]],
                  positions: Mapping[str, tuple[float, float]],
                  away: tuple[float, float]) -> None:
    """Each sleeper's mobility becomes waypoints: home, away for each sleep, home."""
    tables = out.setdefault("node", [])
    by_id = {t.get("id"): t for t in tables if isinstance(t, dict)}
    for n in sorted(asleep):
        x, y = positions[n]
        points: list[list[float]] = [[0.0, x, y]]
        for a, b in _merge(asleep[n]):
            points += [[a, x, y], [a, *away], [b, *away], [b, x, y]]
        table = by_id.get(n)
        if table is None:
            table = {"id": n}
            tables.append(table)
        table["mobility"] = {"model": "waypoints", "points": points}
        if "position" not in table:
            table["position"] = [x, y]

