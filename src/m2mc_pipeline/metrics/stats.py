"""Delivery delay and latency distributions at every level in one Spark job.

One aggregation with GROUPING SETS over the per-delivery table gives count,
mean, 100 quantiles (p1..p100, of which p50, p90, p99 are reported) and max of
delay and latency by ordering; by (run, group); by (run, group, node); by
(scenario, ordering) for the comparison; and by (ordering, loss) for the
latency-against-loss plot. The ordering level's quantiles feed the plots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from m2mc_pipeline.metrics.quantiles import ACCURACY, _round

CDF_POINTS = 100
LEVELS: dict[str, tuple[str, ...]] = {
    "order": ("order",),
    "group": ("run", "group", "order"),
    "node": ("run", "group", "node", "order"),
    "scenario": ("scenario", "order"),
    "loss": ("order", "loss"),
}
_ALL = ("order", "run", "group", "node", "scenario", "loss")


def _metric(col: str) -> str:
    # One sketch per metric and group: p50/p90/p99 are points 50, 90 and 99 of the 100
    # (the same percentages, so the same values), kept as a distribution for plots.
    return (f"count({col}) AS {col}_count, avg({col}) AS {col}_mean, "
            f"percentile_approx({col}, array({_points()}), {ACCURACY}) AS {col}_cdf, "
            f"max({col}) AS {col}_max")


def _points() -> str:
    return ", ".join(f"{(i + 1) / CDF_POINTS!r}" for i in range(CDF_POINTS))


def stats_frame(spark: SparkSession, dl: DataFrame) -> DataFrame:
    """The grouping-sets aggregation (lazy): one row per key of every level."""
    view = f"m2mc_deliveries_{abs(hash(dl))}"
    dl.createOrReplaceTempView(view)
    cols = ", ".join(f"`{c}`" for c in _ALL)
    sets = ", ".join("(" + ", ".join(f"`{c}`" for c in keys) + ")" for keys in LEVELS.values())
    flags = ", ".join(f"grouping(`{c}`) AS g_{c}" for c in _ALL)
    sql = (f"SELECT {cols}, {flags}, {_metric('delay')}, {_metric('latency')} "
           f"FROM {view} GROUP BY {cols} GROUPING SETS ({sets})")
    return spark.sql(sql)


@dataclass(slots=True)
class Distributions:
    """Rows per level (see LEVELS) for delay and latency, and the 100-point CDFs by order."""

    delay: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    latency: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    cdf_delay: dict[str, list[float]] = field(default_factory=dict)
    cdf_latency: dict[str, list[float]] = field(default_factory=dict)


def split_levels(rows: list[dict[str, Any]]) -> Distributions:
    """Sort the collected aggregation rows into their levels."""
    out = Distributions()
    for r in rows:
        grouped = {c for c in _ALL if r[f"g_{c}"] == 0}
        level = next((name for name, keys in LEVELS.items() if set(keys) == grouped), None)
        if level is None:
            continue
        for metric, table, cdfs in (("delay", out.delay, out.cdf_delay),
                                    ("latency", out.latency, out.cdf_latency)):
            if not r[f"{metric}_count"]:
                continue
            q = r[f"{metric}_cdf"] or [None] * CDF_POINTS
            row = {k: r[k] for k in LEVELS[level]}
            row.update({"count": r[f"{metric}_count"], "mean": _round(r[f"{metric}_mean"]),
                        "p50": q[49], "p90": q[89], "p99": q[98], "max": r[f"{metric}_max"]})
            table.setdefault(level, []).append(row)
            if level == "order" and r[f"{metric}_cdf"]:
                cdfs[str(r["order"])] = [float(x) for x in r[f"{metric}_cdf"]]
    for table in (out.delay, out.latency):
        for level, keys in LEVELS.items():
            table.setdefault(level, []).sort(
                key=lambda row, ks=keys: tuple(str(row[k]) for k in ks))  # type: ignore[misc]
    return out
