"""The pipeline on a real Spark cluster: a standalone master and worker on 127.0.0.1,
started with the ``spark-class`` that pip's PySpark ships (tests/pipeline/standalone.py).

``m2mc sweep`` and ``m2mc analyze`` run with ``--master spark://127.0.0.1:PORT`` as a
user types them, and must write the same verify.json and metrics.json as the same
work on ``local[*]``. The executors' Python is a fresh virtual environment with the
standard library only: it cannot import m2mc, msgpack or tomli_w, so the sweep's
simulations run only because the driver ships them (m2mc_pipeline/ship.py).

One cluster, one sweep of four small simulations and one analyze keep this test
to about a minute on two cores; it skips (saying why) without Java.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import tomli_w

sys.path.insert(0, str(Path(__file__).parent))  # standalone.py, beside this file

from standalone import ClusterUnavailable, standalone

from m2mc_pipeline.session import QUICK_JVM_OPTIONS

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Four members on a lossy network, one crash and restart: repairs, catch-ups, every
# metric has rows. Under a second of simulation each.
SCENARIO: dict[str, Any] = {
    "name": "cluster-check",
    "run": {"chaos": 6.0, "heal": 6.0},
    "stack": {"kind": "group"},
    "nodes": {"count": 4, "domain": "lan"},
    "domains": {"lan": {"delay": {"dist": "uniform", "low": 0.001, "high": 0.005},
                        "loss": 0.15}},
    "groups": [{"name": "g", "order": "sb", "members": "all", "rate": 10.0, "messages": 30,
                "reply": 0.5, "size": {"dist": "uniform", "low": 20.0, "high": 100.0}}],
    "faults": {"crash": [{"node": "n3", "at": 2.0, "restart": 3.0}]},
}
SWEEP = ('scenarios = ["scenario.toml"]\nseeds = [1, 2]\n'
         '[grid]\n"groups.0.order" = ["sb", "causal"]\n')
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


@pytest.mark.timeout(1200)  # JVMs on two busy cores: usually about a minute
def test_sweep_and_analyze_on_a_standalone_cluster_equal_local(spark: Any, tmp_path: Path
                                                               ) -> None:
    from m2mc_pipeline.api import analyze

    (tmp_path / "scenario.toml").write_text(tomli_w.dumps(SCENARIO))
    (tmp_path / "sweep.toml").write_text(SWEEP)
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
        sweep_s = _m2mc(["sweep", str(tmp_path / "sweep.toml"), "--out", str(sweep_out),
                         *on_cluster], driver_env, tmp_path / "sweep.log")
        # On a cluster the tables go where --tables says (a shared path); here, like local.
        analyze_s = _m2mc(["analyze", str(sweep_out / "runs"), "--out", str(analysis_out),
                           "--tables", str(analysis_out / "tables"), *on_cluster],
                          driver_env, tmp_path / "analyze.log")
    finally:
        cluster.__exit__(None, None, None)

    outcomes = json.loads((sweep_out / "sweep.json").read_text())["outcomes"]
    assert [o["ok"] for o in outcomes] == [True] * 4, outcomes
    # The reference: the same traces analysed by the embedded (local) session.
    started = time.monotonic()
    analyze([sweep_out / "runs"], tmp_path / "local-analysis", spark=spark, progress=False)
    local_s = time.monotonic() - started
    print(f"cluster: sweep {sweep_s:.1f}s, analyze {analyze_s:.1f}s; local analyze "
          f"{local_s:.1f}s (the tests' local session)")
    local = _documents(tmp_path / "local-analysis")
    assert _documents(analysis_out) == local
    assert _documents(sweep_out) == local  # the sweep's own analysis ran on the cluster
    verify, metrics = local
    assert verify["valid"] and verify["counts"]["runs"] == 4
    assert metrics["repair"]["repair_time"]["count"] > 0  # the metrics had work to do
