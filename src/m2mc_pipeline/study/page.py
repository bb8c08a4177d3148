"""The study's page: README.md with its findings, figures, tables and costs.

Everything on it is computed from the cells (cells.py) and the scenario file, so the
one command that makes the sweep makes the page (bench/study.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from m2mc_pipeline.study.cells import (
    BASE,
    FACTORS,
    LABELS,
    LOSS,
    MOBILE,
    NAMES,
    ORDERS,
    REPLY,
    SIZE,
    Study,
    _fmt,
    markdown_table,
    ms,
    slice_rows,
    slice_table,
    write_csv,
)
from m2mc_pipeline.study.figures import figures, held_figure, ratio_figure


@dataclass(frozen=True, slots=True)
class Page:
    """What the page says besides the numbers: how it was made."""

    command: str
    sweep_file: str
    runtime: str
    machine: str


def write(study: Study, docs: str | Path, page: Page, scenario: Mapping[str, Any]
          ) -> list[Path]:
    """The page, its plots and tables under ``docs``; the files written."""
    docs = Path(docs)
    docs.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    rows = study.rows()
    write_csv(docs / "cells.csv", rows)
    write_csv(docs / "runs.csv", study.runs)
    written += [docs / "cells.csv", docs / "runs.csv"]
    pictures: dict[str, bytes | None] = {f.name: f.draw(study) for f in figures(study)}
    sizes = sorted({r[LABELS[SIZE]] for r in rows})
    pictures["held_vs_loss"] = held_figure(study, tuple(s for s in sizes if s <= 100)[:3])
    factorial = max((s for s in sizes if len(slice_rows(study, REPLY, {SIZE: s})) > 3),
                    default=None, key=lambda s: len(slice_rows(study, LOSS, {SIZE: s})))
    pictures["sb_share"] = ratio_figure(study, factorial) if factorial is not None else None
    for name, png in pictures.items():
        target = docs / f"{name}.png"
        if png is None:
            target.unlink(missing_ok=True)
            continue
        target.write_bytes(png)
        written.append(target)
    text = render(study, page, {k for k, v in pictures.items() if v is not None},
                  factorial, scenario)
    (docs / "README.md").write_text(text)
    written.append(docs / "README.md")
    return written


def render(study: Study, page: Page, pictures: set[str], factorial: float | None,
           scenario: Mapping[str, Any]) -> str:
    rows = study.rows()
    sizes = sorted({r[LABELS[SIZE]] for r in rows})
    small = [s for s in sizes if s <= 100][:3]
    cmd = page.command
    parts = [HEADER.format(command=cmd, sweep=page.sweep_file, runtime=page.runtime,
                           machine=page.machine, tasks=study.tasks, failed=study.failed,
                           runs=len(study.runs), cells=len(rows), events=study.events,
                           sim_hours=study.sim_seconds / 3600,
                           verdict=_verdict(study), stopped=_stopped(study))]
    parts.append(findings(study))
    parts.append("## The figures and their tables\n")
    for fig in figures(study):
        if fig.name not in pictures:
            continue
        fixed = ", ".join(f"{LABELS[f]} {_fmt(f, v)}" for f, v in fig.fixed.items())
        parts.append(f"### {fig.title[0].upper()}{fig.title[1:]}\n\n"
                     f"![{fig.title}]({fig.name}.png)\n\n"
                     f"Mean (solid) and p99 (dashed) delivery delay, {fixed}; one panel "
                     f"per {LABELS[fig.panel]}. Produced by `{cmd}` "
                     f"(`Figure({fig.name!r})` in src/m2mc_pipeline/study/figures.py).\n")
        for pv in fig.panels:
            parts.append(f"{LABELS[fig.panel].capitalize()} {_fmt(fig.panel, pv)} (delay in "
                         f"ms; held: share of deliveries with any delay):\n\n"
                         + slice_table(study, fig.vary, {**fig.fixed, fig.panel: pv}) + "\n")
    if "held_vs_loss" in pictures:
        parts.append("### Deliveries that waited at all\n\n![held](held_vs_loss.png)\n\n"
                     f"Share of deliveries with a delay above zero, reply rate "
                     f"{BASE[REPLY]:g}, mobile share {BASE[MOBILE]:g}, group sizes "
                     f"{', '.join(str(int(s)) for s in small)}. Produced by `{cmd}` "
                     "(`held_figure` in src/m2mc_pipeline/study/figures.py).\n")
    if "sb_share" in pictures and factorial is not None:
        parts.append("### Loss and reply rate together\n\n![S_b share](sb_share.png)\n\n"
                     f"S_b's mean delivery delay as a percentage of causal's and of total "
                     f"order's in the same cell, group size {int(factorial)}, every loss "
                     f"rate and reply rate of the grid, mobile share {BASE[MOBILE]:g} "
                     f"(blank: the other ordering's mean is 0). Produced by `{cmd}` "
                     "(`ratio_figure` in src/m2mc_pipeline/study/figures.py).\n")
    parts.append(cost_section(study))
    parts.append(FOOTER.format(cells=len(rows), scenario=describe(scenario)))
    return "\n".join(parts)


def _stopped(study: Study) -> str:
    if study.planned <= study.tasks:
        return ""
    return (f"\n\n**This page is from {study.tasks} of the {study.planned} simulations "
            "study.toml plans**: the sweep was stopped when the time budget for it ran "
            "out, with every grid point run on its first seeds (a grid's points are run "
            "seed by seed), and its finished runs were analysed as the sweep would have "
            "(`python bench/study.py --partial`). `python bench/study.py --resume` runs "
            "the rest and redraws this page. The counts per cell are in the tables and "
            "in cells.csv.")


def _verdict(study: Study) -> str:
    if study.valid:
        return ("`m2mc analyze` found no violation in any run: every check of "
                "docs/interfaces.md §5 (lost, duplicated, S_b, causal and total order) "
                "passed")
    bad = ", ".join(f"{k} {v}" for k, v in study.violations.items() if v)
    return f"`m2mc analyze` found violations ({bad}): see verify.json of the sweep"


HEADER = """# The study: delivery delay of S_b against causal and total order

*This page is generated: do not edit it by hand. Regenerate it, its plots and its tables
with one command, from the top of the repository:*

```sh
{command}
```

The command runs `m2mc sweep {sweep}` (every simulation a Spark task; add
`--master spark://HOST:PORT` to run the same sweep on a standalone cluster, as
tests/pipeline/test_cluster.py does), which analyses every trace with the pipeline, then
writes this page from the sweep's output (src/m2mc_pipeline/study/). Last run:
{runtime}, on {machine}.

**The sweep:** {tasks} simulations ({failed} failed), {runs} runs analysed, {cells} cells
(an ordering at one point of the grid, seeds pooled), {events:,} trace events,
{sim_hours:.1f} hours of simulation summed over the tasks. {verdict}.{stopped}
Every cell's counts (runs, seeds, deliveries) are in [cells.csv](cells.csv); every run's
in [runs.csv](runs.csv).
"""

FOOTER = """## How the numbers are made

- **Delivery delay** is the pipeline's (docs/pipeline.md, "Metrics"): at each node, the
  first `deliver` of a message minus its first `recv`, the time the message waited in
  the ordering layer. It is the quantity seeds/003 (abstract, I) says S_b minimises. A
  sender's own message has none. **Latency** (send to first delivery at another node)
  is in cells.csv as well.
- A **cell** pools every first delivery of every run of one ordering at one grid point;
  its mean and nearest-rank p50/p90/p99 are over those deliveries. `held` is the share
  with a delay above zero. `run_mean_min` and `run_mean_max` in cells.csv are the
  smallest and largest per-run mean over the cell's seeds: the spread between seeds.
- **The scenario** ([scenario.toml](scenario.toml), with [study.toml](study.toml)
  setting the factors): {scenario}
- All {cells} cells are in [cells.csv](cells.csv); the tables above are slices of it.
"""


def describe(scenario: Mapping[str, Any]) -> str:
    """The scenario's fixed values, in a sentence, from the file itself."""
    run = scenario.get("run", {})
    group = (scenario.get("groups") or [{}])[0]
    cell = (scenario.get("cells") or [{}])[0]
    mob = scenario.get("nodes", {}).get("mobility", {})
    area = scenario.get("mobility", {}).get("area", [0, 0, 100, 100])
    side = area[2] - area[0]
    covered = math.pi * float(cell.get("radius", 0)) ** 2 / (side * (area[3] - area[1]))
    delay = scenario.get("domains", {}).get("lan", {}).get("delay", {})
    return (f"one group, created by the first node at t = 0 and joined by every other on "
            f"discovery (within 20 ms); from t = {group.get('start', 0):g} s, "
            f"{group.get('messages')} messages at {group.get('rate'):g} a second from "
            f"members chosen at random, each a reply with the swept probability (its "
            f"target one of the sender's last few deliveries), until t = "
            f"{run.get('chaos'):g} s; then loss and movement stop and the run goes on "
            f"{run.get('heal'):g} s more for repairs. One-way delay log-normal, median "
            f"{float(delay.get('median', 0)) * 1000:g} ms; loss independent per packet and "
            f"receiver. Mobile nodes walk (random waypoint, {mob.get('speed')} m/s) in a "
            f"{side:g} m square whose centre the one cell covers ({covered:.0%} of it): "
            f"outside it they hear and send nothing; they are the last nodes, so the "
            f"creator never walks.")


def _pooled(study: Study, order: str, **fixed: float) -> dict[str, Any] | None:
    """The one cell of ``order`` where each named factor has its value (None: none)."""
    names = {"size": SIZE, "loss": LOSS, "reply": REPLY, "mobile": MOBILE}
    want = {names[k]: v for k, v in fixed.items()}
    hits = [r for r in study.rows() if r["order"] == order
            and all(r[LABELS[f]] == v for f, v in want.items())]
    return hits[0] if len(hits) == 1 else None


def _mean(row: Mapping[str, Any] | None) -> str:
    return ms(row["delay_mean"], 2) + " ms" if row and row["delay_mean"] is not None else "n/a"


def _held(row: Mapping[str, Any] | None) -> str:
    return f"{row['held']:.0%}" if row and row["held"] is not None else "n/a"


def comparisons(study: Study, other: str) -> tuple[int, int, list[dict[str, Any]]]:
    """Cells where S_b's mean delay is at most ``other``'s, cells compared, exceptions."""
    rows = study.rows()
    sb = {tuple(r[LABELS[f]] for f in FACTORS): r for r in rows if r["order"] == "sb"}
    wins, total, worse = 0, 0, []
    for r in rows:
        if r["order"] != other or r["delay_mean"] is None:
            continue
        s = sb.get(tuple(r[LABELS[f]] for f in FACTORS))
        if s is None or s["delay_mean"] is None:
            continue
        total += 1
        if s["delay_mean"] <= r["delay_mean"]:
            wins += 1
        else:
            worse.append({"sb": s, "other": r})
    return wins, total, worse


def _point_text(r: Mapping[str, Any]) -> str:
    return ", ".join(f"{LABELS[f]} {_fmt(f, r[LABELS[f]])}" for f in FACTORS)


def findings(study: Study) -> str:
    """The headline numbers and the seed's claims against them, from the cells."""
    sizes = sorted({r[LABELS[SIZE]] for r in study.rows()})
    lines = ["## What the sweep found\n"]
    base = {"loss": BASE[LOSS], "reply": BASE[REPLY], "mobile": BASE[MOBILE]}
    for n in sizes:
        cells = {o: _pooled(study, o, size=n, **base) for o in ORDERS}
        if not any(cells.values()):
            continue
        parts = [f"{NAMES[o]} {_mean(c)} (held {_held(c)})" for o, c in cells.items() if c]
        lines.append(f"- **{int(n)} nodes**, loss {BASE[LOSS]:g}, reply rate "
                     f"{BASE[REPLY]:g}, nobody walking: mean delivery delay "
                     + "; ".join(parts) + ".")
    by_size = {o: [(n, _pooled(study, o, size=n, **base)) for n in sizes] for o in ORDERS}
    grown = [f"{NAMES[o]} " + " → ".join(f"{_mean(c)} ({int(n)})" for n, c in pts if c)
             for o, pts in by_size.items() if sum(1 for _, c in pts if c) > 1]
    if grown:
        lines.append(f"- **Group size** (nodes in brackets), loss {BASE[LOSS]:g}, reply rate "
                     f"{BASE[REPLY]:g}, nobody walking: " + "; ".join(grown) + ".")
    for n in sizes[:2]:
        lo = {o: _pooled(study, o, size=n, loss=0.0, reply=BASE[REPLY], mobile=0.0)
              for o in ORDERS}
        hi_loss = max((r[LABELS[LOSS]] for r in study.rows() if r[LABELS[SIZE]] == n),
                      default=0.0)
        hi = {o: _pooled(study, o, size=n, loss=hi_loss, reply=BASE[REPLY], mobile=0.0)
              for o in ORDERS}
        if hi_loss > 0 and all(lo.values()) and all(hi.values()):
            lines.append(f"- **Loss, {int(n)} nodes:** from no loss to {hi_loss:g}, the mean "
                         "delay goes " + "; ".join(
                             f"{NAMES[o]} {_mean(lo[o])} → {_mean(hi[o])}" for o in ORDERS)
                         + ".")
    for n in sizes[:2]:
        r0 = {o: _pooled(study, o, size=n, loss=BASE[LOSS], reply=0.0, mobile=0.0)
              for o in ORDERS}
        r9 = {o: _pooled(study, o, size=n, loss=BASE[LOSS], reply=0.9, mobile=0.0)
              for o in ORDERS}
        if all(r0.values()) and all(r9.values()):
            lines.append(f"- **Reply rate, {int(n)} nodes, loss {BASE[LOSS]:g}:** from 0 "
                         "to 0.9, " + "; ".join(
                             f"{NAMES[o]} {_mean(r0[o])} → {_mean(r9[o])}" for o in ORDERS)
                         + ".")
    for n in sizes[:2]:
        m0 = {o: _pooled(study, o, size=n, loss=BASE[LOSS], reply=BASE[REPLY], mobile=0.0)
              for o in ORDERS}
        m5 = {o: _pooled(study, o, size=n, loss=BASE[LOSS], reply=BASE[REPLY], mobile=0.5)
              for o in ORDERS}
        if all(m0.values()) and all(m5.values()):
            lines.append(f"- **Mobility, {int(n)} nodes, loss {BASE[LOSS]:g}:** from nobody "
                         "to half the nodes walking, " + "; ".join(
                             f"{NAMES[o]} {_mean(m0[o])} → {_mean(m5[o])}" for o in ORDERS)
                         + ".")
    lines.append("")
    lines.append(claims(study))
    return "\n".join(lines)


def claims(study: Study) -> str:
    """seeds/003's claims about delivery delay, each against what the sweep measured."""
    rows = study.rows()
    out = ["### The seed's claims against the numbers\n",
           "Each claim is in our words, with the section of seeds/003 it comes from "
           "(mapped in [docs/seeds.md](../seeds.md)).\n"]
    table: list[tuple[str, str, str]] = []
    # 1. S_b holds only replies: with no replies, nothing waits.
    roots = [r for r in rows if r["order"] == "sb" and r[LABELS[REPLY]] == 0.0
             and r["delay_max"] is not None]
    waited = [r for r in roots if r["delay_max"] > 0]
    if roots:
        worst = max(roots, key=lambda r: r["delay_max"])
        table.append((
            "A message that answers nothing is delivered on arrival: under S_b nothing "
            "but a reply ever waits (seeds/003 abstract, I, IV.C.3)",
            f"S_b cells with reply rate 0: {len(roots)}; with any delivery that waited: "
            f"{len(waited)} (largest delay {ms(worst['delay_max'], 2)} ms)",
            "agrees" if not waited else "contradicts"))
    # 2. S_b has the smaller delay than causal and total order.
    for other in ("causal", "total"):
        wins, total, worse = comparisons(study, other)
        if total:
            detail = f"S_b's mean delay at most {NAMES[other]}'s in {wins} of {total} cells"
            if worse:
                worst_pair = max(worse, key=lambda w: w["sb"]["delay_mean"]
                                 - w["other"]["delay_mean"])
                detail += (f"; the exceptions: {len(worse)}, the largest at "
                           f"{_point_text(worst_pair['sb'])} (S_b "
                           f"{ms(worst_pair['sb']['delay_mean'], 2)} ms, {NAMES[other]} "
                           f"{ms(worst_pair['other']['delay_mean'], 2)} ms)")
            verdict = ("agrees" if not worse else
                       f"contradicted in {len(worse)} of {total} cells (the exceptions)")
            table.append((
                f"S_b makes messages wait less than {NAMES[other]} order, which holds "
                "messages that are merely later, not answers (seeds/003 abstract, I)",
                detail, verdict))
    # 3. Causal order holds unrelated messages; S_b does not.
    pairs = []
    sb_rows = {tuple(r[LABELS[f]] for f in FACTORS): r for r in rows if r["order"] == "sb"}
    for r in rows:
        s = sb_rows.get(tuple(r[LABELS[f]] for f in FACTORS))
        if r["order"] == "causal" and s and r["held"] is not None and s["held"] is not None:
            pairs.append((s["held"], r["held"]))
    if pairs:
        fewer = sum(1 for s, c in pairs if s <= c)
        table.append((
            "Causal order makes a message wait for everything its sender had seen, "
            "related or not (seeds/003 I, Fig. 1)",
            f"share of deliveries held: S_b at most causal's in {fewer} of {len(pairs)} "
            f"cells; over all cells S_b {_share(rows, 'sb')}, causal "
            f"{_share(rows, 'causal')}, total {_share(rows, 'total')}",
            "agrees" if fewer == len(pairs) else "agrees in most cells"
            if fewer >= 0.9 * len(pairs) else "contradicts"))
    # 4. The seed's medium is reliable; on a lossy one a reply waits for its parent's repair.
    lossless = [r for r in rows if r["order"] == "sb" and r[LABELS[LOSS]] == 0.0
                and r[LABELS[REPLY]] > 0 and r["delay_mean"] is not None]
    lossy = [r for r in rows if r["order"] == "sb" and r[LABELS[LOSS]] >= 0.1
             and r[LABELS[REPLY]] > 0 and r["delay_mean"] is not None]
    if lossless and lossy:
        table.append((
            "The proofs assume a medium that loses nothing (seeds/003 IV.A.3); they say "
            "nothing of how long a reply waits when its parent is lost",
            f"S_b mean delay, cells with replies: no loss {_avg_ms(lossless)} ms on "
            f"average over {len(lossless)} cells, loss 0.1 or more {_avg_ms(lossy)} ms "
            f"over {len(lossy)}: on a lossy medium S_b's waits are repair times",
            "beyond the seed"))
    # 5. Fully distributed, so fit for large groups where a central orderer would not be.
    base = {"loss": BASE[LOSS], "reply": BASE[REPLY], "mobile": BASE[MOBILE]}
    sizes = sorted({r[LABELS[SIZE]] for r in rows})
    growth: dict[str, tuple[tuple[float, dict[str, Any]], tuple[float, dict[str, Any]]]] = {}
    for o in ORDERS:
        pts: list[tuple[float, dict[str, Any]]] = []
        for n in sizes:
            c = _pooled(study, o, size=n, **base)
            if c is not None and c["delay_mean"] is not None:
                pts.append((n, c))
        if len(pts) > 1:
            growth[o] = (pts[0], pts[-1])
    if "sb" in growth:
        (_, c0), (_, c1) = growth["sb"]
        detail = "; ".join(f"{NAMES[o]} {_mean(a)} at {int(na)} nodes, {_mean(b)} at "
                           f"{int(nb)}" for o, ((na, a), (nb, b)) in growth.items())
        flat = c1["delay_mean"] <= 2 * c0["delay_mean"] + 0.001
        table.append((
            "Without a central orderer, S_b suits large groups, where a server would be "
            "the bottleneck (seeds/003 I)",
            f"mean delay, loss {BASE[LOSS]:g}, reply rate {BASE[REPLY]:g}: {detail}",
            "agrees" if flat else "contradicts: S_b's delay grows with the group"))
    out.append(markdown_table(["claim", "measured", "verdict"], table))
    return "\n".join(out) + "\n"


def _share(rows: Sequence[Mapping[str, Any]], order: str) -> str:
    held = [(r["held"], r["deliveries"]) for r in rows
            if r["order"] == order and r["held"] is not None]
    total = sum(n for _, n in held)
    return f"{sum(h * n for h, n in held) / total:.1%}" if total else "n/a"


def _avg_ms(rows: Sequence[Mapping[str, Any]]) -> str:
    return ms(sum(r["delay_mean"] for r in rows) / len(rows), 2)


def cost_section(study: Study) -> str:
    """What the simulations cost, per group size and ordering (the sweep's budget)."""
    per: dict[tuple[float, str], list[float]] = {}
    for r in study.runs:
        if r["sim_seconds"] is not None:
            per.setdefault((r[LABELS[SIZE]], r["order"]), []).append(float(r["sim_seconds"]))
    lines = []
    for (n, o), secs in sorted(per.items(), key=lambda kv: (kv[0][0], ORDERS.index(kv[0][1])
                                                           if kv[0][1] in ORDERS else 9)):
        lines.append([str(int(n)), NAMES.get(o, o), len(secs), f"{sum(secs) / len(secs):.1f}",
                      f"{max(secs):.1f}", f"{sum(secs) / 60:.1f}"])
    return ("## What it cost\n\nWall seconds of each simulation task (the child `m2mc sim`, "
            "on a machine shared with other jobs, two or three tasks at a time), from sweep.json; "
            "a task kept by `--resume` counts the time between its files:\n\n"
            + markdown_table(["group size", "ordering", "runs", "mean s", "max s",
                              "total min"], lines) + "\n\n" + COST_NOTE + "\n")


COST_NOTE = """A run's cost is dominated by the group's start: every member joins within a
few milliseconds, each hears every other's join, and each writes a `view` event at
every change it sees; both grow with the square of the group size (in this sweep each
view listed every member, 40% of a 100-node run's trace; a view now names only who
changed, docs/group.md section 4). Total order adds an acknowledgement per member
per ORDER, heard by every member. Measured with `m2mc sim` on this scenario before the
sweep (CPU seconds for about 12 s of virtual time): 10 nodes 0.7 (S_b) and 1.2 (total
order), 30 nodes about 2 and 4, 100 nodes 12 and 53. A 1,000-node S_b run of only 4 s
of virtual time had used 300 CPU seconds, unfinished, when it was stopped after 20
minutes; the machine's load average was between 90 and 230 then (other engineers' jobs),
so the two 1,000-node runs planned would have taken the whole budget by themselves.
This page therefore stops at 300 nodes (S_b and causal, one seed each), and total order
at 100. study.toml holds the 1,000-node grid, commented out: uncomment it and run the
same command when the simulator is cheaper (another change is making it so) or the
machine is free."""
