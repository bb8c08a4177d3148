"""m2mc demo: the tour passes end to end, and later features can append steps."""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from m2mc.cli import demo
from m2mc.demo import tour
from m2mc.demo.tour import DemoContext, StepResult, run_steps

pytestmark = pytest.mark.multiprocess


def test_demo_passes_and_writes_its_results(tmp_path: Path,
                                            isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "m2mc.cli", "demo", "--quick", "--out", str(out)],
                          cwd=tmp_path, env=isolated_env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    report = json.loads((out / "demo.json").read_text())
    assert report["ok"] is True
    assert [step["name"] for step in report["steps"]][:2] == ["multicast", "daemon"]
    assert "steps passed" in done.stdout.decode()


def test_a_failing_step_makes_the_demo_exit_1(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    ran: list[str] = []

    def fine(ctx: DemoContext) -> StepResult:
        ran.append("fine")
        return StepResult("fine", True, "all good")

    def lost(ctx: DemoContext) -> StepResult:
        ran.append("lost")
        return StepResult("lost", False, "a message did not arrive")

    monkeypatch.setattr(tour, "STEPS", [("fine", fine)])
    tour.add_step("lost", lost)
    assert demo.run(argparse.Namespace(out=str(tmp_path), seed=1, quick=True)) == 1
    assert ran == ["fine", "lost"]
    report = json.loads((tmp_path / "demo.json").read_text())
    assert [s["ok"] for s in report["steps"]] == [True, False]


def test_a_step_that_times_out_is_reported_not_raised() -> None:
    def slow(ctx: DemoContext) -> StepResult:
        raise TimeoutError("listener never said it was listening")

    lines: list[str] = []
    [result] = run_steps(DemoContext(out=None, rng=random.Random(1)), [("slow", slow)],
                         echo=lines.append)
    assert not result.ok and "never said" in result.summary
    assert lines[0].startswith("[FAIL] slow")
