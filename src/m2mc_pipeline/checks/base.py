"""What a check returns, and how the checks' DataFrames of violations are run.

A check function builds a :class:`Check`: the DataFrame of its violating rows,
not yet computed. :func:`run_all` counts every check's rows in one Spark job
(one plan, so Spark runs the checks' stages side by side and each job's fixed
costs are paid once), then fetches examples and writes the violations only of
the checks that found any.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyspark.sql.functions as F
from pyspark import StorageLevel
from pyspark.sql import DataFrame

EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One entry of verify.json's ``checks`` (docs/interfaces.md §5)."""

    name: str
    violations: int
    examples: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"violations": self.violations, "examples": self.examples}


@dataclass(frozen=True, slots=True)
class Check:
    """A planned check: ``rows`` are its violations (lazy, nothing computed yet).

    ``refine``: when set, ``rows`` are only candidates (cheap to find, usually none);
    if there are any, ``refine()`` computes the real result from them (they stay
    persisted while it runs).
    """

    name: str
    rows: DataFrame
    order_by: list[str]
    save_to: str | None = None
    refine: Callable[[], CheckResult] | None = None


def _plain(value: Any) -> Any:
    """Spark rows hold Rows, lists, floats: make them JSON values."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _finish(name: str, violations: DataFrame, count: int, order_by: list[str] | None,
            limit: int, save_to: str | None) -> CheckResult:
    """Examples and the Parquet copy of a check's ``count`` (> 0) violation rows."""
    sample = violations.orderBy(*order_by) if order_by else violations
    examples = [_plain(r.asDict(recursive=False)) for r in sample.take(limit)]
    if save_to is not None:
        violations.write.mode("overwrite").parquet(f"{save_to}/violations_{name}.parquet")
    return CheckResult(name=name, violations=int(count), examples=examples)


def summarize(name: str, violations: DataFrame, order_by: list[str] | None = None,
              limit: int = EXAMPLES, save_to: str | None = None) -> CheckResult:
    """Count the violation rows and keep ``limit`` of them as examples.

    Only the examples reach the driver; every violation is written to
    ``save_to/violations_<name>.parquet`` when there are any. The violations are
    persisted for these actions; in a clean trace that set is empty, so it is free.
    """
    violations = violations.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        count = violations.count()
        if not count:
            return CheckResult(name=name, violations=0)
        return _finish(name, violations, count, order_by, limit, save_to)
    finally:
        violations.unpersist()


def count_rows(frames: Mapping[str, DataFrame]) -> dict[str, int]:
    """The number of rows of each frame, all in one Spark job (absent: 0 rows)."""
    if not frames:
        return {}
    parts = [df.select(F.lit(name).alias("item")) for name, df in frames.items()]
    union = functools.reduce(DataFrame.unionAll, parts)
    counted = {r["item"]: int(r["count"]) for r in union.groupBy("item").count().collect()}
    return {name: counted.get(name, 0) for name in frames}


def run_all(checks: Sequence[Check], tallies: Mapping[str, DataFrame] | None = None,
            limit: int = EXAMPLES) -> tuple[dict[str, CheckResult], dict[str, int]]:
    """Run ``checks``; also count the rows of each of ``tallies`` in the same job.

    Every check's rows are persisted (in a clean trace they are empty: free), so
    the examples and the Parquet copy of a check that found violations do not
    compute them again.
    """
    rows = {c.name: c.rows.persist(StorageLevel.MEMORY_AND_DISK) for c in checks}
    try:
        counts = count_rows({**rows, **(tallies or {})})
        results: dict[str, CheckResult] = {}
        for c in checks:
            n = counts[c.name]
            if not n:
                results[c.name] = CheckResult(name=c.name, violations=0)
            elif c.refine is not None:
                results[c.name] = c.refine()
            else:
                results[c.name] = _finish(c.name, rows[c.name], n, c.order_by, limit,
                                          c.save_to)
        return results, {k: v for k, v in counts.items() if k not in rows}
    finally:
        for df in rows.values():
            df.unpersist()
