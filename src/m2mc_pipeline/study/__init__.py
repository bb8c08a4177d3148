"""The delivery-delay study (docs/study/README.md): cells, plots and page from a sweep.

``m2mc sweep docs/study/study.toml --out OUT`` runs the grid; ``load(OUT, scenario)``
groups its deliveries into cells (cells.py) and ``write(study, docs, page, scenario)``
writes README.md, the plots and the tables (page.py, figures.py). bench/study.py is the
one command that does both.
"""

from m2mc_pipeline.study.cells import (
    FACTORS,
    LABELS,
    LOSS,
    MOBILE,
    ORDER,
    ORDERS,
    REPLY,
    SIZE,
    Study,
    load,
)
from m2mc_pipeline.study.page import Page, write

__all__ = ["FACTORS", "LABELS", "LOSS", "MOBILE", "ORDER", "ORDERS", "REPLY", "SIZE", "Page",
           "Study", "load", "write"]
