"""Simulator speed: simulated packet deliveries per second of wall time.

Prints one JSON object, one entry per stack under its ``[stack] kind``:
- ``flood``: the ``flood`` stack (no protocol work), so the network model and
  the scheduler are what is measured; target >= 200,000 deliveries/s.
- ``group``: a like workload (fewer messages) on the ``group`` stack, the default
  one: the whole M2MC group layer (M2MP, GJLP, MOP with S_b, MSP, NACK repair).
- ``broadcast``: wall time of a large broadcast scenario: 1,000 nodes on ``flood``,
  200 on ``group`` (every group node also keeps the others' status: its traffic
  grows with the square of the nodes).
- ``reference``: bare heapq push+pop pairs/s on this machine in this run, to
  compare against (a delivery costs at least one push and one pop).
- ``realtime``: does the simulator keep up with real time (issue 35 item 3)?
  ``examples/scenarios/swarm-100.toml`` and ``swarm-1000.toml`` (100 and 1,000 members
  in one S_b group, 10% loss, 5 messages/s), run as ``m2mc sim`` runs them (traces on):
  virtual seconds per wall second (``virtual_per_wall``, >= 1 keeps up) and per
  second of process CPU time (``virtual_per_cpu``).
Traces are off in the other rows (the scheduler and network are measured, not the
disk). On a shared machine the figures per CPU second are the steadier ones.

    .venv/bin/python bench/sim.py [--quick] [--realtime-only]

``realtime`` figures (seed 1, 2 cores shared with other jobs, so per CPU second)::

    scenario (virtual s)            before (main)           after (this change)
    swarm-100 (90 s, traces on)     49.8 CPU s: 1.81 v/cpu  40.1 CPU s: 2.25 v/cpu  (0.80x CPU)
    200 nodes, 2 s (join storm)     35.1 CPU s: 0.057       26.8 CPU s: 0.075       (0.76x CPU)
    swarm-1000 (30 s)               runs out of memory      far below real time (see below)

    (swarm-100: farm-bench, 2 alternating pairs, medians; wall time on the shared
    machine, load 13 to 230, was 200-230 s for both. The traces are byte-identical
    before and after. At 1,000 nodes the start, where every member's JOIN, SYNC_REQ and
    first STATUS reach 999 others, costs on the order of 100 us of CPU per reception:
    the 1,000-node scenario does not keep up with real time yet.)
"""

from __future__ import annotations

import heapq
import json
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

from m2mc.sim import run_scenario

TARGET = 200_000
SCENARIOS = Path(__file__).resolve().parent.parent / "examples" / "scenarios"


def scenario(stack: str, nodes: int, messages: int, rate: float, loss: float) -> dict[str, Any]:
    return {
        "name": f"bench-{stack}-{nodes}",
        "run": {"chaos": messages / rate * 3 + 1.0, "heal": 2.0},
        "stack": {"kind": stack},
        "trace": {"enabled": False},
        "nodes": {"count": nodes, "domain": "lan"},
        "domains": {"lan": {"delay": {"dist": "uniform", "low": 0.001, "high": 0.01},
                            "loss": loss, "duplicate": 0.01, "reorder": 0.01}},
        "groups": [{"name": "g", "order": "sb", "rate": rate, "messages": messages,
                    "reply": 0.5, "size": 100}],
    }


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        start, cpu = time.perf_counter(), time.process_time()
        result = run_scenario(spec, seed=1, out=Path(out))
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
    deliveries = result.counters["deliveries"] + result.counters["loopbacks"]
    return {"nodes": spec["nodes"]["count"], "messages": result.sent["g"],
            "deliveries": deliveries, "events": result.counters["events"],
            "wall_seconds": round(wall, 3), "deliveries_per_s": round(deliveries / wall),
            "cpu_seconds": round(cpu, 3), "deliveries_per_cpu_s": round(deliveries / cpu)}


def realtime(path: Path, quick: bool) -> dict[str, Any]:
    """Virtual seconds per wall (and CPU) second of one swarm scenario, traces on."""
    raw = tomllib.loads(path.read_text())
    if quick:  # a fifth of the chat and calm
        raw["run"] = {k: v / 5 for k, v in raw["run"].items()}
    virtual = raw["run"]["chaos"] + raw["run"]["heal"]
    with tempfile.TemporaryDirectory() as out:
        start, cpu = time.perf_counter(), time.process_time()
        result = run_scenario(raw, seed=1, out=Path(out))
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
    return {"scenario": path.name, "nodes": raw["nodes"]["count"], "virtual_seconds": virtual,
            "messages": result.sent["chat"],
            "deliveries": result.counters["deliveries"] + result.counters["loopbacks"],
            "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "virtual_per_wall": round(virtual / wall, 3),
            "virtual_per_cpu": round(virtual / cpu, 3)}


def heapq_reference(n: int = 300_000) -> float:
    heap: list[tuple[float, int, int]] = []
    start = time.perf_counter()
    for i in range(n):
        heapq.heappush(heap, ((i * 7919) % 1000 / 7.0, i, 0))
    while heap:
        heapq.heappop(heap)
    return n / (time.perf_counter() - start)


def main() -> None:
    quick = "--quick" in sys.argv
    scale = 0.2 if quick else 1.0
    swarms = {str(n): realtime(SCENARIOS / f"swarm-{n}.toml", quick) for n in (100, 1000)}
    if "--realtime-only" in sys.argv:
        print(json.dumps({"realtime": swarms}, indent=2))
        return
    flood = measure(scenario("flood", 50, int(6000 * scale), 200.0, 0.05))
    group = measure(scenario("group", 50, int(300 * scale), 100.0, 0.05))
    b_flood = measure(scenario("flood", 1000, int(200 * scale), 50.0, 0.0))
    b_group = measure(scenario("group", 200, max(1, int(10 * scale)), 20.0, 0.0))
    print(json.dumps({
        "flood": flood, "group": group,
        "broadcast": {"flood": b_flood, "group": b_group},
        "reference": {"heapq_push_pop_per_s": round(heapq_reference())},
        "realtime": swarms,
        "target_deliveries_per_s": TARGET,
        "meets_target": flood["deliveries_per_s"] >= TARGET,
    }, indent=2))


if __name__ == "__main__":
    main()
