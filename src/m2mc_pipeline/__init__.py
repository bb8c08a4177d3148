"""m2mc_pipeline: the PySpark jobs that verify and measure m2mc traces.

Entry points, in :mod:`m2mc_pipeline.api`: ``analyze(paths, out, master=None)``
and ``sweep(spec, out, master=None)``. This package imports pyspark; the
``m2mc`` package never imports it at module import time (the CLI imports this
package lazily).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from m2mc_pipeline.api import AnalysisResult, SweepResult, analyze

__all__ = ["AnalysisResult", "SweepResult", "analyze"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from m2mc_pipeline import api
        return getattr(api, name)
    raise AttributeError(name)
