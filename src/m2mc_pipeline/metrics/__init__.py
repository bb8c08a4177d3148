"""All metrics of a trace: metrics.json (summaries) plus Parquet tables (docs/pipeline.md).

Jobs are few on purpose: every distribution comes out of one grouping-sets
aggregation (stats.py), and each small table is persisted once, then written
and collected from memory.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyspark.sql.functions as F
from pyspark import StorageLevel
from pyspark.sql import DataFrame

from m2mc_pipeline.metrics.delay import deliveries, osms_occupancy
from m2mc_pipeline.metrics.quantiles import records, summary_columns
from m2mc_pipeline.metrics.stats import Distributions, split_levels, stats_frame
from m2mc_pipeline.metrics.traffic import (
    catchup_times,
    overhead,
    repair_times,
    throughput,
    throughput_summary,
)
from m2mc_pipeline.tables import Tables

# Per-node breakdowns go into metrics.json only up to this many rows (always into Parquet).
INLINE_ROWS = 500
THROUGHPUT_ROWS = 20_000
_KEEP = StorageLevel.MEMORY_AND_DISK


@dataclass(slots=True)
class Metrics:
    summary: dict[str, Any]
    cdf_delay: dict[str, list[float]] = field(default_factory=dict)
    cdf_latency: dict[str, list[float]] = field(default_factory=dict)
    throughput: list[dict[str, Any]] = field(default_factory=list)


def _write(df: DataFrame, tables: str | None, name: str) -> None:
    if tables is not None:
        df.write.mode("overwrite").parquet(f"{tables}/{name}.parquet")


def _cap(rows: list[dict[str, Any]], tables: str | None, name: str) -> dict[str, Any]:
    """Small tables go inline in metrics.json; big ones only to Parquet, with a pointer."""
    table = f"tables/{name}.parquet" if tables is not None else None
    return {"rows": rows if len(rows) <= INLINE_ROWS else None, "table": table}


def _kept(df: DataFrame, tables: str | None, name: str,
          collect: Callable[[DataFrame], list[dict[str, Any]]] = records
          ) -> list[dict[str, Any]]:
    """Persist a small derived table, write it, collect it: computed once for both."""
    df = df.persist(_KEEP)
    try:
        _write(df, tables, name)
        return collect(df)
    finally:
        df.unpersist()


def compute(tb: Tables, tables: str | None, info: DataFrame | None = None,
            progress: Any = None, parallel: bool = False) -> Metrics:
    """Every metric; Parquet tables are written under ``tables`` when given.

    ``info`` (run, scenario, loss) ties runs to their scenario and loss rate for
    the comparison of orderings and the latency-against-loss view.
    ``parallel``: run the independent parts in threads of their own (small traces,
    where each Spark job is mostly fixed latency: planning, scheduling, committing a
    Parquet file, one thread at a time would leave a core idle most of the time). The
    values are the same either way: the same queries run, only not one after another.
    """
    def step(name: str) -> None:
        if progress is not None:
            progress.stage(name)

    dl = _deliveries(tb, info).persist(_KEEP)
    try:
        if parallel:
            with ThreadPoolExecutor(_WORKERS, thread_name_prefix="m2mc-metrics") as pool:
                # Throughput and overhead read the events only: they start at once.
                traffic = pool.submit(_traffic, tb, tables)
                _fill(dl, tables, "deliveries", parallel)  # the parts below read it from memory
                dist = pool.submit(_delay, tb, dl, tables)
                osms = pool.submit(_osms, dl, tables)
                repair = _repair(tb, dl, tables)
                summary = _summary(dist.result(), osms.result(), repair, traffic.result(),
                                   tables)
                return _metrics(summary, dist.result(), traffic.result())
        step("metrics: delivery delay and latency")
        _fill(dl, tables, "deliveries")
        d = _delay(tb, dl, tables)
        step("metrics: out-of-sequence store")
        o = _osms(dl, tables)
        step("metrics: repair and catch-up")
        r = _repair(tb, dl, tables)
    finally:
        dl.unpersist()
    step("metrics: throughput and overhead")
    t = _traffic(tb, tables)
    return _metrics(_summary(d, o, r, t, tables), d, t)


# Threads for the parts of compute(parallel=True) besides the caller's: 3 queries at a
# time with the caller's, 4 with the checks beside them, on 2 cores (not tuned: the
# machine was too busy to tell 1 from 3; docs/pipeline.md "Small traces").
_WORKERS = 2


@dataclass(frozen=True, slots=True)
class _Traffic:
    rows: list[dict[str, Any]]
    width: float
    by_run: list[dict[str, Any]]
    overhead: list[dict[str, Any]]


def _deliveries(tb: Tables, info: DataFrame | None) -> DataFrame:
    dl = deliveries(tb)
    if info is not None:
        return dl.join(F.broadcast(info.select("run", "scenario", "variant", "loss")), "run",
                       "left")
    return (dl.withColumn("scenario", F.lit(None).cast("string"))
            .withColumn("variant", F.lit(None).cast("string"))
            .withColumn("loss", F.lit(None).cast("double")))


def _fill(dl: DataFrame, tables: str | None, name: str, parallel: bool = False) -> None:
    """Compute the persisted ``dl`` once, as it is written to Parquet (or, before parts
    that read it side by side, counted: each would compute it for itself otherwise)."""
    if tables is not None:
        _write(dl, tables, name)
    elif parallel:
        dl.count()


def _delay(tb: Tables, dl: DataFrame, tables: str | None) -> Distributions:
    # The comparison of orderings is per scenario and swept parameters (variant).
    return split_levels(_kept(stats_frame(tb.events.sparkSession,
                                          dl.withColumn("scenario", F.col("variant"))),
                              tables, "delay_latency_stats"))


def _traffic(tb: Tables, tables: str | None) -> _Traffic:
    tp_df, width = throughput(tb.events)
    tp_rows = _kept(tp_df, tables, "throughput", lambda d: records(d, THROUGHPUT_ROWS + 1))
    if len(tp_rows) > THROUGHPUT_ROWS:
        tp_rows = tp_rows[:THROUGHPUT_ROWS]
        by_run = records(throughput_summary(tp_df, width))
    else:
        by_run = _throughput_by_run(tp_rows, width)
    return _Traffic(tp_rows, width, by_run, _kept(overhead(tb.events), tables, "overhead"))


def _summary(dist: Distributions, osms: tuple[list[dict[str, Any]], list[dict[str, Any]]],
             repair: dict[str, Any], traffic: _Traffic, tables: str | None) -> dict[str, Any]:
    occ_rows, occ_by_order = osms
    summary = _distributions(dist, tables)
    summary["osms_occupancy"] = {"unit": "messages", "by_order": occ_by_order,
                                 "by_node": _cap(occ_rows, tables, "osms_occupancy")}
    summary["throughput"] = {"bucket_s": traffic.width, "by_run": traffic.by_run}
    summary["overhead"] = {"by_run": traffic.overhead}
    summary["repair"] = repair
    return summary


def _metrics(summary: dict[str, Any], dist: Distributions, traffic: _Traffic) -> Metrics:
    return Metrics(summary=summary, cdf_delay=dist.cdf_delay, cdf_latency=dist.cdf_latency,
                   throughput=traffic.rows)


def _distributions(dist: Distributions, tables: str | None) -> dict[str, Any]:
    side: dict[str, dict[str, Any]] = {}
    for row in dist.delay["scenario"]:
        side.setdefault(str(row["scenario"] or "(all runs)"), {})[str(row["order"])] = {
            k: row[k] for k in ("count", "p50", "p90", "p99", "max")}
    return {
        "delivery_delay": {
            "unit": "s", "definition": "first deliver - first recv of a message at a node",
            "by_order": dist.delay["order"],
            "by_group": _cap(dist.delay["group"], tables, "delay_latency_stats"),
            "by_node": _cap(dist.delay["node"], tables, "delay_latency_stats"),
        },
        "latency": {
            "unit": "s", "definition": "first deliver at a non-sender - send",
            "by_order": dist.latency["order"],
            "by_group": _cap(dist.latency["group"], tables, "delay_latency_stats"),
        },
        "comparison": {
            "delay": dist.delay["scenario"], "latency": dist.latency["scenario"],
            "delay_side_by_side": side,
            "latency_vs_loss": [r for r in dist.latency["loss"] if r["loss"] is not None],
        },
    }


def _osms(dl: DataFrame, tables: str | None) -> tuple[list[dict[str, Any]],
                                                      list[dict[str, Any]]]:
    occ = osms_occupancy(dl).persist(_KEEP)
    try:
        _write(occ, tables, "osms_occupancy")
        by_order = records(occ.groupBy("order")
                           .agg(F.max("max").alias("max"), F.mean("max").alias("mean_node_max"),
                                F.mean("mean").alias("mean"))
                           .orderBy("order"))
        return records(occ, INLINE_ROWS + 1), by_order
    finally:
        occ.unpersist()


def _throughput_by_run(rows: list[dict[str, Any]], width: float) -> list[dict[str, Any]]:
    runs: dict[str, dict[str, Any]] = {}
    for r in rows:
        agg = runs.setdefault(r["run"], {"run": r["run"], "sends": 0, "deliveries": 0,
                                         "buckets": 0, "peak": 0})
        agg["sends"] += r["sends"]
        agg["deliveries"] += r["deliveries"]
        agg["buckets"] = max(agg["buckets"], r["bucket"] + 1)
        agg["peak"] = max(agg["peak"], r["deliveries"])
    out = []
    for agg in sorted(runs.values(), key=lambda a: str(a["run"])):
        duration = agg["buckets"] * width
        out.append({"run": agg["run"], "sends": agg["sends"], "deliveries": agg["deliveries"],
                    "duration": duration,
                    "deliveries_per_s": agg["deliveries"] / duration if duration else None,
                    "peak_deliveries_per_s": agg["peak"] / width})
    return out


def _repair(tb: Tables, dl: DataFrame, tables: str | None) -> dict[str, Any]:
    """Time to repair and catch-up time (traffic.py): every summary in one Spark job
    (its stages run side by side; the repairs and catch-ups it computes are kept and
    written to Parquet from memory afterwards)."""
    if not tb.any_requests:  # no nack, no sync_req: nothing to measure, no Spark job
        return _no_repair()
    rep = repair_times(tb.events, tb.recvd, dl)
    cat = catchup_times(tb.events, dl)
    if tables is not None:  # filled by the summary's job, then written from memory
        rep, cat = rep.persist(_KEEP), cat.persist(_KEEP)
    try:
        values = (rep.select(F.lit("repair").alias("metric"), "run",
                             F.col("repair").alias("value"), "unrepaired",
                             F.lit(0).alias("episode"))
                  .unionByName(cat.select(F.lit("catchup").alias("metric"), "run",
                                          F.col("catchup").alias("value"),
                                          F.lit(0).alias("unrepaired"),
                                          F.lit(1).alias("episode"))))
        rows = records(values.rollup("metric", "run").agg(
            *summary_columns("value"), F.sum("unrepaired").alias("unrepaired"),
            F.sum("episode").alias("episodes")).filter(F.col("metric").isNotNull()))
        _write(rep.filter(F.col("repair").isNotNull()).drop("unrepaired"), tables, "repairs")
        _write(cat, tables, "catchups")
    finally:
        rep.unpersist()
        cat.unpersist()
    quantiles = ("count", "mean", "p50", "p90", "p99", "max")

    def overall(metric: str, *extra: str) -> dict[str, Any]:
        row = next((r for r in rows if r["metric"] == metric and r["run"] is None), None)
        return {k: (row[k] if row else 0 if k in ("count", *extra) else None)
                for k in (*quantiles, *extra)}

    def by_run(metric: str, *extra: str) -> list[dict[str, Any]]:
        return sorted(({"run": r["run"], **{k: r[k] for k in (*quantiles, *extra)}}
                       for r in rows if r["metric"] == metric and r["run"] is not None),
                      key=lambda r: str(r["run"]))

    repair = overall("repair", "unrepaired")
    table = {name: f"tables/{name}.parquet" if tables is not None else None
             for name in ("repairs", "catchups")}
    return {
        "unit": "s",
        "repair_time": {k: v for k, v in repair.items() if k != "unrepaired"},
        "repair_time_by_run": by_run("repair", "unrepaired"),
        "unrepaired": int(repair["unrepaired"] or 0),
        "catchup_time": overall("catchup", "episodes"),
        "catchup_time_by_run": by_run("catchup", "episodes"),
        "tables": table,
    }


def _no_repair() -> dict[str, Any]:
    empty = {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    return {"unit": "s", "repair_time": dict(empty), "repair_time_by_run": [], "unrepaired": 0,
            "catchup_time": {**empty, "episodes": 0}, "catchup_time_by_run": [],
            "tables": {"repairs": None, "catchups": None}}
