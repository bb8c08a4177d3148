"""Runs and their metadata (run.json), which the comparison of orderings keys on.

The same scenario run under S_b, causal and total order (a sweep over
``ordering``, or several ``m2mc sim`` runs) is compared on its delivery-delay
and latency distributions, one row per (scenario, order): metrics/stats.py
computes them; this module says which run belongs to which scenario and loss.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from m2mc_pipeline.load import Scope
from m2mc_pipeline.session import small_frame

_RUN_INFO = StructType([
    StructField("run", StringType()), StructField("scenario", StringType()),
    StructField("variant", StringType()),
    StructField("seed", LongType()), StructField("loss", DoubleType()),
])
_ORDER_PARAMS = ("order", "ordering")


def variant(scenario: str | None, params: Mapping[str, Any] | None) -> str:
    """What runs compared side by side share: the scenario and the parameters a sweep
    set, other than the ordering (``groups.0.order``, ``ordering``). Seeds are
    replicates and are pooled. ``"demo-compare [domains.lan.loss=0.2]"``."""
    name = scenario or "(all runs)"
    fixed = sorted((k, v) for k, v in (params or {}).items()
                   if str(k).rsplit(".", 1)[-1] not in _ORDER_PARAMS)
    if not fixed:
        return name
    return f"{name} [{', '.join(f'{k}={v}' for k, v in fixed)}]"


def find_key(meta: Any, key: str, depth: int = 0) -> Any:
    """The first value of ``key`` anywhere in a nested run.json (breadth first)."""
    if not isinstance(meta, dict) or depth > 4:
        return None
    if key in meta and not isinstance(meta[key], dict):
        return meta[key]
    for value in meta.values():
        found = find_key(value, key, depth + 1)
        if found is not None:
            return found
    return None


def scenario_name(meta: dict[str, Any]) -> str | None:
    sc = meta.get("scenario")
    if isinstance(sc, dict):
        name = sc.get("name")
        return str(name) if name is not None else None
    if isinstance(sc, str) and sc:
        return PurePath(sc).stem if sc.endswith(".toml") else sc
    return None


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def runs(nodes: Sequence[dict[str, Any]], orders: Mapping[str, list[str]],
         scopes: Sequence[Scope]) -> list[dict[str, Any]]:
    """One JSON-ready record per run: counts, orders, and its run.json facts."""
    by_scope = {s.index: s for s in scopes}
    per_run: dict[str, dict[str, Any]] = {}
    for n in nodes:
        if not n["events"]:
            continue
        r = per_run.setdefault(n["run"], {"run": n["run"], "events": 0, "nodes": 0,
                                          "messages": 0, "scope": n["scope"],
                                          "t_first": n["t_first"], "t_last": n["t_last"]})
        r["events"] += n["events"]
        r["nodes"] += 1
        r["messages"] += n["messages"]
        r["t_first"] = min(r["t_first"], n["t_first"])
        r["t_last"] = max(r["t_last"], n["t_last"])
        if n["scope"] is not None and (r["scope"] is None or n["scope"] < r["scope"]):
            r["scope"] = n["scope"]
    out = []
    for r in sorted(per_run.values(), key=lambda x: str(x["run"])):
        scope = by_scope.get(r["scope"]) if r["scope"] is not None else None
        meta = scope.meta if scope else {}
        if not meta:  # run.json files that name their run
            meta = next((s.meta for s in scopes if s.meta.get("run") == r["run"]), {})
        seed = find_key(meta, "seed")
        params = meta.get("params") if isinstance(meta.get("params"), dict) else None
        out.append({
            **r, "orders": sorted(orders.get(r["run"], [])),
            "dir": scope.path if scope else None,
            "scenario": scenario_name(meta),
            "seed": int(seed) if _number(seed) is not None else None,
            "loss": _number(find_key(meta, "loss")),
            "ordering": meta.get("ordering"),
            "params": params,
            "variant": variant(scenario_name(meta), params),
        })
    return out


def run_info(spark: SparkSession, run_rows: Sequence[dict[str, Any]]) -> DataFrame:
    rows = [(r["run"], r["scenario"] or "(all runs)", r["variant"], r["seed"], r["loss"])
            for r in run_rows]
    return small_frame(spark, rows, _RUN_INFO)


def repair_vs_loss(overhead_rows: Sequence[dict[str, Any]], run_rows: Sequence[dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    """Repair requests and packets per message against loss, one point per run
    (``packets_per_message`` is null for a run that did not trace packets)."""
    loss = {r["run"]: r["loss"] for r in run_rows}
    orders = {r["run"]: ",".join(r["orders"]) or "none" for r in run_rows}
    return [{"run": o["run"], "loss": loss.get(o["run"]), "order": orders.get(o["run"]),
             "requests_per_message": o.get("requests_per_message"),
             "packets_per_message": o.get("packets_per_message")} for o in overhead_rows]
