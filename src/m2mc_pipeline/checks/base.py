"""What a check returns, and how a DataFrame of violations becomes one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame

EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One entry of verify.json's ``checks`` (CONTRACTS section 5)."""

    name: str
    violations: int
    examples: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"violations": self.violations, "examples": self.examples}


def _plain(value: Any) -> Any:
    """Spark rows hold Rows, lists, floats: make them JSON values."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


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
        examples: list[dict[str, Any]] = []
        if count:
            sample = violations.orderBy(*order_by) if order_by else violations
            examples = [_plain(r.asDict(recursive=False)) for r in sample.take(limit)]
            if save_to is not None:
                violations.write.mode("overwrite").parquet(f"{save_to}/violations_{name}.parquet")
        return CheckResult(name=name, violations=int(count), examples=examples)
    finally:
        violations.unpersist()
