"""The simulated world's state: nodes and broadcast domains, plain slotted objects.

:class:`SimNode` (a node: its stack, clock, interfaces and timer) and :class:`Domain`
(a broadcast medium and its links, :class:`LinkRuntime`) refer to each other -- a
node's interfaces are attached to domains, a domain lists its members -- and both are
read by :mod:`m2mc.sim.events` (what an event names), :mod:`m2mc.sim.network`
(which moves datagrams between them) and :mod:`m2mc.sim.engine` (which runs the
stacks). They live here, below all three, so none of those imports another to name
them. Behaviour stays with the engine and the network; this module only holds state.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

from m2mc.sim.mobility import Mover
from m2mc.sim.node import NodeContext
from m2mc.sim.scenario import CELLS, DomainSpec, GilbertElliott, LinkParams, NodeSpec
from m2mc.trace.schema import TraceSink
from m2mc.trace.writer import TraceWriter

__all__ = ["Domain", "LinkRuntime", "SimNode", "StackFactory"]

StackFactory = Callable[[NodeContext], Any]


class LinkRuntime:
    """Precomputed parameters of a link (or a domain's default link)."""

    __slots__ = ("burst", "delay", "delay_const", "duplicate", "loss", "params", "reorder",
                 "reorder_delay")

    def __init__(self, params: LinkParams, rng: random.Random) -> None:
        self.params = params
        self.delay_const: float | None = params.delay.a if params.delay.is_constant else None
        self.delay: Callable[[], float] = params.delay.sampler(rng)
        self.loss = params.loss
        self.burst: GilbertElliott | None = params.burst
        self.duplicate = params.duplicate
        self.reorder = params.reorder
        self.reorder_delay = params.reorder_delay


class Domain:
    """One broadcast domain at run time."""

    __slots__ = ("burst_state", "capacity_queue", "capacity_rate", "cuts", "fifo", "fifo_last",
                 "index", "link", "loopback", "loopback_delay", "member_iface", "members", "mtu",
                 "name", "overrides", "spec")

    def __init__(self, index: int, spec: DomainSpec, rng: random.Random) -> None:
        self.index = index
        self.name = spec.name
        self.spec = spec
        self.link = LinkRuntime(spec.link, rng)
        self.overrides: dict[tuple[int, int], LinkRuntime] = {}
        self.members: list[tuple[SimNode, int]] = []  # (node, iface index), attach order
        self.member_iface: dict[int, int] = {}  # node index -> iface index
        self.fifo = spec.fifo
        self.fifo_last: dict[tuple[int, int], float] = {}
        self.burst_state: dict[tuple[int, int], bool] = {}  # True: link in the bad state
        self.cuts: list[dict[int, float] | None] = []  # per src index: dst index -> drop prob
        self.loopback = spec.loopback
        self.loopback_delay = spec.loopback_delay
        self.capacity_rate = spec.capacity_rate or 0.0  # 0: unbounded
        self.capacity_queue = spec.capacity_queue
        self.mtu = spec.mtu or 0  # 0: datagrams are lost whole


class SimNode:
    """One simulated node: its stack (None while crashed), its clock (``offset`` and
    ``rate``), its interfaces and what they are attached to, its armed timer."""

    __slots__ = ("addressed", "attach", "ctx", "exact_clock", "factory", "generation", "id",
                 "iface_index", "iface_names", "index", "last_local", "mobile_iface", "mover",
                 "offset", "rate", "sink", "spec", "stack", "timer_at", "timer_fires",
                 "timer_local", "txq", "writer")

    def __init__(self, index: int, spec: NodeSpec, factory: StackFactory, addressed: bool,
                 offset: float, drift: float) -> None:
        self.index = index
        self.id = spec.id
        self.spec = spec
        self.factory = factory
        self.addressed = addressed
        self.stack: Any = None
        self.iface_names = [name for name, _ in spec.ifaces]
        self.iface_index = {name: i for i, name in enumerate(self.iface_names)}
        self.attach: list[Domain | None] = [None] * len(spec.ifaces)
        self.txq: list[deque[float]] = [deque() for _ in spec.ifaces]
        self.mobile_iface = next((i for i, (_, d) in enumerate(spec.ifaces) if d == CELLS), -1)
        self.mover: Mover | None = None
        self.offset = offset
        self.rate = 1.0 + drift
        self.exact_clock = offset == 0.0 and drift == 0.0
        self.last_local = 0.0
        self.timer_at: float | None = None
        self.timer_local: float | None = None
        self.timer_fires = (0.0, 0)
        self.generation = 0
        self.writer: TraceWriter | None = None
        self.sink: TraceSink | None = None  # the engine's NodeSink
        self.ctx: NodeContext | None = None

    def local(self, t: float) -> float:
        if self.exact_clock:
            return t
        local = self.offset + t * self.rate
        if local < self.last_local:
            local = self.last_local
        self.last_local = local
        return local
