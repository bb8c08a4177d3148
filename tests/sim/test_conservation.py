"""Property: every packet put on the network is either delivered or has a drop row."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from m2mc.sim.engine import Simulator
from m2mc.sim.rng import RngStreams
from m2mc.sim.scenario import load_scenario
from m2mc.trace.writer import TraceDirectory, read_jsonl

probabilities = st.sampled_from([0.0, 0.1, 0.5])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), loss=probabilities, dup=probabilities,
       reorder=probabilities, burst=st.booleans(), capacity=st.booleans(),
       partition=st.booleans(), crash=st.booleans())
def test_every_packet_is_delivered_or_dropped(seed: int, loss: float, dup: float,
                                              reorder: float, burst: bool, capacity: bool,
                                              partition: bool, crash: bool) -> None:
    domain: dict[str, Any] = {"delay": {"dist": "exponential", "mean": 0.01},
                              "duplicate": dup, "reorder": reorder}
    domain["loss"] = ({"model": "gilbert-elliott", "p_good_bad": 0.2, "p_bad_good": 0.3}
                      if burst else loss)
    if capacity:
        domain["capacity"] = {"rate": 2000.0, "queue": 3}
    faults: dict[str, Any] = {}
    if partition:
        faults["partition"] = [{"kind": "one-way", "from": ["n0"], "to": ["n2"], "at": 0.5,
                                "until": 1.5}]
    if crash:
        faults["crash"] = [{"node": "n3", "at": 0.7, "restart": 1.2}]
    spec = load_scenario({"run": {"chaos": 3.0, "heal": 2.0}, "stack": {"kind": "probe"},
                          "nodes": {"count": 5}, "domains": {"lan": domain},
                          "faults": faults})
    with tempfile.TemporaryDirectory() as tmp:
        traces = TraceDirectory(Path(tmp) / "trace", "t", flush_interval=None)
        sim = Simulator(spec, RngStreams(seed), "t", traces, Path(tmp) / "state")
        sim.start()
        sends = 40
        for i in range(sends):
            node = sim.by_id[f"n{i % 4}"]
            sim.call_at(0.05 * i, lambda _, n=node, i=i: sim.app_send(n, "g", bytes(50 + i % 7),
                                                                      None), None)
        sim.run(spec.end)
        traces.close()
        rows = [r for p in sorted((Path(tmp) / "trace").glob("*.jsonl")) for r in read_jsonl(p)]
    reasons: dict[str, int] = {}
    for r in rows:
        if r.event == "drop":
            reason = json.loads(r.detail or "{}")["reason"]
            reasons[reason] = reasons.get(reason, 0) + 1
    c = sim.counters
    assert c["drops"] == sum(reasons.values())
    transmitted = c["app_sends"] - reasons.get("capacity", 0)
    receivers = 4  # every other node on the domain
    scheduled = transmitted * receivers - sum(reasons.get(k, 0) for k in
                                              ("loss", "burst", "partition")) + c["duplicated"]
    assert c["deliveries"] + reasons.get("crashed", 0) == scheduled
    assert c["loopbacks"] == transmitted  # no send is near the crash: every loopback lands
