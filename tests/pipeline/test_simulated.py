"""Clean simulator traces through Spark: the group layer under each ordering (S_b,
causal, FIFO, total) and infrastructure mode, on a lossy network with a crash and a
restart, must pass every check of docs/interfaces.md §5, and the repair, catch-up and
overhead metrics must have something to say about them.

The simulations are small (four members, 60 messages, 20 s of virtual time, under a
second each); one ``analyze`` covers all five runs.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from m2mc.sim.runner import run_scenario

pytestmark = pytest.mark.spark

ORDERS = ("sb", "causal", "fifo", "total")
LOSSY = {"delay": {"dist": "uniform", "low": 0.001, "high": 0.005}, "loss": 0.15}

GROUP: dict[str, Any] = {
    "name": "sim-check",
    "run": {"chaos": 10.0, "heal": 10.0},
    "stack": {"kind": "group"},
    "trace": {"packets": True},
    "nodes": {"count": 4, "domain": "lan"},
    "domains": {"lan": LOSSY},
    "groups": [{"name": "g", "order": "sb", "members": "all", "rate": 10.0, "messages": 60,
                "reply": 0.5, "size": {"dist": "uniform", "low": 20.0, "high": 100.0}}],
    # n3 misses what is sent while it is down: catch-up after its restart.
    "faults": {"crash": [{"node": "n3", "at": 3.0, "restart": 5.0}]},
}

INFRA: dict[str, Any] = {
    "name": "sim-check-infra",
    "run": {"chaos": 10.0, "heal": 10.0},
    "stack": {"kind": "infra", "hosts": ["h1", "h2"], "join_after": 2.0},
    "domains": {"backbone": {"reliable": True, "fifo": True, "loopback": False,
                             "delay": 0.0005},
                "cell-1": LOSSY, "cell-2": LOSSY},
    "nodes": {"count": 4, "prefix": "m", "iface": "radio", "domain": "cell-1"},
    "node": [{"id": "h1", "ifaces": {"wired": "backbone", "radio": "cell-1"}},
             {"id": "h2", "ifaces": {"wired": "backbone", "radio": "cell-2"}}],
    "groups": [{"name": "infra", "order": "total", "members": ["m0", "m1", "m2", "m3"],
                "rate": 10.0, "messages": 60, "start": 3.0, "reply": 0.0,
                "size": {"dist": "uniform", "low": 16.0, "high": 100.0}}],
}


@pytest.fixture(scope="module")
def analysed(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from m2mc_pipeline.api import analyze

    root = tmp_path_factory.mktemp("simulated")
    dirs: list[Path] = []
    for order in ORDERS:
        scenario = copy.deepcopy(GROUP)
        scenario["groups"][0]["order"] = order
        scenario["run"]["id"] = f"sim-check-{order}"  # run ids must differ
        run_scenario(scenario, 1, root / order)
        dirs.append(root / order)
    run_scenario(INFRA, 1, root / "infra")
    dirs.append(root / "infra")
    return analyze(dirs, root / "out", spark=spark, progress=False)


def _runs(result: Any) -> dict[str, str]:
    """run id -> its ordering ("infra" for infrastructure mode)."""
    out = {}
    for r in result.metrics["runs"]:
        out[r["run"]] = "infra" if r["scenario"] == INFRA["name"] else r["orders"][0]
    return out


def test_every_check_passes_under_every_ordering(analysed: Any) -> None:
    assert analysed.valid, analysed.violations
    assert all(n == 0 for n in analysed.violations.values())
    assert analysed.verify["counts"]["runs"] == 5
    assert sorted(_runs(analysed).values()) == sorted([*ORDERS, "infra"])
    assert analysed.verify["counts"]["malformed"] == 0
    assert analysed.verify["counts"]["sent_twice"] == 0


def test_time_to_repair_is_measured_in_every_run(analysed: Any) -> None:
    rep = analysed.metrics["repair"]
    by_run = {r["run"]: r for r in rep["repair_time_by_run"]}
    for run, order in _runs(analysed).items():
        assert by_run[run]["count"] > 0, order  # 15% loss: every run repairs something
        assert 0 < by_run[run]["max"] < 20.0, order
    assert rep["repair_time"]["count"] == sum(r["count"] for r in by_run.values())
    table = pq.read_table(analysed.out / rep["tables"]["repairs"])
    assert table.num_rows == rep["repair_time"]["count"]
    assert min(table.column("repair").to_pylist()) >= 0
    episodes = pq.read_table(analysed.out / rep["tables"]["catchups"])
    assert episodes.num_rows == rep["catchup_time"]["episodes"]


def test_catch_up_after_the_restart_is_measured(analysed: Any) -> None:
    by_run = {r["run"]: r for r in analysed.metrics["repair"]["catchup_time_by_run"]}
    for run, order in _runs(analysed).items():
        if order == "infra":
            assert run not in by_run  # no catch-up protocol: recovery is by NACK
            continue
        # One episode per member at its join, and n3's after its restart, which has
        # the messages sent while it was down to catch up on.
        assert by_run[run]["episodes"] >= 5, order
        assert by_run[run]["count"] >= 1, order
        assert by_run[run]["max"] > 0, order


def test_requests_suppressions_and_packet_overhead_are_counted(analysed: Any) -> None:
    overhead = {r["run"]: r for r in analysed.metrics["overhead"]["by_run"]}
    runs = _runs(analysed)
    for run, order in runs.items():
        row = overhead[run]
        assert row["requests"] > 0, order
        if order == "infra":
            assert row["packets_traced"] is False and row["msgs_per_op"] is None
            continue
        assert row["packets_traced"] is True, order
        assert row["packets_per_message"] > 1.0, order  # data, status, NACKs, repairs
        assert row["msgs_per_op"] == row["packets_per_message"]
        assert row["bytes_per_message"] > 0, order
    group_runs = [overhead[r] for r, o in runs.items() if o != "infra"]
    assert sum(r["suppressed"] for r in group_runs) > 0
    assert sum(r["sync_resps_suppressed"] or 0 for r in group_runs) > 0


def test_orderings_side_by_side(analysed: Any) -> None:
    side = analysed.metrics["comparison"]["delay_side_by_side"]
    assert set(side[GROUP["name"]]) == set(ORDERS)
    html = (analysed.out / "report.html").read_text()
    assert "Packet figures" in html and "1 of 5 runs" in html  # the infra run


def test_the_quick_path_measures_what_the_plain_path_measures(
        spark: Any, analysed: Any, tmp_path: Path) -> None:
    """These traces are small: ``analyze`` ran the metrics' parts side by side
    (compute(parallel=True)). One after the other, the same metrics.json values and
    the same Parquet tables come out."""
    from m2mc_pipeline import compare
    from m2mc_pipeline.load import load
    from m2mc_pipeline.metrics import compute
    from m2mc_pipeline.tables import build

    root = analysed.out.parent  # the fixture's simulations, in its order
    loaded = load(spark, [root / order for order in ORDERS] + [root / "infra"])
    tb = build(loaded.events)
    runs = compare.runs(tb.node_rows, tb.orders_by_run(), loaded.scopes)
    plain = compute(tb, str(tmp_path / "tables"), compare.run_info(spark, runs))
    tb.release()
    loaded.events.unpersist()
    quick = {k: v for k, v in analysed.metrics.items() if k not in ("runs", "self_delivery")}
    quick["comparison"] = {k: v for k, v in quick["comparison"].items()
                           if k != "repair_vs_loss"}
    assert plain.summary == quick
    for name in ("deliveries", "delay_latency_stats", "osms_occupancy", "repairs",
                 "catchups", "throughput", "overhead"):
        def rows(root: Path, table: str = name) -> list[str]:
            return sorted(map(repr, pq.read_table(root / f"{table}.parquet").to_pylist()))
        assert rows(tmp_path / "tables") == rows(analysed.out / "tables"), name
