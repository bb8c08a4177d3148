"""Helpers for simulator tests: probe stacks that record what the network did, and
the ``basic`` stack (basic_stack.py: M2MP and the ordering cores alone)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from m2mc.sim.node import NodeContext, Outgoing, register_stack

HERE = str(Path(__file__).parent)
if HERE not in sys.path:  # pytest runs with --import-mode=importlib
    sys.path.insert(0, HERE)

import basic_stack  # noqa: E402, F401  (registers [stack] kind = "basic")

PROBES: dict[str, Any] = {}


@dataclass
class Probe:
    """Single-interface stack: app_send broadcasts the payload; arrivals are recorded."""

    ctx: NodeContext
    arrivals: list[tuple[float, bytes]] = field(default_factory=list)
    out: list[bytes] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    timer_wanted: float | None = None
    timer_calls: list[float] = field(default_factory=list)

    def start(self, now: float) -> None:
        self.starts.append(now)
        PROBES[self.ctx.node_id] = self

    def receive_datagram(self, datagram: bytes, now: float) -> None:
        self.arrivals.append((now, datagram))

    def on_timer(self, now: float) -> None:
        self.timer_calls.append(now)
        self.timer_wanted = None

    def next_deadline(self) -> float | None:
        return self.timer_wanted

    def datagrams_to_send(self, now: float) -> list[bytes]:
        out, self.out = self.out, []
        return out

    def app_send(self, group: str, payload: bytes, reply_to: str | None,
                 now: float) -> str | None:
        self.out.append(payload)
        return f"{self.ctx.node_id}:{len(self.out)}"

    def delivered_mids(self, group: str) -> Sequence[str]:
        return ()

    def app_join(self, group: str, now: float) -> None:
        return None

    def app_leave(self, group: str, now: float) -> None:
        return None


@dataclass
class AddrProbe:
    """Addressed stack: records (iface, src, data, now) and attach changes."""

    ctx: NodeContext
    arrivals: list[tuple[str, str, bytes, float]] = field(default_factory=list)
    attach: list[tuple[str, str | None, float]] = field(default_factory=list)
    out: list[Outgoing] = field(default_factory=list)

    def start(self, now: float) -> None:
        PROBES[self.ctx.node_id] = self

    def receive(self, iface: str, src: str, datagram: bytes, now: float) -> None:
        self.arrivals.append((iface, src, datagram, now))

    def on_attach(self, iface: str, domain: str | None, now: float) -> None:
        self.attach.append((iface, domain, now))

    def on_timer(self, now: float) -> None:
        return None

    def next_deadline(self) -> float | None:
        return None

    def datagrams_to_send(self, now: float) -> list[Outgoing]:
        out, self.out = self.out, []
        return out

    def app_send(self, group: str, payload: bytes, reply_to: str | None,
                 now: float) -> str | None:
        return None

    def delivered_mids(self, group: str) -> Sequence[str]:
        return ()

    def app_join(self, group: str, now: float) -> None:
        return None

    def app_leave(self, group: str, now: float) -> None:
        return None


register_stack("probe", Probe)
register_stack("addr-probe", AddrProbe, addressed=True)


@pytest.fixture(autouse=True)
def _clear_probes() -> None:
    PROBES.clear()


class SimKit:
    """Build a Simulator from a scenario mapping, drive it by hand, read its trace."""

    def __init__(self, tmp_path: Any) -> None:
        self.tmp_path = tmp_path
        self.probes = PROBES  # node id -> the probe stack started last on that node

    def build(self, mapping: dict[str, Any], seed: int = 1, packets: bool = False) -> Any:
        from m2mc.sim.engine import Simulator
        from m2mc.sim.rng import RngStreams
        from m2mc.sim.scenario import load_scenario
        from m2mc.trace.writer import TraceDirectory

        spec = load_scenario(mapping)
        self.traces = TraceDirectory(self.tmp_path / "trace", "t", flush_interval=None)
        self.sim = Simulator(spec, RngStreams(seed), "t", self.traces, self.tmp_path / "state",
                             trace_packets=packets)
        self.sim.start()
        return self.sim

    def send_at(self, t: float, node: str, payload: bytes, group: str = "g") -> None:
        sim = self.sim
        sim.call_at(t, lambda _: sim.app_send(sim.by_id[node], group, payload, None), None)

    def finish(self, until: float | None = None) -> list[Any]:
        from m2mc.trace.writer import read_jsonl

        self.sim.run(self.sim.scenario.end if until is None else until)
        self.traces.close()
        rows = []
        for path in sorted((self.tmp_path / "trace").glob("*.jsonl")):
            rows.extend(read_jsonl(path))
        return rows


@pytest.fixture
def kit(tmp_path: Any) -> SimKit:
    return SimKit(tmp_path)


def _lan(**domain: Any) -> dict[str, Any]:
    """A probe scenario: n0..n3 on one domain with the given link settings."""
    base: dict[str, Any] = {"delay": 0.001}
    base.update(domain)
    return {"run": {"chaos": 10.0, "heal": 5.0}, "stack": {"kind": "probe"},
            "nodes": {"count": 4, "domain": "lan"}, "domains": {"lan": base}}


@pytest.fixture
def lan() -> Any:
    return _lan
