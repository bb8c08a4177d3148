"""A Spark-free check of an infrastructure-mode trace directory (docs/interfaces.md §5:
unexpected, duplicated, lost, total_order), for tests and the evidence script."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Verdict:
    sent: int = 0
    deliveries: int = 0
    members: int = 0
    problems: list[str] = field(default_factory=list)
    elect: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def load(trace_dir: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted(trace_dir.rglob("*.jsonl")):
        with f.open() as fh:
            for pos, line in enumerate(fh):
                row = json.loads(line)
                row["_pos"] = pos
                rows.append(row)
    rows.sort(key=lambda r: (r["node"], r["t"], r["_pos"]))
    return rows


def verify(trace_dir: Path) -> Verdict:
    rows = load(trace_dir)
    v = Verdict()
    sends: dict[str, tuple[str, float]] = {}
    delivered: dict[str, list[tuple[int, str]]] = defaultdict(list)
    intervals: dict[str, list[list[float]]] = defaultdict(list)
    crashed_for_good: dict[str, float] = {}
    for r in rows:
        ev, node = r["event"], r["node"]
        if ev == "send":
            sends[r["mid"]] = (node, r["t"])
        elif ev == "deliver":
            delivered[node].append((r["gseq"], r["mid"]))
        elif ev == "join":
            if not intervals[node] or intervals[node][-1][1] != float("inf"):
                intervals[node].append([r["t"], float("inf")])
        elif ev == "leave":
            if intervals[node] and intervals[node][-1][1] == float("inf"):
                intervals[node][-1][1] = r["t"]
        elif ev == "crash":
            crashed_for_good[node] = r["t"]
        elif ev == "restart":
            crashed_for_good.pop(node, None)
        elif ev == "elect":
            v.elect.append({"node": node, "t": r["t"], **json.loads(r["detail"])})
    v.sent = len(sends)
    v.members = len(intervals)
    owner: dict[int, str] = {}
    for node, seq in delivered.items():
        last = 0
        seen: set[str] = set()
        for gseq, mid in seq:
            v.deliveries += 1
            if mid not in sends:
                v.problems.append(f"unexpected: {node} delivered {mid}")
            if mid in seen:
                v.problems.append(f"duplicated: {node} delivered {mid} twice")
            seen.add(mid)
            if gseq is None or gseq <= last:
                v.problems.append(f"total_order: {node} delivered gseq {gseq} after {last}")
            last = gseq or last
            if owner.setdefault(gseq, mid) != mid:
                v.problems.append(f"total_order: gseq {gseq} is {owner[gseq]} and {mid}")
    got = {node: {mid for _, mid in seq} for node, seq in delivered.items()}
    for mid, (_sender, t_send) in sends.items():
        for node, spans in intervals.items():
            if node in crashed_for_good and crashed_for_good[node] <= t_send:
                continue
            if any(a <= t_send <= b for a, b in spans) and mid not in got.get(node, set()):
                v.problems.append(f"lost: {node} never delivered {mid} (sent {t_send:.3f})")
    return v
