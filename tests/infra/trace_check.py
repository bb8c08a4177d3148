"""A Spark-free check of an infrastructure-mode trace directory (docs/interfaces.md §5:
unexpected, duplicated, lost, total_order), for tests and the evidence script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
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
    sends: dict[str, tuple[str, float, str]] = {}
    delivered: dict[str, list[tuple[int, str]]] = defaultdict(list)
    # (node, group) -> membership spans: several groups in one deployment
    intervals: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    crashed_for_good: dict[str, float] = {}
    for r in rows:
        ev, node = r["event"], r["node"]
        key = (node, r.get("group") or "")
        if ev == "send":
            sends[r["mid"]] = (node, r["t"], r.get("group") or "")
        elif ev == "deliver":
            delivered[node].append((r["gseq"], r["mid"]))
        elif ev == "join":
            if not intervals[key] or intervals[key][-1][1] != float("inf"):
                intervals[key].append([r["t"], float("inf")])
        elif ev == "leave":
            if intervals[key] and intervals[key][-1][1] == float("inf"):
                intervals[key][-1][1] = r["t"]
        elif ev == "crash":
            crashed_for_good[node] = r["t"]
        elif ev == "restart":
            crashed_for_good.pop(node, None)
        elif ev == "elect":
            v.elect.append({"node": node, "t": r["t"], **json.loads(r["detail"])})
    v.sent = len(sends)
    v.members = len({node for node, _ in intervals})
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
    for mid, (_sender, t_send, group) in sends.items():
        for (node, in_group), spans in intervals.items():
            if in_group != group or (node in crashed_for_good
                                     and crashed_for_good[node] <= t_send):
                continue
            if any(a <= t_send <= b for a, b in spans) and mid not in got.get(node, set()):
                v.problems.append(f"lost: {node} never delivered {mid} (sent {t_send:.3f})")
    return v


def analyze_runs_valid(dirs: Sequence[Path], tmp_path: Path, timeout: float) -> None:
    """``m2mc analyze`` (the Spark pipeline) over the run directories ``dirs`` at once,
    as a user types it (``--verify-only``: the verdict is all a test reads): it must
    exit 0 and say VALID, counting every run, with no violation in any of them."""
    out = tmp_path / "analysis"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "m2mc.cli", "analyze", *map(str, dirs),
                           "--out", str(out), "--quiet", "--verify-only",
                           "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=2"],
                          capture_output=True, text=True, env=env, timeout=timeout, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((out / "verify.json").read_text())
    assert report["valid"] is True, report
    assert report["counts"]["runs"] == len(dirs), report
    assert all(c["violations"] == 0 for c in report["checks"].values()), report
