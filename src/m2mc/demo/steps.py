"""The steps of ``m2mc demo`` beyond M2MP: real group nodes, a simulator sweep, the pipeline.

They append themselves to :data:`m2mc.cli.demo.STEPS` in :func:`register`, so the
demo runs, in order: M2MP multicast, the daemon, threaded-chat bots on real
nodes (S_b, causal and total groups over loopback multicast), a comparison sweep
of the simulator run as Spark tasks, and the pipeline over all of it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from m2mc import __version__
from m2mc.cli.demo import Child, DemoContext, StepResult, add_step, random_multicast_url
from m2mc.trace.writer import write_run_json

BOTS = 4
MESSAGES_PER_GROUP = 15
# Embedded defaults: the scenario ships inside the package, so the demo runs from a wheel.
SCENARIO = Path(__file__).resolve().parent.parent / "data" / "demo-compare.toml"
SWEEP = {
    "scenarios": [str(SCENARIO)],
    "seeds": [1],
    "timeout": 300,
    "grid": {"groups.0.order": ["sb", "causal", "total"], "domains.lan.loss": [0.0, 0.2]},
}


def _out(ctx: DemoContext) -> Path:
    if ctx.out is None:  # the demo always keeps its evidence somewhere
        ctx.out = Path("demo-out")
    ctx.out.mkdir(parents=True, exist_ok=True)
    return ctx.out


def step_chat_bots(ctx: DemoContext) -> StepResult:
    """Four bot processes chat in an S_b, a causal and a total-order group over multicast."""
    out = _out(ctx)
    trace = out / "real" / "trace"
    trace.mkdir(parents=True, exist_ok=True)
    for stale in trace.glob("*"):
        stale.unlink()
    url = random_multicast_url(ctx.rng)
    run_id = f"demo-real-{int(time.time())}"
    write_run_json(out / "real" / "run.json", {
        "run": run_id, "scenario": "demo: threaded-chat bots on loopback multicast",
        "seed": None, "version": __version__, "orderings": ["sb", "causal", "total"],
        "start": time.time(), "channel": url, "bots": BOTS})
    seed = ctx.rng.randrange(1 << 30)
    bots = [Child(["--pid", f"bot{i}", "--peers", str(BOTS), "--count",
                   str(MESSAGES_PER_GROUP), "--channel", url, "--trace-dir", str(trace),
                   "--run", run_id, "--seed", str(seed), "--deadline", "60"],
                  module="m2mc.demo.bots", env=ctx.env) for i in range(1, BOTS + 1)]
    try:
        statuses = [bot.finish(90) for bot in bots]
    finally:
        for bot in bots:
            bot.kill()
    ok = all(status == 0 for status in statuses)
    delivered = sum(1 for f in trace.glob("*.jsonl")
                    for line in f.read_text().splitlines() if '"event":"deliver"' in line)
    errors = [line for bot in bots for line in bot.stderr[-3:]] if not ok else []
    return StepResult(
        "chat-bots", ok,
        f"{BOTS} bot processes, {MESSAGES_PER_GROUP} messages each in an S_b, a causal and a "
        f"total-order group: {delivered} deliveries traced under {trace}",
        details={"channel": url, "exit": statuses, "errors": errors})


def step_pipeline(ctx: DemoContext) -> StepResult:
    """A simulator comparison sweep as Spark tasks, then the pipeline over everything."""
    out = _out(ctx)
    try:
        from m2mc_pipeline.api import analyze, sweep
        from m2mc_pipeline.session import get_session, stop_session
        from m2mc_pipeline.sweep import spec_from_dict
    except ModuleNotFoundError as exc:
        return StepResult("pipeline", False,
                          f"needs the pipeline extra ({exc.name}): pip install 'm2mc[all]'")
    spec = spec_from_dict(SWEEP)
    session = get_session(None, log_path=out / "spark.log")
    try:
        swept = sweep(spec, out / "sweep", spark=session, analyze_runs=False)
        runs = sorted(p for p in (out / "sweep" / "runs").iterdir() if (p / "run.json").exists())
        inputs: list[Path] = [out / "real", *runs]
        result = analyze(inputs, out, spark=session)
    finally:
        stop_session(session)
    checks = result.verify["checks"]
    bad = {name: c["violations"] for name, c in checks.items() if c["violations"]}
    delays = _delay_summary(result.metrics)
    verdict = "VALID: every check passed" if result.valid else f"VIOLATIONS: {bad}"
    failed = [o.task for o in swept.outcomes if not o.ok]
    summary = (f"{len(swept.outcomes)} simulations ({len(failed)} failed) + the real run; "
               f"{result.verify['counts']['events']} events; {verdict}; {delays}; "
               f"{_repair_summary(result.metrics)}; report: {out / 'report.html'}")
    return StepResult("pipeline", result.valid and not failed, summary,
                      details={"verify": result.verify, "failed_runs": failed})


def _delay_summary(metrics: dict[str, Any]) -> str:
    """'delivery delay p99: sb 0.0 ms, causal ...' from metrics.json, best effort."""
    rows = metrics.get("delivery_delay", {}).get("by_order")
    if not isinstance(rows, list):
        return "delivery delay: see metrics.json"
    parts = []
    for row in rows:
        if isinstance(row, dict) and "order" in row and "p99" in row:
            parts.append(f"{row['order']} {1000 * float(row['p99'] or 0):.1f} ms")
    return "delivery delay p99 by ordering: " + ", ".join(parts) if parts else "see metrics.json"


def _repair_summary(metrics: dict[str, Any]) -> str:
    """'time to repair p50 ... (n messages), catch-up max ...' from metrics.json, best effort."""
    rep = metrics.get("repair")
    if not isinstance(rep, dict):
        return "repair: see metrics.json"
    t, c = rep.get("repair_time") or {}, rep.get("catchup_time") or {}

    def ms(value: Any) -> str:
        return f"{1000 * float(value):.0f} ms" if isinstance(value, int | float) else "-"

    return (f"time to repair p50 {ms(t.get('p50'))}, p99 {ms(t.get('p99'))} "
            f"({t.get('count', 0)} repaired messages); catch-up "
            f"max {ms(c.get('max'))} ({c.get('count', 0)} episodes with history)")


def register() -> None:
    add_step("chat-bots", step_chat_bots)
    add_step("pipeline", step_pipeline)


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps({"steps": ["chat-bots", "pipeline"]}), file=sys.stderr)
