"""The delivery-delay study (docs/study/): a slice of its own sweep file, end to end.

The slice (study_slice.py) is docs/study/study.toml's 10-node grid cut to one value of
each factor and one seed, under every ordering: three simulations. It runs here as
``m2mc sweep`` on ``local[*]``, and the page, plots and tables are written from its
output as bench/study.py writes them. test_cluster.py runs the same slice, unchanged but
for ``--master``, on a standalone cluster, and its cells must equal the local ones.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # study_slice.py, beside this file

from study_slice import check_page, page_of, write_slice

from m2mc.cli import main

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.timeout(900)
def test_a_slice_of_the_study_on_local(spark: Any, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["sweep", str(write_slice(tmp_path)), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    data, text = page_of(out, tmp_path / "docs")
    check_page(data, text, tmp_path / "docs")
