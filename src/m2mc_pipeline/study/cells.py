"""The study's cells: a sweep's deliveries grouped by ordering and grid point, and tables.

``m2mc sweep docs/study/study.toml --out OUT`` runs the grid and the pipeline writes
``OUT/tables/deliveries.parquet`` (one row per first delivery, with its delivery delay
and latency: docs/pipeline.md) and ``OUT/metrics.json`` (each run's sweep parameters).
This module reads those two (and ``sweep.json``, ``verify.json``), groups the
deliveries into *cells*, one per ordering and point of the grid, seeds pooled, and
writes the study's page: ``README.md``, the plots (PNG) and the tables (CSV).

A cell's quantiles are nearest-rank over every delivery of its runs (the pipeline's
definition, computed exactly here); ``held`` is the share of deliveries that waited
in the ordering layer at all (delay > 0). Nothing here runs Spark: the deliveries
are read from Parquet with pyarrow, a few columns at a time.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

# The study's parameters: the sweep's dotted paths, and what the page calls them.
ORDER = "groups.0.order"
SIZE = "nodes.count"
LOSS = "domains.lan.loss"
REPLY = "groups.0.reply"
MOBILE = "nodes.mobile"
FACTORS = (SIZE, LOSS, REPLY, MOBILE)
LABELS = {SIZE: "group size", LOSS: "loss", REPLY: "reply rate", MOBILE: "mobile share"}
ORDERS = ("sb", "causal", "total")
NAMES = {"sb": "S_b", "causal": "causal", "total": "total"}
# The point the one-factor figures hold the other factors at.
BASE = {LOSS: 0.1, REPLY: 0.6, MOBILE: 0.0}

Floats = npt.NDArray[np.float64]
Key = tuple[float, ...]  # the factors' values, in FACTORS order


@dataclass(slots=True)
class Cell:
    """One ordering at one point of the grid, its seeds pooled."""

    order: str
    point: Key
    runs: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    failed: int = 0
    delays: list[Floats] = field(default_factory=list)
    latencies: list[Floats] = field(default_factory=list)
    run_means: list[float] = field(default_factory=list)

    def value(self, factor: str) -> float:
        return self.point[FACTORS.index(factor)]

    def summary(self) -> dict[str, Any]:
        delay = _concat(self.delays)
        latency = _concat(self.latencies)
        out: dict[str, Any] = {"order": self.order}
        out.update({LABELS[f]: self.value(f) for f in FACTORS})
        out.update({"runs": len(self.runs), "failed": self.failed,
                    "seeds": " ".join(str(s) for s in sorted(self.seeds)),
                    "deliveries": int(delay.size),
                    "held": _ratio(int(np.count_nonzero(delay > 0)), int(delay.size))})
        out.update({f"delay_{k}": v for k, v in _stats(delay).items()})
        out.update({f"latency_{k}": v for k, v in _stats(latency).items()
                    if k in ("mean", "p50", "p99")})
        means = [m for m in self.run_means if not math.isnan(m)]
        out["run_mean_min"] = min(means) if means else None
        out["run_mean_max"] = max(means) if means else None
        return out


@dataclass(slots=True)
class Study:
    cells: dict[tuple[str, Key], dict[str, Any]]
    runs: list[dict[str, Any]]
    valid: bool
    violations: dict[str, int]
    tasks: int
    failed: int
    planned: int
    events: int
    sim_seconds: float

    def rows(self) -> list[dict[str, Any]]:
        return [self.cells[k] for k in sorted(self.cells, key=_cell_sort)]



def _cell_sort(key: tuple[str, Key]) -> tuple[Any, ...]:
    order, point = key
    return (*point, ORDERS.index(order) if order in ORDERS else len(ORDERS), order)


def _concat(parts: Sequence[Floats]) -> Floats:
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0)


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 6) if b else None


def nearest_rank(sorted_values: Floats, q: float) -> float | None:
    """The q-quantile of sorted values: the ceil(q*n)-th smallest (docs/pipeline.md)."""
    n = int(sorted_values.size)
    if n == 0:
        return None
    return float(sorted_values[max(0, math.ceil(q * n) - 1)])


def _stats(sorted_values: Floats) -> dict[str, float | None]:
    if sorted_values.size == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    return {"mean": float(sorted_values.mean()), "p50": nearest_rank(sorted_values, 0.5),
            "p90": nearest_rank(sorted_values, 0.9), "p99": nearest_rank(sorted_values, 0.99),
            "max": float(sorted_values[-1])}


def _point(params: Mapping[str, Any], defaults: Mapping[str, float]) -> Key:
    return tuple(float(params.get(f, defaults[f])) for f in FACTORS)


def scenario_defaults(scenario: Mapping[str, Any]) -> dict[str, float]:
    """The factors' values in the scenario file, for parameters a grid does not set."""
    group = (scenario.get("groups") or [{}])[0]
    return {SIZE: float(scenario.get("nodes", {}).get("count", 0)),
            LOSS: float(scenario.get("domains", {}).get("lan", {}).get("loss", 0.0)),
            REPLY: float(group.get("reply", 0.6)),
            MOBILE: float(scenario.get("nodes", {}).get("mobile", 0.0))}


def _deliveries(out: Path) -> tuple[list[str], npt.NDArray[np.int64], Floats, Floats]:
    """(run names, run index per delivery, delay, latency); nulls are NaN."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(out / "tables" / "deliveries.parquet",
                          columns=["run", "delay", "latency"])
    runs = pc.dictionary_encode(table.column("run")).combine_chunks()
    names = [str(x) for x in runs.dictionary.to_pylist()]
    index = np.asarray(runs.indices.to_numpy(zero_copy_only=False), dtype=np.int64)

    def floats(name: str) -> Floats:
        col = pc.fill_null(table.column(name).cast("double"), math.nan)
        return np.asarray(col.to_numpy(), dtype=np.float64)

    return names, index, floats("delay"), floats("latency")


def load(out: str | Path, scenario: Mapping[str, Any]) -> Study:
    """The study's cells from a sweep's output directory ``out``."""
    out = Path(out)
    sweep_doc = json.loads((out / "sweep.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    verify = json.loads((out / "verify.json").read_text())
    defaults = scenario_defaults(scenario)
    cells: dict[tuple[str, Key], Cell] = {}

    def cell(params: Mapping[str, Any]) -> Cell:
        order = str(params.get(ORDER, (scenario.get("groups") or [{}])[0].get("order", "sb")))
        point = _point(params, defaults)
        return cells.setdefault((order, point), Cell(order, point))

    for o in sweep_doc["outcomes"]:
        if not o["ok"]:
            cell(o["params"]).failed += 1
    task_seconds = {o["task"]: o["seconds"] for o in sweep_doc["outcomes"]}
    names, index, delay, latency = _deliveries(out)
    by_run = {r["run"]: r for r in metrics["runs"]}
    order_idx = np.argsort(index, kind="stable")
    bounds = np.searchsorted(index[order_idx], np.arange(len(names) + 1))
    runs: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        meta = by_run.get(name)
        if meta is None or meta.get("params") is None:
            continue
        rows = order_idx[bounds[i]:bounds[i + 1]]
        d, lat = delay[rows], latency[rows]
        # sorted: a float sum depends on its order, and the rows' order on how Spark
        # partitioned the sweep; a run's mean must not (a cluster's equals a local one's)
        d, lat = np.sort(d[~np.isnan(d)]), np.sort(lat[~np.isnan(lat)])
        c = cell(meta["params"])
        c.runs.append(name)
        c.seeds.append(int(meta["seed"]))
        c.delays.append(d)
        c.latencies.append(lat)
        mean = float(d.mean()) if d.size else math.nan
        c.run_means.append(mean)
        task = name.rsplit("-", 2)[-2] if name.count("-") >= 2 else name  # <id>-<task>-<seed>
        runs.append({"run": name, "seed": meta["seed"], "order": c.order,
                     **{LABELS[f]: c.value(f) for f in FACTORS},
                     "events": meta["events"], "deliveries": int(d.size),
                     "delay_mean": None if math.isnan(mean) else round(mean, 6),
                     "sim_seconds": task_seconds.get(task)})
    runs.sort(key=lambda r: r["run"])
    checks = verify["checks"]
    return Study(cells={k: c.summary() for k, c in cells.items()}, runs=runs,
                 valid=bool(verify["valid"]),
                 violations={k: int(v["violations"]) for k, v in checks.items()},
                 tasks=int(sweep_doc["tasks"]), failed=int(sweep_doc["failed"]),
                 planned=int(sweep_doc.get("planned", sweep_doc["tasks"])),
                 events=int(verify["counts"]["events"]),
                 sim_seconds=float(sum(o["seconds"] for o in sweep_doc["outcomes"])))


# ------------------------------------------------------------------ tables


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    if not rows:
        path.write_text("")
        return
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: _csv_value(v) for k, v in r.items()})
    path.write_text(buf.getvalue())


def _csv_value(v: Any) -> Any:
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else v


def ms(value: float | None, digits: int = 1) -> str:
    """Seconds as milliseconds for the page; ``-`` for no value."""
    if value is None:
        return "-"
    return f"{value * 1000:.{digits}f}"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _fmt(factor: str, value: float) -> str:
    if factor == SIZE:
        return str(int(value))
    return f"{value:g}"


def slice_rows(study: Study, vary: str, fixed: Mapping[str, float]) -> list[dict[str, Any]]:
    """The cells where ``vary`` varies and every factor in ``fixed`` has its value."""
    out = []
    for row in study.rows():
        if all(row[LABELS[f]] == v for f, v in fixed.items() if f != vary):
            out.append(row)
    return out


def slice_table(study: Study, vary: str, fixed: Mapping[str, float]) -> str:
    """One line per value of ``vary``: runs, mean and p99 delay, share held, per order."""
    rows = slice_rows(study, vary, fixed)
    values = sorted({r[LABELS[vary]] for r in rows})
    header = [LABELS[vary], "runs (S_b/causal/total)"]
    for o in ORDERS:
        header += [f"{NAMES[o]} mean", f"{NAMES[o]} p99", f"{NAMES[o]} held"]
    header += ["causal / S_b", "total / S_b"]
    lines = []
    for v in values:
        by = {r["order"]: r for r in rows if r[LABELS[vary]] == v}
        line: list[Any] = [_fmt(vary, v),
                           "/".join(str(by[o]["runs"]) if o in by else "0" for o in ORDERS)]
        for o in ORDERS:
            r = by.get(o)
            line += [ms(r["delay_mean"], 2) if r else "-", ms(r["delay_p99"]) if r else "-",
                     f"{r['held']:.1%}" if r and r["held"] is not None else "-"]
        line += [ratio_text(by.get("causal"), by.get("sb")),
                 ratio_text(by.get("total"), by.get("sb"))]
        lines.append(line)
    return markdown_table(header, lines)


def ratio_text(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> str:
    if a is None or b is None or a["delay_mean"] is None or b["delay_mean"] is None:
        return "-"
    if b["delay_mean"] == 0:
        return "S_b 0" if a["delay_mean"] > 0 else "both 0"
    return f"{a['delay_mean'] / b['delay_mean']:.1f}x"
