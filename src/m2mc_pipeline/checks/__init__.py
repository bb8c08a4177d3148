"""The checks of docs/interfaces.md §5, one module per family."""

from __future__ import annotations

from m2mc_pipeline.checks.base import Check, CheckResult
from m2mc_pipeline.checks.causal import causal_order
from m2mc_pipeline.checks.delivery import duplicated, lost, unexpected
from m2mc_pipeline.checks.fifo import fifo_order
from m2mc_pipeline.checks.sb import sb_order
from m2mc_pipeline.checks.total import total_order

CHECK_NAMES = ("unexpected", "duplicated", "lost", "sb_order", "causal_order", "total_order",
               "fifo_order")

__all__ = ["CHECK_NAMES", "Check", "CheckResult", "causal_order", "duplicated", "fifo_order",
           "lost", "sb_order", "total_order", "unexpected"]
