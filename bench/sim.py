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
Traces are off (the scheduler and network are measured, not the disk). On a
shared machine ``deliveries_per_cpu_s`` (process CPU time) is the steadier figure.

    .venv/bin/python bench/sim.py [--quick]
"""

from __future__ import annotations

import heapq
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from m2mc.sim import run_scenario

TARGET = 200_000


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
    flood = measure(scenario("flood", 50, int(6000 * scale), 200.0, 0.05))
    group = measure(scenario("group", 50, int(300 * scale), 100.0, 0.05))
    b_flood = measure(scenario("flood", 1000, int(200 * scale), 50.0, 0.0))
    b_group = measure(scenario("group", 200, max(1, int(10 * scale)), 20.0, 0.0))
    print(json.dumps({
        "flood": flood, "group": group,
        "broadcast": {"flood": b_flood, "group": b_group},
        "reference": {"heapq_push_pop_per_s": round(heapq_reference())},
        "target_deliveries_per_s": TARGET,
        "meets_target": flood["deliveries_per_s"] >= TARGET,
    }, indent=2))


if __name__ == "__main__":
    main()
