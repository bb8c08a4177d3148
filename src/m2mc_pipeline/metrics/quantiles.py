"""Quantile summaries computed inside Spark (nothing but the summary reaches the driver).

Quantiles are nearest-rank: the q-quantile of n values is the ceil(q*n)-th
smallest (Spark's ``percentile_approx`` with accuracy 10,000 returns exactly
that for groups of up to 10,000 values, and is within 1/10,000 in rank above).
"""

from __future__ import annotations

from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

QUANTILES = (0.5, 0.9, 0.99)
ACCURACY = 10_000


def summary_columns(value: str) -> list[Column]:
    q = F.percentile_approx(F.col(value), list(QUANTILES), ACCURACY)
    return [F.count(F.col(value)).alias("count"),
            F.mean(value).alias("mean"),
            q[0].alias("p50"), q[1].alias("p90"), q[2].alias("p99"),
            F.max(value).alias("max")]


def records(df: DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of a (small, already aggregated) DataFrame as JSON-ready dicts."""
    rows = df.limit(limit).collect() if limit is not None else df.collect()
    return [{k: _round(v) for k, v in r.asDict().items()} for r in rows]


def _round(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 9)
    return v
