"""Entry points: ``analyze()`` (verify + measure + report) and ``sweep()`` (in sweep.py).

``analyze(paths, out)`` writes under ``out`` (docs/interfaces.md §3):
``verify.json`` (section 5), ``metrics.json``, ``report.html`` and Parquet tables
under ``out/tables/``. It never collects raw events: only counts, quantiles,
a few examples per check and a bounded timeline sample reach the driver.
"""

from __future__ import annotations

import functools
import json
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, SparkSession

from m2mc.errors import ConfigError
from m2mc_pipeline import checks, compare, plots, report
from m2mc_pipeline.checks.base import CheckResult, run_all
from m2mc_pipeline.load import QUICK_EVENTS, check_inputs, load
from m2mc_pipeline.metrics import Metrics, compute
from m2mc_pipeline.progress import Progress, run_with_bar
from m2mc_pipeline.session import end_with_process, get_session, is_local, stop_session
from m2mc_pipeline.ship import ship
from m2mc_pipeline.sweep import (
    Runner,
    SweepSpec,
    TaskOutcome,
    finished,
    outcomes_document,
    parse_spec,
    run_task,
)
from m2mc_pipeline.tables import Tables, build

TIMELINE_ROWS = 240


@dataclass(frozen=True, slots=True)
class AnalysisResult:
    """What ``analyze`` found; the same content as the files it wrote under ``out``."""

    valid: bool
    out: Path
    verify: dict[str, Any]
    metrics: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def violations(self) -> dict[str, int]:
        return {k: v["violations"] for k, v in self.verify["checks"].items()}

    @property
    def verify_path(self) -> Path:
        return self.out / "verify.json"

    @property
    def metrics_path(self) -> Path:
        return self.out / "metrics.json"

    @property
    def report_path(self) -> Path:
        return self.out / "report.html"


def run_checks(tb: Tables, self_delivery: bool = True, progress: Progress | None = None,
               orders: set[str] | None = None) -> tuple[dict[str, CheckResult], dict[str, int]]:
    """Every check of docs/interfaces.md §5, in the contract's order, and verify.json's
    message counts.

    ``orders``: the orderings groups asked for; an order check has nothing to look
    at when no group asked for its ordering, and is not run (0 violations).
    Every check, and the message counts, is counted in one Spark job: one plan,
    whose stages Spark runs side by side, so the fixed cost of a job (planning,
    scheduling, the wait for its slowest task) is paid once, not once per check.
    That matters most on small traces, where latency, not data, dominates.
    Only checks that found violations take further (small) jobs, for examples.
    """
    plans: dict[str, Callable[[], checks.Check]] = {
        "unexpected": lambda: checks.unexpected(tb),
        "duplicated": lambda: checks.duplicated(tb),
        "lost": lambda: checks.lost(tb, self_delivery),
        "sb_order": lambda: checks.sb_order(tb),
        "causal_order": lambda: checks.causal_order(tb),
        "total_order": lambda: checks.total_order(tb),
        "fifo_order": lambda: checks.fifo_order(tb),
    }
    needs = {"causal_order": "causal", "total_order": "total", "fifo_order": "fifo"}
    skipped = {name for name, order in needs.items()
               if orders is not None and order not in orders}
    if progress is not None:
        progress.stage("checks")
    tb.events.sparkSession.sparkContext.setJobDescription("m2mc analyze: checks")
    per_msg = tb.sends.groupBy("mk").count()  # sends are partitioned by mk: no shuffle
    results, tallies = run_all(
        [plans[name]() for name in checks.CHECK_NAMES if name not in skipped],
        {"messages": per_msg, "sent_twice": per_msg.filter(F.col("count") > 1)})
    for name in skipped:
        results[name] = CheckResult(name=name, violations=0)
    if progress is not None:
        for name in checks.CHECK_NAMES:
            n = results[name].violations
            progress.item(f"check {name}", None, f"{n} violations" if n else "ok")
    return {name: results[name] for name in checks.CHECK_NAMES}, tallies


def counts(nodes: Sequence[dict[str, Any]], tallies: Mapping[str, int]) -> dict[str, int]:
    """verify.json's counts, from the per-(run, node) rows of tables.survey and the
    message tallies of run_checks.

    ``messages`` counts distinct (run, group, mid) sent; ``sent_twice`` the messages
    with more than one ``send`` event (a writer's bug: each is counted once here).
    """
    live = [n for n in nodes if n["events"]]
    return {"events": sum(n["events"] for n in nodes), "messages": tallies["messages"],
            "nodes": len(live), "runs": len({n["run"] for n in live}),
            "malformed": sum(n["malformed"] for n in nodes),
            "unknown_events": sum(n["unknown"] for n in nodes),
            "sent_twice": tallies["sent_twice"]}


def verify_document(results: Mapping[str, CheckResult], counts_: Mapping[str, int]
                    ) -> dict[str, Any]:
    valid = all(r.violations == 0 for r in results.values())
    return {"valid": valid,
            "checks": {name: results[name].as_dict() for name in checks.CHECK_NAMES},
            "counts": dict(counts_)}


def _timeline(events: DataFrame, run_rows: Sequence[dict[str, Any]],
              metrics: Mapping[str, Any], node: str | None) -> tuple[list[dict[str, Any]],
                                                                      str | None, str | None]:
    """A bounded sample of one node's message events (for the timeline plot)."""
    if not run_rows:
        return [], None, None
    by_node = metrics["delivery_delay"]["by_node"].get("rows") or []
    if node is None and by_node:
        worst = max(by_node, key=lambda r: (r.get("p99") or 0.0, r.get("count") or 0))
        run, node = worst["run"], worst["node"]
    else:
        run = run_rows[0]["run"]
        if node is None:
            first = (events.filter((F.col("run") == run) & F.col("mid").isNotNull())
                     .select("node").orderBy("node").limit(1).collect())
            node = first[0]["node"] if first else None
        else:
            hit = (events.filter((F.col("node") == node) & F.col("mid").isNotNull())
                   .select("run").orderBy("run").limit(1).collect())
            run = hit[0]["run"] if hit else run
    if node is None:
        return [], None, None
    rows = (events.filter((F.col("run") == run) & (F.col("node") == node)
                          & ((F.col("mid").isNotNull() & F.col("event").isin(*plots._MARKERS))
                             | (F.col("mid").isNull() & F.col("event").isin(*plots.REQUESTS))))
            .orderBy("t", "pos").select("t", "event", "group", "mid").limit(TIMELINE_ROWS)
            .collect())
    return [r.asDict() for r in rows], node, run


def analyze(paths: Sequence[str | Path], out: str | Path, master: str | None = None, *,
            timeline_node: str | None = None, self_delivery: bool = True,
            tables: str | None = None, spark: SparkSession | None = None,
            conf: Mapping[str, str] | None = None, progress: bool = True,
            stop: bool = False, exiting: bool = False,
            verify_only: bool = False) -> AnalysisResult:
    """Verify and measure the traces under ``paths``; write the results under ``out``.

    ``master``: Spark master URL (default ``local[*]``; ignored when a session is
    active or given). ``timeline_node``: node whose timeline the report plots
    (default: the node with the worst p99 delivery delay). ``self_delivery``:
    whether a sender must deliver its own message (True: S_b delivers locally).
    ``tables``: where Parquet tables go (default ``out/tables``; on a cluster give
    a shared path such as ``hdfs://...``, otherwise they are skipped).
    ``stop``: stop the Spark session at the end if this call started it.
    ``exiting``: the caller exits right after (the m2mc commands): a session this
    call started ends with the process (session.end_with_process).
    ``verify_only``: run the checks and write ``verify.json`` (and the examples of
    any violation), no metrics, report or other tables: the verdict alone, in about
    half the time on a small trace (``metrics`` is then empty).
    Raises ``m2mc.errors.ConfigError`` on bad input (missing directory, no trace).
    """
    started = time.monotonic()
    estimate = check_inputs(paths)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    owned = spark is None and SparkSession.getActiveSession() is None
    quick = estimate is not None and estimate <= QUICK_EVENTS
    pr = Progress("analyze", enabled=progress)
    if owned:
        pr.stage("start Spark")
        # The report's matplotlib is imported while the JVM starts (Python waits then).
        threading.Thread(target=plots.load_matplotlib, daemon=True).start()
    session = spark or get_session(master, conf=conf, log_path=out_dir / "spark.log",
                                   quick=quick, ends_jvm=stop or exiting)
    pr.sc = session.sparkContext
    pr.stage("load traces")
    loaded = load(session, [str(p) for p in paths])
    tables_at = _tables_location(session, out_dir, tables, pr)
    try:
        tb = build(loaded.events)
        tb.violations_dir = tables_at
        nodes = tb.node_rows
        if sum(n["events"] for n in nodes) == 0:
            raise ConfigError("the trace files hold no well-formed event")
        orders = tb.orders_by_run()
        asked = {o for v in orders.values() for o in v}
        m: Metrics | None = None
        run_rows: list[dict[str, Any]] = []
        if verify_only:
            results, tallies = run_checks(tb, self_delivery, pr, asked)
        else:
            run_rows = compare.runs(nodes, orders, loaded.scopes)
            info = compare.run_info(session, run_rows)
            if quick:
                results, tallies, m = _side_by_side(tb, self_delivery, asked, tables_at, info, pr)
            else:
                results, tallies = run_checks(tb, self_delivery, pr, asked)
                m = compute(tb, tables_at, info, pr)
        verify = verify_document(results, counts(nodes, tallies))
        (out_dir / "verify.json").write_text(json.dumps(verify, indent=2) + "\n")
        metrics: dict[str, Any] = {}
        if m is not None:
            metrics = _write_metrics_and_report(tb, m, run_rows, verify, out_dir,
                                                self_delivery, timeline_node, pr)
        tb.release()
    finally:
        loaded.events.unpersist()
    bad = sum(r.violations for r in results.values())
    pr.done("valid" if verify["valid"] else f"{bad} violations")
    timings = dict(pr.timings)
    timings["total"] = round(time.monotonic() - started, 3)
    if owned and exiting:
        end_with_process(session)
    elif stop and owned:
        stop_session(session)
    return AnalysisResult(valid=bool(verify["valid"]), out=out_dir, verify=verify,
                          metrics=metrics, timings=timings)


def _write_metrics_and_report(tb: Tables, m: Metrics, run_rows: list[dict[str, Any]],
                              verify: dict[str, Any], out_dir: Path, self_delivery: bool,
                              timeline_node: str | None, pr: Progress) -> dict[str, Any]:
    """metrics.json and report.html (what ``verify_only`` leaves out); the metrics."""
    metrics = {**m.summary, "runs": run_rows, "self_delivery": self_delivery}
    metrics["comparison"]["repair_vs_loss"] = compare.repair_vs_loss(
        m.summary["overhead"]["by_run"], run_rows)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    pr.stage("report")
    tl_rows, tl_node, tl_run = _timeline(tb.events, run_rows, metrics, timeline_node)
    comparison = metrics["comparison"]
    pictures = {
        "delay_by_ordering": plots.delay_by_ordering(m.cdf_delay),
        "latency_by_ordering": plots.delay_by_ordering(m.cdf_latency, "end-to-end latency"),
        "latency_vs_loss": plots.latency_vs_loss(comparison["latency_vs_loss"]),
        "repair_overhead": plots.repair_overhead(comparison["repair_vs_loss"]),
        "throughput": plots.throughput(m.throughput, metrics["throughput"]["bucket_s"]),
        "timeline": plots.timeline(tl_rows, tl_node or "", tl_run or ""),
    }
    report.write(out_dir / "report.html", verify, metrics, pictures)
    return metrics


def _side_by_side(tb: Tables, self_delivery: bool, orders: set[str], tables_at: str | None,
                  info: DataFrame | None, pr: Progress
                  ) -> tuple[dict[str, CheckResult], dict[str, int], Metrics]:
    """The checks in a thread of their own while the metrics run here, their independent
    parts side by side too (compute(parallel=True)); small traces only.

    On a small trace every Spark job is mostly latency: the driver planning it, a few
    tiny tasks, the wait for the slowest. One query at a time leaves a core idle most
    of the time; two at once overlap one's planning with the other's tasks. (On a large
    trace both would fight for the cores and the memory: one after the other there.)
    """
    pr.stage("checks and metrics, side by side")
    took: dict[str, float] = {}

    def checks_job() -> tuple[dict[str, CheckResult], dict[str, int]]:
        t0 = time.monotonic()
        try:
            return run_checks(tb, self_delivery, None, orders)
        finally:
            took["checks"] = time.monotonic() - t0

    with ThreadPoolExecutor(1, thread_name_prefix="m2mc-checks") as pool:
        pending = pool.submit(checks_job)
        t0 = time.monotonic()
        try:
            m = compute(tb, tables_at, info, parallel=True)
        finally:
            took["metrics"] = time.monotonic() - t0
            results, tallies = pending.result()  # waited for even if the metrics failed
    for name in checks.CHECK_NAMES:
        n = results[name].violations
        pr.item(f"check {name}", None, f"{n} violations" if n else "ok")
    pr.item("checks", took["checks"])
    pr.item("metrics", took["metrics"])
    return {name: results[name] for name in checks.CHECK_NAMES}, tallies, m


def _tables_location(spark: SparkSession, out_dir: Path, tables: str | None,
                     pr: Progress) -> str | None:
    if tables is not None:
        return tables.rstrip("/")
    if is_local(spark.sparkContext.master or ""):
        local = out_dir / "tables"
        # A check clean now must not leave the violations of an earlier run behind.
        for stale in local.glob("violations_*.parquet"):
            shutil.rmtree(stale, ignore_errors=True)
        return str(local)
    pr.note("cluster master and no --tables: Parquet tables skipped "
            "(give a shared path, e.g. --tables hdfs:///m2mc/tables)")
    return None


@dataclass(frozen=True, slots=True)
class SweepResult:
    """Outcome of every simulation of a sweep, and the analysis of those that ran."""

    out: Path
    outcomes: list[TaskOutcome]
    analysis: AnalysisResult | None

    @property
    def failed(self) -> list[TaskOutcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def ok(self) -> bool:
        """No simulation failed and the traces pass every check."""
        return not self.failed and self.analysis is not None and self.analysis.valid


def sweep(spec: str | Path | SweepSpec, out: str | Path, master: str | None = None, *,
          runner: Runner | None = None, spark: SparkSession | None = None,
          conf: Mapping[str, str] | None = None, progress: bool = True, stop: bool = False,
          timeline_node: str | None = None, self_delivery: bool = True,
          analyze_runs: bool = True, exiting: bool = False, resume: bool = False
          ) -> SweepResult:
    """Run the grid of ``spec`` (a sweep TOML file or a SweepSpec) as Spark tasks, then analyse.

    Writes ``out/runs/<task>/`` (scenario.toml and the trace of each simulation),
    ``out/sweep.json`` (every task with its seed, parameters, status, error) and
    everything ``analyze`` writes. ``runner`` replaces ``m2mc sim`` (tests, other
    simulators); it must be picklable. On a cluster ``out`` must be a directory
    every executor shares (NFS or similar): each task writes its trace there, and
    the Parquet tables go to ``out/tables`` as in local mode. The executors' Python
    need not have m2mc: it is shipped to them (ship.py). ``resume``: a task whose run
    an earlier sweep into ``out`` finished (sweep.finished) is not run again; its
    outcome is that run's.
    """
    sweep_spec = spec if isinstance(spec, SweepSpec) else parse_spec(spec)
    out_dir = Path(out)
    runs_dir = out_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    owned = spark is None and SparkSession.getActiveSession() is None
    session = spark or get_session(master, conf=conf, log_path=out_dir / "spark.log",
                                   ends_jvm=stop or exiting)
    sc = session.sparkContext
    # On a cluster the executors' Python need not have m2mc: send it along (ship.py).
    ship(sc)
    tasks = sweep_spec.tasks()
    kept = {t.task: o for t in tasks if resume and (o := finished(runs_dir, t)) is not None}
    todo = [t for t in tasks if t.task not in kept]
    job = functools.partial(run_task, runs_dir=str(runs_dir.resolve()),
                            timeout=sweep_spec.timeout, runner=runner or sweep_spec.runner())
    ran: list[TaskOutcome] = []
    if todo:
        rdd = sc.parallelize(todo, len(todo))
        ran = run_with_bar(
            sc, f"m2mc-sweep-{id(tasks)}", lambda: rdd.map(job).collect(), len(todo),
            f"sweep: {len(todo)} simulations" + (f" ({len(kept)} kept)" if kept else ""),
            enabled=progress)
    by_task = {**kept, **{o.task: o for o in ran}}
    outcomes = [by_task[t.task] for t in tasks]
    (out_dir / "sweep.json").write_text(
        json.dumps(outcomes_document(sweep_spec, outcomes), indent=2) + "\n")
    pr = Progress("sweep", enabled=progress)
    for o in outcomes:
        if not o.ok:
            pr.note(f"FAILED {o.task}: scenario {Path(o.scenario).name} seed {o.seed} "
                    f"params {json.dumps(o.params, sort_keys=True)}: {o.error}")
    done = [runs_dir / o.task for o in outcomes if o.ok]
    analysis = None
    if done and analyze_runs:  # False: the caller analyses the runs with other traces
        # On a cluster OUT is shared by every executor already: the tables go there too.
        tables = None if is_local(sc.master or "") else str(out_dir.resolve() / "tables")
        analysis = analyze(done, out_dir, spark=session, timeline_node=timeline_node,
                           self_delivery=self_delivery, progress=progress, tables=tables)
    if owned and exiting:
        end_with_process(session)
    elif stop and owned:
        stop_session(session)
    return SweepResult(out=out_dir, outcomes=outcomes, analysis=analysis)
