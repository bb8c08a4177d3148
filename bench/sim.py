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

Second round (branch simspeed: MSP's MIR deadlines in a heap, the store's membership a
row per entry written as it changes, Membership's pids and sorted entries kept up to
date as entries change and its members as one tuple, the view event decided by the
changed members), same machine, 2 cores
shared with 3 other jobs (load 3 to 24), CPU seconds, farm-bench pairs (median of
2; A = this branch's src, B = main's at 753a38c), traces byte-identical before and
after (swarm-100 seeds 1 to 3, the 200-node cut)::

    scenario (virtual s)                       main (B)        this branch (A)
    200 nodes, 2 s (join storm) [1]            20.3 CPU s      16.0 CPU s  (0.79x CPU,
                                                                pairs 0.77 and 0.81)
    swarm-100 (90 s, traces on) [2]            21.1 CPU s      21.3 CPU s  (1.02x CPU,
                                                                pairs 0.93 and 1.11:
                                                                no difference at 100
                                                                members; 0.90x in a
                                                                pair before the last
                                                                change, under load)
    one membership change at 1,000 members [3] 409 us          30 us       (0.07x)

    [1] examples/scenarios/swarm-1000.toml with count = 200, chaos = 1.5, heal = 0.5:
        farm-bench -n 2 --warmup 0 --vs 'env PYTHONPATH=main/src m2mc sim s200.toml
        --seed 1 --out B' -- env PYTHONPATH=simspeed/src m2mc sim s200.toml --seed 1 --out A
    [2] the same pairing, examples/scenarios/swarm-100.toml --seed 1
    [3] Membership.apply, the GIIT row saved (SqliteStore.save_group, naming the changed
        entry on this branch as GroupNode does) and committed, 3,000 times in a group of
        1,000 members, CPU time per change (a script of the session; 2 runs each)

Where a 1,000-node run's time goes (what keeps swarm-1000 from real time). The first
20 ms of swarm-1000 (this branch; a SIGPROF sampler every 10 ms of CPU, 37,647 samples,
the run stepped 5 ms at a time until 420 CPU s were spent): 3,428,492 receptions in
435 CPU s, 125 us each, 5.6 GB of memory (1.56 million receptions in the first 5 ms:
each member's JOIN and SYNC_REQ reach 999 others at once). Shares of the CPU time,
inclusive: a membership change 39% (``GroupInstance._membership``: the GIIT row saved
18%, of it the row's list of entries rebuilt 8% and SQLite 9%; the view event's JSON
9%; the merge 5%; the current members rebuilt 3%), the engine's service of a node
after each input 24% (its output 13%, of it the store's commit 6%; the node's next
deadline 8%), M2MP's receive 7%, the trace writer 3%, the network's transmit 3%.

- Receptions. Every member's JOIN, SYNC_REQ, first statuses and catch-up responses
  reach the 999 others within the first seconds: the 200-node cut [1] takes in
  269,102 datagrams in 2 virtual s (about 6.7 datagrams sent per member, each heard
  by all the others), so 1,000 members take in about 6.7 million at their start.
  That cut costs 59 us of CPU per reception with this branch (16.0 CPU s / 270,603,
  everything included). Real time over the scenario's 30 s needs about 4 us per
  reception for the start alone: less than the engine's own work per receiver (an
  Arrival, a heap push and pop, a lognormal delay; the ``flood`` row's target,
  200,000 deliveries/s, is 5 us each), so no saving in the protocol cores reaches
  it. What would (estimates, not measured): the engine's heap of arrivals and its
  delay draws in m2mc.native (each receiver still calling the same Python protocol
  code), and a native receive path for what every reception runs (M2MP header,
  group frame, decode memo, instance dispatch, the store's commit, the node's next
  deadline after every input), some tens of us in Python today.
- The trace. A ``view`` event's detail listed every current member, and each member
  writes one per member it learns of: n * n events of up to n pids. In a 300-node
  cut (swarm-1000.toml with count = 300, chaos = 4, heal = 2) they were 104 of the
  trace's 121 MB (75,769 events); in the first 20 ms of swarm-1000 sampled above,
  3,380 of the trace's 3,470 MB (828,752 events), and the whole start wrote more,
  whose encoding and writing alone took more than the run's 30 s. A view now says
  what changed (docs/group.md section 4; docs/decisions.md, "A view event says what
  changed"): the 200-node cut [1] writes 18 MB of trace instead of 42 (views 7.7 MB
  instead of 33), its other events byte for byte the same.
- After the view change (2026-11-30, seed 1, swarm-1000.toml cut to 2 s of chat and
  0.5 s of calm, traces on, the machine otherwise idle but about half as fast as on the
  day of the sample above: the 200-node cut [1] took 47 to 49 CPU s where it took 16):
  stopped after 1,531 CPU s at virtual time 0.76 s, with 7.87 million receptions
  (195 us each, everything included) and 3.6 GB resident; no trace had reached the
  disk yet. The start is still about 2,000 times slower than real time here.
- What is left of the per-change work at a join of n, after the sample above was
  taken: ``Membership.entries()`` is now kept up to date by a copy of its tuple in C
  (it was rebuilt in Python after each change: the 8% above), and the view event's
  member list and JSON (12% above, with the current members rebuilt): O(n) per
  change, against the JSON of n entries and the SQLite row of the whole list that
  each change wrote before (row [3]).
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
