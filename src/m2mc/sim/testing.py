"""A virtual network driven by hand, for tests and benches: the simulator's own engine
and network model (:mod:`m2mc.sim.engine`, :mod:`m2mc.sim.network`), with nodes
that come and go at any time and stacks built by the caller.

Deterministic from one seed, in virtual time; domains are described with the same
keys as a scenario's ``[domains.NAME]`` tables (docs/simulator.md)::

    net = VirtualNet({"lan": {"delay": {"dist": "uniform", "low": 0.0005, "high": 0.003},
                              "loss": 0.1, "loopback_delay": 1e-4}}, seed=3)
    net.add("a", lambda ctx: MyStack())        # a single-interface stack, booted now
    net.call("a", lambda stack, now: stack.join(now))   # an input; then it is serviced
    net.run(1.0)
    net.partition(["a"], ["b", "c"]); net.heal_partitions()
    net.crash("a"); net.restart("a", lambda ctx: MyStack())
    net.inject(b"...", to="b")                 # an outsider's datagram, 0.1 ms later
    net.outsider("x").send(b"...")             # an outsider node sending over the links
    net.add("c", lambda ctx: CoreStack(core))  # any sans-IO core (m2mc.core.SansIOStack)
    net.hold("c"); net.release("c")            # c's output kept back, then sent (CoreStack)

Stacks are the simulator's (:class:`~m2mc.sim.node.SimNodeStack`, or
:class:`~m2mc.sim.node.AddressedSimStack` with ``addressed=True``). A stack called
directly, outside :meth:`VirtualNet.call`, is not serviced: :meth:`VirtualNet.run`
re-arms every node's timer first, so what it queued leaves at its next deadline.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from m2mc.core import carry_out
from m2mc.kinds import PartitionKind
from m2mc.sim.engine import ArrivalTap, SimError, Simulator
from m2mc.sim.events import Arrival
from m2mc.sim.node import Outgoing
from m2mc.sim.rng import RngStreams
from m2mc.sim.scenario import NodeSpec, PartitionSpec, load_scenario
from m2mc.sim.world import SimNode, StackFactory
from m2mc.trace.schema import NullSink, TraceSink

__all__ = ["Arrival", "CoreStack", "Outsider", "SimError", "VirtualNet"]

DEFAULT_IFACE = "net"
_FOREVER = 1e12  # the chaos phase of a hand-driven run: it never heals by itself


class VirtualNet:
    """One simulated network, driven by hand (see the module docstring)."""

    def __init__(self, domains: Mapping[str, Mapping[str, Any]] | None = None, *,
                 seed: int = 1, run_id: str = "test") -> None:
        domains = {name: dict(spec) for name, spec in (domains or {"lan": {}}).items()}
        # Checked as a scenario's domains are; its one placeholder node is left out.
        scenario = dataclasses.replace(load_scenario({
            "name": "virtual", "run": {"chaos": _FOREVER, "heal": 0.0},
            "stack": {"kind": "flood"}, "trace": {"enabled": False}, "domains": domains,
            "node": [{"id": "placeholder", "domain": next(iter(domains))}]}), nodes=())
        state = Path(tempfile.mkdtemp(prefix="m2mc-vnet-"))
        weakref.finalize(self, shutil.rmtree, state, True)
        self._attach(Simulator(scenario, RngStreams(seed), run_id, None, state))

    @classmethod
    def around(cls, sim: Simulator) -> VirtualNet:
        """Drive a simulator made otherwise (a scenario's, :class:`~m2mc.sim.runner.ScenarioRun`)
        by hand: add outsiders, tap, partition, crash."""
        net = cls.__new__(cls)
        net._attach(sim)
        return net

    def _attach(self, sim: Simulator) -> None:
        self.sim = sim
        self.domains = [d.name for d in sim.network.domains]

    # ---------------------------------------------------------------- time
    @property
    def now(self) -> float:
        return self.sim.now

    def run(self, duration: float) -> None:
        """Run ``duration`` seconds of virtual time."""
        self.run_until(self.sim.now + duration)

    def run_until(self, t: float) -> None:
        for node in self.sim.nodes:
            self.sim.rearm(node)
        self.sim.run(t)

    def at(self, t: float, fn: Callable[[], None]) -> None:
        """Call ``fn()`` at virtual time ``t`` (now, if ``t`` is past)."""
        self.sim.call_at(max(t, self.sim.now), lambda _: fn(), None)

    def set_loss(self, loss: float, domain: str | None = None) -> None:
        """From now on, each copy is lost with probability ``loss`` on ``domain`` (every
        domain if None): a test's network getting worse or better part-way."""
        if not 0.0 <= loss <= 1.0:
            raise ValueError(f"loss must be in [0, 1], not {loss}")
        for d in self.sim.network.domains:
            if domain is None or d.name == domain:
                d.link.loss = loss

    @property
    def counters(self) -> Mapping[str, int]:
        """The engine's counters (docs/simulator.md: deliveries, drops_<reason>, ...)."""
        return self.sim.counters

    # ---------------------------------------------------------------- nodes
    def add(self, node_id: str, factory: StackFactory, *,
            ifaces: str | Mapping[str, str | None] | None = None,
            addressed: bool = False) -> SimNode:
        """Boot ``node_id`` now with the stack ``factory`` builds; a node that is down
        is restarted with it. ``ifaces``: a domain name (one interface, ``net``), or
        interface -> domain (None: out of coverage); by default the first domain."""
        node = self.sim.by_id.get(node_id)
        if node is not None:
            if node.stack is not None:
                raise SimError(f"node {node_id!r} is up already")
            self.sim.restart(node, factory)
            return node
        if ifaces is None:
            ifaces = self.domains[0]
        pairs = ((DEFAULT_IFACE, ifaces),) if isinstance(ifaces, str) else tuple(ifaces.items())
        return self.sim.add_node(NodeSpec(node_id, pairs), factory, addressed=addressed)

    def node(self, node_id: str) -> SimNode:
        return self.sim.by_id[node_id]

    def stack(self, node_id: str) -> Any:
        """The stack ``node_id`` runs now (None while it is down)."""
        return self.sim.by_id[node_id].stack

    def up(self, node_id: str) -> bool:
        node = self.sim.by_id.get(node_id)
        return node is not None and node.stack is not None

    def crash(self, node_id: str) -> bool:
        """Switch ``node_id`` off now: its stack and timers are gone, and what reaches
        it meanwhile is dropped."""
        return self.sim.crash(self.sim.by_id[node_id])

    def restart(self, node_id: str, factory: StackFactory | None = None) -> bool:
        return self.sim.restart(self.sim.by_id[node_id], factory)

    def move(self, node_id: str, iface: str, domain: str | None) -> bool:
        """Attach ``node_id``'s ``iface`` to ``domain`` (None: out of coverage)."""
        return self.sim.move(self.sim.by_id[node_id], iface, domain)

    def call(self, node_id: str, call: Callable[[Any, float], Any]) -> Any:
        """``call(stack, now)`` on ``node_id``'s stack, then send what it queued."""
        return self.sim.input(self.sim.by_id[node_id], call)

    # ---------------------------------------------------------------- faults
    def partition(self, *sides: Sequence[str], domains: Sequence[str] = ()) -> None:
        """Cut the network into ``sides`` (nodes in none form one more side) until
        :meth:`heal_partitions`; replaces the partitions made before."""
        spec = PartitionSpec(PartitionKind.SYMMETRIC, tuple(tuple(s) for s in sides), (), (),
                             1.0, 0.0, self.sim.now, None, tuple(domains))
        self.sim.set_partitions([spec])

    def heal_partitions(self) -> None:
        self.sim.set_partitions([])

    def hold(self, node_id: str) -> None:
        """Keep back what ``node_id`` (a :class:`CoreStack`) sends from now on, as if its
        output were slow for a while: nothing of it is lost, it waits for :meth:`release`."""
        self._core_stack(node_id).held = True

    def release(self, node_id: str) -> None:
        """What ``node_id`` kept back since :meth:`hold` leaves now, in order, before
        anything newer."""
        self._core_stack(node_id).held = False
        self.call(node_id, lambda stack, now: None)

    def _core_stack(self, node_id: str) -> CoreStack:
        stack = self.stack(node_id)
        if not isinstance(stack, CoreStack):
            raise SimError(f"node {node_id!r} does not run a CoreStack")
        return stack

    # ---------------------------------------------------------------- outsiders
    def inject(self, data: bytes, to: str | Sequence[str] | None = None, *,
               src: str = "outsider", iface: str = DEFAULT_IFACE, after: float = 1e-4) -> None:
        """``data`` from the outsider ``src`` reaches ``to`` (a node, some, or every node
        that is up) ``after`` seconds from now, over no link (nothing lost or cut)."""
        sender = self._outsider_node(src)
        if to is None:
            targets = [n for n in self.sim.nodes if n.stack is not None and n is not sender
                       and not isinstance(n.stack, Outsider)]
        else:
            targets = [self.sim.by_id[t] for t in ([to] if isinstance(to, str) else to)]
        for node in targets:
            index = node.iface_index.get(iface, 0)
            self.sim.deliver(node, index, data, sender, self.sim.now + after)

    def outsider(self, node_id: str, ifaces: str | Mapping[str, str | None] | None = None, *,
                 addressed: bool = False) -> Outsider:
        """A node that sends whatever it is given over the links like any other node
        (:meth:`Outsider.send`), and keeps what it hears."""
        node = self.sim.by_id.get(node_id)
        if node is None:
            node = self.add(node_id, lambda ctx: Outsider(self, node_id, addressed),
                            ifaces=ifaces, addressed=addressed)
        if not isinstance(node.stack, Outsider):
            raise SimError(f"node {node_id!r} is not an outsider")
        return node.stack

    def _outsider_node(self, src: str) -> SimNode:
        node = self.sim.by_id.get(src)
        if node is None:  # a sender attached nowhere: it hears nothing
            node = self.add(src, lambda ctx: Outsider(self, src, False),
                            ifaces={DEFAULT_IFACE: None})
        return node

    @contextmanager
    def tapped(self, tap: ArrivalTap) -> Iterator[None]:
        """``tap(arrival)`` sees every datagram a node takes in, inside the block."""
        self.sim.taps.append(tap)
        try:
            yield
        finally:
            self.sim.taps.remove(tap)


class Outsider:
    """The stack of an outsider node: sends what it is told, records what it hears."""

    def __init__(self, net: VirtualNet, node_id: str, addressed: bool) -> None:
        self.net = net
        self.node_id = node_id
        self.addressed = addressed
        self.heard: list[tuple[str, bytes]] = []  # (sender, datagram)
        self._out: list[Any] = []

    def send(self, data: bytes, *, dest: str | None = None,
             iface: str = DEFAULT_IFACE) -> None:
        """Put ``data`` on the network now: broadcast on ``iface``'s domain, or (an
        addressed outsider) to node ``dest`` on it."""
        self._out.append(Outgoing(iface, dest, data) if self.addressed else data)
        self.net.call(self.node_id, lambda stack, now: None)

    # the simulator's stack interface
    def start(self, now: float) -> None:
        return None

    def receive_datagram(self, datagram: bytes, now: float) -> None:
        self.heard.append(("", datagram))

    def receive(self, iface: str, src: str, datagram: bytes, now: float) -> None:
        self.heard.append((src, datagram))

    def on_attach(self, iface: str, domain: str | None, now: float) -> None:
        return None

    def on_timer(self, now: float) -> None:
        return None

    def next_deadline(self) -> float | None:
        return None

    def datagrams_to_send(self, now: float) -> list[Any]:
        out, self._out = self._out, []
        return out


class CoreStack:
    """A single-interface stack around any sans-IO core (:class:`~m2mc.core.SansIOStack`):
    the simulator feeds the core; after each input ``drain(core)`` (if given) takes its
    events, then its datagrams leave, each shown to ``on_send`` (if given) first. A core
    with ``take_save`` has its saves carried out as every driver does (m2mc.core): the
    store's ``commit`` (None: no store), then ``trace``, before its datagrams leave.
    While ``held`` (:meth:`VirtualNet.hold`) its datagrams are kept back instead, and
    leave first once it is not."""

    def __init__(self, core: Any, *, drain: Callable[[Any], None] | None = None,
                 on_send: Callable[[bytes], None] | None = None,
                 commit: Callable[[Any], None] | None = None,
                 trace: TraceSink | None = None) -> None:
        self.core = core
        self.drain = drain
        self.on_send = on_send
        self.commit = commit
        self.trace: TraceSink = NullSink() if trace is None else trace
        self.held = False
        self._kept: list[bytes] = []

    def start(self, now: float) -> None:
        start = getattr(self.core, "start", None)
        if start is not None:
            start(now)

    def receive_datagram(self, datagram: bytes, now: float) -> None:
        self.core.receive_datagram(datagram, now)

    def on_timer(self, now: float) -> None:
        self.core.on_timer(now)

    def next_deadline(self) -> float | None:
        deadline: float | None = self.core.next_deadline()
        return deadline

    def datagrams_to_send(self, now: float) -> list[bytes]:
        if self.drain is not None:
            self.drain(self.core)
        out: list[bytes] = self.core.datagrams_to_send(now)
        take_save = getattr(self.core, "take_save", None)
        if take_save is not None:
            carry_out(take_save(now), self.commit, self.trace)
        if self.held:
            self._kept += out
            return []
        if self._kept:
            out, self._kept = self._kept + out, []
        if self.on_send is not None:
            for datagram in out:
                self.on_send(datagram)
        return out
