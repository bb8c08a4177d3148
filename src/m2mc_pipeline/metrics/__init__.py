"""All metrics of a trace: metrics.json (summaries) plus Parquet tables (docs/pipeline.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyspark.sql.functions as F
from pyspark import StorageLevel
from pyspark.sql import DataFrame

from m2mc_pipeline.metrics.delay import deliveries, osms_occupancy
from m2mc_pipeline.metrics.quantiles import cdf_by, records, summarize_by
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


@dataclass(slots=True)
class Metrics:
    summary: dict[str, Any]
    deliveries: DataFrame          # persisted per-delivery table (delay, latency)
    cdf_delay: dict[str, list[float]] = field(default_factory=dict)
    cdf_latency: dict[str, list[float]] = field(default_factory=dict)
    throughput: list[dict[str, Any]] = field(default_factory=list)

    def release(self) -> None:
        self.deliveries.unpersist()


def _write(df: DataFrame, tables: str | None, name: str) -> None:
    if tables is not None:
        df.write.mode("overwrite").parquet(f"{tables}/{name}.parquet")


def _inline(df: DataFrame, tables: str | None, name: str) -> dict[str, Any]:
    """Small tables go inline in metrics.json; big ones only to Parquet, with a pointer."""
    rows = records(df, INLINE_ROWS + 1)
    if len(rows) > INLINE_ROWS:
        return {"rows": None, "table": f"tables/{name}.parquet"}
    return {"rows": rows, "table": f"tables/{name}.parquet" if tables is not None else None}


def compute(tb: Tables, tables: str | None, progress: Any = None) -> Metrics:
    """Every metric; Parquet tables are written under ``tables`` when given."""
    def step(name: str) -> None:
        if progress is not None:
            progress.stage(name)

    step("metrics: delivery delay and latency")
    dl = deliveries(tb).persist(StorageLevel.MEMORY_AND_DISK)
    _write(dl, tables, "deliveries")
    delay_by_order = summarize_by(dl, "delay", ["order"])
    delay_by_group = summarize_by(dl, "delay", ["run", "group", "order"])
    delay_by_node = summarize_by(dl, "delay", ["run", "group", "node", "order"])
    latency_by_order = summarize_by(dl, "latency", ["order"])
    latency_by_group = summarize_by(dl, "latency", ["run", "group", "order"])
    for df, name in ((delay_by_group, "delay_by_group"), (delay_by_node, "delay_by_node"),
                     (latency_by_group, "latency_by_group")):
        _write(df, tables, name)
    summary: dict[str, Any] = {
        "delivery_delay": {
            "unit": "s", "definition": "first deliver - first recv of a message at a node",
            "by_order": records(delay_by_order),
            "by_group": _inline(delay_by_group, tables, "delay_by_group"),
            "by_node": _inline(delay_by_node, tables, "delay_by_node"),
        },
        "latency": {
            "unit": "s", "definition": "first deliver at a non-sender - send",
            "by_order": records(latency_by_order),
            "by_group": _inline(latency_by_group, tables, "latency_by_group"),
        },
    }
    cdf_delay = cdf_by(dl, "delay", "order")
    cdf_latency = cdf_by(dl, "latency", "order")

    step("metrics: throughput and overhead")
    tp, width = throughput(tb.events)
    tp = tp.persist(StorageLevel.MEMORY_AND_DISK)
    _write(tp, tables, "throughput")
    summary["throughput"] = {"bucket_s": width,
                             "by_run": records(throughput_summary(tp, width))}
    tp_rows = records(tp, 20_000)
    tp.unpersist()
    oh = overhead(tb.events)
    _write(oh, tables, "overhead")
    summary["overhead"] = {"by_run": records(oh)}

    step("metrics: repair and out-of-sequence store")
    rep = repair_times(tb.events, tb.recvd)
    cat = catchup_times(tb.events)
    rep_sum = summarize_by(rep.withColumn("all", F.lit("all")), "repair", ["all"])
    cat_sum = summarize_by(cat.withColumn("all", F.lit("all")), "catchup", ["all"])
    summary["repair"] = {
        "unit": "s",
        "repair_time": _first(records(rep_sum)),
        "repair_time_by_run": records(summarize_by(rep, "repair", ["run"])),
        "catchup_time": _first(records(cat_sum)),
        "unrepaired": rep.filter(F.col("repair").isNull()).count(),
    }
    occ = osms_occupancy(dl)
    _write(occ, tables, "osms_occupancy")
    occ_by_order = (occ.groupBy("order")
                    .agg(F.max("max").alias("max"), F.mean("max").alias("mean_node_max"),
                         F.mean("mean").alias("mean"))
                    .orderBy("order"))
    summary["osms_occupancy"] = {"unit": "messages", "by_order": records(occ_by_order),
                                 "by_node": _inline(occ, tables, "osms_occupancy")}
    return Metrics(summary=summary, deliveries=dl, cdf_delay=cdf_delay,
                   cdf_latency=cdf_latency, throughput=tp_rows)


def _first(rows: list[dict[str, Any]]) -> dict[str, Any]:
    if not rows:
        return {"count": 0}
    row = dict(rows[0])
    row.pop("all", None)
    return row
