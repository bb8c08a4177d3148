"""Runs and their metadata, and the side-by-side comparison of orderings.

The same scenario run under S_b, causal and total order (a sweep over
``ordering``, or several ``m2mc sim`` runs) is compared on its delivery-delay
and latency distributions: one row per (scenario, order).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from m2mc_pipeline.load import Scope
from m2mc_pipeline.metrics.quantiles import records, summarize_by
from m2mc_pipeline.session import small_frame

_RUN_INFO = StructType([
    StructField("run", StringType()), StructField("scenario", StringType()),
    StructField("seed", LongType()), StructField("loss", DoubleType()),
])


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


def runs(events: DataFrame, group_order: DataFrame, scopes: Sequence[Scope]
         ) -> list[dict[str, Any]]:
    """One JSON-ready record per run: counts, orders, and its run.json facts."""
    by_scope = {s.index: s for s in scopes}
    per_run = (events.groupBy("run")
               .agg(F.count(F.lit(1)).alias("events"),
                    F.countDistinct("node").alias("nodes"),
                    F.count(F.when(F.col("event") == "send", 1)).alias("messages"),
                    F.min("scope").alias("scope"),
                    F.min("t").alias("t_first"), F.max("t").alias("t_last"))
               .join(group_order.groupBy("run")
                     .agg(F.array_sort(F.collect_set("order")).alias("orders")), "run", "left")
               .orderBy("run"))
    out = []
    for r in records(per_run):
        scope = by_scope.get(r["scope"]) if r["scope"] is not None else None
        meta = scope.meta if scope else {}
        if not meta:  # run.json files that name their run
            meta = next((s.meta for s in scopes if s.meta.get("run") == r["run"]), {})
        seed = find_key(meta, "seed")
        out.append({
            **r, "orders": r["orders"] or [],
            "dir": scope.path if scope else None,
            "scenario": scenario_name(meta),
            "seed": int(seed) if _number(seed) is not None else None,
            "loss": _number(find_key(meta, "loss")),
            "ordering": meta.get("ordering"),
            "params": meta.get("params") if isinstance(meta.get("params"), dict) else None,
        })
    return out


def run_info(spark: SparkSession, run_rows: Sequence[dict[str, Any]]) -> DataFrame:
    rows = [(r["run"], r["scenario"] or "(all runs)", r["seed"], r["loss"]) for r in run_rows]
    return small_frame(spark, rows, _RUN_INFO)


def compare_orderings(deliveries: DataFrame, info: DataFrame) -> dict[str, Any]:
    """Delay and latency quantiles per (scenario, order), and a side-by-side view."""
    d = deliveries.join(F.broadcast(info.select("run", "scenario")), "run", "left").fillna(
        {"scenario": "(all runs)"})
    delay = records(summarize_by(d, "delay", ["scenario", "order"]))
    latency = records(summarize_by(d, "latency", ["scenario", "order"]))
    side: dict[str, dict[str, Any]] = {}
    for row in delay:
        side.setdefault(row["scenario"], {})[row["order"]] = {
            k: row[k] for k in ("count", "p50", "p90", "p99", "max")}
    return {"delay": delay, "latency": latency, "delay_side_by_side": side}


def latency_vs_loss(deliveries: DataFrame, info: DataFrame) -> list[dict[str, Any]]:
    """Latency quantiles per (order, loss) over runs whose run.json gives a loss rate."""
    d = deliveries.join(F.broadcast(info.filter(F.col("loss").isNotNull())
                                    .select("run", "loss")), "run")
    return records(summarize_by(d, "latency", ["order", "loss"]))


def repair_vs_loss(overhead_rows: Sequence[dict[str, Any]], run_rows: Sequence[dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    """Repair requests and packets per message against loss, one point per run."""
    loss = {r["run"]: r["loss"] for r in run_rows}
    orders = {r["run"]: ",".join(r["orders"]) or "none" for r in run_rows}
    return [{"run": o["run"], "loss": loss.get(o["run"]), "order": orders.get(o["run"]),
             "requests_per_message": o.get("requests_per_message"),
             "packets_per_message": o.get("packets_per_message")} for o in overhead_rows]
