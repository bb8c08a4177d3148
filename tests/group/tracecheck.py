"""A small pure-Python version of the docs/interfaces.md §5 checks, for fast tests
of the group layer (the PySpark pipeline is the reference; this mirrors its
definitions in docs/pipeline.md).

Usage as a script: ``python tests/group/tracecheck.py TRACE_DIR`` prints the counts.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def load(trace_dir: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(trace_dir.rglob("*.jsonl")):
        with path.open() as f:
            for pos, line in enumerate(f):
                row = json.loads(line)
                row["pos"] = pos
                rows.append(row)
    return rows


def check(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    sends: dict[tuple[str, str], dict[str, Any]] = {}
    delivered: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    order_at: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    membership: dict[tuple[str, str], list[tuple[str, float]]] = defaultdict(list)
    life: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r["node"], r["t"], r["pos"])):
        ev = r["event"]
        if ev == "send":
            sends[(r["group"], r["mid"])] = r
        elif ev == "deliver":
            delivered[(r["node"], r["group"], r["mid"])].append(r["t"])
            order_at[(r["node"], r["group"])].append(r)
        elif ev == "skip" and r.get("mid"):
            # Given up (gone everywhere, docs/group.md section 8): not a delivery, but
            # its place in the order (its replies and successors may follow it).
            order_at[(r["node"], r["group"])].append(r)
        elif ev in ("join", "leave"):
            membership[(r["node"], r["group"])].append((ev, r["t"]))
        elif ev in ("crash", "restart"):
            life[r["node"]].append((ev, r["t"]))
    gone = {n: evs[-1][1] for n, evs in life.items() if evs and evs[-1][0] == "crash"}
    out: dict[str, list[str]] = {k: [] for k in
                                 ("unexpected", "duplicated", "lost", "sb_order", "causal_order",
                                  "total_order")}
    for (node, group, mid), ts in delivered.items():
        if (group, mid) not in sends:
            out["unexpected"].append(f"{node} {group} {mid}")
        if len(ts) > 1:
            out["duplicated"].append(f"{node} {group} {mid} x{len(ts)}")
    intervals: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for key, evs in membership.items():
        ivs: list[tuple[float, float]] = []
        start: float | None = None
        for ev, t in evs:
            if ev == "join" and start is None:
                start = t
            elif ev == "leave" and start is not None:
                ivs.append((start, t))
                start = None
        if start is not None:
            ivs.append((start, float("inf")))
        intervals[key] = ivs
    first_elsewhere: dict[tuple[str, str], float] = {}
    for (node, group, mid), ts in delivered.items():
        s = sends.get((group, mid))
        if s is not None and node != s["node"]:
            k = (group, mid)
            first_elsewhere[k] = min(first_elsewhere.get(k, float("inf")), min(ts))
    for (group, mid), s in sends.items():
        sender = s["node"]
        if sender in gone and first_elsewhere.get((group, mid), float("inf")) > gone[sender]:
            continue
        for (node, g), ivs in intervals.items():
            if g != group or node in gone:
                continue
            if any(a <= s["t"] <= b for a, b in ivs) and (node, group, mid) not in delivered:
                out["lost"].append(f"{node} {group} {mid} sent {s['t']:.3f} by {sender}")
    for (node, group), evs in order_at.items():
        position = {r["mid"]: i for i, r in enumerate(evs)}
        for i, r in enumerate(evs):
            if r["event"] != "deliver":
                continue
            parent = r.get("parent") or ""
            if parent and parent in position and position[parent] > i:
                out["sb_order"].append(f"{node} {group} {r['mid']} before parent {parent}")
            if parent and parent not in position and (group, parent) in sends:
                out["sb_order"].append(f"{node} {group} {r['mid']} without parent {parent}")
            if r.get("order") == "causal" and r.get("detail"):
                vc = json.loads(r["detail"]).get("vclock", {})
                for k, v in vc.items():
                    if k == r["mid"].rpartition(":")[0]:
                        continue
                    for seq in range(1, v + 1):
                        dep = f"{k}:{seq}"
                        if position.get(dep, 1 << 60) > i:
                            out["causal_order"].append(f"{node} {group} {r['mid']} before {dep}")
                            break
    totals: dict[str, list[list[str]]] = defaultdict(list)
    for (node, group), evs in order_at.items():
        evs = [r for r in evs if r["event"] == "deliver"]
        if evs and evs[0].get("order") == "total":
            seq = [r["mid"] for r in sorted(evs, key=lambda r: r["gseq"] or 0)]
            if seq != [r["mid"] for r in evs]:
                out["total_order"].append(f"{node} {group} not in gseq order")
            totals[group].append([f"{r['gseq']}={r['mid']}" for r in evs])
    for group, lists in totals.items():
        assignments: dict[str, str] = {}
        for lst in lists:
            for item in lst:
                g, _, mid = item.partition("=")
                if assignments.setdefault(g, mid) != mid:
                    out["total_order"].append(f"{group} gseq {g} is two messages")
    return out


if __name__ == "__main__":
    result = check(load(Path(sys.argv[1])))
    print(json.dumps({k: len(v) for k, v in result.items()}))
    for k, v in result.items():
        for line in v[:5]:
            print(k, line)
