"""The delivery-delay study (docs/study/): a slice of its own sweep file, end to end.

The slice is docs/study/study.toml's 10-node grid cut to one value of each factor
(loss 0.1, reply rate 0.6, a fifth of the nodes walking) and one seed, under every
ordering: three simulations. It runs as ``m2mc sweep`` on ``local[*]`` and,
unchanged but for ``--master``, on the standalone cluster of test_cluster.py; the
page, plots and tables are then written from each output as bench/study.py writes
them, and the cluster's cells must equal the local ones (the simulations are
deterministic, the pipeline's tables the same).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

sys.path.insert(0, str(Path(__file__).parent))  # standalone.py, beside this file

from standalone import ClusterUnavailable, standalone

from m2mc.cli import main
from m2mc_pipeline import study
from m2mc_pipeline.session import QUICK_JVM_OPTIONS

pytestmark = [pytest.mark.spark, pytest.mark.slow]

STUDY = Path(__file__).resolve().parents[2] / "docs" / "study"
SLICE = {study.LOSS: [0.1], study.REPLY: [0.6], study.MOBILE: [0.2]}


def write_slice(where: Path) -> Path:
    """The study's 10-node grid, one value per factor, seed 1, every ordering."""
    doc = tomllib.loads((STUDY / "study.toml").read_text())
    grid = next(g for g in doc["grid"] if g[study.SIZE] == [10])
    part = {k: SLICE.get(k, v) for k, v in grid.items() if k != "seeds"}
    assert part[study.ORDER] == list(study.ORDERS)
    sliced = {"scenarios": [str(STUDY / s) for s in doc["scenarios"]], "seeds": [1],
              "timeout": 300, "grid": [part]}
    path = where / "slice.toml"
    path.write_text(tomli_w.dumps(sliced))
    return path


def scenario() -> dict[str, Any]:
    return tomllib.loads((STUDY / "scenario.toml").read_text())


def page_of(out: Path, docs: Path) -> tuple[study.Study, str]:
    data = study.load(out, scenario())
    page = study.Page(command="python bench/study.py", sweep_file="slice.toml",
                      runtime="test", machine="test")
    written = study.write(data, docs, page, scenario())
    assert all(p.is_file() for p in written)
    return data, (docs / "README.md").read_text()


def check_page(data: study.Study, text: str, docs: Path) -> None:
    assert data.valid and data.tasks == 3 and data.failed == 0
    rows = data.rows()
    assert [r["order"] for r in rows] == list(study.ORDERS)
    for r in rows:
        assert (r["group size"], r["loss"], r["reply rate"], r["mobile share"]) == \
            (10, 0.1, 0.6, 0.2)
        assert r["runs"] == 1 and r["seeds"] == "1" and r["deliveries"] > 100
        assert r["delay_mean"] is not None and r["delay_mean"] >= 0
        assert r["delay_p50"] <= r["delay_p90"] <= r["delay_p99"] <= r["delay_max"]
    lines = (docs / "cells.csv").read_text().splitlines()
    assert len(lines) == 1 + len(rows) and lines[0].startswith("order,group size,loss")
    assert len((docs / "runs.csv").read_text().splitlines()) == 1 + len(rows)
    # Every figure the page shows is a PNG beside it, named with the command that made it.
    shown = [part.split(")")[0] for part in text.split("](")[1:] if ".png)" in part]
    assert shown, text
    for name in shown:
        assert (docs / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert text.count("Produced by `python bench/study.py`") == len(shown)
    assert "```sh\npython bench/study.py\n```" in text
    assert "no violation in any run" in text


@pytest.mark.timeout(900)
def test_a_slice_of_the_study_on_local(spark: Any, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["sweep", str(write_slice(tmp_path)), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    data, text = page_of(out, tmp_path / "docs")
    check_page(data, text, tmp_path / "docs")


@pytest.mark.timeout(1200)  # JVMs on two busy cores
def test_a_slice_of_the_study_on_a_standalone_cluster_equals_local(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep_file = write_slice(tmp_path)
    try:
        cluster = standalone(tmp_path / "cluster")
        c = cluster.__enter__()
    except ClusterUnavailable as exc:
        pytest.skip(str(exc))
    driver_env = {k: v for k, v in os.environ.items()
                  if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    driver_env.update(SPARK_LOCAL_IP="127.0.0.1", M2MC_SPARK_CLASS_CACHE="0")
    cluster_out = tmp_path / "cluster-out"
    try:
        # The executors' Python is the driver's here (the shipping of m2mc to a bare
        # Python is test_cluster.py's business); everything else as a user types it.
        done = subprocess.run(
            [sys.executable, "-m", "m2mc.cli", "sweep", str(sweep_file),
             "--out", str(cluster_out), "--quiet", "--master", c.master_url,
             "--conf", f"spark.pyspark.python={sys.executable}",
             "--conf", "spark.driver.host=127.0.0.1",
             "--conf", "spark.executor.memory=512m",
             "--conf", "spark.sql.shuffle.partitions=2",
             "--conf", f"spark.executor.extraJavaOptions={QUICK_JVM_OPTIONS}"],
            env=driver_env, capture_output=True, text=True, timeout=900)
    finally:
        cluster.__exit__(None, None, None)
    assert done.returncode == 0, done.stderr[-4000:]
    outcomes = json.loads((cluster_out / "sweep.json").read_text())["outcomes"]
    assert [o["ok"] for o in outcomes] == [True] * 3, outcomes
    on_cluster, text = page_of(cluster_out, tmp_path / "cluster-docs")
    check_page(on_cluster, text, tmp_path / "cluster-docs")

    local_out = tmp_path / "local-out"
    assert main(["sweep", str(sweep_file), "--out", str(local_out), "--quiet"]) == 0
    capsys.readouterr()
    local, _ = page_of(local_out, tmp_path / "local-docs")
    assert on_cluster.cells == local.cells
    assert (tmp_path / "cluster-docs" / "cells.csv").read_text() == \
        (tmp_path / "local-docs" / "cells.csv").read_text()
