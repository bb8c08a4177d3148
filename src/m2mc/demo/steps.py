"""The steps of ``m2mc demo`` beyond M2MP: real group nodes, a simulator sweep, the pipeline.

They append themselves to :data:`m2mc.demo.tour.STEPS` in :func:`register`, so the
demo runs, in order: M2MP multicast, the daemon, the chat on real nodes (a
threaded chat in an S_b group between ``m2mc chat --script`` participants, and
bots in a causal and a total-order group, all over loopback multicast), a
comparison sweep of the simulator run as Spark tasks, and the pipeline over all of it.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from m2mc import __version__
from m2mc.demo.tour import Child, DemoContext, StepResult, add_step, random_multicast_url
from m2mc.kinds import Order
from m2mc.trace.writer import write_run_json

BOTS = 4
MESSAGES_PER_GROUP = 15
CHATTERS = ("alice", "bob", "carol", "dave")
CHAT_GROUP = "demo threaded chat"
ROUNDS = 5
"""Messages each chat participant writes; the tree holds ``ROUNDS * len(CHATTERS)``."""
_OPENERS = ("Did you visit Delhi?", "Did you visit Chennai?", "Anyone been to Mumbai?",
            "Where should we go in March?")
_ANSWERS = ("Yes, last winter.", "No, the train was full.", "The food was great.",
            "Bring a jacket for the evenings.")
_FOLLOW_UPS = ("Which gate did you take?", "Next time then!", "Any hotel to recommend?",
               "Count me in.")
_MORE = ("Lahori Gate, the main one.", "I will book early.", "The one near the station.",
         "Me too.")
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


def chat_scripts(names: tuple[str, ...] = CHATTERS) -> dict[str, str]:
    """The ``m2mc chat --script`` of each participant: the first creates the group, the
    others join it; everyone waits for everyone, then each round each writes once (a
    new thread, then answers to messages picked by their number on screen) and waits
    for the round to be complete; the last round is a goodbye under the first message,
    after which nobody needs anything from anyone, and they leave."""
    n = len(names)
    scripts = {}
    for i, name in enumerate(names):
        steps = [f"create {CHAT_GROUP}" if i == 0 else f"join {CHAT_GROUP}",
                 f"wait_members {n}",
                 f"send {_OPENERS[i % len(_OPENERS)]}", f"wait_for {n}",
                 f"reply {(i + 1) % n + 1} {_ANSWERS[i % len(_ANSWERS)]}", f"wait_for {2 * n}",
                 f"reply {(3 * i + 2) % (2 * n) + 1} {_FOLLOW_UPS[i % len(_FOLLOW_UPS)]}",
                 f"wait_for {3 * n}",
                 f"reply {(5 * i + 4) % (3 * n) + 1} {_MORE[i % len(_MORE)]}",
                 f"wait_for {4 * n}",
                 f"reply 1 Thanks all, {name} signing off.", f"wait_for {ROUNDS * n}",
                 "leave"]
        scripts[name] = "\n".join(steps) + "\n"
    return scripts


def start_chatters(ctx: DemoContext, where: Path, url: str, trace: Path,
                   run_id: str) -> dict[str, Child]:
    """One ``m2mc chat --script`` process per participant (fresh data directories)."""
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    children = {}
    for i, (name, script) in enumerate(chat_scripts().items(), start=1):
        (where / f"{name}.txt").write_text(script, encoding="utf-8")
        children[name] = Child(
            ["chat", "--nick", name, "--device-id", f"chat{i}", "--data-dir",
             str(where / name), "--channel", url, "--script", str(where / f"{name}.txt"),
             "--transcript", str(where / f"{name}.json"), "--step-timeout", "60",
             "--trace-dir", str(trace), "--run-id", run_id], env=ctx.env)
    return children


def compare_transcripts(where: Path, names: tuple[str, ...] = CHATTERS
                        ) -> tuple[bool, str]:
    """Do the participants' transcripts hold the same thread tree, with every message?"""
    trees = []
    for name in names:
        try:
            transcript = json.loads((where / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return False, f"no transcript from {name} ({exc})"
        trees.append(transcript["tree"])
    expected = ROUNDS * len(names)
    count = _tree_size(trees[0])
    if any(tree != trees[0] for tree in trees[1:]):
        return False, f"the {len(names)} transcripts hold different thread trees"
    if count != expected:
        return False, f"the thread tree holds {count} of {expected} messages"
    return True, (f"the same thread tree of {count} messages (depth {_tree_depth(trees[0])}) "
                  f"in all {len(names)} transcripts")


def _tree_size(nodes: list[dict[str, Any]]) -> int:
    return sum(1 + _tree_size(node["children"]) for node in nodes)


def _tree_depth(nodes: list[dict[str, Any]]) -> int:
    return max((1 + _tree_depth(node["children"]) for node in nodes), default=0)


def step_chat_bots(ctx: DemoContext) -> StepResult:
    """A threaded chat between four ``m2mc chat --script`` processes in an S_b group, and
    four bot processes in a causal and a total-order group, over loopback multicast."""
    out = _out(ctx)
    trace = out / "real" / "trace"
    trace.mkdir(parents=True, exist_ok=True)
    for stale in trace.glob("*"):
        stale.unlink()
    url = random_multicast_url(ctx.rng)
    run_id = f"demo-real-{int(time.time())}"
    write_run_json(out / "real" / "run.json", {
        "run": run_id, "scenario": "demo: threaded chat (m2mc chat --script) and chat bots "
                                   "on loopback multicast",
        "seed": None, "version": __version__, "orderings": [Order.SB, Order.CAUSAL, Order.TOTAL],
        "start": time.time(), "channel": url, "bots": BOTS, "chatters": list(CHATTERS)})
    seed = ctx.rng.randrange(1 << 30)
    chat_dir = out / "real" / "chat"
    bots = [Child(["--pid", f"bot{i}", "--peers", str(BOTS), "--count",
                   str(MESSAGES_PER_GROUP), "--channel", url, "--trace-dir", str(trace),
                   "--run", run_id, "--seed", str(seed), "--deadline", "60"],
                  module="m2mc.demo.bots", env=ctx.env) for i in range(1, BOTS + 1)]
    chatters = start_chatters(ctx, chat_dir, url, trace, run_id)
    children = [*bots, *chatters.values()]
    try:
        bot_statuses = [bot.finish(90) for bot in bots]
        chat_statuses = [chatter.finish(90) for chatter in chatters.values()]
    finally:
        for child in children:
            child.kill()
    same, tree_summary = compare_transcripts(chat_dir)
    ok = all(status == 0 for status in [*bot_statuses, *chat_statuses]) and same
    delivered = sum(1 for f in trace.glob("*.jsonl")
                    for line in f.read_text().splitlines() if '"event":"deliver"' in line)
    errors = [line for child in children for line in child.stderr[-3:]] if not ok else []
    return StepResult(
        "chat-bots", ok,
        f"{len(CHATTERS)} 'm2mc chat --script' participants in an S_b group: {tree_summary}; "
        f"{BOTS} bots, {MESSAGES_PER_GROUP} messages each in a causal and a total-order "
        f"group; {delivered} deliveries traced under {trace}",
        details={"channel": url, "exit": {"bots": bot_statuses, "chat": chat_statuses},
                 "transcripts": str(chat_dir), "errors": errors})


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
