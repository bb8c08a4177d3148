"""``analyze()`` end to end on clean runs, and the command's input errors (exit status 2).

The same scenario run under S_b, causal and total order (three runs, three
loss rates) must come out valid, compared side by side, and reported in a
self-contained report.html.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from m2mc.cli import main


def _run(T: Any, order: str, seed: int) -> Any:
    """A and B answer each other; C gets the reply first and holds it (S_b/causal)."""
    tr = T(f"cmp-{order}").join(0.0, "g", order, "A", "B", "C")
    g = 0
    def gs() -> dict[str, int]:
        nonlocal g
        g += 1
        return {"gseq": g} if order == "total" else {}
    for k in range(3):
        base = 10.0 * k
        a, b = f"A:{k + 1}", f"B:{k + 1}"
        tr.send("A", base, "g", a, order=order, **gs())
        ga = g
        tr.get("B", base + 0.1, "g", a, **({"gseq": ga} if order == "total" else {}))
        tr.send("B", base + 0.2, "g", b, parent=a, order=order, **gs())
        gb = g
        extra_a = {"gseq": ga} if order == "total" else {}
        extra_b = {"gseq": gb} if order == "total" else {}
        tr.get("A", base + 0.3, "g", b, **extra_b)
        tr.ev("C", base + 0.3, "recv", "g", b)
        tr.get("C", base + 0.5 + 0.1 * seed, "g", a, **extra_a)
        tr.deliver("C", base + 0.5 + 0.1 * seed, "g", b, **extra_b)
    return tr


@pytest.mark.spark
def test_same_scenario_under_three_orderings(spark: Any, make_trace: Any, tmp_path: Path
                                             ) -> None:
    from m2mc_pipeline.api import analyze

    dirs = []
    for seed, (order, loss) in enumerate((("sb", 0.0), ("causal", 0.1), ("total", 0.2)), 1):
        dirs.append(_run(make_trace, order, seed).write(
            tmp_path / "traces" / order,
            {"scenario": "cmp", "seed": seed, "config": {"network": {"loss": loss}}}))
    out = tmp_path / "out"
    result = analyze(dirs, out, spark=spark, timeline_node="C", progress=False)

    assert result.valid
    verify = json.loads((out / "verify.json").read_text())
    assert set(verify) == {"valid", "checks", "counts"}
    assert verify["valid"] is True
    assert all(c == {"violations": 0, "examples": []} for c in verify["checks"].values())
    assert verify["counts"]["messages"] == 18
    assert verify["counts"]["nodes"] == 9  # three nodes in each of three runs

    metrics = json.loads((out / "metrics.json").read_text())
    side = metrics["comparison"]["delay_side_by_side"]
    assert set(side) == {"cmp"}
    assert set(side["cmp"]) == {"sb", "causal", "total"}
    # C held each reply from its receipt (base+0.3) to the question's (base+0.5+0.1*seed).
    assert side["cmp"]["sb"]["max"] == pytest.approx(0.3)
    assert side["cmp"]["total"]["max"] == pytest.approx(0.5)
    losses = {r["loss"] for r in metrics["comparison"]["latency_vs_loss"]}
    assert losses == {0.0, 0.1, 0.2}
    runs = {r["run"]: r for r in metrics["runs"]}
    assert runs["cmp-causal"]["scenario"] == "cmp" and runs["cmp-causal"]["seed"] == 2

    html = (out / "report.html").read_text()
    assert "VALID" in html
    assert html.count("data:image/png;base64,") >= 5  # delay, latency, loss, repair, timeline
    assert "http://" not in html and "https://" not in html  # readable offline
    assert "<h2>Message timeline</h2>" in html

    deliveries = pq.read_table(out / "tables" / "deliveries.parquet")
    assert deliveries.num_rows == 3 * 18  # every message delivered at all three nodes
    # No nack or sync_req anywhere: nothing to repair, no job run, no table written.
    assert metrics["repair"]["repair_time"]["count"] == 0
    assert metrics["repair"]["tables"] == {"repairs": None, "catchups": None}
    assert not (out / "tables" / "repairs.parquet").exists()


@pytest.mark.spark
def test_remote_inputs_read_gzipped_jsonl_too(spark: Any, make_trace: Any, tmp_path: Path
                                               ) -> None:
    """A remote directory is listed by Spark (recursive, a glob on names): *.jsonl and
    *.jsonl.gz are both trace files (docs/pipeline.md "Inputs")."""
    import gzip

    from m2mc_pipeline.load import _remote_frames

    d = _run(make_trace, "sb", 1).write(tmp_path / "t" / "plain")
    rows = (d / "C.jsonl").read_bytes()
    (d / "C.jsonl").unlink()
    (tmp_path / "t" / "zipped").mkdir()
    (tmp_path / "t" / "zipped" / "C.jsonl.gz").write_bytes(gzip.compress(rows))
    (tmp_path / "t" / "zipped" / "notes.txt").write_text("not a trace\n")
    df, _ = _remote_frames(spark, str(tmp_path / "t"), 0)
    got = {r["node"]: r["count"] for r in df.groupBy("node").count().collect()}
    assert got["C"] == rows.count(b"\n") and set(got) == {"A", "B", "C"}


@pytest.mark.spark
def test_remote_inputs_read_a_jsonl_file_with_a_parquet_copy_once(spark: Any, make_trace: Any,
                                                                   tmp_path: Path) -> None:
    """As local inputs: ``B.jsonl`` beside its copy ``B.parquet`` (a file), or beside
    ``C.parquet/`` (Spark's directory of part files), is read once, from the copy."""
    from m2mc_pipeline.load import _remote_frames
    from m2mc_pipeline.schema import TRACE_SCHEMA

    d = _run(make_trace, "sb", 1).write(tmp_path / "t" / "run")
    lines = {n: (d / f"{n}.jsonl").read_bytes().count(b"\n") for n in "ABC"}
    spark.read.schema(TRACE_SCHEMA).json(str(d / "C.jsonl")).write.parquet(str(d / "C.parquet"))
    spark.read.schema(TRACE_SCHEMA).json(str(d / "B.jsonl")).coalesce(1).write.parquet(
        str(tmp_path / "b-out"))
    (next((tmp_path / "b-out").glob("part-*.parquet"))).rename(d / "B.parquet")
    df, _ = _remote_frames(spark, str(tmp_path / "t"), 0)
    got = {r["node"]: r["count"] for r in df.groupBy("node").count().collect()}
    assert got == lines


def test_missing_directory_is_a_one_line_error(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["analyze", str(tmp_path / "nope"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert err.count("\n") == 0 and "no such directory" in err


def test_directory_without_trace_files_is_bad_input(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "run.json").write_text("{}")
    status = main(["analyze", str(tmp_path / "empty"), "--out", str(tmp_path / "out")])
    assert status == 2
    assert "no trace files" in capsys.readouterr().err


def test_m2mc_cli_does_not_import_pyspark() -> None:
    code = ("import sys, m2mc.cli, m2mc.cli.analyze, m2mc.cli.sweep; "
            "m2mc.cli.build_parser(); print('pyspark' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.spark
def test_the_command_with_verify_only_ends_its_own_spark_cleanly(make_trace: Any,
                                                                  tmp_path: Path) -> None:
    """``m2mc analyze --verify-only`` as a user runs it the first time on a machine: a
    process of its own, which writes the JVM's class-data archive and so stops Spark
    itself at the end (the first form of the option stopped it before releasing the
    cached trace, and exited 1 with a py4j connection error after a valid verdict)."""
    trace = _run(make_trace, "sb", 1).write(tmp_path / "trace", {"scenario": "cmp", "seed": 1})
    out = tmp_path / "out"
    fresh = {**os.environ, "M2MC_CACHE_DIR": str(tmp_path / "cache")}  # no archive yet
    done = subprocess.run([sys.executable, "-m", "m2mc.cli", "analyze", str(trace), "--out",
                           str(out), "--quiet", "--verify-only", "--master", "local[1]"],
                          capture_output=True, text=True, timeout=600, check=False, env=fresh)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].startswith("valid: ")
    assert json.loads((out / "verify.json").read_text())["valid"] is True
    assert not (out / "metrics.json").exists() and not (out / "report.html").exists()
