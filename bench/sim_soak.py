"""A simulated day (issue 35 item 4): does a long life stay bounded?

    PYTHONPATH=src .venv/bin/python bench/sim_soak.py [--nodes 100] [--hours 24]
        [--rate 0.1] [--loss 0.1] [--sample 1800] [--seed 1] [--keep DIR]

Runs the group stack in the simulator (docs/simulator.md): ``--nodes`` peers in one S_b
group on one lossy LAN, every node with its durable log (the simulator's state
directory), chatting at ``--rate`` messages a second in all (half of them replies)
for ``--hours`` of virtual time, then a minute of calm. Every ``--sample`` virtual
seconds it records the simulator process's resident memory (``VmRSS``; all nodes
live in this one process, so it is their sum plus the simulator's), the objects
Python's collector tracks, and the bytes of every node's state directory (its SQLite
log and WAL). It prints one JSON object: the samples, and the growth per simulated
hour of each series after the first quarter of the run (least squares), next to the
series' value at the end, so a flat series reads as a growth near zero; the
messages sent and whether every node delivered every one exactly once, in S_b order
(tests/group/tracecheck.py, the Spark-free mirror of ``m2mc analyze``).

The nodes keep the group layer's defaults but for their log's retention:
``--retention-mib`` (default 1) bounds each node's log, so that a day shows the
bound at work (the default, 256 MiB and 30 days, would take months of this chat to
reach); 0 keeps the default.

Before (2026-11-29, main at 3077e02 and 00937ae, beside a CI run)::

    python bench/sim_soak.py --nodes 100 --hours 24 --sample 3600
    python bench/sim_soak.py --nodes 10 --hours 12 --rate 0.5 --retention-mib 0.1 --sample 3600

- 100 nodes, a simulated day: 8,641 messages, 864,100 deliveries, every one exactly
  once; RSS grew +25 MB per simulated hour (853 MB at the end), tracked objects
  +114k/h, the state directories +6.3 MB/h (the 1 MiB bounds not reached).
- 10 nodes with a 0.1 MiB bound: the state directories flat (+3.5 KB/h), but RSS
  +4.0 MB/h and tracked objects +17k/h, ``MessageId`` and ``tuple`` one each per
  delivery.

The two causes, found with ``gc.get_referrers`` on the ``MessageId``s that outlived an
hour, then with RSS against tracked objects hour by hour (2026-11-30):

- each holder's record of who asked it for what (group/repair.py, ``Repair._ask``) was
  pruned only once it held ``max_pending_repairs`` (20,000) asks, though an ask older
  than ``2 * nack_holdoff_max`` no longer counts: every node filled it in a long
  life. It now forgets them as they age (tests/group/test_repair_memory.py);
- the simulator's own record of every delivery (one string per delivery and node, for
  the workload's choice of reply targets) now keeps the latest ``RECENT_DELIVERIES``
  per group (m2mc.sim.node).

After (main at 9b26b78; traces byte-identical to before)::

    python bench/sim_soak.py --nodes 100 --hours 24 --sample 3600 --retention-mib 0.1

- 8,641 messages, 864,100 deliveries, every one exactly once, no violation; 2,164 s
  wall, 926 CPU-s (beside three other jobs).
- The 0.1 MiB bounds are reached in the first hours; from the fourth hour to the
  24th: RSS 313 to 334 MiB (+0.72 MiB/h least squares over the last three quarters,
  for the 100 nodes and the simulator together), tracked objects flat (-88/h, 168k
  to 191k), state directories 125.6 to 130.1 MiB (+0.28 MB/h: 3 KB/h a node).
- ``--nodes 10 --hours 14 --rate 0.5 --retention-mib 0.1``, hour by hour (a script of
  the session stepping the same scenario): anonymous RSS 49-50 MiB from the third hour
  to the fourteenth, tracked objects 54-55k throughout (before the second fix: +1.7
  MiB/h, which was the simulator's record of deliveries).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from nemesis_adhoc_total import load_checker  # (bench/, this script's directory)

from m2mc.sim.runner import ScenarioRun


def scenario(args: argparse.Namespace) -> dict[str, Any]:
    seconds = args.hours * 3600.0
    stack: dict[str, Any] = {"kind": "group", "redundancy": 1}
    if args.retention_mib:
        stack["retention_bytes"] = int(args.retention_mib * (1 << 20))
    return {
        "name": "sim-soak",
        "description": f"{args.nodes} peers, one S_b group, {args.rate} messages/s for "
                       f"{args.hours} h",
        "run": {"chaos": seconds, "heal": 60.0},
        "stack": stack,
        "trace": {"packets": False},
        "nodes": {"count": args.nodes, "domain": "lan"},
        "domains": {"lan": {
            "delay": {"dist": "lognormal", "median": 0.004, "sigma": 0.6, "min": 0.0005},
            "loss": args.loss}},
        "groups": [{"name": "chat", "order": "sb", "members": "all", "rate": args.rate,
                    "messages": int(args.rate * seconds) + 1, "reply": 0.5, "recent": 30.0,
                    "size": {"dist": "uniform", "low": 40.0, "high": 160.0}}],
    }


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):  # (a WAL checkpointed away)
                total += os.stat(os.path.join(root, name)).st_size
    return total


def growth_per_hour(samples: list[dict[str, float]], key: str) -> float:
    """Least-squares slope of ``key`` against virtual hours, after the first quarter."""
    points = [(s["t"] / 3600.0, s[key]) for s in samples]
    points = points[len(points) // 4:]
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


def growing_types(types: list[Counter[str]], top: int = 12) -> dict[str, list[int]]:
    """The tracked types that grew most from the first quarter's sample to the last:
    their counts at those two samples (what a growth of ``objects`` is made of)."""
    if len(types) < 2:
        return {}
    first, last = types[len(types) // 4] if len(types) > 4 else types[0], types[-1]
    grown = sorted(last, key=lambda k: last[k] - first[k], reverse=True)[:top]
    return {k: [first[k], last[k]] for k in grown if last[k] > first[k]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--hours", type=float, default=24.0, help="virtual hours of chat (24)")
    p.add_argument("--rate", type=float, default=0.1, help="messages/s in all (0.1)")
    p.add_argument("--loss", type=float, default=0.1, help="loss on the LAN (0.1)")
    p.add_argument("--sample", type=float, default=1800.0, help="virtual s between samples")
    p.add_argument("--retention-mib", type=float, default=1.0,
                   help="each node's log bound, MiB (1; fractions allowed)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", type=Path, default=None, help="keep the trace here")
    args = p.parse_args()
    out = args.keep or Path(tempfile.mkdtemp(prefix="m2mc-sim-soak-"))
    spec = scenario(args)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    samples: list[dict[str, float]] = []
    types: list[Counter[str]] = []  # tracked objects by type, at each sample
    end = spec["run"]["chaos"] + spec["run"]["heal"]
    with ScenarioRun(spec, args.seed, out) as run:
        t = 0.0
        while t < end:
            t = min(end, t + args.sample)
            run.run(t)
            objects = gc.get_objects()
            samples.append({"t": t, "rss": rss_bytes(), "objects": len(objects),
                            "state_bytes": dir_bytes(run.state_dir),
                            "wall": time.perf_counter() - wall0})
            types.append(Counter(type(o).__qualname__ for o in objects))
            del objects
            print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
        result = run.finish()
    checker = load_checker()
    rows = checker.load(out / "trace")
    violations = {k: len(v) for k, v in checker.check(rows).items() if v}
    sent = sum(1 for r in rows if r["event"] == "send")
    delivered = sum(1 for r in rows if r["event"] == "deliver")
    report = {
        "nodes": args.nodes, "virtual_hours": args.hours, "rate": args.rate,
        "loss": args.loss, "retention_mib": args.retention_mib, "seed": args.seed,
        "sent": sent, "deliveries": delivered, "expected_deliveries": sent * args.nodes,
        "violations": violations, "valid": not violations,
        "growth_per_hour": {k: round(growth_per_hour(samples, k), 1)
                            for k in ("rss", "objects", "state_bytes")},
        "at_end": {k: samples[-1][k] for k in ("rss", "objects", "state_bytes")},
        "growing_types": growing_types(types),
        "wall_seconds": round(time.perf_counter() - wall0, 1),
        "cpu_seconds": round(time.process_time() - cpu0, 1),
        "counters": result.counters, "samples": samples,
    }
    print(json.dumps(report))
    return 0 if report["valid"] and delivered == sent * args.nodes else 1


if __name__ == "__main__":
    sys.exit(main())
