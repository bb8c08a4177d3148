"""The discrete-event simulator: virtual time, nodes running real sans-IO stacks.

One heap of typed events (:mod:`m2mc.sim.events`), ordered by ``(t, seq)``; ``seq``
(a global counter) breaks ties, so events at the same virtual time run in the order
they were scheduled and a run is a pure function of scenario and seed. Kinds: a
datagram arriving (:class:`~m2mc.sim.events.Arrival`, see :mod:`m2mc.sim.network`),
a node's timer (:class:`~m2mc.sim.events.Timer`), and a plain call
(:class:`~m2mc.sim.events.Call`: faults, workload, mobility, phase changes).

After every input to a node (datagram, timer, start, application call) the
simulator *services* it: transmits what ``datagrams_to_send`` returns and
re-arms its timer from ``next_deadline``. Nodes see their own clock,
``offset + t * (1 + drift)``; the trace is written in true virtual time.

Besides the scenario's own nodes, faults and phases, a simulator can be driven by
hand (:mod:`m2mc.sim.testing` does): :meth:`Simulator.add_node` adds a node with any
stack at any time, :meth:`Simulator.crash` / :meth:`Simulator.restart`,
:meth:`Simulator.move`, :meth:`Simulator.set_partitions`, :meth:`Simulator.input`
(call a stack, then service it), :meth:`Simulator.deliver` (a datagram that arrives
without crossing a link) and ``taps`` (functions that see every arrival).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from heapq import heappop, heappush
from itertools import count
from pathlib import Path
from typing import Any, cast

from m2mc.kinds import MobilityModel, Order
from m2mc.sim.events import Arrival, Call, Event, Timer
from m2mc.sim.faults import build_cuts
from m2mc.sim.mobility import Mover, covering_cell, nearest_cell
from m2mc.sim.network import Network
from m2mc.sim.node import GroupSpec, NodeContext, get_stack
from m2mc.sim.rng import RngStreams
from m2mc.sim.scenario import CELLS, CellSpec, CrashSpec, NodeSpec, PartitionSpec, Scenario
from m2mc.sim.world import Domain, LinkRuntime, SimNode, StackFactory
from m2mc.trace.schema import TraceEvent, detail_json
from m2mc.trace.writer import TraceDirectory, TraceWriter, event_row, safe_file_stem

ArrivalTap = Callable[[Arrival], None]
MAX_SAME_TIME_TIMERS = 100_000  # a stack re-arming a past deadline forever is a bug


class SimError(RuntimeError):
    """The simulation cannot go on (a stack misbehaved)."""


class NodeSink:
    """The trace sink a node's stack writes to: virtual ``t``, run and node filled."""

    __slots__ = ("enabled", "node", "run", "sim", "writer")

    def __init__(self, sim: Simulator, writer: TraceWriter | None, run: str, node: str) -> None:
        self.sim = sim
        self.writer = writer
        self.run = run
        self.node = node
        self.enabled = writer is not None and writer.enabled

    def emit(self, event: TraceEvent) -> None:
        if self.writer is not None:
            self.writer.write_row(event_row(event, self.run, self.node, self.sim.now))


class Simulator:
    def __init__(self, scenario: Scenario, streams: RngStreams, run_id: str,
                 traces: TraceDirectory | None, state_dir: Path, *,
                 trace_packets: bool = False) -> None:
        self.scenario = scenario
        self.streams = streams
        self.run_id = run_id
        self.traces = traces
        self.state_dir = state_dir
        self.now = 0.0
        self.heap: list[Event] = []
        self.seq = count()
        self.counters: dict[str, int] = dict.fromkeys(
            ("events", "deliveries", "loopbacks", "timers", "drops", "duplicated", "reordered",
             "crashes", "restarts", "attach_changes", "partitions", "app_sends",
             "app_refused"), 0)
        self.tracing = traces is not None and traces.enabled
        self.trace_packets = trace_packets and self.tracing
        # Functions that see every datagram a node takes in, after its stack did.
        self.taps: list[ArrivalTap] = [self._trace_packet_in] if self.trace_packets else []
        self._drop_details: dict[tuple[str, str], str] = {}
        self.network = Network(scenario.domains, streams.get("network"), self.heap, self.seq,
                               self.counters, self._on_drop,
                               self._on_packet_out if self.trace_packets else None)
        self._clock_rng = streams.get("clock")
        self._mobility_rng = streams.get("mobility")
        self.nodes: list[SimNode] = []
        self.by_id: dict[str, SimNode] = {}
        self.index: dict[str, int] = {}
        groups_of: dict[str, list[GroupSpec]] = {}
        discover_of: dict[str, list[GroupSpec]] = {}
        for g in scenario.groups:
            for member in g.members:
                if g.creator is None:
                    groups_of.setdefault(member, []).append(g.group)
                elif member != g.creator:  # joins once it discovers the group
                    discover_of.setdefault(member, []).append(g.group)
        entry = get_stack(scenario.stack_kind)
        for spec in scenario.nodes:
            self._make_node(spec, entry.factory, entry.addressed,
                            tuple(groups_of.get(spec.id, ())), tuple(discover_of.get(spec.id, ())))
        for node in self.nodes:
            self._attach_ifaces(node, 0.0)
        for override in scenario.links:
            dom = self.network.by_name[override.domain]
            key = (self.index[override.src], self.index[override.dst])
            dom.overrides[key] = LinkRuntime(override.link, self.network.rng)
        self._active: list[PartitionSpec] = []
        self._pending_restart: dict[int, float] = {}
        self.healed = False

    # --------------------------------------------------------------- set-up
    def _make_node(self, spec: NodeSpec, factory: StackFactory, addressed: bool,
                   groups: tuple[GroupSpec, ...], discover: tuple[GroupSpec, ...]) -> SimNode:
        if spec.id in self.by_id:
            raise SimError(f"node {spec.id!r} exists already")
        offset = self._clock_rng.uniform(*spec.clock_offset)
        drift = self._clock_rng.uniform(*spec.clock_drift)
        node = SimNode(len(self.nodes), spec, factory, addressed, offset, drift)
        if self.traces is not None:
            node.writer = self.traces.writer(spec.id)
        node.sink = NodeSink(self, node.writer if self.tracing else None, self.run_id, spec.id)
        durable = self.state_dir / safe_file_stem(spec.id)
        durable.mkdir(parents=True, exist_ok=True)
        node.ctx = NodeContext(
            node_id=spec.id, rng=self.streams.get(f"node:{spec.id}"), trace=node.sink,
            run_id=self.run_id, durable_dir=durable, groups=groups,
            params=self.scenario.stack, ifaces=None, discover=discover)
        if node.mobile_iface >= 0:
            node.mover = Mover(spec.mobility, spec.position, self.scenario.area,
                               random.Random(self._mobility_rng.getrandbits(64)))
        self.nodes.append(node)
        self.by_id[spec.id] = node
        self.index[spec.id] = node.index
        return node

    def _attach_ifaces(self, node: SimNode, t: float) -> None:
        for i, (_, dom_name) in enumerate(node.spec.ifaces):
            if dom_name == CELLS:
                assert node.mover is not None
                x, y = node.mover.position(t)
                cell = covering_cell(self.scenario.cells, x, y)
                domain = self.network.by_name[cell.domain] if cell else None
            else:
                domain = self.network.by_name[dom_name] if dom_name else None
            self.network.attach(node, i, domain)

    def add_node(self, spec: NodeSpec, factory: StackFactory, *, addressed: bool = False,
                 groups: tuple[GroupSpec, ...] = (), boot: bool = True) -> SimNode:
        """A node that joins the run now, whose stacks ``factory`` builds (at boot and at
        every restart); booted at once unless ``boot`` is false."""
        node = self._make_node(spec, factory, addressed, groups, ())
        self._attach_ifaces(node, self.now)
        if self._active:
            self._rebuild_cuts()
        if boot:
            self._boot(node, self.now)
        return node

    def start(self) -> None:
        """Boot every node at t=0 and schedule the scenario's faults and phases."""
        sc = self.scenario
        for node in self.nodes:
            self._boot(node, 0.0)
        for p in sc.partitions:
            self.call_at(p.at, self._partition_on, p)
            if p.until is not None:
                self.call_at(p.until, self._partition_off, p)
        for c in sc.crashes:
            self.call_at(c.at, self._crash, c)
        if any(n.mover is not None and n.spec.mobility.model != MobilityModel.STATIC
               for n in self.nodes):
            self.call_at(sc.mobility_tick, self._mobility_tick, None)
        self.call_at(sc.chaos, self._heal, None)

    def call_at(self, t: float, fn: Callable[[Any], None], arg: Any) -> None:
        heappush(self.heap, Call(t, next(self.seq), fn, arg))

    # ------------------------------------------------------------------ loop
    def run(self, until: float) -> None:
        heap = self.heap
        deliveries = loopbacks = events = timers = 0
        taps = self.taps
        service = self._service
        try:
            while heap and heap[0].t <= until:
                ev = heappop(heap)
                t = ev.t
                self.now = t
                events += 1
                if type(ev) is Arrival:
                    node = ev.node
                    stack = node.stack
                    if stack is None:
                        self._on_drop(node, ev.src, "crashed", len(ev.data), ev.domain)
                        continue
                    if node.attach[ev.iface] is not ev.domain:
                        self._on_drop(node, ev.src, "no_coverage", len(ev.data), ev.domain)
                        continue
                    local = t if node.exact_clock else node.local(t)
                    if node.addressed:
                        stack.receive(node.iface_names[ev.iface], ev.src.id, ev.data, local)
                    else:
                        stack.receive_datagram(ev.data, local)
                    if ev.src is node:
                        loopbacks += 1
                    else:
                        deliveries += 1
                    if taps:
                        for tap in taps:
                            tap(ev)
                    service(node, t, local)
                elif type(ev) is Timer:
                    node = ev.node
                    if (node.generation != ev.generation or node.timer_local != ev.deadline
                            or node.timer_at != t or node.stack is None):
                        continue  # re-armed, or the node crashed since
                    node.timer_local = node.timer_at = None
                    local = t if node.exact_clock else node.local(t)
                    if local < ev.deadline:
                        local = ev.deadline  # float rounding of the clock conversion
                    self._guard_timer(node, t)
                    timers += 1
                    node.stack.on_timer(local)
                    service(node, t, local)
                else:
                    call = cast(Call, ev)
                    call.fn(call.arg)
        finally:
            c = self.counters
            c["deliveries"] += deliveries
            c["loopbacks"] += loopbacks
            c["events"] += events
            c["timers"] += timers
        self.now = max(self.now, until)

    def _guard_timer(self, node: SimNode, t: float) -> None:
        last_t, fires = node.timer_fires
        fires = fires + 1 if last_t == t else 1
        node.timer_fires = (t, fires)
        if fires > MAX_SAME_TIME_TIMERS:
            raise SimError(f"node {node.id}: its stack asks for a timer at t={t} again and "
                           "again without making progress")

    def _service(self, node: SimNode, t: float, local: float) -> None:
        stack = node.stack
        if stack is None:
            return
        out = stack.datagrams_to_send(local)
        if node.stack is not stack:
            return  # the node went down while it drained (a test's crash point)
        if out:
            transmit = self.network.transmit
            if node.addressed:
                for o in out:
                    index = node.iface_index.get(o.iface)
                    if index is None:
                        raise SimError(f"node {node.id}: no interface {o.iface!r}")
                    dest_node = self.by_id.get(o.dest) if o.dest is not None else None
                    transmit(node, index, o.dest, o.data, t, dest_node)
            else:
                for datagram in out:
                    transmit(node, 0, None, datagram, t)
        deadline = stack.next_deadline()
        if deadline is None:
            node.timer_local = node.timer_at = None
            return
        if deadline == node.timer_local:
            return
        tv = deadline if node.exact_clock else (deadline - node.offset) / node.rate
        if tv < t:
            tv = t
        node.timer_local = deadline
        node.timer_at = tv
        heappush(self.heap, Timer(tv, next(self.seq), node, node.generation, deadline))

    def rearm(self, node: SimNode) -> None:
        """Arm ``node``'s timer from its stack's ``next_deadline`` again, sending nothing:
        for a stack that was called directly, outside :meth:`input`."""
        stack = node.stack
        if stack is None:
            return
        deadline = stack.next_deadline()
        if deadline is None:
            node.timer_local = node.timer_at = None
        elif deadline != node.timer_local:
            tv = deadline if node.exact_clock else (deadline - node.offset) / node.rate
            node.timer_local = deadline
            node.timer_at = tv = max(tv, self.now)
            heappush(self.heap, Timer(tv, next(self.seq), node, node.generation, deadline))

    # ------------------------------------------------ application and nodes
    def input(self, node: SimNode, call: Callable[[Any, float], Any]) -> Any:
        """``call(stack, local now)`` on ``node``'s stack, then service it (send what it
        queued, re-arm its timer); what ``call`` returned, or None if the node is down."""
        if node.stack is None:
            return None
        local = node.local(self.now)
        result = call(node.stack, local)
        self._service(node, self.now, local)
        return result

    def app_send(self, node: SimNode, group: str, payload: bytes,
                 reply_to: str | None) -> str | None:
        if node.stack is None:
            return None
        mid: str | None = self.input(
            node, lambda stack, now: stack.app_send(group, payload, reply_to, now))
        self.counters["app_sends" if mid is not None else "app_refused"] += 1
        return mid

    def app_create(self, node: SimNode, group: str, order: Order) -> bool:
        """The application on ``node`` creates ``group`` (a ``create`` in [[groups]])."""
        if node.stack is None:
            return False
        self.input(node, lambda stack, now: stack.app_create(group, order, now))
        return True

    def app_membership(self, node: SimNode, group: str, join: bool) -> bool:
        if node.stack is None:
            return False
        if join:
            self.input(node, lambda stack, now: stack.app_join(group, now))
        else:
            self.input(node, lambda stack, now: stack.app_leave(group, now))
        return True

    def app_admin(self, node: SimNode, action: str, target: str) -> bool:
        """An operator's request (retire, readmit) to a node whose stack takes them."""
        if getattr(node.stack, "app_admin", None) is None:
            return False
        self.input(node, lambda stack, now: stack.app_admin(action, target, now))
        return True

    def deliver(self, node: SimNode, iface: int, data: bytes, src: SimNode, at: float) -> None:
        """``data`` from ``src`` reaches ``node``'s interface at ``at``, crossing no link
        (no loss, no partition); dropped like any arrival if the node is down or the
        interface has left its domain by then."""
        domain = node.attach[iface]
        if domain is None:
            self._on_drop(node, src, "no_coverage", len(data), _NOWHERE)
            return
        heappush(self.heap, Arrival(at, next(self.seq), node, iface, data, src, domain))

    def _boot(self, node: SimNode, t: float) -> None:
        assert node.ctx is not None
        if node.addressed:  # where each interface is now (a restart may find it moved)
            node.ctx.ifaces = {name: (d.name if d else None)
                               for name, d in zip(node.iface_names, node.attach, strict=True)}
        node.stack = stack = node.factory(node.ctx)
        node.timer_local = node.timer_at = None
        local = node.local(t)
        stack.start(local)
        if node.addressed:
            for name, dom in zip(node.iface_names, node.attach, strict=True):
                stack.on_attach(name, dom.name if dom else None, local)
        self._service(node, t, local)

    def crash(self, node: SimNode, restart_at: float | None = None) -> bool:
        """Stop ``node`` now (its stack, timers and transmit queue are gone); restart it
        at ``restart_at`` if given. False if it was down already."""
        if node.stack is None:
            return False
        node.stack = None
        node.generation += 1
        node.timer_local = node.timer_at = None
        for queue in node.txq:
            queue.clear()
        self.counters["crashes"] += 1
        self._row(node, "crash", detail=detail_json(restart=restart_at))
        if restart_at is not None:
            self._pending_restart[node.index] = restart_at
            self.call_at(restart_at, self._restart, node)
        return True

    def restart(self, node: SimNode, factory: StackFactory | None = None) -> bool:
        """Boot a crashed ``node`` again now (with a new ``factory`` if given)."""
        if node.stack is not None:
            return False
        self._pending_restart.pop(node.index, None)
        if factory is not None:
            node.factory = factory
        self.counters["restarts"] += 1
        self._row(node, "restart")
        self._boot(node, self.now)
        return True

    def _crash(self, spec: CrashSpec) -> None:
        if not self.healed:
            self.crash(self.by_id[spec.node], spec.restart)

    def _restart(self, node: SimNode) -> None:
        if node.index in self._pending_restart:
            self.restart(node)

    # ------------------------------------------------------------- faults
    def set_partitions(self, specs: list[PartitionSpec]) -> None:
        """Exactly these partitions are in force from now on."""
        self._active = list(specs)
        self._rebuild_cuts()

    def _partition_on(self, spec: PartitionSpec) -> None:
        if self.healed:
            return
        self._active.append(spec)
        self.counters["partitions"] += 1
        self._rebuild_cuts()

    def _partition_off(self, spec: PartitionSpec) -> None:
        if spec in self._active:
            self._active.remove(spec)
            self._rebuild_cuts()

    def _rebuild_cuts(self) -> None:
        domains = {d.name: d.index for d in self.network.domains}
        table = build_cuts(self._active, self.index, len(self.nodes), domains)
        self.network.set_cuts(len(self.nodes), table)

    def _mobility_tick(self, _: Any) -> None:
        if self.healed:
            return
        for node in self.nodes:
            if node.mover is not None:
                x, y = node.mover.position(self.now)
                self._reattach(node, covering_cell(self.scenario.cells, x, y))
        self.call_at(self.now + self.scenario.mobility_tick, self._mobility_tick, None)

    def move(self, node: SimNode, iface: str, domain: str | None) -> bool:
        """Attach ``node``'s interface ``iface`` to ``domain`` (None: out of coverage), and
        tell its stack as mobility would. True if anything changed."""
        index = node.iface_index[iface]
        return self._attach(node, index, self.network.by_name[domain] if domain else None)

    def _reattach(self, node: SimNode, cell: CellSpec | None) -> None:
        domain = self.network.by_name[cell.domain] if cell is not None else None
        self._attach(node, node.mobile_iface, domain)

    def _attach(self, node: SimNode, index: int, domain: Domain | None) -> bool:
        regained = node.attach[index] is None and domain is not None
        if not self.network.attach(node, index, domain):
            return False
        self.counters["attach_changes"] += 1
        if domain is None:
            self.counters["coverage_lost"] = self.counters.get("coverage_lost", 0) + 1
        if node.stack is not None and node.addressed:
            name = node.iface_names[index]
            self.input(node, lambda stack, now: stack.on_attach(
                name, domain.name if domain else None, now))
        elif node.stack is not None and regained:
            # Back in coverage: what a real node's interface watcher reports as its
            # interface coming back (docs/group.md section 4), for a stack that listens.
            changed = getattr(node.stack, "network_changed", None)
            if changed is not None:
                self.counters["coverage_regained"] = self.counters.get("coverage_regained",
                                                                        0) + 1
                self.input(node, lambda stack, now: stack.network_changed(now))
        return True

    def _heal(self, _: Any) -> None:
        """End of the chaos phase: every fault is lifted for the recovery window."""
        self.healed = True
        self._active.clear()
        self.network.heal()
        for index in sorted(self._pending_restart):
            self.call_at(self.now, self._restart, self.nodes[index])
        cells = self.scenario.cells
        for node in self.nodes:
            if node.mover is not None and cells and node.attach[node.mobile_iface] is None:
                x, y = node.mover.position(self.now)
                cell = nearest_cell(cells, x, y)
                node.mover.place(cell.x, cell.y)
                self._reattach(node, cell)

    # --------------------------------------------------------------- trace
    def _row(self, node: SimNode, event: str, *, peer: str | None = None,
             nbytes: int | None = None, detail: str | None = None) -> None:
        if self.tracing and node.writer is not None:
            node.writer.write_row((self.run_id, node.id, self.now, event, None, None, None, None,
                                   None, nbytes, peer, detail))

    def _on_drop(self, node: SimNode, peer: SimNode | None, reason: str, nbytes: int,
                 domain: Any) -> None:
        c = self.counters
        c["drops"] += 1
        key = "drops_" + reason
        c[key] = c.get(key, 0) + 1
        if self.tracing:
            detail = self._drop_details.get((domain.name, reason))
            if detail is None:
                detail = detail_json(domain=domain.name or None, reason=reason)
                self._drop_details[(domain.name, reason)] = detail
            self._row(node, "drop", peer=peer.id if peer is not None else None, nbytes=nbytes,
                      detail=detail)

    def _on_packet_out(self, node: SimNode, iface: int, dest: str | None, data: bytes,
                       domain: Domain) -> None:
        self._packet_row(node, "packet_out", dest, data, domain, iface)

    def _trace_packet_in(self, ev: Arrival) -> None:
        self._packet_row(ev.node, "packet_in", ev.src.id, ev.data, ev.domain, ev.iface)

    def _packet_row(self, node: SimNode, event: str, peer: str | None, data: bytes,
                    domain: Domain, iface: int) -> None:
        self._row(node, event, peer=peer, nbytes=len(data),
                  detail=detail_json(domain=domain.name, iface=node.iface_names[iface]))

    def summary(self) -> Mapping[str, int]:
        return dict(sorted(self.counters.items()))


class _Nowhere:
    name = ""


_NOWHERE: Any = _Nowhere()
