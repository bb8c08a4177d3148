"""The study's cells do not depend on the order of the deliveries' rows.

The pipeline writes ``tables/deliveries.parquet`` from Spark, and the rows' order
follows how Spark partitioned the sweep: a standalone cluster's differs from
``local[2]``'s. A float sum depends on the order of its terms, so a run's mean delay
summed in row order came out different in the last bit on a cluster (CI, stop 53).
No Spark here: the sweep's output is written by hand, its rows shuffled.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from m2mc_pipeline.study.cells import load

SCENARIO: dict[str, Any] = {"nodes": {"count": 10, "mobile": 0.0},
                            "domains": {"lan": {"loss": 0.1}},
                            "groups": [{"order": "sb", "reply": 0.6}]}
RUNS = {"s1-t0-1": {"groups.0.order": "total"}, "s1-t1-1": {"groups.0.order": "sb"}}


def _rows(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for run in RUNS:
        for _ in range(500):
            # delays of many magnitudes: their sum rounds differently in another order
            delay = rng.lognormvariate(-4, 2.5) if rng.random() < 0.6 else 0.0
            rows.append({"run": run, "delay": delay, "latency": delay + rng.random() / 7})
        rows.append({"run": run, "delay": None, "latency": None})  # a null is NaN
    return rows


def _write_sweep(out: Path, rows: list[dict[str, Any]]) -> Path:
    (out / "tables").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), out / "tables" / "deliveries.parquet")
    outcomes = [{"ok": True, "params": p, "task": run.split("-")[1], "seconds": 1.5}
                for run, p in RUNS.items()]
    (out / "sweep.json").write_text(json.dumps({"outcomes": outcomes, "tasks": 2,
                                                "failed": 0}))
    (out / "metrics.json").write_text(json.dumps({"runs": [
        {"run": run, "params": p, "seed": 1, "events": 2_000} for run, p in RUNS.items()]}))
    (out / "verify.json").write_text(json.dumps({
        "valid": True, "checks": {"sb": {"violations": 0}}, "counts": {"events": 4_000}}))
    return out


def test_a_cell_and_its_runs_come_out_the_same_whatever_the_rows_order(
        tmp_path: Path) -> None:
    rows = _rows(7)
    first = load(_write_sweep(tmp_path / "as-written", rows), SCENARIO)
    for shuffle in range(8):
        random.Random(shuffle).shuffle(rows)
        again = load(_write_sweep(tmp_path / f"shuffled-{shuffle}", rows), SCENARIO)
        assert again.cells == first.cells
        assert again.runs == first.runs


def test_a_runs_mean_is_its_deliveries_mean_without_the_nulls(tmp_path: Path) -> None:
    rows = _rows(3)
    study = load(_write_sweep(tmp_path / "out", rows), SCENARIO)
    for run, params in RUNS.items():
        delays = [r["delay"] for r in rows if r["run"] == run and r["delay"] is not None]
        cell = next(c for (order, _), c in study.cells.items()
                    if order == params["groups.0.order"])
        assert cell["deliveries"] == len(delays) == 500
        assert math.isclose(cell["run_mean_max"], sum(delays) / len(delays), rel_tol=1e-12)
        assert cell["run_mean_min"] == cell["run_mean_max"]  # one run per cell
