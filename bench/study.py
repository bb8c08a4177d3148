"""The delivery-delay study, end to end: the sweep, then its page (docs/study/README.md).

    python bench/study.py                       # the whole study on local[*]
    python bench/study.py --master spark://127.0.0.1:7077 --out /shared/study
    python bench/study.py --report-only         # the page again from out/study

Runs ``m2mc sweep docs/study/study.toml --out OUT`` (every simulation one Spark task,
then the pipeline over every trace), exactly as a user types it, and writes the page,
its plots and its tables into ``--docs`` from ``OUT`` (src/m2mc_pipeline/study/).
The sweep's wall time and the machine's load are kept in ``OUT/study-run.json``, so
``--report-only`` writes the same page. Exit status: the sweep's (0, or 1 when a
simulation failed or a check found a violation; the page says which), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "python bench/study.py"


def _machine() -> str:
    return f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}"


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def run_sweep(sweep_file: Path, out: Path, master: str | None, conf: list[str],
              resume: bool) -> int:
    """``m2mc sweep`` in a process of its own; its exit status. Records the wall time
    (with ``resume``, added to the earlier sessions' in OUT/study-run.json)."""
    cmd = [sys.executable, "-m", "m2mc.cli", "sweep", str(sweep_file), "--out", str(out)]
    if master:
        cmd += ["--master", master]
    for c in conf:
        cmd += ["--conf", c]
    if resume:
        cmd.append("--resume")
    out.mkdir(parents=True, exist_ok=True)
    record = out / "study-run.json"
    earlier = json.loads(record.read_text()).get("sessions", []) \
        if resume and record.is_file() else []
    started, load_before = time.time(), _load()
    status = subprocess.run(cmd, check=False).returncode
    session = {"command": " ".join(["m2mc", *cmd[3:]]), "status": status,
               "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(started)),
               "wall_seconds": round(time.time() - started, 1),
               "load_before": round(_load_or(load_before), 2),
               "load_after": round(_load_or(_load()), 2),
               "master": master or "local[*]"}
    sessions = [*earlier, session]
    record.write_text(json.dumps({
        "sessions": sessions, "machine": _machine(),
        "wall_seconds": round(sum(s["wall_seconds"] for s in sessions), 1)},
        indent=2) + "\n")
    return status


def partial(sweep_file: Path, out: Path, master: str | None, conf: list[str]) -> Path:
    """The runs a stopped sweep finished, analysed as the sweep would have (``m2mc
    analyze`` over them) into OUT/partial, with a sweep.json of those runs and the
    number planned; the page then says how far the sweep got."""
    from m2mc_pipeline.sweep import finished, outcomes_document, parse_spec

    spec = parse_spec(sweep_file)
    tasks = spec.tasks()
    done = [o for t in tasks if (o := finished(out / "runs", t)) is not None]
    dest = out / "partial"
    cmd = [sys.executable, "-m", "m2mc.cli", "analyze",
           *(str(out / "runs" / o.task) for o in done), "--out", str(dest), "--quiet"]
    if master:
        cmd += ["--master", master]
    for c in conf:
        cmd += ["--conf", c]
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(cmd, check=False)
    doc = outcomes_document(spec, done)
    doc["planned"] = len(tasks)
    (dest / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n")
    if (out / "study-run.json").is_file():
        (dest / "study-run.json").write_text((out / "study-run.json").read_text())
    return dest


def _load_or(value: float) -> float:
    return value if value == value else -1.0


def report(out: Path, docs: Path, sweep_file: Path) -> list[Path]:
    from m2mc_pipeline import study

    spec = tomllib.loads(sweep_file.read_text())
    scenario = tomllib.loads((sweep_file.parent / spec["scenarios"][0]).read_text())
    run = json.loads((out / "study-run.json").read_text()) \
        if (out / "study-run.json").is_file() else {}
    sessions = run.get("sessions", [])
    runtime = (f"{sessions[0]['started']}, {run['wall_seconds'] / 60:.0f} minutes wall for "
               "the sweep and its analysis (" + "; then ".join(
                   f"{s['wall_seconds'] / 60:.0f} min on {s['master']}, load average "
                   f"{s['load_before']} before and {s['load_after']} after"
                   for s in sessions) + "; the machine is shared with other jobs)"
               if sessions else "runtime not recorded")
    data = study.load(out, scenario)
    page = study.Page(command=COMMAND, sweep_file=str(sweep_file.relative_to(ROOT))
                      if sweep_file.is_relative_to(ROOT) else str(sweep_file),
                      runtime=runtime, machine=run.get("machine", _machine()))
    return study.write(data, docs, page, scenario)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", type=Path, default=ROOT / "docs" / "study" / "study.toml")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "study",
                    help="the sweep's output (traces, tables): large, not committed")
    ap.add_argument("--docs", type=Path, default=ROOT / "docs" / "study",
                    help="where the page, plots and tables go")
    ap.add_argument("--master", default=None, help="Spark master (default local[*])")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--report-only", action="store_true",
                    help="write the page from an earlier sweep in --out")
    ap.add_argument("--partial", action="store_true",
                    help="the page from the runs a stopped sweep in --out finished")
    ap.add_argument("--resume", action="store_true",
                    help="m2mc sweep --resume: keep the runs an interrupted sweep finished")
    args = ap.parse_args(argv)
    status = 0
    if args.partial:
        args.out = partial(args.sweep, args.out, args.master, args.conf)
    elif not args.report_only:
        status = run_sweep(args.sweep, args.out, args.master, args.conf, args.resume)
        if status == 2:
            return 2
    for path in report(args.out, args.docs, args.sweep):
        print(path)
    return status


if __name__ == "__main__":
    sys.exit(main())
