"""The pipeline on a real Spark cluster: a standalone master and worker on 127.0.0.1,
started with the ``spark-class`` that pip's PySpark ships (tests/pipeline/standalone.py).

``m2mc sweep`` and ``m2mc analyze`` run with ``--master spark://127.0.0.1:PORT`` as a
user types them, and must write the same verify.json and metrics.json as the same
work on ``local[*]``. The sweep is the delivery-delay study's slice (study_slice.py:
docs/study/study.toml cut to three simulations), so this is also the study running
unchanged but for ``--master`` on a cluster, as docs/study/README.md says: the page
written from the cluster's output must pass study_slice.py's checks, with the cells of
the local analysis. The executors' Python is a fresh virtual environment with the
standard library only: it cannot import m2mc, msgpack or tomli_w, so the sweep's
simulations run only because the driver ships them (m2mc_pipeline/ship.py).

One cluster for all of it (each start of one, and each driver and executor JVM, costs
tens of seconds on two busy cores); it skips (saying why) without Java.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # standalone.py and study_slice.py

from standalone import ClusterUnavailable, standalone
from study_slice import check_page, page_of, write_slice

from m2mc_pipeline.session import QUICK_JVM_OPTIONS

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NOT_SHIPPED = ("m2mc", "m2mc_pipeline", "msgpack", "tomli_w")


def _bare_python(where: Path, env: dict[str, str]) -> Path:
    """A virtual environment with nothing installed: the executors' Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True,
                   env=env, capture_output=True)
    python = where / "bin" / "python"
    for module in NOT_SHIPPED:
        probe = subprocess.run([str(python), "-c", f"import {module}"], env=env,
                               capture_output=True)
        assert probe.returncode != 0, f"the bare Python imports {module}: the test proves nothing"
    return python


def _m2mc(args: list[str], env: dict[str, str], log: Path) -> float:
    """Run the ``m2mc`` command in a process of its own (a fresh driver); its seconds."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "m2mc.cli", *args], env=env,
                          capture_output=True, text=True, timeout=600)
    log.write_text(done.stdout + done.stderr)
    assert done.returncode == 0, f"m2mc {args[0]} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return time.monotonic() - started


def _documents(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    return (json.loads((out / "verify.json").read_text()),
            json.loads((out / "metrics.json").read_text()))


@pytest.mark.timeout(1500)  # JVMs on two busy cores: usually two to three minutes
def test_the_study_slice_swept_and_analyzed_on_a_standalone_cluster_equals_local(
        spark: Any, tmp_path: Path) -> None:
    from m2mc_pipeline.api import analyze

    sweep_file = write_slice(tmp_path)
    driver_env = {k: v for k, v in os.environ.items()
                  if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    driver_env["SPARK_LOCAL_IP"] = "127.0.0.1"  # the driver binds to loopback too
    # No class-data archive written into the user's cache by a test (classcache.py).
    driver_env["M2MC_SPARK_CLASS_CACHE"] = "0"
    sweep_out, analysis_out = tmp_path / "cluster-sweep", tmp_path / "cluster-analysis"
    try:
        cluster = standalone(tmp_path / "cluster")
        c = cluster.__enter__()
    except ClusterUnavailable as exc:
        pytest.skip(str(exc))
    try:
        bare = _bare_python(tmp_path / "bare-venv", c.env)
        # Small work: few shuffle partitions (a cluster keeps Spark's 200, which on two
        # cores cost 108 s instead of 36 s), the executors' JVM tuned for start-up as
        # the quick profile does for the driver (session.py); their Python is the bare one.
        on_cluster = ["--master", c.master_url, "--quiet",
                      "--conf", f"spark.pyspark.python={bare}",
                      "--conf", "spark.driver.host=127.0.0.1",
                      "--conf", "spark.executor.memory=512m",
                      "--conf", "spark.sql.shuffle.partitions=2",
                      "--conf", f"spark.executor.extraJavaOptions={QUICK_JVM_OPTIONS}"]
        sweep_s = _m2mc(["sweep", str(sweep_file), "--out", str(sweep_out), *on_cluster],
                        driver_env, tmp_path / "sweep.log")
        # On a cluster the tables go where --tables says (a shared path); here, like local.
        analyze_s = _m2mc(["analyze", str(sweep_out / "runs"), "--out", str(analysis_out),
                           "--tables", str(analysis_out / "tables"), *on_cluster],
                          driver_env, tmp_path / "analyze.log")
    finally:
        cluster.__exit__(None, None, None)

    outcomes = json.loads((sweep_out / "sweep.json").read_text())["outcomes"]
    assert [o["ok"] for o in outcomes] == [True] * 3, outcomes
    # The reference: the same traces analysed by the embedded (local) session.
    local_out = tmp_path / "local-analysis"
    started = time.monotonic()
    analyze([sweep_out / "runs"], local_out, spark=spark, progress=False)
    local_s = time.monotonic() - started
    print(f"cluster: sweep {sweep_s:.1f}s, analyze {analyze_s:.1f}s; local analyze "
          f"{local_s:.1f}s (the tests' local session)")
    local = _documents(local_out)
    assert _documents(analysis_out) == local
    assert _documents(sweep_out) == local  # the sweep's own analysis ran on the cluster
    verify, metrics = local
    assert verify["valid"] and verify["counts"]["runs"] == 3
    assert metrics["repair"]["repair_time"]["count"] > 0  # the metrics had work to do

    # The study's page, written from the cluster's sweep as bench/study.py writes it,
    # and its cells those of the local analysis of the same runs.
    on_cluster, text = page_of(sweep_out, tmp_path / "cluster-docs")
    check_page(on_cluster, text, tmp_path / "cluster-docs")
    shutil.copy(sweep_out / "sweep.json", local_out / "sweep.json")
    on_local, _ = page_of(local_out, tmp_path / "local-docs")
    assert on_cluster.cells == on_local.cells
    assert (tmp_path / "cluster-docs" / "cells.csv").read_text() == \
        (tmp_path / "local-docs" / "cells.csv").read_text()
